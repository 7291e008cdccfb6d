/* SPDX-License-Identifier: Apache-2.0 */
/* Controller manager lifecycle: informers, queue, workers, leader election. */
#include "controller/manager.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/random.h>

#include "api/res.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/xalloc.h"
#include "controller/cascade.h"
#include "controller/manager_int.h"
#include "controller/ns_source.h"
#include "controller/pod_transform.h"
#include "controller/sandbox_memo.h"
#include "controller/sandbox_names.h"
#include "controller/workloop.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "kube/lease.h"
#include "kube/obj.h"
#include "kube/store.h"
#include "kube/workqueue.h"

static const char *const CTRL_NAME = "sandbox";

/* How often ctrl_manager_wait checks that a leader's Lease is still within its renew
 * deadline (the margin to the lease duration is 5 s with the defaults). */
#define CTRL_LEASE_CHECK_MS 200

/* How long a stop while leading may spend writing the queued Events before the Lease
 * release (the stop watchdog is 30 s; a successor waits on the release). */
#define EVENTS_STOP_BUDGET (5 * USEC_PER_SEC)

/* ---- event handlers: map every change to the owning Sandbox's key ------------------- */

static void enqueue_obj(struct ctrl_manager *m, const json_t *obj)
{
    char key[LIMIT_KUBE_STORE_KEY + 1];
    if (kube_store_key(obj, key, sizeof(key)) >= 0)
        wq_add(workloop_queue(m->loop), key);
}

static void sb_add(void *ctx, const json_t *obj)
{
    enqueue_obj(ctx, obj);
}

/* The Sandbox is gone: its dependents to the cascade, its remembered busy time dropped. */
static void sb_gone(struct ctrl_manager *m, const json_t *obj)
{
    (void)cascade_owner_deleted(m->cascade, CASCADE_OF_SANDBOX, kube_obj_namespace(obj),
                                kube_obj_uid(obj));
    if (m->idle)
        idle_ctrl_forget(m->idle, kube_obj_uid(obj));
}

static void sb_update(void *ctx, const json_t *old_obj, const json_t *new_obj)
{
    /* deleted and made again while the watch was down (a re-list's update): the first
     * one's Pod, named as the new one's, would otherwise wait for the garbage collector */
    if (kube_obj_uid_changed(old_obj, new_obj))
        sb_gone(ctx, old_obj);
    enqueue_obj(ctx, new_obj);
}

static void sb_delete(void *ctx, const json_t *obj, bool unknown)
{
    (void)unknown;
    enqueue_obj(ctx, obj);
    sb_gone(ctx, obj);
}

/* A child maps to its controlling Sandbox; an uncontrolled one to the Sandbox of the
 * same name, if there is one (a Pod or Service waiting to be adopted or refused). */
static void child_changed(struct ctrl_manager *m, const json_t *obj)
{
    char key[LIMIT_KUBE_STORE_KEY + 1];
    const char *ns = kube_obj_namespace(obj), *name = NULL;
    json_t *sb;
    if (!ns)
        return;
    if (sb_controller_is(obj, SB_GROUP, SB_KIND))
        name = json_string_value(json_object_get(kube_obj_controller_ref(obj), "name"));
    else if (sb_uncontrolled(obj))
        name = kube_obj_name(obj);
    if (!name)
        return;
    if (snprintf(key, sizeof(key), "%s/%s", ns, name) >= (int)sizeof(key))
        return;
    sb = kube_store_get(kube_informer_store(m->inf[CTRL_INF_SANDBOX]), key);
    if (sb || sb_controller_is(obj, SB_GROUP, SB_KIND))
        wq_add(workloop_queue(m->loop), key);
    json_decref(sb);
}

static void child_add(void *ctx, const json_t *obj)
{
    child_changed(ctx, obj);
}

static void child_update(void *ctx, const json_t *old_obj, const json_t *new_obj)
{
    child_changed(ctx, new_obj);
    if (!json_equal(kube_obj_controller_ref(old_obj), kube_obj_controller_ref(new_obj)))
        child_changed(ctx, old_obj);
}

static void child_delete(void *ctx, const json_t *obj, bool unknown)
{
    struct ctrl_manager *m = ctx;
    (void)unknown;
    sb_memo_created_gone(m->memo, obj); /* sandbox_memo.h: its record, if any, goes */
    child_changed(ctx, obj);
}

/* ---- workers ---------------------------------------------------------------------- */

static int reconcile_one(void *ctx, const char *key, usec_t *ret_requeue)
{
    struct ctrl_manager *m = ctx;
    struct sb_result res = {0};
    int rc = sb_reconcile(&m->rec, key, &res);
    *ret_requeue = res.requeue_after;
    return rc;
}

/* The Sandbox workers' caches: the manager's informers. */
static int caches_wait(void *ctx, usec_t timeout)
{
    struct ctrl_manager *m = ctx;
    usec_t end = clock_now() + timeout;
    for (int i = 0; i < CTRL_INF_COUNT; i++) {
        usec_t now = clock_now();
        int r;
        if (!m->inf[i])
            return -ECANCELED;
        r = kube_informer_wait_for_sync(m->inf[i], now < end ? end - now : 0);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Starts the workers once (on taking the lead, or at start without election). */
static void start_workers(struct ctrl_manager *m)
{
    pthread_mutex_lock(&m->lock);
    if (!m->workers_started && !atomic_load(&m->stopping)) {
        /* Not inside log_info: it skips its arguments below the log level. */
        int n = workloop_start(m->loop);
        m->workers_started = true;
        log_info("workers started\tworkers=%d", n);
        if (m->ext)
            ext_ctrl_start_workers(m->ext);
        /* Owners deleted while no leader watched: the cascade sweeps once synced. */
        cascade_request_sweep(m->cascade);
    }
    pthread_mutex_unlock(&m->lock);
}

static void wake(struct ctrl_manager *m)
{
    char c = 1;
    ssize_t r = write(m->wake_fd[1], &c, 1);
    (void)r;
}

static void on_started_leading(void *ctx)
{
    struct ctrl_manager *m = ctx;
    atomic_store(&m->leading, true);
    metric_set(m->met.leader, (const char *const[]){m->lease_name}, 1);
    log_info("became leader\tlease=%s/%s identity=%s", m->lease_ns, m->lease_name, m->identity);
    start_workers(m);
}

static void on_stopped_leading(void *ctx)
{
    struct ctrl_manager *m = ctx;
    atomic_store(&m->leading, false);
    metric_set(m->met.leader, (const char *const[]){m->lease_name}, 0);
    if (atomic_load(&m->stopping))
        return;
    /* Another instance may act on our Sandboxes now: stop at once (and be restarted). */
    log_error("leadership lost, stopping\tlease=%s/%s", m->lease_ns, m->lease_name);
    atomic_store(&m->lost, true);
    wake(m);
}

/* ---- construction ----------------------------------------------------------------- */

/* A random (version 4) UUID, as client-go appends to the leader-election identity. */
static void random_uuid(char *out, size_t size)
{
    uint8_t b[16];
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
        usec_t t = clock_now() ^ clock_wall_now();
        for (size_t i = 0; i < sizeof(b); i++)
            b[i] = (uint8_t)((t >> (8 * (i % 8))) ^ ((unsigned)getpid() >> (i % 4)));
    }
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    (void)snprintf(out, size,
                   "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                   b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                   b[14], b[15]);
}

/* "<POD_NAME or hostname>_<random UUID>": unique per process, so a restarted process
 * never mistakes its predecessor's unexpired Lease for its own. */
static void default_identity(char *out, size_t size)
{
    char host[256] = "controller", uuid[40];
    const char *pod = getenv("POD_NAME");
    if (pod && *pod && strlen(pod) < sizeof(host))
        (void)snprintf(host, sizeof(host), "%s", pod);
    else if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
        (void)snprintf(host, sizeof(host), "controller");
    host[sizeof(host) - 1] = '\0';
    random_uuid(uuid, sizeof(uuid));
    (void)snprintf(out, size, "%s_%s", host, uuid);
}

int ctrl_manager_new(const struct ctrl_opts *opts, struct ctrl_manager **ret)
{
    struct ctrl_manager *m;
    char id[320];
    if (!opts || !opts->client)
        return -EINVAL;
    m = XNEW(struct ctrl_manager);
    m->opts = *opts;
    m->ns = opts->ns && *opts->ns ? xstrdup(opts->ns) : NULL;
    m->cluster_domain = xstrdup(opts->cluster_domain ? opts->cluster_domain : "cluster.local");
    m->lease_ns = xstrdup(opts->lease_ns && *opts->lease_ns ? opts->lease_ns
                                                            : kube_client_namespace(opts->client));
    m->lease_name = xstrdup(opts->lease_name ? opts->lease_name : CTRL_DEFAULT_LEASE_ID);
    default_identity(id, sizeof(id));
    m->identity = xstrdup(opts->identity ? opts->identity : id);
    m->metrics_addr = opts->metrics_addr ? xstrdup(opts->metrics_addr) : NULL;
    m->health_addr = opts->health_addr ? xstrdup(opts->health_addr) : NULL;
    m->opts.ns = m->ns;
    m->memo = sb_memo_new();
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->cond, NULL);
    if (pipe2(m->wake_fd, O_CLOEXEC | O_NONBLOCK) < 0) {
        int r = -errno;
        m->wake_fd[0] = m->wake_fd[1] = -1;
        ctrl_manager_free(m);
        return r;
    }
    ctrl__metrics_init(m);
    *ret = m;
    return 0;
}

/* ---- start ------------------------------------------------------------------------ */

static int new_informer(struct ctrl_manager *m, int which, const struct kube_res *res,
                        bool tracked_only, kube_store_transform_fn *tf)
{
    struct kube_informer_opts o = {
        .client = m->opts.client,
        .res = res,
        .ns = m->ns,
        .label_selector = which != CTRL_INF_SANDBOX && m->opts.child_cache_selector
                              ? m->opts.child_cache_selector
                          : tracked_only ? SB_LABEL_NAME_HASH
                                         : NULL,
        .transform = tf,
        .compact_store = m->opts.compact_cache,
        .compact_above = m->opts.compact_above,
    };
    struct kube_informer_source src;
    struct kube_informer_handlers sh = {
        .on_add = sb_add, .on_update = sb_update, .on_delete = sb_delete, .ctx = m};
    struct kube_informer_handlers ch = {
        .on_add = child_add, .on_update = child_update, .on_delete = child_delete, .ctx = m};
    int r = ctrl_ns_source_for(m->ns, &m->nss[which], &src);
    if (r < 0)
        return r;
    if (m->nss[which]) {
        o.ns = NULL;
        o.source = &src;
    }
    r = kube_informer_new(&o, &m->inf[which]);
    if (r < 0)
        return r;
    if (which != CTRL_INF_SANDBOX)
        r = kube_informer_add_index(m->inf[which], SB_INDEX_OWNER, kube_index_controller_uid, NULL);
    if (r >= 0)
        r = kube_informer_add_handlers(m->inf[which], which == CTRL_INF_SANDBOX ? &sh : &ch);
    return r;
}

/* The Pod metadata patches' gate: held while claims are served (no claims without the
 * extensions). */
static struct yield_gate pod_meta_gate(const struct ctrl_manager *m)
{
    usec_t hold = m->opts.pod_meta_hold ? m->opts.pod_meta_hold : CTRL_DEFAULT_POD_META_HOLD;
    if (m->opts.pod_meta_gate)
        return *m->opts.pod_meta_gate;
    if (!m->ext || hold == CTRL_POD_META_HOLD_OFF)
        return (struct yield_gate){0};
    return (struct yield_gate){.busy = ext_ctrl_claims_busy, .ctx = m->ext, .max_wait = hold};
}

/* A deleted Sandbox's Pod and Service, for the cascade (the claims' and pools' Sandboxes:
 * ext_ctrl_attach). Not its PVCs: the controller may not delete PVCs (config/rbac), the
 * garbage collector does. */
static int cascade_children(struct ctrl_manager *m)
{
    static const struct {
        int inf;
        const struct kube_res *res;
    } kids[] = {{CTRL_INF_POD, &KUBE_RES_PODS}, {CTRL_INF_SERVICE, &KUBE_RES_SERVICES}};
    int r = 0;
    for (size_t i = 0; i < ARRAY_SIZE(kids) && r >= 0; i++)
        r = cascade_add_dependent(m->cascade, CASCADE_OF_SANDBOX, kids[i].res,
                                  kube_informer_store(m->inf[kids[i].inf]), SB_INDEX_OWNER);
    if (r >= 0) /* for the sweep: a Pod or Service whose Sandbox is gone from this cache */
        r = cascade_add_owner(m->cascade, CASCADE_OF_SANDBOX, &API_RES_SANDBOXES,
                              kube_informer_store(m->inf[CTRL_INF_SANDBOX]));
    return r;
}

static int start_informers(struct ctrl_manager *m)
{
    bool sel = m->opts.cache_label_selectors;
    int r =
        new_informer(m, CTRL_INF_SANDBOX, &API_RES_SANDBOXES, false, kube_store_strip_transform);
    if (r >= 0)
        r = new_informer(m, CTRL_INF_POD, &KUBE_RES_PODS, sel, ctrl_pod_transform);
    if (r >= 0)
        r = new_informer(m, CTRL_INF_SERVICE, &KUBE_RES_SERVICES, sel, kube_store_strip_transform);
    if (r >= 0)
        r = new_informer(m, CTRL_INF_PVC, &KUBE_RES_PVCS, false, kube_store_strip_transform);
    if (r >= 0)
        r = cascade_children(m);
    if (r >= 0 && m->ext)
        r = ext_ctrl_attach(m->ext, m->inf[CTRL_INF_SANDBOX], m->inf[CTRL_INF_POD]);
    for (int i = 0; r >= 0 && i < CTRL_INF_COUNT; i++)
        r = kube_informer_start(m->inf[i]);
    if (r >= 0 && m->ext)
        r = ext_ctrl_start(m->ext);
    if (r < 0)
        return log_error_errno(r, "cannot start informers");
    m->rec = (struct sb_reconciler){
        .client = m->opts.client,
        .sandboxes = kube_informer_store(m->inf[CTRL_INF_SANDBOX]),
        .pods = kube_informer_store(m->inf[CTRL_INF_POD]),
        .services = kube_informer_store(m->inf[CTRL_INF_SERVICE]),
        .pvcs = kube_informer_store(m->inf[CTRL_INF_PVC]),
        .cluster_domain = m->cluster_domain,
        .status_window = m->opts.status_window == CTRL_STATUS_WINDOW_OFF ? 0
                         : m->opts.status_window                         ? m->opts.status_window
                                                 : CTRL_DEFAULT_STATUS_WINDOW,
        .pod_name_annotation_always = m->opts.pod_name_annotation_always,
        .keep_managed_fields = m->opts.ext.keep_managed_fields,
        .pod_meta_gate = pod_meta_gate(m),
        .owner_gone = m->ext ? ext_ctrl_owner_claim_gone : NULL,
        .owner_gone_ctx = m->ext,
        .memo = m->memo,
        .idle = m->idle, /* made before the informers (start_idle) */
    };
    return 0;
}

/* The client's write gate while this manager elects a leader: its writes go only while
 * it leads, but for the Lease itself and token and access reviews (the secure metrics
 * server's, on every replica). */
static bool may_write(void *ctx, const struct kube_req *r)
{
    struct ctrl_manager *m = ctx;
    return r->res == &KUBE_RES_LEASES || r->res == &KUBE_RES_TOKENREVIEWS ||
           r->res == &KUBE_RES_SUBJECTACCESSREVIEWS || ctrl_manager_leading(m);
}

static int start_election(struct ctrl_manager *m)
{
    struct lease_opts lo = {
        .ns = m->lease_ns,
        .name = m->lease_name,
        .identity = m->identity,
        .lease_duration = m->opts.lease_duration,
        .renew_deadline = m->opts.renew_deadline,
        .retry_period = m->opts.retry_period,
        .cb = {.ctx = m,
               .started_leading = on_started_leading,
               .stopped_leading = on_stopped_leading},
    };
    int r;
    lease_api_kube(m->opts.client, &lo.api);
    r = lease_elector_new(&lo, &m->elector);
    if (r >= 0) {
        m->gate = (struct kube_write_gate){.may = may_write, .ctx = m};
        kube_client_set_write_gate(m->opts.client, &m->gate);
        r = lease_elector_start(m->elector);
    }
    if (r < 0)
        return log_error_errno(r, "cannot start leader election");
    metric_set(m->met.leader, (const char *const[]){m->lease_name}, 0);
    log_info("leader election started\tlease=%s/%s identity=%s", m->lease_ns, m->lease_name,
             m->identity);
    return 0;
}

static int start_events(struct ctrl_manager *m)
{
    struct events_opts eo = {.component = SB_EVENT_SOURCE, .instance = m->identity};
    int r;
    if (!m->opts.events)
        return 0;
    events_api_kube(m->opts.client, &eo.api);
    r = events_recorder_new(&eo, &m->events);
    if (r < 0)
        return log_error_errno(r, "cannot start the events recorder");
    return 0;
}

static void start_idle(struct ctrl_manager *m)
{
    struct idle_ctrl_opts io = {.client = m->opts.client,
                                .events = m->events,
                                .metrics = m->met.reg,
                                .probe_port = m->opts.idle_probe_port,
                                .probe = m->opts.idle_probe,
                                .probe_ctx = m->opts.idle_probe_ctx};
    m->idle = idle_ctrl_new(&io); /* the reconciler gets it with the stores */
}

/* Only the leader deletes, and not once it stops. */
static bool cascade_active(void *ctx)
{
    struct ctrl_manager *m = ctx;
    return atomic_load(&m->leading) && !atomic_load(&m->stopping) && !atomic_load(&m->lost);
}

static bool cascade_synced(void *ctx)
{
    return ctrl__synced(ctx);
}

static int start_cascade(struct ctrl_manager *m)
{
    static const char *const labels[] = {"kind", "result", NULL};
    struct cascade_opts co = {
        .client = m->opts.client,
        .delay = m->opts.dependent_delay,
        .active = cascade_active,
        .synced = cascade_synced,
        .active_ctx = m,
        .deletions = metrics_counter(m->met.reg, "agent_sandbox_dependent_deletions_total",
                                     "DELETEs of a deleted owner's dependents the garbage "
                                     "collector had not deleted, by kind and result.",
                                     labels),
    };
    int r = cascade_new(&co, &m->cascade);
    if (r < 0)
        return log_error_errno(r, "cannot start the dependents' deletion");
    return 0;
}

int ctrl_manager_start(struct ctrl_manager *m)
{
    struct workloop_opts lo = {.name = CTRL_NAME,
                               .workers = m->opts.workers > 0 ? m->opts.workers : 100,
                               .min_workers =
                                   m->opts.worker_idle == USEC_INFINITY ? 0 : WORKLOOP_ELASTIC_MIN,
                               .idle_exit = m->opts.worker_idle,
                               .reconcile = reconcile_one,
                               .requeue_on_error = true, /* shutdownTime timers */
                               .wait_synced = caches_wait,
                               .ctx = m,
                               .metrics = &m->met};
    int r;
    if (atomic_exchange(&m->started, true))
        return -EALREADY;
    r = workloop_new(&lo, &m->loop);
    if (r < 0)
        return r;
    r = start_events(m);
    if (r >= 0)
        r = start_cascade(m);
    if (r >= 0 && m->opts.extensions) {
        struct ext_deps d = {.client = m->opts.client,
                             .ns = m->ns,
                             .events = m->events,
                             .metrics = &m->met,
                             .memo = m->memo,
                             .cascade = m->cascade};
        r = ext_ctrl_new(&m->opts.ext, &d, &m->ext);
    }
    if (r >= 0)
        start_idle(m); /* before the informers: their Sandbox deletions forget in it */
    if (r >= 0)
        r = start_informers(m);
    if (r >= 0)
        m->rec.events = m->events;
    if (r >= 0)
        r = ctrl__servers_start(m);
    if (r < 0)
        return r;
    if (m->opts.leader_elect)
        return start_election(m);
    atomic_store(&m->leading, true);
    start_workers(m);
    return 0;
}

/* ---- run, stop, free ---------------------------------------------------------------- */

int ctrl_manager_wait_synced(struct ctrl_manager *m, usec_t timeout)
{
    usec_t end = clock_now() + timeout;
    int r = caches_wait(m, timeout);
    if (r < 0)
        return r;
    if (m->ext) {
        usec_t now = clock_now();
        return ext_ctrl_wait_synced(m->ext, now < end ? end - now : 0);
    }
    return 0;
}

bool ctrl__synced(struct ctrl_manager *m)
{
    for (int i = 0; i < CTRL_INF_COUNT; i++)
        if (!m->inf[i] || !kube_informer_has_synced(m->inf[i]))
            return false;
    return !m->ext || ext_ctrl_synced(m->ext);
}

void ctrl_manager_request_stop(struct ctrl_manager *m)
{
    atomic_store(&m->stop_requested, true);
    wake(m);
}

/* A leader whose renew deadline passed while the election thread has not reported it
 * (blocked): treated as lost, so work stops before the Lease can expire for others. */
static void check_lease_valid(struct ctrl_manager *m)
{
    if (!m->elector || !atomic_load(&m->leading) || lease_elector_is_leader(m->elector))
        return;
    if (atomic_exchange(&m->lost, true))
        return;
    log_error("leadership lost (renew deadline passed), stopping\tlease=%s/%s", m->lease_ns,
              m->lease_name);
}

/* Returns free heap pages to the system once API traffic calms down after a busy
 * spell (heap_trim.h). Called from ctrl_manager_wait's loop. */
static void maybe_trim(struct ctrl_manager *m)
{
    struct kube_client_stats st;
    kube_client_stats(m->opts.client, &st);
    /* A restart's sync reconciles every Sandbox with hardly a request: count both. */
    unsigned long work = st.requests + workloop_reconciles(m->loop);
    if (!heap_trim_due(&m->trim, clock_now(), work))
        return;
    (void)malloc_trim(0);
    log_debug("quiet after a busy spell: free heap pages returned\trequests=%lu", st.requests);
}

int ctrl_manager_wait(struct ctrl_manager *m)
{
    struct pollfd pfd = {.fd = m->wake_fd[0], .events = POLLIN};
    char drain[64];
    while (!atomic_load(&m->stop_requested) && !atomic_load(&m->lost)) {
        if (poll(&pfd, 1, CTRL_LEASE_CHECK_MS) > 0)
            while (read(m->wake_fd[0], drain, sizeof(drain)) > 0) {
            }
        check_lease_valid(m);
        maybe_trim(m);
    }
    return atomic_load(&m->lost) && !atomic_load(&m->stop_requested) ? -ENOLCK : 0;
}

static void stop_workers(struct ctrl_manager *m)
{
    workloop_shutdown(m->loop);
    pthread_mutex_lock(&m->lock);
    /* Under the lock: the elector thread may be inside start_workers, creating the
     * extension workers, when the manager stops (a data race TSan found). */
    ext_ctrl_stop_workers(m->ext);
    workloop_stop(m->loop);
    pthread_mutex_unlock(&m->lock);
}

void ctrl_manager_stop(struct ctrl_manager *m)
{
    if (!m || atomic_exchange(&m->stopped, true))
        return;
    atomic_store(&m->stopping, true);
    log_info("stopping");
    /* Leadership gone (taken, or its renew deadline passed): the side writes and Events
     * waiting are a successor's to make; a stop while leading writes them before the
     * Lease goes. */
    if (m->elector && !ctrl_manager_leading(m)) {
        ext_ctrl_drop_side_writes(m->ext);
        if (m->events)
            events_discard(m->events);
    }
    /* Workers and the cascade's deleters first (running reconciles and DELETEs finish),
     * then the Events they recorded, then the lease goes, so a successor never overlaps
     * with us; the informers and servers last. */
    stop_workers(m);
    cascade_stop(m->cascade);
    /* Bounded: behind a slow API server a full queue (1000 Events) would hold the Lease
     * (and a successor) for minutes; what is left after the budget is dropped. */
    if (m->events && !events_stop_within(m->events, EVENTS_STOP_BUDGET))
        log_warn("Events not written within %d s of the stop were dropped",
                 (int)(EVENTS_STOP_BUDGET / USEC_PER_SEC));
    if (m->elector)
        lease_elector_stop(m->elector);
    /* Every informer is asked before any is joined: each ends its watch at the stream's
     * next progress check (up to a second), so together they take one such wait, not
     * one each (seven informers took 4-5 s to stop one after the other). */
    ext_ctrl_request_stop(m->ext);
    for (int i = 0; i < CTRL_INF_COUNT; i++)
        kube_informer_request_stop(m->inf[i]);
    ext_ctrl_stop(m->ext);
    for (int i = 0; i < CTRL_INF_COUNT; i++)
        if (m->inf[i])
            kube_informer_stop(m->inf[i]);
    ctrl__servers_stop(m);
    atomic_store(&m->leading, false);
}

void ctrl_manager_free(struct ctrl_manager *m)
{
    if (!m)
        return;
    ctrl_manager_stop(m);
    if (m->elector) /* the gate is m's */
        kube_client_set_write_gate(m->opts.client, NULL);
    lease_elector_free(m->elector);
    ext_ctrl_free(m->ext);
    cascade_free(m->cascade);
    for (int i = 0; i < CTRL_INF_COUNT; i++) {
        kube_informer_free(m->inf[i]);
        ctrl_ns_source_free(m->nss[i]);
    }
    events_recorder_free(m->events);
    idle_ctrl_free(m->idle);
    sb_memo_free(m->memo);
    workloop_free(m->loop);
    metrics_registry_free(m->met.reg);
    for (int i = 0; i < 2; i++)
        if (m->wake_fd[i] >= 0)
            close(m->wake_fd[i]);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->cond);
    xfree(m->ns);
    xfree(m->cluster_domain);
    xfree(m->lease_ns);
    xfree(m->lease_name);
    xfree(m->identity);
    xfree(m->metrics_addr);
    xfree(m->health_addr);
    xfree(m);
}

bool ctrl_manager_leading(struct ctrl_manager *m)
{
    return atomic_load(&m->leading) && (!m->elector || lease_elector_is_leader(m->elector));
}

struct metrics_registry *ctrl_manager_metrics(struct ctrl_manager *m)
{
    return m->met.reg;
}

unsigned long ctrl_manager_reconciles(struct ctrl_manager *m)
{
    return m->loop ? workloop_reconciles(m->loop) : 0;
}
