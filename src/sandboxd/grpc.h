/* SPDX-License-Identifier: Apache-2.0 */
/* gRPC over cleartext HTTP/2 (h2c with prior knowledge) on a libuv loop: one nghttp2
 * session per connection, length-prefixed messages, grpc-status trailers, grpc-timeout
 * deadlines and flow control that reaches back to the producer of a stream's messages.
 * The methods are a table given by the caller (grpc_proc.c: the ProcessService). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/clock.h"

/* gRPC status codes used by sandboxd. */
enum sbd_gstatus {
    SBD_GRPC_OK = 0,
    SBD_GRPC_CANCELLED = 1,
    SBD_GRPC_INVALID_ARGUMENT = 3,
    SBD_GRPC_DEADLINE_EXCEEDED = 4,
    SBD_GRPC_NOT_FOUND = 5,
    SBD_GRPC_PERMISSION_DENIED = 7,
    SBD_GRPC_RESOURCE_EXHAUSTED = 8,
    SBD_GRPC_FAILED_PRECONDITION = 9,
    SBD_GRPC_UNIMPLEMENTED = 12,
    SBD_GRPC_INTERNAL = 13,
    SBD_GRPC_UNAVAILABLE = 14,
    SBD_GRPC_UNAUTHENTICATED = 16,
};

struct sbd_grpc;
/** One RPC (an HTTP/2 stream). Borrowed by its handler from the handler call until it
 * calls sbd_gcall_finish or its cancel callback runs, whichever comes first. */
struct sbd_gcall;

/** Runs when the request message (msg, n bytes, borrowed for the call) is complete. The
 * handler must eventually call sbd_gcall_finish (possibly later, from another callback).
 * For a streaming method it runs for each message as it arrives, then once with msg
 * NULL when the client ended its side. */
typedef void sbd_grpc_handler_fn(struct sbd_gcall *c, const uint8_t *msg, size_t n, void *ctx);

struct sbd_grpc_method {
    const char *path; /* "/package.Service/Method" */
    sbd_grpc_handler_fn *fn;
    bool stream_in; /* the client streams its messages (a bidirectional method); else the
                       request is exactly one message */
};

struct sbd_grpc_opts {
    const char *host;
    uint16_t port;                         /* 0: ephemeral */
    const struct sbd_grpc_method *methods; /* borrowed, static */
    size_t nmethods;
    void *ctx;                   /* handlers' ctx */
    const char *token;           /* NULL: no authentication; else "authorization: Bearer <token>" */
    void (*activity)(void *ctx); /* optional: called for every authenticated call */
    usec_t idle_timeout;         /* GOAWAY to a connection without calls this long; 0: never */
    size_t max_unsent;           /* answers not taken, all connections; 0: LIMIT_SBD_GRPC_ALL_OUT */
};

/** Binds and listens on loop. Returns 0 with *ret or a negative errno. */
int sbd_grpc_new(uv_loop_t *loop, const struct sbd_grpc_opts *o, struct sbd_grpc **ret);
uint16_t sbd_grpc_port(const struct sbd_grpc *g);
/** Stops accepting, sends GOAWAY to every connection, lets running calls finish and closes
 * the rest after grace; done runs once every connection is closed. */
void sbd_grpc_shutdown(struct sbd_grpc *g, usec_t grace, void (*done)(void *ctx), void *ctx);
/** Frees a server whose shutdown completed (NULL is fine). */
void sbd_grpc_free(struct sbd_grpc *g);

/** The call's deadline from grpc-timeout as a duration from its start; 0: none. */
usec_t sbd_gcall_timeout(const struct sbd_gcall *c);
/** Queues one response message (packed protobuf, copied). Returns 0, -E2BIG (larger
 * than the message limit), -ENOBUFS (the connection holds LIMIT_SBD_GRPC_CONN_OUT of
 * responses its client has not taken, or all connections max_unsent) or -EPIPE
 * (finished). */
int sbd_gcall_send(struct sbd_gcall *c, const uint8_t *msg, size_t n);
/** The same for a unary call's one answer, of at most LIMIT_SBD_GRPC_REPLY (over the
 * message limit: grpc clients receive 4 MiB by default but may raise it, and upstream's
 * server sends any size): refused with -ENOBUFS past either budget whatever its size (a
 * stream's chunk only when over LIMIT_SBD_GRPC_QUEUE). A call is
 * also refused at its start, RESOURCE_EXHAUSTED with SBD_GRPC_UNSENT_MSG, while its
 * connection or all of them are past their budget. */
int sbd_gcall_reply(struct sbd_gcall *c, const uint8_t *msg, size_t n);
#define SBD_GRPC_UNSENT_MSG "too many response bytes not read by their clients"

/** Bytes queued for the client and not yet handed to HTTP/2 (flow control). */
size_t sbd_gcall_queued(const struct sbd_gcall *c);
/** Ends the call with status and message (NULL: none) after the queued messages. The
 * handler must not use c afterwards. */
void sbd_gcall_finish(struct sbd_gcall *c, enum sbd_gstatus status, const char *msg);
/** cancel runs (once, instead of any further use) when the client resets the stream, the
 * connection closes or the server stops before the handler finished; drain runs when the
 * queue falls below the low-water mark. Either may be NULL. */
void sbd_gcall_set_callbacks(struct sbd_gcall *c, void (*cancel)(void *ctx),
                             void (*drain)(void *ctx), void *ctx);

/** Feeds raw client bytes (HTTP/2 frames after the preface) into a session without a
 * socket, with methods whose handlers run as usual; output is discarded. For fuzzing. */
void sbd_grpc_feed(const struct sbd_grpc_opts *o, const uint8_t *data, size_t n);
