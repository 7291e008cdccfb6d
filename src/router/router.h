/* SPDX-License-Identifier: Apache-2.0 */
/* sandbox-router as a whole: the Sandbox informer (own thread), the review workers, the
 * proxy server and the probe/metrics server on one libuv loop, and graceful shutdown. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/clock.h"

struct http_server;
struct metrics_auth;
struct kube_client;

struct router_opts {
    struct kube_client *client;    /* borrowed; must outlive the router */
    const char *host;              /* proxy listener address; NULL: "0.0.0.0" */
    uint16_t port;                 /* 0: ephemeral (see router_port) */
    const char *probe_host;        /* NULL: same as host */
    uint16_t probe_port;           /* /healthz /readyz /metrics; 0: ephemeral */
    bool auth;                     /* TokenReview + SubjectAccessReview */
    const char *authz_verb;        /* NULL: "get" */
    const char *authz_subresource; /* NULL: none */
    const char *const *audiences;  /* NULL-terminated or NULL */
    usec_t auth_ttl;
    const char *ns;        /* watch one namespace; NULL: all */
    bool allow_loopback;   /* unsafe: tests only */
    bool trust_loopback;   /* loopback peers without a token skip the review (proxy.h) */
    bool client_cert_auth; /* a client certificate's identity authorizes (proxy.h) */
    usec_t connect_timeout, idle_timeout, proxy_timeout, tunnel_idle, header_timeout;
    usec_t shutdown_grace; /* 0: LIMIT_ROUTER_SHUTDOWN_GRACE */
    size_t max_tunnels;    /* open and upgrading tunnels; 0: LIMIT_ROUTER_TUNNELS */
    usec_t start_hold;     /* a starting Sandbox's requests wait (resume_gate.h); 0:
                              LIMIT_ROUTER_START_HOLD; RESUME_START_OFF: not held */
    bool access_log;
    /* --metrics-secure: /metrics asks for a bearer token that passes a TokenReview and a
     * SubjectAccessReview (tls/metrics_auth.h); borrowed, must outlive the router. */
    struct metrics_auth *metrics_auth;
};

struct router;

/** Starts everything on a new thread. Returns 0 and *ret, or a negative errno. */
int router_start(const struct router_opts *opts, struct router **ret);
uint16_t router_port(const struct router *r);
uint16_t router_probe_port(const struct router *r);
/** The proxy server (borrowed; for the HTTPS front, see tls_front.h). */
struct http_server *router_http_server(struct router *r);
/** The probe/metrics server (borrowed; for the secure metrics' TLS front). */
struct http_server *router_probe_server(struct router *r);
/** Waits until the Sandbox cache synced (or timeout). Returns 0 or -ETIMEDOUT. */
int router_wait_ready(struct router *r, usec_t timeout);
/** Graceful stop: readiness fails, the listener closes, requests in flight and tunnels
 * get the grace period, then everything is closed, joined and freed. NULL is fine. */
void router_stop(struct router *r);
/** Starts the graceful stop without waiting (any thread; e.g. from a signal). */
void router_request_stop(struct router *r);
/** Waits until the router's loop ended (after router_request_stop) and frees it. */
void router_join(struct router *r);
