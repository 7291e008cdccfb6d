/* SPDX-License-Identifier: Apache-2.0 */
/* The reverse proxy: routes a request (route.h), authorizes it (authz.h), resolves the
 * Sandbox from the informer's store, and forwards it over a pooled upstream connection,
 * streaming bodies both ways with back-pressure, or tunnels it after a 101. Everything
 * runs on one libuv loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "common/clock.h"
#include "http/server.h"

struct activity_track;
struct authz;
struct resume_gate;
struct kube_store;
struct metrics_registry;
struct proxy;

struct proxy_opts {
    struct kube_store *store;  /* borrowed: Sandboxes ("ns/name" keys) */
    bool (*synced)(void *ctx); /* has the store synced? NULL: always */
    void *synced_ctx;
    struct authz *authz;              /* borrowed; NULL: no authentication (--auth=none) */
    struct metrics_registry *metrics; /* borrowed; families are registered on it */
    bool allow_loopback;              /* unsafe, tests only: allow 127/8 and ::1 pod IPs */
    /* A request from a loopback peer without an Authorization header is let through
     * unreviewed (--trust-loopback): in a pod, only the kubelet's port-forward reaches
     * the router's loopback, and that takes pods/portforward on the router pod. */
    bool trust_loopback;
    /* A request without a bearer token whose connection carries a client certificate's
     * identity (http_req_peer_info; tls/tls_identity.h) is authorized as that user: a
     * SubjectAccessReview without a TokenReview (--client-cert-auth). A bearer token
     * wins over the certificate. */
    bool client_cert_auth;
    usec_t connect_timeout; /* 0: LIMIT_ROUTER_CONNECT_TIMEOUT */
    usec_t idle_timeout;    /* 0: LIMIT_ROUTER_IDLE_TIMEOUT */
    usec_t proxy_timeout;   /* 0: LIMIT_ROUTER_PROXY_TIMEOUT; caps X-Sandbox-Timeout */
    usec_t tunnel_idle;     /* 0: LIMIT_ROUTER_TUNNEL_IDLE */
    /* Upgraded tunnels open or being set up at once (each is two descriptors the HTTP
     * server no longer counts); 0: LIMIT_ROUTER_TUNNELS. */
    size_t max_tunnels;
    usec_t pool_idle;     /* 0: LIMIT_ROUTER_POOL_IDLE */
    size_t pool_per_host; /* 0: LIMIT_ROUTER_POOL_PER_HOST */
    /* Response bytes queued to all clients of the server past which a download whose
     * client holds more than LIMIT_ROUTER_QUEUED_SHARE stops reading its sandbox, until
     * all hold under three quarters of it or its client half its share (clients that do
     * not read must not grow the router past its memory, nor stop those that do); 0:
     * LIMIT_ROUTER_QUEUED. */
    size_t queued_budget;
    bool access_log; /* one logfmt line per proxied request */
    /* Idle auto-suspend (borrowed; NULL: off): hold and resume suspended Sandboxes, and
     * report per-Sandbox activity. */
    struct resume_gate *resume;
    struct activity_track *activity;
};

/** Creates the proxy on loop (borrowed). Returns a new object (free with proxy_free). */
struct proxy *proxy_new(uv_loop_t *loop, const struct proxy_opts *opts);
/** Adds the proxy's routes to r: GET /healthz and everything else (prefix "/"). */
int proxy_register(struct proxy *p, struct http_router *r);
/** Graceful shutdown of what the HTTP server does not track: idle pooled connections
 * close now; tunnels may run until grace, then close. done runs once all are gone. */
void proxy_shutdown(struct proxy *p, usec_t grace, void (*done)(void *ctx), void *ctx);
/** Frees the proxy after proxy_shutdown completed (NULL is fine). */
void proxy_free(struct proxy *p);
/** Requests in flight and open tunnels (for tests and metrics). */
size_t proxy_inflight(const struct proxy *p);
size_t proxy_tunnels(const struct proxy *p);
