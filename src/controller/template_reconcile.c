/* SPDX-License-Identifier: Apache-2.0 */
/* SandboxTemplate reconcile: the self-label and the managed NetworkPolicy. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/res.h"
#include "common/limits.h"
#include "common/log.h"
#include "controller/ext_int.h"
#include "controller/ext_names.h"
#include "controller/template_build.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "kube/store.h"

static int self_label(struct ext_ctrl *x, const json_t *tpl)
{
    char hash[SB_HASH_LEN + 1];
    const char *cur = kube_obj_label(tpl, SB_LABEL_TEMPLATE_REF);
    struct kube_err e;
    json_t *p;
    int r;
    sb_name_hash(kube_obj_name(tpl), hash);
    if (cur && strcmp(cur, hash) == 0)
        return 0;
    p = json_pack("{s:{s:{s:s}}}", "metadata", "labels", SB_LABEL_TEMPLATE_REF, hash);
    r = ext__patch(x, &API_RES_SANDBOXTEMPLATES, kube_obj_namespace(tpl), kube_obj_name(tpl), NULL,
                   p, NULL, &e);
    json_decref(p);
    if (r < 0 && !kube_err_is_not_found(&e))
        return log_warn_errno(r, "template self-label failed\tdetail=\"%s\"", e.message);
    return 0;
}

static int np_unmanaged(struct ext_ctrl *x, const json_t *tpl, const json_t *np)
{
    struct kube_err e;
    if (!np || !sb_controlled_by(np, kube_obj_uid(tpl)) || kube_obj_deleting(np))
        return 0;
    if (kube_delete_obj(x->d.client, &KUBE_RES_NETWORKPOLICIES, np, false, NULL, &e) < 0 &&
        !kube_err_is_not_found(&e) && !kube_err_is_conflict(&e))
        return e.code ? e.code : -EIO;
    return 0;
}

static int np_ensure(struct ext_ctrl *x, const json_t *tpl, const json_t *np)
{
    json_t *want = tpl_network_policy(tpl), *upd;
    const char *ns = kube_obj_namespace(tpl);
    struct kube_err e;
    int r = 0;
    if (!np) {
        r = kube_create(x->d.client, &KUBE_RES_NETWORKPOLICIES, ns, want, NULL, &e);
        if (r < 0 && kube_err_is_already_exists(&e))
            r = 0; /* the cache lags; the watch event brings us back */
    } else if (!sb_controlled_by(np, kube_obj_uid(tpl))) {
        log_warn("refusing to update a NetworkPolicy the template does not control\tname=%s/%s", ns,
                 kube_obj_name(np));
    } else if (!tpl_np_spec_same(json_object_get(np, "spec"), json_object_get(want, "spec"))) {
        upd = json_deep_copy(np);
        json_object_set(upd, "spec", json_object_get(want, "spec"));
        r = kube_update(x->d.client, &KUBE_RES_NETWORKPOLICIES, ns, upd, NULL, &e);
        json_decref(upd);
    }
    json_decref(want);
    if (r == -ESHUTDOWN) /* the namespace is being deleted, the template with it */
        return log_debug_errno(r, "NetworkPolicy write failed\tdetail=\"%s\"", e.message);
    if (r < 0)
        return log_warn_errno(r, "NetworkPolicy write failed\tdetail=\"%s\"", e.message);
    return 0;
}

int tpl_reconcile(struct ext_ctrl *x, const char *key, usec_t *ret_requeue)
{
    json_t *tpl = kube_store_get(ext__store(x, EXT_INF_TEMPLATE), key), *np;
    char name[LIMIT_KUBE_STORE_KEY + 1];
    int r;
    *ret_requeue = 0;
    if (!tpl || kube_obj_deleting(tpl)) {
        json_decref(tpl); /* the NetworkPolicy goes with it (owner reference) */
        return 0;
    }
    r = self_label(x, tpl);
    (void)snprintf(name, sizeof(name), "%s%s", key, EXT_NP_SUFFIX);
    np = kube_store_get(ext__store(x, EXT_INF_NETPOL), name);
    if (r >= 0)
        r = tpl_np_managed(tpl) ? np_ensure(x, tpl, np) : np_unmanaged(x, tpl, np);
    json_decref(np);
    json_decref(tpl);
    return r;
}
