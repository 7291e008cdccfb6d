/* SPDX-License-Identifier: Apache-2.0 */
/* Warm adoption: one merge patch on the Sandbox, guarded by its resourceVersion, moves
 * it from the pool to the claim (owner reference, labels, pod metadata). That write is
 * the binding: nothing is written to the claim before it, and a candidate taken by
 * another claim fails the guard (409) and is skipped. Unless keep_managed_fields, the
 * same patch clears the Sandbox's managedFields: the API server then skips field tracking
 * for it and for every later Update of the Sandbox (docs/performance.md, "managedFields
 * cleared at adoption"). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/res.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/xalloc.h"
#include "controller/claim_meta.h"
#include "controller/claim_queue.h"
#include "controller/ext_int.h"
#include "controller/ext_names.h"
#include "controller/sandbox_names.h"
#include "controller/template_build.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "kube/store.h"

/* Merge patch turning map old into map want (keys removed become null); NULL if equal. */
static json_t *map_diff(const json_t *old, const json_t *want)
{
    json_t *d = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)old, k, v) if (!json_object_get(want, k))
        json_object_set_new(d, k, json_null());
    json_object_foreach((json_t *)want, k, v) if (!json_equal(json_object_get(old, k), v))
        json_object_set(d, k, v);
    if (json_object_size(d) == 0) {
        json_decref(d);
        return NULL;
    }
    return d;
}

/* By default the pool's safe-to-evict "true" stays in the pod template, so adoption
 * changes no spec (no new generation, no Sandbox status rewrite); the Sandbox annotation
 * SB_ANN_POD_OMIT_EVICT keeps it off the Pod instead. A claim's own value wins. */
static void keep_pool_evict(const json_t *cur, json_t *want, json_t *patch)
{
    const json_t *ca = json_object_get(cur, "annotations");
    const char *ev = json_string_value(json_object_get(ca, SB_ANN_SAFE_TO_EVICT));
    if (!ev || strcmp(ev, "true") != 0 ||
        json_object_get(json_object_get(want, "annotations"), SB_ANN_SAFE_TO_EVICT))
        return;
    json_object_set_new(ext_obj_ensure(want, "annotations"), SB_ANN_SAFE_TO_EVICT,
                        json_string("true"));
    json_object_set_new(ext_obj_ensure(json_object_get(patch, "metadata"), "annotations"),
                        SB_ANN_POD_OMIT_EVICT, json_string("true"));
}

/* The claim's pod metadata for member sb: rebuilt from the template sb was built from
 * (tpl: the pool's, borrowed, may be NULL; ext__template_of), as upstream does, so that
 * the template's pod metadata as it is now reaches it; merged into the member's own when
 * that template is unknown. The claim's identity labels go into the pod template only
 * with --warm-adoption-edits-pod-template (upstream's way): the Sandbox controller keeps
 * reserved keys off the Pod anyway, and by default the adoption of a member built from
 * the template as it is changes no spec (no new generation, no Sandbox status rewrite;
 * keep_pool_evict). */
static json_t *adopt_pod_meta(struct ext_ctrl *x, const json_t *claim, const json_t *sb,
                              const json_t *tpl, struct claim_err *ce)
{
    json_t *own = ext__template_of(x, sb, tpl), *want;
    if (own)
        want = claim_sandbox_pod_meta(claim, own, x->o.adopt_edit_template, ce);
    else
        want = claim_pod_meta(claim, NULL, kube_obj_path(sb, "spec.podTemplate.metadata"), ce);
    json_decref(own);
    return want;
}

/* The spec part of the patch: pod template metadata from the pool's to the claim's. */
static int pod_meta_patch(struct ext_ctrl *x, const json_t *claim, const json_t *sb,
                          const json_t *tpl, json_t *patch, char *msg, size_t size)
{
    const json_t *cur = kube_obj_path(sb, "spec.podTemplate.metadata");
    struct claim_err ce;
    json_t *want = adopt_pod_meta(x, claim, sb, tpl, &ce), *meta = json_object(), *d;
    if (!want) {
        (void)snprintf(msg, size, "%s", ce.message);
        json_decref(meta);
        return -EEXIST;
    }
    if (!x->o.adopt_edit_template)
        keep_pool_evict(cur, want, patch);
    if ((d = map_diff(json_object_get(cur, "labels"), json_object_get(want, "labels"))))
        json_object_set_new(meta, "labels", d);
    if ((d = map_diff(json_object_get(cur, "annotations"), json_object_get(want, "annotations"))))
        json_object_set_new(meta, "annotations", d);
    if (json_object_size(meta))
        json_object_set_new(patch, "spec", json_pack("{s:{s:o}}", "podTemplate", "metadata", meta));
    else
        json_decref(meta);
    json_decref(want);
    return 0;
}

static json_t *adopt_patch(struct ext_ctrl *x, const json_t *claim, const json_t *sb,
                           const json_t *tpl, char *msg, size_t size)
{
    const char *cb = kube_obj_label(claim, SB_LABEL_CREATED_BY);
    const char *trace = kube_obj_annotation(claim, SB_ANN_TRACE_CONTEXT);
    json_t *p =
        json_pack("{s:{s:s, s:[o], s:{s:n, s:n, s:n, s:s, s:s, s:s*}}}", "metadata",
                  "resourceVersion", kube_obj_resource_version(sb) ?: "", "ownerReferences",
                  ext_owner_ref(claim, EXT_KIND_CLAIM), "labels", SB_LABEL_WARM_POOL,
                  EXT_LABEL_TEMPLATE_HASH, EXT_LABEL_POD_TEMPLATE_HASH, SB_LABEL_LAUNCH_TYPE,
                  "warm", EXT_LABEL_CLAIM_UID, kube_obj_uid(claim) ?: "", SB_LABEL_CREATED_BY, cb);
    const json_t *idle = kube_obj_path(sb, "spec.idlePolicy");
    json_t *md = json_object_get(p, "metadata");
    json_t *labels = json_object_get(md, "labels");
    if (!cb)
        json_object_set_new(labels, SB_LABEL_CREATED_BY, json_null());
    if (trace)
        json_object_set_new(ext_obj_ensure(md, "annotations"), SB_ANN_TRACE_CONTEXT,
                            json_string(trace));
    if (idle && !json_is_null(idle)) {
        /* The claim is activity: the idle clock starts at the hand-out, not at the
         * member's creation or Ready (an hour in the pool would be an hour idle, and a
         * timeout shorter than that suspended the Sandbox as soon as it was claimed). */
        char now[40];
        clock_format_rfc3339(clock_wall_now(), now, sizeof(now));
        json_object_set_new(ext_obj_ensure(md, "annotations"), SB_ANN_LAST_ACTIVITY,
                            json_string(now));
    }
    if (pod_meta_patch(x, claim, sb, tpl, p, msg, size) < 0) {
        json_decref(p);
        return NULL;
    }
    if (!x->o.keep_managed_fields)
        kube_obj_reset_managed_fields(p);
    return p;
}

/* adopt_settle's answer: send the same adoption PATCH again. */
#define ADOPT_RESEND 2
/* A candidate this claim cannot take (its adoption refused for good, or its pod metadata
 * at odds with the claim's): skipped, and put back for other claims once the claim is
 * done with the queue. */
#define ADOPT_REFUSED 3

/* The adoption PATCH of candidate sb (name) may have been applied: the Sandbox is read.
 * Returns 1 when the claim controls it (*ret_sb: the read), 0 when another owner does or
 * it is gone, ADOPT_RESEND when it is still the pool's in the version the PATCH was
 * guarded by and resend allows (a PATCH the server has not carried out yet can still be:
 * sending it again makes one of the two win, both for this claim), or a negative errno
 * when the read fails too or the PATCH can still land: the candidate is then the claim's
 * binding, so the claim's next pass reads it before it takes another (without that, a
 * PATCH applied but unanswered, or applied late, would leave the claim controlling two). */
static int adopt_settle(struct ext_ctrl *x, const json_t *claim, const json_t *pool, const char *pk,
                        const json_t *sb, bool resend, json_t **ret_sb, const struct kube_err *pe,
                        char *msg, size_t size)
{
    const char *name = kube_obj_name(sb);
    json_t *cur = NULL;
    struct kube_err e;
    switch (ext__sb_read(x, kube_obj_namespace(claim), name, kube_obj_uid(claim), &cur, &e)) {
    case EXT_SB_OURS:
        *ret_sb = cur;
        return 1;
    case EXT_SB_OTHER: {
        bool pools = sb_controlled_by(cur, kube_obj_uid(pool)),
             pending = kube_obj_same_version(cur, sb);
        json_decref(cur);
        if (pools && pending && resend)
            return ADOPT_RESEND;
        if (pools && !pending)
            claim_queue_push(x->cq, pk, name); /* changed since: the PATCH cannot apply */
        if (!pools || !pending)
            return 0;
        kube_err_set(&e, -EAGAIN, "it is unchanged, so the PATCH may still be carried out");
        break;
    }
    case EXT_SB_GONE:
        return 0;
    case EXT_SB_UNKNOWN:
        break;
    }
    ext__binding_put(x, claim, sb);
    claim_queue_push(x->cq, pk, name);
    (void)snprintf(msg, size,
                   "adopting Sandbox %s: no certain answer (%s), and reading it failed: %s", name,
                   pe->message, e.message);
    return e.code ? e.code : -EIO;
}

/* A failure that may clear by itself: a 5xx, a 429, no answer. */
static bool adopt_transient(const struct kube_err *e)
{
    return e->http_status == 0 || e->http_status >= 500 || kube_err_is_too_many_requests(e);
}

/* The adoption PATCH of sb failed with e (neither carried out for sure nor unknown). An
 * earlier send that may still be carried out (unsure) keeps sb the claim's binding.
 * Returns 0 (skip the candidate: another claim won it, or it is gone), ADOPT_REFUSED (a
 * refusal that will not clear by itself, a webhook's 403 or 422: the claim goes on to
 * the next candidate, then a cold create, and the candidate stays for other claims) or
 * e's errno (a transient failure: the pass stops and is retried). */
static int adopt_failed(struct ext_ctrl *x, const json_t *claim, const char *pk, const json_t *sb,
                        bool unsure, const struct kube_err *e, char *msg, size_t size)
{
    const char *name = kube_obj_name(sb);
    if (kube_err_is_conflict(e) || kube_err_is_not_found(e))
        return 0;
    (void)snprintf(msg, size, "adopting Sandbox %s: %s", name, e->message);
    if (!unsure && !adopt_transient(e)) {
        log_warn("adoption refused, candidate skipped\tclaim=%s/%s sandbox=%s detail=\"%s\"",
                 kube_obj_namespace(claim), kube_obj_name(claim), name, e->message);
        return ADOPT_REFUSED;
    }
    if (unsure)
        ext__binding_put(x, claim, sb);
    claim_queue_push(x->cq, pk, name);
    return e->code ? e->code : -EIO;
}

/* Sends the adoption PATCH of sb, again while the server may not have carried out an
 * earlier send (at most LIMIT_EXT_ADOPT_SENDS sends). unsure: an earlier pass's send may
 * still be carried out (a conflict is then read back). Returns as try_one. */
static int adopt_send(struct ext_ctrl *x, const json_t *claim, const json_t *pool, const char *pk,
                      const json_t *sb, const json_t *patch, bool unsure, json_t **ret_sb,
                      char *msg, size_t size)
{
    struct kube_err e;
    json_t *out = NULL;
    for (int sends = 1;; sends++) {
        kube_err_clear(&e);
        if (ext__patch(x, &API_RES_SANDBOXES, kube_obj_namespace(sb), kube_obj_name(sb), NULL,
                       patch, &out, &e) >= 0) {
            *ret_sb = out;
            return 1;
        }
        /* A conflict after an unsure send may be that send, carried out: read it too. */
        if (!kube_err_outcome_unknown(&e) && !(unsure && kube_err_is_conflict(&e)))
            return adopt_failed(x, claim, pk, sb, unsure, &e, msg, size);
        unsure = true;
        int r = adopt_settle(x, claim, pool, pk, sb, sends < LIMIT_EXT_ADOPT_SENDS, ret_sb, &e, msg,
                             size);
        if (r != ADOPT_RESEND)
            return r;
    }
}

/* Builds and sends the adoption PATCH of candidate sb, guarded by sb's version; tpl: the
 * pool's template (borrowed, may be NULL); unsure as adopt_send. Returns as try_one. */
static int adopt_candidate(struct ext_ctrl *x, const json_t *claim, const json_t *pool,
                           const json_t *tpl, const char *pk, const json_t *sb, bool unsure,
                           json_t **ret_sb, char *msg, size_t size)
{
    json_t *patch = adopt_patch(x, claim, sb, tpl, msg, size);
    int r;
    if (!patch) {
        /* the member's pod metadata is at odds with the claim's (an older member, built
         * from the template as it was): the same on every pass, so not this one */
        if (unsure) {
            claim_queue_push(x->cq, pk, kube_obj_name(sb));
            return -EEXIST;
        }
        return ADOPT_REFUSED;
    }
    r = adopt_send(x, claim, pool, pk, sb, patch, unsure, ret_sb, msg, size);
    json_decref(patch);
    return r;
}

/* The pool's template as a pass of claim__adopt judges its candidates by it. */
struct adopt_tpl {
    const json_t *tpl;                             /* borrowed; NULL: unknown */
    bool recreate;                                 /* the pool's updateStrategy is Recreate */
    char th[SB_HASH_LEN + 1], bh[SB_HASH_LEN + 1]; /* its name's hash, its fingerprint */
};

static void adopt_tpl_init(struct adopt_tpl *at, const json_t *pool, const json_t *tpl)
{
    const char *st = kube_obj_path_str(pool, "spec.updateStrategy.type");
    *at = (struct adopt_tpl){.tpl = tpl, .recreate = st && strcmp(st, "Recreate") == 0};
    if (!tpl || !at->recreate)
        return; /* th and bh serve the Recreate guard only */
    sb_name_hash(kube_obj_name(tpl), at->th);
    tpl_blueprint_hash(tpl, at->bh);
}

/* Under Recreate a stale member is not handed out: the pool deletes it (upstream's
 * Recreate-strategy guard). Under OnReplenish stale members are handed out. */
static bool stale_under_recreate(const struct adopt_tpl *at, const json_t *sb)
{
    return at->recreate && at->tpl && tpl_member_stale(at->tpl, at->th, at->bh, sb);
}

/* True when member sb may be handed out as far as its template goes: built from the
 * template the pool names now, or from one it named before that still exists (upstream
 * hands such members out under OnReplenish too). A member whose template is gone is not:
 * the template's NetworkPolicy went with it (the pool replaces such members). */
static bool template_ok(struct ext_ctrl *x, const json_t *pool, const json_t *sb)
{
    const char *tn = kube_obj_path_str(pool, "spec.sandboxTemplateRef.name");
    char th[SB_HASH_LEN + 1];
    if (!tn || !kube_obj_label(sb, SB_LABEL_TEMPLATE_REF))
        return false;
    sb_name_hash(tn, th);
    return !ext__former_template_gone(x, th, sb);
}

/* Tries one candidate. Returns 1 adopted, 0 skip it, ADOPT_REFUSED skip it but keep it for
 * others, negative errno to stop. */
static int try_one(struct ext_ctrl *x, const json_t *claim, const json_t *pool,
                   const struct adopt_tpl *at, const char *pk, const char *name, json_t **ret_sb,
                   char *msg, size_t size)
{
    json_t *sb = kube_store_get_ns(ext__sandboxes(x), kube_obj_namespace(claim), name);
    int r;
    if (!sb || !ext__warm_candidate(sb) || !sb_controlled_by(sb, kube_obj_uid(pool)) ||
        !template_ok(x, pool, sb) || stale_under_recreate(at, sb)) {
        json_decref(sb);
        return 0; /* gone, taken, not Ready, of a template gone, or stale under Recreate:
                     the informer re-queues it when it is a candidate again */
    }
    r = adopt_candidate(x, claim, pool, at->tpl, pk, sb, false, ret_sb, msg, size);
    json_decref(sb);
    return r;
}

/* Settles prefer (claim__adopt): the claim's own already (its cache shows it so), or
 * patched by the guard of prefer's version. Returns as try_one; the claim's binding is
 * dropped once prefer is known not to be the claim's. */
static int try_prefer(struct ext_ctrl *x, const json_t *claim, const json_t *pool,
                      const struct adopt_tpl *at, const char *pk, const json_t *prefer,
                      json_t **ret_sb, char *msg, size_t size)
{
    const char *name = kube_obj_name(prefer), *uid = kube_obj_uid(claim);
    json_t *cached = kube_store_get_ns(ext__sandboxes(x), kube_obj_namespace(claim), name);
    int r;
    claim_queue_remove(x->cq, pk, name);
    if (cached && sb_controlled_by(cached, uid)) {
        *ret_sb = cached; /* the earlier PATCH landed and the cache has seen it */
        return 1;
    }
    json_decref(cached);
    r = adopt_candidate(x, claim, pool, at->tpl, pk, prefer, true, ret_sb, msg, size);
    if (r == 0)
        ext__binding_drop(x, uid);
    return r;
}

/* The candidates a claim skipped but others may take, put back when it is done. */
struct adopt_skipped {
    char name[LIMIT_EXT_ADOPT_ATTEMPTS][LIMIT_KUBE_STORE_KEY + 1];
    int n;
};

/* Pops and tries candidates until one is adopted or fails the pass; returns as try_one
 * but 0 for those skipped. */
static int try_queue(struct ext_ctrl *x, const json_t *claim, const json_t *pool,
                     const struct adopt_tpl *at, const char *pk, json_t **ret_sb, char *msg,
                     size_t size)
{
    struct adopt_skipped *sk = XNEW(struct adopt_skipped);
    int r = 0;
    for (int i = 0; i < LIMIT_EXT_ADOPT_ATTEMPTS && r == 0; i++) {
        if (!claim_queue_pop(x->cq, pk, sk->name[sk->n], sizeof(sk->name[0])))
            break;
        r = try_one(x, claim, pool, at, pk, sk->name[sk->n], ret_sb, msg, size);
        if (r == ADOPT_REFUSED) {
            sk->n++;
            r = 0;
        }
    }
    for (int i = 0; i < sk->n; i++)
        claim_queue_push(x->cq, pk, sk->name[i]);
    xfree(sk);
    return r;
}

int claim__adopt(struct ext_ctrl *x, const json_t *claim, const json_t *pool, const json_t *tpl,
                 const json_t *prefer, bool prefer_only, json_t **ret_sb, char *msg, size_t size)
{
    char pk[LIMIT_KUBE_STORE_KEY + 1];
    struct adopt_tpl at;
    int r = 0;
    if (ext__key(kube_obj_namespace(pool), kube_obj_name(pool), pk, sizeof(pk)) < 0 ||
        (claim_queue_len(x->cq, pk) == 0 && !prefer))
        return 0; /* no candidate: no place needed */
    /* a place among the adoptions in flight, in the order claims get here; taken before
     * the candidates are read, so the one patched is as fresh as the cache has it */
    if (fifo_sem_acquire(&x->adopt_sem) && x->met.adopt_waits)
        metric_inc(x->met.adopt_waits, NULL);
    adopt_tpl_init(&at, pool, tpl);
    if (prefer)
        r = try_prefer(x, claim, pool, &at, pk, prefer, ret_sb, msg, size);
    if (r == 0 && !prefer_only)
        r = try_queue(x, claim, pool, &at, pk, ret_sb, msg, size);
    fifo_sem_release(&x->adopt_sem);
    if (r == 1) {
        ext__binding_put(x, claim, *ret_sb);
        log_debug("adopted\tclaim=%s/%s sandbox=%s", kube_obj_namespace(claim),
                  kube_obj_name(claim), kube_obj_name(*ret_sb));
    }
    return r;
}

/* ---- a bound Sandbox's pod metadata kept in sync ------------------------------------ */

/* The pool's safe-to-evict "true" that an adoption left in the pod template (keep_pool_evict:
 * the Sandbox is marked SB_ANN_POD_OMIT_EVICT) stays there, unless the claim sets the key. */
static void keep_left_evict(const json_t *sb, const json_t *cur, json_t *want)
{
    const char *omit = kube_obj_annotation(sb, SB_ANN_POD_OMIT_EVICT);
    const char *ev = json_string_value(
        json_object_get(json_object_get(cur, "annotations"), SB_ANN_SAFE_TO_EVICT));
    if (omit && strcmp(omit, "true") == 0 && ev && strcmp(ev, "true") == 0 &&
        !json_object_get(json_object_get(want, "annotations"), SB_ANN_SAFE_TO_EVICT))
        json_object_set_new(ext_obj_ensure(want, "annotations"), SB_ANN_SAFE_TO_EVICT,
                            json_string("true"));
}

/* The template of the claim's pool (new reference), or NULL. */
static json_t *claim_pool_template(struct ext_ctrl *x, const json_t *claim)
{
    const char *ns = kube_obj_namespace(claim), *tn;
    const char *pn = kube_obj_path_str(claim, "spec.warmPoolRef.name");
    json_t *pool = pn ? kube_store_get_ns(ext__store(x, EXT_INF_POOL), ns, pn) : NULL, *tpl;
    tn = kube_obj_path_str(pool, "spec.sandboxTemplateRef.name");
    tpl = tn ? kube_store_get_ns(ext__store(x, EXT_INF_TEMPLATE), ns, tn) : NULL;
    json_decref(pool);
    return tpl;
}

/* The merge patch taking sb's pod template metadata (and its own created-by label) to
 * want's; NULL when they are the same. */
static json_t *sync_patch(const json_t *claim, const json_t *sb, const json_t *want)
{
    const json_t *cur = kube_obj_path(sb, "spec.podTemplate.metadata");
    const char *cb = kube_obj_label(claim, SB_LABEL_CREATED_BY);
    const char *have = kube_obj_label(sb, SB_LABEL_CREATED_BY);
    json_t *meta = json_object(), *p = json_object(), *d;
    if ((d = map_diff(json_object_get(cur, "labels"), json_object_get(want, "labels"))))
        json_object_set_new(meta, "labels", d);
    if ((d = map_diff(json_object_get(cur, "annotations"), json_object_get(want, "annotations"))))
        json_object_set_new(meta, "annotations", d);
    if (json_object_size(meta))
        json_object_set_new(p, "spec", json_pack("{s:{s:o}}", "podTemplate", "metadata", meta));
    else
        json_decref(meta);
    if ((cb && (!have || strcmp(cb, have) != 0)) || (!cb && have))
        json_object_set_new(p, "metadata",
                            json_pack("{s:{s:s?}}", "labels", SB_LABEL_CREATED_BY, cb));
    if (json_object_size(p) == 0) {
        json_decref(p);
        return NULL;
    }
    json_object_set_new(ext_obj_ensure(p, "metadata"), "resourceVersion",
                        json_string(kube_obj_resource_version(sb) ?: ""));
    return p;
}

int claim__meta_sync(struct ext_ctrl *x, const json_t *claim, const json_t *sb, json_t **ret_sb,
                     struct claim_err *ce, struct kube_err *e)
{
    json_t *pt = claim_pool_template(x, claim), *tpl = ext__template_of(x, sb, pt), *want;
    json_t *patch = NULL;
    bool identity;
    int r = 0;
    json_decref(pt);
    *ret_sb = NULL;
    kube_err_clear(e);
    if (!tpl)
        return 0; /* its template is gone: nothing to build the metadata from */
    /* identity labels where the Sandbox has them (a cold one; adopt_pod_meta) */
    identity = json_object_get(kube_obj_path(sb, "spec.podTemplate.metadata.labels"),
                               EXT_LABEL_CLAIM_UID) != NULL;
    want = claim_sandbox_pod_meta(claim, tpl, identity, ce);
    if (!want) {
        json_decref(tpl);
        return -EEXIST;
    }
    keep_left_evict(sb, kube_obj_path(sb, "spec.podTemplate.metadata"), want);
    patch = sync_patch(claim, sb, want);
    if (patch && !x->o.keep_managed_fields)
        kube_obj_reset_managed_fields(patch);
    if (patch)
        r = ext__patch(x, &API_RES_SANDBOXES, kube_obj_namespace(sb), kube_obj_name(sb), NULL,
                       patch, ret_sb, e);
    if (patch && r >= 0)
        log_debug("pod metadata synced\tclaim=%s/%s sandbox=%s", kube_obj_namespace(claim),
                  kube_obj_name(claim), kube_obj_name(sb));
    json_decref(patch);
    json_decref(want);
    json_decref(tpl);
    return r < 0 ? r : patch ? 1 : 0;
}
