/* SPDX-License-Identifier: Apache-2.0 */
/* One Sandbox reconcile pass: expiry, children, status write. */
#include "controller/sandbox_reconcile.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/res.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "controller/idle_ctrl.h"
#include "controller/sandbox_desired.h"
#include "controller/sandbox_int.h"
#include "controller/sandbox_memo.h"
#include "controller/sandbox_names.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/obj.h"
#include "kube/store.h"

void sb__error(struct sb_pass *p, int retry, const char *fmt, ...)
{
    va_list ap;
    if (retry == -ESHUTDOWN) {
        if (!p->ret)
            p->ret = retry;
        return;
    }
    if (p->errors.len)
        (void)buf_puts(&p->errors, "; ");
    va_start(ap, fmt);
    (void)buf_vprintf(&p->errors, fmt, ap); /* bounded: an over-long text is dropped */
    va_end(ap);
    if (retry < 0 && !p->ret)
        p->ret = retry;
    else if (retry == 0)
        p->refused = true;
}

void sb__event(struct sb_pass *p, bool warning, const char *reason, const char *fmt, ...)
{
    va_list ap;
    if (!p->r->events)
        return;
    va_start(ap, fmt);
    events_recordv(p->r->events, p->sb, warning ? EVENTS_WARNING : EVENTS_NORMAL, reason, fmt, ap);
    va_end(ap);
}

bool sb__ns_going(struct sb_pass *p)
{
    if (!kube_client_ns_terminating(p->r->client, p->ns))
        return false;
    if (!p->ret)
        p->ret = -ESHUTDOWN;
    return true;
}

int sb__create(struct sb_pass *p, const struct kube_res *res, const json_t *obj, json_t **ret_obj,
               struct kube_err *reterr)
{
    struct kube_req req;
    kube_req_init(&req, "POST", res);
    req.ns = p->ns;
    req.body = obj;
    req.field_manager = SB_FIELD_MANAGER;
    kube_err_clear(reterr);
    return kube_request(p->r->client, &req, ret_obj, reterr);
}

int sb__adopt(struct sb_pass *p, const struct kube_res *res, const json_t *obj, json_t *extra,
              json_t **ret_obj, struct kube_err *reterr)
{
    json_t *refs = json_deep_copy(kube_obj_path(obj, "metadata.ownerReferences"));
    json_t *patch = extra ? json_deep_copy(extra) : json_object();
    json_t *meta = json_object_get(patch, "metadata");
    int r;
    if (!json_is_array(refs)) {
        json_decref(refs);
        refs = json_array();
    }
    json_array_append_new(refs, sb_owner_ref(p->sb));
    if (!meta) {
        meta = json_object();
        json_object_set_new(patch, "metadata", meta);
    }
    json_object_set_new(meta, "ownerReferences", refs);
    /* The resourceVersion makes this a compare-and-swap: of two adopters one wins. */
    json_object_set_new(meta, "resourceVersion", json_string(kube_obj_resource_version(obj)));
    kube_err_clear(reterr);
    r = kube_patch(p->r->client, res, p->ns, kube_obj_name(obj), KUBE_PATCH_MERGE, patch, ret_obj,
                   reterr);
    json_decref(patch);
    return r;
}

void sb__owner_text(const json_t *obj, char *out, size_t size)
{
    const json_t *ref = kube_obj_controller_ref(obj);
    const char *k = json_string_value(json_object_get(ref, "kind"));
    const char *n = json_string_value(json_object_get(ref, "name"));
    const char *u = json_string_value(json_object_get(ref, "uid"));
    (void)snprintf(out, size, "%s/%s (UID: %s)", k ? k : "?", n ? n : "?", u ? u : "?");
}

static void now_text(char *out, size_t size)
{
    clock_format_rfc3339_sec(clock_wall_now(), out, (unsigned)size);
}

void sb__backstop(struct sb_pass *p, usec_t delay)
{
    if (!p->backstop || delay < p->backstop)
        p->backstop = delay;
}

json_t *sb__created_child(struct sb_pass *p, const struct kube_res *res, const char *name)
{
    usec_t left = 0;
    json_t *obj = sb_memo_created_get(p->r->memo, res, p->uid, name, &left);
    if (obj)
        sb__backstop(p, left);
    return obj;
}

json_t *sb__existing_child(struct sb_pass *p, const struct kube_res *res, const char *name,
                           struct kube_err *reterr)
{
    json_t *obj = NULL;
    char why[sizeof(reterr->message)];
    if (kube_get(p->r->client, res, p->ns, name, &obj, reterr) < 0) {
        /* The create's answer stands (the object exists); the read's is why it is not
         * known what it is. The read's code stays, for the retry. */
        (void)snprintf(why, sizeof(why), "%s", reterr->message);
        /* The read's message is cut to 700 bytes so that the whole fits the 1,024 with a
         * name of the longest (253) and any plural of ours. */
        (void)snprintf(reterr->message, sizeof(reterr->message),
                       "%s \"%s\" already exists and could not be read: %.700s", res->plural, name,
                       why);
        return NULL;
    }
    if (sb_controlled_by(obj, p->uid)) {
        sb_memo_created(p->r->memo, res, p->uid, obj);
        sb__backstop(p, SB_MEMO_TTL);
    }
    return obj;
}

/* The Ready condition's status in st, "-" without one (for logs). */
static const char *cond_status(const json_t *st)
{
    const char *v = json_string_value(json_object_get(sb_cond_get(st, SB_COND_READY), "status"));
    return v ? v : "-";
}

/* True when a write of st may wait: a change of details only, within the window. */
static bool defer_status(struct sb_pass *p, const json_t *st)
{
    enum sb_status_change d = sb_status_diff(json_object_get(p->sb, "status"), st);
    usec_t wait;
    if (d == SB_STATUS_SAME) {
        sb_defer_clear(p->r->memo, p->uid);
        return true;
    }
    if (d == SB_STATUS_HEADLINE)
        return false;
    wait = sb_defer_wait(p->r->memo, p->uid, p->r->status_window);
    if (!wait)
        return false;
    sb__backstop(p, wait);
    return true;
}

/* Writes status st (borrowed) when it differs from the Sandbox's; with coalesce, a change
 * of details only may wait (defer_status). Returns 1 when it was written, 0 when nothing
 * was (not needed, held back, or left to a newer version's event), or a negative errno. */
static int write_status(struct sb_pass *p, json_t *st, bool coalesce)
{
    struct kube_err e;
    json_t *obj;
    int r;
    if (coalesce ? defer_status(p, st) : !sb_status_changed(json_object_get(p->sb, "status"), st))
        return 0;
    if (sb_memo_stale(p->r->memo, p->sb)) {
        /* The cache has not seen our last write: its event requeues the key; the backstop
         * requeue covers an event lost across an API server restart. */
        sb__backstop(p, SB_MEMO_TTL);
        return 0;
    }
    if (sb__ns_going(p))
        return 0;
    obj = sb_status_body(p->sb, st);
    r = kube_update_status(p->r->client, &API_RES_SANDBOXES, p->ns, obj, NULL, &e);
    json_decref(obj);
    if (r >= 0) {
        log_debug("status written\tkey=%s/%s ready=%s/%s was=%s/%s", p->ns, p->name,
                  cond_status(st), sb_cond_reason(st, SB_COND_READY) ?: "-",
                  cond_status(json_object_get(p->sb, "status")),
                  sb_cond_reason(json_object_get(p->sb, "status"), SB_COND_READY) ?: "-");
        sb_memo_wrote(p->r->memo, p->sb);
        sb_defer_clear(p->r->memo, p->uid);
        return 1;
    }
    if (kube_err_is_not_found(&e))
        return 0;
    if (kube_err_is_conflict(&e)) {
        /* Our cache is behind: the newer version's watch event requeues the key, so a
         * back-off retry (which also spends the queue's shared retry bucket) is waste. */
        log_debug("status write conflict, the newer version's event retries\tkey=%s/%s", p->ns,
                  p->name);
        sb__backstop(p, SB_MEMO_TTL);
        return 0;
    }
    return log_warn_errno(r, "status write failed, will retry\tkey=%s/%s detail=\"%s\"", p->ns,
                          p->name, e.message);
}

/* Deletes the owned child of res named name, if the cache has it: that object (by its
 * UID), never one made again under its name since (a 409: not ours to delete). */
static int delete_owned(struct sb_pass *p, struct kube_store *s, const struct kube_res *res,
                        const char *name)
{
    json_t *obj = kube_store_get_ns(s, p->ns, name);
    struct kube_err e;
    int r = 0;
    if (obj && sb_controlled_by(obj, p->uid) && !kube_obj_deleting(obj) &&
        kube_delete_obj(p->r->client, res, obj, false, NULL, &e) < 0 &&
        !kube_err_is_not_found(&e) && !kube_err_is_conflict(&e))
        r = e.code ? e.code : -EIO;
    json_decref(obj);
    return r;
}

static int teardown_pod(struct sb_pass *p)
{
    struct kube_objv owned = {0};
    int r = 0;
    kube_store_by_index(p->r->pods, SB_INDEX_OWNER, p->uid, &owned);
    for (size_t i = 0; i < owned.n && r >= 0; i++)
        r = delete_owned(p, p->r->pods, &KUBE_RES_PODS, kube_obj_name(owned.v[i]));
    kube_objv_done(&owned);
    return r;
}

/* Expiry, second pass: the expired state is already persisted; tear down. */
static int expire_teardown(struct sb_pass *p, struct sb_result *res)
{
    const char *policy = kube_obj_path_str(p->sb, "spec.shutdownPolicy");
    char now[64];
    struct kube_err e;
    int r = teardown_pod(p);
    if (r >= 0)
        r = delete_owned(p, p->r->services, &KUBE_RES_SERVICES, p->name);
    if (r < 0)
        return log_warn_errno(r, "expiry teardown failed, will retry\tkey=%s/%s", p->ns, p->name);
    if (policy && strcmp(policy, "Delete") == 0) {
        /* this Sandbox (by UID): one made again under its name is not expired */
        if (kube_delete_obj(p->r->client, &API_RES_SANDBOXES, p->sb, false, NULL, &e) < 0 &&
            !kube_err_is_not_found(&e) && !kube_err_is_conflict(&e))
            return e.code ? e.code : -EIO;
        log_info("expired sandbox deleted\tkey=%s/%s", p->ns, p->name);
        return 0;
    }
    json_t *st = json_deep_copy(json_object_get(p->sb, "status"));
    st = st ? st : json_object();
    now_text(now, sizeof(now));
    sb_status_expire(st, true, kube_obj_generation(p->sb), now);
    r = write_status(p, st, false);
    json_decref(st);
    if (p->backstop) /* a write left to the cache's catching up: come back */
        res->requeue_after = p->backstop;
    return r < 0 ? r : 0;
}

static int expire(struct sb_pass *p, struct sb_result *res)
{
    const json_t *status = json_object_get(p->sb, "status");
    const char *reason = sb_cond_reason(status, SB_COND_READY);
    char now[64];
    json_t *st;
    int r;
    if (reason && strcmp(reason, SB_R_EXPIRED) == 0)
        return expire_teardown(p, res);
    /* First pass: persist the expired state before anything is torn down. */
    st = status ? json_deep_copy(status) : json_object();
    now_text(now, sizeof(now));
    sb_status_expire(st, false, kube_obj_generation(p->sb), now);
    r = write_status(p, st, false);
    json_decref(st);
    if (r > 0) /* once: not again for a pass whose write was skipped (a stale cache) */
        sb__event(p, false, SB_R_EXPIRED, "Sandbox reached its shutdownTime");
    if (r >= 0)
        res->requeue_after = 1 * USEC_PER_SEC; /* the status event usually comes first */
    return r < 0 ? r : 0;
}

/* Wall-clock usec of spec.shutdownTime, or 0 when unset or unparsable. */
static usec_t shutdown_time(const json_t *sb)
{
    const char *s = kube_obj_path_str(sb, "spec.shutdownTime");
    usec_t t;
    if (!s || clock_parse_rfc3339(s, &t) < 0)
        return 0;
    return t;
}

static int reconcile_children(struct sb_pass *p, struct sb_result *res, usec_t deadline)
{
    char now[64];
    json_t *st;
    int r;
    sb__reconcile_pvcs(p);
    sb__reconcile_pod(p);
    if (!p->multiple)
        sb__reconcile_service(p);
    p->obs.errors = p->errors.len ? buf_str(&p->errors) : NULL;
    now_text(now, sizeof(now));
    st = sb_status_build(&p->obs, now);
    idle_status_adjust(p->sb, st);
    r = write_status(p, st, true);
    if (deadline) {
        usec_t wall = clock_wall_now();
        /* An exact timer, not a poll: wake up when the Sandbox expires. */
        res->requeue_after = deadline > wall ? deadline - wall : 1;
    }
    if (r >= 0 && p->ret >= 0 && p->r->idle)
        (void)idle_ctrl_check(p->r->idle, p->sb, st, r > 0 ? SB_MEMO_TTL : 0, &res->requeue_after);
    if (p->backstop && (!res->requeue_after || p->backstop < res->requeue_after))
        res->requeue_after = p->backstop;
    json_decref(st);
    if (p->ret < 0)
        return p->ret;
    if (r >= 0 && p->refused)
        return -EPERM; /* its status is written: the retry, with back-off, looks again */
    return r < 0 ? r : 0;
}

static int pass_init(struct sb_pass *p, const struct sb_reconciler *r, json_t *sb)
{
    memset(p, 0, sizeof(*p));
    p->r = r;
    p->sb = sb;
    p->ns = kube_obj_namespace(sb);
    p->name = kube_obj_name(sb);
    p->uid = kube_obj_uid(sb);
    if (!p->ns || !p->name || !p->uid)
        return -EINVAL;
    sb_name_hash(p->name, p->hash);
    buf_init(&p->errors, LIMIT_CTRL_ERRORS_TEXT);
    p->obs.sb = sb;
    p->obs.cluster_domain = r->cluster_domain;
    return 0;
}

static void pass_done(struct sb_pass *p)
{
    buf_done(&p->errors);
    xfree(p->multiple);
    json_decref(p->pod);
    json_decref(p->sb);
}

/* A Sandbox being deleted that stays (its finalizers, a foreground deletion while its Pod
 * terminates) is not Ready any more, whatever its status said: one status write, and only
 * then (a deletion without finalizers removes the object at once, with no write). */
static int deleting(const struct sb_reconciler *r, json_t *sb)
{
    struct sb_pass p;
    char now[64];
    json_t *st;
    int rc;
    if (!kube_obj_condition_true(sb, SB_COND_READY))
        return 0;
    rc = pass_init(&p, r, sb);
    if (rc < 0)
        return rc;
    st = json_deep_copy(json_object_get(sb, "status"));
    now_text(now, sizeof(now));
    sb_cond_set(st, SB_COND_READY, "False", SB_R_DELETING, "Sandbox is being deleted",
                kube_obj_generation(sb), now);
    rc = write_status(&p, st, false);
    json_decref(st);
    json_incref(sb); /* pass_done drops the pass's reference */
    pass_done(&p);
    return rc < 0 ? rc : 0;
}

int sb_reconcile(const struct sb_reconciler *r, const char *key, struct sb_result *ret)
{
    struct sb_result res = {0};
    struct sb_pass p;
    json_t *sb = kube_store_get(r->sandboxes, key);
    usec_t deadline;
    int rc;
    if (!sb || kube_obj_deleting(sb)) {
        /* Gone or going: garbage collection removes the children. */
        rc = sb ? deleting(r, sb) : 0;
        json_decref(sb);
        *ret = res;
        return rc;
    }
    rc = pass_init(&p, r, sb);
    if (rc < 0) {
        json_decref(sb);
        return rc;
    }
    deadline = shutdown_time(sb);
    /* The namespace/name strings stay valid: p.sb may be replaced, but the first
     * object is kept alive by the store reference until pass_done. */
    json_incref(sb);
    if (sb_expired(sb, deadline, clock_wall_now()))
        rc = expire(&p, &res);
    else
        rc = reconcile_children(&p, &res, deadline);
    pass_done(&p);
    json_decref(sb);
    /* On a failure too: the back-off alone (up to 1000 s) would let a Sandbox outlive
     * its shutdownTime by that long; the caller retries at the earlier of the two. */
    *ret = res;
    return rc;
}
