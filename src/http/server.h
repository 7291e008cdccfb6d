/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/1.1 server on a libuv loop: keep-alive, safe pipelining (one request at a time),
 * buffered or streamed request bodies, Content-Length or chunked streaming responses,
 * write back-pressure, slow-client timeouts, a connection limit and graceful shutdown.
 *
 * Threading: every function here runs on the loop thread, except http_server_post (any
 * thread) and the http_server_*_thread helpers (the controlling thread). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/str.h"

struct http_server;
struct http_router;
struct http_req;

/** A request handler. Called on the loop thread once the head (streamed-body routes) or
 * the whole body (other routes) has arrived. It responds now or later (keep a reference
 * with http_req_ref to respond after returning). A negative return before any response
 * started answers 500; after a streaming response started it closes the connection.
 * Returning 0 without responding and without a reference also answers 500 (except on
 * streamed-body routes, whose body callback usually answers). */
typedef int http_handler_fn(struct http_req *req, void *ctx);

/** Receives a streamed request body: data (borrowed for the call) and last = true once
 * (possibly with empty data). A negative return aborts the request (500 or close). */
typedef int http_body_fn(struct http_req *req, struct str data, bool last, void *ctx);

/** A request event (abort: the connection is gone; drain: the write queue emptied). */
typedef void http_req_event_fn(struct http_req *req, void *ctx);

/** Work posted to the loop thread. */
typedef void http_post_fn(void *arg);

/** Formats an error body for status with a human detail into out (bounded) and returns
 * the Content-Type through *ret_content_type (a static string). Returns 0 or negative
 * (then the default JSON body is used). */
typedef int http_error_body_fn(void *ctx, int status, const char *detail, struct buf *out,
                               const char **ret_content_type);

/** Called once a graceful shutdown finished and every handle is closed. */
typedef void http_server_done_fn(struct http_server *s, void *ctx);

/* ---- Router ------------------------------------------------------------------------ */

enum {
    HTTP_ROUTE_PREFIX = 1u << 0,      /* path is a prefix ("/v1/files/"), else exact */
    HTTP_ROUTE_STREAM_BODY = 1u << 1, /* call the handler at the head; body via body_fn */
    /* The handler reads no body (a probe): a request with one is answered at its head and
     * its connection closed after, the body never buffered (anyone may call a probe). */
    HTTP_ROUTE_NO_BODY = 1u << 2,
};

/** Returns a new empty router (free with http_router_free). */
struct http_router *http_router_new(void);
/** Frees the router (NULL is fine). Servers that borrow it must be gone. */
void http_router_free(struct http_router *r);
/** Adds a route. method NULL matches any method; a GET route also answers HEAD. The best
 * match is an exact path, else the longest prefix, among routes of the request's method;
 * a path known only under other methods answers 405 with Allow. Borrows method and path
 * (copied). ctx is passed to fn. Returns 0, -EINVAL (path not starting with '/', method
 * not a token) or -E2BIG (LIMIT_HTTP_ROUTES). */
int http_router_add(struct http_router *r, const char *method, const char *path, unsigned flags,
                    http_handler_fn *fn, void *ctx);

/* ---- Server ------------------------------------------------------------------------ */

/** Server options; zero fields take the LIMIT_HTTP_* defaults. */
struct http_server_opts {
    const char *host;               /* numeric IPv4/IPv6 address ("::": IPv4 too); NULL: "127.0.0.1"
                                       (borrowed, copied) */
    uint16_t port;                  /* 0: an ephemeral port (see http_server_port) */
    int backlog;                    /* listen backlog; 0: 511 */
    struct http_router *router;     /* borrowed; must outlive the server */
    usec_t header_timeout;          /* whole request head (408) */
    usec_t body_timeout;            /* between two body reads (408 or close) */
    usec_t idle_timeout;            /* keep-alive connection without a request (close) */
    size_t max_connections;         /* past it new connections are accepted and closed */
    size_t max_body;                /* buffered body limit (413) */
    size_t write_queue;             /* queued response bytes before back-pressure */
    usec_t stream_stall;            /* a response's full queue not taken from for this:
                                     * the connection closes (0: LIMIT_HTTP_STREAM_STALL) */
    usec_t write_stall;             /* queued bytes the client took none of for this: an
                                     * idle, lingering or upgrading connection closes
                                     * (0: LIMIT_HTTP_WRITE_STALL) */
    http_error_body_fn *error_body; /* NULL: {"detail": "..."} as application/json */
    void *error_ctx;
    /* Called when a request with a body is routed, before any of its body is read, with
     * the route's handler and context: true answers it now through that handler (which
     * must not need the body: an unauthenticated request's refusal), and the connection
     * closes after the answer, its body unread. Bodies an outsider cannot use are then not
     * buffered (up to max_body per connection) first. NULL: none. */
    bool (*refuse_early)(struct http_req *req, http_handler_fn *fn, void *route_ctx);
};

/** Binds, listens and returns a new server on loop (borrowed; the caller runs it). On
 * failure after libuv handles were created, memory is released when the loop next runs.
 * Returns 0 or a negative errno (-EINVAL bad host, -EADDRINUSE, ...). */
int http_server_new(uv_loop_t *loop, const struct http_server_opts *opts, struct http_server **ret);
/** The bound port. */
uint16_t http_server_port(const struct http_server *s);
/** Open connections. May be called from any thread (the loop thread changes the count:
 * the value read is a recent one, not synchronised with anything else). */
size_t http_server_connections(const struct http_server *s);
/** Response bytes queued on all its connections (handed to the socket, not yet taken by
 * the kernel). Any thread, as http_server_connections. */
size_t http_server_queued(const struct http_server *s);
/** How an adopted connection's input ended, as its front knows it: shared by the front
 * and the server (and whoever takes the connection over on an upgrade), reference
 * counted, usable from any thread. A socketpair's EOF always looks clean, so a front whose
 * client's input was cut off rather than ended (a TLS connection whose TCP ended without
 * a close_notify, or with a reset or a TLS error) marks it before it ends its side of
 * the socket; the server then takes that EOF for an abort (http_req_input_cut). */
struct http_cut;
/** Returns a new unmarked cut with one reference (the caller's). */
struct http_cut *http_cut_new(void);
/** Returns c with one more reference (NULL is fine). */
struct http_cut *http_cut_ref(struct http_cut *c);
/** Drops a reference; the last frees c (NULL is fine). */
void http_cut_unref(struct http_cut *c);
/** Marks the input as cut off (NULL is fine). Call before ending the side of the
 * socket it concerns. */
void http_cut_mark(struct http_cut *c);
/** Whether c is marked (NULL: false). */
bool http_cut_marked(struct http_cut *c);

/** What http_server_adopt knows about an adopted connection's client. */
struct http_adopt_opts {
    const char *peer; /* what http_req_peer reports (borrowed, copied); NULL: looked up */
    bool secure;      /* what http_req_secure reports */
    /* Opaque bytes about the client that the front established (e.g. the identity of a
     * verified TLS client certificate); the server keeps a copy for the connection's
     * life and hands it to handlers (http_req_peer_info). Borrowed; empty: none; at
     * most LIMIT_HTTP_PEER_INFO bytes. */
    struct str info;
    /* Marked by the front when the client's input was cut off (see struct http_cut):
     * the client's EOF then aborts a request being read or answered (its abort callback
     * runs and http_req_input_cut is true) instead of ending its body or passing on as a
     * half-close. Borrowed (the server takes a reference); NULL: none. */
    struct http_cut *cut;
};

/** Serves an already connected stream socket fd (e.g. one end of a socketpair whose
 * other end a TLS front decrypts into) as one more connection, described by opts
 * (borrowed). Loop thread only. Takes fd in every case (closed on failure). Returns 0,
 * or -ECONNREFUSED (connection limit, shutting down), -E2BIG (info too long) or another
 * negative errno. */
int http_server_adopt(struct http_server *s, int fd, const struct http_adopt_opts *opts);
/** Graceful shutdown: stops accepting, closes idle connections, lets in-flight requests
 * finish (their connections close afterwards) and force-closes what is left after grace.
 * done (optional) runs once everything is closed; then http_server_free may be called. */
void http_server_shutdown(struct http_server *s, usec_t grace, http_server_done_fn *done,
                          void *ctx);
/** Frees a server whose shutdown completed (NULL is fine). */
void http_server_free(struct http_server *s);
/** Runs fn(arg) on the loop thread soon; safe from any thread until the shutdown
 * completes. Returns 0 or -ESHUTDOWN (fn will not run). */
int http_server_post(struct http_server *s, http_post_fn *fn, void *arg);

struct http_server_thread;
/** Creates a loop and a server on it and runs it on a new thread. Returns 0 or negative. */
int http_server_start_thread(const struct http_server_opts *opts, struct http_server_thread **ret);
/** The server of a thread (borrowed; only post to it from other threads). */
struct http_server *http_server_thread_server(struct http_server_thread *t);
uint16_t http_server_thread_port(const struct http_server_thread *t);
/** Shuts the server down gracefully (see http_server_shutdown), joins the thread and frees
 * everything (NULL is fine). */
void http_server_stop_thread(struct http_server_thread *t, usec_t grace);

/* ---- Request accessors (borrowed slices, valid while the request is) ---------------- */

struct str http_req_method(const struct http_req *req);
struct str http_req_target(const struct http_req *req);
/** Path (percent-encoded as sent) without the query. */
struct str http_req_path(const struct http_req *req);
/** Query without '?'; empty when none. */
struct str http_req_query(const struct http_req *req);
/** The part of the path after the matched route's prefix (the whole path for exact). */
struct str http_req_path_rest(const struct http_req *req);
/** 0 for HTTP/1.0, 1 for HTTP/1.1. */
int http_req_minor_version(const struct http_req *req);
/** Whether the request asks for a protocol upgrade as HTTP/1.1 defines it: HTTP/1.1, a
 * Connection header listing "upgrade" and an Upgrade header (RFC 9110 §7.8: an HTTP/1.0
 * request's Upgrade is ignored). */
bool http_req_wants_upgrade(const struct http_req *req);
/** First header named name (case-insensitive); .p is NULL when absent. */
struct str http_req_header(const struct http_req *req, const char *name);
size_t http_req_header_count(const struct http_req *req);
/** Header i (0-based); false past the end. */
bool http_req_header_at(const struct http_req *req, size_t i, struct str *ret_name,
                        struct str *ret_value);
/** The buffered body (empty for streamed-body routes). */
struct str http_req_body(const struct http_req *req);
/** Whether the request's head announces a body (chunked, or a Content-Length above 0,
 * however spelled), from the parsed framing. */
bool http_req_has_body(const struct http_req *req);
/** Whether the request's head frames its body by a Content-Length (not chunked); *ret
 * gets that length (may be 0). */
bool http_req_content_length(const struct http_req *req, uint64_t *ret);
uv_loop_t *http_req_loop(const struct http_req *req);
struct http_server *http_req_server(const struct http_req *req);
/** True when the request came over TLS (a connection adopted with secure set). */
bool http_req_secure(const struct http_req *req);
/** The info its front gave the request's connection (http_adopt_opts.info): returns
 * borrowed bytes, valid until the handler returns (copy what is kept); empty when there
 * is none or the connection is gone. */
struct str http_req_peer_info(const struct http_req *req);

/** Whether req was aborted with its client's input cut off (its connection's
 * http_adopt_opts.cut marked by then, whether the EOF or a failed write ended the
 * connection first): a proxy then resets its upstream rather than ending it, so that the
 * cut never reads as the request's or the stream's end. Valid in the abort callback. */
bool http_req_input_cut(const struct http_req *req);
/** The cut of req's connection (http_adopt_opts.cut), borrowed: take a reference to
 * keep it past an upgrade (the tunnel's client EOF is then checked against it). NULL when
 * there is none or the connection is gone. */
struct http_cut *http_req_cut(const struct http_req *req);

/** Sets the body receiver of a streamed-body route (call from the handler). */
void http_req_set_body_cb(struct http_req *req, http_body_fn *fn, void *ctx);
/** Pauses or resumes reading of a streamed body (back-pressure to the client). */
void http_req_pause_body(struct http_req *req, bool pause);
/** fn runs (once) if the connection goes away before the response ended. */
void http_req_set_abort_cb(struct http_req *req, http_req_event_fn *fn, void *ctx);
/** The client's EOF (a half-close) counts as the client going away while the response
 * waits: the connection closes and the abort callback runs, as for an open-ended
 * streaming response (http_resp_start; one of a known length, http_resp_start_length,
 * still goes out whole to a half-closed client). For a handler that answers only when
 * long work ends (call it from the handler). */
void http_req_set_eof_aborts(struct http_req *req);
/** fn runs once when the client's EOF arrives after the request was read whole while its
 * response is not done: a half-close (or a close, which looks the same until a write
 * fails). The connection stays, so the response still goes out. Not called when the EOF
 * ends the request instead (http_req_set_eof_aborts, an open-ended streaming response).
 * When the EOF came already (a request pipelined behind one in flight, whose bytes were
 * all sent before it), fn runs at once, from this call. */
void http_req_set_eof_cb(struct http_req *req, http_req_event_fn *fn, void *ctx);
/** fn runs when the write queue drains after http_resp_write returned 1. */
void http_req_set_drain_cb(struct http_req *req, http_req_event_fn *fn, void *ctx);
/** Returns req with one more reference (for responding after the handler returned). */
struct http_req *http_req_ref(struct http_req *req);
/** Drops a reference (NULL is fine). */
void http_req_unref(struct http_req *req);
/** True once the connection is gone (responses then fail with -EPIPE). */
bool http_req_is_aborted(const struct http_req *req);

/* ---- Responses --------------------------------------------------------------------- */

/** Adds a response header before the response starts. Borrows name and value (copied;
 * neither may be NULL).
 * Returns 0, -EINVAL (not a token name, CR/LF/NUL in value, or a framing header such as
 * Content-Length), -EALREADY (started) or -E2BIG (LIMIT_HTTP_RESP_HEADERS). */
int http_resp_header_add(struct http_req *req, const char *name, const char *value);
/** http_resp_header_add for slices (a NUL in value is refused like CR/LF). Borrows name
 * and value (copied). */
int http_resp_header_add_str(struct http_req *req, struct str name, struct str value);
/** Sends a complete response with Content-Length (body borrowed; copied). content_type
 * may be NULL. Returns 0, -EALREADY (already responded), -EPIPE (connection gone). */
int http_respond(struct http_req *req, int status, const char *content_type, const void *body,
                 size_t len);
/** Sends j (borrowed) as application/json. */
int http_respond_json(struct http_req *req, int status, const json_t *j);
/** Sends the server's error body for status with detail (borrowed). */
int http_respond_error(struct http_req *req, int status, const char *detail);
/** Starts a streaming response: chunked for HTTP/1.1, close-delimited for HTTP/1.0. */
int http_resp_start(struct http_req *req, int status, const char *content_type);
/** Starts a streaming response of exactly len body bytes with Content-Length (a proxy
 * passing on a length-delimited body); http_resp_write then writes raw bytes. Writing
 * fewer bytes than len and ending is a framing error: abort with http_req_abort instead.
 * Returns like http_resp_start. */
int http_resp_start_length(struct http_req *req, int status, const char *content_type,
                           uint64_t len);
/** Closes the request's connection at once (a response cut off midway: the client sees
 * the connection end before the body did). No-op when already gone. */
void http_req_abort(struct http_req *req);
/** Writes the client's address ("10.0.0.1" or "::1") into out. Returns 0, -EPIPE
 * (connection gone) or a negative errno. */
int http_req_peer(const struct http_req *req, char *out, size_t size);
/** Queues data (borrowed; copied) of a streaming response. Returns 0, 1 when the queue is
 * now over the limit (wait for the drain callback before writing more), -EAGAIN when it
 * was already over the limit (nothing queued), -EINVAL (not started), -EPIPE. */
int http_resp_write(struct http_req *req, const void *data, size_t len);
/** Ends a streaming response. Returns 0, -EINVAL (not started) or -EPIPE. */
int http_resp_end(struct http_req *req);
/** When the client last took bytes of req's connection (http/progress.h): the last
 * completed write (or the current queue's start), or the last call that saw the bytes
 * the kernel holds for the client (SIOCOUTQ) change since the sample before. A write
 * completes only once the socket buffer has room for it, which a slow client takes long
 * to make: sample at the start of a wait (the result then is now or older) and at its
 * timer. The server's own stall bounds (write_stall, stream_stall) judge the same way.
 * 0 when the connection is gone. */
usec_t http_resp_write_progress(struct http_req *req);
/** Response bytes queued on req's connection (handed to the socket, not yet taken by the
 * kernel); 0 when the connection is gone. */
size_t http_resp_queued(const struct http_req *req);
/** Drops the headers added with http_resp_header_add while no response has started (an
 * error answered instead of the response they were meant for). Returns 0 or -EALREADY. */
int http_resp_headers_reset(struct http_req *req);

/* ---- Connection upgrade (101 Switching Protocols) ----------------------------------- */

/** The outcome of http_req_upgrade, on the loop thread. status 0: the 101 response was
 * written and tcp (the caller's memory given to http_req_upgrade) is now an initialised,
 * open uv_tcp_t on the request's loop that the callee owns and must uv_close; pending
 * holds the bytes the client sent after the request head that the server had already
 * read (borrowed for the call: consume or copy them before returning). status < 0: the
 * connection failed before the hand-over (tcp is not, or no longer, a libuv handle: its
 * memory is free again; tcp is passed as NULL and pending is empty); the client is gone. */
typedef void http_upgrade_fn(void *ctx, int status, uv_tcp_t *tcp, struct str pending);

/** Options of http_req_upgrade. */
struct http_upgrade_opts {
    const char *protocol; /* "Upgrade: <protocol>" header (borrowed; copied); NULL: none */
    uv_tcp_t *tcp;        /* caller memory, uninitialised; see http_upgrade_fn */
    http_upgrade_fn *fn;  /* required */
    void *ctx;
};

/** Answers req with "101 Switching Protocols" ("Connection: Upgrade", the Upgrade header
 * of opts and the headers added with http_resp_header_add) and takes the connection out
 * of the server: the request is finished at once (responses fail with -EPIPE, the abort
 * callback never runs), no more bytes are read as HTTP, and once the 101 is written the
 * socket is handed over through opts->fn (always called exactly once, later, unless this
 * returns an error). The 101 may wait behind answers still queued on the connection: a
 * client that takes no byte of them for write_stall (http_server_opts) has the
 * connection closed, and fn gets status < 0. After the hand-over the server no longer
 * counts or drains the connection: the new owner handles its shutdown. The request body must be
 * complete (upgrade requests have none). Borrows opts. Returns 0, -EALREADY (a response started),
 * -EPIPE (connection gone) or -EINVAL (body not complete, no fn or tcp, bad protocol token). */
int http_req_upgrade(struct http_req *req, const struct http_upgrade_opts *opts);

/** The reason phrase of status ("OK"), "Unknown" for others; static. */
const char *http_status_reason(int status);
