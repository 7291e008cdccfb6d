/* SPDX-License-Identifier: Apache-2.0 */
/* Manager internals shared by manager.c and manager_http.c. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "controller/heap_trim.h"
#include "controller/manager.h"
#include "controller/sandbox_reconcile.h"
#include "controller/workloop.h"
#include "kube/client.h"

struct kube_informer;
struct lease_elector;
struct ctrl_ns_source;
struct events_recorder;
struct http_server_thread;
struct http_router;
struct http_req;
struct tls_front;
struct metrics_auth;
struct metric;
struct sb_memo;

enum { CTRL_INF_SANDBOX, CTRL_INF_POD, CTRL_INF_SERVICE, CTRL_INF_PVC, CTRL_INF_COUNT };

struct ctrl_manager {
    struct ctrl_opts opts;
    char *ns, *cluster_domain, *lease_ns, *lease_name, *identity;
    char *metrics_addr, *health_addr;
    struct kube_informer *inf[CTRL_INF_COUNT];
    struct ctrl_ns_source *nss[CTRL_INF_COUNT]; /* per informer, with several namespaces */
    struct workloop *loop;                      /* the Sandbox controller's queue and workers */
    struct sb_reconciler rec;
    struct ext_ctrl *ext;    /* extensions controllers, or NULL */
    struct cascade *cascade; /* dependents of deleted owners (controller/cascade.h) */
    struct sb_memo *memo;    /* read-your-writes memo of the Sandbox and claim reconcilers */
    /* idle auto-suspend */
    struct idle_ctrl *idle;
    struct events_recorder *events;
    struct lease_elector *elector;
    struct kube_write_gate gate; /* the client's writes only while leading (elector set) */
    struct http_server_thread *metrics_srv, *health_srv;
    struct http_router *metrics_router, *health_router;
    struct tls_front *metrics_tls;     /* --metrics-secure (manager_secure.c) */
    struct metrics_auth *metrics_auth; /* idem */
    char *metrics_tls_dir;             /* a self-signed pair's directory, removed at stop */
    struct ctrl_metrics met;

    pthread_mutex_t lock; /* guards workers_started against a concurrent stop */
    pthread_cond_t cond;
    bool workers_started;
    atomic_bool leading, stopping, stop_requested, lost, started, stopped;
    int wake_fd[2];        /* self-pipe for the async-signal-safe stop request */
    struct heap_trim trim; /* ctrl_manager_wait's heap trim */
};

/** Registers the metric families (manager_http.c). */
void ctrl__metrics_init(struct ctrl_manager *m);
/** Starts the metrics and probe servers. Returns 0 or a negative errno. */
int ctrl__servers_start(struct ctrl_manager *m);
void ctrl__servers_stop(struct ctrl_manager *m);
/* manager_secure.c: --metrics-secure. Starts the HTTPS front on host:port in front of
 * the (loopback) metrics server and the scrape checker. Returns 0 or negative (logged). */
int ctrl__metrics_secure_start(struct ctrl_manager *m, const char *host, uint16_t port);
/** Stops the HTTPS front and the reviews (scrapes from now on get 503); before the
 * metrics server stops. */
void ctrl__metrics_secure_stop(struct ctrl_manager *m);
/** Frees the scrape checker; after the metrics server stopped. */
void ctrl__metrics_secure_free(struct ctrl_manager *m);
/** Serves GET /metrics once the scrape is allowed (secure) or at once. */
int ctrl__metrics_serve(struct http_req *req, struct ctrl_manager *m,
                        int (*render)(struct http_req *req, struct ctrl_manager *m));
/** True when every informer has synced. */
bool ctrl__synced(struct ctrl_manager *m);
