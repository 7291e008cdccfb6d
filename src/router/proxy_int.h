/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the proxy's files: upstream connections and their pool, the
 * exchange of one proxied request, and tunnels. */
#pragma once

#include "common/buf.h"
#include "common/limits.h"
#include "http/parse.h"
#include "router/proxy.h"
#include "router/route.h"

struct map;
struct metric;
struct px;
struct tunnel;

/* ---- Upstream connections (upconn.c) ------------------------------------------------ */

enum up_owner {
    UP_NONE = 0, /* connecting or idle in the pool */
    UP_PX,
    UP_TUNNEL,
};

struct up_conn {
    uv_tcp_t tcp;
    uv_timer_t timer; /* connect timeout, then pool idle */
    uv_connect_t connect;
    struct proxy *proxy;
    char key[ROUTE_IP_MAX + 8];  /* "ip|port" */
    struct up_conn *prev, *next; /* pool list of its key */
    int handles;
    bool closing, pooled, reused;
    bool shut;     /* our write side is shut (upconn_shutdown): never pooled again */
    bool reading;  /* read callbacks armed (kept on across pool moves: no epoll churn) */
    size_t queued; /* bytes handed to uv_write, not yet written */
    enum up_owner owner_kind;
    void *owner;
};

/** Starts a new connection to ip:port (connect timeout armed); px gets proxy__px_connected
 * or proxy__px_up_error. Returns the connection or NULL (bad address: reported as -EINVAL
 * through *ret_err). */
struct up_conn *upconn_connect(struct proxy *p, const char *ip, uint16_t port, struct px *x,
                               int *ret_err);
/** Takes an idle pooled connection to ip:port, or NULL. */
struct up_conn *upconn_take(struct proxy *p, const char *ip, uint16_t port);
/** Returns a reusable connection to the pool (or closes it when the pool is full). */
void upconn_release(struct up_conn *u);
/** Closes (idempotent); memory goes in the close callbacks. */
void upconn_close(struct up_conn *u);
/** As upconn_close, but with a reset instead of a FIN (queued writes are dropped): the
 * sandbox sees the exchange aborted, never a clean end of what it was sent (a client's
 * cut-off input passed on, http_req_input_cut). */
void upconn_reset(struct up_conn *u);
/** Copies and writes n bytes of parts. Returns 0 or negative (the caller closes). */
int upconn_write(struct up_conn *u, const struct str *parts, size_t n);
/** Shuts the write side once the queued writes are out (the client's EOF passed on); the
 * connection is then closed instead of pooled. Returns 0 or a negative errno. */
int upconn_shutdown(struct up_conn *u);
/** Starts or stops reading. */
int upconn_read(struct up_conn *u, bool on);
/** Closes every pooled connection. */
void upconn_pool_clear(struct proxy *p);

/* ---- The proxy context ----------------------------------------------------------------- */

struct proxy_metrics {
    struct metric *requests, *duration, *inflight, *upstream_errors, *authz, *tunnels, *pool;
    struct metric_series *inflight_now; /* the inflight gauge's only series */
};

/* Series handles of recent (method, code, namespace) label sets, so a finished request
 * updates its two series without building and hashing their keys. */
struct px_series {
    char method[16];
    char ns[ROUTE_NAME_MAX + 1];
    int status;
    struct metric_series *requests, *duration;
};

#define PX_SERIES 8 /* replaced round-robin */

/* The checks of one stored Sandbox that passed (Ready, first pod IP allowed): store
 * objects never change once stored, so the object pointer, kept alive by the reference
 * held here, identifies the snapshot. */
struct px_target {
    json_t *obj; /* a reference, or NULL */
    char ip[ROUTE_IP_MAX];
};

#define PX_TARGETS 64 /* direct-mapped by object address */

struct proxy {
    uv_loop_t *loop;
    struct proxy_opts o;
    struct proxy_metrics m;
    struct map *pool; /* key -> struct up_conn * (head of the idle list) */
    size_t pooled;
    struct tunnel *tunnels;
    size_t ntunnels, inflight;
    size_t nupgrading; /* upgrade requests in flight, each a tunnel to come (its bound) */
    bool shutting_down, own_metrics;
    uint64_t grace_end_ms;
    uv_timer_t shutdown_timer;
    uv_timer_t budget_timer; /* runs while downloads wait for queued_budget */
    int handles;             /* of the two timers, not closed yet (proxy_free) */
    struct px *starved;      /* downloads paused by queued_budget (newest first) */
    void (*shutdown_done)(void *ctx);
    void *shutdown_ctx;
    struct px_target targets[PX_TARGETS];
    struct px_series series[PX_SERIES];
    unsigned series_next;
    char read_buf[64 * 1024]; /* upstream and tunnel reads, one at a time on the loop */
};

/* ---- Exchange (proxy.c, proxy_resp.c) ------------------------------------------------- */

struct px {
    struct proxy *p;
    struct http_req *req;
    struct route rt;
    char ip[ROUTE_IP_MAX];
    char client_ip[ROUTE_IP_MAX];
    char user[LIMIT_TLS_PEER_NAME + 1]; /* the reviewed user (access log) */
    struct up_conn *up;
    uv_timer_t timer;
    usec_t start, last_activity, deadline;
    /* request side */
    bool is_upgrade, req_sent, body_started, body_paused_by_us, body_done, retried;
    bool counts_upgrade; /* counted in the proxy's nupgrading until it finishes */
    bool client_eof;     /* the client half-closed: passed on once the request is sent */
    /* response side */
    struct buf in;          /* upstream bytes not yet processed */
    size_t last_len;        /* parser rescan hint */
    struct http_head *head; /* upstream response head (points into raw) */
    char *raw;              /* copy of the head */
    bool head_done, resp_started, resp_done, blocked, up_eof;
    bool starved; /* blocked by the proxy's queued_budget (on p->starved) */
    struct px *starved_prev, *starved_next;
    bool got_bytes; /* some response byte came (a 1xx too): the request is not retried */
    uint64_t body_left;
    struct http_chunked chunked;
    uint64_t bytes_out;
    int status;               /* for logs and metrics */
    const char *error_reason; /* upstream error class for metrics, or NULL */
    bool finished, authz_pending, authorized;
    bool by_cert; /* authorized by the client certificate's identity, not a token */
    /* idle auto-suspend: the hold while the Sandbox resumes; counted as activity */
    struct resume_waiter *held;
    bool active;
};

void proxy__px_connected(struct px *x, int status);
/** A pooled connection failed before any response byte (an interim 1xx counts: the
 * request was being carried out): a replayable request without a body is tried once
 * more on a new connection (true). A POST is not: the sandbox may have run it already. */
bool proxy__px_retry(struct px *x);
void proxy__px_up_read(struct px *x, ssize_t n, const char *data);
void proxy__px_up_written(struct px *x, int status);
/** Takes x off the downloads waiting for the proxy's queued_budget (if it is on it). */
void proxy__unstarve(struct px *x);
/** Responds with an error (when nothing was sent yet) or cuts the response off. */
void proxy__px_fail(struct px *x, int status, const char *detail, const char *reason);
/** The exchange is over: metrics, log, release the upstream, drop the request. */
void proxy__px_finish(struct px *x);
/** Response side: processes px->in. */
void proxy__resp_process(struct px *x);
void proxy__resp_drain(struct http_req *req, void *ctx);

/* ---- Tunnels (tunnel.c) ----------------------------------------------------------------- */

/** Starts a tunnel for x after its 101 answer (x's request is then finished). Returns 0
 * or negative (x failed). */
int proxy__tunnel_start(struct px *x);
void proxy__tunnel_up_read(struct tunnel *t, ssize_t n, const char *data);
void proxy__tunnel_up_written(struct tunnel *t, int status);
/** Closes every tunnel now. */
void proxy__tunnels_close_all(struct proxy *p);

/** Whether name is a token of the comma-separated list (a Connection field's). */
bool proxy__listed(struct str list, struct str name);
