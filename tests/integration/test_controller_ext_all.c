/* SPDX-License-Identifier: Apache-2.0 */
/* Integration tests of the SandboxTemplate, SandboxWarmPool and SandboxClaim
 * controllers against the local kube-apiserver: the manager runs in-process watching
 * one namespace, and a small "kubelet" (an informer plus workers) marks new Pods
 * Running and Ready unless their template opts out. Tests share the namespace and run
 * in order. The burst test prints warm-claim latency (client-side watch timestamps)
 * and the API writes per warm claim (from the API server's request counters). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/res.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/map.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "controller/claim_meta.h"
#include "controller/ext_names.h"
#include "controller/manager.h"
#include "controller/sandbox_names.h"
#include "controller/template_build.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/obj.h"
#include "support/apiserver.h"
#include "support/ctrl_fixture.h"
#include "support/http_client.h"
#include "support/kube_fixture.h"
#include "support/metrics_fixture.h"

#define WAIT     (60 * USEC_PER_SEC)
#define BURST    100
#define KUBELETS 8

static struct kube_client *c;
static struct ctrl_manager *mgr;
static char ns[96];

/* ---- the simulated kubelet ---------------------------------------------------------- */

static struct it_kubelet *kubelet_sim;

/* Pods of templates labelled sandbox.users.io/kubelet=off never run. */
static bool kubelet_skip(void *ctx, const json_t *pod)
{
    const char *off = kube_obj_label(pod, "sandbox.users.io/kubelet");
    (void)ctx;
    return off && strcmp(off, "off") == 0;
}

static void kubelet_start(void)
{
    struct it_kubelet_opts o = {
        .client = c, .ns = ns, .workers = KUBELETS, .skip = kubelet_skip, .ip_prefix = "10.2"};
    assert_int_equal(it_kubelet_start(&o, &kubelet_sim), 0);
}

static void kubelet_stop(void)
{
    it_kubelet_free(kubelet_sim);
    kubelet_sim = NULL;
}

/* ---- manager ------------------------------------------------------------------------ */

static struct kube_client *mgr_client;

static void start_manager(void)
{
    struct ctrl_opts o = {.client = mgr_client,
                          .workers = 16,
                          .ns = ns,
                          .leader_elect = true,
                          .lease_ns = ns,
                          .lease_name = "it-ext",
                          .metrics_addr = "127.0.0.1:0",
                          .health_addr = "0",
                          .events = true,
                          .extensions = true,
                          /* few adoptions at once: the bursts below queue at the gate */
                          .ext = {.claim_workers = 50,
                                  .adopt_inflight = 4,
                                  .claim_timeout = 120 * USEC_PER_SEC,
                                  .ready_grace = 600 * USEC_PER_SEC}};
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
    struct it_sandbox_ns_opts so = {
        .prefix = "ext", .extensions = true, .default_sa = true, .timeout = WAIT};
    struct kube_client_opts co = {.qps = 0}, mo = {.qps = 0, .fault = it_lose_answer};
    struct kube_err e = {0};
    (void)state;
    log_set_level(LOG_WARN);
    if (it_client_new(&co, &c, &e) < 0 || it_client_new(&mo, &mgr_client, &e) < 0)
        return -1;
    if (it_sandbox_ns_setup(c, &so, ns, sizeof(ns), &e) < 0) {
        fprintf(stderr, "setup failed: %s\n", e.message);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    stop_manager();
    kubelet_stop();
    if (c && ns[0])
        (void)it_ns_delete(c, ns, 120 * USEC_PER_SEC);
    kube_client_free(c);
    kube_client_free(mgr_client);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------ */

static json_t *get(const struct kube_res *res, const char *name)
{
    return it_obj_get(c, res, ns, name);
}

static void create(const struct kube_res *res, json_t *obj)
{
    struct kube_err e;
    IT_OK(kube_create(c, res, ns, obj, NULL, &e), &e);
    json_decref(obj);
}

/* Merge-patches name (or its subresource sub) with p (taken). */
static void patch(const struct kube_res *res, const char *name, const char *sub, json_t *p)
{
    struct kube_err e;
    IT_OK(it_merge_patch(c, res, ns, name, sub, p, &e), &e);
    json_decref(p);
}

/* A template whose Pods the simulated kubelet runs (kubelet "on") or ignores. */
static void create_template(const char *name, const char *kubelet, const char *env_policy)
{
    json_t *t = json_pack(
        "{s:s, s:s, s:{s:s}, s:{s:{s:{s:{s:s}}, s:{s:[{s:s, s:s, s:[{s:s, s:s}], s:[{s:i}]}]}}, "
        "s:s}}",
        "apiVersion", EXT_API_VERSION, "kind", EXT_KIND_TEMPLATE, "metadata", "name", name, "spec",
        "podTemplate", "metadata", "labels", "sandbox.users.io/kubelet", kubelet, "spec",
        "containers", "name", "runtime", "image", "registry.local/runtime:1", "env", "name", "BASE",
        "value", "1", "ports", "containerPort", 8888, "envVarsInjectionPolicy", env_policy);
    create(&API_RES_SANDBOXTEMPLATES, t);
}

static void create_pool(const char *name, const char *tpl, int replicas)
{
    create(&API_RES_SANDBOXWARMPOOLS, it_pool_new(name, tpl, replicas));
}

static void create_claim(const char *name, const char *pool, json_t *spec_extra)
{
    json_t *cl = it_claim_new(name, pool);
    if (spec_extra)
        json_object_update(json_object_get(cl, "spec"), spec_extra);
    json_decref(spec_extra);
    create(&API_RES_SANDBOXCLAIMS, cl);
}

/* Sandboxes of the namespace whose controller is kind/name (name NULL: any). */
static size_t count_sandboxes(const char *kind, const char *name, size_t *ret_ready)
{
    json_t *list = NULL, *sb;
    size_t n = 0, ready = 0, i;
    if (kube_list_all(c, &API_RES_SANDBOXES, ns, NULL, &list, NULL) < 0)
        return 0;
    json_array_foreach(json_object_get(list, "items"), i, sb)
    {
        const json_t *ref = kube_obj_controller_ref(sb);
        const char *k = json_string_value(json_object_get(ref, "kind"));
        const char *nm = json_string_value(json_object_get(ref, "name"));
        if (kube_obj_deleting(sb) || (kind && (!k || strcmp(k, kind) != 0)) ||
            (name && (!nm || strcmp(nm, name) != 0)))
            continue;
        n++;
        ready += kube_obj_condition_true(sb, SB_COND_READY);
    }
    json_decref(list);
    if (ret_ready)
        *ret_ready = ready;
    return n;
}

struct pool_want {
    const char *pool;
    size_t n, ready;
};

static bool pool_is(void *ctx)
{
    struct pool_want *w = ctx;
    size_t ready = 0, n = count_sandboxes(EXT_KIND_POOL, w->pool, &ready);
    json_t *p = get(&API_RES_SANDBOXWARMPOOLS, w->pool);
    bool ok = n == w->n && ready == w->ready &&
              json_integer_value(kube_obj_path(p, "status.readyReplicas")) == (json_int_t)w->ready;
    json_decref(p);
    return ok;
}

static void wait_pool(const char *pool, size_t n, size_t ready)
{
    struct pool_want w = {pool, n, ready};
    if (it_wait(pool_is, &w, WAIT) < 0) {
        size_t r = 0, have = count_sandboxes(EXT_KIND_POOL, pool, &r);
        fail_msg("pool %s: want %zu/%zu ready, have %zu/%zu", pool, ready, n, r, have);
    }
}

static json_t *wait_claim(const char *name, const char *status, const char *reason)
{
    struct it_cond want = {&API_RES_SANDBOXCLAIMS, name, SB_COND_READY, status, reason};
    if (it_cond_wait(c, ns, &want, WAIT) < 0) {
        json_t *cl = get(&API_RES_SANDBOXCLAIMS, name);
        char *s = json_dumps(json_object_get(cl, "status"), JSON_COMPACT);
        fail_msg("claim %s: no Ready=%s/%s; status %s", name, status, reason ? reason : "*",
                 s ? s : "null");
    }
    return get(&API_RES_SANDBOXCLAIMS, name);
}

static json_t *bound_sandbox(const json_t *claim)
{
    const char *n = kube_obj_path_str(claim, "status.sandbox.name");
    assert_non_null(n);
    return get(&API_RES_SANDBOXES, n);
}

/* ---- tests -------------------------------------------------------------------------- */

static bool template_labelled(void *ctx)
{
    json_t *t = get(&API_RES_SANDBOXTEMPLATES, "tpl");
    bool ok = strcmp(kube_obj_label(t, SB_LABEL_TEMPLATE_REF) ?: "", ctx) == 0;
    json_decref(t);
    return ok;
}

static void test_pool_fills(void **state)
{
    char hash[SB_HASH_LEN + 1];
    json_t *tpl, *np, *sbs = NULL, *sb;
    (void)state;
    kubelet_start();
    start_manager();
    create_template("tpl", "on", "Allowed");
    create_pool("p1", "tpl", 3);
    wait_pool("p1", 3, 3);
    /* The template labels itself and owns a secure default NetworkPolicy. */
    sb_name_hash("tpl", hash);
    assert_int_equal(it_wait(template_labelled, hash, WAIT), 0);
    tpl = get(&API_RES_SANDBOXTEMPLATES, "tpl");
    assert_string_equal(kube_obj_label(tpl, SB_LABEL_TEMPLATE_REF) ?: "", hash);
    np = get(&KUBE_RES_NETWORKPOLICIES, "tpl-network-policy");
    assert_non_null(np);
    assert_true(sb_controlled_by(np, kube_obj_uid(tpl)));
    assert_string_equal(
        json_string_value(json_object_get(kube_obj_path(np, "spec.podSelector.matchLabels"),
                                          SB_LABEL_TEMPLATE_REF))
            ?: "",
        hash);
    assert_int_equal(json_array_size(kube_obj_path(np, "spec.egress")), 2);
    /* Members carry the pool labels and secure pod defaults. */
    assert_int_equal(kube_list_all(c, &API_RES_SANDBOXES, ns, NULL, &sbs, NULL), 0);
    sb = json_array_get(json_object_get(sbs, "items"), 0);
    assert_string_equal(kube_obj_label(sb, SB_LABEL_LAUNCH_TYPE) ?: "", "warm");
    assert_true(
        json_is_false(kube_obj_path(sb, "spec.podTemplate.spec.automountServiceAccountToken")));
    json_decref(sbs);
    json_decref(np);
    json_decref(tpl);
}

static void scale(const char *pool, int n)
{
    patch(&API_RES_SANDBOXWARMPOOLS, pool, "scale", json_pack("{s:{s:i}}", "spec", "replicas", n));
}

static void test_scale(void **state)
{
    json_t *s;
    (void)state;
    scale("p1", 5);
    wait_pool("p1", 5, 5);
    s = get(&API_RES_SANDBOXWARMPOOLS, "p1");
    assert_non_null(kube_obj_path_str(s, "status.selector"));
    json_decref(s);
    scale("p1", 2);
    wait_pool("p1", 2, 2);
}

static double metric_value(const char *name);
static json_t *lifecycle_in(const char *policy, usec_t d);

/* A pool's creates whose answers are lost but which the server carried out count as
 * creates: each is read back, found, and its ADDED meets the pool's expectation (not
 * lowered as a failure, which would let a pass that misses it create another). */
static void test_create_answer_lost(void **state)
{
    char series[256], in_ns[128];
    (void)state;
    (void)snprintf(in_ns, sizeof(in_ns), "/namespaces/%s/sandboxes", ns);
    assert_int_equal(it_lose_answers("POST", &API_RES_SANDBOXES, in_ns, 2), 0);
    create_pool("p-lost", "tpl", 2);
    wait_pool("p-lost", 2, 2);
    assert_int_equal(it_answers_lost(), 2);
    (void)snprintf(series, sizeof(series),
                   "agent_sandbox_warm_pool_creates_total{namespace=\"%s\",pool=\"p-lost\"}", ns);
    assert_true(metric_value(series) == 2);
    clock_sleep(500 * USEC_PER_MSEC); /* nothing to wait for: a second pass must not add */
    assert_int_equal(count_sandboxes(EXT_KIND_POOL, "p-lost", NULL), 2);
}

/* Claim name on p-lost, with `lost` answers lost by the rules set: Ready on one member of
 * p-lost it alone controls, once the pool has refilled. */
static void claim_adopts_once(const char *name, int lost)
{
    json_t *cl, *sb;
    create_claim(name, "p-lost", NULL);
    cl = wait_claim(name, "True", NULL);
    assert_int_equal(it_answers_lost(), lost);
    sb = bound_sandbox(cl);
    assert_true(sb_controlled_by(sb, kube_obj_uid(cl)));
    assert_true(strncmp(kube_obj_name(sb), "p-lost-", 7) == 0);
    wait_pool("p-lost", 2, 2); /* refilled */
    assert_int_equal(count_sandboxes(EXT_KIND_CLAIM, name, NULL), 1);
    json_decref(sb);
    json_decref(cl);
}

/* An adoption PATCH whose answer is lost but which the server carried out: the claim
 * reads the Sandbox back and keeps it, rather than adopting a second one. */
static void test_adopt_answer_lost(void **state)
{
    (void)state;
    assert_int_equal(it_lose_answers("PATCH", &API_RES_SANDBOXES, "/sandboxes/p-lost-", 1), 0);
    claim_adopts_once("c-lost", 1);
}

/* The same, and the read that follows fails too: the claim records the binding and ends
 * its pass with an error; its next pass reads the Sandbox (no longer failing) before it
 * takes or creates anything, finds it its own and keeps it. */
static void test_adopt_answer_and_read_lost(void **state)
{
    (void)state;
    assert_int_equal(it_lose_answers("PATCH", &API_RES_SANDBOXES, "/sandboxes/p-lost-", 1), 0);
    assert_int_equal(it_lose_answers("GET", &API_RES_SANDBOXES, "/sandboxes/p-lost-", 1), 0);
    claim_adopts_once("c-lost2", 2);
}

/* An adoption PATCH the server answered with a 5xx before carrying it out (it could still
 * carry it out later): the claim reads the Sandbox unchanged and still the pool's, and
 * sends the same PATCH again, so it adopts that candidate. Before, it moved on to another
 * member, which the first PATCH, carried out late, would have made a second Sandbox of
 * the claim. */
static void adopts_dropped(const char *claim, int drops)
{
    char url[512], dropped[256] = "";
    assert_int_equal(it_drop_requests("PATCH", &API_RES_SANDBOXES, "/sandboxes/p-lost-", drops), 0);
    create_claim(claim, "p-lost", NULL);
    json_t *cl = wait_claim(claim, "True", NULL);
    assert_int_equal(it_answers_lost(), drops);
    it_last_lost_url(url, sizeof(url));
    const char *at = strstr(url, "/sandboxes/");
    assert_non_null(at);
    (void)snprintf(dropped, sizeof(dropped), "%.*s", (int)strcspn(at + 11, "?/"), at + 11);
    json_t *sb = bound_sandbox(cl);
    assert_string_equal(kube_obj_name(sb), dropped);
    assert_true(sb_controlled_by(sb, kube_obj_uid(cl)));
    wait_pool("p-lost", 2, 2); /* refilled */
    assert_int_equal(count_sandboxes(EXT_KIND_CLAIM, claim, NULL), 1);
    json_decref(sb);
    json_decref(cl);
}

static void test_adopt_unsent_resent(void **state)
{
    (void)state;
    adopts_dropped("c-lost3", 1);
}

/* The same with every send of the pass unanswered (3): the pass ends unsure with the
 * member as the claim's binding; the next pass reads it unchanged, still the pool's, and
 * adopts that member first (not another one, which the PATCH could still make a second). */
static void test_adopt_unsent_thrice(void **state)
{
    (void)state;
    adopts_dropped("c-lost4", LIMIT_EXT_ADOPT_SENDS);
}

static char landed[256]; /* the member land_adoption made the claim's */

/* it_before_request's fn: the adoption PATCH of claim ctx that the controller's first
 * pass sent, carried out late (here, by the test's client), on the Sandbox the URL names:
 * guarded by the version the controller read, it makes the Sandbox the claim's. */
/* What went wrong in land_adoption, for the test's thread ("" when nothing did): the hook
 * runs on a controller worker, where a cmocka assertion must not fail. Written before the
 * rule counts as run, read after. */
static char land_error[1100];

static void land_adoption(const char *url, void *ctx)
{
    const char *at = strstr(url, "/sandboxes/");
    struct kube_err e = {0};
    json_t *cl = NULL, *sb = NULL, *p;
    if (!at) {
        (void)snprintf(land_error, sizeof(land_error), "no Sandbox in %s", url);
        return;
    }
    (void)snprintf(landed, sizeof(landed), "%.*s", (int)strcspn(at + 11, "?/"), at + 11);
    cl = get(&API_RES_SANDBOXCLAIMS, ctx);
    sb = get(&API_RES_SANDBOXES, landed);
    if (!cl || !sb) {
        (void)snprintf(land_error, sizeof(land_error), "claim or member %s not found", landed);
    } else {
        p = json_pack("{s:{s:s, s:[o], s:{s:n, s:s}}}", "metadata", "resourceVersion",
                      kube_obj_resource_version(sb), "ownerReferences",
                      ext_owner_ref(cl, EXT_KIND_CLAIM), "labels", SB_LABEL_WARM_POOL,
                      EXT_LABEL_CLAIM_UID, kube_obj_uid(cl));
        if (it_merge_patch(c, &API_RES_SANDBOXES, ns, landed, NULL, p, &e) < 0)
            (void)snprintf(land_error, sizeof(land_error), "patch: %s", e.message);
        json_decref(p);
    }
    json_decref(sb);
    json_decref(cl);
}

/* Every send of the first pass unanswered, and the first of them carried out late: after
 * the next pass read the member unchanged, still the pool's, and just before it sends the
 * same PATCH again. That PATCH meets a conflict; the claim reads the member back, finds
 * it its own and keeps it. Before, it took the conflict for another claim's win and
 * adopted a second member. */
static void test_adopt_lands_late(void **state)
{
    (void)state;
    landed[0] = land_error[0] = '\0';
    assert_int_equal(
        it_drop_requests("PATCH", &API_RES_SANDBOXES, "/sandboxes/p-lost-", LIMIT_EXT_ADOPT_SENDS),
        0);
    assert_int_equal(it_before_request("PATCH", &API_RES_SANDBOXES, "/sandboxes/p-lost-", 0,
                                       land_adoption, "c-lost5"),
                     0);
    create_claim("c-lost5", "p-lost", NULL);
    json_t *cl = wait_claim("c-lost5", "True", NULL);
    assert_false(it_before_pending()); /* the late landing happened */
    if (land_error[0])
        fail_msg("landing the adoption: %s", land_error);
    assert_int_equal(it_answers_lost(), LIMIT_EXT_ADOPT_SENDS);
    json_t *sb = bound_sandbox(cl);
    assert_string_equal(kube_obj_name(sb), landed);
    assert_true(sb_controlled_by(sb, kube_obj_uid(cl)));
    wait_pool("p-lost", 2, 2); /* refilled */
    assert_int_equal(count_sandboxes(EXT_KIND_CLAIM, "c-lost5", NULL), 1);
    json_decref(sb);
    json_decref(cl);
}

static bool member_gone(void *ctx)
{
    json_t *sb = get(&API_RES_SANDBOXES, ctx);
    bool gone = !sb || kube_obj_deleting(sb);
    json_decref(sb);
    return gone;
}

/* A scale-down whose DELETE was carried out but whose answer was lost: the member is read
 * back, its deletion stays expected, and the pool ends at its size with that member gone
 * (not a second one deleted in its place and made again). */
static void test_delete_answer_lost(void **state)
{
    json_t *list = NULL, *sb;
    char first[256] = "";
    size_t i;
    (void)state;
    assert_int_equal(it_lose_answers("DELETE", &API_RES_SANDBOXES, "/sandboxes/p-lost-", 1), 0);
    scale("p-lost", 1);
    wait_pool("p-lost", 1, 1);
    assert_int_equal(it_answers_lost(), 1);
    assert_int_equal(kube_list_all(c, &API_RES_SANDBOXES, ns, NULL, &list, NULL), 0);
    json_array_foreach(json_object_get(list, "items"), i, sb)
    {
        const json_t *ref = kube_obj_controller_ref(sb);
        if (!kube_obj_deleting(sb) &&
            strcmp(json_string_value(json_object_get(ref, "name")) ?: "", "p-lost") == 0)
            (void)snprintf(first, sizeof(first), "%s", kube_obj_name(sb)); /* the one left */
    }
    json_decref(list);
    assert_true(first[0] != '\0');
    clock_sleep(500 * USEC_PER_MSEC); /* nothing to wait for: a later pass must not delete */
    assert_false(member_gone(first));
    assert_int_equal(count_sandboxes(EXT_KIND_POOL, "p-lost", NULL), 1);
    (void)kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, "c-lost", NULL);
    (void)kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, "c-lost2", NULL);
    (void)kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, "c-lost3", NULL);
    (void)kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, "c-lost4", NULL);
    (void)kube_delete(c, &API_RES_SANDBOXWARMPOOLS, ns, "p-lost", NULL);
    assert_int_equal(it_wait_gone(c, &API_RES_SANDBOXCLAIMS, ns, "c-lost", WAIT), 0);
    assert_int_equal(it_wait_gone(c, &API_RES_SANDBOXCLAIMS, ns, "c-lost2", WAIT), 0);
    assert_int_equal(it_wait_gone(c, &API_RES_SANDBOXCLAIMS, ns, "c-lost3", WAIT), 0);
    assert_int_equal(it_wait_gone(c, &API_RES_SANDBOXCLAIMS, ns, "c-lost4", WAIT), 0);
    assert_int_equal(it_wait_gone(c, &API_RES_SANDBOXWARMPOOLS, ns, "p-lost", WAIT), 0);
}

static const char *ready_ltt(const json_t *obj)
{
    const char *t =
        json_string_value(json_object_get(kube_obj_condition(obj, "Ready"), "lastTransitionTime"));
    return t ? t : "";
}

static void test_warm_claim(void **state)
{
    json_t *cl, *sb, *pod_before, *pod_after;
    const char *sbn, *created;
    usec_t t_created = 0, t_sb = 0, t_cl = 0;
    (void)state;
    /* A second apart (metav1.Time has whole seconds): the members became Ready before
     * the claim exists, and the claim's Ready must carry its own transition time. */
    clock_sleep(1100 * USEC_PER_MSEC);
    create_claim("c-warm", "p1", NULL);
    cl = wait_claim("c-warm", "True", NULL);
    sb = bound_sandbox(cl);
    sbn = kube_obj_name(sb);
    created = kube_obj_path_str(cl, "metadata.creationTimestamp");
    assert_non_null(created);
    print_message("warm claim created %s, Ready since %s; its Sandbox Ready since %s\n", created,
                  ready_ltt(cl), ready_ltt(sb));
    assert_int_equal(clock_parse_rfc3339(created, &t_created), 0);
    assert_int_equal(clock_parse_rfc3339(ready_ltt(sb), &t_sb), 0);
    assert_int_equal(clock_parse_rfc3339(ready_ltt(cl), &t_cl), 0);
    assert_true(t_sb < t_created);
    assert_true(t_cl >= t_created);
    assert_true(strncmp(sbn, "p1-", 3) == 0);
    assert_string_equal(kube_obj_label(sb, SB_LABEL_LAUNCH_TYPE) ?: "", "warm");
    assert_null(kube_obj_label(sb, SB_LABEL_WARM_POOL));
    assert_true(sb_controlled_by(sb, kube_obj_uid(cl)));
    assert_int_equal(json_array_size(kube_obj_path(cl, "status.sandbox.podIPs")), 1);
    pod_before = get(&KUBE_RES_PODS, sbn);
    assert_non_null(pod_before);
    wait_pool("p1", 2, 2); /* refilled */
    pod_after = get(&KUBE_RES_PODS, sbn);
    assert_non_null(pod_after);
    assert_string_equal(kube_obj_uid(pod_after), kube_obj_uid(pod_before)); /* not recreated */
    json_decref(pod_before);
    json_decref(pod_after);
    json_decref(sb);
    json_decref(cl);
}

/* The controller's /metrics has upstream's families, types, labels and buckets
 * (tests/data/observability/), with the values of a claim carrying the client and
 * webhook annotations. */
static void test_upstream_metrics(void **state)
{
    static const char *const want[] = {
        "agent_sandbox_claim_creation_total{namespace=\"",
        "launch_type=\"warm\",warmpool_name=\"p1\",pod_condition=\"ready\","
        "created_by=\"go-client\"} 1\n",
        "agent_sandbox_claim_startup_latency_ms_count{launch_type=\"warm\"",
        "agent_sandbox_client_claim_startup_latency_ms_count{launch_type=\"warm\"",
        "agent_sandbox_creation_latency_ms_count{namespace=\"",
    };
    char stamp[64], raw[128];
    struct test_http_resp resp;
    json_t *cl = it_claim_new("c-obs", "p1");
    (void)state;
    clock_format_rfc3339(clock_wall_now(), stamp, sizeof(stamp));
    json_object_set_new(json_object_get(cl, "metadata"), "labels",
                        json_pack("{s:s}", "agents.x-k8s.io/created-by", "go-client"));
    json_object_set_new(json_object_get(cl, "metadata"), "annotations",
                        json_pack("{s:s, s:s}", EXT_ANN_CLIENT_REQ, stamp,
                                  "agents.x-k8s.io/webhook-first-observed-at", stamp));
    create(&API_RES_SANDBOXCLAIMS, cl);
    json_decref(wait_claim("c-obs", "True", NULL));
    test_http_resp_init(&resp);
    (void)snprintf(raw, sizeof(raw),
                   "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_int_equal(test_http_request(ctrl_manager_metrics_port(mgr), raw, WAIT, &resp), 0);
    assert_int_equal(resp.status, 200);
    assert_int_equal(it_check_upstream_metrics(buf_str(&resp.body)), 7);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (!strstr(buf_str(&resp.body), want[i]))
            fail_msg("no %s in the controller's /metrics", want[i]);
    test_http_resp_done(&resp);
    wait_pool("p1", 2, 2); /* refilled, as the tests after this one expect */
}

static void test_env_cold(void **state)
{
    json_t *cl, *sb, *env, *e;
    size_t i;
    bool found = false;
    (void)state;
    create_claim("c-env", "p1",
                 json_pack("{s:[{s:s, s:s}]}", "env", "name", "FOO", "value", "bar"));
    cl = wait_claim("c-env", "True", NULL);
    sb = bound_sandbox(cl);
    assert_string_equal(kube_obj_name(sb), "c-env");
    assert_string_equal(kube_obj_label(sb, SB_LABEL_LAUNCH_TYPE) ?: "", "cold");
    env = json_object_get(json_array_get(kube_obj_path(sb, "spec.podTemplate.spec.containers"), 0),
                          "env");
    json_array_foreach(env, i, e) found |=
        strcmp(json_string_value(json_object_get(e, "name")) ?: "", "FOO") == 0;
    assert_true(found);
    json_decref(sb);
    json_decref(cl);
    /* A template that disallows env rejects the claim with a reason. */
    create_template("tpl-noenv", "on", "Disallowed");
    create_pool("p-noenv", "tpl-noenv", 0);
    create_claim("c-env-no", "p-noenv",
                 json_pack("{s:[{s:s, s:s}]}", "env", "name", "FOO", "value", "bar"));
    json_decref(wait_claim("c-env-no", "False", EXT_R_ENV_REJECTED));
}

static void test_exhausted_cold(void **state)
{
    json_t *cl, *sb;
    (void)state;
    create_pool("p0", "tpl", 0);
    create_claim("c-cold", "p0", NULL);
    cl = wait_claim("c-cold", "True", NULL);
    sb = bound_sandbox(cl);
    assert_string_equal(kube_obj_name(sb), "c-cold");
    assert_string_equal(kube_obj_label(sb, SB_LABEL_LAUNCH_TYPE) ?: "", "cold");
    json_decref(sb);
    json_decref(cl);
    /* Invalid metadata fails with a reason. */
    create_claim("c-badmeta", "p0",
                 json_pack("{s:{s:{s:s}}}", "additionalPodMetadata", "labels", "evil.io/x", "y"));
    json_decref(wait_claim("c-badmeta", "False", EXT_R_INVALID_METADATA));
    create_claim("c-nopool", "p-missing", NULL);
    json_decref(wait_claim("c-nopool", "False", EXT_R_POOL_NOT_FOUND));
}

/* Creates a Sandbox named name that no claim controls (one that blocks a claim of that
 * name); returns its uid into uid. */
static void create_foreign_sandbox(const char *name, char *uid, size_t size)
{
    json_t *sb =
        json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:{s:[{s:s, s:s}]}}}}", "apiVersion", SB_API_VERSION,
                  "kind", SB_KIND, "metadata", "name", name, "spec", "podTemplate", "spec",
                  "containers", "name", "main", "image", "registry.local/runtime:1");
    json_t *made = NULL;
    struct kube_err e;
    IT_OK(kube_create(c, &API_RES_SANDBOXES, ns, sb, &made, &e), &e);
    json_decref(sb);
    (void)snprintf(uid, size, "%s", kube_obj_uid(made));
    json_decref(made);
}

/* A claim blocked by a Sandbox of its name that no claim controls ("not controlled by
 * claim": the user is told to delete it) goes on by itself once that Sandbox is deleted:
 * the deletion brings the claim back (nothing else would: no claim owns the Sandbox). */
static void test_blocked_claim_recovers(void **state)
{
    struct kube_err e;
    json_t *cl, *bound;
    char uid[64];
    (void)state;
    create_foreign_sandbox("c-blocked", uid, sizeof(uid));
    create_claim("c-blocked", "p0", NULL);
    json_decref(wait_claim("c-blocked", "False", SB_R_RECONCILER_ERROR));
    IT_OK(kube_delete(c, &API_RES_SANDBOXES, ns, "c-blocked", &e), &e);
    /* By uid: a claim that goes cold makes a Sandbox of its own name at once. */
    assert_int_equal(it_wait_gone_uid(c, &API_RES_SANDBOXES, ns, "c-blocked", uid, WAIT), 0);
    cl = wait_claim("c-blocked", "True", NULL);
    bound = bound_sandbox(cl);
    assert_string_equal(kube_obj_controller_uid(bound), kube_obj_uid(cl));
    assert_string_not_equal(kube_obj_uid(bound), uid);
    json_decref(bound);
    json_decref(cl);
}

/* The name and uid of a Ready member of pool (not deleting), into name and uid. */
static void pool_member(const char *pool, char *name, size_t nsize, char *uid, size_t usize)
{
    json_t *list = NULL, *sb;
    size_t i;
    name[0] = '\0';
    assert_int_equal(kube_list_all(c, &API_RES_SANDBOXES, ns, NULL, &list, NULL), 0);
    json_array_foreach(json_object_get(list, "items"), i, sb)
    {
        const json_t *ref = kube_obj_controller_ref(sb);
        const char *k = json_string_value(json_object_get(ref, "kind"));
        const char *nm = json_string_value(json_object_get(ref, "name"));
        if (!name[0] && !kube_obj_deleting(sb) && k && strcmp(k, EXT_KIND_POOL) == 0 && nm &&
            strcmp(nm, pool) == 0 && kube_obj_condition_true(sb, SB_COND_READY)) {
            (void)snprintf(name, nsize, "%s", kube_obj_name(sb));
            (void)snprintf(uid, usize, "%s", kube_obj_uid(sb));
        }
    }
    json_decref(list);
    assert_true(name[0] != '\0');
}

/* The same when the Sandbox in the way is a pool's member (a claim named like one, e.g.
 * by generateName): its deletion brings the claim back too, though the pool, not a
 * claim, controlled it. */
static void test_claim_blocked_by_member_recovers(void **state)
{
    struct kube_err e;
    json_t *cl, *bound;
    char name[256], uid[64];
    (void)state;
    create_pool("p-block", "tpl", 1);
    wait_pool("p-block", 1, 1);
    pool_member("p-block", name, sizeof(name), uid, sizeof(uid));
    create_claim(name, "p-block", NULL);
    json_decref(wait_claim(name, "False", SB_R_RECONCILER_ERROR));
    IT_OK(kube_delete(c, &API_RES_SANDBOXES, ns, name, &e), &e);
    assert_int_equal(it_wait_gone_uid(c, &API_RES_SANDBOXES, ns, name, uid, WAIT), 0);
    cl = wait_claim(name, "True", NULL);
    bound = bound_sandbox(cl);
    assert_string_equal(kube_obj_controller_uid(bound), kube_obj_uid(cl));
    assert_string_not_equal(kube_obj_uid(bound), uid);
    json_decref(bound);
    json_decref(cl);
    IT_OK(kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, name, &e), &e);
    IT_OK(kube_delete(c, &API_RES_SANDBOXWARMPOOLS, ns, "p-block", &e), &e);
}

/* A claim on a pool that is being deleted (held here by a finalizer) does not adopt the
 * pool's Ready member, which is the garbage collector's to delete (an adoption between
 * its read and its DELETE would lose a bound Sandbox): it is served cold. */
static void test_deleting_pool_serves_cold(void **state)
{
    struct kube_err e;
    json_t *pool, *cl, *bound, *member;
    char name[256], uid[64];
    (void)state;
    pool = it_pool_new("p-going", "tpl", 1);
    json_object_set_new(json_object_get(pool, "metadata"), "finalizers",
                        json_pack("[s]", "test.agents.x-k8s.io/hold"));
    create(&API_RES_SANDBOXWARMPOOLS, pool);
    wait_pool("p-going", 1, 1);
    pool_member("p-going", name, sizeof(name), uid, sizeof(uid));
    IT_OK(kube_delete(c, &API_RES_SANDBOXWARMPOOLS, ns, "p-going", &e), &e);
    pool = get(&API_RES_SANDBOXWARMPOOLS, "p-going");
    assert_true(pool && kube_obj_deleting(pool));
    json_decref(pool);
    clock_sleep(USEC_PER_SEC); /* the controller's cache sees the deletion */
    create_claim("c-going", "p-going", NULL);
    cl = wait_claim("c-going", "True", NULL);
    bound = bound_sandbox(cl);
    assert_string_equal(kube_obj_name(bound), "c-going");
    assert_true(sb_controlled_by(bound, kube_obj_uid(cl)));
    member = get(&API_RES_SANDBOXES, name);
    assert_non_null(member);
    assert_string_equal(kube_obj_uid(member), uid);
    assert_string_equal(json_string_value(json_object_get(kube_obj_controller_ref(member), "kind"))
                            ?: "",
                        EXT_KIND_POOL);
    json_decref(member);
    json_decref(bound);
    json_decref(cl);
    patch(&API_RES_SANDBOXWARMPOOLS, "p-going", NULL,
          json_pack("{s:{s:n}}", "metadata", "finalizers"));
    IT_OK(kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, "c-going", &e), &e);
}

static const char *want_tpl = "tpl-b"; /* pool_all_of's template */

/* True when every member of pool ctx is Ready and built from template want_tpl. */
static bool pool_all_of(void *ctx)
{
    json_t *list = NULL, *sb;
    size_t i, n = 0;
    bool ok = true;
    char th[SB_HASH_LEN + 1];
    sb_name_hash(want_tpl, th);
    if (kube_list_all(c, &API_RES_SANDBOXES, ns, NULL, &list, NULL) < 0)
        return false;
    json_array_foreach(json_object_get(list, "items"), i, sb)
    {
        const char *nm = json_string_value(json_object_get(kube_obj_controller_ref(sb), "name"));
        if (!nm || strcmp(nm, ctx) != 0 || !sb_controller_is(sb, SB_EXT_GROUP, EXT_KIND_POOL))
            continue;
        n++;
        ok = ok && !kube_obj_deleting(sb) && kube_obj_condition_true(sb, SB_COND_READY) &&
             strcmp(kube_obj_label(sb, SB_LABEL_TEMPLATE_REF) ?: "", th) == 0;
    }
    json_decref(list);
    return ok && n == 2;
}

/* True when pool ctx's status has observed its current generation. */
static bool pool_observed_switch(void *ctx)
{
    json_t *pool = get(&API_RES_SANDBOXWARMPOOLS, ctx);
    bool yes = pool && json_integer_value(kube_obj_path(pool, "status.observedGeneration")) ==
                           kube_obj_generation(pool);
    json_decref(pool);
    return yes;
}

/* A pool switched to another template (OnReplenish, the default) keeps its members of
 * the template it used before, and hands them out, while that template exists (as
 * upstream); once it is deleted (its NetworkPolicy with it) they are replaced at once and
 * no claim gets one. */
static void test_pool_template_switch(void **state)
{
    struct kube_err e;
    json_t *cl, *sb;
    char th[SB_HASH_LEN + 1];
    (void)state;
    create_template("tpl-a", "on", "Allowed");
    create_template("tpl-b", "on", "Allowed");
    create_pool("p-switch", "tpl-a", 2);
    wait_pool("p-switch", 2, 2);
    patch(&API_RES_SANDBOXWARMPOOLS, "p-switch", NULL,
          json_pack("{s:{s:{s:s}}}", "spec", "sandboxTemplateRef", "name", "tpl-b"));
    /* a pass after the switch ran (its status says so); a replacement would have begun */
    if (it_wait(pool_observed_switch, "p-switch", WAIT) < 0)
        fail_msg("pool p-switch: no status for its new generation");
    clock_sleep(USEC_PER_SEC / 2);
    want_tpl = "tpl-a";
    if (!pool_all_of("p-switch"))
        fail_msg("pool p-switch replaced the members of a template that still exists");
    IT_OK(kube_delete(c, &API_RES_SANDBOXTEMPLATES, ns, "tpl-a", &e), &e);
    want_tpl = "tpl-b";
    if (it_wait(pool_all_of, "p-switch", WAIT) < 0)
        fail_msg("pool p-switch still has members of its deleted former template");
    create_claim("c-switch", "p-switch", NULL);
    cl = wait_claim("c-switch", "True", NULL);
    sb = bound_sandbox(cl);
    sb_name_hash("tpl-b", th);
    assert_string_equal(kube_obj_label(sb, SB_LABEL_TEMPLATE_REF) ?: "", th);
    json_decref(sb);
    json_decref(cl);
    IT_OK(kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, "c-switch", &e), &e);
    IT_OK(kube_delete(c, &API_RES_SANDBOXWARMPOOLS, ns, "p-switch", &e), &e);
}

/* A claim whose additionalPodMetadata overrides a label of the pool's template fails
 * once, as a cold claim does: no adoption is tried (each failed, was retried with
 * back-off for ever and sent the candidate to the back of the pool's queue), the member
 * stays the pool's and no reconcile error is counted. */
static void test_meta_conflict_fails_once(void **state)
{
    struct kube_err e;
    json_t *cl, *member;
    char name[256], uid[64], errs[128];
    double before;
    (void)state;
    (void)snprintf(errs, sizeof(errs),
                   "controller_runtime_reconcile_errors_total{controller=\"sandboxclaim\"}");
    create_pool("p-conf", "tpl", 1);
    wait_pool("p-conf", 1, 1);
    pool_member("p-conf", name, sizeof(name), uid, sizeof(uid));
    before = metric_value(errs);
    create_claim("c-conf", "p-conf",
                 json_pack("{s:{s:{s:s}}}", "additionalPodMetadata", "labels",
                           "sandbox.users.io/kubelet", "off"));
    cl = wait_claim("c-conf", "False", SB_R_RECONCILER_ERROR);
    assert_non_null(strstr(
        json_string_value(json_object_get(kube_obj_condition(cl, SB_COND_READY), "message")) ?: "",
        "metadata override conflict"));
    json_decref(cl);
    clock_sleep(USEC_PER_SEC); /* a retry (the back-off starts at 5 ms) would come by then */
    assert_true(metric_value(errs) == before);
    member = get(&API_RES_SANDBOXES, name);
    assert_non_null(member);
    assert_string_equal(json_string_value(json_object_get(kube_obj_controller_ref(member), "kind"))
                            ?: "",
                        EXT_KIND_POOL);
    json_decref(member);
    IT_OK(kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, "c-conf", &e), &e);
    IT_OK(kube_delete(c, &API_RES_SANDBOXWARMPOOLS, ns, "p-conf", &e), &e);
}

/* What pod_meta_has waits for: annotation key on Sandbox sb's pod template and on its Pod
 * with value (NULL: on neither). */
struct meta_want {
    const char *sb, *key, *value;
};

static bool ann_is(const json_t *anns, const char *key, const char *value)
{
    const char *v = json_string_value(json_object_get(anns, key));
    return value ? v && strcmp(v, value) == 0 : !v;
}

static bool pod_meta_has(void *ctx)
{
    const struct meta_want *w = ctx;
    json_t *sb = get(&API_RES_SANDBOXES, w->sb), *pod = get(&KUBE_RES_PODS, w->sb);
    bool ok =
        sb && pod &&
        ann_is(kube_obj_path(sb, "spec.podTemplate.metadata.annotations"), w->key, w->value) &&
        ann_is(kube_obj_path(pod, "metadata.annotations"), w->key, w->value);
    json_decref(sb);
    json_decref(pod);
    return ok;
}

/* A bound warm claim's additionalPodMetadata edits reach its Sandbox's pod template and its
 * Pod, without a restart (upstream's "update after claimed", as the Python SDK's snapshot
 * resume and restore use it): an annotation added, then removed. */
static void test_claim_pod_meta_update(void **state)
{
    struct kube_err e;
    struct meta_want w = {.key = "sandbox.users.io/ps-name", .value = "snap-1"};
    json_t *cl, *sb, *pod;
    char uid[64];
    (void)state;
    create_pool("p-meta", "tpl", 1);
    wait_pool("p-meta", 1, 1);
    create_claim("c-meta", "p-meta", NULL);
    cl = wait_claim("c-meta", "True", NULL);
    sb = bound_sandbox(cl);
    assert_string_equal(kube_obj_label(sb, SB_LABEL_LAUNCH_TYPE) ?: "", "warm");
    w.sb = kube_obj_name(sb);
    pod = get(&KUBE_RES_PODS, w.sb);
    assert_non_null(pod);
    (void)snprintf(uid, sizeof(uid), "%s", kube_obj_uid(pod));
    patch(&API_RES_SANDBOXCLAIMS, "c-meta", NULL,
          json_pack("{s:{s:{s:{s:s}}}}", "spec", "additionalPodMetadata", "annotations", w.key,
                    w.value));
    if (it_wait(pod_meta_has, &w, WAIT) < 0)
        fail_msg("annotation %s=%s never reached Sandbox %s and its Pod", w.key, w.value, w.sb);
    patch(&API_RES_SANDBOXCLAIMS, "c-meta", NULL,
          json_pack("{s:{s:{s:{s:n}}}}", "spec", "additionalPodMetadata", "annotations", w.key));
    w.value = NULL;
    if (it_wait(pod_meta_has, &w, WAIT) < 0)
        fail_msg("annotation %s never left Sandbox %s and its Pod", w.key, w.sb);
    json_decref(pod);
    pod = get(&KUBE_RES_PODS, w.sb);
    assert_string_equal(kube_obj_uid(pod) ?: "", uid); /* the same Pod: no restart */
    json_decref(pod);
    json_decref(sb);
    json_decref(cl);
    cl = wait_claim("c-meta", "True", NULL);
    json_decref(cl);
    IT_OK(kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, "c-meta", &e), &e);
    IT_OK(kube_delete(c, &API_RES_SANDBOXWARMPOOLS, ns, "p-meta", &e), &e);
}

/* A cold create whose answer is lost but which the server carried out: the claim reads
 * its Sandbox back in the same pass and binds it, without a failed pass (which left the
 * claim unbound: its next pass could take a warm member that had become Ready meanwhile,
 * and the claim would have controlled two). */
static void test_cold_create_answer_lost(void **state)
{
    char in_ns[128], errs[128];
    json_t *cl, *sb;
    double before;
    (void)state;
    (void)snprintf(errs, sizeof(errs),
                   "controller_runtime_reconcile_errors_total{controller=\"sandboxclaim\"}");
    before = metric_value(errs);
    (void)snprintf(in_ns, sizeof(in_ns), "/namespaces/%s/sandboxes", ns);
    assert_int_equal(it_lose_answers("POST", &API_RES_SANDBOXES, in_ns, 1), 0);
    create_claim("c-coldlost", "p0", NULL);
    cl = wait_claim("c-coldlost", "True", NULL);
    assert_int_equal(it_answers_lost(), 1);
    sb = bound_sandbox(cl);
    assert_string_equal(kube_obj_name(sb), "c-coldlost");
    assert_true(sb_controlled_by(sb, kube_obj_uid(cl)));
    assert_int_equal(count_sandboxes(EXT_KIND_CLAIM, "c-coldlost", NULL), 1);
    assert_true(metric_value(errs) == before); /* no pass failed */
    json_decref(sb);
    json_decref(cl);
}

/* The one member of pool p-lands (not deleting), into name ("" when none). */
static void late_member(char *name, size_t size)
{
    json_t *list = NULL, *sb;
    size_t i;
    name[0] = '\0';
    if (kube_list_all(c, &API_RES_SANDBOXES, ns, NULL, &list, NULL) < 0)
        return;
    json_array_foreach(json_object_get(list, "items"), i, sb)
    {
        const char *owner = json_string_value(json_object_get(kube_obj_controller_ref(sb), "name"));
        if (!kube_obj_deleting(sb) && owner && strcmp(owner, "p-lands") == 0)
            (void)snprintf(name, size, "%s", kube_obj_name(sb));
    }
    json_decref(list);
}

/* What went wrong in ready_member (run on a controller worker), for the test's thread. */
static char ready_error[512];

static bool member_warm(void *ctx)
{
    json_t *sb = get(&API_RES_SANDBOXES, ctx);
    bool ok = sb && kube_obj_condition_true(sb, SB_COND_READY) &&
              json_array_size(kube_obj_path(sb, "status.podIPs")) > 0;
    json_decref(sb);
    return ok;
}

static bool pod_made_ready(void *ctx)
{
    return it_pod_ready(c, ns, ctx, "10.2.250.1", NULL) == 0;
}

/* it_before_request's fn, before the claim's read-back of its cold create: the pool's
 * member (whose Pod the simulated kubelet ignores) becomes a Ready warm candidate, and
 * the controller's cache has time to offer it. */
static void ready_member(const char *url, void *ctx)
{
    char *member = ctx;
    (void)url;
    if (it_wait(pod_made_ready, member, WAIT) < 0 || it_wait(member_warm, member, WAIT) < 0)
        (void)snprintf(ready_error, sizeof(ready_error), "member %s did not become Ready", member);
    clock_sleep(300 * USEC_PER_MSEC);
}

static bool claim_has_sandbox(void *ctx)
{
    return count_sandboxes(EXT_KIND_CLAIM, ctx, NULL) > 0;
}

/* A cold create that was not carried out when the claim read its name back (404), but may
 * still be (a request the API server holds): the claim is served cold from then on. A
 * warm member that became Ready meanwhile stays the pool's; the create that lands late
 * meets the claim's own cold Sandbox under its name (409), so the claim controls one.
 * Before, the next pass adopted the member, and the late create made a second. */
static void test_cold_create_lands_late(void **state)
{
    char in_ns[128], member[256];
    struct claim_err ce = {0};
    struct kube_err e;
    json_t *cl, *tpl, *sb = NULL;
    int r;
    (void)state;
    ready_error[0] = '\0';
    create_template("tpl-lands", "off", "Allowed");
    create_pool("p-lands", "tpl-lands", 1);
    wait_pool("p-lands", 1, 0);
    late_member(member, sizeof(member));
    assert_true(member[0] != '\0');
    (void)snprintf(in_ns, sizeof(in_ns), "/namespaces/%s/sandboxes", ns);
    assert_int_equal(it_drop_requests("POST", &API_RES_SANDBOXES, in_ns, 1), 0);
    assert_int_equal(
        it_before_request("GET", &API_RES_SANDBOXES, "/sandboxes/c-lands", 0, ready_member, member),
        0);
    create_claim("c-lands", "p-lands", NULL);
    assert_int_equal(it_wait(claim_has_sandbox, "c-lands", WAIT), 0);
    assert_false(it_before_pending());
    if (ready_error[0])
        fail_msg("%s", ready_error);
    assert_int_equal(it_answers_lost(), 1);
    /* the dropped create, carried out late */
    cl = get(&API_RES_SANDBOXCLAIMS, "c-lands");
    tpl = get(&API_RES_SANDBOXTEMPLATES, "tpl-lands");
    assert_int_equal(claim_cold_sandbox(cl, tpl, &sb, &ce), 0);
    r = kube_create(c, &API_RES_SANDBOXES, ns, sb, NULL, &e);
    assert_true(r < 0 && kube_err_is_already_exists(&e));
    assert_int_equal(count_sandboxes(EXT_KIND_CLAIM, "c-lands", NULL), 1);
    assert_int_equal(count_sandboxes(EXT_KIND_POOL, "p-lands", NULL), 1);
    json_decref(sb);
    sb = get(&API_RES_SANDBOXES, "c-lands");
    assert_true(sb_controlled_by(sb, kube_obj_uid(cl)));
    assert_string_equal(kube_obj_label(sb, SB_LABEL_LAUNCH_TYPE) ?: "", "cold");
    json_decref(sb);
    json_decref(tpl);
    json_decref(cl);
    IT_OK(kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, "c-lands", &e), &e);
    IT_OK(kube_delete(c, &API_RES_SANDBOXWARMPOOLS, ns, "p-lands", &e), &e);
}

/* A claim already expired when it comes, blocked by a Sandbox of its name that it does
 * not control: ClaimExpired is written (the blocked Sandbox's error used to hide it, and
 * the claim was reconciled every millisecond, for ever). */
static void test_expired_blocked_claim(void **state)
{
    struct kube_err e;
    json_t *sb;
    char uid[64];
    (void)state;
    create_foreign_sandbox("c-expblk", uid, sizeof(uid));
    create_claim("c-expblk", "p0", lifecycle_in("Retain", 0));
    json_decref(wait_claim("c-expblk", "False", EXT_R_CLAIM_EXPIRED));
    sb = get(&API_RES_SANDBOXES, "c-expblk"); /* not the claim's: left alone */
    assert_non_null(sb);
    assert_null(kube_obj_path(sb, "metadata.deletionTimestamp"));
    json_decref(sb);
    IT_OK(kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, "c-expblk", &e), &e);
    IT_OK(kube_delete(c, &API_RES_SANDBOXES, ns, "c-expblk", &e), &e);
}

static bool claim_without_ips(void *ctx)
{
    json_t *cl = get(&API_RES_SANDBOXCLAIMS, ctx);
    bool ok = cl && !kube_obj_condition_true(cl, SB_COND_READY) &&
              kube_obj_path_str(cl, "status.sandbox.name") &&
              !kube_obj_path(cl, "status.sandbox.podIPs");
    json_decref(cl);
    return ok;
}

/* A claim whose Sandbox is suspended loses its Pod's IPs from its status (the status
 * merge patch left them: an address a Pod of someone else may get next). */
static void test_suspended_claim_drops_ips(void **state)
{
    json_t *cl, *sb;
    struct kube_err e;
    (void)state;
    create_claim("c-susp", "p1", NULL);
    cl = wait_claim("c-susp", "True", NULL);
    assert_int_equal(json_array_size(kube_obj_path(cl, "status.sandbox.podIPs")), 1);
    sb = bound_sandbox(cl);
    patch(&API_RES_SANDBOXES, kube_obj_name(sb), NULL,
          json_pack("{s:{s:s}}", "spec", "operatingMode", "Suspended"));
    assert_int_equal(it_wait(claim_without_ips, "c-susp", WAIT), 0);
    json_decref(sb);
    json_decref(cl);
    IT_OK(kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, "c-susp", &e), &e);
}

/* A Sandbox being deleted (held by a finalizer) turns Ready=False (SandboxDeleting; it
 * stayed True), and its claim with it. */
static void test_deleting_sandbox_claim_not_ready(void **state)
{
    json_t *cl, *sb;
    char sbn[256];
    struct kube_err e;
    (void)state;
    create_claim("c-fin", "p1", NULL);
    cl = wait_claim("c-fin", "True", NULL);
    sb = bound_sandbox(cl);
    (void)snprintf(sbn, sizeof(sbn), "%s", kube_obj_name(sb));
    patch(&API_RES_SANDBOXES, sbn, NULL,
          json_pack("{s:{s:[s]}}", "metadata", "finalizers", "test.agent-sandbox.io/hold"));
    IT_OK(kube_delete(c, &API_RES_SANDBOXES, ns, sbn, &e), &e);
    json_decref(wait_claim("c-fin", "False", EXT_R_SANDBOX_NOT_READY));
    struct it_cond gone = {&API_RES_SANDBOXES, sbn, SB_COND_READY, "False", SB_R_DELETING};
    assert_int_equal(it_cond_wait(c, ns, &gone, WAIT), 0); /* the Sandbox says it too */
    patch(&API_RES_SANDBOXES, sbn, NULL, json_pack("{s:{s:n}}", "metadata", "finalizers"));
    assert_int_equal(it_wait_gone(c, &API_RES_SANDBOXES, ns, sbn, WAIT), 0);
    json_decref(sb);
    json_decref(cl);
    IT_OK(kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, "c-fin", &e), &e);
}

static bool claim_annotated(void *ctx)
{
    json_t *cl = get(&API_RES_SANDBOXCLAIMS, ctx);
    bool ok = kube_obj_annotation(cl, EXT_ANN_FIRST_READY) != NULL;
    json_decref(cl);
    return ok;
}

/* The first-ready annotation's write fails once (a 501): the claim's next pass writes it
 * again (it was never retried while the process lived). */
static void test_first_ready_write_retried(void **state)
{
    struct kube_err e;
    (void)state;
    assert_int_equal(it_drop_requests("PATCH", &API_RES_SANDBOXCLAIMS, "/sandboxclaims/c-annot", 1),
                     0);
    create_claim("c-annot", "p1", NULL);
    json_decref(wait_claim("c-annot", "True", NULL));
    assert_int_equal(it_wait(claim_annotated, "c-annot", WAIT), 0);
    assert_int_equal(it_answers_lost(), 1);
    IT_OK(kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, "c-annot", &e), &e);
}

static bool pool_series_gone(void *ctx)
{
    return metric_value(ctx) < 0;
}

/* A deleted pool's series leave /metrics (its counts were reported for ever). */
static void test_pool_series_removed(void **state)
{
    char series[256];
    struct kube_err e;
    (void)state;
    create_pool("p-series", "tpl", 1);
    wait_pool("p-series", 1, 1);
    (void)snprintf(series, sizeof(series),
                   "agent_sandbox_warm_pool_ready_replicas{namespace=\"%s\",pool=\"p-series\"}",
                   ns);
    assert_true(metric_value(series) == 1);
    IT_OK(kube_delete(c, &API_RES_SANDBOXWARMPOOLS, ns, "p-series", &e), &e);
    assert_int_equal(it_wait(pool_series_gone, series, WAIT), 0);
    (void)snprintf(series, sizeof(series),
                   "agent_sandbox_warm_pool_creates_total{namespace=\"%s\",pool=\"p-series\"}", ns);
    assert_true(metric_value(series) < 0);
}

static void test_unready_pool_bounded(void **state)
{
    size_t ready = 9;
    (void)state;
    create_template("tpl-stuck", "off", "Disallowed");
    create_pool("p-stuck", "tpl-stuck", 3);
    wait_pool("p-stuck", 3, 0);
    for (int i = 0; i < 5; i++) { /* several more passes */
        patch(&API_RES_SANDBOXWARMPOOLS, "p-stuck", NULL,
              json_pack("{s:{s:{s:s}}}", "metadata", "annotations", "poke", i % 2 ? "a" : "b"));
        clock_sleep(200 * USEC_PER_MSEC); /* let reconciles run; nothing to wait for */
    }
    assert_int_equal(count_sandboxes(EXT_KIND_POOL, "p-stuck", &ready), 3);
    assert_int_equal(ready, 0);
}

static void test_claim_delete_gc(void **state)
{
    json_t *cl = get(&API_RES_SANDBOXCLAIMS, "c-warm");
    char sbn[256];
    struct kube_err e;
    (void)state;
    (void)snprintf(sbn, sizeof(sbn), "%s", kube_obj_path_str(cl, "status.sandbox.name"));
    json_decref(cl);
    IT_OK(kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, "c-warm", &e), &e);
    assert_int_equal(it_wait_gone(c, &API_RES_SANDBOXES, ns, sbn, WAIT), 0);
}

static json_t *lifecycle_in(const char *policy, usec_t d)
{
    char t[64];
    clock_format_rfc3339_sec(clock_wall_now() + d, t, sizeof(t));
    return json_pack("{s:{s:s, s:s}}", "lifecycle", "shutdownTime", t, "shutdownPolicy", policy);
}

static void pod_succeeded(const char *name)
{
    patch(&KUBE_RES_PODS, name, "status",
          json_pack("{s:{s:s, s:[{s:s, s:s}]}}", "status", "phase", "Succeeded", "conditions",
                    "type", "Ready", "status", "False"));
}

static void test_lifecycle(void **state)
{
    json_t *cl, *sb;
    char sbn[256];
    (void)state;
    /* Delete: the claim goes, and its Sandbox with it. */
    create_claim("c-del", "p1", lifecycle_in("Delete", 3 * USEC_PER_SEC));
    cl = wait_claim("c-del", "True", NULL);
    (void)snprintf(sbn, sizeof(sbn), "%s", kube_obj_path_str(cl, "status.sandbox.name"));
    json_decref(cl);
    assert_int_equal(it_wait_gone(c, &API_RES_SANDBOXCLAIMS, ns, "c-del", WAIT), 0);
    assert_int_equal(it_wait_gone(c, &API_RES_SANDBOXES, ns, sbn, WAIT), 0);
    /* Retain: the Sandbox goes, the claim stays with ClaimExpired. */
    create_claim("c-ret", "p1", lifecycle_in("Retain", 3 * USEC_PER_SEC));
    cl = wait_claim("c-ret", "True", NULL);
    (void)snprintf(sbn, sizeof(sbn), "%s", kube_obj_path_str(cl, "status.sandbox.name"));
    json_decref(cl);
    json_decref(wait_claim("c-ret", "False", EXT_R_CLAIM_EXPIRED));
    assert_int_equal(it_wait_gone(c, &API_RES_SANDBOXES, ns, sbn, WAIT), 0);
    cl = get(&API_RES_SANDBOXCLAIMS, "c-ret");
    assert_non_null(cl);
    json_decref(cl);
    /* TTL after Finished, with DeleteForeground. */
    create_claim("c-ttl", "p1",
                 json_pack("{s:{s:i, s:s}}", "lifecycle", "ttlSecondsAfterFinished", 0,
                           "shutdownPolicy", "DeleteForeground"));
    cl = wait_claim("c-ttl", "True", NULL);
    sb = bound_sandbox(cl);
    pod_succeeded(kube_obj_name(sb));
    assert_int_equal(it_wait_gone(c, &API_RES_SANDBOXCLAIMS, ns, "c-ttl", WAIT), 0);
    json_decref(sb);
    json_decref(cl);
}

/* A claim on a pool whose template does not exist says TemplateNotFound, and becomes
 * Ready once the template is created. (The template is one that never existed: one just
 * deleted may still be in the controller's cache when the claim comes, and a claim that
 * takes it is right, not a failure of this test's premise.) */
static void test_template_recovers(void **state)
{
    (void)state;
    create_pool("p-late", "tpl-late", 1);
    create_claim("c-late", "p-late", NULL);
    json_decref(wait_claim("c-late", "False", EXT_R_TEMPLATE_NOT_FOUND));
    create_template("tpl-late", "on", "Disallowed");
    json_decref(wait_claim("c-late", "True", NULL));
}

/* What np_replace did, for the test's thread: the hook runs on a controller worker, where
 * a cmocka assertion must not fail. Written before np_done is set, read after. */
static char np_uid[64], np_error[1100];
static atomic_bool np_done;

/* it_before_request's fn: deletes the template's NetworkPolicy (name ctx) that the
 * controller is about to delete and makes a foreign one of its name in its place. */
static void np_replace(const char *url, void *ctx)
{
    const char *name = ctx;
    char uid[64];
    struct kube_err e = {0};
    json_t *old = get(&KUBE_RES_NETWORKPOLICIES, name), *made = NULL;
    json_t *next =
        json_pack("{s:s, s:s, s:{s:s}, s:{s:{}}}", "apiVersion", "networking.k8s.io/v1", "kind",
                  "NetworkPolicy", "metadata", "name", name, "spec", "podSelector");
    (void)url;
    if (!old) {
        (void)snprintf(np_error, sizeof(np_error), "%s not found", name);
    } else {
        (void)snprintf(uid, sizeof(uid), "%s", kube_obj_uid(old));
        if (kube_delete(c, &KUBE_RES_NETWORKPOLICIES, ns, name, &e) < 0 ||
            it_wait_gone_uid(c, &KUBE_RES_NETWORKPOLICIES, ns, name, uid, WAIT) < 0 ||
            kube_create(c, &KUBE_RES_NETWORKPOLICIES, ns, next, &made, &e) < 0)
            (void)snprintf(np_error, sizeof(np_error), "replacing %s: %s", name,
                           e.message[0] ? e.message : "it did not go");
        else
            (void)snprintf(np_uid, sizeof(np_uid), "%s", kube_obj_uid(made));
    }
    json_decref(made);
    json_decref(next);
    json_decref(old);
    atomic_store(&np_done, true);
}

static bool np_replaced(void *ctx)
{
    (void)ctx;
    return atomic_load(&np_done);
}

static bool tpl_np_labelled(void *ctx)
{
    json_t *t = get(&API_RES_SANDBOXTEMPLATES, "tpl-np");
    bool ok = t && strcmp(kube_obj_label(t, SB_LABEL_TEMPLATE_REF) ?: "", ctx) == 0;
    json_decref(t);
    return ok;
}

static bool tpl_np_owned(void *ctx)
{
    json_t *t = get(&API_RES_SANDBOXTEMPLATES, "tpl-np"), *np = get(&KUBE_RES_NETWORKPOLICIES, ctx);
    bool ok = t && np && sb_controlled_by(np, kube_obj_uid(t));
    json_decref(np);
    json_decref(t);
    return ok;
}

static int before_cancel(void **state)
{
    (void)state;
    it_before_cancel();
    return 0;
}

/* A template whose NetworkPolicy becomes unmanaged deletes it by UID: a foreign policy
 * made under its name just before the DELETE stays. The template's label, taken off
 * afterwards and put back by the controller, shows that the pass which sent the DELETE is
 * over. */
static void test_np_unmanaged_spares_successor(void **state)
{
    static char name[] = "tpl-np" EXT_NP_SUFFIX;
    char hash[SB_HASH_LEN + 1];
    json_t *np;
    (void)state;
    np_uid[0] = np_error[0] = '\0';
    atomic_store(&np_done, false);
    sb_name_hash("tpl-np", hash);
    create_template("tpl-np", "on", "Allowed");
    assert_int_equal(it_wait(tpl_np_owned, name, WAIT), 0);
    assert_int_equal(it_wait(tpl_np_labelled, hash, WAIT), 0);
    assert_int_equal(it_before_request("DELETE", &KUBE_RES_NETWORKPOLICIES,
                                       "/networkpolicies/tpl-np" EXT_NP_SUFFIX, 0, np_replace,
                                       name),
                     0);
    patch(&API_RES_SANDBOXTEMPLATES, "tpl-np", NULL,
          json_pack("{s:{s:s}}", "spec", "networkPolicyManagement", "Unmanaged"));
    assert_int_equal(it_wait(np_replaced, NULL, WAIT), 0);
    patch(&API_RES_SANDBOXTEMPLATES, "tpl-np", NULL,
          json_pack("{s:{s:{s:n}}}", "metadata", "labels", SB_LABEL_TEMPLATE_REF));
    assert_int_equal(it_wait(tpl_np_labelled, hash, WAIT), 0);
    if (np_error[0] || !np_uid[0])
        fail_msg("%s", np_error[0] ? np_error : "the policy was not replaced");
    np = get(&KUBE_RES_NETWORKPOLICIES, name);
    if (!np)
        fail_msg("the foreign NetworkPolicy %s was deleted", name);
    assert_string_equal(kube_obj_uid(np), np_uid);
    assert_null(kube_obj_path(np, "metadata.deletionTimestamp"));
    json_decref(np);
}

/* ---- burst -------------------------------------------------------------------------- */

#define NCLAIMS (2 * BURST)
static usec_t t_create[NCLAIMS], t_ready[NCLAIMS];
static pthread_mutex_t t_lock = PTHREAD_MUTEX_INITIALIZER;

static int claim_index(const json_t *cl)
{
    const char *n = kube_obj_name(cl);
    int64_t i;
    if (!n || strncmp(n, "b-", 2) != 0 || cstr_to_i64(n + 2, &i) < 0 || i < 0 || i >= NCLAIMS)
        return -1;
    return (int)i;
}

static void claim_seen(void *ctx, const json_t *o, const json_t *cl)
{
    int i = claim_index(cl);
    usec_t now = clock_now();
    (void)ctx;
    (void)o;
    if (i < 0 || !kube_obj_condition_true(cl, SB_COND_READY))
        return;
    pthread_mutex_lock(&t_lock);
    if (!t_ready[i])
        t_ready[i] = now;
    pthread_mutex_unlock(&t_lock);
}

static void claim_added(void *ctx, const json_t *cl)
{
    claim_seen(ctx, NULL, cl);
}

struct creator {
    int from, to;
};

static void *create_claims(void *arg)
{
    struct creator *cr = arg;
    char name[32];
    for (int i = cr->from; i < cr->to; i++) {
        json_t *cl;
        (void)snprintf(name, sizeof(name), "b-%03d", i);
        cl = it_claim_new(name, "pb");
        t_create[i] = clock_now();
        (void)kube_create(c, &API_RES_SANDBOXCLAIMS, ns, cl, NULL, NULL);
        json_decref(cl);
    }
    return NULL;
}

static void burst(int from, int to)
{
    pthread_t th[8];
    struct creator cr[8];
    int per = (to - from + 7) / 8;
    for (int i = 0; i < 8; i++) {
        cr[i] =
            (struct creator){from + i * per, from + (i + 1) * per > to ? to : from + (i + 1) * per};
        assert_int_equal(pthread_create(&th[i], NULL, create_claims, &cr[i]), 0);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
}

struct range {
    int from, to;
};

static bool all_ready(void *ctx)
{
    struct range *r = ctx;
    bool ok = true;
    pthread_mutex_lock(&t_lock);
    for (int i = r->from; i < r->to && ok; i++)
        ok = t_ready[i] != 0;
    pthread_mutex_unlock(&t_lock);
    return ok;
}

static int cmp_usec(const void *a, const void *b)
{
    usec_t x = *(const usec_t *)a, y = *(const usec_t *)b;
    return x < y ? -1 : x > y;
}

static void print_latency(const char *what, int from, int to)
{
    usec_t v[NCLAIMS];
    int n = 0;
    for (int i = from; i < to; i++)
        v[n++] = t_ready[i] - t_create[i];
    qsort(v, (size_t)n, sizeof(v[0]), cmp_usec);
    printf("# %s: %d claims: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n", what, n,
           (double)v[n / 2] / 1000, (double)v[n * 9 / 10] / 1000, (double)v[n * 99 / 100] / 1000,
           (double)v[n - 1] / 1000);
}

/* Sums apiserver_request_total by "verb resource/subresource" for writes. */
static void api_writes(struct map *out)
{
    struct buf b;
    buf_init(&b, 64u * 1024 * 1024);
    if (it_http_get("/metrics", &b) == 200) {
        char *save = NULL, *line;
        for (line = strtok_r(b.data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            char verb[16] = "", res[64] = "", sub[32] = "", key[128];
            const char *p;
            double v, *acc;
            if (strncmp(line, "apiserver_request_total{", 24) != 0)
                continue;
            if ((p = strstr(line, "verb=\"")))
                (void)sscanf(p + 6, "%15[^\"]", verb);
            if ((p = strstr(line, "resource=\"")))
                (void)sscanf(p + 10, "%63[^\"]", res);
            if ((p = strstr(line, "subresource=\"")))
                (void)sscanf(p + 13, "%31[^\"]", sub);
            if (strcmp(verb, "POST") && strcmp(verb, "PUT") && strcmp(verb, "PATCH") &&
                strcmp(verb, "DELETE"))
                continue;
            p = strrchr(line, ' ');
            v = p ? strtod(p + 1, NULL) : 0;
            (void)snprintf(key, sizeof(key), "%s %s%s%s", verb, res, *sub ? "/" : "", sub);
            acc = map_get(out, key);
            if (!acc) {
                acc = xcalloc(1, sizeof(*acc));
                map_put(out, key, acc, NULL);
            }
            *acc += v;
        }
    }
    buf_done(&b);
}

static void print_writes(struct map *before, struct map *after, int claims)
{
    struct map_iter it;
    const char *k;
    void *v;
    printf("# API writes during the burst, per claim (%d claims):\n", claims);
    map_foreach (after, it, k, v) {
        double *b = map_get(before, k), d = *(double *)v - (b ? *b : 0);
        if (d > 0)
            printf("#   %-40s %7.0f  %.2f/claim\n", k, d, d / claims);
    }
}

static struct kube_informer *claim_inf;

static void watch_claims(void)
{
    struct kube_informer_opts o = {.client = c, .res = &API_RES_SANDBOXCLAIMS, .ns = ns};
    struct kube_informer_handlers h = {.on_add = claim_added, .on_update = claim_seen};
    assert_int_equal(kube_informer_new(&o, &claim_inf), 0);
    assert_int_equal(kube_informer_add_handlers(claim_inf, &h), 0);
    assert_int_equal(kube_informer_start(claim_inf), 0);
    assert_int_equal(kube_informer_wait_for_sync(claim_inf, WAIT), 0);
}

/* Every claim of [from, to) bound to a distinct Sandbox that it alone controls. */
static void assert_exclusive(int from, int to, size_t *ret_warm)
{
    struct map *seen = map_new(NULL);
    char name[32];
    size_t warm = 0;
    for (int i = from; i < to; i++) {
        json_t *cl, *sb;
        (void)snprintf(name, sizeof(name), "b-%03d", i);
        cl = get(&API_RES_SANDBOXCLAIMS, name);
        assert_true(kube_obj_condition_true(cl, SB_COND_READY));
        sb = bound_sandbox(cl);
        assert_non_null(sb);
        assert_true(sb_controlled_by(sb, kube_obj_uid(cl)));
        assert_int_equal(json_array_size(kube_obj_path(sb, "metadata.ownerReferences")), 1);
        assert_null(map_get(seen, kube_obj_name(sb)));
        map_put(seen, kube_obj_name(sb), (void *)1, NULL);
        warm += strcmp(kube_obj_label(sb, SB_LABEL_LAUNCH_TYPE) ?: "", "warm") == 0;
        json_decref(sb);
        json_decref(cl);
    }
    map_free(seen);
    *ret_warm = warm;
}

/* The value of a series (an unlabelled family's name, or name{labels} as the controller
 * prints it) in the controller's /metrics, or -1. */
static double metric_value(const char *name)
{
    char raw[128], pat[128];
    struct test_http_resp resp;
    double v = -1;
    test_http_resp_init(&resp);
    (void)snprintf(raw, sizeof(raw),
                   "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    (void)snprintf(pat, sizeof(pat), "\n%s ", name);
    if (test_http_request(ctrl_manager_metrics_port(mgr), raw, WAIT, &resp) == 0 &&
        resp.status == 200) {
        const char *p = strstr(buf_str(&resp.body), pat);
        if (p)
            v = strtod(p + strlen(pat), NULL);
    }
    test_http_resp_done(&resp);
    return v;
}

static void test_burst(void **state)
{
    struct map *before = map_new(xfree), *after = map_new(xfree);
    struct range r = {0, BURST};
    size_t warm = 0;
    (void)state;
    create_pool("pb", "tpl", BURST);
    wait_pool("pb", BURST, BURST);
    watch_claims();
    api_writes(before);
    burst(0, BURST);
    assert_int_equal(it_wait(all_ready, &r, WAIT), 0);
    api_writes(after);
    assert_exclusive(0, BURST, &warm);
    print_latency("warm-claim burst (create -> Ready seen by a watch)", 0, BURST);
    printf("# warm: %zu of %d\n", warm, BURST);
    print_writes(before, after, BURST);
    assert_true(warm >= BURST * 9 / 10);
    /* BURST claims at once, 4 adoptions at a time: most of them queued for a place */
    double waits = metric_value("agent_sandbox_claim_adoption_waits_total");
    printf("# adoptions that waited for a place: %.0f\n", waits);
    assert_true(waits >= 1);
    /* The pool refills to exactly N: claimed ones plus N members, nothing more. */
    wait_pool("pb", BURST, BURST);
    assert_int_equal(count_sandboxes(EXT_KIND_POOL, "pb", NULL), BURST);
    assert_int_equal(count_sandboxes(EXT_KIND_CLAIM, NULL, NULL) >= (size_t)BURST, 1);
    map_free(before);
    map_free(after);
}

static bool some_ready(void *ctx)
{
    struct range *r = ctx;
    int n = 0;
    pthread_mutex_lock(&t_lock);
    for (int i = r->from; i < r->to; i++)
        n += t_ready[i] != 0;
    pthread_mutex_unlock(&t_lock);
    return n >= (r->to - r->from) / 5;
}

static void test_restart_mid_burst(void **state)
{
    struct range r = {BURST, NCLAIMS};
    size_t warm = 0, pool_before, total;
    (void)state;
    pool_before = count_sandboxes(EXT_KIND_POOL, "pb", NULL);
    assert_int_equal(pool_before, BURST);
    burst(BURST, NCLAIMS);
    assert_int_equal(it_wait(some_ready, &r, WAIT), 0);
    stop_manager();
    start_manager();
    assert_int_equal(it_wait(all_ready, &r, WAIT), 0);
    assert_exclusive(BURST, NCLAIMS, &warm);
    printf("# after restart: %zu of %d warm\n", warm, BURST);
    wait_pool("pb", BURST, BURST);
    /* No over-creation: every Sandbox is a pool member or bound to exactly one claim. */
    total = count_sandboxes(NULL, NULL, NULL);
    assert_int_equal(count_sandboxes(EXT_KIND_POOL, "pb", NULL), BURST);
    printf("# sandboxes in the namespace: %zu\n", total);
    kube_informer_stop(claim_inf);
    kube_informer_free(claim_inf);
}

/* An idle manager with every informer (Sandboxes, Pods, Services, PVCs, claims, pools,
 * templates) stops in well under the second that each watch may take to notice: every
 * informer is asked before any is joined. One after the other they took 4-5 s. */
static void test_stop_prompt(void **state)
{
    usec_t t0;
    double took;
    (void)state;
    clock_sleep(USEC_PER_SEC);
    t0 = clock_now();
    stop_manager();
    took = (double)(clock_now() - t0) / USEC_PER_SEC;
    printf("# idle manager stopped in %.2f s\n", took);
    assert_true(took < 2.0);
    start_manager();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_fills),
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_create_answer_lost),
        cmocka_unit_test(test_adopt_answer_lost),
        cmocka_unit_test(test_adopt_answer_and_read_lost),
        cmocka_unit_test(test_adopt_unsent_resent),
        cmocka_unit_test(test_adopt_unsent_thrice),
        cmocka_unit_test(test_adopt_lands_late),
        cmocka_unit_test(test_delete_answer_lost),
        cmocka_unit_test(test_warm_claim),
        cmocka_unit_test(test_upstream_metrics),
        cmocka_unit_test(test_env_cold),
        cmocka_unit_test(test_exhausted_cold),
        cmocka_unit_test(test_blocked_claim_recovers),
        cmocka_unit_test(test_claim_blocked_by_member_recovers),
        cmocka_unit_test(test_deleting_pool_serves_cold),
        cmocka_unit_test(test_pool_template_switch),
        cmocka_unit_test(test_meta_conflict_fails_once),
        cmocka_unit_test(test_claim_pod_meta_update),
        cmocka_unit_test(test_cold_create_answer_lost),
        cmocka_unit_test_teardown(test_cold_create_lands_late, before_cancel),
        cmocka_unit_test(test_expired_blocked_claim),
        cmocka_unit_test(test_suspended_claim_drops_ips),
        cmocka_unit_test(test_deleting_sandbox_claim_not_ready),
        cmocka_unit_test(test_pool_series_removed),
        cmocka_unit_test(test_first_ready_write_retried),
        cmocka_unit_test(test_unready_pool_bounded),
        cmocka_unit_test(test_claim_delete_gc),
        cmocka_unit_test(test_lifecycle),
        cmocka_unit_test(test_template_recovers),
        cmocka_unit_test_teardown(test_np_unmanaged_spares_successor, before_cancel),
        cmocka_unit_test(test_burst),
        cmocka_unit_test(test_restart_mid_burst),
        cmocka_unit_test(test_stop_prompt),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
