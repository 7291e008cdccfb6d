/* SPDX-License-Identifier: Apache-2.0 */
/* Proxy lifecycle: options, metric families, shutdown of pooled connections and
 * tunnels. */
#include "common/limits.h"
#include "common/map.h"
#include "common/metrics.h"
#include "common/xalloc.h"
#include "router/proxy_int.h"

static void fill_defaults(struct proxy_opts *o)
{
    if (!o->connect_timeout)
        o->connect_timeout = LIMIT_ROUTER_CONNECT_TIMEOUT;
    if (!o->idle_timeout)
        o->idle_timeout = LIMIT_ROUTER_IDLE_TIMEOUT;
    if (!o->proxy_timeout)
        o->proxy_timeout = LIMIT_ROUTER_PROXY_TIMEOUT;
    if (!o->tunnel_idle)
        o->tunnel_idle = LIMIT_ROUTER_TUNNEL_IDLE;
    if (!o->max_tunnels)
        o->max_tunnels = LIMIT_ROUTER_TUNNELS;
    if (!o->pool_idle)
        o->pool_idle = LIMIT_ROUTER_POOL_IDLE;
    if (!o->pool_per_host)
        o->pool_per_host = LIMIT_ROUTER_POOL_PER_HOST;
    if (!o->queued_budget)
        o->queued_budget = LIMIT_ROUTER_QUEUED;
}

static void register_metrics(struct proxy *p, struct metrics_registry *r)
{
    static const char *const req_labels[] = {"method", "code", "sandbox_namespace", NULL};
    static const char *const err_labels[] = {"sandbox_namespace", "reason", NULL};
    static const char *const authz_labels[] = {"sandbox_namespace", "decision", "source", NULL};
    static const double bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                    0.5,    1,     2.5,    5,     10,   30,    60,   180};
    p->m.requests = metrics_counter(r, "sandbox_router_requests_total",
                                    "Proxied requests by method and status code.", req_labels);
    p->m.duration = metrics_histogram(r, "sandbox_router_request_duration_seconds",
                                      "Time from request head to the end of the response.",
                                      req_labels, bounds, ARRAY_SIZE(bounds));
    p->m.inflight =
        metrics_gauge(r, "sandbox_router_inflight_requests", "Proxied requests in progress.", NULL);
    p->m.upstream_errors = metrics_counter(r, "sandbox_router_upstream_errors_total",
                                           "Upstream failures by class.", err_labels);
    p->m.authz = metrics_counter(r, "sandbox_router_authz_decisions_total",
                                 "Authorization decisions.", authz_labels);
    p->m.tunnels = metrics_gauge(r, "sandbox_router_tunnels_active",
                                 "Upgraded (WebSocket) tunnels open.", NULL);
    metric_set(p->m.inflight, NULL, 0);
    p->m.inflight_now = metric_series_get(p->m.inflight, NULL);
    metric_set(p->m.tunnels, NULL, 0);
}

struct proxy *proxy_new(uv_loop_t *loop, const struct proxy_opts *opts)
{
    struct proxy *p = XNEW(struct proxy);
    p->loop = loop;
    p->o = *opts;
    fill_defaults(&p->o);
    p->pool = map_new(NULL);
    (void)uv_timer_init(loop, &p->shutdown_timer);
    p->shutdown_timer.data = p;
    (void)uv_timer_init(loop, &p->budget_timer);
    p->budget_timer.data = p;
    p->handles = 2;
    if (!p->o.metrics) {
        p->o.metrics = metrics_registry_new();
        p->own_metrics = true;
    }
    register_metrics(p, p->o.metrics);
    return p;
}

static void finish_shutdown(struct proxy *p)
{
    proxy__tunnels_close_all(p);
    (void)uv_timer_stop(&p->shutdown_timer);
    if (p->shutdown_done) {
        void (*done)(void *) = p->shutdown_done;
        p->shutdown_done = NULL;
        done(p->shutdown_ctx);
    }
}

static void on_check(uv_timer_t *t)
{
    struct proxy *p = t->data;
    if (p->ntunnels == 0 || uv_now(p->loop) >= p->grace_end_ms)
        finish_shutdown(p);
}

void proxy_shutdown(struct proxy *p, usec_t grace, void (*done)(void *ctx), void *ctx)
{
    p->shutting_down = true;
    p->shutdown_done = done;
    p->shutdown_ctx = ctx;
    upconn_pool_clear(p);
    if (p->ntunnels == 0) {
        finish_shutdown(p);
        return;
    }
    p->grace_end_ms = uv_now(p->loop) + grace / USEC_PER_MSEC;
    (void)uv_timer_start(&p->shutdown_timer, on_check, 50, 50);
}

static void on_timer_closed(uv_handle_t *h)
{
    struct proxy *p = h->data;
    if (--p->handles > 0)
        return;
    for (size_t i = 0; i < PX_TARGETS; i++)
        json_decref(p->targets[i].obj);
    map_free(p->pool);
    if (p->own_metrics)
        metrics_registry_free(p->o.metrics);
    xfree(p);
}

void proxy_free(struct proxy *p)
{
    if (!p)
        return;
    upconn_pool_clear(p);
    proxy__tunnels_close_all(p);
    uv_close((uv_handle_t *)&p->shutdown_timer, on_timer_closed);
    uv_close((uv_handle_t *)&p->budget_timer, on_timer_closed);
}

size_t proxy_inflight(const struct proxy *p)
{
    return p->inflight;
}

size_t proxy_tunnels(const struct proxy *p)
{
    return p->ntunnels;
}
