/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: Sandbox condition computation for every Pod situation, expiry, and the
 * status write decision. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <jansson.h>
#include <string.h>

#include "controller/sandbox_names.h"
#include "controller/sandbox_status.h"
#include "kube/obj.h"

#define T0 "2026-01-01T00:00:00Z"
#define T1 "2026-01-01T00:00:05Z"

static json_t *sandbox(const char *mode, const char *service)
{
    char txt[512];
    (void)snprintf(txt, sizeof(txt),
                   "{\"metadata\":{\"name\":\"my-sandbox\",\"namespace\":\"ns\",\"uid\":\"u\","
                   "\"generation\":2},\"spec\":{\"operatingMode\":\"%s\"%s%s}}",
                   mode, service ? ",\"service\":" : "", service ? service : "");
    json_t *j = json_loads(txt, 0, NULL);
    assert_non_null(j);
    return j;
}

static json_t *pod(const char *phase, const char *ready, const char *ip)
{
    json_t *p = json_pack("{s:{s:s}, s:{s:s}, s:{s:s, s:[]}}", "metadata", "name", "my-sandbox",
                          "spec", "nodeName", "node-1", "status", "phase", phase, "conditions");
    json_t *conds = (json_t *)kube_obj_path(p, "status.conditions");
    json_array_append_new(conds, json_pack("{s:s, s:s}", "type", "PodScheduled", "status", "True"));
    if (ready)
        json_array_append_new(conds, json_pack("{s:s, s:s}", "type", "Ready", "status", ready));
    if (ip)
        json_object_set_new(json_object_get(p, "status"), "podIPs", json_pack("[{s:s}]", "ip", ip));
    return p;
}

static void expect(const json_t *st, const char *type, const char *status, const char *reason,
                   const char *msg)
{
    const json_t *c = sb_cond_get(st, type);
    if (!status) {
        assert_null(c);
        return;
    }
    assert_non_null(c);
    assert_string_equal(json_string_value(json_object_get(c, "status")), status);
    assert_string_equal(json_string_value(json_object_get(c, "reason")), reason);
    if (msg)
        assert_string_equal(json_string_value(json_object_get(c, "message")), msg);
    assert_int_equal(json_integer_value(json_object_get(c, "observedGeneration")), 2);
}

static json_t *build(struct sb_observed *o)
{
    return sb_status_build(o, T0);
}

static void test_no_pod_running(void **state)
{
    json_t *sb = sandbox("Running", NULL);
    struct sb_observed o = {.sb = sb};
    json_t *st = build(&o);
    (void)state;
    expect(st, SB_COND_SUSPENDED, "False", SB_R_NOT_SUSPENDED, "Sandbox is not suspended");
    expect(st, SB_COND_FINISHED, NULL, NULL, NULL);
    expect(st, SB_COND_POD_SCHEDULED, NULL, NULL, NULL);
    expect(st, SB_COND_READY, "False", SB_R_DEPS_NOT_READY, "Pod does not exist");
    assert_null(json_object_get(st, "podIPs"));
    assert_null(json_object_get(st, "selector"));
    json_decref(st);
    json_decref(sb);
}

static void test_pending_running_ready(void **state)
{
    json_t *sb = sandbox("Running", "true");
    json_t *p1 = pod("Pending", NULL, NULL), *p2 = pod("Running", "False", "10.0.0.5");
    json_t *p3 = pod("Running", "True", NULL), *p4 = pod("Running", "True", "10.0.0.5");
    struct sb_observed o = {.sb = sb, .pod = p1, .svc_exists = true, .svc_name = "my-sandbox"};
    json_t *st = build(&o);
    (void)state;
    expect(st, SB_COND_READY, "False", SB_R_DEPS_NOT_READY,
           "Pod exists with phase: Pending; Service Exists");
    expect(st, SB_COND_POD_SCHEDULED, "True", SB_R_POD_SCHEDULED, NULL);
    assert_string_equal(json_string_value(json_object_get(st, "selector")),
                        "agents.x-k8s.io/sandbox-name-hash=374de8f5");
    assert_string_equal(json_string_value(json_object_get(st, "serviceFQDN")),
                        "my-sandbox.ns.svc.cluster.local");
    json_decref(st);
    o.pod = p2;
    st = build(&o);
    expect(st, SB_COND_READY, "False", SB_R_DEPS_NOT_READY,
           "Pod is Running but not Ready; Service Exists");
    json_decref(st);
    o.pod = p3;
    st = build(&o);
    expect(st, SB_COND_READY, "False", SB_R_DEPS_NOT_READY,
           "Pod is Ready but has no podIPs yet; Service Exists");
    json_decref(st);
    o.pod = p4;
    st = build(&o);
    expect(st, SB_COND_READY, "True", SB_R_DEPS_READY, "Pod is Ready; Service Exists");
    assert_string_equal(json_string_value(json_array_get(json_object_get(st, "podIPs"), 0)),
                        "10.0.0.5");
    assert_string_equal(json_string_value(json_object_get(st, "nodeName")), "node-1");
    json_decref(st);
    o.svc_exists = false;
    o.svc_name = NULL;
    st = build(&o);
    expect(st, SB_COND_READY, "False", SB_R_DEPS_NOT_READY, "Pod is Ready; Service does not exist");
    assert_null(json_object_get(st, "serviceFQDN"));
    json_decref(st);
    json_decref(p1);
    json_decref(p2);
    json_decref(p3);
    json_decref(p4);
    json_decref(sb);
}

static void test_service_unset_follows_existence(void **state)
{
    json_t *sb = sandbox("Running", NULL), *p = pod("Running", "True", "10.0.0.5");
    struct sb_observed o = {.sb = sb, .pod = p};
    json_t *st = build(&o);
    (void)state;
    expect(st, SB_COND_READY, "True", SB_R_DEPS_READY, "Pod is Ready");
    json_decref(st);
    json_decref(sb);
    sb = sandbox("Running", "false");
    o.sb = sb;
    st = build(&o);
    expect(st, SB_COND_READY, "True", SB_R_DEPS_READY, "Pod is Ready");
    json_decref(st);
    json_decref(sb);
    json_decref(p);
}

static void test_terminal_phases(void **state)
{
    json_t *sb = sandbox("Running", NULL), *ok = pod("Succeeded", "False", NULL);
    json_t *bad = pod("Failed", "False", NULL);
    struct sb_observed o = {.sb = sb, .pod = ok};
    json_t *st = build(&o), *st2;
    (void)state;
    expect(st, SB_COND_FINISHED, "True", SB_R_POD_SUCCEEDED, "Pod completed successfully");
    expect(st, SB_COND_READY, "False", SB_R_POD_SUCCEEDED, "Pod completed successfully");
    o.pod = bad;
    st2 = build(&o);
    expect(st2, SB_COND_FINISHED, "True", SB_R_POD_FAILED, "Pod failed");
    expect(st2, SB_COND_READY, "False", SB_R_POD_FAILED, "Pod failed");
    json_decref(st2);
    /* Finished is removed once the Pod is no longer terminal. */
    json_object_set(sb, "status", st);
    o.pod = NULL;
    st2 = build(&o);
    expect(st2, SB_COND_FINISHED, NULL, NULL, NULL);
    json_decref(st2);
    json_decref(st);
    json_decref(ok);
    json_decref(bad);
    json_decref(sb);
}

static void test_suspend_resume(void **state)
{
    json_t *sb = sandbox("Suspended", NULL), *p = pod("Running", "True", "10.0.0.5");
    struct sb_observed o = {.sb = sb, .pod = p};
    json_t *st = build(&o);
    (void)state;
    expect(st, SB_COND_SUSPENDED, "False", SB_R_POD_TERMINATING,
           "Pod is terminating. Sandbox is suspending");
    expect(st, SB_COND_READY, "False", SB_R_SUSPENDED, "Sandbox is suspending");
    json_object_set_new(sb, "status", st);
    o.pod = NULL;
    st = build(&o);
    expect(st, SB_COND_SUSPENDED, "True", SB_R_POD_TERMINATED,
           "Pod has been terminated. Sandbox is suspended");
    expect(st, SB_COND_READY, "False", SB_R_SUSPENDED, "Sandbox is suspended");
    expect(st, SB_COND_POD_SCHEDULED, NULL, NULL, NULL);
    assert_null(json_object_get(st, "podIPs"));
    assert_string_equal(json_string_value(json_object_get(st, "selector")),
                        "agents.x-k8s.io/sandbox-name-hash=374de8f5");
    /* Resume: Suspended flips to False with a new transition time, never stays True. */
    json_object_set_new(sb, "status", st);
    json_object_set_new(json_object_get(sb, "spec"), "operatingMode", json_string("Running"));
    o.pod = p;
    st = sb_status_build(&o, T1);
    expect(st, SB_COND_SUSPENDED, "False", SB_R_NOT_SUSPENDED, "Sandbox is not suspended");
    assert_string_equal(json_string_value(json_object_get(sb_cond_get(st, SB_COND_SUSPENDED),
                                                          "lastTransitionTime")),
                        T1);
    expect(st, SB_COND_READY, "True", SB_R_DEPS_READY, NULL);
    json_decref(st);
    json_decref(p);
    json_decref(sb);
}

static void test_suspend_unowned_and_unknown(void **state)
{
    json_t *sb = sandbox("Suspended", NULL);
    struct sb_observed o = {.sb = sb, .pod_unowned = true, .errors = "pod \"x\" is not ours"};
    json_t *st = build(&o);
    (void)state;
    expect(st, SB_COND_SUSPENDED, "False", SB_R_POD_NOT_OWNED, NULL);
    expect(st, SB_COND_READY, "False", SB_R_RECONCILER_ERROR, "Error seen: pod \"x\" is not ours");
    json_decref(st);
    o = (struct sb_observed){.sb = sb, .pod_error = true, .errors = "boom"};
    st = build(&o);
    expect(st, SB_COND_SUSPENDED, "Unknown", SB_R_POD_STATE_UNKNOWN, NULL);
    expect(st, SB_COND_POD_SCHEDULED, "Unknown", SB_R_SCHED_UNKNOWN, NULL);
    json_decref(st);
    json_decref(sb);
}

static void test_multiple_and_lost(void **state)
{
    json_t *sb = sandbox("Running", NULL);
    struct sb_observed o = {.sb = sb, .multiple_pods = "multiple Pods (2)", .errors = "x"};
    json_t *st = build(&o), *p = pod("Pending", NULL, NULL);
    (void)state;
    expect(st, SB_COND_READY, "False", SB_R_MULTIPLE_PODS, "multiple Pods (2)");
    json_decref(st);
    o = (struct sb_observed){.sb = sb, .pod = p, .pod_recreated = true};
    st = build(&o);
    expect(st, SB_COND_READY, "False", SB_R_DEPS_NOT_READY,
           "Pod was lost and has been recreated; Pod exists with phase: Pending");
    json_decref(st);
    json_decref(p);
    json_decref(sb);
}

static void test_pod_scheduled_mirror(void **state)
{
    json_t *sb = sandbox("Running", NULL), *p = pod("Pending", NULL, NULL);
    json_t *c = json_array_get(kube_obj_path(p, "status.conditions"), 0);
    struct sb_observed o = {.sb = sb, .pod = p};
    json_t *st;
    (void)state;
    json_object_set_new(c, "status", json_string("False"));
    json_object_set_new(c, "reason", json_string("Unschedulable"));
    json_object_set_new(c, "message", json_string("0/1 nodes"));
    st = build(&o);
    expect(st, SB_COND_POD_SCHEDULED, "False", "Unschedulable", "0/1 nodes");
    json_decref(st);
    json_array_clear((json_t *)kube_obj_path(p, "status.conditions"));
    st = build(&o);
    expect(st, SB_COND_POD_SCHEDULED, "Unknown", SB_R_SCHED_UNKNOWN,
           "Pod has not reported a PodScheduled condition yet");
    json_decref(st);
    json_decref(p);
    json_decref(sb);
}

static void test_transition_time(void **state)
{
    json_t *st = json_object();
    (void)state;
    sb_cond_set(st, "Ready", "False", "A", "m", 1, T0);
    sb_cond_set(st, "Ready", "False", "B", "m2", 2, T1);
    const json_t *c = sb_cond_get(st, "Ready");
    assert_string_equal(json_string_value(json_object_get(c, "lastTransitionTime")), T0);
    assert_string_equal(json_string_value(json_object_get(c, "reason")), "B");
    sb_cond_set(st, "Ready", "True", "B", "m2", 2, T1);
    assert_string_equal(json_string_value(json_object_get(c, "lastTransitionTime")), T1);
    assert_int_equal(json_array_size(json_object_get(st, "conditions")), 1);
    sb_cond_remove(st, "Ready");
    assert_null(sb_cond_get(st, "Ready"));
    json_decref(st);
}

static void test_expire(void **state)
{
    json_t *st =
        json_pack("{s:s, s:[s], s:s}", "service", "x", "podIPs", "1.2.3.4", "selector", "s");
    (void)state;
    sb_cond_set(st, SB_COND_FINISHED, "True", SB_R_POD_FAILED, "Pod failed", 2, T0);
    sb_cond_set(st, SB_COND_POD_SCHEDULED, "True", SB_R_POD_SCHEDULED, "", 2, T0);
    sb_status_expire(st, false, 2, T1);
    expect(st, SB_COND_READY, "False", SB_R_EXPIRED, "Sandbox has expired");
    expect(st, SB_COND_POD_SCHEDULED, NULL, NULL, NULL);
    assert_non_null(json_object_get(st, "podIPs"));
    sb_status_expire(st, true, 2, T1);
    assert_int_equal(json_object_size(st), 1);
    expect(st, SB_COND_FINISHED, "True", SB_R_POD_FAILED, NULL);
    expect(st, SB_COND_READY, "False", SB_R_EXPIRED, NULL);
    json_decref(st);
}

static void test_changed(void **state)
{
    json_t *a = json_object(), *b;
    (void)state;
    sb_cond_set(a, "Ready", "False", "X", "m", 1, T0);
    b = json_deep_copy(a);
    assert_false(sb_status_changed(a, b));
    assert_true(sb_status_changed(NULL, b));
    assert_false(sb_status_changed(NULL, NULL));
    /* nodeName alone while not Ready: coalesced. */
    json_object_set_new(b, "nodeName", json_string("n1"));
    assert_false(sb_status_changed(a, b));
    json_object_set_new(b, "podIPs", json_pack("[s]", "1.1.1.1"));
    assert_true(sb_status_changed(a, b));
    json_object_del(b, "podIPs");
    sb_cond_set(b, "Ready", "True", "X", "m", 1, T1);
    assert_true(sb_status_changed(a, b));
    json_decref(a);
    json_decref(b);
}

static void test_diff(void **state)
{
    json_t *pending = json_object(), *b;
    (void)state;
    /* A new Sandbox's first status: not Ready, dependencies not ready: a detail. */
    sb_cond_set(pending, SB_COND_SUSPENDED, "False", SB_R_NOT_SUSPENDED, "m", 1, T0);
    sb_cond_set(pending, SB_COND_POD_SCHEDULED, "Unknown", SB_R_SCHED_UNKNOWN, "m", 1, T0);
    sb_cond_set(pending, SB_COND_READY, "False", SB_R_DEPS_NOT_READY, "Pod exists", 1, T0);
    assert_int_equal(sb_status_diff(NULL, pending), SB_STATUS_DETAIL);
    assert_int_equal(sb_status_diff(pending, pending), SB_STATUS_SAME);
    /* Scheduled, running, an IP, a new message: details while not Ready. */
    b = json_deep_copy(pending);
    sb_cond_set(b, SB_COND_POD_SCHEDULED, "True", SB_R_POD_SCHEDULED, "", 1, T1);
    sb_cond_set(b, SB_COND_READY, "False", SB_R_DEPS_NOT_READY, "Pod is Running", 1, T1);
    json_object_set_new(b, "podIPs", json_pack("[s]", "10.0.0.1"));
    assert_int_equal(sb_status_diff(pending, b), SB_STATUS_DETAIL);
    /* nodeName alone while not Ready: nothing to write. */
    json_decref(b);
    b = json_deep_copy(pending);
    json_object_set_new(b, "nodeName", json_string("n1"));
    assert_int_equal(sb_status_diff(pending, b), SB_STATUS_SAME);
    /* Ready=True is always written, whatever else changed. */
    sb_cond_set(b, SB_COND_READY, "True", SB_R_DEPS_READY, "Pod is Ready", 1, T1);
    assert_int_equal(sb_status_diff(pending, b), SB_STATUS_HEADLINE);
    assert_int_equal(sb_status_diff(NULL, b), SB_STATUS_HEADLINE);
    json_object_set_new(b, "podIPs", json_pack("[s]", "10.0.0.2"));
    json_t *ready = json_deep_copy(b);
    json_object_set_new(b, "podIPs", json_pack("[s]", "10.0.0.3"));
    assert_int_equal(sb_status_diff(ready, b), SB_STATUS_HEADLINE);
    json_decref(ready);
    /* Another Ready reason, a suspend or a finish: what a user sees. */
    json_decref(b);
    b = json_deep_copy(pending);
    sb_cond_set(b, SB_COND_READY, "False", SB_R_RECONCILER_ERROR, "Error seen: x", 1, T1);
    assert_int_equal(sb_status_diff(pending, b), SB_STATUS_HEADLINE);
    assert_int_equal(sb_status_diff(NULL, b), SB_STATUS_HEADLINE);
    json_decref(b);
    b = json_deep_copy(pending);
    sb_cond_set(b, SB_COND_SUSPENDED, "False", SB_R_POD_TERMINATING, "m", 2, T1);
    assert_int_equal(sb_status_diff(pending, b), SB_STATUS_HEADLINE);
    json_decref(b);
    b = json_deep_copy(pending);
    sb_cond_set(b, SB_COND_FINISHED, "True", SB_R_POD_FAILED, "Pod failed", 1, T1);
    assert_int_equal(sb_status_diff(pending, b), SB_STATUS_HEADLINE);
    json_decref(b);
    json_decref(pending);
}

/* A status write carries the metadata (ownership of labels and annotations unchanged)
 * and the new status, not the spec; the Sandbox it came from is left as it was. */
static void test_status_body(void **state)
{
    json_t *sb =
        json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:{s:{s:[{s:s}]}}}, s:{s:s}}", "apiVersion",
                  "agents.x-k8s.io/v1beta1", "kind", "Sandbox", "metadata", "name", "s",
                  "resourceVersion", "7", "labels", "team", "a", "spec", "podTemplate", "spec",
                  "containers", "name", "c", "status", "selector", "old");
    json_t *before = json_deep_copy(sb), *st = json_pack("{s:s}", "selector", "new");
    (void)state;
    json_t *body = sb_status_body(sb, st);
    assert_null(json_object_get(body, "spec"));
    assert_string_equal(json_string_value(json_object_get(body, "kind")), "Sandbox");
    assert_string_equal(json_string_value(json_object_get(body, "apiVersion")),
                        "agents.x-k8s.io/v1beta1");
    assert_true(json_equal(json_object_get(body, "metadata"), json_object_get(sb, "metadata")));
    assert_ptr_equal(json_object_get(body, "status"), st);
    assert_int_equal(json_object_size(body), 4);
    assert_true(json_equal(sb, before));
    json_decref(body);
    json_decref(st);
    json_decref(before);
    json_decref(sb);
}

/* Once a suspend is confirmed, the Pod cache showing the deleted Pod late (made before
 * Suspended went True) does not turn Suspended back to False: never True, False, True. */
static void test_suspend_true_stays(void **state)
{
    json_t *sb = sandbox("Suspended", NULL), *p = pod("Running", "True", "10.0.0.5");
    struct sb_observed o = {.sb = sb};
    json_t *st = sb_status_build(&o, T1);
    (void)state;
    expect(st, SB_COND_SUSPENDED, "True", SB_R_POD_TERMINATED, NULL);
    json_object_set_new(sb, "status", st);
    json_object_set_new(json_object_get(p, "metadata"), "creationTimestamp", json_string(T0));
    o.pod = p;
    st = build(&o);
    expect(st, SB_COND_SUSPENDED, "True", SB_R_POD_TERMINATED,
           "Pod has been terminated. Sandbox is suspended");
    expect(st, SB_COND_READY, "False", SB_R_SUSPENDED, "Sandbox is suspended");
    expect(st, SB_COND_POD_SCHEDULED, NULL, NULL, NULL);
    assert_null(json_object_get(st, "podIPs"));
    json_decref(st);
    /* a Pod made after the suspend was confirmed is another one: it is terminating */
    json_object_set_new(json_object_get(p, "metadata"), "creationTimestamp",
                        json_string("2026-01-01T00:00:09Z"));
    st = build(&o);
    expect(st, SB_COND_SUSPENDED, "False", SB_R_POD_TERMINATING, NULL);
    json_decref(st);
    json_decref(p);
    json_decref(sb);
}

/* Resumed while the suspend's Pod is still going: Suspended stays False with reason
 * PodTerminating (the Pod step reads it: no "lost" Pod when it goes), until a new Pod. A
 * Pod deleted by someone else while Running is not the suspend's. */
static void test_resume_while_pod_goes(void **state)
{
    json_t *sb = sandbox("Running", NULL), *p = pod("Running", "True", "10.0.0.5");
    json_t *st = json_object();
    struct sb_observed o = {.sb = sb, .pod = p, .pod_going = true};
    (void)state;
    sb_cond_set(st, SB_COND_SUSPENDED, "False", SB_R_POD_TERMINATING, "m", 2, T0);
    json_object_set_new(sb, "status", st);
    st = build(&o);
    expect(st, SB_COND_SUSPENDED, "False", SB_R_POD_TERMINATING,
           "Sandbox is resuming; the Pod of its suspend is still terminating");
    /* that Pod's last status (Ready, with an IP) is not the Sandbox's: before, Ready was
     * True until the cache showed the deletion */
    expect(st, SB_COND_READY, "False", SB_R_DEPS_NOT_READY, NULL);
    assert_non_null(
        strstr(json_string_value(json_object_get(sb_cond_get(st, SB_COND_READY), "message")) ?: "",
               "Pod is terminating"));
    json_decref(st);
    o.pod_going = false; /* the new Pod */
    st = build(&o);
    expect(st, SB_COND_SUSPENDED, "False", SB_R_NOT_SUSPENDED, "Sandbox is not suspended");
    expect(st, SB_COND_READY, "True", SB_R_DEPS_READY, NULL);
    json_object_set_new(sb, "status", st);
    o.pod_going = true; /* deleted by someone else while Running (or a metadata patch of
                           ours the cache has yet to show): not the suspend's */
    st = build(&o);
    expect(st, SB_COND_SUSPENDED, "False", SB_R_NOT_SUSPENDED, "Sandbox is not suspended");
    expect(st, SB_COND_READY, "True", SB_R_DEPS_READY, NULL);
    json_decref(st);
    json_decref(p);
    json_decref(sb);
}

/* A refused DELETE of the Pod (a suspend's) is not "terminating". */
static void test_suspend_delete_failed(void **state)
{
    json_t *sb = sandbox("Suspended", NULL), *p = pod("Running", "True", "10.0.0.5");
    struct sb_observed o = {
        .sb = sb, .pod = p, .pod_delete_failed = true, .errors = "pod delete failed: forbidden"};
    json_t *st = build(&o);
    (void)state;
    expect(st, SB_COND_SUSPENDED, "False", SB_R_POD_DELETE_FAILED,
           "Pod could not be deleted. Sandbox suspension will be retried");
    expect(st, SB_COND_READY, "False", SB_R_RECONCILER_ERROR,
           "Error seen: pod delete failed: forbidden");
    json_decref(st);
    json_decref(p);
    json_decref(sb);
}

/* While several Pods conflict the Service step does not run: its status fields stay. */
static void test_multiple_keeps_service(void **state)
{
    json_t *sb = sandbox("Running", "true"), *st = json_object();
    struct sb_observed o = {.sb = sb, .multiple_pods = "multiple Pods (2)", .pod_error = true};
    (void)state;
    json_object_set_new(st, "service", json_string("my-sandbox"));
    json_object_set_new(st, "serviceFQDN", json_string("my-sandbox.ns.svc.cluster.local"));
    json_object_set_new(sb, "status", st);
    st = build(&o);
    expect(st, SB_COND_READY, "False", SB_R_MULTIPLE_PODS, NULL);
    assert_string_equal(json_string_value(json_object_get(st, "service")) ?: "-", "my-sandbox");
    assert_string_equal(json_string_value(json_object_get(st, "serviceFQDN")) ?: "-",
                        "my-sandbox.ns.svc.cluster.local");
    json_decref(st);
    json_decref(sb);
}

/* sb_expired: the deadline, or the status's SandboxExpired for the spec as it is (a
 * clock behind the deadline does not bring the Sandbox back; a new spec does). */
static void test_expired_by_status(void **state)
{
    json_t *sb = sandbox("Running", NULL), *st = json_object();
    const usec_t deadline = 1000 * USEC_PER_SEC;
    (void)state;
    json_object_set_new(json_object_get(sb, "metadata"), "generation", json_integer(3));
    assert_false(sb_expired(sb, 0, deadline * 2));        /* no shutdownTime */
    assert_true(sb_expired(sb, deadline, deadline));      /* reached */
    assert_false(sb_expired(sb, deadline, deadline - 1)); /* not yet */
    sb_status_expire(st, true, 3, T1);
    json_object_set_new(sb, "status", st);
    assert_true(sb_expired(sb, deadline, deadline - 30 * USEC_PER_SEC)); /* a clock behind */
    json_object_set_new(json_object_get(sb, "metadata"), "generation", json_integer(4));
    assert_false(sb_expired(sb, deadline, deadline - 1)); /* a later shutdownTime */
    json_decref(sb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_pod_running),
        cmocka_unit_test(test_pending_running_ready),
        cmocka_unit_test(test_service_unset_follows_existence),
        cmocka_unit_test(test_terminal_phases),
        cmocka_unit_test(test_suspend_resume),
        cmocka_unit_test(test_suspend_unowned_and_unknown),
        cmocka_unit_test(test_multiple_and_lost),
        cmocka_unit_test(test_pod_scheduled_mirror),
        cmocka_unit_test(test_transition_time),
        cmocka_unit_test(test_expire),
        cmocka_unit_test(test_diff),
        cmocka_unit_test(test_changed),
        cmocka_unit_test(test_status_body),
        cmocka_unit_test(test_suspend_true_stays),
        cmocka_unit_test(test_resume_while_pod_goes),
        cmocka_unit_test(test_expired_by_status),
        cmocka_unit_test(test_suspend_delete_failed),
        cmocka_unit_test(test_multiple_keeps_service),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
