/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: whole Sandbox reconcile passes (sb_reconcile) on caches the test fills, the
 * API server played by a scripted HTTP/1.1 server on 127.0.0.1 that records the status
 * writes. The caches lag as an informer's can: a suspend whose Pod the cache has yet to
 * show, a resume before the suspended Pod has gone, a refused Pod DELETE, two Pods. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "controller/sandbox_desired.h"
#include "controller/sandbox_memo.h"
#include "controller/sandbox_names.h"
#include "controller/sandbox_reconcile.h"
#include "controller/sandbox_status.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "kube/store.h"
#include "support/script_srv.h"

#define NS     "ns"
#define NAME   "sb"
#define SB_UID "11111111-0000-0000-0000-000000000001"
#define KEY    NS "/" NAME

/* ---- the scripted API server (tests/support/script_srv.h) --------------------------- */

struct srv {
    long delete_status; /* answer to a Pod DELETE: 200, or that error */
    int deletes, creates, others;
    int next_pod;     /* numbers the created Pods' UIDs */
    json_t *writes;   /* the status writes' bodies, in order */
    json_t *existing; /* a Pod the API server has (a POST of one is refused), or NULL */
    json_t *named;    /* the Pod OTHER_POD the API server has, or NULL (404) */
    int named_gets, adopts;
    json_t *sb; /* the Sandbox an annotation PATCH applies to (set by the test), or NULL */
    int sb_patches;
};

#define OTHER_POD "named-pod" /* a Pod of another name that an annotation names */

static struct srv S;          /* the handler's, under the server's lock */
static struct script_env ENV; /* the scripted API server and its client */

/* A Pod POST: the Pod as created (a UID, a resourceVersion, a creation time). */
static char *created_pod(json_t *pod)
{
    char uid[64], now[64];
    json_t *meta = json_object_get(pod, "metadata");
    (void)snprintf(uid, sizeof(uid), "22222222-0000-0000-0000-%012d", ++S.next_pod);
    clock_format_rfc3339_sec(clock_wall_now(), now, sizeof(now));
    json_object_set_new(meta, "uid", json_string(uid));
    json_object_set_new(meta, "resourceVersion", json_string("500"));
    json_object_set_new(meta, "creationTimestamp", json_string(now));
    S.creates++;
    return json_dumps(pod, JSON_COMPACT);
}

/* Answers one request (script_handler; called with the server's lock held). */
static int answer(int fd, const struct script_req *rq, void *ctx)
{
    const char *method = rq->method, *target = rq->target;
    json_t *obj = rq->body[0] ? json_loads(rq->body, 0, NULL) : NULL;
    char *text = NULL;
    long status = 200;
    (void)ctx;
    if (strcmp(method, "PUT") == 0 && strstr(target, "/sandboxes/" NAME "/status")) {
        json_array_append(S.writes, obj);
        text = json_dumps(obj, JSON_COMPACT);
    } else if (strcmp(method, "DELETE") == 0 && strstr(target, "/pods/")) {
        S.deletes++;
        status = S.delete_status;
        text = status == 200 ? xstrdup("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":"
                                       "\"Success\"}")
                             : script_failure(status, NULL);
    } else if (strcmp(method, "POST") == 0 && strstr(target, "/pods") && S.existing) {
        status = 409;
        text = script_failure(409, "AlreadyExists");
    } else if (strcmp(method, "POST") == 0 && strstr(target, "/pods") && obj) {
        status = 201;
        text = created_pod(obj);
    } else if (strcmp(method, "GET") == 0 && strstr(target, "/pods/" OTHER_POD)) {
        S.named_gets++;
        status = S.named ? 200 : 404;
        text = S.named ? json_dumps(S.named, JSON_COMPACT) : script_failure(404, "NotFound");
    } else if (strcmp(method, "PATCH") == 0 && strstr(target, "/pods/" OTHER_POD) && S.named) {
        /* the adoption: its ownerReferences and labels, guarded by the version */
        const json_t *meta = json_object_get(obj, "metadata");
        json_t *now = json_object_get(S.named, "metadata");
        /* counted only when guarded by the version the server has */
        if (strcmp(json_string_value(json_object_get(meta, "resourceVersion")) ?: "",
                   json_string_value(json_object_get(now, "resourceVersion"))) == 0)
            S.adopts++;
        json_object_set(now, "ownerReferences", json_object_get(meta, "ownerReferences"));
        json_object_set_new(now, "resourceVersion", json_string("401"));
        text = json_dumps(S.named, JSON_COMPACT);
    } else if (strcmp(method, "PATCH") == 0 && strstr(target, "/sandboxes/" NAME) && S.sb) {
        /* the pod-name annotation's patch: its annotations applied */
        json_t *ann = json_object_get(json_object_get(obj, "metadata"), "annotations");
        json_t *meta = json_object_get(S.sb, "metadata");
        S.sb_patches++;
        json_object_update(json_object_get(meta, "annotations"), ann);
        text = json_dumps(S.sb, JSON_COMPACT);
    } else if (strcmp(method, "GET") == 0 && strstr(target, "/pods/" NAME) && S.existing) {
        text = json_dumps(S.existing, JSON_COMPACT);
    } else {
        fprintf(stderr, "unexpected request: %s %s\n", method, target);
        S.others++;
        status = 500;
        text = script_failure(500, NULL);
    }
    script_respond(fd, status, NULL, text);
    xfree(text);
    json_decref(obj);
    return 0;
}

/* ---- the reconciler on test caches -------------------------------------------------- */

struct env {
    struct kube_store *sandboxes, *pods, *services, *pvcs;
    struct sb_memo *memo;
    struct sb_reconciler r;
    int rv; /* the last resourceVersion given to the Sandbox */
};

static struct env E;

static void srv_start(void)
{
    memset(&S, 0, sizeof(S));
    S.delete_status = 200;
    S.writes = json_array();
    script_env_start(&ENV, answer, NULL, true, NS, NULL);
}

static int setup(void **state)
{
    (void)state;
    log_set_level(LOG_ERROR);
    memset(&E, 0, sizeof(E));
    srv_start();
    E.sandboxes = kube_store_new();
    E.pods = kube_store_new();
    E.services = kube_store_new();
    E.pvcs = kube_store_new();
    assert_int_equal(kube_store_add_index(E.pods, SB_INDEX_OWNER, kube_index_controller_uid, NULL),
                     0);
    E.memo = sb_memo_new();
    E.r = (struct sb_reconciler){.client = ENV.client,
                                 .sandboxes = E.sandboxes,
                                 .pods = E.pods,
                                 .services = E.services,
                                 .pvcs = E.pvcs,
                                 .memo = E.memo};
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    script_env_stop(&ENV);
    json_decref(S.writes);
    json_decref(S.existing);
    json_decref(S.named);
    json_decref(S.sb);
    kube_store_free(E.sandboxes);
    kube_store_free(E.pods);
    kube_store_free(E.services);
    kube_store_free(E.pvcs);
    sb_memo_free(E.memo);
    return 0;
}

/* The cached Sandbox (new reference). */
static json_t *cached_sb(void)
{
    json_t *sb = kube_store_get(E.sandboxes, KEY);
    assert_non_null(sb);
    return sb;
}

/* Caches sb (taken) as a newer version. */
static void cache_sb(json_t *sb)
{
    char rv[32];
    (void)snprintf(rv, sizeof(rv), "%d", ++E.rv);
    json_object_set_new(json_object_get(sb, "metadata"), "resourceVersion", json_string(rv));
    assert_int_equal(kube_store_put(E.sandboxes, sb, NULL), 0);
}

static void new_sandbox(bool service)
{
    json_t *sb =
        json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:i}, s:{s:s, s:{s:{s:[{s:s, s:s}]}}}}",
                  "apiVersion", "agents.x-k8s.io/v1beta1", "kind", "Sandbox", "metadata", "name",
                  NAME, "namespace", NS, "uid", SB_UID, "generation", 1, "spec", "operatingMode",
                  "Running", "podTemplate", "spec", "containers", "name", "c", "image", "i");
    if (service)
        json_object_set_new(json_object_get(sb, "spec"), "service", json_true());
    E.rv = 10;
    cache_sb(sb);
}

/* A user's spec change: operatingMode becomes mode (generation + 1). */
static void set_mode(const char *mode)
{
    json_t *old = cached_sb(), *sb = json_deep_copy(old);
    json_t *meta = json_object_get(sb, "metadata");
    json_decref(old);
    json_object_set_new(json_object_get(sb, "spec"), "operatingMode", json_string(mode));
    json_object_set_new(meta, "generation",
                        json_integer(json_integer_value(json_object_get(meta, "generation")) + 1));
    cache_sb(sb);
}

/* A counter of the server's (written by its thread under its lock). */
static int count(const int *c)
{
    script_srv_lock(ENV.srv);
    int n = *c;
    script_srv_unlock(ENV.srv);
    return n;
}

/* Sets the status the server answers DELETEs with. */
static void set_delete_status(long status)
{
    script_srv_lock(ENV.srv);
    S.delete_status = status;
    script_srv_unlock(ENV.srv);
}

static size_t nwrites(void)
{
    script_srv_lock(ENV.srv);
    size_t n = json_array_size(S.writes);
    script_srv_unlock(ENV.srv);
    return n;
}

/* The status of write i (a new reference). */
static json_t *written(size_t i)
{
    script_srv_lock(ENV.srv);
    json_t *st = json_incref(json_object_get(json_array_get(S.writes, i), "status"));
    script_srv_unlock(ENV.srv);
    assert_non_null(st);
    return st;
}

/* The Sandbox cache sees the last status write (if it saw none yet). */
static void cache_written(void)
{
    json_t *old = cached_sb(), *sb;
    size_t n = nwrites();
    if (n == 0) {
        json_decref(old);
        return;
    }
    sb = json_deep_copy(old);
    json_decref(old);
    json_object_set_new(sb, "status", written(n - 1));
    cache_sb(sb);
}

/* One pass, then the Sandbox cache catches up with its status write. Returns its rc. */
static int pass(void)
{
    struct sb_result res;
    int rc = sb_reconcile(&E.r, KEY, &res);
    cache_written();
    return rc;
}

static const char *cond_field(const json_t *st, const char *type, const char *field)
{
    return json_string_value(json_object_get(sb_cond_get(st, type), field));
}

/* Suspended "status/reason" of the cached Sandbox into out. */
static void suspended_now(char *out, size_t size)
{
    json_t *sb = cached_sb();
    const json_t *st = json_object_get(sb, "status");
    (void)snprintf(out, size, "%s/%s", cond_field(st, SB_COND_SUSPENDED, "status") ?: "-",
                   cond_field(st, SB_COND_SUSPENDED, "reason") ?: "-");
    json_decref(sb);
}

static void assert_suspended(const char *want)
{
    char have[128];
    suspended_now(have, sizeof(have));
    assert_string_equal(have, want);
}

/* Our Pod as the cache shows it (new): the desired Pod, created, Running and Ready. */
static json_t *owned_pod(const char *name, int n)
{
    json_t *sb = cached_sb(), *pod = sb_desired_pod(sb);
    json_t *meta = json_object_get(pod, "metadata");
    char uid[64], now[64];
    json_decref(sb);
    (void)snprintf(uid, sizeof(uid), "33333333-0000-0000-0000-%012d", n);
    clock_format_rfc3339_sec(clock_wall_now() - 60 * USEC_PER_SEC, now, sizeof(now));
    json_object_set_new(meta, "name", json_string(name));
    json_object_set_new(meta, "uid", json_string(uid));
    json_object_set_new(meta, "resourceVersion", json_string("300"));
    json_object_set_new(meta, "creationTimestamp", json_string(now));
    json_object_set_new(pod, "status",
                        json_pack("{s:s, s:s, s:[{s:s}], s:[{s:s, s:s}, {s:s, s:s}]}", "phase",
                                  "Running", "podIP", "10.0.0.7", "podIPs", "ip", "10.0.0.7",
                                  "conditions", "type", "PodScheduled", "status", "True", "type",
                                  "Ready", "status", "True"));
    return pod;
}

/* The pod cache's copy of pod (borrowed) marked as being deleted, with a newer version. */
static void cache_pod_deleting(const json_t *pod)
{
    json_t *d = json_deep_copy(pod);
    json_t *meta = json_object_get(d, "metadata");
    json_object_set_new(meta, "deletionTimestamp", json_string("2026-01-01T00:00:00Z"));
    json_object_set_new(meta, "resourceVersion", json_string("301"));
    assert_int_equal(kube_store_put(E.pods, d, NULL), 0);
}

/* The pod cache sees pod (borrowed) deleted, as the manager's informer handler does. */
static void cache_pod_gone(const json_t *pod)
{
    char key[128];
    (void)snprintf(key, sizeof(key), NS "/%s", kube_obj_name(pod));
    (void)kube_store_remove(E.pods, key, NULL);
    sb_memo_created_gone(E.memo, pod);
}

/* ---- tests -------------------------------------------------------------------------- */

/* Appends the cached Sandbox's Suspended "status/reason" and a space to hist. */
static void remember(char *hist, size_t size)
{
    size_t len = strlen(hist);
    suspended_now(hist + len, size - len);
    len = strlen(hist);
    if (len + 1 < size) {
        hist[len] = ' ';
        hist[len + 1] = '\0';
    }
}

/* A suspend that reaches the Pod a pass created before the Pod cache shows it: the
 * suspend is not reported done (Suspended=True) while that Pod may still be terminating,
 * nor undone when the cache shows it late: True once, when its deletion is seen. */
static void test_suspend_before_cache_shows_pod(void **state)
{
    char hist[512] = "", *t;
    json_t *pod;
    (void)state;
    new_sandbox(false);
    assert_int_equal(pass(), 0);
    assert_int_equal(count(&S.creates), 1);
    set_mode("Suspended");
    assert_int_equal(pass(), 0);
    assert_int_equal(count(&S.deletes), 1);
    remember(hist, sizeof(hist));
    /* the Pod cache still has not shown the Pod: it may be terminating, not gone */
    assert_int_equal(pass(), 0);
    remember(hist, sizeof(hist));
    /* now it shows it (its ADDED event, late), then its deletion */
    pod = owned_pod(NAME, 0);
    json_object_set_new(json_object_get(pod, "metadata"), "uid",
                        json_string("22222222-0000-0000-0000-000000000001"));
    assert_int_equal(kube_store_put(E.pods, json_incref(pod), NULL), 0);
    assert_int_equal(pass(), 0);
    remember(hist, sizeof(hist));
    cache_pod_gone(pod);
    assert_int_equal(pass(), 0);
    remember(hist, sizeof(hist));
    /* never True, then False again */
    t = strstr(hist, "True/");
    assert_non_null(t);
    if (strstr(t, "False/"))
        fail_msg("Suspended flapped: %s", hist);
    /* and True only once the Pod's deletion was seen */
    assert_string_equal(hist, "False/" SB_R_POD_TERMINATING " False/" SB_R_POD_TERMINATING
                              " False/" SB_R_POD_TERMINATING " True/" SB_R_POD_TERMINATED " ");
    assert_int_equal(count(&S.others), 0);
    json_decref(pod);
}

/* Suspended and resumed at once, the cache never showing the Pod: the resume creates the
 * Pod again straight away (a deleted Pod's record counts while suspended only). */
static void test_resume_creates_at_once(void **state)
{
    (void)state;
    new_sandbox(false);
    assert_int_equal(pass(), 0);
    set_mode("Suspended");
    assert_int_equal(pass(), 0);
    assert_int_equal(count(&S.deletes), 1);
    set_mode("Running");
    assert_int_equal(pass(), 0);
    assert_int_equal(count(&S.creates), 2);
    assert_suspended("False/" SB_R_NOT_SUSPENDED);
    assert_int_equal(count(&S.others), 0);
}

/* Suspended and resumed at once, the cache never showing the Pod, which is still
 * terminating: the create is refused (AlreadyExists), the Pod read is the one going, and
 * when it has gone the new Pod is no replacement of a lost one. */
static void test_resume_finds_pod_terminating(void **state)
{
    json_t *going, *st;
    (void)state;
    new_sandbox(false);
    assert_int_equal(pass(), 0);
    set_mode("Suspended");
    assert_int_equal(pass(), 0);
    assert_int_equal(count(&S.deletes), 1);
    /* the API server has it, terminating */
    going = owned_pod(NAME, 0);
    json_object_set_new(json_object_get(going, "metadata"), "uid",
                        json_string("22222222-0000-0000-0000-000000000001"));
    json_object_set_new(json_object_get(going, "metadata"), "deletionTimestamp",
                        json_string("2026-01-01T00:00:00Z"));
    script_srv_lock(ENV.srv);
    S.existing = json_incref(going);
    script_srv_unlock(ENV.srv);
    set_mode("Running");
    assert_int_equal(pass(), 0);
    assert_int_equal(count(&S.creates), 1);
    /* it goes (the cache never showed it: its record goes with its deletion) */
    script_srv_lock(ENV.srv);
    json_decref(S.existing);
    S.existing = NULL;
    script_srv_unlock(ENV.srv);
    sb_memo_created_gone(E.memo, going);
    assert_int_equal(pass(), 0);
    assert_int_equal(count(&S.creates), 2);
    st = written(nwrites() - 1);
    if (strstr(cond_field(st, SB_COND_READY, "message"), "lost"))
        fail_msg("a false lost Pod: %s", cond_field(st, SB_COND_READY, "message"));
    assert_string_equal(cond_field(st, SB_COND_SUSPENDED, "reason"), SB_R_NOT_SUSPENDED);
    json_decref(st);
    assert_int_equal(count(&S.others), 0);
    json_decref(going);
}

/* Resumes before the suspended Pod has gone (quick_cache: the Pod cache shows its
 * deletion before the resume pass, else not yet): when it goes, the new Pod is no
 * replacement of a lost one. */
static void quick_resume(bool deletion_seen)
{
    json_t *pod, *st;
    new_sandbox(false);
    pod = owned_pod(NAME, 1);
    assert_int_equal(kube_store_put(E.pods, json_incref(pod), NULL), 0);
    assert_int_equal(pass(), 0);
    st = written(nwrites() - 1);
    assert_string_equal(cond_field(st, SB_COND_READY, "status"), "True");
    json_decref(st);
    set_mode("Suspended");
    assert_int_equal(pass(), 0);
    assert_int_equal(count(&S.deletes), 1);
    assert_suspended("False/" SB_R_POD_TERMINATING);
    if (deletion_seen)
        cache_pod_deleting(pod);
    set_mode("Running");
    assert_int_equal(pass(), 0);
    assert_int_equal(count(&S.creates), 0);
    cache_pod_gone(pod);
    assert_int_equal(pass(), 0);
    assert_int_equal(count(&S.creates), 1);
    st = written(nwrites() - 1);
    if (strstr(cond_field(st, SB_COND_READY, "message"), "lost"))
        fail_msg("a false lost Pod: %s", cond_field(st, SB_COND_READY, "message"));
    assert_string_equal(cond_field(st, SB_COND_SUSPENDED, "reason"), SB_R_NOT_SUSPENDED);
    json_decref(st);
    assert_int_equal(count(&S.others), 0);
    json_decref(pod);
}

static void test_quick_resume_not_lost(void **state)
{
    (void)state;
    quick_resume(true);
}

static void test_quick_resume_before_cache_sees_delete(void **state)
{
    (void)state;
    quick_resume(false);
}

/* A refused DELETE of the Pod is no "Pod is terminating": Suspended says it failed, the
 * pass fails (retried with back-off), and the retry that succeeds says terminating. */
static void test_suspend_delete_refused(void **state)
{
    json_t *pod, *st;
    (void)state;
    new_sandbox(false);
    pod = owned_pod(NAME, 2);
    assert_int_equal(kube_store_put(E.pods, json_incref(pod), NULL), 0);
    assert_int_equal(pass(), 0);
    set_mode("Suspended");
    set_delete_status(403);
    assert_true(pass() < 0);
    assert_suspended("False/" SB_R_POD_DELETE_FAILED);
    st = written(nwrites() - 1);
    assert_string_equal(cond_field(st, SB_COND_READY, "reason"), SB_R_RECONCILER_ERROR);
    assert_non_null(strstr(cond_field(st, SB_COND_READY, "message"), "pod delete failed"));
    json_decref(st);
    set_delete_status(500);
    assert_true(pass() < 0);
    assert_suspended("False/" SB_R_POD_DELETE_FAILED);
    set_delete_status(200);
    assert_int_equal(pass(), 0);
    assert_int_equal(count(&S.deletes), 3);
    assert_suspended("False/" SB_R_POD_TERMINATING);
    cache_pod_gone(pod);
    assert_int_equal(pass(), 0);
    assert_suspended("True/" SB_R_POD_TERMINATED);
    assert_int_equal(count(&S.others), 0);
    json_decref(pod);
}

/* While two Pods conflict, the Service's status fields stay as they were. */
static void test_multiple_pods_keep_service(void **state)
{
    json_t *sb, *svc, *pod, *st;
    (void)state;
    new_sandbox(true);
    sb = cached_sb();
    svc = sb_desired_service(sb);
    json_decref(sb);
    json_object_set_new(json_object_get(svc, "metadata"), "uid",
                        json_string("44444444-0000-0000-0000-000000000001"));
    json_object_set_new(json_object_get(svc, "metadata"), "resourceVersion", json_string("7"));
    assert_int_equal(kube_store_put(E.services, svc, NULL), 0);
    pod = owned_pod(NAME, 3);
    assert_int_equal(kube_store_put(E.pods, pod, NULL), 0);
    assert_int_equal(pass(), 0);
    st = written(nwrites() - 1);
    assert_string_equal(json_string_value(json_object_get(st, "service")) ?: "-", NAME);
    assert_string_equal(json_string_value(json_object_get(st, "serviceFQDN")) ?: "-",
                        NAME "." NS ".svc.cluster.local");
    json_decref(st);
    assert_int_equal(kube_store_put(E.pods, owned_pod(NAME "-other", 4), NULL), 0);
    assert_int_equal(pass(), 0);
    st = written(nwrites() - 1);
    assert_string_equal(cond_field(st, SB_COND_READY, "reason"), SB_R_MULTIPLE_PODS);
    assert_string_equal(json_string_value(json_object_get(st, "service")) ?: "-", NAME);
    assert_string_equal(json_string_value(json_object_get(st, "serviceFQDN")) ?: "-",
                        NAME "." NS ".svc.cluster.local");
    json_decref(st);
    assert_int_equal(count(&S.others), 0);
}

/* A Sandbox whose annotation names a Pod (unowned, labelled adoptable) that the Pod cache
 * has yet to show (made just before the Sandbox): the pass reads it from the API server and
 * adopts it rather than create a Pod of the Sandbox's name beside it. Once the cache shows
 * the Pod (ours), no read is made; named Pod gone (404), the pass creates one. */
static void test_named_pod_not_in_cache_adopted(void **state)
{
    json_t *sb, *pod;
    (void)state;
    new_sandbox(false);
    pod = cached_sb();
    sb = json_deep_copy(pod);
    json_decref(pod);
    json_object_set_new(json_object_get(sb, "metadata"), "annotations",
                        json_pack("{s:s}", SB_ANN_POD_NAME, OTHER_POD));
    cache_sb(sb);
    pod = owned_pod(OTHER_POD, 5);
    json_object_del(json_object_get(pod, "metadata"), "ownerReferences");
    json_object_set_new(json_object_get(json_object_get(pod, "metadata"), "labels"),
                        SB_LABEL_ADOPTABLE, json_string("true"));
    script_srv_lock(ENV.srv);
    S.named = pod;
    script_srv_unlock(ENV.srv);
    assert_int_equal(pass(), 0);
    assert_int_equal(count(&S.named_gets), 1);
    assert_int_equal(count(&S.adopts), 1);
    assert_int_equal(count(&S.creates), 0);
    /* the cache shows it, ours: no read, no create */
    script_srv_lock(ENV.srv);
    assert_int_equal(kube_store_put(E.pods, json_deep_copy(S.named), NULL), 0);
    script_srv_unlock(ENV.srv);
    assert_int_equal(pass(), 0);
    assert_int_equal(count(&S.named_gets), 1);
    assert_int_equal(count(&S.creates), 0);
    assert_int_equal(count(&S.others), 0);
}

/* The annotation names a Pod that is nowhere (404): the pass creates the Sandbox's own. */
static void test_named_pod_absent_creates(void **state)
{
    json_t *sb, *copy;
    char ann[64];
    (void)state;
    new_sandbox(false);
    sb = cached_sb();
    copy = json_deep_copy(sb);
    json_decref(sb);
    json_object_set_new(json_object_get(copy, "metadata"), "annotations",
                        json_pack("{s:s}", SB_ANN_POD_NAME, OTHER_POD));
    cache_sb(copy);
    script_srv_lock(ENV.srv);
    S.sb = json_deep_copy(copy);
    script_srv_unlock(ENV.srv);
    assert_int_equal(pass(), 0);
    assert_int_equal(count(&S.named_gets), 1);
    assert_int_equal(count(&S.adopts), 0);
    assert_int_equal(count(&S.creates), 1);
    /* the annotation now names the Pod made */
    assert_int_equal(count(&S.sb_patches), 1);
    script_srv_lock(ENV.srv);
    (void)snprintf(ann, sizeof(ann), "%s", kube_obj_annotation(S.sb, SB_ANN_POD_NAME) ?: "-");
    script_srv_unlock(ENV.srv);
    assert_string_equal(ann, NAME);
    assert_int_equal(count(&S.others), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_suspend_before_cache_shows_pod, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_creates_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_finds_pod_terminating, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quick_resume_not_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quick_resume_before_cache_sees_delete, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_suspend_delete_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multiple_pods_keep_service, setup, teardown),
        cmocka_unit_test_setup_teardown(test_named_pod_not_in_cache_adopted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_named_pod_absent_creates, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
