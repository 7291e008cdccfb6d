/* SPDX-License-Identifier: Apache-2.0 */
/* Extensions controllers: construction, informers, event routing, workers. */
#include "controller/ext_ctrl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api/res.h"
#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/map.h"
#include "common/metrics.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "controller/cascade.h"
#include "controller/claim_queue.h"
#include "controller/ext_int.h"
#include "controller/ext_metrics.h"
#include "controller/ext_names.h"
#include "controller/latebind_deliver.h"
#include "controller/manager_int.h"
#include "controller/ns_source.h"
#include "controller/pool_expect.h"
#include "controller/sandbox_names.h"
#include "controller/side_writer.h"
#include "controller/workloop.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "kube/obj.h"
#include "kube/store.h"
#include "kube/workqueue.h"

/* ---- small shared helpers ----------------------------------------------------------- */

int ext__key(const char *ns, const char *name, char *out, size_t size)
{
    int n = snprintf(out, size, "%s/%s", ns ? ns : "", name ? name : "");
    return n < 0 || (size_t)n >= size ? -E2BIG : 0;
}

struct kube_store *ext__store(struct ext_ctrl *x, int which)
{
    return kube_informer_store(x->inf[which]);
}

struct kube_store *ext__sandboxes(struct ext_ctrl *x)
{
    return kube_informer_store(x->sandboxes);
}

struct kube_store *ext__pods(struct ext_ctrl *x)
{
    return kube_informer_store(x->pods);
}

void ext__enqueue(struct ext_ctrl *x, int loop, const char *key, usec_t delay)
{
    if (delay)
        wq_add_after(workloop_queue(x->loops[loop]), key, delay);
    else
        wq_add(workloop_queue(x->loops[loop]), key);
}

void ext__event(struct ext_ctrl *x, const json_t *obj, bool warning, const char *reason,
                const char *fmt, ...)
{
    va_list ap;
    if (!x->d.events)
        return;
    va_start(ap, fmt);
    events_recordv(x->d.events, obj, warning ? EVENTS_WARNING : EVENTS_NORMAL, reason, fmt, ap);
    va_end(ap);
}

int ext__patch(struct ext_ctrl *x, const struct kube_res *res, const char *ns, const char *name,
               const char *sub, const json_t *patch, json_t **ret_obj, struct kube_err *reterr)
{
    struct kube_req r;
    kube_req_init(&r, "PATCH", res);
    r.ns = ns;
    r.name = name;
    r.subresource = sub;
    r.body = patch;
    r.patch_type = KUBE_PATCH_MERGE;
    r.field_manager = EXT_FIELD_MANAGER;
    kube_err_clear(reterr);
    return kube_request(x->d.client, &r, ret_obj, reterr);
}

enum ext_sb_read ext__sb_read(struct ext_ctrl *x, const char *ns, const char *name, const char *uid,
                              json_t **ret_sb, struct kube_err *e)
{
    struct kube_err local;
    json_t *sb = NULL;
    enum ext_sb_read r;
    if (!e)
        e = &local;
    kube_err_clear(e);
    if (ret_sb)
        *ret_sb = NULL;
    if (kube_get(x->d.client, &API_RES_SANDBOXES, ns, name, &sb, e) < 0)
        return kube_err_is_not_found(e) ? EXT_SB_GONE : EXT_SB_UNKNOWN;
    r = sb_controlled_by(sb, uid) ? EXT_SB_OURS : EXT_SB_OTHER;
    if (ret_sb)
        *ret_sb = sb;
    else
        json_decref(sb);
    return r;
}

int ext__member_settle(struct ext_ctrl *x, const char *ns, const char *name, const char *pool,
                       int r, const struct kube_err *ce, json_t **ret_sb)
{
    json_t *cur = NULL;
    struct kube_err e;
    switch (ext__sb_read(x, ns, name, pool, &cur, &e)) {
    case EXT_SB_OURS:
        log_info("pool member created despite an error\tsandbox=%s/%s detail=\"%s\"", ns, name,
                 ce->message);
        if (ret_sb)
            *ret_sb = cur;
        else
            json_decref(cur);
        return 0;
    case EXT_SB_OTHER:
        json_decref(cur);
        return r; /* a 409's -EEXIST: the caller tries another name */
    case EXT_SB_GONE:
        return r;
    case EXT_SB_UNKNOWN:
        break;
    }
    log_warn("pool member create outcome unknown\tsandbox=%s/%s detail=\"%s\" read=\"%s\"", ns,
             name, ce->message, e.message);
    return -EINPROGRESS;
}

/* True when the claim cache has no claim ns/name, or one being deleted, or (uid given)
 * one with another UID. False without a claim cache or before it has synced (the
 * Sandboxes' workers start without waiting for it). */
static bool claim_gone(struct ext_ctrl *x, const char *ns, const char *name, const char *uid)
{
    const char *cur;
    json_t *obj;
    bool gone;
    if (!x->inf[EXT_INF_CLAIM] || !kube_informer_has_synced(x->inf[EXT_INF_CLAIM]) || !ns || !name)
        return false;
    obj = kube_store_get_ns(ext__store(x, EXT_INF_CLAIM), ns, name);
    cur = obj ? kube_obj_uid(obj) : NULL;
    gone = !obj || kube_obj_deleting(obj) || (uid && (!cur || strcmp(uid, cur) != 0));
    json_decref(obj);
    return gone;
}

/* A side write may wait (side_writer.h): a claim deleted meanwhile (a short-lived one,
 * under steady load) has nothing left to annotate, and the PATCH would only be refused
 * with NotFound. A claim made again under the same name is another claim: a patch that
 * names its claim's UID (metadata.uid) is not for it (the server would refuse it too:
 * the UID is immutable). The cache decides; a deletion it has not seen yet costs that
 * refusal. */
static bool side_target_gone(struct ext_ctrl *x, const struct kube_res *res, const char *ns,
                             const char *name, const json_t *patch)
{
    const char *uid = json_string_value(json_object_get(json_object_get(patch, "metadata"), "uid"));
    return res == &API_RES_SANDBOXCLAIMS && claim_gone(x, ns, name, uid);
}

bool ext_ctrl_owner_claim_gone(void *ctx, const json_t *sb)
{
    const json_t *ref = kube_obj_controller_ref(sb);
    const char *kind = json_string_value(json_object_get(ref, "kind"));
    const char *uid = json_string_value(json_object_get(ref, "uid"));
    if (!kind || strcmp(kind, EXT_KIND_CLAIM) != 0 || !uid)
        return false;
    return claim_gone(ctx, kube_obj_namespace(sb), json_string_value(json_object_get(ref, "name")),
                      uid);
}

static void ready_once_failed(struct ext_ctrl *x, const char *claim_uid);

/* A claim's first-ready annotation whose write failed (not for the claim being gone or
 * made again, which the UID precondition answers 404 or 409): written again by the claim's
 * next pass, a back-off later. */
static void side_failed(struct ext_ctrl *x, const struct kube_res *res, const char *ns,
                        const char *name, const json_t *patch, const struct kube_err *e)
{
    const json_t *meta = json_object_get(patch, "metadata");
    const char *uid = json_string_value(json_object_get(meta, "uid"));
    char key[LIMIT_KUBE_STORE_KEY + 1];
    /* Only a failure that may clear by itself is written again: a refusal (403 for a
     * missing permission, 422 from a webhook) would be a PATCH a second per claim. */
    bool transient =
        e->http_status == 0 || e->http_status >= 500 || kube_err_is_too_many_requests(e);
    if (res != &API_RES_SANDBOXCLAIMS || !uid || !transient ||
        !json_object_get(json_object_get(meta, "annotations"), EXT_ANN_FIRST_READY))
        return;
    ready_once_failed(x, uid);
    (void)snprintf(key, sizeof(key), "%s/%s", ns, name);
    ext__enqueue(x, EXT_LOOP_CLAIM, key, LIMIT_EXT_SIDE_RETRY);
}

static int side_write(void *ctx, const struct kube_res *res, const char *ns, const char *name,
                      const json_t *patch)
{
    struct kube_err e;
    int r;
    if (side_target_gone(ctx, res, ns, name, patch))
        return SIDE_SKIPPED;
    r = ext__patch(ctx, res, ns, name, NULL, patch, NULL, &e);
    if (r < 0)
        side_failed(ctx, res, ns, name, patch, &e);
    return r;
}

void ext__side_patch(struct ext_ctrl *x, const struct kube_res *res, const char *ns,
                     const char *name, const json_t *patch)
{
    if (!x->side || !side_writer_add(x->side, res, ns, name, patch))
        (void)side_write(x, res, ns, name, patch);
}

bool ext_ctrl_claims_busy(void *ctx)
{
    struct ext_ctrl *x = ctx;
    struct workloop *l = x->loops[EXT_LOOP_CLAIM];
    return workloop_active(l) > 0 || wq_len(workloop_queue(l)) > 0;
}

static int side_start(struct ext_ctrl *x)
{
    struct side_opts so = {.write = side_write,
                           .ctx = x,
                           .gate = {.busy = ext_ctrl_claims_busy,
                                    .ctx = x,
                                    .max_wait = x->o.side_hold ? x->o.side_hold : EXT_SIDE_HOLD}};
    int r;
    if (x->o.side_hold == USEC_INFINITY)
        return 0;
    if (x->o.side_gate)
        so.gate = *x->o.side_gate;
    if ((r = side_writer_new(&so, &x->side)) < 0)
        return r;
    if (x->d.events)
        events_set_gate(x->d.events, &so.gate);
    return 0;
}

/* Ungates the Events (the gate reads the loops) and writes what is held. */
static void side_stop(struct ext_ctrl *x)
{
    if (x->d.events && x->side)
        events_set_gate(x->d.events, NULL);
    side_writer_free(x->side);
    x->side = NULL;
}

bool ext__pool_of(const json_t *sb, char *out, size_t size)
{
    const char *name;
    if (!sb_controller_is(sb, SB_EXT_GROUP, EXT_KIND_POOL))
        return false;
    name = json_string_value(json_object_get(kube_obj_controller_ref(sb), "name"));
    return name && ext__key(kube_obj_namespace(sb), name, out, size) == 0;
}

bool ext__warm_candidate(const json_t *sb)
{
    return !kube_obj_deleting(sb) && kube_obj_label(sb, SB_LABEL_WARM_POOL) &&
           kube_obj_label(sb, SB_LABEL_TEMPLATE_REF) &&
           sb_controller_is(sb, SB_EXT_GROUP, EXT_KIND_POOL) &&
           kube_obj_condition_true(sb, SB_COND_READY) &&
           json_array_size(kube_obj_path(sb, "status.podIPs")) > 0;
}

void ext__binding_put(struct ext_ctrl *x, const json_t *claim, const json_t *sb)
{
    const char *uid = kube_obj_uid(claim);
    char *text = uid ? json_dumps(sb, JSON_COMPACT) : NULL; /* a tree: ten times the bytes */
    if (!text)
        return; /* out of memory: the claim reads the Sandbox from the API server */
    pthread_mutex_lock(&x->lock);
    map_put(x->bindings, uid, text, NULL);
    pthread_mutex_unlock(&x->lock);
    /* Asked after the put: a deletion the cache shows now had its handler run (or it runs
     * after this and drops the binding itself), so no binding outlives its claim. */
    if (claim_gone(x, kube_obj_namespace(claim), kube_obj_name(claim), uid))
        ext__binding_drop(x, uid);
}

json_t *ext__binding_get(struct ext_ctrl *x, const char *claim_uid)
{
    char *text;
    json_t *sb;
    pthread_mutex_lock(&x->lock);
    text = xstrdup(map_get(x->bindings, claim_uid));
    pthread_mutex_unlock(&x->lock);
    if (!text)
        return NULL;
    sb = json_loads(text, 0, NULL);
    xfree(text);
    return sb;
}

bool ext__binding_has(struct ext_ctrl *x, const char *claim_uid)
{
    bool yes;
    pthread_mutex_lock(&x->lock);
    yes = map_get(x->bindings, claim_uid) != NULL;
    pthread_mutex_unlock(&x->lock);
    return yes;
}

void ext__binding_drop(struct ext_ctrl *x, const char *claim_uid)
{
    pthread_mutex_lock(&x->lock);
    xfree(map_remove(x->bindings, claim_uid));
    pthread_mutex_unlock(&x->lock);
}

void ext__ready_once_mark(struct ext_ctrl *x, const char *claim_uid)
{
    pthread_mutex_lock(&x->lock);
    map_put(x->ready_once, claim_uid, xstrdup(""), NULL); /* a write of it pending, again */
    pthread_mutex_unlock(&x->lock);
}

/* The first-ready annotation's write failed: the claim still counts as seen Ready, and
 * its next pass writes the annotation again (recover_first_ready). */
static void ready_once_failed(struct ext_ctrl *x, const char *claim_uid)
{
    pthread_mutex_lock(&x->lock);
    if (map_get(x->ready_once, claim_uid))
        map_put(x->ready_once, claim_uid, xstrdup("failed"), NULL);
    pthread_mutex_unlock(&x->lock);
}

bool ext__ready_once_writing(struct ext_ctrl *x, const char *claim_uid)
{
    const char *v;
    bool yes;
    pthread_mutex_lock(&x->lock);
    v = map_get(x->ready_once, claim_uid);
    yes = v && !*v;
    pthread_mutex_unlock(&x->lock);
    return yes;
}

bool ext__ready_once(struct ext_ctrl *x, const char *claim_uid)
{
    bool yes;
    pthread_mutex_lock(&x->lock);
    yes = map_get(x->ready_once, claim_uid) != NULL;
    pthread_mutex_unlock(&x->lock);
    return yes;
}

void ext__ready_once_drop(struct ext_ctrl *x, const char *claim_uid)
{
    pthread_mutex_lock(&x->lock);
    xfree(map_remove(x->ready_once, claim_uid));
    pthread_mutex_unlock(&x->lock);
}

void ext__cold_only_mark(struct ext_ctrl *x, const char *claim_uid)
{
    pthread_mutex_lock(&x->lock);
    map_put(x->cold_only, claim_uid, xstrdup(""), NULL);
    pthread_mutex_unlock(&x->lock);
}

bool ext__cold_only(struct ext_ctrl *x, const char *claim_uid)
{
    bool yes;
    pthread_mutex_lock(&x->lock);
    yes = map_get(x->cold_only, claim_uid) != NULL;
    pthread_mutex_unlock(&x->lock);
    return yes;
}

/* Drops the expired entries of x->sb_deleted; call with x->lock held. */
static void sb_deleted_prune(struct ext_ctrl *x, usec_t now)
{
    struct kube_strv gone = {0};
    struct map_iter it;
    const char *k;
    void *v;
    map_foreach (x->sb_deleted, it, k, v)
        if (*(usec_t *)v <= now)
            kube_strv_add(&gone, k);
    for (size_t i = 0; i < gone.n; i++)
        xfree(map_remove(x->sb_deleted, gone.v[i]));
    kube_strv_done(&gone);
}

void ext__sb_deleted_put(struct ext_ctrl *x, const char *uid)
{
    usec_t *t, now = clock_now();
    if (!uid || !*uid)
        return;
    t = xmalloc(sizeof(*t));
    *t = now + EXT_SB_DELETED_TTL;
    pthread_mutex_lock(&x->lock);
    /* past 256 entries (a mass expiry), expired ones go at most once a second: not a
     * scan of the whole map per delete */
    if (map_len(x->sb_deleted) >= 256 && now - x->sb_deleted_pruned >= USEC_PER_SEC) {
        sb_deleted_prune(x, now);
        x->sb_deleted_pruned = now;
    }
    map_put(x->sb_deleted, uid, t, NULL);
    pthread_mutex_unlock(&x->lock);
}

bool ext__sb_deleted(struct ext_ctrl *x, const char *uid)
{
    usec_t *t;
    bool yes = false;
    if (!uid)
        return false;
    pthread_mutex_lock(&x->lock);
    t = map_get(x->sb_deleted, uid);
    if (t && *t > clock_now())
        yes = true;
    else if (t)
        xfree(map_remove(x->sb_deleted, uid));
    pthread_mutex_unlock(&x->lock);
    return yes;
}

void ext__sb_deleted_drop(struct ext_ctrl *x, const char *uid)
{
    if (!uid)
        return;
    pthread_mutex_lock(&x->lock);
    xfree(map_remove(x->sb_deleted, uid));
    pthread_mutex_unlock(&x->lock);
}

usec_t ext__observed(struct ext_ctrl *x, const char *key, bool drop)
{
    usec_t *p, t = 0;
    pthread_mutex_lock(&x->lock);
    p = drop ? map_remove(x->observed, key) : map_get(x->observed, key);
    if (p)
        t = *p;
    if (drop)
        xfree(p);
    pthread_mutex_unlock(&x->lock);
    return t;
}

static void observe_claim(struct ext_ctrl *x, const char *key)
{
    pthread_mutex_lock(&x->lock);
    if (!map_get(x->observed, key)) {
        usec_t *t = xmalloc(sizeof(*t));
        *t = clock_wall_now();
        map_put(x->observed, key, t, NULL);
    }
    pthread_mutex_unlock(&x->lock);
}

/* ---- indexes ------------------------------------------------------------------------ */

static void index_ns_value(const json_t *obj, const char *v, struct kube_strv *out)
{
    char key[LIMIT_KUBE_STORE_KEY + 1];
    if (v && *v && ext__key(kube_obj_namespace(obj), v, key, sizeof(key)) == 0)
        kube_strv_add(out, key);
}

static void idx_sb_pool(void *ctx, const json_t *obj, struct kube_strv *out)
{
    (void)ctx;
    index_ns_value(obj, kube_obj_label(obj, SB_LABEL_WARM_POOL), out);
}

static void idx_pool_tpl(void *ctx, const json_t *obj, struct kube_strv *out)
{
    (void)ctx;
    index_ns_value(obj, kube_obj_path_str(obj, "spec.sandboxTemplateRef.name"), out);
}

/* Templates by namespace/hash of their name (the template-ref label of their members). */
static void idx_tpl_hash(void *ctx, const json_t *obj, struct kube_strv *out)
{
    char h[SB_HASH_LEN + 1];
    (void)ctx;
    if (!kube_obj_name(obj))
        return;
    sb_name_hash(kube_obj_name(obj), h);
    index_ns_value(obj, h, out);
}

bool ext__former_template_gone(struct ext_ctrl *x, const char *pool_th, const json_t *sb)
{
    const char *tr = kube_obj_label(sb, SB_LABEL_TEMPLATE_REF);
    return tr && pool_th && strcmp(tr, pool_th) != 0 &&
           !ext__template_of_hash(x, kube_obj_namespace(sb), tr);
}

json_t *ext__template_of(struct ext_ctrl *x, const json_t *sb, const json_t *tpl)
{
    const char *tr = kube_obj_label(sb, SB_LABEL_TEMPLATE_REF);
    const char *name = kube_obj_annotation(sb, SB_ANN_TEMPLATE_REF);
    char h[SB_HASH_LEN + 1];
    if (!tr)
        return NULL;
    if (tpl && kube_obj_name(tpl)) {
        sb_name_hash(kube_obj_name(tpl), h);
        if (strcmp(h, tr) == 0)
            return json_incref((json_t *)tpl);
    }
    if (!name)
        return NULL;
    sb_name_hash(name, h);
    if (strcmp(h, tr) != 0)
        return NULL;
    return kube_store_get_ns(ext__store(x, EXT_INF_TEMPLATE), kube_obj_namespace(sb), name);
}

bool ext__template_of_hash(struct ext_ctrl *x, const char *ns, const char *hash)
{
    char key[LIMIT_KUBE_STORE_KEY + 1];
    struct kube_strv keys = {0};
    bool yes;
    if (!hash || ext__key(ns, hash, key, sizeof(key)) < 0)
        return false;
    (void)kube_store_index_keys(ext__store(x, EXT_INF_TEMPLATE), EXT_IDX_TPL_HASH, key, &keys);
    yes = keys.n > 0;
    kube_strv_done(&keys);
    return yes;
}

static void idx_claim_pool(void *ctx, const json_t *obj, struct kube_strv *out)
{
    (void)ctx;
    index_ns_value(obj, kube_obj_path_str(obj, "spec.warmPoolRef.name"), out);
}

/* ---- event routing ------------------------------------------------------------------ */

static void enqueue_index(struct ext_ctrl *x, int which, const char *idx, const char *val, int loop,
                          bool unbound_only)
{
    struct kube_objv v = {0};
    char key[LIMIT_KUBE_STORE_KEY + 1];
    kube_store_by_index(ext__store(x, which), idx, val, &v);
    for (size_t i = 0; i < v.n; i++) {
        if (unbound_only &&
            (kube_obj_path_str(v.v[i], "status.sandbox.name") || kube_obj_deleting(v.v[i])))
            continue;
        if (kube_store_key(v.v[i], key, sizeof(key)) == 0)
            ext__enqueue(x, loop, key, 0);
    }
    kube_objv_done(&v);
}

/* Queues the pool's pass for a change of one of its members: within the coalescing window,
 * so that a claim's adoption, the refill's create and the members' status writes that
 * arrive together make one pass over the members, not one each. The claims do not wait
 * for it: warm candidates reach the claim queue at once (sb_route). */
static void pool_member_changed(struct ext_ctrl *x, const char *pool)
{
    usec_t w = x->o.pool_coalesce ? x->o.pool_coalesce : EXT_POOL_COALESCE;
    ext__enqueue(x, EXT_LOOP_POOL, pool, w == USEC_INFINITY ? 0 : w);
}

/* Candidate queue maintenance and pool/claim routing for one Sandbox state. */
static void sb_route(struct ext_ctrl *x, const json_t *sb, bool gone)
{
    char pool[LIMIT_KUBE_STORE_KEY + 1], key[LIMIT_KUBE_STORE_KEY + 1];
    const char *name = kube_obj_name(sb);
    if (ext__pool_of(sb, pool, sizeof(pool))) {
        if (!gone && ext__warm_candidate(sb))
            claim_queue_push(x->cq, pool, name);
        else
            claim_queue_remove(x->cq, pool, name);
        pool_member_changed(x, pool);
    }
    if (sb_controller_is(sb, SB_EXT_GROUP, EXT_KIND_CLAIM) &&
        ext__key(kube_obj_namespace(sb),
                 json_string_value(json_object_get(kube_obj_controller_ref(sb), "name")), key,
                 sizeof(key)) == 0)
        ext__enqueue(x, EXT_LOOP_CLAIM, key, 0);
    if (gone && ext__key(kube_obj_namespace(sb), name, key, sizeof(key)) == 0)
        /* a claim of its name that it blocked ("not controlled by claim"), whoever
         * controlled it (nobody, a pool, another claim): nothing else would bring that
         * claim back; without such a claim the pass finds nothing to do */
        ext__enqueue(x, EXT_LOOP_CLAIM, key, 0);
}

static void sb_on_add(void *ctx, const json_t *sb)
{
    struct ext_ctrl *x = ctx;
    char pool[LIMIT_KUBE_STORE_KEY + 1];
    /* Lower before the pool is queued: its reconcile must see the create as seen. Only the
     * creates of the pool that made it (its UID): a pool made again under the same name
     * does not count an earlier one's creates as its own. */
    if (ext__pool_of(sb, pool, sizeof(pool)))
        pool_expect_lower_creations(
            x->expect, pool, json_string_value(json_object_get(kube_obj_controller_ref(sb), "uid")),
            1);
    sb_route(x, sb, false);
}

static void sb_on_delete(void *ctx, const json_t *sb, bool unknown);

/* True when a claim consumes something that changed between old and new. */
static bool claim_relevant(const json_t *o, const json_t *n)
{
    return kube_obj_deleting(o) != kube_obj_deleting(n) ||
           !json_equal(kube_obj_path(o, "status.podIPs"), kube_obj_path(n, "status.podIPs")) ||
           !json_equal(kube_obj_condition(o, SB_COND_READY),
                       kube_obj_condition(n, SB_COND_READY)) ||
           !json_equal(kube_obj_condition(o, SB_COND_FINISHED),
                       kube_obj_condition(n, SB_COND_FINISHED)) ||
           !json_equal(kube_obj_controller_ref(o), kube_obj_controller_ref(n));
}

static void sb_on_update(void *ctx, const json_t *o, const json_t *n)
{
    struct ext_ctrl *x = ctx;
    char pool[LIMIT_KUBE_STORE_KEY + 1];
    if (kube_obj_uid_changed(o, n)) {
        sb_on_delete(x, o, false);
        sb_on_add(x, n);
        return;
    }
    if (ext__pool_of(o, pool, sizeof(pool)) && !sb_controller_is(n, SB_EXT_GROUP, EXT_KIND_POOL)) {
        claim_queue_remove(x->cq, pool, kube_obj_name(o));
        /* no longer the pool's: a deletion it expected of it will not be its to see */
        pool_expect_deletion_observed(x->expect, pool, kube_obj_uid(o));
        pool_member_changed(x, pool); /* a member left: refill */
    }
    if (ext__pool_of(n, pool, sizeof(pool)) || claim_relevant(o, n))
        sb_route(x, n, false);
}

static void sb_on_delete(void *ctx, const json_t *sb, bool unknown)
{
    struct ext_ctrl *x = ctx;
    char pool[LIMIT_KUBE_STORE_KEY + 1];
    (void)unknown;
    if (ext__pool_of(sb, pool, sizeof(pool)))
        pool_expect_deletion_observed(x->expect, pool, kube_obj_uid(sb));
    ext__sb_deleted_drop(x, kube_obj_uid(sb));
    lb_forget(x->lb, kube_obj_namespace(sb), kube_obj_name(sb));
    sb_route(x, sb, true);
}

static void obj_key(const json_t *obj, char *key, size_t size)
{
    if (kube_store_key(obj, key, size) < 0)
        key[0] = '\0';
}

/* Which claims of a template's pools a template event queues. */
enum tpl_claims {
    TPL_CLAIMS_NONE,
    TPL_CLAIMS_UNBOUND, /* its creation: claims waiting for it (TemplateNotFound) */
    TPL_CLAIMS_ALL,     /* a spec change: unbound claims it failed (a metadata conflict the
                           edit may have cleared) and bound ones (their Sandbox's pod
                           metadata follows the template's: claim__meta_sync) */
};

static void tpl_changed(struct ext_ctrl *x, const json_t *tpl, enum tpl_claims claims)
{
    char key[LIMIT_KUBE_STORE_KEY + 1];
    struct kube_objv pools = {0};
    obj_key(tpl, key, sizeof(key));
    if (!*key)
        return;
    ext__enqueue(x, EXT_LOOP_TEMPLATE, key, 0);
    kube_store_by_index(ext__store(x, EXT_INF_POOL), EXT_IDX_POOL_TPL, key, &pools);
    for (size_t i = 0; i < pools.n; i++) {
        char pk[LIMIT_KUBE_STORE_KEY + 1];
        obj_key(pools.v[i], pk, sizeof(pk));
        ext__enqueue(x, EXT_LOOP_POOL, pk, 0);
        if (claims != TPL_CLAIMS_NONE)
            enqueue_index(x, EXT_INF_CLAIM, EXT_IDX_CLAIM_POOL, pk, EXT_LOOP_CLAIM,
                          claims == TPL_CLAIMS_UNBOUND);
    }
    kube_objv_done(&pools);
}

static void tpl_on_add(void *ctx, const json_t *o)
{
    tpl_changed(ctx, o, TPL_CLAIMS_UNBOUND);
}

static void tpl_on_update(void *ctx, const json_t *o, const json_t *n)
{
    /* its own labelling and status leave the generation alone: no claim is queued */
    tpl_changed(ctx, n,
                kube_obj_generation(o) != kube_obj_generation(n) ? TPL_CLAIMS_ALL
                                                                 : TPL_CLAIMS_NONE);
}

/* A template went: every pool of its namespace is looked at again, since one switched
 * away from it may still hold members of it (replaced once it is gone: pool_reconcile.c,
 * member_other_template). Templates go rarely, pools are few. */
static void tpl_gone(struct ext_ctrl *x, const json_t *tpl)
{
    const char *ns = kube_obj_namespace(tpl);
    struct kube_objv pools = {0};
    kube_store_list(ext__store(x, EXT_INF_POOL), &pools);
    for (size_t i = 0; i < pools.n; i++) {
        char pk[LIMIT_KUBE_STORE_KEY + 1];
        const char *pns = kube_obj_namespace(pools.v[i]);
        if (ns && pns && strcmp(ns, pns) != 0)
            continue;
        obj_key(pools.v[i], pk, sizeof(pk));
        if (*pk)
            ext__enqueue(x, EXT_LOOP_POOL, pk, 0);
    }
    kube_objv_done(&pools);
}

static void tpl_on_delete(void *ctx, const json_t *o, bool unknown)
{
    (void)unknown;
    tpl_changed(ctx, o, TPL_CLAIMS_NONE);
    tpl_gone(ctx, o);
}

static void pool_changed(struct ext_ctrl *x, const json_t *pool, bool claims, bool gone)
{
    char key[LIMIT_KUBE_STORE_KEY + 1];
    obj_key(pool, key, sizeof(key));
    if (!*key)
        return;
    ext__enqueue(x, EXT_LOOP_POOL, key, 0);
    if (gone)
        claim_queue_drop(x->cq, key);
    if (claims)
        enqueue_index(x, EXT_INF_CLAIM, EXT_IDX_CLAIM_POOL, key, EXT_LOOP_CLAIM, true);
}

static void pool_on_add(void *ctx, const json_t *o)
{
    pool_changed(ctx, o, true, false);
}

static void pool_on_delete(void *ctx, const json_t *o, bool unknown);

static void pool_on_update(void *ctx, const json_t *o, const json_t *n)
{
    if (kube_obj_uid_changed(o, n)) { /* another pool: the first one's deletion, then this one */
        pool_on_delete(ctx, o, false);
        pool_on_add(ctx, n);
        return;
    }
    pool_changed(ctx, n, kube_obj_generation(o) != kube_obj_generation(n), false);
}

/* A deleted claim's or pool's Sandboxes, if the garbage collector is slow. */
static void owner_gone(struct ext_ctrl *x, const json_t *o)
{
    (void)cascade_owner_deleted(x->d.cascade, CASCADE_OF_EXT, kube_obj_namespace(o),
                                kube_obj_uid(o));
}

static void pool_on_delete(void *ctx, const json_t *o, bool unknown)
{
    (void)unknown;
    pool_changed(ctx, o, true, true);
    owner_gone(ctx, o);
}

static void claim_on_add(void *ctx, const json_t *o)
{
    struct ext_ctrl *x = ctx;
    char key[LIMIT_KUBE_STORE_KEY + 1];
    obj_key(o, key, sizeof(key));
    if (!*key)
        return;
    if (!kube_obj_annotation(o, EXT_ANN_FIRST_READY))
        observe_claim(x, key);
    ext__enqueue(x, EXT_LOOP_CLAIM, key, 0);
}

static void claim_on_delete(void *ctx, const json_t *o, bool unknown);

static void claim_on_update(void *ctx, const json_t *o, const json_t *n)
{
    struct ext_ctrl *x = ctx;
    char key[LIMIT_KUBE_STORE_KEY + 1];
    if (kube_obj_uid_changed(o, n)) { /* another claim: the first one's deletion, then this one */
        claim_on_delete(x, o, false);
        claim_on_add(x, n);
        return;
    }
    obj_key(n, key, sizeof(key));
    if (*key)
        ext__enqueue(x, EXT_LOOP_CLAIM, key, 0);
}

static void claim_on_delete(void *ctx, const json_t *o, bool unknown)
{
    struct ext_ctrl *x = ctx;
    char key[LIMIT_KUBE_STORE_KEY + 1];
    (void)unknown;
    obj_key(o, key, sizeof(key));
    (void)ext__observed(x, key, true);
    if (kube_obj_uid(o)) {
        ext__binding_drop(x, kube_obj_uid(o));
        ext__ready_once_drop(x, kube_obj_uid(o));
        pthread_mutex_lock(&x->lock);
        xfree(map_remove(x->cold_only, kube_obj_uid(o)));
        pthread_mutex_unlock(&x->lock);
    }
    owner_gone(x, o);
}

static void np_changed(struct ext_ctrl *x, const json_t *np)
{
    char key[LIMIT_KUBE_STORE_KEY + 1];
    const char *owner = json_string_value(json_object_get(kube_obj_controller_ref(np), "name"));
    if (sb_controller_is(np, SB_EXT_GROUP, EXT_KIND_TEMPLATE) &&
        ext__key(kube_obj_namespace(np), owner, key, sizeof(key)) == 0)
        ext__enqueue(x, EXT_LOOP_TEMPLATE, key, 0);
}

static void np_on_add(void *ctx, const json_t *o)
{
    np_changed(ctx, o);
}

static void np_on_update(void *ctx, const json_t *o, const json_t *n)
{
    (void)o;
    np_changed(ctx, n);
}

static void np_on_delete(void *ctx, const json_t *o, bool unknown)
{
    (void)unknown;
    np_changed(ctx, o);
}

static const struct kube_informer_handlers ext_handlers[EXT_INF_COUNT] = {
    [EXT_INF_TEMPLATE] = {.on_add = tpl_on_add,
                          .on_update = tpl_on_update,
                          .on_delete = tpl_on_delete},
    [EXT_INF_POOL] = {.on_add = pool_on_add,
                      .on_update = pool_on_update,
                      .on_delete = pool_on_delete},
    [EXT_INF_CLAIM] = {.on_add = claim_on_add,
                       .on_update = claim_on_update,
                       .on_delete = claim_on_delete},
    [EXT_INF_NETPOL] = {.on_add = np_on_add, .on_update = np_on_update, .on_delete = np_on_delete},
};

/* ---- workers ------------------------------------------------------------------------ */

/* Waits for every cache the reconcilers read: the manager's Sandboxes and Pods and
 * the extension informers. */
static int caches_wait(void *ctx, usec_t timeout)
{
    struct ext_ctrl *x = ctx;
    struct kube_informer *all[EXT_INF_COUNT + 2] = {x->sandboxes, x->pods};
    usec_t end = clock_now() + timeout;
    for (int i = 0; i < EXT_INF_COUNT; i++)
        all[i + 2] = x->inf[i];
    for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
        usec_t now = clock_now();
        int r = all[i] ? kube_informer_wait_for_sync(all[i], now < end ? end - now : 0) : 0;
        if (r < 0)
            return r;
    }
    return 0;
}

static int run_template(void *ctx, const char *key, usec_t *ret_requeue)
{
    return tpl_reconcile(ctx, key, ret_requeue);
}

static int run_pool(void *ctx, const char *key, usec_t *ret_requeue)
{
    return pool_reconcile(ctx, key, ret_requeue);
}

static int run_claim(void *ctx, const char *key, usec_t *ret_requeue)
{
    return claim_reconcile(ctx, key, ret_requeue);
}

void ext_ctrl_start_workers(struct ext_ctrl *x)
{
    int n[EXT_LOOP_COUNT];
    for (int i = 0; i < EXT_LOOP_COUNT; i++)
        n[i] = workloop_start(x->loops[i]);
    log_info("extensions workers started\tclaim=%d pool=%d template=%d", n[EXT_LOOP_CLAIM],
             n[EXT_LOOP_POOL], n[EXT_LOOP_TEMPLATE]);
}

void ext_ctrl_drop_side_writes(struct ext_ctrl *x)
{
    if (x)
        side_writer_drop(x->side);
}

void ext_ctrl_stop_workers(struct ext_ctrl *x)
{
    if (!x)
        return;
    /* All queues first, so the loops wind down together. */
    for (int i = 0; i < EXT_LOOP_COUNT; i++)
        workloop_shutdown(x->loops[i]);
    for (int i = 0; i < EXT_LOOP_COUNT; i++)
        workloop_stop(x->loops[i]);
    side_stop(x);
}

/* ---- construction ------------------------------------------------------------------- */

static void add_domain(struct ext_ctrl *x, struct str s)
{
    s = str_trim(s);
    if (!s.len)
        return;
    x->domains = xreallocarray(x->domains, x->ndomains + 1, sizeof(*x->domains));
    x->domains[x->ndomains] = str_dup(s);
    for (char *p = x->domains[x->ndomains]; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    x->ndomains++;
}

static void load_domains(struct ext_ctrl *x)
{
    struct buf b;
    struct str s, head, tail = STR_NULL;
    FILE *f = x->o.label_domains ? NULL : fopen("/etc/sandbox-config/allowed-label-domains", "re");
    buf_init(&b, LIMIT_EXT_DOMAINS_FILE);
    if (x->o.label_domains) {
        (void)buf_puts(&b, x->o.label_domains);
    } else if (f) {
        char chunk[4096];
        size_t n;
        while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 && buf_append(&b, chunk, n) == 0) {
        }
        fclose(f);
    }
    for (s = str_make(b.data, b.len); s.len; s = tail) {
        size_t i = 0;
        while (i < s.len && s.p[i] != ',' && s.p[i] != '\n')
            i++;
        head = str_make(s.p, i);
        tail = i < s.len ? str_make(s.p + i + 1, s.len - i - 1) : STR_NULL;
        add_domain(x, head);
    }
    if (!x->ndomains)
        add_domain(x, STR_LIT("sandbox.users.io"));
    buf_done(&b);
}

/* timers: the claim and pool passes keep theirs when they fail (requeue_on_error): a
 * claim's shutdownTime, TTL and timeout, a pool's readiness grace and refill waits would
 * otherwise come at the back-off's pace (up to LIMIT_WQ_BACKOFF_MAX late) */
static int loop_init(struct ext_ctrl *x, int i, const char *name, int workers,
                     workloop_reconcile_fn *fn, bool timers)
{
    struct workloop_opts lo = {.name = name,
                               .workers = workers,
                               .min_workers =
                                   x->o.worker_idle == USEC_INFINITY ? 0 : WORKLOOP_ELASTIC_MIN,
                               .idle_exit = x->o.worker_idle,
                               .reconcile = fn,
                               .wait_synced = caches_wait,
                               .ctx = x,
                               .requeue_on_error = timers,
                               .metrics = x->d.metrics};
    return workloop_new(&lo, &x->loops[i]);
}

int ext_ctrl_new(const struct ext_opts *o, const struct ext_deps *d, struct ext_ctrl **ret)
{
    struct ext_ctrl *x;
    int r;
    if (!o || !d || !d->client)
        return -EINVAL;
    x = XNEW(struct ext_ctrl);
    x->o = *o;
    x->d = *d;
    x->ns = d->ns && *d->ns ? xstrdup(d->ns) : NULL;
    x->d.ns = x->ns;
    x->o.label_domains = NULL;
    if (o->label_domains)
        x->o.label_domains = xstrdup(o->label_domains);
    load_domains(x);
    pthread_mutex_init(&x->lock, NULL);
    fifo_sem_init(&x->adopt_sem, o->adopt_inflight);
    x->buckets = map_new(xfree);
    x->observed = map_new(xfree);
    x->bindings = map_new(xfree);
    x->ready_once = map_new(xfree);
    x->cold_only = map_new(xfree);
    x->sb_deleted = map_new(xfree);
    x->expect = pool_expect_new(0);
    x->cq = claim_queue_new();
    x->lb = lb_state_new(o->latebind_loopback, o->latebind_timeout);
    ext_metrics_register(x->d.metrics ? x->d.metrics->reg : NULL, &x->met);
    r = loop_init(x, EXT_LOOP_TEMPLATE, "sandboxtemplate",
                  o->template_workers > 0 ? o->template_workers : 1, run_template, false);
    if (r >= 0)
        r = loop_init(x, EXT_LOOP_POOL, "sandboxwarmpool",
                      o->pool_workers > 0 ? o->pool_workers : 1, run_pool, true);
    if (r >= 0)
        r = loop_init(x, EXT_LOOP_CLAIM, "sandboxclaim",
                      o->claim_workers > 0 ? o->claim_workers : 300, run_claim, true);
    if (r >= 0)
        r = side_start(x);
    if (r < 0) {
        ext_ctrl_free(x);
        return r;
    }
    *ret = x;
    return 0;
}

int ext_ctrl_attach(struct ext_ctrl *x, struct kube_informer *sandboxes, struct kube_informer *pods)
{
    struct kube_informer_handlers h = {
        .on_add = sb_on_add, .on_update = sb_on_update, .on_delete = sb_on_delete, .ctx = x};
    int r;
    x->sandboxes = sandboxes;
    x->pods = pods;
    r = kube_informer_add_index(sandboxes, EXT_IDX_SB_POOL, idx_sb_pool, NULL);
    if (r >= 0)
        r = kube_informer_add_index(sandboxes, EXT_IDX_SB_OWNER, kube_index_controller_uid, NULL);
    if (r >= 0 && x->d.cascade)
        r = cascade_add_dependent(x->d.cascade, CASCADE_OF_EXT, &API_RES_SANDBOXES,
                                  kube_informer_store(sandboxes), EXT_IDX_SB_OWNER);
    if (r >= 0)
        r = kube_informer_add_handlers(sandboxes, &h);
    return r;
}

static int new_informer(struct ext_ctrl *x, int i, const struct kube_res *res)
{
    struct kube_informer_opts o = {
        .client = x->d.client, .res = res, .ns = x->ns, .transform = kube_store_strip_transform};
    struct kube_informer_handlers h = ext_handlers[i];
    struct kube_informer_source src;
    int r = ctrl_ns_source_for(x->ns, &x->nss[i], &src);
    if (r >= 0 && x->nss[i]) {
        o.ns = NULL;
        o.source = &src;
    }
    if (r >= 0)
        r = kube_informer_new(&o, &x->inf[i]);
    h.ctx = x;
    if (r >= 0 && i == EXT_INF_POOL)
        r = kube_informer_add_index(x->inf[i], EXT_IDX_POOL_TPL, idx_pool_tpl, NULL);
    if (r >= 0 && i == EXT_INF_CLAIM)
        r = kube_informer_add_index(x->inf[i], EXT_IDX_CLAIM_POOL, idx_claim_pool, NULL);
    if (r >= 0 && i == EXT_INF_TEMPLATE)
        r = kube_informer_add_index(x->inf[i], EXT_IDX_TPL_HASH, idx_tpl_hash, NULL);
    if (r >= 0)
        r = kube_informer_add_handlers(x->inf[i], &h);
    return r;
}

int ext__informers_new(struct ext_ctrl *x)
{
    static const struct kube_res *const res[EXT_INF_COUNT] = {
        &API_RES_SANDBOXTEMPLATES, &API_RES_SANDBOXWARMPOOLS, &API_RES_SANDBOXCLAIMS,
        &KUBE_RES_NETWORKPOLICIES};
    int r = 0;
    for (int i = 0; r >= 0 && i < EXT_INF_COUNT; i++)
        r = new_informer(x, i, res[i]);
    return r;
}

void ext__handlers(int which, struct kube_informer_handlers *ret)
{
    if (which >= 0 && which < EXT_INF_COUNT)
        *ret = ext_handlers[which];
    else
        *ret = (struct kube_informer_handlers){
            .on_add = sb_on_add, .on_update = sb_on_update, .on_delete = sb_on_delete};
}

int ext_ctrl_start(struct ext_ctrl *x)
{
    int r = ext__informers_new(x);
    /* For the cascade's sweep: a Sandbox whose claim or pool is gone from these. */
    if (r >= 0 && x->d.cascade)
        r = cascade_add_owner(x->d.cascade, CASCADE_OF_EXT, &API_RES_SANDBOXCLAIMS,
                              kube_informer_store(x->inf[EXT_INF_CLAIM]));
    if (r >= 0 && x->d.cascade)
        r = cascade_add_owner(x->d.cascade, CASCADE_OF_EXT, &API_RES_SANDBOXWARMPOOLS,
                              kube_informer_store(x->inf[EXT_INF_POOL]));
    for (int i = 0; r >= 0 && i < EXT_INF_COUNT; i++)
        r = kube_informer_start(x->inf[i]);
    if (r < 0)
        return log_error_errno(r, "cannot start the extensions informers");
    return 0;
}

bool ext_ctrl_synced(struct ext_ctrl *x)
{
    for (int i = 0; i < EXT_INF_COUNT; i++)
        if (!x->inf[i] || !kube_informer_has_synced(x->inf[i]))
            return false;
    return true;
}

int ext_ctrl_wait_synced(struct ext_ctrl *x, usec_t timeout)
{
    usec_t end = clock_now() + timeout;
    for (int i = 0; i < EXT_INF_COUNT; i++) {
        usec_t now = clock_now();
        int r;
        if (!x->inf[i])
            return -ECANCELED;
        r = kube_informer_wait_for_sync(x->inf[i], now < end ? end - now : 0);
        if (r < 0)
            return r;
    }
    return 0;
}

void ext_ctrl_request_stop(struct ext_ctrl *x)
{
    for (int i = 0; x && i < EXT_INF_COUNT; i++)
        kube_informer_request_stop(x->inf[i]);
}

void ext_ctrl_stop(struct ext_ctrl *x)
{
    if (!x || atomic_exchange(&x->stopped, true))
        return;
    ext_ctrl_stop_workers(x);
    ext_ctrl_request_stop(x); /* all asked, then each joined: one watch's wait in all */
    for (int i = 0; i < EXT_INF_COUNT; i++)
        if (x->inf[i])
            kube_informer_stop(x->inf[i]);
}

void ext_ctrl_free(struct ext_ctrl *x)
{
    if (!x)
        return;
    ext_ctrl_stop(x);
    side_stop(x);
    for (int i = 0; i < EXT_INF_COUNT; i++) {
        kube_informer_free(x->inf[i]);
        ctrl_ns_source_free(x->nss[i]);
    }
    for (int i = 0; i < EXT_LOOP_COUNT; i++)
        workloop_free(x->loops[i]);
    for (size_t i = 0; i < x->ndomains; i++)
        xfree(x->domains[i]);
    xfree(x->domains);
    map_free(x->buckets);
    map_free(x->observed);
    map_free(x->bindings);
    map_free(x->ready_once);
    map_free(x->cold_only);
    map_free(x->sb_deleted);
    pool_expect_free(x->expect);
    claim_queue_free(x->cq);
    lb_state_free(x->lb);
    pthread_mutex_destroy(&x->lock);
    fifo_sem_done(&x->adopt_sem);
    xfree((char *)x->o.label_domains);
    xfree(x->ns);
    xfree(x);
}
