/* SPDX-License-Identifier: Apache-2.0 */
/* Idle auto-suspend decisions: the policy field, the last-activity time, when to wait,
 * probe or skip (warm-pool members, suspended, not Ready), the verdict after a probe
 * (running processes keep a sandbox awake), the guarded suspend patch and the
 * IdleTimeout condition reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "controller/idle_policy.h"
#include "controller/sandbox_names.h"
#include "kube/obj.h"

#define T0 ((usec_t)1764464523 * USEC_PER_SEC) /* 2025-11-30T01:02:03Z */

/* A Ready sandbox created at T0 - 100 s, Ready since T0 - 90 s, with a policy of
 * timeout seconds (0: none) and extra fields merged from extra_json. */
static json_t *sandbox(int timeout, const char *extra_json)
{
    json_t *sb = json_pack(
        "{s:{s:s, s:s, s:s, s:s, s:I, s:s}, s:{s:s}, s:{s:[{s:s, s:s, s:s}], s:[s]}}", "metadata",
        "name", "sb", "namespace", "ns", "uid", "u-1", "creationTimestamp", "2025-11-30T01:00:23Z",
        "generation", (json_int_t)4, "resourceVersion", "77", "spec", "operatingMode", "Running",
        "status", "conditions", "type", "Ready", "status", "True", "lastTransitionTime",
        "2025-11-30T01:00:33Z", "podIPs", "10.0.0.5");
    if (timeout)
        json_object_set_new(json_object_get(sb, "spec"), "idlePolicy",
                            json_pack("{s:i}", "timeoutSeconds", timeout));
    if (extra_json) {
        json_t *x = json_loads(extra_json, 0, NULL);
        assert_non_null(x);
        const char *k;
        json_t *v;
        json_object_foreach(x, k, v)
        {
            json_t *cur = json_object_get(sb, k);
            if (json_is_object(cur) && json_is_object(v))
                json_object_update(cur, v);
            else
                json_object_set(sb, k, v);
        }
        json_decref(x);
    }
    return sb;
}

static void test_policy_parse(void **state)
{
    (void)state;
    struct idle_policy p;
    json_t *sb = sandbox(0, NULL);
    assert_int_equal(idle_policy_get(sb, &p), 0);
    assert_false(p.set);
    json_decref(sb);
    sb = sandbox(10, NULL);
    assert_int_equal(idle_policy_get(sb, &p), 0);
    assert_true(p.set);
    assert_int_equal(p.timeout, 10 * USEC_PER_SEC);
    assert_true(p.resume_on_traffic); /* the default */
    json_decref(sb);
    sb = sandbox(0, "{\"spec\":{\"idlePolicy\":{\"timeoutSeconds\":5,\"resumeOnTraffic\":false}}}");
    assert_int_equal(idle_policy_get(sb, &p), 0);
    assert_false(p.resume_on_traffic);
    json_decref(sb);
    sb = sandbox(0, "{\"spec\":{\"idlePolicy\":{\"timeoutSeconds\":0}}}");
    assert_int_equal(idle_policy_get(sb, &p), -EINVAL);
    json_decref(sb);
    sb = sandbox(0, "{\"spec\":{\"idlePolicy\":{\"timeoutSeconds\":\"10\"}}}");
    assert_int_equal(idle_policy_get(sb, &p), -EINVAL);
    json_decref(sb);
}

static void test_last_activity(void **state)
{
    (void)state;
    json_t *sb = sandbox(10, NULL);
    /* Ready since T0 - 90 s is later than the creation. */
    assert_int_equal(idle_last_activity(sb, NULL, 0), T0 - 90 * USEC_PER_SEC);
    assert_int_equal(idle_last_activity(sb, NULL, T0 - 5 * USEC_PER_SEC), T0 - 5 * USEC_PER_SEC);
    json_decref(sb);
    sb = sandbox(10, "{\"metadata\":{\"annotations\":{\"" SB_ANN_LAST_ACTIVITY
                     "\":\"2025-11-30T01:01:58.5Z\"}}}");
    assert_int_equal(idle_last_activity(sb, NULL, 0), T0 - 4500 * USEC_PER_MSEC);
    json_decref(sb);
    /* A garbage annotation is ignored, not fatal. */
    sb = sandbox(10, "{\"metadata\":{\"annotations\":{\"" SB_ANN_LAST_ACTIVITY "\":\"soon\"}}}");
    assert_int_equal(idle_last_activity(sb, NULL, 0), T0 - 90 * USEC_PER_SEC);
    json_decref(sb);
}

static void test_decide(void **state)
{
    (void)state;
    usec_t wait = 0;
    json_t *sb = sandbox(0, NULL);
    assert_int_equal(idle_decide(sb, NULL, 0, T0, &wait), IDLE_SKIP); /* no policy */
    json_decref(sb);
    sb = sandbox(120, NULL);
    assert_int_equal(idle_decide(sb, NULL, 0, T0, &wait), IDLE_WAIT);
    assert_int_equal(wait, 30 * USEC_PER_SEC); /* Ready 90 s ago, timeout 120 s */
    assert_int_equal(idle_decide(sb, NULL, T0 - USEC_PER_SEC, T0, &wait), IDLE_WAIT);
    assert_int_equal(wait, 119 * USEC_PER_SEC);
    json_decref(sb);
    sb = sandbox(60, NULL);
    assert_int_equal(idle_decide(sb, NULL, 0, T0, &wait), IDLE_PROBE);
    json_decref(sb);
}

static void test_decide_skips(void **state)
{
    (void)state;
    usec_t wait = 0;
    const char *skips[] = {
        "{\"spec\":{\"operatingMode\":\"Suspended\"}}",
        "{\"metadata\":{\"labels\":{\"" SB_LABEL_WARM_POOL "\":\"abc\"}}}",
        "{\"metadata\":{\"deletionTimestamp\":\"2025-11-30T01:02:00Z\"}}",
        "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}}",
        "{\"spec\":{\"idlePolicy\":{\"timeoutSeconds\":-3}}}",
    };
    for (size_t i = 0; i < sizeof(skips) / sizeof(skips[0]); i++) {
        json_t *sb = sandbox(60, skips[i]);
        assert_int_equal(idle_decide(sb, NULL, 0, T0, &wait), IDLE_SKIP);
        json_decref(sb);
    }
    /* The status about to be written wins over the stored one. */
    json_t *sb = sandbox(60, NULL);
    json_t *st = json_pack("{s:[{s:s, s:s}]}", "conditions", "type", "Ready", "status", "False");
    assert_int_equal(idle_decide(sb, st, 0, T0, &wait), IDLE_SKIP);
    json_decref(st);
    json_decref(sb);
}

static void test_probe_parse(void **state)
{
    (void)state;
    struct idle_probe pr;
    /* an older sandboxd without idle_seconds: its stamp */
    const char stamp[] =
        "{\"running_processes\":2,\"last_activity\":\"2025-11-30T01:02:03.000004Z\"}";
    assert_int_equal(idle_probe_parse(stamp, strlen(stamp), T0 + 3600 * USEC_PER_SEC, &pr), 0);
    assert_int_equal(pr.running_processes, 2);
    assert_int_equal(pr.last_activity, T0 + 4);
    /* with it, our clock minus sandboxd's measure: a node clock an hour behind (its stamp
     * an hour old) does not make a Sandbox active 2 s ago look idle for an hour */
    const char both[] = "{\"running_processes\":0,\"last_activity\":\"2025-11-30T01:02:03Z\","
                        "\"idle_seconds\":2.5}";
    assert_int_equal(idle_probe_parse(both, strlen(both), T0 + 3600 * USEC_PER_SEC, &pr), 0);
    assert_int_equal(pr.last_activity, T0 + 3600 * USEC_PER_SEC - 2500 * USEC_PER_MSEC);
    const char *bad[] = {"",
                         "{}",
                         "{\"running_processes\":-1,\"last_activity\":\"2025-11-30T01:02:03Z\"}",
                         "{\"running_processes\":1,\"last_activity\":\"x\"}",
                         "[1]",
                         "{\"running_processes\":1,\"idle_seconds\":-1}",
                         "{\"running_processes\":1,\"idle_seconds\":\"2\"}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(idle_probe_parse(bad[i], strlen(bad[i]), T0, &pr), -EINVAL);
}

static void test_after_probe(void **state)
{
    (void)state;
    struct idle_policy pol = {.set = true, .timeout = 10 * USEC_PER_SEC, .resume_on_traffic = true};
    struct idle_probe pr = {.running_processes = 1, .last_activity = T0};
    usec_t wait = 0;
    /* A running process keeps it awake whatever the clocks say. */
    assert_int_equal(idle_after_probe(&pol, T0 - 100 * USEC_PER_SEC, &pr, T0, &wait), IDLE_WAIT);
    assert_int_equal(wait, 5 * USEC_PER_SEC);
    pol.timeout = USEC_PER_SEC;
    assert_int_equal(idle_after_probe(&pol, 0, &pr, T0, &wait), IDLE_WAIT);
    assert_int_equal(wait, USEC_PER_SEC); /* at least 1 s */
    pol.timeout = 10 * USEC_PER_SEC;
    /* sandboxd saw a request 3 s ago that the router did not. */
    pr = (struct idle_probe){.running_processes = 0, .last_activity = T0 - 3 * USEC_PER_SEC};
    assert_int_equal(idle_after_probe(&pol, T0 - 60 * USEC_PER_SEC, &pr, T0, &wait), IDLE_WAIT);
    assert_int_equal(wait, 7 * USEC_PER_SEC);
    pr.last_activity = T0 - 11 * USEC_PER_SEC;
    assert_int_equal(idle_after_probe(&pol, T0 - 60 * USEC_PER_SEC, &pr, T0, &wait), IDLE_SUSPEND);
}

static void test_suspend_patch(void **state)
{
    (void)state;
    json_t *sb = sandbox(10, NULL);
    json_t *p = idle_suspend_patch(sb);
    assert_string_equal(kube_obj_path_str(p, "spec.operatingMode"), "Suspended");
    assert_string_equal(kube_obj_path_str(p, "metadata.resourceVersion"), "77");
    assert_string_equal(kube_obj_annotation(p, SB_ANN_IDLE_SUSPENDED_GEN), "5");
    json_decref(p);
    json_decref(sb);
}

static json_t *suspended_status(void)
{
    return json_pack("{s:[{s:s, s:s, s:s, s:s}]}", "conditions", "type", "Suspended", "status",
                     "True", "reason", "PodTerminated", "message", "Pod has been terminated");
}

static const char *reason(const json_t *st)
{
    return json_string_value(
        json_object_get(json_array_get(json_object_get(st, "conditions"), 0), "reason"));
}

static void test_status_adjust(void **state)
{
    (void)state;
    /* Suspended by the idle policy: generation matches the annotation. */
    json_t *sb = sandbox(10, "{\"spec\":{\"operatingMode\":\"Suspended\"},\"metadata\":"
                             "{\"annotations\":{\"" SB_ANN_IDLE_SUSPENDED_GEN "\":\"4\"}}}");
    json_t *st = suspended_status();
    idle_status_adjust(sb, st);
    assert_string_equal(reason(st), SB_R_IDLE_TIMEOUT);
    const char *msg = json_string_value(
        json_object_get(json_array_get(json_object_get(st, "conditions"), 0), "message"));
    assert_non_null(strstr(msg, "idle for 10s"));
    assert_non_null(strstr(msg, "resumes it"));
    json_decref(st);
    json_decref(sb);
    /* Suspended again by hand later: the generation moved on, upstream's reason stays. */
    sb = sandbox(10,
                 "{\"spec\":{\"operatingMode\":\"Suspended\"},\"metadata\":"
                 "{\"generation\":6,\"annotations\":{\"" SB_ANN_IDLE_SUSPENDED_GEN "\":\"4\"}}}");
    st = suspended_status();
    idle_status_adjust(sb, st);
    assert_string_equal(reason(st), "PodTerminated");
    json_decref(st);
    json_decref(sb);
    /* Running (resumed): nothing to adjust. */
    sb = sandbox(10, "{\"metadata\":{\"annotations\":{\"" SB_ANN_IDLE_SUSPENDED_GEN "\":\"4\"}}}");
    st = suspended_status();
    idle_status_adjust(sb, st);
    assert_string_equal(reason(st), "PodTerminated");
    json_decref(st);
    json_decref(sb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_parse),  cmocka_unit_test(test_last_activity),
        cmocka_unit_test(test_decide),        cmocka_unit_test(test_decide_skips),
        cmocka_unit_test(test_probe_parse),   cmocka_unit_test(test_after_probe),
        cmocka_unit_test(test_suspend_patch), cmocka_unit_test(test_status_adjust),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
