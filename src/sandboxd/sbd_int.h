/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by sandboxd's files: the daemon object and route registration. */
#pragma once

#include <jansson.h>

#include "http/server.h"
#include "sandboxd/path.h"
#include "sandboxd/sandboxd.h"

struct sbd_procs;
struct sbd_grpc;
struct sbd_bgs;
struct wstream;

/** A registered route: authentication, then fn(req, d). */
struct sbd;
/** Whether a route's request may send its body (read, or buffered before the handler
 * runs): a public route's own credential, say, or an announced length within a limit.
 * When it says no, the handler runs at the head and must answer without the body. */
typedef bool sbd_body_ok_fn(struct http_req *req, struct sbd *d);

struct sbd_route {
    struct sbd *d;
    http_handler_fn *fn;
    bool public_;            /* no token needed (probes) */
    sbd_body_ok_fn *body_ok; /* public: NULL = a body is never read; behind the token:
                              * NULL = always read once the token checks out. A body
                              * not read: answered at the head, the connection closed
                              * after it */
};

#define SBD_MAX_ROUTES 64

struct sbd {
    uv_loop_t *loop;
    struct sbd_config cfg; /* strings below are owned copies */
    char *host, *root_path, *legacy_root_path, *token, *metadata_prefix;
    struct sbd_root *root, *legacy_root;
    struct http_router *router, *legacy_router;
    struct http_server *server, *legacy;
    struct sbd_grpc *grpc; /* gRPC ProcessService (grpc_proc.c), or NULL */
    struct sbd_procs *procs;
    struct sbd_bgs *bgs;               /* background processes (api_bg.c) */
    struct sbd_config_env *config_env; /* late-bound env (config_env.c) */
    struct sbd_kernels *kernels;       /* code contexts (kernel.c) */
    struct wstream *watches;           /* open watch streams (watch.c), a list */
    json_t *metadata;
    usec_t started;
    usec_t last_activity; /* monotonic time of the last API request (activity.c) */
    bool shutting_down;
    unsigned websockets; /* open process WebSockets (ws_proc.c), at most cfg.max_websockets */
    struct sbd_route routes[SBD_MAX_ROUTES];
    size_t nroutes;
    /* shutdown */
    int servers_open;
    void (*done)(void *ctx);
    void *done_ctx;
    uv_timer_t kill_timer;
    usec_t grace;
};

/** Adds a route whose handler gets d as ctx, behind the bearer-token check unless
 * public_. Returns 0 or negative (http_router_add). */
int sbd__route(struct sbd *d, struct http_router *r, const char *method, const char *path,
               unsigned flags, http_handler_fn *fn, bool public_);
/** A public route whose requests may send a body when body_ok says so (before any of it
 * is read); otherwise the handler answers at the head, as for any public route. */
int sbd__route_public_body(struct sbd *d, struct http_router *r, const char *method,
                           const char *path, unsigned flags, http_handler_fn *fn,
                           sbd_body_ok_fn *body_ok);
/** A route behind the token whose requests may send a body when body_ok says so (before
 * any of it is read); otherwise the handler answers at the head. */
int sbd__route_body(struct sbd *d, struct http_router *r, const char *method, const char *path,
                    unsigned flags, http_handler_fn *fn, sbd_body_ok_fn *body_ok);
/** Decodes the rest of the request path (after the route prefix) and cleans it against
 * root into *ret (new). Responds with the error itself and returns negative on failure. */
int sbd__req_path(struct http_req *req, const struct sbd_root *root, char **ret);

/* files.c */
int sbd__files_register(struct sbd *d);
/* api_proc.c */
int sbd__procs_register(struct sbd *d);
/* legacy.c */
int sbd__legacy_register(struct sbd *d);
/** http_error_body_fn of the legacy server: FastAPI's {"detail": "..."}. */
int sbd__legacy_error_body(void *ctx, int status, const char *detail, struct buf *out,
                           const char **ret_content_type);
