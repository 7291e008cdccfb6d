/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the pure claim logic: metadata validation and merge, env and volume
 * policies, the cold Sandbox, the Ready state machine, lifecycle deadlines and the
 * warm candidate queue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "controller/claim_meta.h"
#include "controller/claim_queue.h"
#include "controller/claim_status.h"
#include "controller/ext_names.h"
#include "kube/obj.h"

static const char *const doms[] = {"sandbox.users.io"};
static const struct claim_domains D = {doms, 1};

static json_t *claim_with(json_t *spec)
{
    json_t *c =
        json_pack("{s:{s:s, s:s, s:s, s:I, s:s}, s:{s:{s:s}}}", "metadata", "name", "c1",
                  "namespace", "ns", "uid", "u-c1", "generation", (json_int_t)1,
                  "creationTimestamp", "2026-01-01T00:00:00Z", "spec", "warmPoolRef", "name", "p");
    if (spec)
        json_object_update(json_object_get(c, "spec"), spec);
    json_decref(spec);
    return c;
}

static json_t *tpl(const char *env_policy, const char *vct_policy)
{
    return json_pack("{s:{s:s, s:s}, s:{s:{s:{s:{s:s}}, s:{s:[{s:s, s:[{s:s, s:s}]}]}}, s:s*, "
                     "s:s*, s:[{s:{s:s}, s:{}}]}}",
                     "metadata", "name", "t", "namespace", "ns", "spec", "podTemplate", "metadata",
                     "labels", "tier", "gold", "spec", "containers", "name", "r", "env", "name",
                     "A", "value", "1", "envVarsInjectionPolicy", env_policy,
                     "volumeClaimTemplatesPolicy", vct_policy, "volumeClaimTemplates", "metadata",
                     "name", "data", "spec");
}

static void test_metadata_validation(void **state)
{
    struct claim_err e;
    json_t *c;
    (void)state;
    c = claim_with(json_pack("{s:{s:{s:s, s:s}, s:{s:s, s:s}}}", "additionalPodMetadata", "labels",
                             "sandbox.users.io/a", "b", "x.sandbox.users.io/c", "d", "annotations",
                             "note", "hi", SB_ANN_SAFE_TO_EVICT, "false"));
    assert_int_equal(claim_meta_validate(c, &D, &e), 0);
    json_decref(c);
    static const char *const bad[][2] = {{"labels", "app"},
                                         {"labels", "evil.io/x"},
                                         {"labels", "sandbox.users.io/bad key"},
                                         {"annotations", "foo.kubernetes.io/x"},
                                         {"annotations", "agents.x-k8s.io/pod-name"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        c = claim_with(json_pack("{s:{s:{s:s}}}", "additionalPodMetadata", bad[i][0], bad[i][1],
                                 "sandbox-router"));
        assert_int_equal(claim_meta_validate(c, &D, &e), -EINVAL);
        assert_string_equal(e.reason, EXT_R_INVALID_METADATA);
        json_decref(c);
    }
    assert_true(claim_label_value(""));
    assert_false(claim_label_value("-x"));
}

static void test_merge_no_override(void **state)
{
    json_t *meta = json_pack("{s:{s:s}}", "labels", "tier", "gold");
    json_t *same = json_pack("{s:{s:s, s:s}}", "labels", "tier", "gold", "new", "v");
    json_t *clash = json_pack("{s:{s:s}}", "labels", "tier", "silver");
    struct claim_err e;
    (void)state;
    assert_int_equal(claim_meta_merge(meta, same, &e), 0);
    assert_string_equal(kube_obj_path_str(meta, "labels.new"), "v");
    assert_int_equal(claim_meta_merge(meta, clash, &e), -EEXIST);
    assert_non_null(strstr(e.message, "override"));
    json_decref(meta);
    json_decref(same);
    json_decref(clash);
}

static void test_cold_env_policies(void **state)
{
    json_t *c = claim_with(json_pack("{s:[{s:s, s:s}, {s:s, s:s}]}", "env", "name", "B", "value",
                                     "2", "name", "A", "value", "9"));
    json_t *t, *sb = NULL;
    struct claim_err e;
    const json_t *env;
    (void)state;
    t = tpl("Allowed", NULL);
    assert_int_equal(claim_cold_sandbox(c, t, &sb, &e), -EPERM); /* A exists: no override */
    assert_string_equal(e.reason, EXT_R_ENV_REJECTED);
    json_decref(t);
    t = tpl("Overrides", NULL);
    assert_int_equal(claim_cold_sandbox(c, t, &sb, &e), 0);
    assert_string_equal(kube_obj_name(sb), "c1");
    assert_string_equal(kube_obj_label(sb, SB_LABEL_LAUNCH_TYPE), "cold");
    assert_string_equal(kube_obj_label(sb, EXT_LABEL_CLAIM_UID), "u-c1");
    assert_true(sb_controlled_by(sb, "u-c1"));
    env = json_object_get(json_array_get(kube_obj_path(sb, "spec.podTemplate.spec.containers"), 0),
                          "env");
    assert_int_equal(json_array_size(env), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(env, 0), "value")), "9");
    assert_true(
        json_is_false(kube_obj_path(sb, "spec.podTemplate.spec.automountServiceAccountToken")));
    assert_true(claim_needs_cold(c));
    json_decref(sb);
    json_decref(t);
    t = tpl(NULL, NULL);
    assert_int_equal(claim_cold_sandbox(c, t, &sb, &e), -EPERM); /* Disallowed by default */
    json_decref(t);
    json_decref(c);
}

static void test_vct_policies(void **state)
{
    json_t *tv = json_pack("[{s:{s:s}, s:{s:i}}]", "metadata", "name", "data", "spec", "x", 1);
    json_t *cv = json_pack("[{s:{s:s}, s:{s:i}}, {s:{s:s}, s:{}}]", "metadata", "name", "data",
                           "spec", "x", 2, "metadata", "name", "extra", "spec");
    json_t *out = NULL;
    struct claim_err e;
    (void)state;
    assert_int_equal(claim_vct_merge(tv, cv, "Disallowed", &out, &e), -EINVAL);
    assert_int_equal(claim_vct_merge(tv, cv, "Allowed", &out, &e), -EINVAL); /* name clash */
    assert_int_equal(claim_vct_merge(tv, cv, "Overrides", &out, &e), 0);
    assert_int_equal(json_array_size(out), 2);
    assert_int_equal(json_integer_value(kube_obj_path(json_array_get(out, 0), "spec.x")), 2);
    json_decref(out);
    json_decref(tv);
    json_decref(cv);
}

static json_t *sandbox(const char *ready, const char *reason)
{
    return json_pack("{s:{s:s}, s:{s:[s], s:[{s:s, s:s, s:s, s:s, s:s}]}}", "metadata", "name",
                     "p-abc", "status", "podIPs", "10.0.0.1", "conditions", "type", "Ready",
                     "status", ready, "reason", reason, "message", "m", "lastTransitionTime",
                     "2026-01-01T00:00:05Z");
}

static const char *ready_reason(const json_t *st)
{
    json_t *w = json_pack("{s:O}", "status", st);
    static char out[64];
    const char *r = json_string_value(json_object_get(kube_obj_condition(w, "Ready"), "reason"));
    (void)snprintf(out, sizeof(out), "%s", r ? r : "");
    json_decref(w);
    return out;
}

static void test_ready_rules(void **state)
{
    json_t *c = claim_with(NULL), *sb = sandbox("True", "DependenciesReady"), *st;
    struct claim_observed o = {.claim = c, .sb = sb};
    (void)state;
    st = claim_status_build(&o, "2026-01-01T00:00:09Z");
    assert_string_equal(ready_reason(st), "DependenciesReady");
    assert_string_equal(kube_obj_path_str(st, "sandbox.name"), "p-abc");
    assert_int_equal(json_array_size(kube_obj_path(st, "sandbox.podIPs")), 1);
    /* The flip takes the claim's own status write time, not the Sandbox's (05). */
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(st, "conditions"), 0),
                                          "lastTransitionTime")),
        "2026-01-01T00:00:09Z");
    assert_false(claim_status_changed(st, st));
    json_decref(st);
    o.timed_out = true; /* Ready wins over a timeout */
    st = claim_status_build(&o, "now");
    assert_string_equal(ready_reason(st), "DependenciesReady");
    json_decref(st);
    o.sb = NULL;
    st = claim_status_build(&o, "now");
    assert_string_equal(ready_reason(st), EXT_R_CLAIM_TIMEOUT);
    json_decref(st);
    o = (struct claim_observed){
        .claim = c, .err_reason = EXT_R_TEMPLATE_NOT_FOUND, .err_message = "x", .transient = true};
    st = claim_status_build(&o, "now");
    assert_string_equal(ready_reason(st), EXT_R_TEMPLATE_NOT_FOUND);
    json_decref(st);
    o = (struct claim_observed){.claim = c, .expired = true};
    st = claim_status_build(&o, "now");
    assert_string_equal(ready_reason(st), EXT_R_CLAIM_EXPIRED);
    json_decref(st);
    json_decref(sb);
    json_decref(c);
}

/* status.sandbox goes when the pass found no Sandbox, also on a transient failure (the
 * claim then counts as unbound); it stays only when the pass is not sure (sb_keep). */
static void test_status_sandbox_kept_only_when_unsure(void **state)
{
    json_t *c = json_pack("{s:{s:s, s:s, s:i}, s:{s:{s:s}}}", "metadata", "name", "c", "uid", "u",
                          "generation", 1, "status", "sandbox", "name", "gone");
    struct claim_observed o = {
        .claim = c, .err_reason = EXT_R_POOL_NOT_FOUND, .err_message = "x", .transient = true};
    json_t *st;
    (void)state;
    st = claim_status_build(&o, "now");
    assert_null(json_object_get(st, "sandbox"));
    json_decref(st);
    o.sb_keep = true;
    st = claim_status_build(&o, "now");
    assert_string_equal(json_string_value(json_object_get(json_object_get(st, "sandbox"), "name")),
                        "gone");
    json_decref(st);
    json_decref(c);
}

static const char *cond_ltt(const json_t *st, const char *type)
{
    json_t *w = json_pack("{s:O}", "status", st);
    static char out[64];
    const char *t =
        json_string_value(json_object_get(kube_obj_condition(w, type), "lastTransitionTime"));
    (void)snprintf(out, sizeof(out), "%s", t ? t : "");
    json_decref(w);
    return out;
}

/* Each condition carries its own transition time: set when its status changes, kept
 * while it does not (also when the reason or the Sandbox's times change). */
static void test_condition_times(void **state)
{
    json_t *c = claim_with(NULL), *sb = sandbox("False", "DependenciesNotReady"), *st;
    struct claim_observed o = {.claim = c, .sb = sb};
    (void)state;
    st = claim_status_build(&o, "2026-01-01T00:00:10Z");
    assert_string_equal(cond_ltt(st, "Ready"), "2026-01-01T00:00:10Z");
    json_object_set_new(c, "status", st);
    /* Still not ready, another reason, later: the time stays. */
    json_decref(sb);
    sb = sandbox("False", "PodNotReady");
    o.sb = sb;
    st = claim_status_build(&o, "2026-01-01T00:00:20Z");
    assert_string_equal(ready_reason(st), "PodNotReady");
    assert_string_equal(cond_ltt(st, "Ready"), "2026-01-01T00:00:10Z");
    json_object_set_new(c, "status", st);
    /* Ready: the claim's write time. */
    json_decref(sb);
    sb = sandbox("True", "DependenciesReady");
    o.sb = sb;
    st = claim_status_build(&o, "2026-01-01T00:00:30Z");
    assert_string_equal(cond_ltt(st, "Ready"), "2026-01-01T00:00:30Z");
    json_object_set_new(c, "status", st);
    /* The Sandbox finishes: Finished gets the Sandbox's time (00:00:05: a TTL after it
     * counts from when the Sandbox finished, as upstream) and the claim's generation, not
     * the Sandbox's (7); Ready flips too, at the claim's time. Before, Finished took the
     * claim's write time. */
    json_t *sbconds = json_object_get(json_object_get(sb, "status"), "conditions");
    json_array_append_new(sbconds, json_pack("{s:s, s:s, s:s, s:s, s:s, s:i}", "type", "Finished",
                                             "status", "True", "reason", "PodSucceeded", "message",
                                             "done", "lastTransitionTime", "2026-01-01T00:00:05Z",
                                             "observedGeneration", 7));
    json_object_set_new(json_array_get(sbconds, 0), "status", json_string("False"));
    st = claim_status_build(&o, "2026-01-01T00:00:40Z");
    assert_string_equal(cond_ltt(st, "Finished"), "2026-01-01T00:00:05Z");
    assert_string_equal(cond_ltt(st, "Ready"), "2026-01-01T00:00:40Z");
    json_object_set_new(c, "status", st);
    st = claim_status_build(&o, "2026-01-01T00:00:50Z");
    assert_string_equal(cond_ltt(st, "Finished"), "2026-01-01T00:00:05Z");
    assert_string_equal(cond_ltt(st, "Ready"), "2026-01-01T00:00:40Z");
    {
        json_t *w = json_pack("{s:O}", "status", st);
        const json_t *f = kube_obj_condition(w, "Finished");
        assert_string_equal(json_string_value(json_object_get(f, "reason")), "PodSucceeded");
        assert_string_equal(json_string_value(json_object_get(f, "message")), "done");
        assert_int_equal(json_integer_value(json_object_get(f, "observedGeneration")), 1);
        json_decref(w);
    }
    assert_false(claim_status_changed(json_object_get(c, "status"), st));
    /* ttlSecondsAfterFinished: 10 s after the Sandbox finished */
    json_object_set_new(c, "status", st);
    json_object_set_new(json_object_get(c, "spec"), "lifecycle",
                        json_pack("{s:i}", "ttlSecondsAfterFinished", 10));
    {
        usec_t at = 0, want = 0;
        assert_int_equal(claim_expire_at(c, &at), 0);
        assert_int_equal(clock_parse_rfc3339("2026-01-01T00:00:15Z", &want), 0);
        assert_true(at == want);
    }
    json_decref(sb);
    json_decref(c);
}

static void test_lifecycle(void **state)
{
    json_t *c =
        claim_with(json_pack("{s:{s:s}}", "lifecycle", "shutdownTime", "2026-01-01T01:00:00Z"));
    usec_t at = 0, t0 = 0;
    (void)state;
    assert_int_equal(claim_expire_at(c, &at), 0);
    assert_int_equal(clock_parse_rfc3339("2026-01-01T01:00:00Z", &t0), 0);
    assert_true(at == t0);
    json_decref(c);
    c = claim_with(json_pack("{s:{s:i}}", "lifecycle", "ttlSecondsAfterFinished", 10));
    assert_int_equal(claim_expire_at(c, &at), -ENOENT); /* not finished yet */
    json_object_set_new(c, "status",
                        json_pack("{s:[{s:s, s:s, s:s}]}", "conditions", "type", "Finished",
                                  "status", "True", "lastTransitionTime", "2026-01-01T00:00:00Z"));
    assert_int_equal(claim_expire_at(c, &at), 0);
    assert_int_equal(clock_parse_rfc3339("2026-01-01T00:00:10Z", &t0), 0);
    assert_true(at == t0);
    /* a huge ttl (int64 max seconds): capped, not wrapped into the past */
    json_object_set_new(json_object_get(c, "spec"), "lifecycle",
                        json_pack("{s:I}", "ttlSecondsAfterFinished", (json_int_t)INT64_MAX));
    assert_int_equal(claim_expire_at(c, &at), 0);
    assert_true(at > t0);
    assert_true(at == USEC_INFINITY);
    assert_int_equal(claim_deadline(c, 0, &at), -ENOENT);
    assert_int_equal(claim_deadline(c, 60 * USEC_PER_SEC, &at), 0);
    json_object_set_new(json_object_get(c, "metadata"), "annotations",
                        json_pack("{s:s}", EXT_ANN_CLAIM_TIMEOUT, "5"));
    assert_int_equal(claim_deadline(c, 60 * USEC_PER_SEC, &at), 0);
    assert_int_equal(clock_parse_rfc3339("2026-01-01T00:00:05Z", &t0), 0);
    assert_true(at == t0);
    json_decref(c);
}

/* A claim's Ready condition that flipped well after its creation says it was Ready: not
 * one that is True, flipped moments after the creation (its first write), or has none. */
static void test_ready_before(void **state)
{
    json_t *c = claim_with(NULL);
    (void)state;
    assert_false(claim_ready_before(c, 60 * USEC_PER_SEC)); /* no status */
    json_object_set_new(c, "status",
                        json_pack("{s:[{s:s, s:s, s:s}]}", "conditions", "type", "Ready", "status",
                                  "False", "lastTransitionTime", "2026-01-01T00:00:02Z"));
    assert_false(claim_ready_before(c, 60 * USEC_PER_SEC)); /* its first write */
    json_object_set_new(json_array_get(kube_obj_path(c, "status.conditions"), 0),
                        "lastTransitionTime", json_string("2026-01-01T00:05:00Z"));
    assert_true(claim_ready_before(c, 60 * USEC_PER_SEC)); /* the flip from True */
    json_object_set_new(json_array_get(kube_obj_path(c, "status.conditions"), 0), "status",
                        json_string("True"));
    assert_false(claim_ready_before(c, 60 * USEC_PER_SEC)); /* Ready now */
    json_decref(c);
}

static void test_queue(void **state)
{
    struct claim_queue *q = claim_queue_new();
    char out[64];
    (void)state;
    claim_queue_push(q, "ns/p", "a");
    claim_queue_push(q, "ns/p", "b");
    claim_queue_push(q, "ns/p", "a"); /* no duplicate */
    claim_queue_push(q, "ns/q", "z");
    assert_int_equal(claim_queue_len(q, "ns/p"), 2);
    claim_queue_remove(q, "ns/p", "a");
    assert_true(claim_queue_pop(q, "ns/p", out, sizeof(out)));
    assert_string_equal(out, "b");
    assert_false(claim_queue_pop(q, "ns/p", out, sizeof(out)));
    claim_queue_drop(q, "ns/q");
    assert_int_equal(claim_queue_len(q, "ns/q"), 0);
    /* a dropped pool's member updated afterwards makes its record again; the member's
     * deletion frees it (it used to stay, empty, for ever) */
    assert_int_equal(claim_queue_pools(q), 1); /* ns/p, emptied by a pop */
    claim_queue_push(q, "ns/q", "late");
    assert_int_equal(claim_queue_pools(q), 2);
    claim_queue_remove(q, "ns/q", "late");
    assert_int_equal(claim_queue_pools(q), 1);
    claim_queue_remove(q, "ns/p", "gone"); /* not there: the empty record goes too */
    assert_int_equal(claim_queue_pools(q), 0);
    claim_queue_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metadata_validation),
        cmocka_unit_test(test_merge_no_override),
        cmocka_unit_test(test_cold_env_policies),
        cmocka_unit_test(test_vct_policies),
        cmocka_unit_test(test_ready_rules),
        cmocka_unit_test(test_condition_times),
        cmocka_unit_test(test_lifecycle),
        cmocka_unit_test(test_ready_before),
        cmocka_unit_test(test_queue),
        cmocka_unit_test(test_status_sandbox_kept_only_when_unsure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
