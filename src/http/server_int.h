/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the server's files (router.c, server.c, conn.c, resp.c). */
#pragma once

#include <pthread.h>

#include "http/parse.h"
#include "http/progress.h"
#include "http/server.h"

struct http_route {
    char *method; /* NULL: any */
    char *path;
    size_t path_len;
    unsigned flags;
    http_handler_fn *fn;
    void *ctx;
};

struct http_router {
    struct http_route *routes;
    size_t n;
};

enum http_conn_state {
    HTTP_CONN_HEAD = 0, /* waiting for (the rest of) a request head */
    HTTP_CONN_BODY,     /* reading a request body */
    HTTP_CONN_WAIT,     /* request read; the handler owns the response */
    HTTP_CONN_LINGER,   /* final response queued; draining input until EOF or timeout */
};

enum http_resp_state {
    HTTP_RESP_NONE = 0,
    HTTP_RESP_STREAMING,
    HTTP_RESP_DONE,
};

struct http_req {
    unsigned refs;
    struct http_conn *conn; /* NULL once finished or aborted */
    struct http_server *server;
    char *raw; /* owned copy of the head; head's slices point into it */
    struct http_head head;
    const struct http_route *route;
    struct str rest;
    bool is_head_method;
    bool aborted;
    bool eof_aborts; /* the client's EOF ends the request (http_req_set_eof_aborts) */
    bool input_cut;  /* aborted after its input was cut off (http_req_input_cut) */
    /* body */
    bool stream_body, body_done, body_paused;
    uint64_t body_left; /* HTTP_BODY_LENGTH */
    struct http_chunked chunked;
    struct buf body; /* buffered body */
    http_body_fn *body_fn;
    void *body_ctx;
    /* response */
    enum http_resp_state resp;
    bool resp_chunked;
    bool resp_sized; /* a streaming response of a known length (not open-ended) */
    bool want_drain;
    struct buf resp_headers;
    http_req_event_fn *abort_fn, *drain_fn, *eof_fn;
    void *abort_ctx, *drain_ctx, *eof_ctx;
};

struct http_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_idle_t defer; /* parses requests pipelined behind a response that completed outside
                        conn_process, on the next loop turn (http__conn_response_done) */
    uv_shutdown_t shutdown;
    struct http_server *server;
    struct http_conn *prev, *next;
    int handles_open;
    enum http_conn_state state;
    struct buf in;
    size_t scanned; /* bytes of in already searched for the end of the head */
    struct http_req *req;
    size_t queued;           /* bytes handed to uv_write and not yet completed */
    struct http_progress wp; /* the client taking bytes: the last completed write, the
                                queue's start, or a change of the socket's queue */
    bool reading, read_eof, closing, keep_alive, in_process, resp_complete, idle_timer;
    bool shut_done;    /* our FIN went out (conn_end's shutdown completed) */
    bool quick_linger; /* conn_end: LIMIT_HTTP_SHUTDOWN_LINGER (linger_time) */
    bool upgrading;    /* http_req_upgrade: no more HTTP reads; the socket is being handed over */
    bool held;         /* pipelined requests wait for the write queue to drain (on_write) */
    char peer[48];     /* client address, looked up once (http_req_peer); "" until then */
    bool secure;       /* adopted from a TLS front (http_server_adopt) */
    char *info;        /* http_adopt_opts.info (owned copy); NULL: none */
    size_t info_len;
    struct http_cut *cut; /* http_adopt_opts.cut (a reference); NULL: none */
};

struct http_post_item {
    http_post_fn *fn;
    void *arg;
    struct http_post_item *next;
};

struct http_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_timer_t shutdown_timer;
    uv_async_t async;
    int handles_open;
    struct http_server_opts opts; /* defaults filled in; host owned */
    uint16_t port;
    char *read_buf; /* one read at a time on the loop thread: shared by connections */
    struct http_conn *conns;
    _Atomic size_t nconns; /* written on the loop thread, read from any (relaxed) */
    _Atomic size_t queued; /* bytes queued on all connections (http_server_queued) */
    bool shutting_down, finishing, free_on_close;
    http_server_done_fn *done;
    void *done_ctx;
    pthread_mutex_t post_lock;
    struct http_post_item *post_head, *post_tail;
    bool post_closed;
    long date_sec;
    char date[40];
};

/* router.c */
const struct http_route *http__router_match(const struct http_router *r, struct str method,
                                            struct str path, bool *ret_path_known);
/** Appends the methods that have a route for path ("GET, HEAD, POST") to out. */
void http__router_allow(const struct http_router *r, struct str path, struct buf *out);

/* conn.c */
void http__conn_accept(struct http_server *s);
/** Abortive close (idempotent). */
void http__conn_close(struct http_conn *c);
/** Server shutdown: closes c if idle, else lets it finish. */
void http__conn_drain(struct http_conn *c);
/** Copies the parts into one write. Returns 0 or negative (the connection is closed). */
int http__conn_write(struct http_conn *c, const struct str *parts, size_t n);
/** Counts n bytes more (less, when negative) queued on one of s's connections. */
void http__server_queued_add(struct http_server *s, ptrdiff_t n);

/** A whole response in one piece: written at once when nothing is queued (one writev, no
 * copy), else as http__conn_write. Streamed bodies keep using http__conn_write, whose
 * queue accounting drives their back-pressure. */
int http__conn_write_whole(struct http_conn *c, const struct str *parts, size_t n);
/** The current request's response is complete. */
void http__conn_response_done(struct http_conn *c);
/** Re-evaluates whether the connection should be reading. */
void http__conn_update_read(struct http_conn *c);
/** Resumes body processing after http_req_pause_body(req, false). */
void http__conn_resume(struct http_conn *c);
/** Bounds the hand-over of an upgrade (its 101 queued): the connection closes once the
 * client took no byte for the write stall time (http_server_opts.write_stall). */
void http__conn_arm_upgrade(struct http_conn *c);

/* resp.c */
/** Writes a complete error response outside any request (parse errors, timeouts) with
 * Connection: close. */
void http__write_error(struct http_conn *c, int status, const char *detail);
/** The default or configured error body. */
void http__error_body(struct http_server *s, int status, const char *detail, struct buf *out,
                      const char **ret_content_type);

/* server.c */
/** A connection's handles are closed and its memory released. */
void http__server_conn_gone(struct http_server *s);

/* req.c */
/** Returns a new request (one reference, held by c). */
struct http_req *http__req_new(struct http_conn *c);
