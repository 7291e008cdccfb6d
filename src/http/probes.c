/* SPDX-License-Identifier: Apache-2.0 */
/* /healthz, /readyz and /metrics, decoupled from the metrics registry by a callback. */
#include "http/probes.h"

#include "common/limits.h"

#define TEXT "text/plain; charset=utf-8"

static int healthz(struct http_req *req, void *ctx)
{
    (void)ctx;
    return http_respond(req, 200, TEXT, "ok\n", 3);
}

static int readyz(struct http_req *req, void *ctx)
{
    const struct http_probes_opts *o = ctx;
    struct buf reason;
    buf_init(&reason, LIMIT_HTTP_READY_REASON);
    int r;
    if (!o->ready || o->ready(o->ready_ctx, &reason)) {
        r = http_respond(req, 200, TEXT, "ok\n", 3);
    } else {
        if (reason.len == 0)
            (void)buf_puts(&reason, "not ready");
        (void)buf_putc(&reason, '\n');
        r = http_respond(req, 503, TEXT, reason.data, reason.len);
    }
    buf_done(&reason);
    return r;
}

static int metrics(struct http_req *req, void *ctx)
{
    const struct http_probes_opts *o = ctx;
    struct buf out;
    buf_init(&out, LIMIT_HTTP_BODY);
    int r = o->render(o->render_ctx, &out);
    if (r >= 0)
        r = http_respond(req, 200, HTTP_METRICS_CONTENT_TYPE, out.data, out.len);
    else
        r = http_respond_error(req, 500, "rendering metrics failed");
    buf_done(&out);
    return r;
}

int http_probes_register(struct http_router *r, const struct http_probes_opts *opts)
{
    void *ctx = (void *)opts;
    int ret = http_router_add(r, "GET", "/healthz", HTTP_ROUTE_NO_BODY, healthz, NULL);
    if (ret >= 0)
        ret = http_router_add(r, "GET", "/readyz", HTTP_ROUTE_NO_BODY, readyz, ctx);
    if (ret >= 0 && opts->render)
        ret = http_router_add(r, "GET", "/metrics", HTTP_ROUTE_NO_BODY, metrics, ctx);
    return ret;
}
