/* SPDX-License-Identifier: Apache-2.0 */
/* The PVC and headless Service steps of a Sandbox reconcile. */
#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "controller/sandbox_desired.h"
#include "controller/sandbox_int.h"
#include "controller/sandbox_memo.h"
#include "controller/sandbox_names.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "kube/store.h"

/* ---- PVCs ------------------------------------------------------------------------- */

/* True when an earlier pass created the child of kind res named name and the cache has
 * yet to show it (sb__created_child). */
static bool created_earlier(struct sb_pass *p, const struct kube_res *res, const char *name)
{
    json_t *obj = sb__created_child(p, res, name);
    bool found = obj != NULL;
    json_decref(obj);
    return found;
}

static void adopt_or_refuse(struct sb_pass *p, const struct kube_res *res, const char *what,
                            const json_t *obj, json_t *extra)
{
    char owner[512];
    struct kube_err e;
    if (!sb_uncontrolled(obj)) {
        sb__owner_text(obj, owner, sizeof(owner));
        sb__error(p, 0, "%s \"%s\" is owned by %s, not by sandbox \"%s\"", what, kube_obj_name(obj),
                  owner, p->name);
    } else if (!sb_adoptable_label(obj)) {
        sb__error(p, 0,
                  "cannot adopt unowned %s \"%s\" without the label " SB_LABEL_ADOPTABLE "=true",
                  what, kube_obj_name(obj));
    } else if (sb__adopt(p, res, obj, extra, NULL, &e) < 0) {
        sb__error(p, e.code ? e.code : -EIO, "adopting %s \"%s\" failed: %s", what,
                  kube_obj_name(obj), e.message);
    } else {
        log_info("adopted %s\tkey=%s/%s child=%s", what, p->ns, p->name, kube_obj_name(obj));
    }
}

static void reconcile_pvc(struct sb_pass *p, const json_t *vct)
{
    char name[512];
    struct kube_err e;
    json_t *have, *want, *out = NULL;
    if (sb_pvc_name(p->sb, vct, name, sizeof(name)) < 0) {
        sb__error(p, SB_ERR_SPEC, "volumeClaimTemplate without a usable metadata.name");
        return;
    }
    have = kube_store_get_ns(p->r->pvcs, p->ns, name);
    if (have) {
        sb_memo_created_forget(p->r->memo, &KUBE_RES_PVCS, p->uid, name, NULL);
        if (!sb_controlled_by(have, p->uid))
            adopt_or_refuse(p, &KUBE_RES_PVCS, "PVC", have, NULL);
        json_decref(have);
        return;
    }
    if (created_earlier(p, &KUBE_RES_PVCS, name))
        return;
    want = sb_desired_pvc(p->sb, vct);
    if (sb__create(p, &KUBE_RES_PVCS, want, &out, &e) >= 0) {
        sb_memo_created(p->r->memo, &KUBE_RES_PVCS, p->uid, out);
    } else if (kube_err_is_already_exists(&e) &&
               (have = sb__existing_child(p, &KUBE_RES_PVCS, name, &e)) != NULL) {
        /* made by us and not cached yet, or by someone else */
        if (!sb_controlled_by(have, p->uid))
            adopt_or_refuse(p, &KUBE_RES_PVCS, "PVC", have, NULL);
        json_decref(have);
    } else {
        sb__error(p, e.code ? e.code : -EIO, "PVC \"%s\" create failed: %s", name, e.message);
    }
    json_decref(out);
    json_decref(want);
}

void sb__reconcile_pvcs(struct sb_pass *p)
{
    size_t i;
    const json_t *vct;
    json_array_foreach(kube_obj_path(p->sb, "spec.volumeClaimTemplates"), i, vct)
        reconcile_pvc(p, vct);
}

/* ---- Service ---------------------------------------------------------------------- */

/* The spec part of a Service we own that differs from what we want, or NULL. */
static json_t *service_drift(struct sb_pass *p, const json_t *svc, bool ports)
{
    json_t *want = sb_desired_service(p->sb), *patch = json_object(), *sel;
    const json_t *have_sel = kube_obj_path(svc, "spec.selector");
    const char *k;
    json_t *v;
    if (!json_equal(have_sel, kube_obj_path(want, "spec.selector"))) {
        sel = json_deep_copy(kube_obj_path(want, "spec.selector"));
        json_object_foreach((json_t *)have_sel, k, v)
        {
            if (!json_object_get(sel, k))
                json_object_set_new(sel, k, json_null());
        }
        json_object_set_new(patch, "spec", json_pack("{s:o}", "selector", sel));
    }
    const json_t *have_ports = kube_obj_path(svc, "spec.ports");
    const json_t *want_ports = kube_obj_path(want, "spec.ports");
    /* none and [] are the same: the API server leaves an empty list out, so a portless
     * Service was patched with "ports": [] on every pass */
    if (ports && (json_array_size(have_ports) || json_array_size(want_ports)) &&
        !json_equal(have_ports, want_ports)) {
        if (!json_object_get(patch, "spec"))
            json_object_set_new(patch, "spec", json_object());
        json_object_set(json_object_get(patch, "spec"), "ports",
                        (json_t *)kube_obj_path(want, "spec.ports"));
    }
    if (!kube_obj_label(svc, SB_LABEL_NAME_HASH) ||
        strcmp(kube_obj_label(svc, SB_LABEL_NAME_HASH), p->hash) != 0)
        json_object_set_new(patch, "metadata",
                            json_pack("{s:{s:s}}", "labels", SB_LABEL_NAME_HASH, p->hash));
    json_decref(want);
    if (json_object_size(patch) == 0) {
        json_decref(patch);
        return NULL;
    }
    return patch;
}

static void repair_service(struct sb_pass *p, const json_t *svc, bool ports)
{
    struct kube_err e;
    json_t *patch = service_drift(p, svc, ports);
    if (patch && kube_patch(p->r->client, &KUBE_RES_SERVICES, p->ns, p->name, KUBE_PATCH_MERGE,
                            patch, NULL, &e) < 0)
        sb__error(p, e.code ? e.code : -EIO, "service repair failed: %s", e.message);
    json_decref(patch);
}

static void service_exists(struct sb_pass *p)
{
    p->obs.svc_exists = true;
    p->obs.svc_name = p->name;
}

static void adopt_service(struct sb_pass *p, const json_t *svc)
{
    const char *ip = kube_obj_path_str(svc, "spec.clusterIP");
    json_t *extra;
    if (sb_uncontrolled(svc) && sb_adoptable_label(svc) && ip && *ip && strcmp(ip, "None") != 0) {
        sb__error(p, 0, "service \"%s\" has clusterIP %s; only a headless Service can be adopted",
                  p->name, ip);
        return;
    }
    extra = service_drift(p, svc, true);
    size_t before = p->errors.len;
    adopt_or_refuse(p, &KUBE_RES_SERVICES, "service", svc, extra);
    if (p->errors.len == before)
        service_exists(p);
    json_decref(extra);
}

static void create_service(struct sb_pass *p)
{
    struct kube_err e;
    json_t *want, *out = NULL, *have;
    if (created_earlier(p, &KUBE_RES_SERVICES, p->name)) {
        service_exists(p);
        return;
    }
    want = sb_desired_service(p->sb);
    if (sb__create(p, &KUBE_RES_SERVICES, want, &out, &e) >= 0) {
        sb_memo_created(p->r->memo, &KUBE_RES_SERVICES, p->uid, out);
        service_exists(p);
    } else if (kube_err_is_already_exists(&e) &&
               (have = sb__existing_child(p, &KUBE_RES_SERVICES, p->name, &e)) != NULL) {
        /* made by us and not cached yet, or by someone else */
        if (sb_controlled_by(have, p->uid)) {
            /* ours, out of the cache: it lost the tracking label the cache selects on
             * (--cache-label-selectors), which the repair restores (else this create,
             * its refusal and the read came back every SB_MEMO_TTL for good) */
            repair_service(p, have, true);
            service_exists(p);
        } else {
            adopt_service(p, have);
        }
        json_decref(have);
    } else {
        sb__error(p, e.code ? e.code : -EIO, "service create failed: %s", e.message);
    }
    json_decref(out);
    json_decref(want);
}

void sb__reconcile_service(struct sb_pass *p)
{
    const json_t *flag = kube_obj_path(p->sb, "spec.service");
    bool want = json_is_true(flag), unset = !json_is_boolean(flag);
    json_t *svc = kube_store_get_ns(p->r->services, p->ns, p->name);
    struct kube_err e;
    if (!svc) {
        if (want)
            create_service(p);
        return;
    }
    sb_memo_created_forget(p->r->memo, &KUBE_RES_SERVICES, p->uid, p->name, NULL);
    if (sb_controlled_by(svc, p->uid)) {
        if (!want && !unset) {
            if (kube_delete_obj(p->r->client, &KUBE_RES_SERVICES, svc, false, NULL, &e) < 0 &&
                !kube_err_is_not_found(&e) && !kube_err_is_conflict(&e))
                sb__error(p, e.code ? e.code : -EIO, "service delete failed: %s", e.message);
        } else {
            repair_service(p, svc, want);
            service_exists(p);
        }
    } else if (want) {
        adopt_service(p, svc);
    } else if (!sb_uncontrolled(svc) && unset) {
        adopt_or_refuse(p, &KUBE_RES_SERVICES, "service", svc, NULL);
    }
    json_decref(svc);
}
