/* SPDX-License-Identifier: Apache-2.0 */
/* Late-bound claim configuration, pure part: the template policy, which claims are
 * served warm, env checks and sources, pool member names, tokens, the token volume and
 * Secret, and the delivery target check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "controller/claim_meta.h"
#include "controller/ext_names.h"
#include "controller/latebind_spec.h"
#include "kube/obj.h"

static json_t *load(const char *text)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    if (!j)
        fail_msg("bad JSON in test: %s", err.text);
    return j;
}

static json_t *tpl_with(const char *delivery, const char *policy)
{
    char text[1024];
    (void)snprintf(text, sizeof(text),
                   "{\"metadata\":{\"name\":\"t\",\"namespace\":\"ns\"},\"spec\":{%s%s%s"
                   "\"envVarsInjectionPolicy\":\"%s\",\"podTemplate\":{\"spec\":{\"containers\":"
                   "[{\"name\":\"main\",\"env\":[{\"name\":\"FIXED\",\"value\":\"1\"}]},"
                   "{\"name\":\"side\"}]}}}}",
                   delivery ? "\"claimConfigDelivery\":" : "", delivery ? delivery : "",
                   delivery ? "," : "", policy);
    return load(text);
}

static void test_policy(void **state)
{
    struct lb_policy p;
    json_t *t;
    (void)state;
    lb_policy_of(NULL, &p);
    assert_false(p.late_bound);
    assert_false(p.fail);
    assert_int_equal(p.port, 8080);
    t = tpl_with("{\"mode\":\"LateBound\",\"onFailure\":\"Fail\",\"port\":9000}", "Allowed");
    lb_policy_of(t, &p);
    assert_true(p.late_bound);
    assert_true(p.fail);
    assert_int_equal(p.port, 9000);
    json_decref(t);
    t = tpl_with("{\"mode\":\"ColdStart\",\"port\":70000}", "Allowed");
    lb_policy_of(t, &p);
    assert_false(p.late_bound);
    assert_false(p.fail);
    assert_int_equal(p.port, 8080);
    json_decref(t);
}

static void test_claim_wants(void **state)
{
    json_t *late = tpl_with("{\"mode\":\"LateBound\"}", "Allowed");
    json_t *cold = tpl_with(NULL, "Allowed");
    json_t *env = load("{\"spec\":{\"env\":[{\"name\":\"A\",\"value\":\"1\"}]}}");
    json_t *none = load("{\"spec\":{}}");
    json_t *vct = load("{\"spec\":{\"env\":[{\"name\":\"A\",\"value\":\"1\"}],"
                       "\"volumeClaimTemplates\":[{\"metadata\":{\"name\":\"v\"}}]}}");
    (void)state;
    assert_true(lb_claim_wants(env, late));
    assert_false(lb_claim_wants(env, cold));
    assert_false(lb_claim_wants(none, late));
    assert_false(lb_claim_wants(vct, late)); /* volumes still need a cold start */
    json_decref(late);
    json_decref(cold);
    json_decref(env);
    json_decref(none);
    json_decref(vct);
}

static void test_env_check(void **state)
{
    json_t *allowed = tpl_with("{\"mode\":\"LateBound\"}", "Allowed");
    json_t *over = tpl_with("{\"mode\":\"LateBound\"}", "Overrides");
    json_t *dis = tpl_with("{\"mode\":\"LateBound\"}", "Disallowed");
    json_t *fresh = load("{\"spec\":{\"env\":[{\"name\":\"NEW\",\"valueFrom\":{\"secretKeyRef\":"
                         "{\"name\":\"s\",\"key\":\"k\"}}}]}}");
    json_t *clash = load("{\"spec\":{\"env\":[{\"name\":\"FIXED\",\"value\":\"2\"}]}}");
    json_t *nocont =
        load("{\"spec\":{\"env\":[{\"name\":\"X\",\"value\":\"2\",\"containerName\":\"nope\"}]}}");
    struct claim_err e = {0};
    (void)state;
    assert_int_equal(lb_env_check(fresh, allowed, &e), 0);
    assert_int_equal(lb_env_check(clash, allowed, &e), -EPERM);
    assert_string_equal(e.reason, EXT_R_ENV_REJECTED);
    assert_int_equal(lb_env_check(clash, over, &e), 0);
    assert_int_equal(lb_env_check(fresh, dis, &e), -EPERM);
    assert_int_equal(lb_env_check(nocont, over, &e), -EINVAL);
    /* The check works on a copy: the template is untouched. */
    assert_int_equal(
        json_array_size(kube_obj_path(
            json_array_get(kube_obj_path(over, "spec.podTemplate.spec.containers"), 0), "env")),
        1);
    json_decref(allowed);
    json_decref(over);
    json_decref(dis);
    json_decref(fresh);
    json_decref(clash);
    json_decref(nocont);
}

static void test_env_source(void **state)
{
    const char *obj = NULL, *key = NULL;
    json_t *v = load("{\"name\":\"A\",\"value\":\"1\"}");
    json_t *s = load("{\"name\":\"A\",\"valueFrom\":{\"secretKeyRef\":{\"name\":\"s\",\"key\":"
                     "\"k\"}}}");
    json_t *c = load("{\"name\":\"A\",\"valueFrom\":{\"configMapKeyRef\":{\"name\":\"c\","
                     "\"key\":\"ck\"}}}");
    json_t *bad1 = load("{\"name\":\"A\"}");
    json_t *bad2 = load("{\"name\":\"A\",\"valueFrom\":{\"secretKeyRef\":{\"name\":\"s\"}}}");
    json_t *bad3 = load("{\"value\":\"1\"}");
    json_t *bad4 = load("{\"name\":\"A\",\"valueFrom\":{\"fieldRef\":{}}}");
    (void)state;
    assert_int_equal(lb_env_source(v, &obj, &key), LB_SRC_VALUE);
    assert_int_equal(lb_env_source(s, &obj, &key), LB_SRC_SECRET);
    assert_string_equal(obj, "s");
    assert_string_equal(key, "k");
    assert_int_equal(lb_env_source(c, &obj, &key), LB_SRC_CONFIGMAP);
    assert_string_equal(obj, "c");
    assert_string_equal(key, "ck");
    assert_int_equal(lb_env_source(bad1, &obj, &key), LB_SRC_INVALID);
    assert_int_equal(lb_env_source(bad2, &obj, &key), LB_SRC_INVALID);
    assert_int_equal(lb_env_source(bad3, &obj, &key), LB_SRC_INVALID);
    assert_int_equal(lb_env_source(bad4, &obj, &key), LB_SRC_INVALID);
    json_decref(v);
    json_decref(s);
    json_decref(c);
    json_decref(bad1);
    json_decref(bad2);
    json_decref(bad3);
    json_decref(bad4);
}

static void test_member_name_and_token(void **state)
{
    char a[LB_NAME_MAX + 1], b[LB_NAME_MAX + 1], t1[65], t2[65], sec[128];
    json_t *sb = load("{\"metadata\":{\"generateName\":\"pool-\"}}");
    json_t *longp = load("{\"metadata\":{\"generateName\":\"ppppppppppppppppppppppppppppppppppppppp"
                         "ppppppppppppppppppppppppppppppppppp-\"}}");
    json_t *none = load("{\"metadata\":{}}");
    (void)state;
    assert_int_equal(lb_member_name(sb, a, sizeof(a)), 0);
    assert_int_equal(lb_member_name(sb, b, sizeof(b)), 0);
    assert_int_equal(strlen(a), 10);
    assert_memory_equal(a, "pool-", 5);
    assert_string_not_equal(a, b);
    assert_int_equal(lb_member_name(longp, a, sizeof(a)), 0);
    assert_int_equal(strlen(a), LB_NAME_MAX);
    assert_int_equal(lb_member_name(none, a, sizeof(a)), -EINVAL);
    assert_int_equal(lb_token_new(t1, sizeof(t1)), 0);
    assert_int_equal(lb_token_new(t2, sizeof(t2)), 0);
    assert_int_equal(strlen(t1), 64);
    assert_int_equal(strspn(t1, "0123456789abcdef"), 64);
    assert_string_not_equal(t1, t2);
    assert_int_equal(lb_token_new(t1, 64), -E2BIG);
    assert_int_equal(lb_secret_name("pool-abcde", sec, sizeof(sec)), 0);
    assert_string_equal(sec, "pool-abcde-config-token");
    assert_int_equal(lb_secret_name("pool-abcde", sec, 8), -E2BIG);
    json_decref(sb);
    json_decref(longp);
    json_decref(none);
}

static void test_pool_inject(void **state)
{
    json_t *sb = load("{\"metadata\":{\"generateName\":\"p-\",\"namespace\":\"ns\"},\"spec\":"
                      "{\"podTemplate\":{\"spec\":{\"volumes\":[{\"name\":\"w\",\"emptyDir\":{}}],"
                      "\"containers\":[{\"name\":\"a\"},{\"name\":\"b\",\"env\":[{\"name\":\"X\","
                      "\"value\":\"1\"}]}]}}}}");
    const json_t *vols = NULL, *c;
    size_t i;
    (void)state;
    lb_pool_inject(sb, "p-abcde", "p-abcde-config-token");
    assert_string_equal(kube_obj_name(sb), "p-abcde");
    assert_null(kube_obj_path(sb, "metadata.generateName"));
    assert_string_equal(kube_obj_annotation(sb, EXT_ANN_TOKEN_SECRET), "p-abcde-config-token");
    vols = kube_obj_path(sb, "spec.podTemplate.spec.volumes");
    assert_int_equal(json_array_size(vols), 2);
    assert_string_equal(kube_obj_path_str(json_array_get(vols, 1), "secret.secretName"),
                        "p-abcde-config-token");
    assert_int_equal(
        json_integer_value(kube_obj_path(json_array_get(vols, 1), "secret.defaultMode")), 0444);
    json_array_foreach(kube_obj_path(sb, "spec.podTemplate.spec.containers"), i, c)
    {
        const json_t *env = json_object_get(c, "env");
        const json_t *m = json_array_get(json_object_get(c, "volumeMounts"), 0);
        const json_t *last = json_array_get(env, json_array_size(env) - 1);
        assert_string_equal(kube_obj_path_str(m, "name"), LB_VOLUME);
        assert_string_equal(kube_obj_path_str(m, "mountPath"), LB_MOUNT_DIR);
        assert_true(json_is_true(json_object_get(m, "readOnly")));
        assert_string_equal(kube_obj_path_str(last, "name"), LB_ENV_TOKEN_FILE);
        assert_string_equal(kube_obj_path_str(last, "value"), LB_MOUNT_DIR "/token");
    }
    /* The container's own env is kept. */
    assert_int_equal(
        json_array_size(kube_obj_path(
            json_array_get(kube_obj_path(sb, "spec.podTemplate.spec.containers"), 1), "env")),
        2);
    json_decref(sb);
}

static void test_token_secret(void **state)
{
    json_t *sb = load("{\"metadata\":{\"name\":\"p-abcde\",\"namespace\":\"ns\",\"uid\":\"u-1\"}}");
    json_t *s = lb_token_secret(sb, "p-abcde-config-token", "tok");
    const json_t *o;
    (void)state;
    assert_string_equal(kube_obj_name(s), "p-abcde-config-token");
    assert_string_equal(kube_obj_namespace(s), "ns");
    assert_string_equal(kube_obj_path_str(s, "stringData.token"), "tok");
    assert_string_equal(kube_obj_label(s, EXT_LABEL_TOKEN_FOR), "p-abcde");
    o = json_array_get(kube_obj_path(s, "metadata.ownerReferences"), 0);
    assert_string_equal(kube_obj_path_str(o, "uid"), "u-1");
    assert_string_equal(kube_obj_path_str(o, "kind"), "Sandbox");
    assert_true(json_is_true(json_object_get(o, "controller")));
    json_decref(s);
    json_decref(sb);
}

/* A Secret read back after an unsure create is used only when it is the member's: its
 * controller is that Sandbox (by UID) and its label names it. */
static void test_secret_is_for(void **state)
{
    json_t *sb = load("{\"metadata\":{\"name\":\"p-abcde\",\"namespace\":\"ns\",\"uid\":\"u-1\"}}");
    json_t *other =
        load("{\"metadata\":{\"name\":\"p-abcde\",\"namespace\":\"ns\",\"uid\":\"u-2\"}}");
    json_t *s = lb_token_secret(sb, "p-abcde-config-token", "tok"), *o;
    (void)state;
    assert_true(lb_secret_is_for(s, sb));
    /* The same name's earlier Sandbox (another UID) does not own it. */
    assert_false(lb_secret_is_for(s, other));
    /* Without the label, or with another name in it: not ours. */
    json_object_set_new(json_object_get(json_object_get(s, "metadata"), "labels"),
                        EXT_LABEL_TOKEN_FOR, json_string("p-zzzzz"));
    assert_false(lb_secret_is_for(s, sb));
    json_object_del(json_object_get(json_object_get(s, "metadata"), "labels"), EXT_LABEL_TOKEN_FOR);
    assert_false(lb_secret_is_for(s, sb));
    json_decref(s);
    /* An owner that is not the controller, or not a Sandbox: not ours. */
    s = lb_token_secret(sb, "p-abcde-config-token", "tok");
    o = json_array_get(json_object_get(json_object_get(s, "metadata"), "ownerReferences"), 0);
    json_object_set_new(o, "controller", json_false());
    assert_false(lb_secret_is_for(s, sb));
    json_object_set_new(o, "controller", json_true());
    json_object_set_new(o, "kind", json_string("SandboxClaim"));
    assert_false(lb_secret_is_for(s, sb));
    json_object_del(json_object_get(s, "metadata"), "ownerReferences");
    assert_false(lb_secret_is_for(s, sb));
    json_decref(s);
    /* A user's Secret of that name: nothing but the name. */
    s = load("{\"metadata\":{\"name\":\"p-abcde-config-token\",\"namespace\":\"ns\"}}");
    assert_false(lb_secret_is_for(s, sb));
    json_decref(s);
    json_decref(other);
    json_decref(sb);
}

static void test_target_check(void **state)
{
    static const struct {
        const char *ip;
        int strict, loopback;
    } cases[] = {
        {"10.244.0.7", 0, 0},
        {"192.168.1.2", 0, 0},
        {"172.16.0.1", 0, 0},
        {"fd00::12", 0, 0},
        {"127.0.0.1", -EPERM, 0},
        {"127.9.9.9", -EPERM, 0},
        {"::1", -EPERM, 0},
        {"::ffff:127.0.0.1", -EPERM, 0},
        {"169.254.169.254", -EPERM, -EPERM},
        {"::ffff:169.254.169.254", -EPERM, -EPERM},
        {"fe80::1", -EPERM, -EPERM},
        {"0.0.0.0", -EPERM, -EPERM},
        {"::", -EPERM, -EPERM},
        {"224.0.0.1", -EPERM, -EPERM},
        {"255.255.255.255", -EPERM, -EPERM},
        {"ff02::1", -EPERM, -EPERM},
        {"localhost", -EINVAL, -EINVAL},
        {"10.0.0.1:80", -EINVAL, -EINVAL},
        {"", -EINVAL, -EINVAL},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (lb_target_check(cases[i].ip, false) != cases[i].strict ||
            lb_target_check(cases[i].ip, true) != cases[i].loopback)
            fail_msg("target %s", cases[i].ip);
    }
    assert_int_equal(lb_target_check(NULL, true), -EINVAL);
}

/* A cold start keeps valueFrom as a reference in the pod spec (the kubelet reads it). */
static void test_cold_keeps_reference(void **state)
{
    json_t *spec = load("{\"containers\":[{\"name\":\"main\"}]}");
    json_t *env = load("[{\"name\":\"S\",\"valueFrom\":{\"secretKeyRef\":{\"name\":\"s\",\"key\":"
                       "\"k\"}}},{\"name\":\"P\",\"value\":\"v\"}]");
    struct claim_err e = {0};
    const json_t *out;
    (void)state;
    assert_int_equal(claim_env_inject(spec, env, "Allowed", &e), 0);
    out = json_object_get(json_array_get(json_object_get(spec, "containers"), 0), "env");
    assert_int_equal(json_array_size(out), 2);
    assert_string_equal(kube_obj_path_str(json_array_get(out, 0), "valueFrom.secretKeyRef.key"),
                        "k");
    assert_null(json_object_get(json_array_get(out, 0), "value"));
    assert_string_equal(kube_obj_path_str(json_array_get(out, 1), "value"), "v");
    assert_null(json_object_get(json_array_get(out, 1), "valueFrom"));
    json_decref(spec);
    json_decref(env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy),
        cmocka_unit_test(test_claim_wants),
        cmocka_unit_test(test_env_check),
        cmocka_unit_test(test_env_source),
        cmocka_unit_test(test_member_name_and_token),
        cmocka_unit_test(test_pool_inject),
        cmocka_unit_test(test_token_secret),
        cmocka_unit_test(test_secret_is_for),
        cmocka_unit_test(test_target_check),
        cmocka_unit_test(test_cold_keeps_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
