/* SPDX-License-Identifier: Apache-2.0 */
/* Composition of the router: informer, reviews, proxy and probe servers, and the
 * graceful stop sequence (not ready -> drain requests -> tunnels -> close). */
#include "router/router.h"

#include <errno.h>
#include <jansson.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "api/res.h"
#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/xalloc.h"
#include "http/probes.h"
#include "http/server.h"
#include "kube/informer.h"
#include "kube/res.h"
#include "router/activity_track.h"
#include "router/authz.h"
#include "router/proxy.h"
#include "router/resume_gate.h"
#include "router/resume_worker.h"
#include "tls/metrics_auth.h"

struct router {
    struct router_opts o;
    uv_loop_t loop;
    uv_async_t stop_async;
    uv_prepare_t log_prep; /* writes the iteration's batched log lines before polling */
    uv_timer_t trim_timer; /* until the cache synced: then gives the list's memory back */
    pthread_t thread;
    struct kube_informer *informer;
    struct authz_reviewer reviewer;
    struct authz_kube reviewer_kube; /* the reviewer's state (reviewer.ctx) */
    struct authz *authz;
    struct proxy *proxy;
    /* idle auto-suspend: API writes, resume on traffic, activity reports */
    struct resume_worker *worker;
    struct resume_gate *resume;
    struct activity_track *activity;
    struct metrics_registry *metrics;
    struct http_router *proxy_routes, *probe_routes;
    struct http_server *server, *probe;
    struct http_probes_opts probes;
    atomic_bool stopping, stop_sent;
    int pending_stops;
    usec_t stop_deadline;   /* the signal plus --shutdown-timeout: one budget for all */
    uv_timer_t final_timer; /* the activity's last writes, after the proxy stopped */
    usec_t final_deadline;
};

static bool synced(void *ctx)
{
    struct router *r = ctx;
    return kube_informer_has_synced(r->informer);
}

static bool ready(void *ctx, struct buf *reason)
{
    struct router *r = ctx;
    if (atomic_load(&r->stopping)) {
        (void)buf_puts(reason, "draining");
        return false;
    }
    if (!synced(r)) {
        (void)buf_puts(reason, "sandbox cache not synced");
        return false;
    }
    return true;
}

static int render(void *ctx, struct buf *out)
{
    struct router *r = ctx;
    return metrics_render(r->metrics, out);
}

/* --metrics-secure: the scrape's token is reviewed first (tls/metrics_auth.h). */
static int secure_metrics(struct http_req *req, void *ctx)
{
    struct router *r = ctx;
    return metrics_auth_serve(r->o.metrics_auth, req, render, r, LIMIT_HTTP_BODY);
}

/* Removes the members of obj (an object, else nothing) not named in keep. */
static void keep_only(json_t *obj, const char *const *keep)
{
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(obj, tmp, k, v)
    {
        size_t i = 0;
        while (keep[i] && strcmp(keep[i], k) != 0)
            i++;
        if (!keep[i])
            (void)json_object_del(obj, k);
    }
}

/* The cache keeps only what routing, the UID check and the resume gate read (pod IPs,
 * conditions, operating mode, idle policy, identity, deletion): a real Sandbox's pod
 * template, labels, annotations and managed fields are most of its size, and the
 * router holds every Sandbox of its namespaces. */
static void slim_sandbox(void *ctx, json_t *obj)
{
    static const char *const meta[] = {"name",
                                       "namespace",
                                       "uid",
                                       "generation",
                                       "resourceVersion",
                                       "creationTimestamp",
                                       "deletionTimestamp",
                                       NULL};
    static const char *const spec[] = {"operatingMode", "idlePolicy", NULL};
    static const char *const status[] = {"podIPs", "conditions", NULL};
    (void)ctx;
    keep_only(json_object_get(obj, "metadata"), meta);
    keep_only(json_object_get(obj, "spec"), spec);
    keep_only(json_object_get(obj, "status"), status);
}

/* The initial list parses every Sandbox page by page on the informer's thread; what the
 * cache keeps is a small part of what was allocated, spread over the whole arena (10,000
 * Sandboxes: 44 MB in use, 226 MB resident). Once synced, the free pages go back to the
 * system (226 -> ~120 MB there). */
static void on_trim_timer(uv_timer_t *t)
{
    struct router *r = t->data;
    if (!kube_informer_has_synced(r->informer))
        return;
    uv_timer_stop(t);
    (void)malloc_trim(0);
    log_debug("cache synced: free heap pages returned");
}

static int start_informer(struct router *r)
{
    struct kube_informer_opts io = {.client = r->o.client,
                                    .res = &API_RES_SANDBOXES,
                                    .ns = r->o.ns,
                                    .transform = slim_sandbox,
                                    .name = API_RES_SANDBOXES.plural};
    int rc = kube_informer_new(&io, &r->informer);
    if (rc >= 0)
        rc = kube_informer_start(r->informer);
    return rc;
}

static int start_idle(struct router *r)
{
    struct kube_store *store = kube_informer_store(r->informer);
    int rc = resume_worker_new(&r->loop, &r->worker);
    if (rc < 0)
        return rc;
    struct resume_gate_opts go = {.store = store,
                                  .worker = r->worker,
                                  .client = r->o.client,
                                  .metrics = r->metrics,
                                  .start_hold = r->o.start_hold};
    struct activity_track_opts ao = {.store = store, .worker = r->worker, .client = r->o.client};
    r->resume = resume_gate_new(&r->loop, &go);
    r->activity = activity_track_new(&r->loop, &ao);
    return 0;
}

/* After the proxy: the gate and tracker, then the worker (its pending completions
 * free what the two left to it). */
static void free_idle(struct router *r)
{
    resume_gate_free(r->resume);
    activity_track_free(r->activity);
    resume_worker_free(r->worker);
    r->resume = NULL;
    r->activity = NULL;
    r->worker = NULL;
}

static int start_servers(struct router *r)
{
    struct proxy_opts po = {.store = kube_informer_store(r->informer),
                            .synced = synced,
                            .synced_ctx = r,
                            .authz = r->authz,
                            .metrics = r->metrics,
                            .allow_loopback = r->o.allow_loopback,
                            .trust_loopback = r->o.trust_loopback,
                            .client_cert_auth = r->o.client_cert_auth,
                            .connect_timeout = r->o.connect_timeout,
                            .idle_timeout = r->o.idle_timeout,
                            .proxy_timeout = r->o.proxy_timeout,
                            .tunnel_idle = r->o.tunnel_idle,
                            .max_tunnels = r->o.max_tunnels,
                            .access_log = r->o.access_log,
                            .resume = r->resume,
                            .activity = r->activity};
    r->proxy = proxy_new(&r->loop, &po);
    r->proxy_routes = http_router_new();
    r->probe_routes = http_router_new();
    int rc = proxy_register(r->proxy, r->proxy_routes);
    r->probes = (struct http_probes_opts){.ready = ready,
                                          .ready_ctx = r,
                                          .render = r->o.metrics_auth ? NULL : render,
                                          .render_ctx = r};
    if (rc >= 0)
        rc = http_probes_register(r->probe_routes, &r->probes);
    if (rc >= 0 && r->o.metrics_auth)
        rc = http_router_add(r->probe_routes, "GET", "/metrics", HTTP_ROUTE_NO_BODY, secure_metrics,
                             r);
    struct http_server_opts so = {.host = r->o.host ? r->o.host : "0.0.0.0",
                                  .port = r->o.port,
                                  .router = r->proxy_routes,
                                  .write_queue = LIMIT_ROUTER_CLIENT_QUEUE,
                                  .header_timeout = r->o.header_timeout,
                                  .idle_timeout = r->o.idle_timeout};
    if (rc >= 0)
        rc = http_server_new(&r->loop, &so, &r->server);
    struct http_server_opts pso = {.host = r->o.probe_host ? r->o.probe_host : so.host,
                                   .port = r->o.probe_port,
                                   .router = r->probe_routes};
    if (rc >= 0)
        rc = http_server_new(&r->loop, &pso, &r->probe);
    return rc;
}

static void on_final_tick(uv_timer_t *h)
{
    struct router *r = h->data;
    if (activity_writes_pending(r->activity) > 0 && clock_now() < r->final_deadline)
        return;
    if (activity_writes_pending(r->activity) > 0)
        log_warn("activity annotations not written before the stop\tpending=%zu",
                 activity_writes_pending(r->activity));
    uv_close((uv_handle_t *)h, NULL);
    free_idle(r);
}

/* The activity since each Sandbox's last annotation write goes out before the worker
 * stops (a successor router would not know of it), within what is left of the stop's
 * budget (at least a second, at most LIMIT_ROUTER_ACTIVITY_FINAL). */
static void final_activity(struct router *r)
{
    usec_t now = clock_now(), left = r->stop_deadline > now ? r->stop_deadline - now : 0;
    if (activity_flush_final(r->activity) == 0) {
        free_idle(r);
        return;
    }
    if (left < USEC_PER_SEC)
        left = USEC_PER_SEC;
    r->final_deadline =
        now + (left < LIMIT_ROUTER_ACTIVITY_FINAL ? left : LIMIT_ROUTER_ACTIVITY_FINAL);
    (void)uv_timer_init(&r->loop, &r->final_timer);
    r->final_timer.data = r;
    (void)uv_timer_start(&r->final_timer, on_final_tick, 10, 10);
}

static void one_stopped(struct router *r)
{
    if (--r->pending_stops > 0)
        return;
    /* Everything that may call into the reviews is gone: stop them. */
    authz_free(r->authz);
    r->authz = NULL;
    proxy_free(r->proxy);
    r->proxy = NULL;
    final_activity(r);
}

static void on_server_done(struct http_server *s, void *ctx)
{
    (void)s;
    one_stopped(ctx);
}

static void on_proxy_done(void *ctx)
{
    struct router *r = ctx;
    /* Requests drained; now the tunnels are gone too: the probe server can go. */
    http_server_shutdown(r->probe, USEC_PER_SEC, on_server_done, r);
    one_stopped(r);
}

static void on_requests_drained(struct http_server *s, void *ctx)
{
    struct router *r = ctx;
    (void)s;
    /* Tunnels get what the request drain left of the grace, not a second one: the whole
     * shutdown must fit in the Pod's terminationGracePeriodSeconds. */
    usec_t now = clock_now();
    proxy_shutdown(r->proxy, r->stop_deadline > now ? r->stop_deadline - now : 0, on_proxy_done, r);
    one_stopped(r);
}

static void on_stop(uv_async_t *a)
{
    struct router *r = a->data;
    uv_close((uv_handle_t *)&r->stop_async, NULL);
    uv_close((uv_handle_t *)&r->log_prep, NULL);
    uv_close((uv_handle_t *)&r->trim_timer, NULL);
    atomic_store(&r->stopping, true);
    log_info("shutting down\tgrace_ms=%llu",
             (unsigned long long)(r->o.shutdown_grace / USEC_PER_MSEC));
    r->pending_stops = 4; /* proxy server, proxy, probe server, and this */
    r->stop_deadline = clock_now() + r->o.shutdown_grace;
    http_server_shutdown(r->server, r->o.shutdown_grace, on_requests_drained, r);
    one_stopped(r);
}

/* The access log costs no write(2) per request: the loop thread's lines are batched
 * and written once per loop iteration (common/log.h). */
static void on_log_flush(uv_prepare_t *h)
{
    (void)h;
    log_flush();
}

static void *loop_main(void *arg)
{
    struct router *r = arg;
    log_batch_start();
    (void)uv_run(&r->loop, UV_RUN_DEFAULT);
    log_batch_stop();
    return NULL;
}

static void on_partial_done(struct http_server *s, void *ctx)
{
    (void)s;
    (void)ctx;
}

/* Start-up failed on the calling thread: close what exists and let the loop run down. */
static void teardown_partial(struct router *r)
{
    if (r->server)
        http_server_shutdown(r->server, 0, on_partial_done, NULL);
    if (r->probe)
        http_server_shutdown(r->probe, 0, on_partial_done, NULL);
    authz_free(r->authz);
    proxy_free(r->proxy);
    free_idle(r);
    uv_close((uv_handle_t *)&r->stop_async, NULL);
    uv_close((uv_handle_t *)&r->log_prep, NULL);
    uv_close((uv_handle_t *)&r->trim_timer, NULL);
    (void)uv_run(&r->loop, UV_RUN_DEFAULT);
    http_server_free(r->server);
    http_server_free(r->probe);
    (void)uv_loop_close(&r->loop);
    kube_informer_free(r->informer);
    http_router_free(r->proxy_routes);
    http_router_free(r->probe_routes);
    metrics_registry_free(r->metrics);
    xfree(r);
}

int router_start(const struct router_opts *opts, struct router **ret)
{
    struct router *r = XNEW(struct router);
    r->o = *opts;
    if (!r->o.shutdown_grace)
        r->o.shutdown_grace = LIMIT_ROUTER_SHUTDOWN_GRACE;
    int rc = uv_loop_init(&r->loop);
    if (rc < 0) {
        xfree(r);
        return rc;
    }
    (void)uv_async_init(&r->loop, &r->stop_async, on_stop);
    r->stop_async.data = r;
    (void)uv_prepare_init(&r->loop, &r->log_prep);
    (void)uv_prepare_start(&r->log_prep, on_log_flush);
    uv_unref((uv_handle_t *)&r->log_prep);
    (void)uv_timer_init(&r->loop, &r->trim_timer);
    r->trim_timer.data = r;
    (void)uv_timer_start(&r->trim_timer, on_trim_timer, 100, 100);
    uv_unref((uv_handle_t *)&r->trim_timer);
    r->metrics = metrics_registry_new();
    metrics_register_process(r->metrics);
    if (r->o.auth) {
        authz_kube_reviewer(&r->reviewer_kube, r->o.client, r->o.audiences, &r->reviewer);
        struct authz_opts ao = {.reviewer = &r->reviewer,
                                .verb = r->o.authz_verb,
                                .subresource = r->o.authz_subresource,
                                .ttl = r->o.auth_ttl};
        rc = authz_new(&r->loop, &ao, &r->authz);
    }
    if (rc >= 0)
        rc = start_informer(r);
    if (rc >= 0)
        rc = start_idle(r);
    if (rc >= 0)
        rc = start_servers(r);
    if (rc >= 0)
        rc = -pthread_create(&r->thread, NULL, loop_main, r);
    if (rc < 0) {
        teardown_partial(r);
        return rc;
    }
    *ret = r;
    return 0;
}

uint16_t router_port(const struct router *r)
{
    return http_server_port(r->server);
}

struct http_server *router_http_server(struct router *r)
{
    return r->server;
}

struct http_server *router_probe_server(struct router *r)
{
    return r->probe;
}

uint16_t router_probe_port(const struct router *r)
{
    return http_server_port(r->probe);
}

int router_wait_ready(struct router *r, usec_t timeout)
{
    int rc = kube_informer_wait_for_sync(r->informer, timeout);
    return rc == -ECANCELED ? -ETIMEDOUT : rc;
}

void router_request_stop(struct router *r)
{
    if (!atomic_exchange(&r->stop_sent, true))
        (void)uv_async_send(&r->stop_async);
}

void router_join(struct router *r)
{
    if (!r)
        return;
    (void)pthread_join(r->thread, NULL);
    http_server_free(r->server);
    http_server_free(r->probe);
    (void)uv_loop_close(&r->loop);
    kube_informer_free(r->informer);
    http_router_free(r->proxy_routes);
    http_router_free(r->probe_routes);
    metrics_registry_free(r->metrics);
    xfree(r);
}

void router_stop(struct router *r)
{
    if (!r)
        return;
    router_request_stop(r);
    router_join(r);
}
