/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of template_build: secure defaults, blueprint fingerprint and semantic
 * match, the managed NetworkPolicy and pool Sandboxes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <jansson.h>
#include <string.h>

#include "controller/ext_names.h"
#include "controller/latebind_spec.h"
#include "controller/template_build.h"
#include "kube/obj.h"

static json_t *tpl(void)
{
    return json_pack("{s:{s:s, s:s, s:s}, s:{s:{s:{s:{s:s}}, s:{s:[{s:s, s:s}]}}}}", "metadata",
                     "name", "py", "namespace", "ns", "uid", "u-tpl", "spec", "podTemplate",
                     "metadata", "labels", "tier", "gold", "spec", "containers", "name", "r",
                     "image", "img:1");
}

static void test_secure_defaults(void **state)
{
    json_t *t = tpl(), *bp;
    (void)state;
    bp = tpl_blueprint(t);
    assert_true(json_is_false(kube_obj_path(bp, "podTemplate.spec.automountServiceAccountToken")));
    json_decref(bp);
    /* An explicit true is kept. */
    json_object_set_new(json_object_get(kube_obj_path(t, "spec.podTemplate"), "spec"),
                        "automountServiceAccountToken", json_true());
    bp = tpl_blueprint(t);
    assert_true(json_is_true(kube_obj_path(bp, "podTemplate.spec.automountServiceAccountToken")));
    json_decref(bp);
    json_decref(t);
}

static void test_hash_and_match(void **state)
{
    json_t *t = tpl(), *pool = json_pack("{s:{s:s, s:s, s:s}}", "metadata", "name", "pool",
                                         "namespace", "ns", "uid", "u-pool");
    struct tpl_pool_opts o = {.eviction = true};
    char h1[SB_HASH_LEN + 1], h2[SB_HASH_LEN + 1];
    json_t *sb;
    (void)state;
    tpl_blueprint_hash(t, h1);
    sb = tpl_pool_sandbox(pool, t, &o);
    assert_true(tpl_blueprint_matches(t, sb));
    assert_string_equal(kube_obj_label(sb, EXT_LABEL_TEMPLATE_HASH), h1);
    assert_string_equal(kube_obj_label(sb, SB_LABEL_WARM_POOL), "91dd7983"); /* NameHash("pool") */
    assert_string_equal(kube_obj_path_str(sb, "metadata.generateName"), "pool-");
    assert_true(sb_controlled_by(sb, "u-pool"));
    assert_string_equal(
        json_string_value(json_object_get(
            kube_obj_path(sb, "spec.podTemplate.metadata.annotations"), SB_ANN_SAFE_TO_EVICT))
            ?: "",
        "true");
    /* Metadata edits change the fingerprint but not the semantic match. */
    json_object_set_new(json_object_get(kube_obj_path(t, "spec.podTemplate.metadata"), "labels"),
                        "tier", json_string("silver"));
    tpl_blueprint_hash(t, h2);
    assert_string_not_equal(h1, h2);
    assert_true(tpl_blueprint_matches(t, sb));
    /* A spec edit does not match. */
    json_object_set_new(json_array_get(kube_obj_path(t, "spec.podTemplate.spec.containers"), 0),
                        "image", json_string("img:2"));
    assert_false(tpl_blueprint_matches(t, sb));
    json_decref(sb);
    json_decref(pool);
    json_decref(t);
}

static void test_idle_policy_travels(void **state)
{
    json_t *t = tpl(), *pool = json_pack("{s:{s:s, s:s, s:s}}", "metadata", "name", "pool",
                                         "namespace", "ns", "uid", "u-pool");
    char h1[SB_HASH_LEN + 1], h2[SB_HASH_LEN + 1];
    (void)state;
    tpl_blueprint_hash(t, h1);
    json_object_set_new(json_object_get(t, "spec"), "idlePolicy",
                        json_pack("{s:i, s:b}", "timeoutSeconds", 600, "resumeOnTraffic", 1));
    json_t *sb = tpl_pool_sandbox(pool, t, NULL);
    assert_int_equal(json_integer_value(kube_obj_path(sb, "spec.idlePolicy.timeoutSeconds")), 600);
    assert_true(json_is_true(kube_obj_path(sb, "spec.idlePolicy.resumeOnTraffic")));
    /* not part of the fingerprint: a policy change does not roll the pools */
    tpl_blueprint_hash(t, h2);
    assert_string_equal(h1, h2);
    assert_true(tpl_blueprint_matches(t, sb));
    json_decref(sb);
    json_decref(pool);
    json_decref(t);
}

static const char *env_of(const json_t *c, const char *name)
{
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(c, "env"), i, e)
    {
        const char *n = json_string_value(json_object_get(e, "name"));
        if (n && strcmp(n, name) == 0)
            return json_string_value(json_object_get(e, "value"));
    }
    return NULL;
}

static void test_page_merging(void **state)
{
    json_t *t = tpl(), *pool = json_pack("{s:{s:s, s:s, s:s}}", "metadata", "name", "pool",
                                         "namespace", "ns", "uid", "u-pool");
    char h0[SB_HASH_LEN + 1], h1[SB_HASH_LEN + 1], h2[SB_HASH_LEN + 1];
    json_t *containers = (json_t *)kube_obj_path(t, "spec.podTemplate.spec.containers"), *spec;
    (void)state;
    /* a second container that already sets the variable to 0: overridden, not doubled */
    json_array_append_new(containers,
                          json_pack("{s:s, s:s, s:[{s:s, s:s}]}", "name", "side", "image", "img:1",
                                    "env", "name", TPL_PAGE_MERGE_ENV, "value", "0"));
    spec = json_object_get(t, "spec");
    tpl_blueprint_hash(t, h0);
    json_t *off = tpl_pool_sandbox(pool, t, NULL);
    assert_null(tpl_page_merging(t));
    assert_null(env_of(json_array_get(kube_obj_path(off, "spec.podTemplate.spec.containers"), 0),
                       TPL_PAGE_MERGE_ENV));
    /* Disabled is the default: same fingerprint as absent */
    json_object_set_new(spec, "pageMerging", json_string("Disabled"));
    tpl_blueprint_hash(t, h1);
    assert_string_equal(h0, h1);
    json_object_set_new(spec, "pageMerging", json_string("Enabled"));
    assert_string_equal(tpl_page_merging(t), "1");
    tpl_blueprint_hash(t, h2);
    assert_string_not_equal(h0, h2); /* the pods change: pools roll */
    assert_false(tpl_blueprint_matches(t, off));
    json_t *on = tpl_pool_sandbox(pool, t, NULL);
    const json_t *cs = kube_obj_path(on, "spec.podTemplate.spec.containers");
    assert_int_equal(json_array_size(cs), 2);
    for (size_t i = 0; i < 2; i++) {
        assert_string_equal(env_of(json_array_get(cs, i), TPL_PAGE_MERGE_ENV), "1");
        assert_int_equal(json_array_size(json_object_get(json_array_get(cs, i), "env")), 1);
    }
    assert_true(tpl_blueprint_matches(t, on));
    /* the template itself is not modified */
    assert_string_equal(env_of(json_array_get(containers, 1), TPL_PAGE_MERGE_ENV), "0");
    /* Maximal: the fixed-layout mode, another fingerprint */
    json_object_set_new(spec, "pageMerging", json_string("Maximal"));
    assert_string_equal(tpl_page_merging(t), "fixed-layout");
    tpl_blueprint_hash(t, h1);
    assert_string_not_equal(h1, h2);
    assert_false(tpl_blueprint_matches(t, on));
    json_t *max = tpl_pool_sandbox(pool, t, NULL);
    assert_string_equal(
        env_of(json_array_get(kube_obj_path(max, "spec.podTemplate.spec.containers"), 0),
               TPL_PAGE_MERGE_ENV),
        "fixed-layout");
    json_decref(max);
    json_decref(on);
    json_decref(off);
    json_decref(pool);
    json_decref(t);
}

static void set_delivery(json_t *t, const char *mode)
{
    json_object_set_new(
        json_object_get(t, "spec"), "claimConfigDelivery",
        json_pack("{s:s, s:s, s:i}", "mode", mode, "onFailure", "Fail", "port", 9000));
}

/* Switching a template to LateBound makes its members without a config token stale (they
 * cannot serve its env claims): the mode is in the fingerprint, and a member whose token
 * disagrees with the mode does not match. ColdStart (explicit or absent) keeps old hashes;
 * onFailure and port do not change the pods. */
static void test_late_bound_fingerprint(void **state)
{
    json_t *t = tpl(), *pool = json_pack("{s:{s:s, s:s, s:s}}", "metadata", "name", "pool",
                                         "namespace", "ns", "uid", "u-pool");
    char h0[SB_HASH_LEN + 1], h1[SB_HASH_LEN + 1], h2[SB_HASH_LEN + 1];
    json_t *cold, *late;
    (void)state;
    tpl_blueprint_hash(t, h0);
    cold = tpl_pool_sandbox(pool, t, NULL);
    set_delivery(t, "ColdStart");
    tpl_blueprint_hash(t, h1);
    assert_string_equal(h0, h1);
    assert_true(tpl_blueprint_matches(t, cold));
    set_delivery(t, "LateBound");
    tpl_blueprint_hash(t, h1);
    assert_string_not_equal(h0, h1);
    assert_false(tpl_blueprint_matches(t, cold)); /* no token: stale */
    json_object_set_new(json_object_get(kube_obj_path(t, "spec"), "claimConfigDelivery"), "port",
                        json_integer(8080));
    tpl_blueprint_hash(t, h2);
    assert_string_equal(h1, h2);
    /* A late-bound member is not a ColdStart template's (its pod mounts a token). */
    late = tpl_pool_sandbox(pool, t, NULL);
    lb_pool_inject(late, "pool-bcd23", "pool-bcd23-config-token");
    assert_true(tpl_blueprint_matches(t, late));
    set_delivery(t, "ColdStart");
    assert_false(tpl_blueprint_matches(t, late));
    json_decref(late);
    json_decref(cold);
    json_decref(pool);
    json_decref(t);
}

/* A LateBound member matches its template although lb_pool_inject added the token volume,
 * mounts and env: a metadata-only edit (a new fingerprint) leaves it current; a spec edit
 * does not, and neither does a token volume naming another Secret than its annotation. */
static void test_late_bound_member_matches(void **state)
{
    json_t *t = tpl(), *pool = json_pack("{s:{s:s, s:s, s:s}}", "metadata", "name", "pool",
                                         "namespace", "ns", "uid", "u-pool");
    json_t *containers = (json_t *)kube_obj_path(t, "spec.podTemplate.spec.containers"), *sb;
    char h1[SB_HASH_LEN + 1], h2[SB_HASH_LEN + 1];
    (void)state;
    json_array_append_new(containers,
                          json_pack("{s:s, s:s, s:[{s:s, s:s}]}", "name", "side", "image", "img:1",
                                    "env", "name", "X", "value", "1"));
    json_object_set_new(json_object_get(t, "spec"), "pageMerging", json_string("Enabled"));
    set_delivery(t, "LateBound");
    tpl_blueprint_hash(t, h1);
    sb = tpl_pool_sandbox(pool, t, NULL);
    lb_pool_inject(sb, "pool-bcd23", "pool-bcd23-config-token");
    assert_true(tpl_blueprint_matches(t, sb));
    json_object_set_new(json_object_get(kube_obj_path(t, "spec.podTemplate.metadata"), "labels"),
                        "tier", json_string("silver"));
    tpl_blueprint_hash(t, h2);
    assert_string_not_equal(h1, h2);
    assert_true(tpl_blueprint_matches(t, sb));
    json_object_set_new(json_array_get(containers, 0), "image", json_string("img:2"));
    assert_false(tpl_blueprint_matches(t, sb));
    json_object_set_new(json_array_get(containers, 0), "image", json_string("img:1"));
    assert_true(tpl_blueprint_matches(t, sb));
    json_object_set_new(json_object_get(json_object_get(sb, "metadata"), "annotations"),
                        EXT_ANN_TOKEN_SECRET, json_string("pool-zzzzz-config-token"));
    assert_false(tpl_blueprint_matches(t, sb));
    json_decref(sb);
    json_decref(pool);
    json_decref(t);
}

static void test_network_policy_default(void **state)
{
    json_t *t = tpl(), *np;
    const json_t *eg, *pub;
    char hash[SB_HASH_LEN + 1];
    (void)state;
    np = tpl_network_policy(t);
    assert_string_equal(kube_obj_name(np), "py-network-policy");
    assert_true(sb_controlled_by(np, "u-tpl"));
    sb_name_hash("py", hash);
    assert_string_equal(
        json_string_value(json_object_get(kube_obj_path(np, "spec.podSelector.matchLabels"),
                                          SB_LABEL_TEMPLATE_REF)),
        hash);
    eg = kube_obj_path(np, "spec.egress");
    assert_int_equal(json_array_size(eg), 2);
    /* DNS only to the cluster resolver on port 53. */
    assert_int_equal(
        json_integer_value(json_object_get(
            json_array_get(json_object_get(json_array_get(eg, 0), "ports"), 0), "port")),
        53);
    /* Public IPv4 without private, link-local and metadata ranges. */
    pub = kube_obj_path(json_array_get(json_object_get(json_array_get(eg, 1), "to"), 0), "ipBlock");
    assert_string_equal(json_string_value(json_object_get(pub, "cidr")), "0.0.0.0/0");
    assert_true(json_array_size(json_object_get(pub, "except")) >= 4);
    assert_string_equal(json_string_value(json_array_get(json_object_get(pub, "except"), 3)),
                        "169.254.0.0/16");
    /* Ingress only from the router and the controller (its idle probes and late-bound
     * deliveries go to the pod: refused before, on a CNI that enforces policies). */
    const json_t *from =
        json_object_get(json_array_get(kube_obj_path(np, "spec.ingress"), 0), "from");
    assert_int_equal(json_array_size(from), 2);
    assert_string_equal(kube_obj_path_str(json_array_get(from, 0), "podSelector.matchLabels.app"),
                        "sandbox-router");
    assert_string_equal(kube_obj_path_str(json_array_get(from, 1), "podSelector.matchLabels.app"),
                        "agent-sandbox-controller");
    json_decref(np);
    json_decref(t);
}

static void test_network_policy_custom(void **state)
{
    json_t *t = tpl(), *np;
    (void)state;
    json_object_set_new(json_object_get(t, "spec"), "networkPolicy",
                        json_pack("{s:[]}", "ingress"));
    np = tpl_network_policy(t);
    assert_int_equal(json_array_size(kube_obj_path(np, "spec.ingress")), 0);
    assert_int_equal(json_array_size(kube_obj_path(np, "spec.egress")), 0);
    assert_int_equal(json_array_size(kube_obj_path(np, "spec.policyTypes")), 2);
    json_decref(np);
    assert_true(tpl_np_managed(t));
    json_object_set_new(json_object_get(t, "spec"), "networkPolicyManagement",
                        json_string("Unmanaged"));
    assert_false(tpl_np_managed(t));
    json_decref(t);
}

/* A custom policy as the API server returns it (recorded from kube-apiserver: empty
 * lists dropped, TCP added to a port without protocol) says what the template's does:
 * no rewrite at each reconcile (json_equal saw a difference for good). A real change
 * (another port, a rule more) still differs. */
static void test_network_policy_as_stored(void **state)
{
    static const char stored[] =
        "{\"ingress\": [{\"ports\": [{\"port\": 8080, \"protocol\": \"TCP\"}, {\"port\": 53, "
        "\"protocol\": \"UDP\"}]}, {}], \"podSelector\": {\"matchLabels\": {\"a\": \"b\"}}, "
        "\"policyTypes\": [\"Ingress\", \"Egress\"]}";
    json_t *have = json_loads(stored, 0, NULL);
    json_t *want = json_pack(
        "{s:{s:{s:s}}, s:[s, s], s:[{s:[], s:[{s:i}, {s:i, s:s}]}, {s:[]}], s:[]}", "podSelector",
        "matchLabels", "a", "b", "policyTypes", "Ingress", "Egress", "ingress", "from", "ports",
        "port", 8080, "port", 53, "protocol", "UDP", "ports", "egress");
    (void)state;
    assert_non_null(have);
    assert_false(json_equal(have, want));
    assert_true(tpl_np_spec_same(have, want));
    assert_true(tpl_np_spec_same(want, have));
    json_t *rule0 = json_array_get(json_object_get(want, "ingress"), 0);
    json_object_set_new(json_array_get(json_object_get(rule0, "ports"), 0), "port",
                        json_integer(8081));
    assert_false(tpl_np_spec_same(have, want));
    json_decref(want);
    /* a template's own policy built, stored (as above) and compared */
    json_t *t = tpl(), *np;
    json_object_set_new(
        json_object_get(t, "spec"), "networkPolicy",
        json_pack("{s:[], s:[{s:[{s:i}]}]}", "ingress", "egress", "ports", "port", 443));
    np = tpl_network_policy(t);
    json_t *kept = json_pack("{s:O, s:[s, s], s:[{s:[{s:i, s:s}]}]}", "podSelector",
                             kube_obj_path(np, "spec.podSelector"), "policyTypes", "Ingress",
                             "Egress", "egress", "ports", "port", 443, "protocol", "TCP");
    assert_true(tpl_np_spec_same(kept, kube_obj_path(np, "spec")));
    json_array_append_new(json_object_get(kept, "egress"),
                          json_pack("{s:[{s:i}]}", "ports", "port", 80));
    assert_false(tpl_np_spec_same(kept, kube_obj_path(np, "spec")));
    json_decref(kept);
    json_decref(np);
    json_decref(t);
    json_decref(have);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_secure_defaults),
        cmocka_unit_test(test_hash_and_match),
        cmocka_unit_test(test_idle_policy_travels),
        cmocka_unit_test(test_network_policy_default),
        cmocka_unit_test(test_network_policy_custom),
        cmocka_unit_test(test_network_policy_as_stored),
        cmocka_unit_test(test_page_merging),
        cmocka_unit_test(test_late_bound_fingerprint),
        cmocka_unit_test(test_late_bound_member_matches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
