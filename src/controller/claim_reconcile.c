/* SPDX-License-Identifier: Apache-2.0 */
/* SandboxClaim reconcile: lifecycle expiry, find the bound Sandbox, else adopt a warm
 * one or create a cold one, then one status write (Ready, sandbox name and IPs). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api/res.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/xalloc.h"
#include "controller/cascade.h"
#include "controller/claim_meta.h"
#include "controller/claim_status.h"
#include "controller/ext_int.h"
#include "controller/ext_metrics.h"
#include "controller/ext_names.h"
#include "controller/latebind_deliver.h"
#include "controller/latebind_spec.h"
#include "controller/sandbox_memo.h"
#include "controller/sandbox_status.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "kube/store.h"

struct claim_pass {
    struct ext_ctrl *x;
    const char *key, *ns, *name, *uid;
    json_t *claim; /* own reference */
    json_t *sb;    /* bound Sandbox (own reference) or NULL */
    struct claim_observed obs;
    char msg[768];
    const char *launch; /* "warm" or "cold" when bound in this pass */
    usec_t requeue;
    int err; /* error worth a rate-limited retry */
    /* a pool member an adoption PATCH of the claim may still land on, as read in the
     * version that PATCH was guarded by (own reference): adopted first, by the same
     * guard; the claim's binding stays until that is settled */
    json_t *prefer;
    bool unsure; /* whether the claim controls its binding's Sandbox is not known: the pass
                    writes nothing and is retried */
};

static void requeue_min(struct claim_pass *p, usec_t d)
{
    if (d && (!p->requeue || d < p->requeue))
        p->requeue = d;
}

static void fail(struct claim_pass *p, const char *reason, bool transient, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void fail(struct claim_pass *p, const char *reason, bool transient, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(p->msg, sizeof(p->msg), fmt, ap);
    va_end(ap);
    p->obs.err_reason = reason;
    p->obs.err_message = p->msg;
    p->obs.transient = transient;
}

/* ---- finding the bound Sandbox ------------------------------------------------------- */

static json_t *sb_get(struct claim_pass *p, const char *name)
{
    return kube_store_get_ns(ext__sandboxes(p->x), p->ns, name);
}

/* True when the cache holds an older version of sb than the one our write returned:
 * its watch has not delivered that write yet, and so nothing after it either. */
static bool cache_behind(const json_t *cached, const json_t *ours)
{
    int c;
    return cached &&
           kube_rv_compare(kube_obj_resource_version(cached), kube_obj_resource_version(ours),
                           &c) == 0 &&
           c < 0;
}

/* Whether an adoption PATCH guarded by the version bound (the binding: the candidate as
 * it was patched) can still be carried out on sb: sb is still a pool's, in that version. */
static bool may_still_land(const json_t *sb, const json_t *bound)
{
    const char *kind = json_string_value(json_object_get(kube_obj_controller_ref(sb), "kind"));
    return kind && strcmp(kind, EXT_KIND_POOL) == 0 && kube_obj_same_version(sb, bound);
}

static json_t *find_by_binding(struct claim_pass *p)
{
    json_t *ours = ext__binding_get(p->x, p->uid), *sb;
    const char *name = kube_obj_name(ours);
    struct kube_err e;
    if (!name) {
        json_decref(ours);
        return NULL;
    }
    sb = sb_get(p, name);
    if (sb && sb_controlled_by(sb, p->uid)) {
        ext__binding_drop(p->x, p->uid); /* the cache has caught up */
    } else if (cache_behind(sb, ours)) {
        /* What our write returned is the newest version we can know of without a read:
         * the cache's next events for it are on their way and requeue the claim. */
        json_decref(sb);
        sb = json_incref(ours);
    } else {
        /* The cache shows no version, or one we cannot order: read the truth once. */
        json_decref(sb);
        switch (ext__sb_read(p->x, p->ns, name, p->uid, &sb, &e)) {
        case EXT_SB_OURS:
            break;
        case EXT_SB_OTHER: /* not ours: an adoption that was not applied (yet) */
            if (may_still_land(sb, ours))
                p->prefer = json_incref(sb); /* the binding stays until it is settled */
            else
                ext__binding_drop(p->x, p->uid);
            json_decref(sb);
            sb = NULL;
            break;
        case EXT_SB_GONE:
            ext__binding_drop(p->x, p->uid);
            break;
        case EXT_SB_UNKNOWN:
            /* The claim may control it. Nothing is taken or created until a read
             * answers (the pass is retried), or the claim could end up with two. */
            p->err = e.code ? e.code : -EIO;
            break;
        }
    }
    json_decref(ours);
    return sb;
}

/* A Sandbox of the claim's that this process deleted: the cache may show it still (its
 * DELETED event is on its way), but it is not the claim's to use. */
static bool deleted_here(struct claim_pass *p, const json_t *sb)
{
    return ext__sb_deleted(p->x, kube_obj_uid(sb));
}

static json_t *find_owned(struct claim_pass *p)
{
    struct kube_objv v = {0};
    const char *want = kube_obj_path_str(p->claim, "status.sandbox.name");
    json_t *sb = NULL;
    size_t live = 0;
    kube_store_by_index(ext__sandboxes(p->x), EXT_IDX_SB_OWNER, p->uid, &v);
    for (size_t i = 0; i < v.n; i++) {
        if (deleted_here(p, v.v[i])) {
            json_decref(v.v[i]);
            v.v[i] = NULL;
        } else {
            live++;
        }
    }
    for (size_t i = 0; i < v.n && !sb; i++)
        if (v.v[i] && (!want || strcmp(kube_obj_name(v.v[i]), want) == 0 || live == 1))
            sb = json_incref(v.v[i]);
    kube_objv_done(&v);
    return sb;
}

static bool find_sandbox(struct claim_pass *p)
{
    json_t *sb = find_by_binding(p);
    if (p->err) {
        p->unsure = true;
        return false;
    }
    if (!sb)
        sb = find_owned(p);
    if (!sb && (sb = sb_get(p, p->name)) && deleted_here(p, sb)) {
        json_decref(sb); /* ours, deleted by an earlier pass: the cache lags */
        sb = NULL;
    }
    if (sb && !sb_controlled_by(sb, p->uid)) {
        fail(p, SB_R_RECONCILER_ERROR, true,
             "Error seen: sandbox %s is not controlled by claim %s. Please use a different claim "
             "name or delete the sandbox manually",
             p->name, p->name);
        json_decref(sb);
        return false;
    }
    p->sb = sb;
    return true;
}

/* ---- provisioning ------------------------------------------------------------------- */

static void count_creation(struct claim_pass *p, const char *launch, const char *pool)
{
    p->launch = launch;
    ext_metrics_creation(&p->x->met, p->claim, p->sb, launch, pool);
    if (!p->x->o.no_claim_events)
        ext__event(p->x, p->claim, false,
                   launch[0] == 'w' ? "SandboxAdopted" : "SandboxProvisioned", "%s Sandbox \"%s\"",
                   launch[0] == 'w' ? "Adopted warm pool" : "Created", kube_obj_name(p->sb));
}

/* A cold create whose outcome is unknown (its answer lost, a 5xx, or a retry of it that
 * met the name taken): the name is read back at once. Returns true when the Sandbox is
 * the claim's, now bound. When the read cannot tell either, the claim's binding keeps the
 * name, so that no later pass takes a warm member or creates until a read answers (the
 * claim could end up with two). */
static bool cold_settle(struct claim_pass *p, const json_t *want, const char *pool)
{
    json_t *cur = NULL;
    switch (ext__sb_read(p->x, p->ns, kube_obj_name(want), p->uid, &cur, NULL)) {
    case EXT_SB_OURS:
        log_info("cold Sandbox created despite an error\tclaim=%s/%s", p->ns, p->name);
        p->sb = cur;
        ext__binding_put(p->x, p->claim, cur);
        count_creation(p, "cold", pool);
        return true;
    case EXT_SB_OTHER:
        json_decref(cur);
        return false;
    case EXT_SB_GONE:
        return false;
    case EXT_SB_UNKNOWN:
        ext__binding_put(p->x, p->claim, want);
        return false;
    }
    return false;
}

/* A cold create whose outcome is unknown: the API server may still carry it out after
 * any read says the name is free (a request it holds, a write etcd commits late). From
 * then on the claim is served cold only (a warm member taken meanwhile would leave it
 * controlling two Sandboxes once that create lands); its creates all use the claim's
 * name, so at most one of them is carried out. Returns true when the Sandbox is read back
 * as the claim's. */
static bool cold_pending(struct claim_pass *p, const json_t *want, const char *pool)
{
    ext__cold_only_mark(p->x, p->uid);
    return cold_settle(p, want, pool);
}

static void cold_create(struct claim_pass *p, const json_t *tpl, const char *pool)
{
    struct claim_err ce = {0};
    struct kube_err e;
    json_t *sb = NULL, *out = NULL;
    if (claim_cold_sandbox(p->claim, tpl, &sb, &ce) < 0) {
        fail(p, ce.reason, false, "%s", ce.message);
        return;
    }
    if (kube_create(p->x->d.client, &API_RES_SANDBOXES, p->ns, sb, &out, &e) >= 0) {
        p->sb = out;
        ext__binding_put(p->x, p->claim, out);
        count_creation(p, "cold", pool);
    } else if ((e.maybe_done || kube_err_outcome_unknown(&e)) && cold_pending(p, sb, pool)) {
        /* made after all: bound */
    } else if (e.ns_terminating) {
        /* The namespace is being deleted and the claim with it: retried with back-off,
         * and not written into the status (it is no fault of the claim). */
        p->err = -ESHUTDOWN;
    } else if (kube_err_is_already_exists(&e)) {
        fail(p, EXT_R_CREATE_PENDING, true,
             "Sandbox already created; waiting for cache to converge");
        requeue_min(p, LIMIT_EXT_CACHE_LAG_REQUEUE);
    } else {
        fail(p, SB_R_RECONCILER_ERROR, true, "Error seen: %s", e.message);
        p->err = e.code ? e.code : -EIO;
    }
    json_decref(sb);
}

/* ---- late-bound configuration (templates with claimConfigDelivery LateBound) ------- */

/* True when the claim's env may go into a warm Sandbox instead of forcing a cold one. */
static bool late_ok(const struct claim_pass *p, const json_t *tpl)
{
    struct claim_err ce = {0};
    return lb_claim_wants(p->claim, tpl) && lb_env_check(p->claim, tpl, &ce) >= 0;
}

/* Delivery failed on a Sandbox the claim never used: drop it and start cold. When the
 * DELETE fails, the status does not name the Sandbox (it never served the claim; a status
 * naming it would say it had: late_used). */
static void late_fallback(struct claim_pass *p, const json_t *tpl, const char *pool)
{
    struct kube_err e;
    if (kube_delete_obj(p->x->d.client, &API_RES_SANDBOXES, p->sb, false, NULL, &e) < 0 &&
        !kube_err_is_not_found(&e)) {
        fail(p, SB_R_RECONCILER_ERROR, true, "Error seen: deleting Sandbox %s: %s",
             kube_obj_name(p->sb), e.message);
        p->err = e.code ? e.code : -EIO;
        json_decref(p->sb);
        p->sb = NULL;
        p->obs.sb_keep = true;
        return;
    }
    cascade_sandbox_deleted(p->x->d.cascade, p->sb); /* its Pod goes with it */
    ext__sb_deleted_put(p->x, kube_obj_uid(p->sb));  /* not bound again from a lagging cache */
    ext__binding_drop(p->x, p->uid);
    ext__cold_only_mark(p->x, p->uid); /* a failed cold create is retried cold, not warm */
    json_decref(p->sb);
    p->sb = NULL;
    cold_create(p, tpl, pool);
}

/* True when the claim may have used its warm Sandbox: it was Ready (the first-ready
 * annotation, or this process saw it so), or its status names that Sandbox. A status
 * names a late-bound claim's warm Sandbox only after a delivery into it succeeded (a
 * failed delivery falls back, or fails the claim, in the same pass: late_fallback), so it
 * says so durably: across a restart, and with the annotations disabled. */
static bool late_used(struct claim_pass *p)
{
    const char *st = kube_obj_path_str(p->claim, "status.sandbox.name");
    return kube_obj_annotation(p->claim, EXT_ANN_FIRST_READY) || ext__ready_once(p->x, p->uid) ||
           (st && strcmp(st, kube_obj_name(p->sb) ?: "") == 0);
}

/* Delivers the claim's env into its bound warm Sandbox. On failure the template's policy
 * decides: a cold start (only while the claim never used the Sandbox: late_used) or
 * Ready=False. Returns true when delivered. */
static bool late_deliver(struct claim_pass *p, const json_t *tpl, const char *pool)
{
    char msg[512];
    struct lb_policy pol;
    bool fallback;
    int r = lb_deliver(p->x, p->claim, p->sb, tpl, msg, sizeof(msg));
    if (r >= 0)
        return true;
    lb_policy_of(tpl, &pol);
    fallback = !pol.fail && !late_used(p);
    log_warn("late-bound env delivery failed\tclaim=%s sandbox=%s fallback=%s detail=\"%s\"",
             p->key, kube_obj_name(p->sb), fallback ? "cold" : "none", msg);
    if (!p->x->o.no_claim_events)
        ext__event(p->x, p->claim, true, LB_R_DELIVERY_FAILED, "%s%s", msg,
                   fallback ? "; falling back to a cold start" : "");
    if (fallback) {
        late_fallback(p, tpl, pool);
    } else {
        fail(p, LB_R_DELIVERY_FAILED, false, "%s", msg);
        p->err = r;
    }
    return false;
}

/* A warm Sandbox bound in an earlier pass whose claim is not Ready yet (the pass was
 * cut short, or delivery failed): deliver again; it is idempotent. */
static void late_redeliver(struct claim_pass *p)
{
    const char *pn = kube_obj_path_str(p->claim, "spec.warmPoolRef.name"), *tn, *lt;
    json_t *pool, *tpl;
    lt = kube_obj_label(p->sb, SB_LABEL_LAUNCH_TYPE);
    if (claim_ready(p->claim) || json_array_size(kube_obj_path(p->claim, "spec.env")) == 0 || !lt ||
        strcmp(lt, "warm") != 0 || !kube_obj_condition_true(p->sb, SB_COND_READY) ||
        kube_obj_deleting(p->sb) || !pn)
        return;
    pool = kube_store_get_ns(ext__store(p->x, EXT_INF_POOL), p->ns, pn);
    tn = kube_obj_path_str(pool, "spec.sandboxTemplateRef.name");
    tpl = tn ? kube_store_get_ns(ext__store(p->x, EXT_INF_TEMPLATE), p->ns, tn) : NULL;
    if (tpl && late_ok(p, tpl)) {
        (void)late_deliver(p, tpl, pn);
    } else {
        /* The env was not delivered (the claim is not Ready) and cannot be now. Ready
         * stays False: before, the Sandbox's Ready made the claim Ready without its env
         * (its secrets), and the user's code ran without them. */
        fail(p, LB_R_DELIVERY_FAILED, false,
             "the claim's env was not delivered into Sandbox %s and cannot be now: %s",
             kube_obj_name(p->sb),
             !pool  ? "its warm pool is gone"
             : !tpl ? "its template is gone"
                    : "its template no longer takes env late (claimConfigDelivery)");
        p->err = -EAGAIN; /* again with back-off: the pool or template may come back */
    }
    json_decref(tpl);
    json_decref(pool);
}

/* A warm member of pool when the claim may take one, else a cold Sandbox from tpl. A
 * member an earlier adoption PATCH of the claim may still land on (p->prefer) is settled
 * first, even when the claim now wants a cold Sandbox: one created beside it could leave
 * the claim controlling two. Settled as the claim's while the claim now wants a cold one
 * (its template no longer takes its env late, say), that member is deleted and a cold
 * Sandbox made, as after a failed delivery: no env is delivered past the template's
 * policy. */
static void adopt_or_create(struct claim_pass *p, const json_t *pool, const json_t *tpl,
                            const char *pn)
{
    bool warm = !ext__cold_only(p->x, p->uid) && (!claim_needs_cold(p->claim) || late_ok(p, tpl));
    json_t *sb = NULL;
    char msg[sizeof(p->msg)] = ""; /* not p->msg: fail formats into it */
    int r = 0;
    /* A deleting pool's members are the garbage collector's: one adopted between its
     * read and its DELETE (a UID precondition only) would go, bound. Such a claim is
     * served cold; an adoption already under way (prefer) is still settled. */
    if ((warm && !kube_obj_deleting(pool)) || p->prefer)
        r = claim__adopt(p->x, p->claim, pool, tpl, p->prefer, !warm || kube_obj_deleting(pool),
                         &sb, msg, sizeof(msg));
    if (r > 0 && !warm) {
        p->sb = sb;
        late_fallback(p, tpl, pn);
    } else if (r > 0) {
        p->sb = sb;
        if (!claim_needs_cold(p->claim) || late_deliver(p, tpl, pn))
            count_creation(p, "warm", pn);
    } else if (r < 0) {
        fail(p, SB_R_RECONCILER_ERROR, true, "Error seen: %s", msg);
        p->err = r;
    } else {
        cold_create(p, tpl, pn);
    }
}

/* True (the claim failed) when the claim's additionalPodMetadata sets a key the
 * template's pod metadata sets otherwise: a cold Sandbox is refused for it, and every
 * warm member carries the template's metadata, so each adoption would fail the same way
 * (and be retried, with the candidate sent to the back of the pool's queue). Not retried
 * with back-off either: only an edit of the claim (its update event) or of the template
 * (tpl_on_update queues the claims of its pools) can clear it. */
static bool meta_conflicts(struct claim_pass *p, const json_t *tpl)
{
    struct claim_err ce = {0};
    json_t *m = claim_pod_meta(p->claim, tpl, NULL, &ce);
    if (m) {
        json_decref(m);
        return false;
    }
    fail(p, ce.reason, false, "%s", ce.message);
    return true;
}

static void provision(struct claim_pass *p)
{
    const char *pn = kube_obj_path_str(p->claim, "spec.warmPoolRef.name"), *tn;
    struct claim_domains d = {(const char *const *)p->x->domains, p->x->ndomains};
    struct claim_err ce = {0};
    json_t *pool, *tpl = NULL;
    if (claim_meta_validate(p->claim, &d, &ce) < 0)
        return fail(p, ce.reason, false, "%s", ce.message);
    if (kube_client_ns_terminating(p->x->d.client, p->ns)) {
        /* Creates there are refused: no warm Sandbox is taken for a claim about to go. */
        p->err = -ESHUTDOWN;
        return;
    }
    pool = pn ? kube_store_get_ns(ext__store(p->x, EXT_INF_POOL), p->ns, pn) : NULL;
    tn = kube_obj_path_str(pool, "spec.sandboxTemplateRef.name");
    tpl = tn ? kube_store_get_ns(ext__store(p->x, EXT_INF_TEMPLATE), p->ns, tn) : NULL;
    if (!pool || !tpl) {
        if (!pool)
            fail(p, EXT_R_POOL_NOT_FOUND, true, "SandboxWarmPool \"%s\" not found", pn ? pn : "");
        else
            fail(p, EXT_R_TEMPLATE_NOT_FOUND, true, "SandboxTemplate \"%s\" not found",
                 tn ? tn : "");
        requeue_min(p, LIMIT_EXT_MISSING_REQUEUE);
    } else if (meta_conflicts(p, tpl)) {
        /* failed (not transient): the same on every pass and for every member */
    } else {
        adopt_or_create(p, pool, tpl, pn);
    }
    json_decref(pool);
    json_decref(tpl);
}

/* ---- the bound Sandbox's pod metadata ----------------------------------------------- */

/* A bound claim's additionalPodMetadata (and its template's pod metadata, its identity
 * labels) reach its Sandbox's pod template, and from there the Pod (claim__meta_sync): as
 * upstream, they are validated first, and a key the template sets otherwise fails the
 * claim (ReconcilerError), as at provisioning (meta_conflicts): an edit of the claim or of
 * the template brings it back. Not while this process's binding is not confirmed by the
 * cache (its event brings the claim back), nor on a Sandbox being deleted. */
static void meta_sync(struct claim_pass *p)
{
    struct claim_domains d = {(const char *const *)p->x->domains, p->x->ndomains};
    struct claim_err ce = {0};
    struct kube_err e;
    json_t *out = NULL;
    int r;
    if (!p->sb || kube_obj_deleting(p->sb) || ext__binding_has(p->x, p->uid))
        return;
    if (claim_meta_validate(p->claim, &d, &ce) < 0)
        return fail(p, ce.reason, false, "%s", ce.message);
    r = claim__meta_sync(p->x, p->claim, p->sb, &out, &ce, &e);
    if (r > 0) {
        json_decref(p->sb);
        p->sb = out;
    } else if (r == -EEXIST) {
        fail(p, ce.reason, false, "%s", ce.message);
    } else if (r < 0 && kube_err_is_conflict(&e)) {
        requeue_min(p, LIMIT_EXT_CACHE_LAG_REQUEUE); /* the Sandbox changed: again, anew */
    } else if (r < 0 && !kube_err_is_not_found(&e)) {
        fail(p, SB_R_RECONCILER_ERROR, true, "Error seen: updating Sandbox %s: %s",
             kube_obj_name(p->sb), e.message);
        p->err = e.code ? e.code : -EIO;
    }
}

/* ---- lifecycle ---------------------------------------------------------------------- */

static void now_text(char *out, size_t size)
{
    clock_format_rfc3339(clock_wall_now(), out, (unsigned)size);
}

/* Second expiry pass: the expired state is persisted; act on the policy. */
static void expire_act(struct claim_pass *p)
{
    const char *policy = kube_obj_path_str(p->claim, "spec.lifecycle.shutdownPolicy");
    bool del = policy && strcmp(policy, "Delete") == 0;
    bool fg = policy && strcmp(policy, "DeleteForeground") == 0;
    struct kube_err e;
    int r;
    if (del || fg) {
        if (!p->x->o.no_claim_events)
            ext__event(p->x, p->claim, false, EXT_R_CLAIM_EXPIRED,
                       "Deleting Claim (ShutdownPolicy=%s)", policy);
        r = kube_delete_obj(p->x->d.client, &API_RES_SANDBOXCLAIMS, p->claim, false,
                            fg ? "Foreground" : NULL, &e);
    } else {
        if (!p->sb || kube_obj_deleting(p->sb))
            return;
        r = kube_delete_obj(p->x->d.client, &API_RES_SANDBOXES, p->sb, false, NULL, &e);
        if (r >= 0 || kube_err_is_not_found(&e))
            ext__sb_deleted_put(p->x, kube_obj_uid(p->sb));
        if (r >= 0)
            cascade_sandbox_deleted(p->x->d.cascade, p->sb);
    }
    if (r < 0 && !kube_err_is_not_found(&e))
        p->err = e.code ? e.code : -EIO;
}

/* Returns true when the claim is expired (and the pass is about expiry only). */
static bool lifecycle(struct claim_pass *p)
{
    usec_t at, now = clock_wall_now();
    if (claim_expire_at(p->claim, &at) < 0)
        return false;
    if (now < at) {
        requeue_min(p, at - now);
        return false;
    }
    p->obs.expired = true;
    return true;
}

/* ---- status ------------------------------------------------------------------------- */

/* Queues the claim's first-ready annotations (and first-observed, unless the claim has
 * it): off the client's path and behind the other claims (ext__side_patch). */
static void queue_first_ready(struct claim_pass *p, usec_t ready, usec_t observed)
{
    char r[64], o[64];
    json_t *patch;
    clock_format_rfc3339(ready, r, sizeof(r));
    clock_format_rfc3339(observed, o, sizeof(o));
    /* the UID: a claim made again under this name while the write waits is not this one */
    patch = json_pack("{s:{s:s,s:{s:s}}}", "metadata", "uid", p->uid, "annotations",
                      EXT_ANN_FIRST_READY, r);
    if (!kube_obj_annotation(p->claim, EXT_ANN_FIRST_OBSERVED))
        json_object_set_new(json_object_get(json_object_get(patch, "metadata"), "annotations"),
                            EXT_ANN_FIRST_OBSERVED, json_string(o));
    ext__ready_once_mark(p->x, p->uid); /* until the cache shows the annotation */
    ext__side_patch(p->x, &API_RES_SANDBOXCLAIMS, p->ns, p->name, patch);
    json_decref(patch);
}

static void record_first_ready(struct claim_pass *p)
{
    usec_t seen = ext__observed(p->x, p->key, true), t = clock_wall_now();
    if (kube_obj_annotation(p->claim, EXT_ANN_FIRST_READY))
        return;
    ext_metrics_first_ready(&p->x->met, p->claim, p->sb, seen, t);
    if (!p->x->o.no_claim_annotations)
        queue_first_ready(p, t, seen ? seen : t);
    else /* for the claim's life: late_deliver must not fall back to cold, and the claim
            never times out (timed_out) */
        ext__ready_once_mark(p->x, p->uid);
}

/* A Ready claim without the annotation that no write of this process is bound to give
 * it: the process that made it Ready stopped while the write was held. The Ready
 * condition's time stands in for the moment, the creation for the first observation. */
static void recover_first_ready(struct claim_pass *p)
{
    const char *at = json_string_value(
        json_object_get(kube_obj_condition(p->claim, SB_COND_READY), "lastTransitionTime"));
    const char *created = kube_obj_path_str(p->claim, "metadata.creationTimestamp");
    usec_t t = clock_wall_now(), c;
    if (p->x->o.no_claim_annotations || kube_obj_annotation(p->claim, EXT_ANN_FIRST_READY) ||
        ext__ready_once_writing(p->x, p->uid))
        return;
    if (!at || clock_parse_rfc3339(at, &t) < 0)
        t = clock_wall_now();
    if (!created || clock_parse_rfc3339(created, &c) < 0)
        c = t;
    log_debug("first-ready annotation restored\tclaim=%s", p->key);
    queue_first_ready(p, t, c);
}

static bool status_ready(const json_t *st)
{
    const char *s = json_string_value(json_object_get(sb_cond_get(st, SB_COND_READY), "status"));
    return s && strcmp(s, "True") == 0;
}

/* What a namespace being deleted takes away before the claim: its Sandbox, pool or
 * template. */
static bool dependency_gone(const struct claim_pass *p)
{
    const char *r = p->obs.err_reason;
    return !p->sb || kube_obj_deleting(p->sb) ||
           (r &&
            (strcmp(r, EXT_R_POOL_NOT_FOUND) == 0 || strcmp(r, EXT_R_TEMPLATE_NOT_FOUND) == 0));
}

/* True while the claim's namespace is known to be going: a create there was refused
 * just now, or, for a claim that lost its Sandbox, pool or template, within the last
 * LIMIT_EXT_NS_GONE_MEMORY (the namespace controller takes those before the claims; a
 * namespace made again under the same name gets such a status that much later). */
static bool ns_going(const struct claim_pass *p)
{
    struct kube_client *c = p->x->d.client;
    return kube_client_ns_terminating(c, p->ns) ||
           (dependency_gone(p) &&
            kube_client_ns_terminated_within(c, p->ns, LIMIT_EXT_NS_GONE_MEMORY));
}

/* The status PATCH, guarded by the claim's resourceVersion. Returns false when nothing
 * was written (the pass ends there; the status event or the backstop brings it back). */
static bool patch_status(struct claim_pass *p, json_t *st)
{
    struct kube_err e;
    json_t *patch;
    if (ns_going(p)) {
        /* The namespace is being deleted and the claim with it: nothing more is written
         * (its Sandbox going would otherwise cost a status write per claim); retried
         * with back-off in case the namespace stays. */
        if (!p->err)
            p->err = -ESHUTDOWN;
        return false;
    }
    /* The difference from the version read, which the resourceVersion pins: a merge
     * patch of the whole status would leave what st no longer has (status.sandbox, its
     * podIPs) as it was. */
    patch = json_pack("{s:{s:s}, s:o}", "metadata", "resourceVersion",
                      kube_obj_resource_version(p->claim) ?: "", "status",
                      kube_merge_patch_diff(json_object_get(p->claim, "status"), st));
    if (ext__patch(p->x, &API_RES_SANDBOXCLAIMS, p->ns, p->name, "status", patch, NULL, &e) < 0) {
        /* A 409 is dropped: the conflicting write's event brings the claim back (with
         * the same backstop requeue). */
        if (kube_err_is_conflict(&e))
            requeue_min(p, SB_MEMO_TTL);
        else if (!kube_err_is_not_found(&e) && !p->err)
            p->err = e.code ? e.code : -EIO;
        json_decref(patch);
        return false;
    }
    sb_memo_wrote(p->x->d.memo, p->claim);
    json_decref(patch);
    return true;
}

static void write_status(struct claim_pass *p)
{
    char now[64];
    json_t *st;
    bool was_ready = claim_ready(p->claim);
    now_text(now, sizeof(now));
    st = claim_status_build(&p->obs, now);
    if (sb_memo_stale(p->x->d.memo, p->claim)) {
        /* Our own status write replaced this version; its event brings the claim back
         * (the requeue is the backstop should that event be lost). */
        requeue_min(p, SB_MEMO_TTL);
        json_decref(st);
        return;
    }
    if (claim_status_changed(json_object_get(p->claim, "status"), st) && !patch_status(p, st)) {
        json_decref(st);
        return;
    }
    if (!was_ready && status_ready(st))
        record_first_ready(p);
    else if (was_ready && status_ready(st))
        recover_first_ready(p);
    json_decref(st);
}

/* ---- the pass ----------------------------------------------------------------------- */

/* True when the claim was Ready once: it never times out, however long its Sandbox is not
 * Ready later (a lost Pod, a suspension). The first-ready annotation says so, or this
 * process saw it (with the annotations disabled, until the claim goes), or its Ready
 * condition's last flip came well after its first status write (claim_ready_before: after
 * a restart, with the annotations disabled). */
static bool was_ready(struct claim_pass *p)
{
    return claim_ready(p->claim) || kube_obj_annotation(p->claim, EXT_ANN_FIRST_READY) ||
           ext__ready_once(p->x, p->uid) ||
           claim_ready_before(p->claim, LIMIT_EXT_READY_FLIP_AFTER);
}

static bool timed_out(struct claim_pass *p)
{
    usec_t deadline, now = clock_wall_now();
    usec_t dflt = p->x->o.claim_timeout == USEC_INFINITY ? 0
                  : p->x->o.claim_timeout                ? p->x->o.claim_timeout
                                                         : LIMIT_EXT_CLAIM_TIMEOUT;
    const char *reason =
        json_string_value(json_object_get(kube_obj_condition(p->claim, SB_COND_READY), "reason"));
    /* a Ready Sandbox whose late-bound delivery keeps failing (onFailure: Fail) does not
     * make the claim fine: it times out as documented, instead of retrying for ever */
    bool undelivered = reason && strcmp(reason, LB_R_DELIVERY_FAILED) == 0;
    if (was_ready(p) || (kube_obj_condition_true(p->sb, SB_COND_READY) && !undelivered) ||
        claim_deadline(p->claim, dflt, &deadline) < 0)
        return false;
    if (now < deadline) {
        requeue_min(p, deadline - now);
        return false;
    }
    return true;
}

static void run(struct claim_pass *p)
{
    const char *reason =
        json_string_value(json_object_get(kube_obj_condition(p->claim, SB_COND_READY), "reason"));
    bool expired = lifecycle(p);
    bool found = find_sandbox(p);
    if (p->unsure)
        return;
    if (expired) {
        /* An expired claim needs no Sandbox: a finding of find_sandbox (a Sandbox of the
         * claim's name it does not control) must not hide ClaimExpired, or the claim
         * would never get past the first of the two passes. */
        p->obs.err_reason = NULL;
        p->obs.err_message = NULL;
        p->obs.transient = false;
        /* Two passes: persist ClaimExpired first (its update event brings the second;
         * the requeue is a backstop), then act on the policy. */
        if (reason && strcmp(reason, EXT_R_CLAIM_EXPIRED) == 0) {
            expire_act(p);
        } else {
            if (!p->x->o.no_claim_events)
                ext__event(p->x, p->claim, false, EXT_R_CLAIM_EXPIRED, "Claim expired");
            requeue_min(p, LIMIT_EXT_CACHE_LAG_REQUEUE);
        }
        if (p->sb && kube_obj_deleting(p->sb)) {
            json_decref(p->sb);
            p->sb = NULL;
        }
    } else if (found) {
        p->obs.timed_out = timed_out(p);
        if (p->sb && p->obs.timed_out && !p->obs.err_reason &&
            kube_obj_condition_true(p->sb, SB_COND_READY)) {
            /* timed out with a Ready Sandbox: its late-bound env never came (timed_out).
             * The Sandbox's Ready must not win over the timeout here. */
            p->obs.err_reason = LB_R_DELIVERY_FAILED;
            p->obs.err_message = "the claim's late-bound env was never delivered";
        }
        meta_sync(p);
        /* A timed-out claim reports ClaimTimeout but is still provisioned: the timeout
         * is no reason to leave it without a Sandbox once its pool and template exist, or
         * once a failed create would work (retried with back-off). A late-bound delivery
         * into its Ready Sandbox that keeps failing stops at the timeout. */
        if (p->sb && !p->obs.timed_out && !p->obs.err_reason)
            late_redeliver(p);
        else if (!p->sb)
            provision(p);
    }
    p->obs.sb = p->sb;
    /* A binding this process made that it cannot confirm yet (an adoption or create whose
     * outcome is unknown): status.sandbox is left as it is. Otherwise, without a Sandbox,
     * it goes: the claim then counts as unbound again (enqueue_index). */
    if (!p->sb && ext__binding_has(p->x, p->uid))
        p->obs.sb_keep = true;
    write_status(p);
}

int claim_reconcile(struct ext_ctrl *x, const char *key, usec_t *ret_requeue)
{
    struct claim_pass p = {.x = x, .key = key};
    *ret_requeue = 0;
    p.claim = kube_store_get(ext__store(x, EXT_INF_CLAIM), key);
    if (!p.claim || kube_obj_deleting(p.claim)) {
        json_decref(p.claim);
        return 0; /* garbage collection removes the Sandbox */
    }
    p.ns = kube_obj_namespace(p.claim);
    p.name = kube_obj_name(p.claim);
    p.uid = kube_obj_uid(p.claim);
    if (!p.ns || !p.name || !p.uid) {
        json_decref(p.claim);
        return 0;
    }
    if (kube_obj_annotation(p.claim, EXT_ANN_FIRST_READY))
        ext__ready_once_drop(x, p.uid); /* the annotation says it from now on */
    p.obs.claim = p.claim;
    run(&p);
    json_decref(p.prefer);
    json_decref(p.sb);
    json_decref(p.claim);
    *ret_requeue = p.requeue;
    return p.err;
}
