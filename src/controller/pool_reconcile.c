/* SPDX-License-Identifier: Apache-2.0 */
/* SandboxWarmPool reconcile: classify members, plan, delete, create (behind the
 * expectations gate and the refill bucket), write the status. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/res.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/map.h"
#include "common/metrics.h"
#include "common/xalloc.h"
#include "controller/cascade.h"
#include "controller/claim_queue.h"
#include "controller/ext_int.h"
#include "controller/ext_names.h"
#include "controller/latebind_deliver.h"
#include "controller/latebind_spec.h"
#include "controller/pool_expect.h"
#include "controller/pool_plan.h"
#include "controller/sandbox_status.h"
#include "controller/template_build.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "kube/store.h"

struct pool_pass {
    struct ext_ctrl *x;
    const char *key, *ns;
    json_t *pool, *tpl; /* own references; tpl may be NULL */
    struct kube_objv sbs;
    struct pool_member *m;
    char bh[SB_HASH_LEN + 1], th[SB_HASH_LEN + 1];
    usec_t requeue;
    bool expect_ok; /* the pool's expectations were satisfied before the members were read */
    int err;
};

static void requeue_min(struct pool_pass *p, usec_t d)
{
    if (d && (!p->requeue || d < p->requeue))
        p->requeue = d;
}

static bool pod_unschedulable(struct ext_ctrl *x, const json_t *sb)
{
    json_t *pod = kube_store_get_ns(ext__pods(x), kube_obj_namespace(sb), kube_obj_name(sb));
    const json_t *c = kube_obj_condition(pod, SB_COND_POD_SCHEDULED);
    const char *s = json_string_value(json_object_get(c, "status"));
    const char *r = json_string_value(json_object_get(c, "reason"));
    bool yes = pod && !kube_obj_deleting(pod) && s && strcmp(s, "False") == 0 && r &&
               strcmp(r, "Unschedulable") == 0;
    json_decref(pod);
    return yes;
}

/* True when sb was built from another template than the one the pool names now (the
 * pool was switched to another) and that template is gone, with its NetworkPolicy: it
 * is not handed out (claim_adopt.c) and is replaced whatever the update strategy. A
 * member of an earlier template that still exists is only stale (Recreate replaces it;
 * OnReplenish hands it out, as upstream). Not while the pool's template is missing: the
 * pool could not refill. */
static bool member_other_template(struct pool_pass *p, const json_t *sb)
{
    return p->tpl && ext__former_template_gone(p->x, p->th, sb);
}

static bool member_stale(struct pool_pass *p, const json_t *sb)
{
    return p->tpl && tpl_member_stale(p->tpl, p->th, p->bh, sb);
}

/* Fills p->m from the pool's members; returns how many. */
static size_t classify(struct pool_pass *p)
{
    const char *uid = kube_obj_uid(p->pool);
    usec_t now = clock_now();
    size_t n = 0;
    p->m = xcalloc(p->sbs.n ? p->sbs.n : 1, sizeof(*p->m));
    for (size_t i = 0; i < p->sbs.n; i++) {
        const json_t *sb = p->sbs.v[i];
        const char *ct = kube_obj_path_str(sb, "metadata.creationTimestamp");
        struct pool_member *m = &p->m[n];
        if (!sb_controlled_by(sb, uid))
            continue; /* labelled like ours but controlled by someone else: not ours */
        m->sb = sb;
        m->terminating = kube_obj_deleting(sb) ||
                         pool_expect_deleting(p->x->expect, p->key, kube_obj_uid(sb), now);
        m->ready = kube_obj_condition_true(sb, SB_COND_READY);
        m->stale = member_stale(p, sb);
        m->other_template = member_other_template(p, sb);
        if (ct)
            (void)clock_parse_rfc3339(ct, &m->created);
        m->unschedulable = !m->ready && pod_unschedulable(p->x, sb);
        n++;
    }
    return n;
}

/* A member's DELETE failed without a certain outcome: the member is read. True when the
 * DELETE took (the member is gone or being deleted) or the read fails too: its deletion
 * then stays expected until its event or the expectation's timeout, so the next pass
 * does not delete another in its place (a member deleted twice over is a claim's wait
 * for the refill). False when the member is there and not being deleted. */
static bool delete_took(struct pool_pass *p, const json_t *sb)
{
    json_t *cur = NULL;
    struct kube_err e;
    bool took;
    switch (ext__sb_read(p->x, p->ns, kube_obj_name(sb), kube_obj_uid(p->pool), &cur, &e)) {
    case EXT_SB_GONE:
    case EXT_SB_UNKNOWN:
        return true;
    case EXT_SB_OURS:
    case EXT_SB_OTHER:
        break;
    }
    took = strcmp(kube_obj_uid(cur) ?: "", kube_obj_uid(sb) ?: "") != 0 || kube_obj_deleting(cur);
    json_decref(cur);
    return took;
}

/* Runs worker(job) on this thread and on up to --sandbox-warm-pool-create-parallelism - 1
 * more (no more than total - 1), and waits for them: the workers share total items. */
static void fan_out(struct pool_pass *p, int total, void *(*worker)(void *), void *job)
{
    pthread_t t[LIMIT_EXT_CREATE_PARALLEL - 1];
    int nt = 0, par = p->x->o.create_parallel > 0 ? p->x->o.create_parallel : 1;
    if (par > LIMIT_EXT_CREATE_PARALLEL)
        par = LIMIT_EXT_CREATE_PARALLEL;
    while (nt < total - 1 && nt < par - 1 && pthread_create(&t[nt], NULL, worker, job) == 0)
        nt++;
    (void)worker(job);
    for (int i = 0; i < nt; i++)
        pthread_join(t[i], NULL);
}

/* Deletes member sb. Returns 0, or a negative errno worth a retry of the pass. */
static int delete_one(struct pool_pass *p, const json_t *sb)
{
    struct kube_err e;
    pool_expect_deletion(p->x->expect, p->key, kube_obj_uid(sb), clock_now());
    /* With the member's resourceVersion as a precondition: a claim may have adopted it
     * since the cache showed it (a large scale-down's deletions take a while), and an
     * adopted Sandbox is the claim's. A refusal (409) means the member changed; its update
     * event brings the pool back to look again. */
    if (kube_delete_obj(p->x->d.client, &API_RES_SANDBOXES, sb, true, NULL, &e) < 0 &&
        !(kube_err_outcome_unknown(&e) && delete_took(p, sb))) {
        pool_expect_deletion_observed(p->x->expect, p->key, kube_obj_uid(sb));
        if (!kube_err_is_not_found(&e) && !kube_err_is_conflict(&e))
            return e.code ? e.code : -EIO;
        return 0;
    }
    cascade_sandbox_deleted(p->x->d.cascade, sb); /* its Pod goes with it */
    return 0;
}

/* The planned deletions shared by up to --sandbox-warm-pool-create-parallelism threads, as
 * the creates are (fan_out); the first error stops new ones. */
struct delete_job {
    struct pool_pass *p;
    const struct pool_plan *plan;
    pthread_mutex_t lock;
    size_t next;
};

static void *delete_worker(void *arg)
{
    struct delete_job *j = arg;
    for (;;) {
        size_t i = SIZE_MAX;
        int r;
        pthread_mutex_lock(&j->lock);
        if (j->p->err == 0 && j->next < j->plan->ndel)
            i = j->next++;
        pthread_mutex_unlock(&j->lock);
        if (i == SIZE_MAX)
            return NULL;
        r = delete_one(j->p, j->p->m[j->plan->del[i]].sb);
        pthread_mutex_lock(&j->lock);
        if (r < 0 && !j->p->err)
            j->p->err = r;
        pthread_mutex_unlock(&j->lock);
    }
}

static void delete_members(struct pool_pass *p, const struct pool_plan *plan)
{
    struct delete_job j = {.p = p, .plan = plan};
    if (plan->ndel == 0)
        return;
    pthread_mutex_init(&j.lock, NULL);
    fan_out(p, (int)plan->ndel, delete_worker, &j);
    pthread_mutex_destroy(&j.lock);
}

static double refill_rate(struct pool_pass *p)
{
    const char *a = kube_obj_annotation(p->pool, EXT_ANN_REFILL_RATE);
    char *end;
    double v;
    if (!a)
        return p->x->o.refill_rate;
    v = strtod(a, &end);
    return end != a && !*end && v >= 0 && v < 1e6 ? v : p->x->o.refill_rate;
}

/* The pool's refill state; call with x->lock held. */
static struct pool_bucket *bucket_of(struct pool_pass *p)
{
    struct pool_bucket *b = map_get(p->x->buckets, p->key);
    if (!b) {
        b = XNEW(struct pool_bucket);
        map_put(p->x->buckets, p->key, b, NULL);
    }
    return b;
}

/* True when the claim's Ready reason says it will take no Sandbox: its spec must change
 * first (its metadata, env or volume templates refused) or it is over (expired, timed
 * out). */
static bool claim_settled(const json_t *claim)
{
    static const char *const reasons[] = {EXT_R_INVALID_METADATA, EXT_R_ENV_REJECTED,
                                          EXT_R_VCT_ERROR, EXT_R_CLAIM_EXPIRED,
                                          EXT_R_CLAIM_TIMEOUT};
    const char *r =
        json_string_value(json_object_get(kube_obj_condition(claim, SB_COND_READY), "reason"));
    for (size_t i = 0; r && i < sizeof(reasons) / sizeof(reasons[0]); i++)
        if (strcmp(r, reasons[i]) == 0)
            return true;
    return false;
}

/* True when the claim's last pass failed (ReconcilerError): it is retried after a back-off
 * that may be long, not served from the candidates in the next moments. */
static bool claim_erring(const json_t *claim)
{
    const char *r =
        json_string_value(json_object_get(kube_obj_condition(claim, SB_COND_READY), "reason"));
    return r && strcmp(r, SB_R_RECONCILER_ERROR) == 0;
}

/* True when a claim on this pool waits for adoption: not deleting, no status.sandbox,
 * not failed for good nor erring, and no binding of this process that the cache does not
 * show yet. */
static bool claims_waiting(struct pool_pass *p)
{
    struct kube_objv v = {0};
    bool yes = false;
    kube_store_by_index(ext__store(p->x, EXT_INF_CLAIM), EXT_IDX_CLAIM_POOL, p->key, &v);
    for (size_t i = 0; i < v.n && !yes; i++) {
        if (kube_obj_path_str(v.v[i], "status.sandbox.name") || kube_obj_deleting(v.v[i]) ||
            claim_settled(v.v[i]) || claim_erring(v.v[i]))
            continue;
        yes = !ext__binding_has(p->x, kube_obj_uid(v.v[i]));
    }
    kube_objv_done(&v);
    return yes;
}

/* The refill waits (bounded, pool_defer_check) while claims wait for the candidates that
 * are queued for them. Returns the delay to re-check after, or 0 to create now. */
static usec_t refill_defer(struct pool_pass *p)
{
    bool waiting = claim_queue_len(p->x->cq, p->key) > 0 && claims_waiting(p);
    usec_t wait;
    pthread_mutex_lock(&p->x->lock);
    wait = pool_defer_check(&bucket_of(p)->defer, waiting, clock_now(), POOL_REFILL_DEFER_MAX,
                            POOL_REFILL_DEFER_RECHECK);
    pthread_mutex_unlock(&p->x->lock);
    if (wait)
        log_debug("refill waits for claims\tpool=%s", p->key);
    return wait;
}

/* Takes refill tokens; returns how many creates may go now. */
static int take_tokens(struct pool_pass *p, int want, double rate)
{
    struct pool_bucket *b;
    usec_t wait = 0;
    int granted;
    pthread_mutex_lock(&p->x->lock);
    b = bucket_of(p);
    granted = pool_bucket_take(b, rate, want, clock_now(), &wait);
    pthread_mutex_unlock(&p->x->lock);
    if (!granted)
        requeue_min(p, wait);
    return granted;
}

static void refund_tokens(struct pool_pass *p, int n, double rate)
{
    struct pool_bucket *b;
    pthread_mutex_lock(&p->x->lock);
    b = map_get(p->x->buckets, p->key);
    if (b)
        pool_bucket_refund(b, rate, n);
    pthread_mutex_unlock(&p->x->lock);
}

/* A member under a name of our own choosing, so its pod-name annotation (the Pod gets the
 * Sandbox's name) goes into the create instead of a patch once the Pod exists. A name
 * collision retries with another name, unless the client retried the POST after a 5xx:
 * then the name is taken by the member the first attempt made, and another name would
 * make a second one (an over-create). */
static int create_named(struct pool_pass *p, const json_t *sb, struct kube_err *e)
{
    char name[LB_NAME_MAX + 1];
    int r = -EEXIST;
    for (int attempt = 0; attempt < 3 && r == -EEXIST; attempt++) {
        json_t *copy, *meta;
        if ((r = lb_member_name(sb, name, sizeof(name))) < 0) {
            kube_err_clear(e);
            e->code = r;
            (void)snprintf(e->message, sizeof(e->message), "no member name: errno %d", -r);
            return r;
        }
        copy = json_deep_copy(sb);
        meta = json_object_get(copy, "metadata");
        json_object_del(meta, "generateName");
        json_object_set_new(meta, "name", json_string(name));
        json_object_set_new(ext_obj_ensure(meta, "annotations"), SB_ANN_POD_NAME,
                            json_string(name));
        r = kube_create(p->x->d.client, &API_RES_SANDBOXES, p->ns, copy, NULL, e);
        if (r < 0 && kube_err_is_already_exists(e) && e->maybe_done) {
            /* A retry after a 5xx met the object its first attempt made: it is our
             * member (its ADDED meets this create's expectation), not a name clash. */
            log_info("pool member created by an earlier attempt\tpool=%s sandbox=%s", p->key, name);
            r = 0;
        } else if (r < 0 && kube_err_is_already_exists(e)) {
            r = -EEXIST;
        } else if (r < 0 && kube_err_outcome_unknown(e)) {
            r = ext__member_settle(p->x, p->ns, name, kube_obj_uid(p->pool), r, e, NULL);
        }
        json_decref(copy);
    }
    return r;
}

/* One member; a late-bound template's members get their config-token Secret too. */
static int create_one(struct pool_pass *p, const json_t *sb, bool late, struct kube_err *e)
{
    if (late)
        return lb_pool_create(p->x, p->key, sb, e);
    return create_named(p, sb, e);
}

/* Creates shared by up to --sandbox-warm-pool-create-parallelism threads (at most
 * LIMIT_EXT_CREATE_PARALLEL); the first error stops new ones. */
struct create_job {
    struct pool_pass *p;
    const json_t *sb;
    bool late;
    pthread_mutex_t lock;
    int next, total, ok;
    int unsure; /* creates that may have been made (ext__member_settle's -EINPROGRESS) */
};

static void *create_worker(void *arg)
{
    struct create_job *j = arg;
    for (;;) {
        struct kube_err e;
        bool go;
        int r;
        pthread_mutex_lock(&j->lock);
        go = j->p->err == 0 && j->next < j->total;
        j->next += go;
        pthread_mutex_unlock(&j->lock);
        if (!go)
            return NULL;
        r = create_one(j->p, j->sb, j->late, &e);
        pthread_mutex_lock(&j->lock);
        if (r >= 0)
            j->ok++;
        else if (r == -EINPROGRESS)
            j->unsure++;
        if (r < 0 && !j->p->err) {
            if (e.ns_terminating) /* the pool goes with its namespace */
                log_debug("pool create failed\tpool=%s detail=\"%s\"", j->p->key, e.message);
            else
                log_warn("pool create failed\tpool=%s detail=\"%s\"", j->p->key, e.message);
            j->p->err = e.code ? e.code : -EIO;
        }
        pthread_mutex_unlock(&j->lock);
    }
}

/* Runs total creates of sb, in parallel when there are several; returns how many worked,
 * and in *ret_unsure how many may have. */
static int create_parallel(struct pool_pass *p, const json_t *sb, bool late, int total,
                           int *ret_unsure)
{
    struct create_job j = {.p = p, .sb = sb, .late = late, .total = total};
    pthread_mutex_init(&j.lock, NULL);
    fan_out(p, total, create_worker, &j);
    pthread_mutex_destroy(&j.lock);
    *ret_unsure = j.unsure;
    return j.ok;
}

static void create_members(struct pool_pass *p, int want)
{
    struct tpl_pool_opts o = {.eviction = !p->x->o.no_eviction};
    double rate = refill_rate(p);
    int granted, ok = 0, unsure = 0;
    struct lb_policy lb;
    usec_t defer = refill_defer(p);
    json_t *sb;
    if (!p->expect_ok) {
        /* a create of ours may be missing from the members this pass counted */
        requeue_min(p, LIMIT_EXT_EXPECT_RECHECK);
        return;
    }
    if (defer) {
        requeue_min(p, defer);
        return;
    }
    granted = take_tokens(p, want, rate);
    if (!granted)
        return;
    if (!pool_expect_try_creations(p->x->expect, p->key, kube_obj_uid(p->pool), granted,
                                   clock_now())) {
        refund_tokens(p, granted, rate);
        requeue_min(p, LIMIT_EXT_EXPECT_RECHECK);
        log_debug("waiting for in-flight creates/deletes\tpool=%s", p->key);
        return;
    }
    sb = tpl_pool_sandbox(p->pool, p->tpl, &o);
    lb_policy_of(p->tpl, &lb);
    ok = create_parallel(p, sb, lb.late_bound, granted, &unsure);
    json_decref(sb);
    if (ok + unsure < granted) /* the unsure stay expected: see ext__member_settle */
        pool_expect_lower_creations(p->x->expect, p->key, kube_obj_uid(p->pool),
                                    granted - ok - unsure);
    if (p->x->met.pool_creates)
        metric_add(p->x->met.pool_creates, (const char *const[]){p->ns, kube_obj_name(p->pool)},
                   ok);
}

static int desired_replicas(struct pool_pass *p)
{
    const json_t *r = kube_obj_path(p->pool, "spec.replicas");
    int max =
        p->x->o.max_pool_replicas > 0 ? p->x->o.max_pool_replicas : LIMIT_EXT_MAX_POOL_REPLICAS;
    json_int_t n = json_is_integer(r) ? json_integer_value(r) : 1;
    if (n < 0)
        n = 0;
    return n > max ? max : (int)n;
}

/* Whether the changed status st may wait (pool_status_wait); requeues the pool if so. */
static bool status_paced(struct pool_pass *p, const json_t *st, int desired)
{
    const json_t *old = json_object_get(p->pool, "status");
    json_int_t ready = json_integer_value(json_object_get(st, "readyReplicas"));
    json_int_t active = json_integer_value(json_object_get(st, "replicas"));
    bool urgent = !json_is_object(old) || (ready == desired && active == desired) ||
                  !json_equal(json_object_get(old, "observedGeneration"),
                              json_object_get(st, "observedGeneration")) ||
                  !json_equal(json_object_get(old, "selector"), json_object_get(st, "selector"));
    usec_t wait;
    pthread_mutex_lock(&p->x->lock);
    wait = pool_status_wait(bucket_of(p)->status_at, clock_now(), POOL_STATUS_INTERVAL, urgent);
    pthread_mutex_unlock(&p->x->lock);
    if (wait)
        requeue_min(p, wait);
    return wait > 0;
}

static void status_written(struct pool_pass *p)
{
    pthread_mutex_lock(&p->x->lock);
    bucket_of(p)->status_at = clock_now();
    pthread_mutex_unlock(&p->x->lock);
}

static void write_status(struct pool_pass *p, const struct pool_plan *plan, int desired)
{
    char sel[128], hash[SB_HASH_LEN + 1];
    json_t *st, *patch;
    struct kube_err e;
    sb_name_hash(kube_obj_name(p->pool), hash);
    (void)snprintf(sel, sizeof(sel), SB_LABEL_WARM_POOL "=%s", hash);
    st = json_pack("{s:i, s:i, s:s, s:I}", "replicas", plan->active, "readyReplicas", plan->ready,
                   "selector", sel, "observedGeneration", (json_int_t)kube_obj_generation(p->pool));
    if (p->x->met.pool_replicas) {
        const char *lv[] = {p->ns, kube_obj_name(p->pool), NULL};
        metric_set(p->x->met.pool_replicas, lv, plan->active);
        metric_set(p->x->met.pool_ready, lv, plan->ready);
    }
    if (!json_equal(st, json_object_get(p->pool, "status")) && !status_paced(p, st, desired)) {
        if (kube_client_ns_terminating(p->x->d.client, p->ns)) {
            /* the pool goes with its namespace: its members' counts are not written */
            if (!p->err)
                p->err = -ESHUTDOWN;
            json_decref(st);
            return;
        }
        patch = json_pack("{s:O}", "status", st);
        if (ext__patch(p->x, &API_RES_SANDBOXWARMPOOLS, p->ns, kube_obj_name(p->pool), "status",
                       patch, NULL, &e) >= 0)
            status_written(p);
        else if (!kube_err_is_not_found(&e) && !p->err)
            p->err = e.code ? e.code : -EIO;
        json_decref(patch);
    }
    json_decref(st);
}

static void run_plan(struct pool_pass *p, size_t n)
{
    const char *strategy = kube_obj_path_str(p->pool, "spec.updateStrategy.type");
    struct pool_plan_in in = {
        .m = p->m,
        .n = n,
        .desired = desired_replicas(p),
        .max_batch = p->x->o.max_batch > 0 ? p->x->o.max_batch : LIMIT_EXT_MAX_BATCH,
        .recreate = strategy && strcmp(strategy, "Recreate") == 0,
        .grace = p->x->o.ready_grace ? p->x->o.ready_grace : LIMIT_EXT_READY_GRACE,
        .now = clock_wall_now(),
    };
    struct pool_plan plan;
    pool_plan_compute(&in, &plan);
    if (plan.ndel && plan.create == 0 &&
        !pool_expect_satisfied(p->x->expect, p->key, kube_obj_uid(p->pool), clock_now()) &&
        plan.active > in.desired) {
        requeue_min(p, LIMIT_EXT_EXPECT_RECHECK); /* excess: wait until our creates are seen */
    } else {
        delete_members(p, &plan);
    }
    if (plan.create > 0 && p->tpl)
        create_members(p, plan.create);
    requeue_min(p, plan.requeue ? plan.requeue + (usec_t)(rand() % 1000) * plan.requeue / 2000 : 0);
    if (plan.held)
        requeue_min(p, LIMIT_EXT_UNSCHED_RECHECK);
    write_status(p, &plan, in.desired);
    pool_plan_done(&plan);
}

/* A pool gone or going: its series go too (a deleted pool's counts would be reported
 * for ever, and its series would count towards the metric's series cap). */
static void metrics_forget(struct ext_ctrl *x, const char *key)
{
    char ns[LIMIT_KUBE_STORE_KEY + 1];
    const char *slash = strchr(key, '/');
    if (!slash || !x->met.pool_replicas || (size_t)(slash - key) >= sizeof(ns))
        return;
    (void)snprintf(ns, sizeof(ns), "%.*s", (int)(slash - key), key);
    const char *lv[] = {ns, slash + 1, NULL};
    (void)metric_remove(x->met.pool_replicas, lv);
    (void)metric_remove(x->met.pool_ready, lv);
    if (x->met.pool_creates)
        (void)metric_remove(x->met.pool_creates, lv);
}

int pool_reconcile(struct ext_ctrl *x, const char *key, usec_t *ret_requeue)
{
    struct pool_pass p = {.x = x, .key = key};
    char idx[512], hash[SB_HASH_LEN + 1];
    const char *tn;
    *ret_requeue = 0;
    p.pool = kube_store_get(ext__store(x, EXT_INF_POOL), key);
    if (!p.pool || kube_obj_deleting(p.pool)) {
        pool_expect_forget(x->expect, key);
        pthread_mutex_lock(&x->lock);
        xfree(map_remove(x->buckets, key));
        pthread_mutex_unlock(&x->lock);
        json_decref(p.pool);
        metrics_forget(x, key);
        return 0;
    }
    p.ns = kube_obj_namespace(p.pool);
    tn = kube_obj_path_str(p.pool, "spec.sandboxTemplateRef.name");
    p.tpl = tn ? kube_store_get_ns(ext__store(x, EXT_INF_TEMPLATE), p.ns, tn) : NULL;
    if (p.tpl) {
        tpl_blueprint_hash(p.tpl, p.bh);
        sb_name_hash(kube_obj_name(p.tpl), p.th);
    }
    sb_name_hash(kube_obj_name(p.pool), hash);
    (void)snprintf(idx, sizeof(idx), "%s/%s", p.ns, hash);
    /* Expectations before the members: the informer lowers them only after its store
     * holds the new Sandbox, so when they are satisfied now, the members read next
     * include every create of ours. Read after, a create seen in between would be
     * missing from the count but no longer expected, and the pool would create one
     * more than it needs (seen as 11 creates for 10 claims in it_test_controller_writes). */
    p.expect_ok = pool_expect_satisfied(x->expect, key, kube_obj_uid(p.pool), clock_now());
    kube_store_by_index(ext__sandboxes(x), EXT_IDX_SB_POOL, idx, &p.sbs);
    run_plan(&p, classify(&p));
    xfree(p.m);
    kube_objv_done(&p.sbs);
    json_decref(p.tpl);
    json_decref(p.pool);
    *ret_requeue = p.requeue;
    return p.err;
}
