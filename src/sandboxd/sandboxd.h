/* SPDX-License-Identifier: Apache-2.0 */
/* The sandboxd daemon as a library: the REST API (files, processes, health, metadata) and
 * the legacy python-runtime API on a libuv loop, confined to one root directory. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/clock.h"

/** Daemon settings; sbd_config_defaults fills every field. Strings are borrowed. */
struct sbd_config {
    const char *host;            /* bind address of all servers ("::": IPv4 too) */
    int port;                    /* REST port; 0: ephemeral */
    int legacy_port;             /* python-runtime port; 0: ephemeral; < 0: disabled */
    int grpc_port;               /* gRPC ProcessService port; 0: ephemeral; < 0: disabled */
    const char *root;            /* confinement root and default cwd (created 0755) */
    const char *legacy_root;     /* root of the legacy endpoints; NULL: root */
    const char *token;           /* bearer token; NULL or "": no authentication */
    const char *config_token;    /* token of PUT /v1/config/env; NULL or "": disabled */
    const char *metadata_prefix; /* env prefix served by /v1/metadata */
    uint64_t max_upload;         /* one uploaded file */
    size_t max_body;             /* a buffered request body (JSON, stdin) */
    size_t max_output;           /* default cap of buffered stdout/stderr of a run */
    unsigned max_procs;          /* concurrent processes */
    unsigned max_bg_procs;       /* background process table (running + exited) */
    size_t bg_output_buffer;     /* output ring of one background process */
    unsigned exec_timeout_s;     /* legacy /execute timeout */
    usec_t proc_keepalive; /* silence of a run's answer or a process stream before a keepalive */
    usec_t header_timeout, body_timeout, idle_timeout;
    size_t grpc_max_unsent; /* gRPC answers no client took, all connections */
    /* code contexts (kernel.c) */
    const char *kernel_driver; /* the driver script; NULL: SBD_KERNEL_DRIVER */
    const char *kernel_python; /* the interpreter running it; NULL: SBD_KERNEL_PYTHON */
    unsigned max_contexts;     /* code contexts at once */
    size_t max_code_output;    /* event bytes of one execution */
    usec_t code_keepalive;     /* silence of an execution before a keepalive event */
    /* process WebSockets (ws_proc.c) */
    unsigned max_websockets; /* open at once; past it an upgrade is answered 429 */
    usec_t ws_first_timeout; /* for the first message (the process request) */
    usec_t ws_stdin_stall;   /* held stdin dropped once the process takes none for this */
    usec_t ws_write_stall;   /* queued frames not taken for this: the socket is closed and
                                its process killed (0: LIMIT_HTTP_STREAM_STALL) */
};

struct sbd;

/** Fills c with the defaults (host "::": IPv6 and IPv4, or 0.0.0.0 on a host without
 * IPv6; ports 8080, 8888 and 9090 (gRPC), root /workspace, ...). */
void sbd_config_defaults(struct sbd_config *c);
/** Opens the root, binds both servers on loop (borrowed) and returns a new daemon; SIGPIPE
 * is ignored process-wide from then on. Returns 0 or a negative errno. cfg is borrowed (copied). */
int sbd_new(uv_loop_t *loop, const struct sbd_config *cfg, struct sbd **ret);
uint16_t sbd_port(const struct sbd *d);
/** Reaps exited children that are not the daemon's registered processes (orphans of the
 * commands' trees); for the SIGCHLD handler. Returns how many. */
unsigned sbd_reap_orphans(const struct sbd *d);
/** 0 when the legacy server is disabled. */
uint16_t sbd_legacy_port(const struct sbd *d);
/** 0 when the gRPC server is disabled. */
uint16_t sbd_grpc_port_of(const struct sbd *d);
/** Stops: health answers 503, every process group gets SIGTERM then (after grace) SIGKILL,
 * the servers shut down gracefully. done (optional) runs once all is closed; then call
 * sbd_free. */
void sbd_shutdown(struct sbd *d, usec_t grace, void (*done)(void *ctx), void *ctx);
/** Frees a daemon whose shutdown completed (NULL is fine). */
void sbd_free(struct sbd *d);

struct sbd_thread;
/** Runs a daemon on its own loop and thread (tests, benchmarks). Returns 0 or negative. */
int sbd_thread_start(const struct sbd_config *cfg, struct sbd_thread **ret);
uint16_t sbd_thread_port(const struct sbd_thread *t);
uint16_t sbd_thread_legacy_port(const struct sbd_thread *t);
uint16_t sbd_thread_grpc_port(const struct sbd_thread *t);
/** Shuts down, joins and frees (NULL is fine). */
void sbd_thread_stop(struct sbd_thread *t);
