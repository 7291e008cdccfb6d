/* SPDX-License-Identifier: Apache-2.0 */
/* Authentication and authorization of /metrics scrapes for --metrics-secure, as
 * kubebuilder's secure metrics do: the bearer token is checked with a TokenReview, the
 * user it names with a SubjectAccessReview for the non-resource URL /metrics, verb get
 * (grant it with a ClusterRole rule nonResourceURLs: ["/metrics"], verbs: ["get"]).
 * Verdicts are cached per token (by SHA-256) for LIMIT_METRICS_AUTH_TTL_S seconds; the
 * reviews run on a thread of their own (at most LIMIT_METRICS_AUTH_INFLIGHT at once), so
 * the server's loop never waits for the API server. */
#pragma once

#include <stddef.h>

struct buf;
struct http_req;
struct kube_client;
struct metrics_auth;

/** The verdict on a request: 200 (allowed), 401 (no or bad token), 403 (not allowed), 503
 * (too many reviews at once) or 500 (a review failed). Called on the loop thread. */
typedef void metrics_auth_done_fn(struct http_req *req, int status, void *ctx);

/** Returns a new checker using client (borrowed; must outlive it). */
struct metrics_auth *metrics_auth_new(struct kube_client *client);
/** Stops the reviews: checks from now on are answered 503 at once, and the call waits
 * for the reviews in progress to post their verdicts (the server's loop must still run
 * and deliver them). Call before the server stops: a review posting to a freed server
 * would touch freed memory. NULL and a second call are fine. */
void metrics_auth_stop(struct metrics_auth *a);
/** Stops the reviews as metrics_auth_stop and frees the checker (NULL is fine). No check
 * may come after: stop the server first. */
void metrics_auth_free(struct metrics_auth *a);
/** Checks req (loop thread): done runs with the verdict, now (cached, no token) or later
 * (after the reviews; req is kept referenced meanwhile). */
void metrics_auth_check(struct metrics_auth *a, struct http_req *req, metrics_auth_done_fn *done,
                        void *ctx);

/** Serves GET /metrics: once metrics_auth_check allows req, render(ctx, body) fills the
 * page (bounded by limit) and it is sent as the Prometheus text format; otherwise the
 * verdict's error (401 with WWW-Authenticate: Bearer). render and ctx must outlive the
 * checker. Returns 0 (the handler's return value). */
typedef int metrics_auth_render_fn(void *ctx, struct buf *out);
int metrics_auth_serve(struct metrics_auth *a, struct http_req *req, metrics_auth_render_fn *render,
                       void *ctx, size_t limit);

/** The token of an "Authorization: Bearer <token>" value (scheme case-insensitive), or
 * an empty slice. Exposed for tests. */
#include "common/limits.h"
#include "common/str.h"
struct str metrics_auth_bearer(struct str authorization);
