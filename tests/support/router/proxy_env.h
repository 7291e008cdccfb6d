/* SPDX-License-Identifier: Apache-2.0 */
/* The router's proxy on a real loop, for unit tests: a store holding the Ready Sandbox
 * ns/box at 127.0.0.1, the proxy behind an HTTP server on a loop thread, and, when the
 * test gives a request callback, a scripted upstream on the same loop that hands the test
 * each request head it reads. Everything but proxy_env_start/stop and the fields marked
 * for the test thread belongs to the loop thread. */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "http/server.h"
#include "kube/store.h"
#include "router/proxy.h"

#define PROXY_ENV_UPS 256

struct proxy_env;

/* One connection the proxy made to the upstream. */
struct proxy_env_up {
    uv_tcp_t tcp;
    struct proxy_env *env;
    int nth;        /* requests read on this connection, the current one included */
    void *data;     /* the test's state for it: opts.up_data zeroed bytes, freed with it */
    char buf[8192]; /* unread bytes, NUL-terminated */
    size_t len;
};

/** A request head read on u: head[0..len) ends with its blank line; head is
 * NUL-terminated (after any pipelined bytes). The callback may drop u. */
typedef void proxy_env_request_fn(struct proxy_env_up *u, const char *head, size_t len);
/** u goes (its peer closed, or the test or the stop dropped it). */
typedef void proxy_env_drop_fn(struct proxy_env_up *u);

struct proxy_env_opts {
    struct proxy_opts proxy;       /* store and allow_loopback are set by proxy_env_start */
    size_t write_queue;            /* the server's per-client queue (0: its default) */
    proxy_env_request_fn *request; /* NULL: no upstream listener */
    proxy_env_drop_fn *drop;       /* may be NULL */
    size_t up_data;                /* bytes of each connection's data */
    void *data;                    /* the test's, in env->data */
};

struct proxy_env {
    uv_loop_t loop;
    uv_async_t stop;
    uv_tcp_t listener;
    pthread_t th;
    struct kube_store *store;
    struct proxy *proxy;
    struct http_router *router;
    struct http_server *server;
    uint16_t port, up_port;                  /* the server's and the upstream's (test thread too) */
    struct proxy_env_up *ups[PROXY_ENV_UPS]; /* accepted, NULL once gone */
    int nups;
    bool listening;
    atomic_int accepts; /* upstream connections accepted (test thread too) */
    struct proxy_env_opts o;
    void *data;
};

/** The Sandbox object ns/box at 127.0.0.1, Ready or not. Caller owns it. */
json_t *proxy_env_sandbox(bool ready);

/** Starts e (zeroed by the caller, not moved after) with o (NULL: defaults) and its loop
 * thread. Asserts (cmocka) on failure. */
void proxy_env_start(struct proxy_env *e, const struct proxy_env_opts *o);
/** Stops the loop thread (freeing the proxy, the server's connections and the upstream's)
 * and frees what e holds. */
void proxy_env_stop(struct proxy_env *e);

/** Queues a copy of p[0..n) to u. */
void proxy_env_send(struct proxy_env_up *u, const char *p, size_t n);
void proxy_env_send_str(struct proxy_env_up *u, const char *s);
/** Closes u (no FIN-then-linger: a plain close); its drop callback runs now. */
void proxy_env_drop(struct proxy_env_up *u);
/** Stops accepting upstream connections: the next dial is refused. */
void proxy_env_close_listener(struct proxy_env *e);
