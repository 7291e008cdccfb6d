/* SPDX-License-Identifier: Apache-2.0 */
/* Standard probe endpoints on a router: GET /healthz, GET /readyz, GET /metrics. */
#pragma once

#include <stdbool.h>

#include "common/buf.h"
#include "http/server.h"

/** Readiness: returns true when ready; otherwise may write a short reason to reason. */
typedef bool http_ready_fn(void *ctx, struct buf *reason);
/** Renders Prometheus text exposition into out (bounded); returns 0 or negative. */
typedef int http_metrics_render_fn(void *ctx, struct buf *out);

struct http_probes_opts {
    http_ready_fn *ready; /* NULL: always ready */
    void *ready_ctx;
    http_metrics_render_fn *render; /* NULL: no /metrics route */
    void *render_ctx;
};

/** Adds GET /healthz (200 "ok"), GET /readyz (200 "ok", or 503 with the reason) and, with
 * a render callback, GET /metrics (text/plain; version=0.0.4). opts is borrowed and must
 * outlive the router. Returns 0 or a negative errno from http_router_add. */
int http_probes_register(struct http_router *r, const struct http_probes_opts *opts);

/** The Content-Type of the Prometheus text format. */
#define HTTP_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
