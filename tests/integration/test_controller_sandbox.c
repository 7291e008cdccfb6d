/* SPDX-License-Identifier: Apache-2.0 */
/* Integration tests of the Sandbox controller against the local kube-apiserver: the
 * manager runs in-process, watching one namespace; the test plays the kubelet by
 * patching Pod status. Tests share one namespace and run in order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "api/res.h"
#include "common/clock.h"
#include "common/log.h"
#include "controller/manager.h"
#include "controller/sandbox_desired.h"
#include "controller/sandbox_names.h"
#include "controller/sandbox_status.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "support/apiserver.h"
#include "support/ctrl_fixture.h"
#include "support/kube_fixture.h"

#define WAIT (30 * USEC_PER_SEC)

static struct kube_client *c;
static struct kube_client *mgr_client; /* the manager's: it_before_request applies to it */
static struct ctrl_manager *mgr;
static char ns[96];

static void start_manager(void)
{
    struct ctrl_opts o = {.client = mgr_client,
                          .workers = 4,
                          .ns = ns,
                          .leader_elect = true,
                          .lease_ns = ns,
                          .lease_name = "it-controller",
                          .metrics_addr = "127.0.0.1:0",
                          .health_addr = "127.0.0.1:0",
                          .events = true};
    assert_int_equal(ctrl_manager_new(&o, &mgr), 0);
    assert_int_equal(ctrl_manager_start(mgr), 0);
    assert_int_equal(ctrl_manager_wait_synced(mgr, WAIT), 0);
}

static void stop_manager(void)
{
    ctrl_manager_free(mgr);
    mgr = NULL;
}

static int group_setup(void **state)
{
    struct it_sandbox_ns_opts o = {.prefix = "ctl", .default_sa = true, .timeout = WAIT};
    struct kube_client_opts mo = {.max_retries = -1, .fault = it_lose_answer};
    struct kube_err e;
    (void)state;
    log_set_level(LOG_WARN);
    if (it_client_new(NULL, &c, &e) < 0 || it_client_new(&mo, &mgr_client, &e) < 0)
        return -1;
    if (it_sandbox_ns_setup(c, &o, ns, sizeof(ns), &e) < 0) {
        fprintf(stderr, "setup failed: %s\n", e.message);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    stop_manager();
    if (c && ns[0])
        (void)it_ns_delete(c, ns, 60 * USEC_PER_SEC);
    kube_client_free(c);
    kube_client_free(mgr_client);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------ */

static json_t *get(const struct kube_res *res, const char *name)
{
    return it_obj_get(c, res, ns, name);
}

static void create_sandbox(const char *name, json_t *spec_extra)
{
    struct kube_err e;
    json_t *sb =
        json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:{s:{s:s}}, s:{s:[{s:s, s:s, s:[{s:i}]}]}}}}",
                  "apiVersion", SB_API_VERSION, "kind", SB_KIND, "metadata", "name", name, "spec",
                  "podTemplate", "metadata", "labels", "tier", "gold", "spec", "containers", "name",
                  "runtime", "image", "registry.local/runtime:1", "ports", "containerPort", 8888);
    if (spec_extra)
        json_object_update(json_object_get(sb, "spec"), spec_extra);
    IT_OK(kube_create(c, &API_RES_SANDBOXES, ns, sb, NULL, &e), &e);
    json_decref(sb);
    json_decref(spec_extra);
}

/* Merge-patches name of res (or its subresource sub) with p (taken). */
static void patch(const struct kube_res *res, const char *name, const char *sub, json_t *p)
{
    struct kube_err e;
    IT_OK(it_merge_patch(c, res, ns, name, sub, p, &e), &e);
    json_decref(p);
}

static void patch_spec(const char *name, json_t *spec)
{
    patch(&API_RES_SANDBOXES, name, NULL, json_pack("{s:o}", "spec", spec));
}

/* Acts as the kubelet: the Pod runs, is Ready and has an IP. */
static void kubelet_ready(const char *name, const char *ip)
{
    struct kube_err e;
    IT_OK(it_pod_ready(c, ns, name, ip, &e), &e);
}

static void wait_cond(const char *name, const char *type, const char *status, const char *reason)
{
    struct it_cond want = {&API_RES_SANDBOXES, name, type, status, reason};
    if (it_cond_wait(c, ns, &want, WAIT) < 0) {
        json_t *sb = get(&API_RES_SANDBOXES, name);
        char *s = json_dumps(json_object_get(sb, "status"), JSON_INDENT(1));
        fail_msg("sandbox %s: no %s=%s/%s; status: %s", name, type, status ? status : "*",
                 reason ? reason : "*", s ? s : "null");
    }
}

struct exists_ctx {
    const struct kube_res *res;
    const char *name;
    const char *not_uid; /* wait for an object with another uid */
};

static bool exists(void *ctx)
{
    struct exists_ctx *x = ctx;
    json_t *o = get(x->res, x->name);
    bool ok = o && !kube_obj_deleting(o) &&
              (!x->not_uid || strcmp(kube_obj_uid(o) ?: "", x->not_uid) != 0);
    json_decref(o);
    return ok;
}

static json_t *wait_obj(const struct kube_res *res, const char *name, const char *not_uid)
{
    struct exists_ctx x = {res, name, not_uid};
    if (it_wait(exists, &x, WAIT) < 0)
        fail_msg("%s %s did not appear", res->plural, name);
    return get(res, name);
}

static void assert_owned_by(const json_t *obj, const json_t *sb)
{
    assert_non_null(obj);
    assert_true(sb_controlled_by(obj, kube_obj_uid(sb)));
    assert_true(json_is_true(json_object_get(kube_obj_controller_ref(obj), "blockOwnerDeletion")));
}

/* ---- tests -------------------------------------------------------------------------- */

static void test_create_children(void **state)
{
    json_t *sb, *pod, *svc, *pvc;
    char hash[SB_HASH_LEN + 1];
    (void)state;
    start_manager();
    create_sandbox("s1", json_pack("{s:b, s:[{s:{s:s}, s:{s:[s], s:{s:{s:s}}}}]}", "service", 1,
                                   "volumeClaimTemplates", "metadata", "name", "data", "spec",
                                   "accessModes", "ReadWriteOnce", "resources", "requests",
                                   "storage", "1Gi"));
    pod = wait_obj(&KUBE_RES_PODS, "s1", NULL);
    svc = wait_obj(&KUBE_RES_SERVICES, "s1", NULL);
    pvc = wait_obj(&KUBE_RES_PVCS, "data-s1", NULL);
    sb = get(&API_RES_SANDBOXES, "s1");
    sb_name_hash("s1", hash);
    assert_owned_by(pod, sb);
    assert_owned_by(svc, sb);
    assert_owned_by(pvc, sb);
    assert_string_equal(kube_obj_label(pod, SB_LABEL_NAME_HASH), hash);
    assert_string_equal(kube_obj_label(pod, "tier"), "gold");
    assert_string_equal(kube_obj_label(svc, SB_LABEL_NAME_HASH), hash);
    assert_string_equal(kube_obj_label(pvc, SB_LABEL_NAME_HASH), hash);
    assert_string_equal(kube_obj_path_str(svc, "spec.clusterIP"), "None");
    assert_string_equal(kube_obj_path_str(json_array_get(kube_obj_path(pod, "spec.volumes"), 0),
                                          "persistentVolumeClaim.claimName"),
                        "data-s1");
    wait_cond("s1", SB_COND_READY, "False", SB_R_DEPS_NOT_READY);
    wait_cond("s1", SB_COND_SUSPENDED, "False", SB_R_NOT_SUSPENDED);
    json_decref(sb);
    sb = get(&API_RES_SANDBOXES, "s1");
    /* The Pod is named after the Sandbox: no pod-name annotation patch (clients fall back
     * to the Sandbox's name; --always-annotate-pod-name restores it). */
    assert_null(kube_obj_annotation(sb, SB_ANN_POD_NAME));
    char fqdn[256];
    (void)snprintf(fqdn, sizeof(fqdn), "s1.%s.svc.cluster.local", ns);
    assert_string_equal(kube_obj_path_str(sb, "status.service"), "s1");
    assert_string_equal(kube_obj_path_str(sb, "status.serviceFQDN"), fqdn);
    json_decref(sb);
    json_decref(pod);
    json_decref(svc);
    json_decref(pvc);
}

/* The managedFields entry of sb that owns the fieldsV1 path (NULL-terminated keys such as
 * "f:spec"), written by subresource sub ("" = the object itself); NULL when none does. */
static const json_t *owner_of(const json_t *sb, const char *sub, ...)
{
    const json_t *mf = kube_obj_path(sb, "metadata.managedFields"), *ent;
    size_t i;
    json_array_foreach((json_t *)mf, i, ent)
    {
        const json_t *f = json_object_get(ent, "fieldsV1");
        const char *es = json_string_value(json_object_get(ent, "subresource"));
        va_list ap;
        if (strcmp(es ? es : "", sub) != 0)
            continue;
        va_start(ap, sub);
        for (const char *k = va_arg(ap, const char *); k && f; k = va_arg(ap, const char *))
            f = json_object_get(f, k);
        va_end(ap);
        if (f)
            return ent;
    }
    return NULL;
}

static void test_ready(void **state)
{
    json_t *sb;
    (void)state;
    patch(&API_RES_SANDBOXES, "s1", NULL,
          json_pack("{s:{s:{s:s}}}", "metadata", "labels", "kept", "yes"));
    kubelet_ready("s1", "10.1.2.3");
    wait_cond("s1", SB_COND_READY, "True", SB_R_DEPS_READY);
    sb = get(&API_RES_SANDBOXES, "s1");
    assert_string_equal(json_string_value(json_array_get(kube_obj_path(sb, "status.podIPs"), 0)),
                        "10.1.2.3");
    assert_non_null(kube_obj_path_str(sb, "status.selector"));
    /* The status writes send no spec: the stored spec, the label and who owns them are as
     * the test left them, and the status is owned through the status subresource. */
    assert_int_equal(json_integer_value(kube_obj_path(sb, "metadata.generation")), 1);
    assert_string_equal(
        kube_obj_path_str(json_array_get(kube_obj_path(sb, "spec.podTemplate.spec.containers"), 0),
                          "image"),
        "registry.local/runtime:1");
    assert_string_equal(kube_obj_label(sb, "kept"), "yes");
    assert_non_null(owner_of(sb, "", "f:spec", "f:podTemplate", "f:spec", "f:containers", NULL));
    assert_non_null(owner_of(sb, "", "f:metadata", "f:labels", "f:kept", NULL));
    assert_non_null(owner_of(sb, "status", "f:status", "f:conditions", NULL));
    assert_null(owner_of(sb, "status", "f:spec", NULL));
    wait_cond("s1", SB_COND_POD_SCHEDULED, "True", NULL);
    json_decref(sb);
}

static bool status_has_no_pod_ips(void *ctx)
{
    json_t *sb = get(&API_RES_SANDBOXES, ctx);
    bool ok = sb && !kube_obj_path(sb, "status.podIPs");
    json_decref(sb);
    return ok;
}

struct event_ctx {
    const char *name, *reason;
};

static bool event_seen(void *ctx)
{
    struct event_ctx *x = ctx;
    struct kube_req r;
    json_t *list = NULL;
    char sel[256];
    bool ok;
    kube_req_init(&r, "GET", &KUBE_RES_EVENTS);
    r.ns = ns;
    (void)snprintf(sel, sizeof(sel), "involvedObject.name=%s,reason=%s", x->name, x->reason);
    r.field_selector = sel;
    ok = kube_request(c, &r, &list, NULL) >= 0 && json_array_size(json_object_get(list, "items"));
    json_decref(list);
    return ok;
}

static void test_pod_lost(void **state)
{
    json_t *pod = get(&KUBE_RES_PODS, "s1"), *again, *sb;
    struct kube_err e;
    char uid[64];
    (void)state;
    assert_non_null(pod);
    (void)snprintf(uid, sizeof(uid), "%s", kube_obj_uid(pod));
    IT_OK(kube_delete(c, &KUBE_RES_PODS, ns, "s1", &e), &e);
    /* Ready drops at once (no stale Ready), with a reason, and a new Pod appears. */
    wait_cond("s1", SB_COND_READY, "False", SB_R_DEPS_NOT_READY);
    again = wait_obj(&KUBE_RES_PODS, "s1", uid);
    sb = get(&API_RES_SANDBOXES, "s1");
    assert_owned_by(again, sb);
    json_decref(sb);
    /* The old Pod's IPs do not outlive it. */
    assert_int_equal(it_wait(status_has_no_pod_ips, "s1", WAIT), 0);
    struct event_ctx ev = {"s1", "PodRecreated"}; /* a Pod that ran, lost: said so */
    assert_int_equal(it_wait(event_seen, &ev, WAIT), 0);
    json_decref(again);
    json_decref(pod);
    kubelet_ready("s1", "10.1.2.4");
    wait_cond("s1", SB_COND_READY, "True", SB_R_DEPS_READY);
}

static void test_suspend_resume(void **state)
{
    json_t *pvc, *svc, *sb;
    (void)state;
    patch_spec("s1", json_pack("{s:s}", "operatingMode", "Suspended"));
    assert_int_equal(it_wait_gone(c, &KUBE_RES_PODS, ns, "s1", WAIT), 0);
    wait_cond("s1", SB_COND_SUSPENDED, "True", SB_R_POD_TERMINATED);
    wait_cond("s1", SB_COND_READY, "False", SB_R_SUSPENDED);
    pvc = get(&KUBE_RES_PVCS, "data-s1");
    svc = get(&KUBE_RES_SERVICES, "s1");
    assert_non_null(pvc);
    assert_non_null(svc);
    sb = get(&API_RES_SANDBOXES, "s1");
    assert_null(kube_obj_path(sb, "status.podIPs"));
    assert_null(kube_obj_annotation(sb, SB_ANN_POD_NAME));
    json_decref(sb);
    /* Resume: same identity, same PVC, and Suspended goes False (never stale). */
    patch_spec("s1", json_pack("{s:s}", "operatingMode", "Running"));
    json_t *pod = wait_obj(&KUBE_RES_PODS, "s1", NULL);
    wait_cond("s1", SB_COND_SUSPENDED, "False", SB_R_NOT_SUSPENDED);
    assert_string_equal(kube_obj_path_str(json_array_get(kube_obj_path(pod, "spec.volumes"), 0),
                                          "persistentVolumeClaim.claimName"),
                        "data-s1");
    json_t *pvc2 = get(&KUBE_RES_PVCS, "data-s1");
    assert_string_equal(kube_obj_uid(pvc2), kube_obj_uid(pvc));
    kubelet_ready("s1", "10.1.2.5");
    wait_cond("s1", SB_COND_READY, "True", SB_R_DEPS_READY);
    json_decref(pod);
    json_decref(pvc);
    json_decref(pvc2);
    json_decref(svc);
}

static bool status_has_no_service(void *ctx)
{
    json_t *sb = get(&API_RES_SANDBOXES, ctx);
    bool ok = sb && !kube_obj_path(sb, "status.service");
    json_decref(sb);
    return ok;
}

static void test_service_off_on(void **state)
{
    json_t *svc;
    (void)state;
    patch_spec("s1", json_pack("{s:b}", "service", 0));
    assert_int_equal(it_wait_gone(c, &KUBE_RES_SERVICES, ns, "s1", WAIT), 0);
    assert_int_equal(it_wait(status_has_no_service, "s1", WAIT), 0);
    wait_cond("s1", SB_COND_READY, "True", SB_R_DEPS_READY);
    patch_spec("s1", json_pack("{s:b}", "service", 1));
    svc = wait_obj(&KUBE_RES_SERVICES, "s1", NULL);
    assert_int_equal(json_array_size(kube_obj_path(svc, "spec.ports")), 1);
    json_decref(svc);
}

static void shutdown_in(json_t *spec, usec_t d)
{
    char t[64];
    clock_format_rfc3339_sec(clock_wall_now() + d, t, sizeof(t));
    json_object_set_new(spec, "shutdownTime", json_string(t));
}

static void test_shutdown_delete(void **state)
{
    json_t *spec = json_pack("{s:s, s:b}", "shutdownPolicy", "Delete", "service", 1);
    json_t *pod;
    (void)state;
    shutdown_in(spec, 4 * USEC_PER_SEC);
    create_sandbox("s-del", spec);
    pod = wait_obj(&KUBE_RES_PODS, "s-del", NULL);
    json_decref(pod);
    assert_int_equal(it_wait_gone(c, &API_RES_SANDBOXES, ns, "s-del", WAIT), 0);
    assert_int_equal(it_wait_gone(c, &KUBE_RES_PODS, ns, "s-del", WAIT), 0);
}

static void test_shutdown_retain(void **state)
{
    json_t *spec = json_pack("{s:s, s:b}", "shutdownPolicy", "Retain", "service", 1), *sb;
    (void)state;
    shutdown_in(spec, 4 * USEC_PER_SEC);
    create_sandbox("s-ret", spec);
    json_decref(wait_obj(&KUBE_RES_SERVICES, "s-ret", NULL));
    wait_cond("s-ret", SB_COND_READY, "False", SB_R_EXPIRED);
    assert_int_equal(it_wait_gone(c, &KUBE_RES_PODS, ns, "s-ret", WAIT), 0);
    assert_int_equal(it_wait_gone(c, &KUBE_RES_SERVICES, ns, "s-ret", WAIT), 0);
    assert_int_equal(it_wait(status_has_no_service, "s-ret", WAIT), 0);
    sb = get(&API_RES_SANDBOXES, "s-ret");
    assert_non_null(sb);
    assert_null(kube_obj_path(sb, "status.selector"));
    assert_null(kube_obj_condition(sb, SB_COND_POD_SCHEDULED));
    json_decref(sb);
}

/* What replace_child did, for the test's thread: the hook runs on a controller worker,
 * where a cmocka assertion must not fail (its jump belongs to the test's thread). */
static struct {
    pthread_mutex_t lock;
    char uid[64];    /* the successor's */
    char error[256]; /* what went wrong, "" when nothing did */
} replaced = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void replaced_set(const char *uid, const char *error)
{
    pthread_mutex_lock(&replaced.lock);
    (void)snprintf(replaced.uid, sizeof(replaced.uid), "%s", uid);
    (void)snprintf(replaced.error, sizeof(replaced.error), "%s", error);
    pthread_mutex_unlock(&replaced.lock);
}

/* A child the controller is about to delete, and the foreign object of its name that
 * replace_child puts in its place first. */
struct child_swap {
    const struct kube_res *res;
    const char *name;
    json_t *(*foreign)(const char *name); /* a new object of that name, owned by nobody */
};

/* A Sandbox of that name without a shutdown time (the expired one's successor). */
static json_t *new_sandbox(const char *name)
{
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:{s:[{s:s, s:s}]}}}}", "apiVersion",
                     SB_API_VERSION, "kind", SB_KIND, "metadata", "name", name, "spec",
                     "podTemplate", "spec", "containers", "name", "runtime", "image",
                     "registry.local/runtime:1");
}

static json_t *foreign_pod(const char *name)
{
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1", "kind", "Pod",
                     "metadata", "name", name, "spec", "containers", "name", "x", "image",
                     "registry.local/other:1");
}

static json_t *foreign_service(const char *name)
{
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:[{s:i}]}}", "apiVersion", "v1", "kind",
                     "Service", "metadata", "name", name, "spec", "clusterIP", "None", "ports",
                     "port", 80);
}

/* Deletes the object the controller's DELETE is about to name and makes another of its
 * name before the DELETE is sent (an it_before_request hook: reports through replaced,
 * asserts nothing). */
static void replace_child(const char *url, void *ctx)
{
    const struct child_swap *x = ctx;
    char uid[64];
    struct kube_err e = {0};
    json_t *old = get(x->res, x->name), *next = x->foreign(x->name), *made = NULL;
    (void)url;
    if (!old) {
        replaced_set("", "the object to delete was not found");
    } else {
        (void)snprintf(uid, sizeof(uid), "%s", kube_obj_uid(old));
        if (kube_delete(c, x->res, ns, x->name, &e) < 0)
            replaced_set("", e.message);
        else if (it_wait_gone_uid(c, x->res, ns, x->name, uid, WAIT) < 0)
            replaced_set("", "the object did not go");
        else if (kube_create(c, x->res, ns, next, &made, &e) < 0)
            replaced_set("", e.message);
        else
            replaced_set(kube_obj_uid(made), "");
    }
    json_decref(made);
    json_decref(next);
    json_decref(old);
}

static bool successor_has_pod(void *ctx)
{
    json_t *pod = get(&KUBE_RES_PODS, ctx);
    const char *owner = pod ? kube_obj_controller_uid(pod) : NULL;
    pthread_mutex_lock(&replaced.lock);
    bool ok = owner && replaced.uid[0] && strcmp(owner, replaced.uid) == 0;
    pthread_mutex_unlock(&replaced.lock);
    json_decref(pod);
    return ok;
}

static int before_cancel(void **state)
{
    (void)state;
    it_before_cancel();
    return 0;
}

/* An expired Sandbox replaced by another of its name just before the controller's DELETE:
 * the DELETE names the expired one's uid, so the successor stays (and gets its Pod). */
static void test_expiry_spares_successor(void **state)
{
    static const struct child_swap x = {&API_RES_SANDBOXES, "s-uid", new_sandbox};
    json_t *spec = json_pack("{s:s}", "shutdownPolicy", "Delete"), *sb;
    (void)state;
    replaced_set("", "");
    assert_int_equal(it_before_request("DELETE", &API_RES_SANDBOXES, "/sandboxes/s-uid", 0,
                                       replace_child, (void *)&x),
                     0);
    shutdown_in(spec, 2 * USEC_PER_SEC);
    create_sandbox("s-uid", spec);
    int waited = it_wait(successor_has_pod, "s-uid", WAIT);
    assert_false(it_before_pending());
    pthread_mutex_lock(&replaced.lock);
    char uid[64], error[256];
    (void)snprintf(uid, sizeof(uid), "%s", replaced.uid);
    (void)snprintf(error, sizeof(error), "%s", replaced.error);
    pthread_mutex_unlock(&replaced.lock);
    if (error[0])
        fail_msg("replacing the expired Sandbox: %s", error);
    assert_int_equal(waited, 0);
    sb = get(&API_RES_SANDBOXES, "s-uid");
    assert_non_null(sb);
    assert_string_equal(kube_obj_uid(sb), uid);
    assert_null(kube_obj_path(sb, "metadata.deletionTimestamp"));
    json_decref(sb);
}

/* After replace_child ran: fails unless it succeeded and the foreign object it made is
 * still there, not being deleted. */
static void assert_successor_kept(const struct kube_res *res, const char *name)
{
    char uid[64], error[256];
    json_t *o;
    pthread_mutex_lock(&replaced.lock);
    (void)snprintf(uid, sizeof(uid), "%s", replaced.uid);
    (void)snprintf(error, sizeof(error), "%s", replaced.error);
    pthread_mutex_unlock(&replaced.lock);
    if (error[0] || !uid[0])
        fail_msg("replacing %s %s: %s", res->plural, name, error[0] ? error : "did not run");
    o = get(res, name);
    if (!o)
        fail_msg("the foreign %s %s was deleted", res->plural, name);
    assert_string_equal(kube_obj_uid(o), uid);
    assert_null(kube_obj_path(o, "metadata.deletionTimestamp"));
    assert_null(kube_obj_controller_ref(o));
    json_decref(o);
}

/* Suspending deletes the Sandbox's Pod by UID: a foreign Pod made under its name just
 * before the DELETE stays, and the Sandbox says it does not own it. */
static void test_suspend_spares_successor(void **state)
{
    static const struct child_swap x = {&KUBE_RES_PODS, "s-susp-uid", foreign_pod};
    (void)state;
    replaced_set("", "");
    create_sandbox(x.name, NULL);
    json_decref(wait_obj(&KUBE_RES_PODS, x.name, NULL));
    assert_int_equal(it_before_request("DELETE", &KUBE_RES_PODS, "/pods/s-susp-uid", 0,
                                       replace_child, (void *)&x),
                     0);
    patch_spec(x.name, json_pack("{s:s}", "operatingMode", "Suspended"));
    wait_cond(x.name, SB_COND_SUSPENDED, "False", SB_R_POD_NOT_OWNED);
    assert_false(it_before_pending());
    assert_successor_kept(x.res, x.name);
}

/* Turning spec.service off deletes the Service by UID: a foreign Service made under its
 * name just before the DELETE stays. */
static void test_service_off_spares_successor(void **state)
{
    static const struct child_swap x = {&KUBE_RES_SERVICES, "s-svc-uid", foreign_service};
    (void)state;
    replaced_set("", "");
    create_sandbox(x.name, json_pack("{s:b}", "service", 1));
    json_decref(wait_obj(&KUBE_RES_SERVICES, x.name, NULL));
    wait_cond(x.name, SB_COND_READY, "False", SB_R_DEPS_NOT_READY);
    assert_int_equal(it_before_request("DELETE", &KUBE_RES_SERVICES, "/services/s-svc-uid", 0,
                                       replace_child, (void *)&x),
                     0);
    patch_spec(x.name, json_pack("{s:b}", "service", 0));
    assert_int_equal(it_wait(status_has_no_service, (void *)x.name, WAIT), 0);
    assert_false(it_before_pending());
    assert_successor_kept(x.res, x.name);
}

static bool has_event(void *ctx)
{
    struct kube_req r;
    json_t *list = NULL;
    char sel[256];
    bool ok;
    kube_req_init(&r, "GET", &KUBE_RES_EVENTS);
    r.ns = ns;
    (void)snprintf(sel, sizeof(sel), "involvedObject.name=s-foreign,reason=%s", (char *)ctx);
    r.field_selector = sel;
    ok = kube_request(c, &r, &list, NULL) >= 0 && json_array_size(json_object_get(list, "items"));
    json_decref(list);
    return ok;
}

static void test_unowned_pod_untouched(void **state)
{
    struct kube_err e;
    json_t *pod = json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1", "kind",
                            "Pod", "metadata", "name", "s-foreign", "spec", "containers", "name",
                            "x", "image", "registry.local/other:1");
    json_t *before = NULL, *after, *sb;
    (void)state;
    IT_OK(kube_create(c, &KUBE_RES_PODS, ns, pod, &before, &e), &e);
    json_decref(pod);
    create_sandbox("s-foreign", NULL);
    wait_cond("s-foreign", SB_COND_READY, "False", SB_R_RECONCILER_ERROR);
    assert_int_equal(it_wait(has_event, "PodNotOwned", WAIT), 0);
    after = get(&KUBE_RES_PODS, "s-foreign");
    assert_non_null(after);
    assert_string_equal(kube_obj_uid(after), kube_obj_uid(before));
    assert_string_equal(kube_obj_resource_version(after), kube_obj_resource_version(before));
    assert_null(kube_obj_controller_ref(after));
    /* Suspending must not delete it either. */
    patch_spec("s-foreign", json_pack("{s:s}", "operatingMode", "Suspended"));
    wait_cond("s-foreign", SB_COND_SUSPENDED, "False", SB_R_POD_NOT_OWNED);
    json_decref(after);
    after = get(&KUBE_RES_PODS, "s-foreign");
    assert_string_equal(kube_obj_resource_version(after), kube_obj_resource_version(before));
    json_decref(after);
    /* Labelled adoptable, it is adopted (once running again). */
    patch_spec("s-foreign", json_pack("{s:s}", "operatingMode", "Running"));
    patch(&KUBE_RES_PODS, "s-foreign", NULL,
          json_pack("{s:{s:{s:s}}}", "metadata", "labels", SB_LABEL_ADOPTABLE, "true"));
    wait_cond("s-foreign", SB_COND_READY, "False", SB_R_DEPS_NOT_READY);
    after = get(&KUBE_RES_PODS, "s-foreign");
    sb = get(&API_RES_SANDBOXES, "s-foreign");
    assert_owned_by(after, sb);
    assert_string_equal(kube_obj_uid(after), kube_obj_uid(before));
    json_decref(after);
    json_decref(before);
    json_decref(sb);
}

/* it_before_request's fn: another writer changes the Pod (a label) just before the
 * controller's adoption PATCH, which is guarded by the version the cache had. */
static void touch_pod(const char *url, void *ctx)
{
    json_t *p = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "touched", "yes");
    (void)url;
    (void)it_merge_patch(c, &KUBE_RES_PODS, ns, ctx, NULL, p, NULL);
    json_decref(p);
}

static bool pod_adopted(void *ctx)
{
    json_t *pod = get(&KUBE_RES_PODS, "s-named-pod"), *sb = get(&API_RES_SANDBOXES, ctx);
    bool ok = pod && sb && kube_obj_controller_uid(pod) &&
              strcmp(kube_obj_controller_uid(pod), kube_obj_uid(sb)) == 0;
    json_decref(pod);
    json_decref(sb);
    return ok;
}

/* The Pod a Sandbox's pod-name annotation names, unowned and labelled adoptable, changes
 * before the adoption PATCH (a conflict): the adoption is retried and the annotation
 * kept. Before, the annotation was cleared in that pass, and the next one created a Pod
 * of the Sandbox's name beside the one left unowned. */
static void test_named_pod_adoption_retried(void **state)
{
    struct kube_err e;
    json_t *pod =
        json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1", "kind",
                  "Pod", "metadata", "name", "s-named-pod", "labels", SB_LABEL_ADOPTABLE, "true",
                  "spec", "containers", "name", "x", "image", "registry.local/runtime:1");
    json_t *sb =
        json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:{s:{s:[{s:s, s:s}]}}}}", "apiVersion",
                  SB_API_VERSION, "kind", SB_KIND, "metadata", "name", "s-named", "annotations",
                  SB_ANN_POD_NAME, "s-named-pod", "spec", "podTemplate", "spec", "containers",
                  "name", "runtime", "image", "registry.local/runtime:1");
    char url[192];
    (void)state;
    IT_OK(kube_create(c, &KUBE_RES_PODS, ns, pod, NULL, &e), &e);
    (void)snprintf(url, sizeof(url), "/namespaces/%s/pods/s-named-pod", ns);
    assert_int_equal(it_before_request("PATCH", &KUBE_RES_PODS, url, 0, touch_pod, "s-named-pod"),
                     0);
    IT_OK(kube_create(c, &API_RES_SANDBOXES, ns, sb, NULL, &e), &e);
    assert_int_equal(it_wait(pod_adopted, "s-named", WAIT), 0);
    assert_false(it_before_pending());
    clock_sleep(500 * USEC_PER_MSEC); /* nothing to wait for: no Pod may be made beside it */
    json_decref(pod);
    pod = get(&KUBE_RES_PODS, "s-named");
    assert_null(pod);
    json_decref(sb);
    sb = get(&API_RES_SANDBOXES, "s-named");
    assert_string_equal(kube_obj_annotation(sb, SB_ANN_POD_NAME) ?: "", "s-named-pod");
    json_decref(sb);
}

/* A PVC in the way, unowned and unlabelled, is refused (ReconcilerError); labelled
 * adoptable later, it is adopted. Nothing maps the PVC's change to the Sandbox (its name is
 * data-<sandbox>), so only the refused pass's retry, with back-off as upstream's returned
 * error gets, brings the Sandbox back: before, it stayed refused for ever. */
static void test_refused_pvc_adopted_once_labelled(void **state)
{
    struct kube_err e;
    json_t *pvc =
        json_pack("{s:s, s:s, s:{s:s}, s:{s:[s], s:{s:{s:s}}}}", "apiVersion", "v1", "kind",
                  "PersistentVolumeClaim", "metadata", "name", "data-s-pvc", "spec", "accessModes",
                  "ReadWriteOnce", "resources", "requests", "storage", "1Gi");
    json_t *sb, *got;
    (void)state;
    IT_OK(kube_create(c, &KUBE_RES_PVCS, ns, pvc, NULL, &e), &e);
    json_decref(pvc);
    create_sandbox("s-pvc",
                   json_pack("{s:[{s:{s:s}, s:{s:[s], s:{s:{s:s}}}}]}", "volumeClaimTemplates",
                             "metadata", "name", "data", "spec", "accessModes", "ReadWriteOnce",
                             "resources", "requests", "storage", "1Gi"));
    wait_cond("s-pvc", SB_COND_READY, "False", SB_R_RECONCILER_ERROR);
    clock_sleep(2 * USEC_PER_SEC); /* a few refused passes: the back-off has grown */
    patch(&KUBE_RES_PVCS, "data-s-pvc", NULL,
          json_pack("{s:{s:{s:s}}}", "metadata", "labels", SB_LABEL_ADOPTABLE, "true"));
    wait_cond("s-pvc", SB_COND_READY, "False", SB_R_DEPS_NOT_READY);
    got = get(&KUBE_RES_PVCS, "data-s-pvc");
    sb = get(&API_RES_SANDBOXES, "s-pvc");
    assert_owned_by(got, sb);
    json_decref(got);
    json_decref(sb);
}

/* ---- suspend edge cases (docs/controller.md, "Status") ------------------------------ */

static int rules_drop(void **state)
{
    (void)state;
    (void)it_answers_lost();
    return 0;
}

static bool pod_deleting(void *ctx)
{
    json_t *pod = get(&KUBE_RES_PODS, ctx);
    bool ok = pod && kube_obj_deleting(pod);
    json_decref(pod);
    return ok;
}

/* Sandbox name created and Ready (its Pod running at ip); its Pod's uid into uid. */
static void create_ready(const char *name, const char *ip, char *uid, size_t size)
{
    json_t *pod;
    create_sandbox(name, NULL);
    pod = wait_obj(&KUBE_RES_PODS, name, NULL);
    (void)snprintf(uid, size, "%s", kube_obj_uid(pod));
    json_decref(pod);
    kubelet_ready(name, ip);
    wait_cond(name, SB_COND_READY, "True", SB_R_DEPS_READY);
}

/* Sandbox name's Pod was not reported as a lost one's replacement: no "lost" in its
 * Ready message, no PodRecreated Event (looked for 3 s). */
static void assert_not_lost(const char *name)
{
    struct event_ctx ev = {name, "PodRecreated"};
    json_t *sb = get(&API_RES_SANDBOXES, name);
    const char *msg =
        json_string_value(json_object_get(kube_obj_condition(sb, SB_COND_READY), "message"));
    if (msg && strstr(msg, "lost"))
        fail_msg("a false lost Pod: %s", msg);
    assert_int_equal(it_wait(event_seen, &ev, 3 * USEC_PER_SEC), -ETIMEDOUT);
    json_decref(sb);
}

/* Resumed before the suspended Pod has gone (a finalizer holds it terminating): when it
 * goes, the new Pod is no replacement of a lost one (no PodRecreated, no "lost"). */
static void test_quick_resume_not_lost(void **state)
{
    static const char name[] = "s-qres";
    json_t *again;
    char uid[64];
    (void)state;
    create_ready(name, "10.1.3.1", uid, sizeof(uid));
    patch(&KUBE_RES_PODS, name, NULL,
          json_pack("{s:{s:[s]}}", "metadata", "finalizers", "agents.x-k8s.io/it-hold"));
    patch_spec(name, json_pack("{s:s}", "operatingMode", "Suspended"));
    wait_cond(name, SB_COND_SUSPENDED, "False", SB_R_POD_TERMINATING);
    assert_int_equal(it_wait(pod_deleting, (void *)name, WAIT), 0);
    patch_spec(name, json_pack("{s:s}", "operatingMode", "Running"));
    /* the resume's pass: the Pod still terminates */
    wait_cond(name, SB_COND_READY, "False", SB_R_DEPS_NOT_READY);
    patch(&KUBE_RES_PODS, name, NULL, json_pack("{s:{s:n}}", "metadata", "finalizers"));
    again = wait_obj(&KUBE_RES_PODS, name, uid);
    wait_cond(name, SB_COND_SUSPENDED, "False", SB_R_NOT_SUSPENDED);
    assert_not_lost(name);
    json_decref(again);
}

/* A resume whose first Pod create fails: the status written then (no Pod, not
 * suspended) has no IPs or node, so the Pod the next pass makes replaces no lost one (no
 * PodRecreated, no "lost"). Before, the selector left from before the suspend said so. */
static void test_resume_create_failed_not_lost(void **state)
{
    static const char name[] = "s-rfail";
    char url[192], uid[64];
    json_t *pod;
    (void)state;
    create_ready(name, "10.1.3.2", uid, sizeof(uid));
    patch_spec(name, json_pack("{s:s}", "operatingMode", "Suspended"));
    wait_cond(name, SB_COND_SUSPENDED, "True", SB_R_POD_TERMINATED);
    (void)snprintf(url, sizeof(url), "/namespaces/%s/pods", ns);
    assert_int_equal(it_drop_requests("POST", &KUBE_RES_PODS, url, 1), 0);
    patch_spec(name, json_pack("{s:s}", "operatingMode", "Running"));
    pod = wait_obj(&KUBE_RES_PODS, name, uid);
    assert_int_equal(it_answers_lost(), 1);
    kubelet_ready(name, "10.1.3.3");
    wait_cond(name, SB_COND_READY, "True", SB_R_DEPS_READY);
    assert_not_lost(name);
    json_decref(pod);
}

/* A refused DELETE of the Pod for a suspend is reported (PodDeleteFailed, not "Pod is
 * terminating") and retried until it goes through. */
static void test_suspend_delete_refused(void **state)
{
    static const char name[] = "s-delref";
    json_t *pod, *still;
    (void)state;
    create_sandbox(name, NULL);
    pod = wait_obj(&KUBE_RES_PODS, name, NULL);
    wait_cond(name, SB_COND_READY, "False", SB_R_DEPS_NOT_READY);
    assert_int_equal(it_drop_requests("DELETE", &KUBE_RES_PODS, "/pods/s-delref", 100000), 0);
    patch_spec(name, json_pack("{s:s}", "operatingMode", "Suspended"));
    wait_cond(name, SB_COND_SUSPENDED, "False", SB_R_POD_DELETE_FAILED);
    wait_cond(name, SB_COND_READY, "False", SB_R_RECONCILER_ERROR);
    still = get(&KUBE_RES_PODS, name);
    assert_non_null(still);
    assert_string_equal(kube_obj_uid(still), kube_obj_uid(pod));
    assert_false(kube_obj_deleting(still));
    assert_true(it_answers_lost() > 0); /* the rules go: the retry deletes it */
    assert_int_equal(it_wait_gone(c, &KUBE_RES_PODS, ns, name, WAIT), 0);
    wait_cond(name, SB_COND_SUSPENDED, "True", SB_R_POD_TERMINATED);
    wait_cond(name, SB_COND_READY, "False", SB_R_SUSPENDED);
    json_decref(still);
    json_decref(pod);
}

static bool status_has_service(void *ctx)
{
    json_t *sb = get(&API_RES_SANDBOXES, ctx);
    bool ok = sb && kube_obj_path_str(sb, "status.serviceFQDN");
    json_decref(sb);
    return ok;
}

/* While two Pods conflict (Ready MultiplePods), the Service and the status fields that
 * name it stay as they were. */
static void test_multiple_pods_keep_service(void **state)
{
    static const char name[] = "s-multi";
    struct kube_err e;
    json_t *sb, *extra, *svc, *svc2;
    char fqdn[256];
    (void)state;
    create_sandbox(name, json_pack("{s:b}", "service", 1));
    json_decref(wait_obj(&KUBE_RES_PODS, name, NULL));
    svc = wait_obj(&KUBE_RES_SERVICES, name, NULL);
    assert_int_equal(it_wait(status_has_service, (void *)name, WAIT), 0);
    sb = get(&API_RES_SANDBOXES, name);
    (void)snprintf(fqdn, sizeof(fqdn), "%s", kube_obj_path_str(sb, "status.serviceFQDN"));
    extra =
        json_pack("{s:s, s:s, s:{s:s, s:[o]}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1", "kind",
                  "Pod", "metadata", "name", "s-multi-extra", "ownerReferences", sb_owner_ref(sb),
                  "spec", "containers", "name", "x", "image", "registry.local/other:1");
    IT_OK(kube_create(c, &KUBE_RES_PODS, ns, extra, NULL, &e), &e);
    json_decref(extra);
    json_decref(sb);
    wait_cond(name, SB_COND_READY, "False", SB_R_MULTIPLE_PODS);
    sb = get(&API_RES_SANDBOXES, name);
    assert_string_equal(kube_obj_path_str(sb, "status.service") ?: "", name);
    assert_string_equal(kube_obj_path_str(sb, "status.serviceFQDN") ?: "", fqdn);
    svc2 = get(&KUBE_RES_SERVICES, name);
    assert_non_null(svc2);
    assert_string_equal(kube_obj_resource_version(svc2), kube_obj_resource_version(svc));
    json_decref(sb);
    json_decref(svc);
    json_decref(svc2);
    IT_OK(kube_delete(c, &KUBE_RES_PODS, ns, "s-multi-extra", &e), &e);
    wait_cond(name, SB_COND_READY, "False", SB_R_DEPS_NOT_READY);
}

static size_t count_pods(const char *name)
{
    char sel[128], hash[SB_HASH_LEN + 1];
    struct kube_req r;
    json_t *list = NULL;
    size_t n = 0;
    sb_name_hash(name, hash);
    (void)snprintf(sel, sizeof(sel), SB_LABEL_NAME_HASH "=%s", hash);
    kube_req_init(&r, "GET", &KUBE_RES_PODS);
    r.ns = ns;
    r.label_selector = sel;
    if (kube_list_all(c, &KUBE_RES_PODS, ns, &r, &list, NULL) >= 0)
        n = json_array_size(json_object_get(list, "items"));
    json_decref(list);
    return n;
}

static void test_restart_converges(void **state)
{
    struct kube_err e;
    json_t *pod, *lease;
    (void)state;
    stop_manager();
    /* The lease was released on stop: a successor does not wait for it to expire. */
    lease = get(&KUBE_RES_LEASES, "it-controller");
    assert_non_null(lease);
    assert_string_equal(kube_obj_path_str(lease, "spec.holderIdentity") ?: "", "");
    json_decref(lease);
    /* Changes while no controller runs. */
    create_sandbox("s-restart", json_pack("{s:b}", "service", 1));
    IT_OK(kube_delete(c, &KUBE_RES_PODS, ns, "s1", &e), &e);
    start_manager();
    pod = wait_obj(&KUBE_RES_PODS, "s-restart", NULL);
    json_decref(pod);
    json_decref(wait_obj(&KUBE_RES_PODS, "s1", NULL));
    json_decref(wait_obj(&KUBE_RES_SERVICES, "s-restart", NULL));
    wait_cond("s-restart", SB_COND_READY, "False", SB_R_DEPS_NOT_READY);
    kubelet_ready("s1", "10.1.2.6");
    wait_cond("s1", SB_COND_READY, "True", SB_R_DEPS_READY);
    assert_int_equal(count_pods("s1"), 1);
    assert_int_equal(count_pods("s-restart"), 1);
    assert_true(ctrl_manager_leading(mgr));
}

static void test_metrics(void **state)
{
    (void)state;
    assert_true(ctrl_manager_reconciles(mgr) > 0);
    assert_true(ctrl_manager_metrics_port(mgr) > 0);
    assert_true(ctrl_manager_health_port(mgr) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_children),
        cmocka_unit_test(test_ready),
        cmocka_unit_test(test_pod_lost),
        cmocka_unit_test(test_suspend_resume),
        cmocka_unit_test(test_service_off_on),
        cmocka_unit_test(test_shutdown_delete),
        cmocka_unit_test(test_shutdown_retain),
        cmocka_unit_test_teardown(test_expiry_spares_successor, before_cancel),
        cmocka_unit_test_teardown(test_suspend_spares_successor, before_cancel),
        cmocka_unit_test_teardown(test_service_off_spares_successor, before_cancel),
        cmocka_unit_test(test_unowned_pod_untouched),
        cmocka_unit_test_teardown(test_named_pod_adoption_retried, before_cancel),
        cmocka_unit_test(test_refused_pvc_adopted_once_labelled),
        cmocka_unit_test(test_quick_resume_not_lost),
        cmocka_unit_test_teardown(test_resume_create_failed_not_lost, rules_drop),
        cmocka_unit_test_teardown(test_suspend_delete_refused, rules_drop),
        cmocka_unit_test(test_multiple_pods_keep_service),
        cmocka_unit_test(test_restart_converges),
        cmocka_unit_test(test_metrics),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
