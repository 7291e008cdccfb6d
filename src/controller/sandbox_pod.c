/* SPDX-License-Identifier: Apache-2.0 */
/* The Pod step of a Sandbox reconcile: find the one owned Pod, adopt or refuse
 * unowned ones, create, delete on suspend, keep its metadata in line, and keep the
 * Sandbox's pod-name annotation. */
#include <errno.h>
#include <string.h>

#include "api/res.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "controller/sandbox_desired.h"
#include "controller/sandbox_int.h"
#include "controller/sandbox_memo.h"
#include "controller/sandbox_names.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "kube/store.h"

static bool suspended(const struct sb_pass *p)
{
    const char *m = kube_obj_path_str(p->sb, "spec.operatingMode");
    return m && strcmp(m, SB_MODE_SUSPENDED) == 0;
}

/* The Pod named by the annotation is a candidate only when someone may hand it to us:
 * unowned and labelled adoptable. Anything else it names is ignored, so editing the
 * annotation cannot make us adopt or delete a Pod we do not own. */
static json_t *candidate(struct sb_pass *p)
{
    const char *ann = kube_obj_annotation(p->sb, SB_ANN_POD_NAME);
    json_t *c;
    if (ann && *ann && strcmp(ann, p->name) != 0) {
        c = kube_store_get_ns(p->r->pods, p->ns, ann);
        if (c && sb_uncontrolled(c) && sb_adoptable_label(c))
            return c;
        json_decref(c);
    }
    return kube_store_get_ns(p->r->pods, p->ns, p->name);
}

static void use_pod(struct sb_pass *p, json_t *pod)
{
    json_decref(p->pod);
    p->pod = pod;
    p->obs.pod = pod;
}

/* True when the metadata patch may wait (sb_pod_meta_wait: claims are being served, and
 * it was first put off less than the gate's bound ago). The pass then comes back after
 * SB_POD_META_RECHECK, or what is left of the bound. */
static bool hold_meta(struct sb_pass *p, const json_t *patch)
{
    usec_t wait = sb_pod_meta_wait(p->r->memo, &p->r->pod_meta_gate, kube_obj_uid(p->pod), patch);
    if (!wait)
        return false;
    sb__backstop(p, wait < SB_POD_META_RECHECK ? wait : SB_POD_META_RECHECK);
    return true;
}

static void sync_meta(struct sb_pass *p)
{
    struct kube_err e;
    json_t *patch, *out = NULL;
    if (!p->pod || kube_obj_deleting(p->pod))
        return;
    if (sb_memo_stale(p->r->memo, p->pod)) {
        /* The cache still has the Pod our last patch replaced: that patch's event brings
         * the Sandbox back (the backstop covers a lost one); no second patch. */
        sb__backstop(p, SB_MEMO_TTL);
        return;
    }
    patch = sb_pod_meta_patch(p->sb, p->pod);
    if (!patch)
        return;
    if (p->r->owner_gone && p->r->owner_gone(p->r->owner_gone_ctx, p->sb)) {
        /* The claim went (a short one, deleted before its adoption's patch was written):
         * the Sandbox and its Pod follow it. An orphaning deletion rewrites the Sandbox's
         * owner references, which brings it back here with no owner gone. */
        sb_defer_clear(p->r->memo, kube_obj_uid(p->pod));
        json_decref(patch);
        return;
    }
    if (hold_meta(p, patch)) {
        json_decref(patch);
        return;
    }
    if (!p->r->keep_managed_fields)
        kube_obj_reset_managed_fields(patch);
    if (kube_patch(p->r->client, &KUBE_RES_PODS, p->ns, kube_obj_name(p->pod), KUBE_PATCH_MERGE,
                   patch, &out, &e) < 0) {
        sb__error(p, e.code, "pod \"%s\" metadata patch failed: %s", kube_obj_name(p->pod),
                  e.message);
    } else {
        sb_defer_clear(p->r->memo, kube_obj_uid(p->pod));
        sb_memo_wrote(p->r->memo, p->pod);
        use_pod(p, out);
    }
    json_decref(patch);
}

/* A Pod we found that is not (yet) ours: adopt it when allowed, else report it. */
static void handle_candidate(struct sb_pass *p, json_t *c)
{
    char owner[512];
    struct kube_err e;
    json_t *out = NULL, *extra;
    if (sb_controlled_by(c, p->uid)) {
        use_pod(p, c);
        return;
    }
    p->obs.pod_unowned = true;
    if (!sb_uncontrolled(c)) {
        sb__owner_text(c, owner, sizeof(owner));
        sb__error(p, 0, "pod \"%s\" is owned by %s, not by sandbox \"%s\"", kube_obj_name(c), owner,
                  p->name);
    } else if (!sb_adoptable_label(c)) {
        sb__error(p, 0,
                  "pod \"%s\" exists and is not owned by sandbox \"%s\"; it is left alone "
                  "(label it " SB_LABEL_ADOPTABLE "=true to allow adoption)",
                  kube_obj_name(c), p->name);
        sb__event(p, true, SB_R_POD_NOT_OWNED, "Pod %s exists and is not owned by this Sandbox",
                  kube_obj_name(c));
    } else if (!suspended(p)) {
        extra = json_pack("{s:{s:{s:s}}}", "metadata", "labels", SB_LABEL_NAME_HASH, p->hash);
        if (sb__adopt(p, &KUBE_RES_PODS, c, extra, &out, &e) < 0) {
            /* still a candidate (a 409: it changed since the cache's copy): retried, and
             * the pod-name annotation naming it stays (sync_annotation) */
            sb__error(p, e.code ? e.code : -EIO, "adopting pod \"%s\" failed: %s", kube_obj_name(c),
                      e.message);
        } else {
            p->obs.pod_unowned = false;
            sb__event(p, false, "PodAdopted", "Adopted Pod %s", kube_obj_name(c));
            /* until the cache shows it ours: the passes before use this copy, not the
             * cache's unowned one (adopted again, a conflict, or a second Pod made) */
            sb_memo_wrote(p->r->memo, c);
            sb_memo_created(p->r->memo, &KUBE_RES_PODS, p->uid, out);
            use_pod(p, out);
        }
        json_decref(extra);
    }
    json_decref(c);
}

/* Before a create: the Pod the annotation names when the cache has yet to show it (made
 * just before the Sandbox, its event behind the Sandbox's on another watch). Without this
 * read the pass would create a Pod of the Sandbox's name beside it. True when the Pod step
 * is done for this pass: that Pod was found and handled as a candidate, or could not be
 * read (retried). False when there is none to find: create. */
static bool unseen_named_pod(struct sb_pass *p)
{
    const char *ann = kube_obj_annotation(p->sb, SB_ANN_POD_NAME);
    struct kube_err e;
    json_t *c = NULL;
    if (!ann || !*ann || strcmp(ann, p->name) == 0)
        return false;
    if ((c = kube_store_get_ns(p->r->pods, p->ns, ann))) {
        json_decref(c); /* seen, and not a candidate (candidate) */
        return false;
    }
    if (kube_get(p->r->client, &KUBE_RES_PODS, p->ns, ann, &c, &e) < 0) {
        if (kube_err_is_not_found(&e))
            return false;
        p->obs.pod_error = true;
        sb__error(p, e.code ? e.code : -EIO, "reading pod \"%s\" failed: %s", ann, e.message);
        return true;
    }
    if (sb_controlled_by(c, p->uid) || (sb_uncontrolled(c) && sb_adoptable_label(c))) {
        handle_candidate(p, c);
        return true;
    }
    json_decref(c);
    return false;
}

/* A status selector means a Pod was there before (the selector is written with the
 * first Pod), and IPs or a node in the status that it ran (the status drops both with
 * the Pod: after a suspend there are none, and a resume whose first create failed left
 * the status without them); unless the Pod went because of a suspend, it was lost. Any
 * Suspended reason but NotSuspended was written by a pass of a suspend (or,
 * PodTerminating, of the resume that still saw the suspended Pod going:
 * sandbox_status.c), so the Pod went with it. */
static bool pod_was_lost(const struct sb_pass *p)
{
    const char *r = sb_cond_reason(json_object_get(p->sb, "status"), SB_COND_SUSPENDED);
    if (!kube_obj_path_str(p->sb, "status.selector") ||
        (!json_array_size(kube_obj_path(p->sb, "status.podIPs")) &&
         !kube_obj_path_str(p->sb, "status.nodeName")))
        return false;
    return !r || strcmp(r, SB_R_NOT_SUSPENDED) == 0;
}

static void create_pod(struct sb_pass *p)
{
    struct kube_err e;
    json_t *want = sb_desired_pod(p->sb), *out = NULL;
    bool lost = pod_was_lost(p);
    int r = sb__create(p, &KUBE_RES_PODS, want, &out, &e);
    json_decref(want);
    if (r >= 0) {
        sb_memo_created(p->r->memo, &KUBE_RES_PODS, p->uid, out);
        use_pod(p, out);
        if (lost) {
            p->obs.pod_recreated = true;
            sb__event(p, true, "PodRecreated", "Pod was lost; created a new one");
        }
        log_info("created pod\tkey=%s/%s", p->ns, p->name);
        return;
    }
    if (kube_err_is_already_exists(&e)) {
        /* Not in our cache (yet): look at the real thing before deciding. */
        out = sb__existing_child(p, &KUBE_RES_PODS, p->name, &e);
        if (out) {
            handle_candidate(p, out);
            return;
        }
    }
    /* Refused because the namespace is being deleted: the Pod's state is known (there is
     * none), and sb__error keeps that refusal out of the status. */
    p->obs.pod_error = e.code != -ESHUTDOWN;
    sb__error(p, e.code ? e.code : -EIO, "pod create failed: %s", e.message);
}

/* Marks, in our record of a Pod (never sent anywhere), the copy pod_deleted keeps. */
#define REC_SUSPEND_DELETED "deletedForSuspend"

/* Our DELETE of the Pod in use was accepted: it is going. A pass that the cache's older
 * copy of it reaches (a resume's) sees that (sb_memo_stale: obs.pod_going). A Pod the
 * cache has yet to show stays recorded, as being deleted, until the cache shows it or its
 * deletion (sb_memo_created_gone): the passes meanwhile, not finding it, would report the
 * suspend done (Suspended=True) while it terminates, then not done when the cache shows
 * it. */
static void pod_deleted(struct sb_pass *p)
{
    char now[64];
    json_t *going;
    p->obs.pod_going = true;
    sb_memo_wrote(p->r->memo, p->pod);
    if (!p->pod_recorded) {
        sb_memo_created_forget(p->r->memo, &KUBE_RES_PODS, p->uid, kube_obj_name(p->pod), NULL);
        return;
    }
    going = json_deep_copy(p->pod);
    clock_format_rfc3339_sec(clock_wall_now(), now, sizeof(now));
    json_object_set_new(json_object_get(going, "metadata"), "deletionTimestamp", json_string(now));
    json_object_set_new(going, REC_SUSPEND_DELETED, json_true());
    sb_memo_created(p->r->memo, &KUBE_RES_PODS, p->uid, going);
    json_decref(going);
}

static void delete_pod(struct sb_pass *p)
{
    struct kube_err e;
    if (kube_obj_deleting(p->pod))
        return;
    /* that Pod (by UID): one made again under its name since is another pass's */
    if (kube_delete_obj(p->r->client, &KUBE_RES_PODS, p->pod, false, NULL, &e) >= 0) {
        pod_deleted(p);
    } else if (kube_err_is_not_found(&e) || kube_err_is_conflict(&e)) {
        /* gone already, or the name is another Pod's: none of ours is left */
        sb_memo_created_forget(p->r->memo, &KUBE_RES_PODS, p->uid, kube_obj_name(p->pod), NULL);
    } else {
        /* refused (403, 5xx): the Pod stays; Suspended says so, and the error retries */
        p->obs.pod_delete_failed = true;
        sb__error(p, e.code ? e.code : -EIO, "pod delete failed: %s", e.message);
        return;
    }
    log_info("deleted pod for suspend\tkey=%s/%s", p->ns, p->name);
}

/* Keeps metadata.annotations[pod-name] equal to the Pod in use (absent without one). A
 * Pod named after the Sandbox needs no annotation (clients fall back to the Sandbox's
 * name): it is not written after the create for it alone, unless pod_name_annotation_always. */
static void sync_annotation(struct sb_pass *p)
{
    const char *have = kube_obj_annotation(p->sb, SB_ANN_POD_NAME);
    const char *want = p->pod ? kube_obj_name(p->pod) : NULL;
    struct kube_err e;
    json_t *patch, *out = NULL;
    if ((!have && !want) || (have && want && strcmp(have, want) == 0))
        return;
    if (!have && strcmp(want, p->name) == 0 && !p->r->pod_name_annotation_always)
        return;
    if (!want && p->obs.pod_unowned)
        return; /* the Pod it names is not ours (yet): an adoption retried, or refused */
    if (sb_memo_stale(p->r->memo, p->sb)) {
        /* the cache has not seen our last write, which may be this very patch: its event
         * requeues the key (the backstop covers a lost one) */
        sb__backstop(p, SB_MEMO_TTL);
        return;
    }
    if (sb__ns_going(p))
        return;
    patch = json_pack("{s:{s:{s:o}}}", "metadata", "annotations", SB_ANN_POD_NAME,
                      want ? json_string(want) : json_null());
    if (kube_patch(p->r->client, &API_RES_SANDBOXES, p->ns, p->name, KUBE_PATCH_MERGE, patch, &out,
                   &e) < 0) {
        p->ret = p->ret ? p->ret : (e.code ? e.code : -EIO);
        log_warn("pod-name annotation patch failed, will retry\tkey=%s/%s err=\"%s\"", p->ns,
                 p->name, e.message);
    } else {
        sb_memo_wrote(p->r->memo, p->sb);
        json_decref(p->sb);
        p->sb = out;
        p->obs.sb = out;
    }
    json_decref(patch);
}

/* The Pod an earlier pass created (or deleted for a suspend: pod_deleted) that the cache
 * has yet to show, or NULL. The one deleted for a suspend counts while suspended only: a
 * resume creates the Pod again at once (refused with AlreadyExists while the old one is
 * still there, which is then read and recorded as it is: create_pod). */
static json_t *recorded_pod(struct sb_pass *p)
{
    json_t *pod = sb__created_child(p, &KUBE_RES_PODS, p->name);
    if (pod && json_is_true(json_object_get(pod, REC_SUSPEND_DELETED)) && !suspended(p)) {
        json_decref(pod);
        return NULL;
    }
    return pod;
}

/* True when candidate c (the cache's copy) is a version our adoption replaced: the cache
 * has yet to show the Pod ours. */
static bool adopted_earlier(struct sb_pass *p, const json_t *c)
{
    if (sb_controlled_by(c, p->uid) || !sb_memo_stale(p->r->memo, c))
        return false;
    sb__backstop(p, SB_MEMO_TTL);
    return true;
}

void sb__reconcile_pod(struct sb_pass *p)
{
    struct kube_objv owned = {0};
    kube_store_by_index(p->r->pods, SB_INDEX_OWNER, p->uid, &owned);
    if (owned.n > 1) {
        p->multiple = xasprintf("multiple Pods (%zu) are controlled by this Sandbox; refusing "
                                "to choose or create a Pod",
                                owned.n);
        p->obs.multiple_pods = p->multiple;
        /* none is chosen: its state is unknown (Suspended and PodScheduled say Unknown,
         * not "terminated" while the Pods run) */
        p->obs.pod_error = true;
        if (strcmp(sb_cond_reason(json_object_get(p->sb, "status"), SB_COND_READY) ?: "",
                   SB_R_MULTIPLE_PODS) != 0)
            sb__event(p, true, SB_R_MULTIPLE_PODS, "%s", p->multiple);
    } else if (owned.n == 1) {
        sb_memo_created_forget(p->r->memo, &KUBE_RES_PODS, p->uid, kube_obj_name(owned.v[0]), NULL);
        use_pod(p, json_incref(owned.v[0]));
    } else {
        json_t *c = candidate(p);
        if (c && adopted_earlier(p, c)) {
            /* its adoption's copy, recorded (or none: its state is unknown until the
             * cache shows it, and nothing is created meanwhile) */
            use_pod(p, sb__created_child(p, &KUBE_RES_PODS, kube_obj_name(c)));
            p->pod_recorded = p->pod != NULL;
            p->obs.pod_error = p->pod == NULL;
            json_decref(c);
        } else if (c) {
            handle_candidate(p, c);
        } else { /* the Pod a pass created, as it was returned, until the cache shows it */
            use_pod(p, recorded_pod(p));
            p->pod_recorded = p->pod != NULL;
        }
    }
    kube_objv_done(&owned);
    if (p->multiple || p->obs.pod_unowned) {
        /* leave everything alone */
    } else if (suspended(p)) {
        if (p->pod)
            delete_pod(p);
    } else if (p->pod) {
        sync_meta(p);
    } else if (!p->obs.pod_error && !unseen_named_pod(p)) {
        create_pod(p);
    }
    if (p->pod && (kube_obj_deleting(p->pod) || sb_memo_stale(p->r->memo, p->pod)))
        p->obs.pod_going = true;
    if (!p->multiple)
        sync_annotation(p);
}
