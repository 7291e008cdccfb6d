/* SPDX-License-Identifier: Apache-2.0 */
/* Blueprints, fingerprints, NetworkPolicy and pool Sandboxes built from templates. */
#include "controller/template_build.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/hash.h"
#include "common/xalloc.h"
#include "controller/ext_names.h"
#include "controller/latebind_spec.h"
#include "kube/obj.h"

json_t *ext_owner_ref(const json_t *obj, const char *kind)
{
    const char *n = kube_obj_name(obj), *u = kube_obj_uid(obj);
    return json_pack("{s:s, s:s, s:s, s:s, s:b, s:b}", "apiVersion", EXT_API_VERSION, "kind", kind,
                     "name", n ? n : "", "uid", u ? u : "", "controller", 1, "blockOwnerDeletion",
                     1);
}

json_t *ext_obj_ensure(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_object(v)) {
        v = json_object();
        json_object_set_new(obj, key, v);
    }
    return v;
}

bool tpl_np_managed(const json_t *tpl)
{
    const char *m = kube_obj_path_str(tpl, "spec.networkPolicyManagement");
    return !m || !*m || strcmp(m, "Managed") == 0;
}

void tpl_secure_pod_spec(json_t *pod_spec)
{
    if (json_is_object(pod_spec) && !json_object_get(pod_spec, "automountServiceAccountToken"))
        json_object_set_new(pod_spec, "automountServiceAccountToken", json_false());
}

const char *tpl_page_merging(const json_t *tpl)
{
    const char *m = kube_obj_path_str(tpl, "spec.pageMerging");
    if (m && strcmp(m, "Enabled") == 0)
        return "1";
    if (m && strcmp(m, "Maximal") == 0)
        return "fixed-layout";
    return NULL;
}

/* Sets name=value in container c's env, replacing an entry of that name. */
static void container_setenv(json_t *c, const char *name, const char *value)
{
    json_t *env = json_object_get(c, "env"), *x;
    size_t i;
    if (!json_is_array(env)) {
        env = json_array();
        json_object_set_new(c, "env", env);
    }
    json_array_foreach(env, i, x)
    {
        const char *n = json_string_value(json_object_get(x, "name"));
        if (n && strcmp(n, name) == 0) {
            json_array_set_new(env, i, json_pack("{s:s, s:s}", "name", name, "value", value));
            return;
        }
    }
    json_array_append_new(env, json_pack("{s:s, s:s}", "name", name, "value", value));
}

void tpl_enable_page_merging(json_t *pod_spec, const char *mode)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(pod_spec, "containers"), i, c)
    {
        if (json_is_object(c))
            container_setenv(c, TPL_PAGE_MERGE_ENV, mode);
    }
}

json_t *tpl_blueprint(const json_t *tpl)
{
    const json_t *spec = json_object_get(tpl, "spec");
    const json_t *pt = json_object_get(spec, "podTemplate");
    const json_t *vct = json_object_get(spec, "volumeClaimTemplates");
    const json_t *svc = json_object_get(spec, "service");
    json_t *bp = json_object();
    json_t *ptc = json_is_object(pt) ? json_deep_copy(pt) : json_object();
    tpl_secure_pod_spec(ext_obj_ensure(ptc, "spec"));
    const char *merge = tpl_page_merging(tpl);
    if (merge)
        tpl_enable_page_merging(json_object_get(ptc, "spec"), merge);
    json_object_set_new(bp, "podTemplate", ptc);
    if (json_is_array(vct))
        json_object_set_new(bp, "volumeClaimTemplates", json_deep_copy(vct));
    if (json_is_boolean(svc))
        json_object_set(bp, "service", (json_t *)svc);
    /* The idle policy (an extension) travels to every sandbox built from the template;
     * it is not part of the blueprint hash, so changing it does not roll the pools. */
    const json_t *idle = json_object_get(spec, "idlePolicy");
    if (json_is_object(idle))
        json_object_set_new(bp, "idlePolicy", json_deep_copy(idle));
    return bp;
}

/* FNV-1a fed by jansson's streaming dump: no intermediate string. */
static int fnv_feed(const char *buf, size_t len, void *ctx)
{
    uint32_t *h = ctx;
    *h = hash_fnv1a32(*h, buf, len);
    return 0;
}

static void hash_json(const json_t *v, char out[SB_HASH_LEN + 1])
{
    uint32_t h = HASH_FNV1A32_INIT;
    if (v)
        (void)json_dump_callback(v, fnv_feed, &h, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    (void)snprintf(out, SB_HASH_LEN + 1, "%08x", h);
}

void tpl_blueprint_hash(const json_t *tpl, char out[SB_HASH_LEN + 1])
{
    const json_t *spec = json_object_get(tpl, "spec");
    struct lb_policy pol;
    lb_policy_of(tpl, &pol);
    /* pageMerging changes the pods' env, the LateBound delivery mode their volumes, mounts
     * and env (the config token): part of the hash (absent or off keeps old hashes). */
    json_t *bp = json_pack("{s:O*, s:O*, s:O*, s:O*, s:s*}", "podTemplate",
                           json_object_get(spec, "podTemplate"), "volumeClaimTemplates",
                           json_object_get(spec, "volumeClaimTemplates"), "service",
                           json_object_get(spec, "service"), "pageMerging",
                           tpl_page_merging(tpl) ? json_object_get(spec, "pageMerging") : NULL,
                           "claimConfigDelivery", pol.late_bound ? "LateBound" : NULL);
    hash_json(bp, out);
    json_decref(bp);
}

void tpl_pod_template_hash(const json_t *tpl, char out[SB_HASH_LEN + 1])
{
    hash_json(kube_obj_path(tpl, "spec.podTemplate"), out);
}

static bool vcts_match(const json_t *a, const json_t *b)
{
    size_t i;
    const json_t *x;
    if (json_array_size(a) != json_array_size(b))
        return false;
    json_array_foreach(a, i, x)
    {
        const json_t *y = json_array_get(b, i);
        const char *na = kube_obj_name(x), *nb = kube_obj_name(y);
        if (!na || !nb || strcmp(na, nb) != 0 ||
            !json_equal(json_object_get(x, "spec"), json_object_get(y, "spec")))
            return false;
    }
    return true;
}

bool tpl_blueprint_matches(const json_t *tpl, const json_t *sb)
{
    const char *secret = kube_obj_annotation(sb, EXT_ANN_TOKEN_SECRET);
    const json_t *ss = json_object_get(sb, "spec"), *bs, *svc = json_object_get(ss, "service");
    struct lb_policy pol;
    json_t *bp;
    bool ok;
    lb_policy_of(tpl, &pol);
    /* A member without a config token cannot serve a LateBound template's env claims; one
     * with a token was built for a LateBound template. */
    if (pol.late_bound != (secret != NULL))
        return false;
    bp = tpl_blueprint(tpl);
    /* A late-bound member's pod also mounts its token (lb_pool_inject): compare with the
     * blueprint as it was injected. */
    if (secret)
        lb_pod_spec_inject(json_object_get(json_object_get(bp, "podTemplate"), "spec"), secret);
    bs = json_object_get(bp, "service");
    ok = json_equal(kube_obj_path(bp, "podTemplate.spec"), kube_obj_path(ss, "podTemplate.spec")) &&
         vcts_match(json_object_get(bp, "volumeClaimTemplates"),
                    json_object_get(ss, "volumeClaimTemplates")) &&
         ((!bs && !svc) || (bs && svc && json_equal(bs, svc)));
    json_decref(bp);
    return ok;
}

bool tpl_member_stale(const json_t *tpl, const char *th, const char *bh, const json_t *sb)
{
    const char *tr = kube_obj_label(sb, SB_LABEL_TEMPLATE_REF);
    const char *h = kube_obj_label(sb, EXT_LABEL_TEMPLATE_HASH);
    if (!tr || strcmp(tr, th) != 0)
        return true;
    if (h && strcmp(h, bh) == 0)
        return false;
    return !tpl_blueprint_matches(tpl, sb);
}

/* ---- NetworkPolicy ------------------------------------------------------------------ */

/* The router, and the controller: its idle probes (sandboxd's /v1/activity) and
 * late-bound deliveries (claimConfigDelivery) reach the pod directly. */
static json_t *default_ingress(void)
{
    return json_pack("[{s:[{s:{s:{s:s}}, s:{s:{s:s}}}, {s:{s:{s:s}}, s:{s:{s:s}}}]}]", "from",
                     "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name",
                     EXT_ROUTER_NAMESPACE, "podSelector", "matchLabels", "app", EXT_ROUTER_APP,
                     "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name",
                     EXT_ROUTER_NAMESPACE, "podSelector", "matchLabels", "app", EXT_CONTROLLER_APP);
}

/* DNS to the cluster resolver only; everything public; nothing private, link-local
 * (cloud metadata), carrier-grade NAT or unique-local. */
static json_t *default_egress(void)
{
    json_t *dns = json_pack("{s:[{s:{s:{s:s}}, s:{s:{s:s}}}], s:[{s:s, s:i}, {s:s, s:i}]}", "to",
                            "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name",
                            "kube-system", "podSelector", "matchLabels", "k8s-app", "kube-dns",
                            "ports", "protocol", "UDP", "port", 53, "protocol", "TCP", "port", 53);
    json_t *pub = json_pack("{s:[{s:{s:s, s:[s, s, s, s, s]}}, {s:{s:s, s:[s, s]}}]}", "to",
                            "ipBlock", "cidr", "0.0.0.0/0", "except", "10.0.0.0/8", "172.16.0.0/12",
                            "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10", "ipBlock", "cidr",
                            "::/0", "except", "fc00::/7", "fe80::/10");
    return json_pack("[o, o]", dns, pub);
}

json_t *tpl_network_policy(const json_t *tpl)
{
    const json_t *custom = kube_obj_path(tpl, "spec.networkPolicy");
    char hash[SB_HASH_LEN + 1], name[512];
    json_t *ing, *egr;
    sb_name_hash(kube_obj_name(tpl), hash);
    (void)snprintf(name, sizeof(name), "%s" EXT_NP_SUFFIX, kube_obj_name(tpl));
    if (json_is_object(custom)) {
        const json_t *i = json_object_get(custom, "ingress"),
                     *e = json_object_get(custom, "egress");
        ing = json_is_array(i) ? json_deep_copy(i) : json_array();
        egr = json_is_array(e) ? json_deep_copy(e) : json_array();
    } else {
        ing = default_ingress();
        egr = default_egress();
    }
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:[o]}, s:{s:{s:{s:s}}, s:[s, s], s:o, s:o}}",
                     "apiVersion", "networking.k8s.io/v1", "kind", "NetworkPolicy", "metadata",
                     "name", name, "namespace", kube_obj_namespace(tpl) ?: "", "ownerReferences",
                     ext_owner_ref(tpl, EXT_KIND_TEMPLATE), "spec", "podSelector", "matchLabels",
                     SB_LABEL_TEMPLATE_REF, hash, "policyTypes", "Ingress", "Egress", "ingress",
                     ing, "egress", egr);
}

/* A NetworkPolicy rule's lists as the API server keeps them: an empty list is dropped
 * (omitempty), a port without a protocol gets TCP (its default). */
static void np_rule_normalize(json_t *rule)
{
    const char *k;
    json_t *v, *port;
    size_t i;
    void *tmp;
    json_object_foreach_safe(rule, tmp, k, v)
    {
        if (json_is_array(v) && json_array_size(v) == 0)
            json_object_del(rule, k);
    }
    json_array_foreach(json_object_get(rule, "ports"), i, port)
    {
        if (json_is_object(port) && !json_object_get(port, "protocol"))
            json_object_set_new(port, "protocol", json_string("TCP"));
    }
}

/* A copy of spec (borrowed) as the API server keeps it (np_rule_normalize). */
static json_t *np_spec_normalized(const json_t *spec)
{
    static const char *const lists[] = {"ingress", "egress"};
    json_t *n = json_is_object(spec) ? json_deep_copy(spec) : json_object(), *rule;
    size_t i;
    for (size_t l = 0; l < 2; l++) {
        json_t *a = json_object_get(n, lists[l]);
        if (json_is_array(a) && json_array_size(a) == 0) {
            json_object_del(n, lists[l]);
            continue;
        }
        json_array_foreach(a, i, rule)
        {
            if (json_is_object(rule))
                np_rule_normalize(rule);
        }
    }
    return n;
}

bool tpl_np_spec_same(const json_t *have, const json_t *want)
{
    json_t *a = np_spec_normalized(have), *b = np_spec_normalized(want);
    bool same = json_equal(a, b);
    json_decref(a);
    json_decref(b);
    return same;
}

/* ---- pool Sandbox ------------------------------------------------------------------- */

json_t *tpl_pool_sandbox(const json_t *pool, const json_t *tpl, const struct tpl_pool_opts *o)
{
    char ph[SB_HASH_LEN + 1], th[SB_HASH_LEN + 1], bh[SB_HASH_LEN + 1], pth[SB_HASH_LEN + 1];
    char gen[300];
    json_t *bp = tpl_blueprint(tpl);
    json_t *pmeta = ext_obj_ensure(json_object_get(bp, "podTemplate"), "metadata");
    sb_name_hash(kube_obj_name(pool), ph);
    sb_name_hash(kube_obj_name(tpl), th);
    tpl_blueprint_hash(tpl, bh);
    tpl_pod_template_hash(tpl, pth);
    (void)snprintf(gen, sizeof(gen), "%.200s-", kube_obj_name(pool) ?: "pool");
    if (o && o->eviction) {
        json_t *ann = ext_obj_ensure(pmeta, "annotations");
        if (!json_object_get(ann, SB_ANN_SAFE_TO_EVICT))
            json_object_set_new(ann, SB_ANN_SAFE_TO_EVICT, json_string("true"));
    }
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s, s:s}, s:{s:s}, s:[o]}, "
                     "s:o}",
                     "apiVersion", SB_API_VERSION, "kind", SB_KIND, "metadata", "generateName", gen,
                     "namespace", kube_obj_namespace(pool) ?: "", "labels", SB_LABEL_WARM_POOL, ph,
                     SB_LABEL_TEMPLATE_REF, th, SB_LABEL_LAUNCH_TYPE, "warm",
                     EXT_LABEL_TEMPLATE_HASH, bh, EXT_LABEL_POD_TEMPLATE_HASH, pth,
                     SB_LABEL_CREATED_BY, "controller", "annotations", SB_ANN_TEMPLATE_REF,
                     kube_obj_name(tpl) ?: "", "ownerReferences",
                     ext_owner_ref(pool, EXT_KIND_POOL), "spec", bp);
}
