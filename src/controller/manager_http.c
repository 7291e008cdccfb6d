/* SPDX-License-Identifier: Apache-2.0 */
/* Manager metrics (registry, Sandbox state collector) and the /metrics, /healthz and
 * /readyz servers. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/map.h"
#include "common/metrics.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "controller/ext_metrics.h"
#include "controller/manager_int.h"
#include "controller/sandbox_names.h"
#include "controller/sandbox_status.h"
#include "http/server.h"
#include "kube/informer.h"
#include "kube/lease.h"
#include "kube/obj.h"
#include "kube/store.h"
#include "tls/tls_front.h"

static const char *const L_CTRL[] = {"controller", NULL};
static const char *const L_CTRL_RESULT[] = {"controller", "result", NULL};
static const char *const L_NAME[] = {"name", NULL};
/* agent_sandboxes and agent_sandbox_build_info: see controller/ext_metrics.h. */
static int collect_sandboxes(void *ctx, struct buf *out)
{
    struct ctrl_manager *m = ctx;
    return ext_metrics_render_sandboxes(
        m->inf[CTRL_INF_SANDBOX] ? kube_informer_store(m->inf[CTRL_INF_SANDBOX]) : NULL, out);
}

static int collect_build_info(void *ctx, struct buf *out)
{
    (void)ctx;
    return ext_metrics_render_build_info(out);
}

void ctrl__metrics_init(struct ctrl_manager *m)
{
    struct ctrl_metrics *x = &m->met;
    double b[20];
    x->reg = metrics_registry_new();
    metrics_exp_buckets(0.001, 2, 16, b);
    x->reconcile_total = metrics_counter(x->reg, "controller_runtime_reconcile_total",
                                         "Reconciles per controller and result.", L_CTRL_RESULT);
    x->reconcile_errors = metrics_counter(x->reg, "controller_runtime_reconcile_errors_total",
                                          "Reconcile errors per controller.", L_CTRL);
    x->reconcile_time = metrics_histogram(x->reg, "controller_runtime_reconcile_time_seconds",
                                          "Reconcile latency.", L_CTRL, b, 16);
    x->max_concurrent = metrics_gauge(x->reg, "controller_runtime_max_concurrent_reconciles",
                                      "Workers per controller.", L_CTRL);
    x->active_workers = metrics_gauge(x->reg, "controller_runtime_active_workers",
                                      "Workers reconciling right now.", L_CTRL);
    x->wq_depth = metrics_gauge(x->reg, "workqueue_depth", "Keys waiting in the queue.", L_NAME);
    x->wq_adds = metrics_counter(x->reg, "workqueue_adds_total", "Keys queued.", L_NAME);
    x->wq_latency = metrics_histogram(x->reg, "workqueue_queue_duration_seconds",
                                      "Time a key waited in the queue.", L_NAME, b, 16);
    x->wq_work = metrics_histogram(x->reg, "workqueue_work_duration_seconds",
                                   "Time spent processing a key.", L_NAME, b, 16);
    x->wq_retries =
        metrics_counter(x->reg, "workqueue_retries_total", "Rate-limited re-adds.", L_NAME);
    x->leader = metrics_gauge(x->reg, "leader_election_master_status",
                              "1 while this instance leads.", L_NAME);
    metrics_register_collector(x->reg, collect_sandboxes, m);
    metrics_register_collector(x->reg, collect_build_info, m);
    metrics_register_process(x->reg);
}

/* ---- servers ------------------------------------------------------------------------ */

static int render_metrics(struct http_req *req, struct ctrl_manager *m)
{
    struct buf b;
    int r;
    buf_init(&b, LIMIT_CTRL_METRICS_PAGE);
    (void)metrics_render(m->met.reg, &b); /* a cut page is still served */
    r = http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", buf_str(&b), b.len);
    buf_done(&b);
    return r;
}

static int h_metrics(struct http_req *req, void *ctx)
{
    return ctrl__metrics_serve(req, ctx, render_metrics);
}

static int h_healthz(struct http_req *req, void *ctx)
{
    (void)ctx;
    return http_respond(req, 200, "text/plain; charset=utf-8", "ok", 2);
}

/* Ready once every cache has synced; a standby (not leading) is ready too, so that a
 * rolling update can proceed while another replica holds the lease. */
static int h_readyz(struct http_req *req, void *ctx)
{
    struct ctrl_manager *m = ctx;
    static const char not_synced[] = "informers not synced";
    if (!ctrl__synced(m))
        return http_respond(req, 503, "text/plain; charset=utf-8", not_synced,
                            sizeof(not_synced) - 1);
    return http_respond(req, 200, "text/plain; charset=utf-8", "ok", 2);
}

/* Parses "host:port", ":port" or "[v6]:port". Returns 0, 1 for "0" (disabled) or
 * -EINVAL. */
static int parse_addr(const char *addr, char *host, size_t size, uint16_t *ret_port)
{
    const char *colon = strrchr(addr, ':');
    uint64_t port;
    size_t hl;
    if (strcmp(addr, "0") == 0)
        return 1;
    if (!colon || cstr_to_u64(colon + 1, &port) < 0 || port > 65535)
        return -EINVAL;
    hl = (size_t)(colon - addr);
    if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']') {
        addr++;
        hl -= 2;
    }
    if (hl == 0)
        (void)snprintf(host, size, "0.0.0.0");
    else if (hl >= size)
        return -EINVAL;
    else
        (void)snprintf(host, size, "%.*s", (int)hl, addr);
    *ret_port = (uint16_t)port;
    return 0;
}

static int serve(struct ctrl_manager *m, const char *addr, struct http_router *router,
                 struct http_server_thread **ret)
{
    char host[128];
    struct http_server_opts o = {.router = router, .host = host};
    int r;
    if (!addr)
        return 0;
    r = parse_addr(addr, host, sizeof(host), &o.port);
    if (r == 1)
        return 0;
    if (r < 0)
        return log_error_errno(r, "bad listen address\taddr=%s", addr);
    r = http_server_start_thread(&o, ret);
    if (r < 0)
        return log_error_errno(r, "cannot listen\taddr=%s", addr);
    log_info("serving\taddr=%s port=%u", addr, (unsigned)http_server_thread_port(*ret));
    (void)m;
    return 0;
}

/* Plain, or (--metrics-secure) on loopback behind the HTTPS front on metrics_addr. */
static int serve_metrics(struct ctrl_manager *m)
{
    char host[128];
    uint16_t port;
    int r;
    if (!m->opts.metrics_secure || !m->metrics_addr)
        return serve(m, m->metrics_addr, m->metrics_router, &m->metrics_srv);
    r = parse_addr(m->metrics_addr, host, sizeof(host), &port);
    if (r != 0)
        return r < 0 ? log_error_errno(r, "bad listen address\taddr=%s", m->metrics_addr) : 0;
    r = serve(m, "127.0.0.1:0", m->metrics_router, &m->metrics_srv);
    return r < 0 ? r : ctrl__metrics_secure_start(m, host, port);
}

int ctrl__servers_start(struct ctrl_manager *m)
{
    int r;
    m->metrics_router = http_router_new();
    m->health_router = http_router_new();
    r = http_router_add(m->metrics_router, "GET", "/metrics", 0, h_metrics, m);
    if (r >= 0)
        r = http_router_add(m->health_router, "GET", "/healthz", 0, h_healthz, m);
    if (r >= 0)
        r = http_router_add(m->health_router, "GET", "/readyz", 0, h_readyz, m);
    if (r >= 0)
        r = serve_metrics(m);
    if (r >= 0)
        r = serve(m, m->health_addr, m->health_router, &m->health_srv);
    return r;
}

void ctrl__servers_stop(struct ctrl_manager *m)
{
    ctrl__metrics_secure_stop(m);
    http_server_stop_thread(m->metrics_srv, 1 * USEC_PER_SEC);
    ctrl__metrics_secure_free(m);
    http_server_stop_thread(m->health_srv, 1 * USEC_PER_SEC);
    m->metrics_srv = m->health_srv = NULL;
    http_router_free(m->metrics_router);
    http_router_free(m->health_router);
    m->metrics_router = m->health_router = NULL;
}

uint16_t ctrl_manager_metrics_port(struct ctrl_manager *m)
{
    if (m->metrics_tls)
        return tls_front_port(m->metrics_tls);
    return m->metrics_srv ? http_server_thread_port(m->metrics_srv) : 0;
}

uint16_t ctrl_manager_health_port(struct ctrl_manager *m)
{
    return m->health_srv ? http_server_thread_port(m->health_srv) : 0;
}
