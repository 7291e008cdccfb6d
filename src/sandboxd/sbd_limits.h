/* SPDX-License-Identifier: Apache-2.0 */
/* Limits of sandboxd (sizes in bytes, times in microseconds). Most are defaults that a
 * flag can change; the HTTP server's own limits (LIMIT_HTTP_*) stay in common/limits.h. */
#pragma once

#include "common/clock.h"

#define LIMIT_SBD_PATH           4096                    /* one decoded path (PATH_MAX) */
#define LIMIT_SBD_UPLOAD         (1024ull * 1024 * 1024) /* one uploaded file (--max-upload) */
#define LIMIT_SBD_REQUEST_JSON   (1u * 1024 * 1024)      /* a JSON request body (run, start) */
#define LIMIT_SBD_STDIN          (8u * 1024 * 1024)      /* stdin bytes given inline to run */
#define LIMIT_SBD_OUTPUT         (16u * 1024 * 1024)     /* buffered stdout (and stderr) of run */
#define LIMIT_SBD_PROCS          64                      /* concurrent processes (--max-procs) */
#define LIMIT_SBD_ARGS           4096                    /* argv entries + env entries */
#define LIMIT_SBD_TIMEOUT_S      300                     /* default run timeout (seconds) */
#define LIMIT_SBD_MAX_TIMEOUT_S  (24 * 3600)             /* largest accepted timeout */
#define LIMIT_SBD_DRAIN          (2 * USEC_PER_SEC)      /* output drain after the exit */
#define LIMIT_SBD_KILL_GRACE     (2 * USEC_PER_SEC)      /* SIGTERM -> SIGKILL at shutdown */
#define LIMIT_SBD_CHUNK          (64u * 1024)            /* one output read / stream event */
#define LIMIT_SBD_NDJSON_QUEUE   (1u * 1024 * 1024)      /* NDJSON lines waiting for a drain */
#define LIMIT_SBD_INLINE_FILE    (1u * 1024 * 1024)      /* files sent with Content-Length */
#define LIMIT_SBD_LISTING        10000                   /* entries in one directory listing */
#define LIMIT_SBD_MULTIPART_HEAD (16u * 1024)            /* headers of one multipart part */
#define LIMIT_SBD_WS_MESSAGE     (1u * 1024 * 1024)      /* one WebSocket message */
#define LIMIT_SBD_TOKEN          4096                    /* bearer token file */
#define LIMIT_SBD_OPEN_RETRIES   16                      /* openat2 EAGAIN retries */
/* code contexts (kernel.c) */
#define LIMIT_SBD_CONTEXTS     8                   /* contexts at once (--max-contexts) */
#define LIMIT_SBD_CODE_OUTPUT  (16u * 1024 * 1024) /* one execution (--max-code-output) */
#define LIMIT_SBD_KERNEL_LINE  (32u * 1024 * 1024) /* one driver event line */
#define LIMIT_SBD_KERNEL_GRACE (3 * USEC_PER_SEC)  /* timeout interrupt -> restart */
#define LIMIT_SBD_KERNEL_KEEPALIVE \
    (15 * USEC_PER_SEC) /* silence before a keepalive (--code-keepalive) */
/* gRPC front (grpc.c) */
#define LIMIT_SBD_GRPC_MESSAGE  (4u * 1024 * 1024)  /* one message, either way (grpc's default) */
#define LIMIT_SBD_GRPC_STREAMS  128                 /* concurrent calls per connection */
#define LIMIT_SBD_GRPC_CONNS    256                 /* open connections */
#define LIMIT_SBD_GRPC_CONN_REQ (16u * 1024 * 1024) /* request bodies per connection */
#define LIMIT_SBD_GRPC_QUEUE    (128u * 1024)       /* a call's queue; its process pauses above */
#define LIMIT_SBD_GRPC_BACKLOG  (256u * 1024)       /* unwritten socket bytes per connection */
#define LIMIT_SBD_GRPC_WINDOW   (1u * 1024 * 1024)  /* HTTP/2 receive window per stream */
#define LIMIT_SBD_GRPC_HEADERS  (16u * 1024)        /* request header list */
#define LIMIT_SBD_GRPC_ACKS     64                  /* queued PING/SETTINGS acknowledgements */
/* background processes (api_bg.c) */
#define LIMIT_SBD_BG_PROCS  32 /* table entries, running + exited (--max-bg-procs) */
#define LIMIT_SBD_BG_OUTPUT (1u * 1024 * 1024) /* output ring of one (--bg-output-buffer) */
