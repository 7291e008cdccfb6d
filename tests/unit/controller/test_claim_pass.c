/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: whole SandboxClaim and SandboxWarmPool passes (claim_reconcile,
 * pool_reconcile) on extension caches the test fills (the informers are made, never
 * started), and the event handlers called as an informer would; the API server played by
 * a scripted HTTP/1.1 server on 127.0.0.1 that keeps the Sandboxes it is told of and
 * counts the writes. */
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

#include "api/res.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "controller/claim_queue.h"
#include "controller/ext_int.h"
#include "controller/ext_names.h"
#include "controller/idle_policy.h"
#include "controller/latebind_spec.h"
#include "controller/pool_expect.h"
#include "controller/sandbox_names.h"
#include "controller/sandbox_status.h"
#include "controller/template_build.h"
#include "controller/workloop.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/obj.h"
#include "kube/store.h"
#include "kube/workqueue.h"
#include "support/script_srv.h"

#define NS       "ns"
#define POOL     "pool"
#define POOL_UID "p0000000-0000-0000-0000-000000000001"
#define TPL      "tpl"
#define CLAIM    "claim"
#define CL_UID   "c0000000-0000-0000-0000-000000000001"

/* ---- the scripted API server -------------------------------------------------------- */

struct srv {
    json_t *objs;         /* Sandbox name -> the Sandbox the server has */
    json_t *patch_code;   /* Sandbox name -> the status its PATCHes get (default 200/404) */
    json_t *patches;      /* Sandbox name -> PATCHes of it */
    json_t *last_patch;   /* Sandbox name -> the body of its last PATCH */
    json_t *deletes;      /* Sandbox name -> DELETEs of it */
    json_t *claim_writes; /* the claim status PATCHes' bodies */
    long post_code;       /* answer to a Sandbox POST: 201 or that error */
    int posts, others, next_uid;
};

static struct srv S;          /* the handler's, under the server's lock */
static struct script_env ENV; /* the scripted API server and its client */

static void count(json_t *counts, const char *name)
{
    json_object_set_new(counts, name,
                        json_integer(json_integer_value(json_object_get(counts, name)) + 1));
}

/* RFC 7386 merge patch of patch into target. */
static void merge(json_t *target, const json_t *patch)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)patch, k, v)
    {
        json_t *cur = json_object_get(target, k);
        if (json_is_null(v))
            json_object_del(target, k);
        else if (json_is_object(v) && json_is_object(cur))
            merge(cur, v);
        else
            json_object_set_new(target, k, json_deep_copy(v));
    }
}

/* The Sandbox name of a target ".../sandboxes/<name>[?...]" into out, or "". */
static void sb_name(const char *target, char *out, size_t size)
{
    const char *p = strstr(target, "/sandboxes/");
    size_t n = 0;
    out[0] = '\0';
    if (!p)
        return;
    p += strlen("/sandboxes/");
    while (p[n] && p[n] != '?' && p[n] != '/' && n + 1 < size)
        n++;
    (void)snprintf(out, size, "%.*s", (int)n, p);
}

static char *patch_sb(const char *name, const json_t *obj, long *status)
{
    json_t *cur = json_object_get(S.objs, name);
    json_t *code = json_object_get(S.patch_code, name);
    char rv[32];
    count(S.patches, name);
    json_object_set(S.last_patch, name, (json_t *)obj);
    *status = code ? (long)json_integer_value(code) : cur ? 200 : 404;
    if (*status != 200)
        return script_failure(*status, NULL);
    merge(cur, obj);
    (void)snprintf(rv, sizeof(rv), "%d", 100 + ++S.next_uid);
    json_object_set_new(json_object_get(cur, "metadata"), "resourceVersion", json_string(rv));
    return json_dumps(cur, JSON_COMPACT);
}

static char *post_sb(json_t *obj, long *status)
{
    char uid[64];
    json_t *meta = json_object_get(obj, "metadata");
    S.posts++;
    *status = S.post_code;
    if (*status != 201)
        return script_failure(*status, NULL);
    (void)snprintf(uid, sizeof(uid), "s0000000-0000-0000-0000-%012d", ++S.next_uid);
    json_object_set_new(meta, "uid", json_string(uid));
    json_object_set_new(meta, "resourceVersion", json_string("900"));
    if (kube_obj_name(obj))
        json_object_set(S.objs, kube_obj_name(obj), obj);
    return json_dumps(obj, JSON_COMPACT);
}

/* Answers one request (script_handler; called with the server's lock held). */
static int answer(int fd, const struct script_req *rq, void *ctx)
{
    const char *method = rq->method, *target = rq->target;
    json_t *obj = rq->body[0] ? json_loads(rq->body, 0, NULL) : NULL;
    char name[256], *text = NULL;
    long status = 200;
    (void)ctx;
    sb_name(target, name, sizeof(name));
    if (strcmp(method, "PATCH") == 0 && strstr(target, "/sandboxclaims/")) {
        json_array_append(S.claim_writes, obj);
        text = xstrdup("{}");
    } else if (strcmp(method, "PATCH") == 0 && strstr(target, "/sandboxwarmpools/")) {
        text = xstrdup("{}");
    } else if (strcmp(method, "PATCH") == 0 && name[0]) {
        text = patch_sb(name, obj, &status);
    } else if (strcmp(method, "POST") == 0 && strstr(target, "/sandboxes") && obj) {
        text = post_sb(obj, &status);
    } else if (strcmp(method, "DELETE") == 0 && name[0]) {
        count(S.deletes, name);
        json_object_del(S.objs, name);
        text = xstrdup("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Success\"}");
    } else if (strcmp(method, "GET") == 0 && name[0]) {
        json_t *cur = json_object_get(S.objs, name);
        status = cur ? 200 : 404;
        text = cur ? json_dumps(cur, JSON_COMPACT) : script_failure(404, NULL);
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

static void srv_start(void)
{
    memset(&S, 0, sizeof(S));
    S.objs = json_object();
    S.patch_code = json_object();
    S.patches = json_object();
    S.last_patch = json_object();
    S.deletes = json_object();
    S.claim_writes = json_array();
    S.post_code = 201;
    script_env_start(&ENV, answer, NULL, true, NS, NULL);
}

/* Reads of the server's state (under its lock: the server thread writes it). */
static int n_of(json_t *counts, const char *name)
{
    script_srv_lock(ENV.srv);
    int n = (int)json_integer_value(json_object_get(counts, name));
    script_srv_unlock(ENV.srv);
    return n;
}

static int n_posts(void)
{
    script_srv_lock(ENV.srv);
    int n = S.posts;
    script_srv_unlock(ENV.srv);
    return n;
}

static void srv_set(json_t *map, const char *name, json_t *v)
{
    script_srv_lock(ENV.srv);
    json_object_set_new(map, name, v);
    script_srv_unlock(ENV.srv);
}

static void set_post_code(long code)
{
    script_srv_lock(ENV.srv);
    S.post_code = code;
    script_srv_unlock(ENV.srv);
}

/* The last claim status write's status (new reference), or NULL. */
static json_t *last_claim_status(void)
{
    json_t *st;
    script_srv_lock(ENV.srv);
    size_t n = json_array_size(S.claim_writes);
    st = n ? json_incref(json_object_get(json_array_get(S.claim_writes, n - 1), "status")) : NULL;
    script_srv_unlock(ENV.srv);
    return st;
}

/* ---- the controller on test caches -------------------------------------------------- */

struct env {
    struct kube_informer *sandboxes, *pods;
    struct ext_ctrl *x;
};

static struct env E;

static void ctrl_new(bool no_annotations)
{
    struct ext_opts o = {.side_hold = USEC_INFINITY,
                         .claim_timeout = USEC_INFINITY,
                         .no_claim_events = true,
                         .no_claim_annotations = no_annotations,
                         .label_domains = "sandbox.users.io"};
    struct ext_deps d = {.client = ENV.client, .ns = NS};
    struct kube_informer_opts io = {.client = ENV.client, .ns = NS};
    assert_int_equal(ext_ctrl_new(&o, &d, &E.x), 0);
    assert_int_equal(ext__informers_new(E.x), 0);
    io.res = &API_RES_SANDBOXES;
    assert_int_equal(kube_informer_new(&io, &E.sandboxes), 0);
    io.res = &KUBE_RES_PODS;
    assert_int_equal(kube_informer_new(&io, &E.pods), 0);
    assert_int_equal(ext_ctrl_attach(E.x, E.sandboxes, E.pods), 0);
}

static int setup(void **state)
{
    (void)state;
    log_set_level(LOG_ERROR);
    memset(&E, 0, sizeof(E));
    srv_start();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ext_ctrl_free(E.x);
    kube_informer_free(E.sandboxes);
    kube_informer_free(E.pods);
    script_env_stop(&ENV);
    json_decref(S.objs);
    json_decref(S.patch_code);
    json_decref(S.patches);
    json_decref(S.last_patch);
    json_decref(S.deletes);
    json_decref(S.claim_writes);
    return 0;
}

/* ---- objects ------------------------------------------------------------------------ */

static void now_text(char *out, size_t size)
{
    clock_format_rfc3339_sec(clock_wall_now(), out, size);
}

static json_t *meta(const char *name, const char *uid)
{
    char now[64];
    now_text(now, sizeof(now));
    return json_pack("{s:s, s:s, s:s, s:s, s:i, s:s}", "name", name, "namespace", NS, "uid", uid,
                     "resourceVersion", "5", "generation", 1, "creationTimestamp", now);
}

static void put(int which, json_t *obj)
{
    struct kube_store *s =
        which == EXT_INF_COUNT ? kube_informer_store(E.sandboxes) : ext__store(E.x, which);
    assert_int_equal(kube_store_put(s, obj, NULL), 0);
}

static json_t *template_obj(const char *name, bool late)
{
    json_t *t =
        json_pack("{s:s, s:s, s:o, s:{s:{s:{s:[{s:s, s:s}]}}, s:s}}", "apiVersion", EXT_API_VERSION,
                  "kind", EXT_KIND_TEMPLATE, "metadata",
                  meta(name, "t0000000-0000-0000-0000-000000000001"), "spec", "podTemplate", "spec",
                  "containers", "name", "c", "image", "i", "envVarsInjectionPolicy", "Allowed");
    if (late)
        json_object_set_new(json_object_get(t, "spec"), "claimConfigDelivery",
                            json_pack("{s:s}", "mode", "LateBound"));
    return t;
}

static void put_template(const char *name, bool late)
{
    put(EXT_INF_TEMPLATE, template_obj(name, late));
}

/* A template whose pod template has labels (taken). */
static void put_template_labels(const char *name, json_t *labels)
{
    json_t *t = template_obj(name, false);
    json_object_set_new(json_object_get(kube_obj_path(t, "spec"), "podTemplate"), "metadata",
                        json_pack("{s:o}", "labels", labels));
    put(EXT_INF_TEMPLATE, t);
}

static json_t *pool_obj(const char *tpl, int replicas, bool deleting)
{
    json_t *p = json_pack("{s:s, s:s, s:o, s:{s:i, s:{s:s}}}", "apiVersion", EXT_API_VERSION,
                          "kind", EXT_KIND_POOL, "metadata", meta(POOL, POOL_UID), "spec",
                          "replicas", replicas, "sandboxTemplateRef", "name", tpl);
    if (deleting)
        json_object_set_new(json_object_get(p, "metadata"), "deletionTimestamp",
                            json_string("2026-01-01T00:00:00Z"));
    return p;
}

/* The pool with updateStrategy type (Recreate or OnReplenish). */
static json_t *pool_strategy(const char *tpl, const char *type)
{
    json_t *p = pool_obj(tpl, 1, false);
    json_object_set_new(json_object_get(p, "spec"), "updateStrategy",
                        json_pack("{s:s}", "type", type));
    return p;
}

static json_t *owner(const char *kind, const char *name, const char *uid)
{
    return json_pack("[{s:s, s:s, s:s, s:s, s:b, s:b}]", "apiVersion", EXT_API_VERSION, "kind",
                     kind, "name", name, "uid", uid, "controller", 1, "blockOwnerDeletion", 1);
}

/* A Ready pool member built from template tpl, at pod IP ip. */
static json_t *member(const char *name, const char *tpl, const char *ip)
{
    char uid[64], ph[SB_HASH_LEN + 1], th[SB_HASH_LEN + 1], now[64];
    json_t *m, *md;
    (void)snprintf(uid, sizeof(uid), "m0000000-0000-0000-0000-%012zu", strlen(name));
    sb_name_hash(POOL, ph);
    sb_name_hash(tpl, th);
    now_text(now, sizeof(now));
    md = meta(name, uid);
    json_object_set_new(md, "labels",
                        json_pack("{s:s, s:s}", SB_LABEL_WARM_POOL, ph, SB_LABEL_TEMPLATE_REF, th));
    json_object_set_new(md, "ownerReferences", owner(EXT_KIND_POOL, POOL, POOL_UID));
    m = json_pack("{s:s, s:s, s:o, s:{s:{s:{}, s:{s:[{s:s, s:s}]}}}, s:{s:[{s:s, s:s, s:s, "
                  "s:s, s:s}], s:[s]}}",
                  "apiVersion", SB_API_VERSION, "kind", "Sandbox", "metadata", md, "spec",
                  "podTemplate", "metadata", "spec", "containers", "name", "c", "image", "i",
                  "status", "conditions", "type", SB_COND_READY, "status", "True", "reason",
                  "Ready", "message", "", "lastTransitionTime", now, "podIPs", ip);
    return m;
}

/* md (a member's metadata) as the claim's adoption leaves it: controlled by the claim,
 * launch-type warm. */
static void adopted(json_t *md)
{
    json_object_set_new(md, "ownerReferences", owner(EXT_KIND_CLAIM, CLAIM, CL_UID));
    json_object_set_new(json_object_get(md, "labels"), SB_LABEL_LAUNCH_TYPE, json_string("warm"));
}

/* The Ready condition of a claim status st (borrowed from st), failing when there is none. */
static const json_t *status_ready(const json_t *st)
{
    const json_t *c = sb_cond_get(st, SB_COND_READY);
    assert_non_null(c);
    return c;
}

/* m (taken) as the server has it (a copy) and, unless server_only, the cache too. */
static void put_member(json_t *m, bool server_only)
{
    srv_set(S.objs, kube_obj_name(m), json_deep_copy(m));
    if (server_only)
        json_decref(m);
    else
        put(EXT_INF_COUNT, m);
}

static json_t *claim_obj(bool env)
{
    json_t *c = json_pack("{s:s, s:s, s:o, s:{s:{s:s}}}", "apiVersion", EXT_API_VERSION, "kind",
                          EXT_KIND_CLAIM, "metadata", meta(CLAIM, CL_UID), "spec", "warmPoolRef",
                          "name", POOL);
    if (env)
        json_object_set_new(json_object_get(c, "spec"), "env",
                            json_pack("[{s:s, s:s}]", "name", "A", "value", "1"));
    return c;
}

static int claim_pass(usec_t *ret_requeue)
{
    usec_t rq = 0;
    int r = claim_reconcile(E.x, NS "/" CLAIM, &rq);
    if (ret_requeue)
        *ret_requeue = rq;
    return r;
}

static void queue_candidate(const char *name)
{
    claim_queue_push(E.x->cq, NS "/" POOL, name);
}

/* ---- finding 1: the claim and pool loops keep their timers on failure --------------- */

static void test_loops_keep_timers_on_error(void **state)
{
    (void)state;
    ctrl_new(false);
    assert_true(workloop_requeues_on_error(E.x->loops[EXT_LOOP_CLAIM]));
    assert_true(workloop_requeues_on_error(E.x->loops[EXT_LOOP_POOL]));
}

/* ---- finding 4: a refused adoption skips the candidate ------------------------------ */

static void adoption_refused(long code)
{
    ctrl_new(false);
    put_template(TPL, false);
    put(EXT_INF_POOL, pool_obj(TPL, 1, false));
    put(EXT_INF_CLAIM, claim_obj(false));
    put_member(member("pool-aaaaa", TPL, "10.0.0.1"), false);
    queue_candidate("pool-aaaaa");
    srv_set(S.patch_code, "pool-aaaaa", json_integer(code));
    /* the refusal does not stop the pass: a cold Sandbox instead */
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_of(S.patches, "pool-aaaaa"), 1);
    assert_int_equal(n_posts(), 1);
    /* the candidate stays for other claims */
    assert_int_equal(claim_queue_len(E.x->cq, NS "/" POOL), 1);
}

static void test_adoption_forbidden_goes_cold(void **state)
{
    (void)state;
    adoption_refused(403);
}

static void test_adoption_invalid_goes_cold(void **state)
{
    (void)state;
    adoption_refused(422);
}

/* A 5xx may clear: the pass stops (and is retried) and no cold Sandbox is made. */
static void test_adoption_5xx_stops_pass(void **state)
{
    (void)state;
    ctrl_new(false);
    put_template(TPL, false);
    put(EXT_INF_POOL, pool_obj(TPL, 1, false));
    put(EXT_INF_CLAIM, claim_obj(false));
    put_member(member("pool-aaaaa", TPL, "10.0.0.1"), false);
    queue_candidate("pool-aaaaa");
    srv_set(S.patch_code, "pool-aaaaa", json_integer(503));
    assert_true(claim_pass(NULL) < 0); /* sent again, read back: still unsure */
    assert_true(n_of(S.patches, "pool-aaaaa") >= 1);
    assert_int_equal(n_posts(), 0);
}

/* A member whose pod metadata is at odds with the claim's (built from a former template
 * of the pool that sets the claim's label otherwise): skipped, cold instead. */
static void test_adoption_meta_conflict_goes_cold(void **state)
{
    json_t *m, *cl;
    (void)state;
    ctrl_new(false);
    put_template(TPL, false);
    put_template_labels("old-tpl", json_pack("{s:s}", "sandbox.users.io/x", "a"));
    put(EXT_INF_POOL, pool_obj(TPL, 1, false));
    cl = claim_obj(false);
    json_object_set_new(json_object_get(cl, "spec"), "additionalPodMetadata",
                        json_pack("{s:{s:s}}", "labels", "sandbox.users.io/x", "b"));
    put(EXT_INF_CLAIM, cl);
    m = member("pool-aaaaa", "old-tpl", "10.0.0.1");
    json_object_set_new(json_object_get(kube_obj_path(m, "spec.podTemplate"), "metadata"), "labels",
                        json_pack("{s:s}", "sandbox.users.io/x", "a"));
    put_member(m, false);
    queue_candidate("pool-aaaaa");
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_of(S.patches, "pool-aaaaa"), 0);
    assert_int_equal(n_posts(), 1);
    assert_int_equal(claim_queue_len(E.x->cq, NS "/" POOL), 1);
}

/* ---- pod metadata at adoption ---------------------------------------------------------- */

/* The server's copy of Sandbox name (new reference). */
static json_t *srv_obj(const char *name)
{
    json_t *o;
    script_srv_lock(ENV.srv);
    o = json_deep_copy(json_object_get(S.objs, name));
    script_srv_unlock(ENV.srv);
    return o;
}

/* The body of the last PATCH of Sandbox name (new reference), or NULL. */
static json_t *last_patch(const char *name)
{
    json_t *o;
    script_srv_lock(ENV.srv);
    o = json_deep_copy(json_object_get(S.last_patch, name));
    script_srv_unlock(ENV.srv);
    return o;
}

/* Adopts a member whose pod template has labels (taken) and the pool's safe-to-evict, by a
 * claim with created-by python-client and additionalPodMetadata session=s-1 (none without
 * apm), the adoption editing the pod template as upstream or not (edit). */
static void adopt_with_meta(json_t *labels, bool apm, bool edit)
{
    json_t *m, *cl;
    ctrl_new(false);
    E.x->o.adopt_edit_template = edit;
    put_template_labels(TPL, json_pack("{s:s}", "sandbox.users.io/tier", "gold"));
    put(EXT_INF_POOL, pool_obj(TPL, 1, false));
    cl = claim_obj(false);
    json_object_set_new(json_object_get(cl, "metadata"), "labels",
                        json_pack("{s:s}", SB_LABEL_CREATED_BY, "python-client"));
    if (apm)
        json_object_set_new(json_object_get(cl, "spec"), "additionalPodMetadata",
                            json_pack("{s:{s:s}}", "labels", "sandbox.users.io/session", "s-1"));
    put(EXT_INF_CLAIM, cl);
    m = member("pool-aaaaa", TPL, "10.0.0.1");
    json_object_set_new(json_object_get(kube_obj_path(m, "spec.podTemplate"), "metadata"), "labels",
                        labels);
    json_object_set_new(json_object_get(kube_obj_path(m, "spec.podTemplate"), "metadata"),
                        "annotations", json_pack("{s:s}", SB_ANN_SAFE_TO_EVICT, "true"));
    put_member(m, false);
    queue_candidate("pool-aaaaa");
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_of(S.patches, "pool-aaaaa"), 1);
}

static const char *pod_label(const json_t *sb, const char *key)
{
    return json_string_value(
        json_object_get(kube_obj_path(sb, "spec.podTemplate.metadata.labels"), key));
}

static const char *pod_annotation(const json_t *sb, const char *key)
{
    return json_string_value(
        json_object_get(kube_obj_path(sb, "spec.podTemplate.metadata.annotations"), key));
}

/* An adopted member's pod metadata is rebuilt from the template as it is now (a label the
 * template changed since the member was made), with the claim's additionalPodMetadata;
 * the pool's safe-to-evict stays in the pod template (kept off the Pod). Before, the
 * member's old labels stayed. With --warm-adoption-edits-pod-template the claim's identity
 * labels go in too and safe-to-evict goes, as upstream. */
static void test_adoption_pod_meta_from_template(void **state)
{
    char th[SB_HASH_LEN + 1];
    json_t *got;
    (void)state;
    sb_name_hash(TPL, th);
    for (int edit = 0; edit < 2; edit++) {
        adopt_with_meta(json_pack("{s:s}", "sandbox.users.io/tier", "silver"), true, edit);
        got = srv_obj("pool-aaaaa");
        assert_string_equal(pod_label(got, "sandbox.users.io/tier"), "gold");
        assert_string_equal(pod_label(got, "sandbox.users.io/session"), "s-1");
        if (edit) {
            assert_string_equal(pod_label(got, EXT_LABEL_CLAIM_UID), CL_UID);
            assert_string_equal(pod_label(got, SB_LABEL_TEMPLATE_REF), th);
            assert_string_equal(pod_label(got, SB_LABEL_CREATED_BY), "python-client");
            assert_null(pod_annotation(got, SB_ANN_SAFE_TO_EVICT));
        } else {
            assert_null(pod_label(got, EXT_LABEL_CLAIM_UID));
            assert_string_equal(pod_annotation(got, SB_ANN_SAFE_TO_EVICT), "true");
            assert_string_equal(kube_obj_annotation(got, SB_ANN_POD_OMIT_EVICT), "true");
        }
        json_decref(got);
        teardown(NULL);
        setup(NULL);
    }
}

/* A member built from the template as it is, for a claim without additionalPodMetadata:
 * the adoption changes no spec (no new generation, so no Sandbox status rewrite). */
static void test_adoption_of_fresh_member_changes_no_spec(void **state)
{
    json_t *p;
    (void)state;
    adopt_with_meta(json_pack("{s:s}", "sandbox.users.io/tier", "gold"), false, false);
    p = last_patch("pool-aaaaa");
    assert_non_null(p);
    assert_null(json_object_get(p, "spec"));
    json_decref(p);
}

/* ---- a bound claim's additionalPodMetadata ------------------------------------------ */

/* The claim with additionalPodMetadata apm (taken) in the cache. */
static void put_claim_apm(json_t *apm)
{
    json_t *cl = claim_obj(false);
    json_object_set_new(json_object_get(cl, "spec"), "additionalPodMetadata", apm);
    put(EXT_INF_CLAIM, cl);
}

/* A bound claim's additionalPodMetadata edits reach its Sandbox's pod template: an
 * annotation added, then replaced by another (the first removed); nothing is written once
 * they match, and a warm Sandbox gets no identity labels there (its adoption gave it none).
 * Before, only the adoption or the cold create set them. */
static void test_bound_claim_pod_meta_synced(void **state)
{
    json_t *m, *got;
    const json_t *pa;
    (void)state;
    ctrl_new(false);
    put_template(TPL, false);
    put(EXT_INF_POOL, pool_obj(TPL, 1, false));
    m = member("pool-aaaaa", TPL, "10.0.0.1");
    adopted(json_object_get(m, "metadata"));
    put_member(m, false);
    put_claim_apm(json_pack("{s:{s:s}}", "annotations", "podsnapshot.gke.io/ps-name", "snap-1"));
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_of(S.patches, "pool-aaaaa"), 1);
    got = srv_obj("pool-aaaaa");
    pa = kube_obj_path(got, "spec.podTemplate.metadata.annotations");
    assert_string_equal(json_string_value(json_object_get(pa, "podsnapshot.gke.io/ps-name")),
                        "snap-1");
    assert_null(pod_label(got, EXT_LABEL_CLAIM_UID));
    put(EXT_INF_COUNT, got); /* the cache catches up */
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_of(S.patches, "pool-aaaaa"), 1); /* nothing to change */
    put_claim_apm(json_pack("{s:{s:s}}", "annotations", "sandbox.users.io/b", "2"));
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_of(S.patches, "pool-aaaaa"), 2);
    got = srv_obj("pool-aaaaa");
    pa = kube_obj_path(got, "spec.podTemplate.metadata.annotations");
    assert_null(json_object_get(pa, "podsnapshot.gke.io/ps-name"));
    assert_string_equal(json_string_value(json_object_get(pa, "sandbox.users.io/b")), "2");
    json_decref(got);
}

/* A cold Sandbox keeps its identity labels in sync: the claim's created-by changed, in its
 * pod template and on the Sandbox, with an annotation the claim added. */
static void test_cold_claim_pod_meta_synced(void **state)
{
    json_t *cl, *got;
    (void)state;
    ctrl_new(false);
    put_template(TPL, false);
    put(EXT_INF_POOL, pool_obj(TPL, 0, false));
    put(EXT_INF_CLAIM, claim_obj(false));
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_posts(), 1);
    got = srv_obj(CLAIM);
    assert_string_equal(pod_label(got, EXT_LABEL_CLAIM_UID), CL_UID);
    assert_null(pod_label(got, SB_LABEL_CREATED_BY));
    put(EXT_INF_COUNT, got);
    cl = claim_obj(false);
    json_object_set_new(json_object_get(cl, "metadata"), "labels",
                        json_pack("{s:s}", SB_LABEL_CREATED_BY, "python-client"));
    json_object_set_new(json_object_get(cl, "spec"), "additionalPodMetadata",
                        json_pack("{s:{s:s}}", "annotations", "note", "n"));
    put(EXT_INF_CLAIM, cl);
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_of(S.patches, CLAIM), 1);
    got = srv_obj(CLAIM);
    assert_string_equal(pod_label(got, EXT_LABEL_CLAIM_UID), CL_UID);
    assert_string_equal(pod_label(got, SB_LABEL_CREATED_BY), "python-client");
    assert_string_equal(kube_obj_label(got, SB_LABEL_CREATED_BY), "python-client");
    assert_string_equal(pod_annotation(got, "note"), "n");
    json_decref(got);
}

/* A key the template sets otherwise fails the claim (ReconcilerError, as at provisioning)
 * and is not written; a binding the cache does not show yet is not synced. */
static void test_bound_claim_pod_meta_conflict_and_unconfirmed(void **state)
{
    json_t *m, *st, *cl;
    (void)state;
    ctrl_new(false);
    put_template_labels(TPL, json_pack("{s:s}", "sandbox.users.io/x", "a"));
    put(EXT_INF_POOL, pool_obj(TPL, 1, false));
    m = member("pool-aaaaa", TPL, "10.0.0.1");
    adopted(json_object_get(m, "metadata"));
    put_member(json_incref(m), false);
    put_claim_apm(json_pack("{s:{s:s}}", "labels", "sandbox.users.io/x", "b"));
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_of(S.patches, "pool-aaaaa"), 0);
    st = last_claim_status();
    assert_string_equal(json_string_value(json_object_get(status_ready(st), "reason")),
                        SB_R_RECONCILER_ERROR);
    json_decref(st);
    json_decref(m);
    /* the adoption as its PATCH returned it; the cache still shows the pool's member */
    put_claim_apm(json_pack("{s:{s:s}}", "labels", "sandbox.users.io/y", "b"));
    put(EXT_INF_COUNT, member("pool-aaaaa", TPL, "10.0.0.1"));
    m = member("pool-aaaaa", TPL, "10.0.0.1");
    adopted(json_object_get(m, "metadata"));
    json_object_set_new(json_object_get(m, "metadata"), "resourceVersion", json_string("6"));
    cl = kube_store_get(ext__store(E.x, EXT_INF_CLAIM), NS "/" CLAIM);
    ext__binding_put(E.x, cl, m);
    json_decref(cl);
    json_decref(m);
    assert_int_equal(claim_pass(NULL), 0);
    assert_true(ext__binding_has(E.x, CL_UID));
    assert_int_equal(n_of(S.patches, "pool-aaaaa"), 0); /* unconfirmed: not yet */
}

/* ---- a template edit clears a metadata conflict ------------------------------------- */

/* The claim keys queued on the claim loop (the loops are not started), drained. */
static size_t claims_queued(void)
{
    struct wq *q = workloop_queue(E.x->loops[EXT_LOOP_CLAIM]);
    size_t n = wq_len(q);
    for (size_t i = 0; i < n; i++) {
        const char *k;
        assert_int_equal(wq_get(q, &k), 0);
        assert_string_equal(k, NS "/" CLAIM);
        wq_done(q, k);
    }
    return n;
}

/* A claim whose additionalPodMetadata sets a key the template sets otherwise fails
 * (ReconcilerError); an edit of the template that drops the key brings it back and it is
 * served. Before, nothing did: the failed pass was not retried and a template edit queued
 * only its pools. Its labelling (no new generation) queues no claim. */
static void test_template_edit_requeues_conflicting_claim(void **state)
{
    struct kube_informer_handlers h;
    json_t *o, *n, *st;
    (void)state;
    ctrl_new(false);
    put_template_labels(TPL, json_pack("{s:s}", "sandbox.users.io/x", "a"));
    put(EXT_INF_POOL, pool_obj(TPL, 0, false));
    put_claim_apm(json_pack("{s:{s:s}}", "labels", "sandbox.users.io/x", "b"));
    (void)claims_queued();
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_posts(), 0);
    st = last_claim_status();
    assert_string_equal(json_string_value(json_object_get(status_ready(st), "reason")),
                        SB_R_RECONCILER_ERROR);
    json_decref(st);
    ext__handlers(EXT_INF_TEMPLATE, &h);
    o = kube_store_get(ext__store(E.x, EXT_INF_TEMPLATE), NS "/" TPL);
    n = json_deep_copy(o);
    json_object_set_new(json_object_get(n, "metadata"), "labels",
                        json_pack("{s:s}", SB_LABEL_TEMPLATE_REF, "x"));
    h.on_update(E.x, o, n); /* labelled only */
    assert_int_equal(claims_queued(), 0);
    json_object_set_new(json_object_get(n, "metadata"), "generation", json_integer(2));
    json_object_del(json_object_get(n, "spec"), "podTemplate");
    json_object_set_new(
        json_object_get(n, "spec"), "podTemplate",
        json_pack("{s:{s:[{s:s, s:s}]}}", "spec", "containers", "name", "c", "image", "i"));
    put(EXT_INF_TEMPLATE, json_incref(n));
    h.on_update(E.x, o, n);
    assert_int_equal(claims_queued(), 1);
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_posts(), 1);
    json_decref(o);
    json_decref(n);
}

/* ---- the claim timeout ---------------------------------------------------------------- */

/* t (wall usec) as RFC 3339 into out. */
static void time_text(usec_t t, char *out, size_t size)
{
    clock_format_rfc3339_sec(t, out, size);
}

/* The claim (env-less) made at created, with a Ready condition status/reason since at
 * (at 0: no status), into the cache. */
static void put_claim_at(usec_t created, const char *status, const char *reason, usec_t at)
{
    json_t *cl = claim_obj(false);
    char ct[64], lt[64];
    time_text(created, ct, sizeof(ct));
    json_object_set_new(json_object_get(cl, "metadata"), "creationTimestamp", json_string(ct));
    if (at) {
        time_text(at, lt, sizeof(lt));
        json_object_set_new(cl, "status",
                            json_pack("{s:[{s:s, s:s, s:s, s:s, s:s, s:i}]}", "conditions", "type",
                                      SB_COND_READY, "status", status, "reason", reason, "message",
                                      "", "lastTransitionTime", lt, "observedGeneration", 1));
    }
    put(EXT_INF_CLAIM, cl);
}

/* The last claim status write's Ready reason is want; with kept, a write that leaves the
 * conditions as they were (the claim's reason, want, kept) does too. */
static void assert_last_reason(const char *want, bool kept)
{
    json_t *st = last_claim_status();
    assert_non_null(st);
    if (!kept || json_object_get(st, "conditions"))
        assert_string_equal(json_string_value(json_object_get(status_ready(st), "reason")), want);
    json_decref(st);
}

/* A claim made while its pool's template is missing, whose template comes after the claim
 * timeout: it reports ClaimTimeout, and is provisioned once the template is there (its
 * creation queues the claim). Before, a timed-out claim was never provisioned. */
static void test_timed_out_claim_provisioned_when_template_appears(void **state)
{
    struct kube_informer_handlers h;
    usec_t now = clock_wall_now();
    json_t *t;
    (void)state;
    ctrl_new(false);
    E.x->o.claim_timeout = 0; /* the default, 10 minutes */
    put(EXT_INF_POOL, pool_obj(TPL, 0, false));
    put_claim_at(now - 11 * 60 * USEC_PER_SEC, NULL, NULL, 0);
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_posts(), 0);
    assert_last_reason(EXT_R_CLAIM_TIMEOUT, false);
    put_template(TPL, false);
    t = kube_store_get(ext__store(E.x, EXT_INF_TEMPLATE), NS "/" TPL);
    ext__handlers(EXT_INF_TEMPLATE, &h);
    (void)claims_queued();
    h.on_add(E.x, t);
    json_decref(t);
    assert_int_equal(claims_queued(), 1);
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_posts(), 1);
}

/* With the annotations disabled, a claim that was Ready (this process saw it) and whose
 * Sandbox is not Ready later is not timed out, and one whose Sandbox went is provisioned
 * again; after a restart its Ready condition's late flip says the same. Before, both were
 * ClaimTimeout past the timeout, and the second never got a Sandbox. */
static void test_once_ready_claim_never_times_out(void **state)
{
    usec_t now = clock_wall_now(), created = now - 11 * 60 * USEC_PER_SEC;
    json_t *m;
    (void)state;
    ctrl_new(true);
    E.x->o.claim_timeout = 0;
    put_template(TPL, false);
    put(EXT_INF_POOL, pool_obj(TPL, 0, false));
    m = member("pool-aaaaa", TPL, "10.0.0.1");
    adopted(json_object_get(m, "metadata"));
    put_member(json_incref(m), false);
    put_claim_at(created, NULL, NULL, 0);
    assert_int_equal(claim_pass(NULL), 0); /* Ready */
    assert_last_reason("Ready", false);
    /* its Pod is lost; the claim's status flipped right after its first write (no history
     * to read: only this process's memory tells) */
    json_object_set_new(json_array_get(kube_obj_path(m, "status.conditions"), 0), "status",
                        json_string("False"));
    json_object_set_new(json_array_get(kube_obj_path(m, "status.conditions"), 0), "reason",
                        json_string("DependenciesNotReady"));
    put_member(json_incref(m), false);
    put_claim_at(created, "False", "DependenciesNotReady", created + USEC_PER_SEC);
    assert_int_equal(claim_pass(NULL), 0);
    assert_last_reason("DependenciesNotReady", true);
    /* its Sandbox is gone: provisioned again */
    assert_int_equal(kube_store_remove(kube_informer_store(E.sandboxes), NS "/pool-aaaaa", NULL),
                     0);
    script_srv_lock(ENV.srv);
    json_object_del(S.objs, "pool-aaaaa");
    script_srv_unlock(ENV.srv);
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_posts(), 1);
    json_decref(m);
    /* a restarted controller: the claim flipped to not Ready five minutes after its
     * creation, so it was Ready before */
    teardown(NULL);
    setup(NULL);
    ctrl_new(true);
    E.x->o.claim_timeout = 0;
    put_template(TPL, false);
    put(EXT_INF_POOL, pool_obj(TPL, 0, false));
    m = member("pool-aaaaa", TPL, "10.0.0.1");
    adopted(json_object_get(m, "metadata"));
    json_object_set_new(json_array_get(kube_obj_path(m, "status.conditions"), 0), "status",
                        json_string("False"));
    json_object_set_new(json_array_get(kube_obj_path(m, "status.conditions"), 0), "reason",
                        json_string("DependenciesNotReady"));
    put_member(m, false);
    put_claim_at(created, "False", "DependenciesNotReady", created + 5 * 60 * USEC_PER_SEC);
    assert_int_equal(claim_pass(NULL), 0);
    assert_last_reason("DependenciesNotReady", true);
}

/* ---- finding 2: members of the pool's former template ------------------------------- */

static void test_other_template_member_not_adopted(void **state)
{
    (void)state;
    ctrl_new(false);
    put_template(TPL, false);
    put(EXT_INF_POOL, pool_obj(TPL, 1, false));
    put(EXT_INF_CLAIM, claim_obj(false));
    put_member(member("pool-aaaaa", "old-tpl", "10.0.0.1"), false);
    queue_candidate("pool-aaaaa");
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_of(S.patches, "pool-aaaaa"), 0);
    assert_int_equal(n_posts(), 1);
}

/* ---- the Recreate-strategy guard ---------------------------------------------------- */

/* Under Recreate a member built from an older version of the template (another
 * fingerprint, another image) is the pool's to replace, not handed out: the claim goes
 * cold. Before, it was adopted like a fresh one. */
static void test_recreate_stale_member_not_adopted(void **state)
{
    json_t *m;
    (void)state;
    ctrl_new(false);
    put_template(TPL, false);
    put(EXT_INF_POOL, pool_strategy(TPL, "Recreate"));
    put(EXT_INF_CLAIM, claim_obj(false));
    m = member("pool-aaaaa", TPL, "10.0.0.1");
    json_object_set_new(json_object_get(json_object_get(m, "metadata"), "labels"),
                        EXT_LABEL_TEMPLATE_HASH, json_string("0123456789"));
    json_object_set_new(json_array_get(kube_obj_path(m, "spec.podTemplate.spec.containers"), 0),
                        "image", json_string("old"));
    put_member(m, false);
    queue_candidate("pool-aaaaa");
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_of(S.patches, "pool-aaaaa"), 0);
    assert_int_equal(n_posts(), 1);
    assert_int_equal(claim_queue_len(E.x->cq, NS "/" POOL), 0); /* dropped: the pool deletes it */
}

/* Under Recreate a member built from the template as it is now is adopted; under
 * OnReplenish a stale one is too (as upstream). */
static void test_recreate_fresh_member_adopted(void **state)
{
    (void)state;
    for (int stale = 0; stale < 2; stale++) {
        char bh[SB_HASH_LEN + 1];
        json_t *m, *t;
        ctrl_new(false);
        put_template(TPL, false);
        put(EXT_INF_POOL, pool_strategy(TPL, stale ? "OnReplenish" : "Recreate"));
        put(EXT_INF_CLAIM, claim_obj(false));
        t = kube_store_get(ext__store(E.x, EXT_INF_TEMPLATE), NS "/" TPL);
        tpl_blueprint_hash(t, bh);
        json_decref(t);
        m = member("pool-aaaaa", TPL, "10.0.0.1");
        json_object_set_new(json_object_get(json_object_get(m, "metadata"), "labels"),
                            EXT_LABEL_TEMPLATE_HASH, json_string(stale ? "0123456789" : bh));
        put_member(m, false);
        queue_candidate("pool-aaaaa");
        assert_int_equal(claim_pass(NULL), 0);
        assert_int_equal(n_of(S.patches, "pool-aaaaa"), 1);
        assert_int_equal(n_posts(), 0);
        teardown(NULL);
        setup(NULL);
    }
}

/* A member with an idle policy that waited in the pool longer than its timeout (made and
 * Ready an hour ago) is adopted with a last-activity annotation of the hand-out, so the
 * idle decision waits the whole timeout from the claim; before, its creation and Ready
 * times made it due at once, and sandboxd (no request since its start) confirmed it:
 * suspended as soon as it was claimed. A member without a policy gets no annotation. */
static void test_adopted_member_idle_clock_starts_at_claim(void **state)
{
    char old[64];
    usec_t wait = 0;
    (void)state;
    for (int with = 1; with >= 0; with--) {
        const char *name = with ? "pool-idle1" : "pool-none0";
        json_t *m = member(name, TPL, "10.0.0.1"), *got;
        clock_format_rfc3339_sec(clock_wall_now() - 3600 * USEC_PER_SEC, old, sizeof(old));
        json_object_set_new(json_object_get(m, "metadata"), "creationTimestamp", json_string(old));
        json_object_set_new(json_array_get(kube_obj_path(m, "status.conditions"), 0),
                            "lastTransitionTime", json_string(old));
        if (with)
            json_object_set_new(json_object_get(m, "spec"), "idlePolicy",
                                json_pack("{s:i}", "timeoutSeconds", 600));
        ctrl_new(false);
        put_template(TPL, false);
        put(EXT_INF_POOL, pool_obj(TPL, 1, false));
        put(EXT_INF_CLAIM, claim_obj(false));
        put_member(m, false);
        queue_candidate(name);
        assert_int_equal(claim_pass(NULL), 0);
        assert_int_equal(n_of(S.patches, name), 1);
        script_srv_lock(ENV.srv);
        got = json_deep_copy(json_object_get(S.objs, name));
        script_srv_unlock(ENV.srv);
        assert_null(kube_obj_label(got, SB_LABEL_WARM_POOL)); /* adopted */
        if (with) {
            usec_t t;
            const char *a = kube_obj_annotation(got, SB_ANN_LAST_ACTIVITY);
            assert_non_null(a);
            assert_int_equal(clock_parse_rfc3339(a, &t), 0);
            assert_true(t + 5 * USEC_PER_SEC > clock_wall_now());
            assert_int_equal(idle_decide(got, NULL, 0, clock_wall_now(), &wait), IDLE_WAIT);
            assert_true(wait > 590 * USEC_PER_SEC);
        } else {
            assert_null(kube_obj_annotation(got, SB_ANN_LAST_ACTIVITY));
        }
        json_decref(got);
        teardown(NULL);
        setup(NULL);
    }
}

/* A member of a former template that still exists is handed out (as upstream) and, under
 * OnReplenish, not replaced. */
static void test_former_template_member_kept(void **state)
{
    usec_t rq = 0;
    (void)state;
    ctrl_new(false);
    put_template(TPL, false);
    put_template("old-tpl", false);
    put(EXT_INF_POOL, pool_obj(TPL, 1, false));
    put(EXT_INF_CLAIM, claim_obj(false));
    put_member(member("pool-aaaaa", "old-tpl", "10.0.0.1"), false);
    assert_int_equal(pool_reconcile(E.x, NS "/" POOL, &rq), 0);
    assert_int_equal(n_of(S.deletes, "pool-aaaaa"), 0);
    queue_candidate("pool-aaaaa");
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_of(S.patches, "pool-aaaaa"), 1);
    assert_int_equal(n_posts(), 0);
}

static void test_other_template_member_replaced(void **state)
{
    usec_t rq = 0;
    (void)state;
    ctrl_new(false);
    put_template(TPL, false);
    put(EXT_INF_POOL, pool_obj(TPL, 1, false)); /* OnReplenish (the default) */
    put_member(member("pool-aaaaa", "old-tpl", "10.0.0.1"), false);
    assert_int_equal(pool_reconcile(E.x, NS "/" POOL, &rq), 0);
    assert_int_equal(n_of(S.deletes, "pool-aaaaa"), 1); /* replaced as it goes */
}

/* A Recreate pool's stale members go at most --sandbox-warm-pool-max-batch-size a pass,
 * several at a time with --sandbox-warm-pool-create-parallelism. */
static void test_stale_deletes_batched(void **state)
{
    static const char *const names[] = {"pool-aaaa1", "pool-aaaa2", "pool-aaaa3", "pool-aaaa4",
                                        "pool-aaaa5"};
    usec_t rq = 0;
    int deleted = 0;
    (void)state;
    ctrl_new(false);
    E.x->o.max_batch = 3;
    E.x->o.create_parallel = 4;
    put_template(TPL, false);
    json_t *pool = pool_strategy(TPL, "Recreate");
    json_object_set_new(json_object_get(pool, "spec"), "replicas", json_integer(5));
    put(EXT_INF_POOL, pool);
    for (size_t i = 0; i < 5; i++) {
        json_t *m = member(names[i], TPL, "10.0.0.1");
        json_object_set_new(json_object_get(m, "metadata"), "uid",
                            json_string(names[i])); /* distinct */
        put_member(m, false);
    }
    assert_int_equal(pool_reconcile(E.x, NS "/" POOL, &rq), 0);
    for (size_t i = 0; i < 5; i++)
        deleted += n_of(S.deletes, names[i]);
    assert_int_equal(deleted, 3);
    assert_int_equal(n_posts(), 0); /* the deleted ones still count against the target */
}

/* ---- finding 3: a Sandbox deleted by the fallback is not bound again ----------------- */

static void test_fallback_deleted_not_rebound(void **state)
{
    json_t *m;
    (void)state;
    ctrl_new(false);
    put_template(TPL, true);
    put(EXT_INF_POOL, pool_obj(TPL, 1, false));
    put(EXT_INF_CLAIM, claim_obj(true));
    /* loopback pod IP: the delivery is refused, so the claim falls back to cold */
    put_member(member("pool-aaaaa", TPL, "127.0.0.1"), false);
    queue_candidate("pool-aaaaa");
    set_post_code(500);
    assert_true(claim_pass(NULL) < 0); /* adopted, delivery failed, deleted, create failed */
    assert_int_equal(n_of(S.patches, "pool-aaaaa"), 1);
    assert_int_equal(n_of(S.deletes, "pool-aaaaa"), 1);
    /* the cache now shows the adoption, not yet the deletion */
    m = member("pool-aaaaa", TPL, "127.0.0.1");
    adopted(json_object_get(m, "metadata"));
    json_object_del(json_object_get(json_object_get(m, "metadata"), "labels"), SB_LABEL_WARM_POOL);
    put(EXT_INF_COUNT, m);
    assert_true(claim_pass(NULL) < 0);
    assert_int_equal(n_of(S.deletes, "pool-aaaaa"), 1); /* not taken (nor deleted) again */
    assert_int_equal(n_posts(), 2);                     /* the cold create, retried */
}

/* A late-bound claim that fell back to cold (its delivery failed for a reason of its own)
 * and whose cold create fails is retried cold: before, each pass adopted the next member,
 * failed the same delivery and deleted it, draining the pool at API speed. */
static void test_fallback_retries_cold_only(void **state)
{
    (void)state;
    ctrl_new(false);
    put_template(TPL, true);
    put(EXT_INF_POOL, pool_obj(TPL, 2, false));
    put(EXT_INF_CLAIM, claim_obj(true));
    put_member(member("pool-aaaaa", TPL, "127.0.0.1"), false); /* deliveries refused */
    put_member(member("pool-bbbbb", TPL, "127.0.0.1"), false);
    queue_candidate("pool-aaaaa");
    queue_candidate("pool-bbbbb");
    set_post_code(422); /* an admission policy refuses the cold Sandbox */
    assert_true(claim_pass(NULL) < 0);
    assert_int_equal(n_of(S.deletes, "pool-aaaaa"), 1);
    assert_true(claim_pass(NULL) < 0);
    assert_int_equal(n_of(S.patches, "pool-bbbbb"), 0); /* before: adopted and deleted */
    assert_int_equal(n_of(S.deletes, "pool-bbbbb"), 0);
    assert_int_equal(n_posts(), 2); /* the cold create, again */
}

/* A warm Sandbox bound to a late-bound claim whose env was never delivered (the claim is
 * not Ready) while its template no longer takes env late, or its pool is gone: the claim
 * stays not Ready (before, the Sandbox's Ready made it Ready without its env). */
static void test_undelivered_env_never_ready(void **state)
{
    (void)state;
    for (int gone = 0; gone < 2; gone++) {
        ctrl_new(false);
        put_template(TPL, false); /* ColdStart now */
        if (!gone)
            put(EXT_INF_POOL, pool_obj(TPL, 1, false));
        put(EXT_INF_CLAIM, claim_obj(true));
        json_t *m = member("pool-aaaaa", TPL, "127.0.0.1");
        adopted(json_object_get(m, "metadata"));
        put_member(m, false);
        (void)claim_pass(NULL);
        json_t *st = last_claim_status();
        assert_non_null(st);
        const json_t *c = status_ready(st);
        assert_string_equal(json_string_value(json_object_get(c, "status")), "False");
        assert_string_equal(json_string_value(json_object_get(c, "reason")), LB_R_DELIVERY_FAILED);
        json_decref(st);
        teardown(NULL);
        setup(NULL);
    }
}

/* onFailure: Fail, the delivery never works: the claim times out (ClaimTimeout) as
 * documented; before, its Ready Sandbox kept the timeout from ever applying and the
 * delivery was retried for ever. */
static void test_failing_delivery_times_out(void **state)
{
    (void)state;
    ctrl_new(false);
    put_template(TPL, true);
    json_t *t = kube_store_get(ext__store(E.x, EXT_INF_TEMPLATE), NS "/" TPL);
    json_t *t2 = json_deep_copy(t);
    json_object_set_new(json_object_get(t2, "spec"), "claimConfigDelivery",
                        json_pack("{s:s, s:s}", "mode", "LateBound", "onFailure", "Fail"));
    put(EXT_INF_TEMPLATE, t2);
    json_decref(t);
    put(EXT_INF_POOL, pool_obj(TPL, 1, false));
    json_t *cl = claim_obj(true);
    json_t *md = json_object_get(cl, "metadata");
    json_object_set_new(md, "creationTimestamp", json_string("2020-01-01T00:00:00Z"));
    json_object_set_new(md, "annotations", json_pack("{s:s}", EXT_ANN_CLAIM_TIMEOUT, "1"));
    json_object_set_new(cl, "status",
                        json_pack("{s:[{s:s, s:s, s:s, s:s, s:s, s:i}]}", "conditions", "type",
                                  SB_COND_READY, "status", "False", "reason", LB_R_DELIVERY_FAILED,
                                  "message", "x", "lastTransitionTime", "2020-01-01T00:00:10Z",
                                  "observedGeneration", 1));
    put(EXT_INF_CLAIM, cl);
    json_t *m = member("pool-aaaaa", TPL, "127.0.0.1"); /* deliveries refused */
    adopted(json_object_get(m, "metadata"));
    put_member(m, false);
    assert_int_equal(claim_pass(NULL), 0); /* before: -1, retried for ever */
    json_t *st = last_claim_status();
    assert_non_null(st);
    const json_t *c = status_ready(st);
    assert_string_equal(json_string_value(json_object_get(c, "reason")), "ClaimTimeout");
    json_decref(st);
}

/* ---- finding 5: a claim that used its Sandbox keeps it ------------------------------ */

static void test_no_fallback_after_ready_without_annotations(void **state)
{
    json_t *m, *cl;
    char now[64];
    (void)state;
    ctrl_new(true);
    now_text(now, sizeof(now));
    put_template(TPL, true);
    put(EXT_INF_POOL, pool_obj(TPL, 1, false));
    /* a restarted controller: the claim was Ready on pool-aaaaa (its status says so), the
     * Sandbox went not Ready and is Ready again; no annotation, nothing in memory */
    cl = claim_obj(true);
    json_object_set_new(cl, "status",
                        json_pack("{s:[{s:s, s:s, s:s, s:s, s:s, s:i}], s:{s:s, s:[s]}}",
                                  "conditions", "type", SB_COND_READY, "status", "False", "reason",
                                  "SandboxNotReady", "message", "", "lastTransitionTime", now,
                                  "observedGeneration", 1, "sandbox", "name", "pool-aaaaa",
                                  "podIPs", "127.0.0.1"));
    put(EXT_INF_CLAIM, cl);
    m = member("pool-aaaaa", TPL, "127.0.0.1");
    adopted(json_object_get(m, "metadata"));
    put_member(m, false);
    assert_true(claim_pass(NULL) < 0); /* the redelivery fails */
    assert_int_equal(n_of(S.deletes, "pool-aaaaa"), 0);
    assert_int_equal(n_posts(), 0);
}

/* ---- finding 6: a deleting pool's members are not taken after a settled adoption ---- */

static void test_deleting_pool_prefer_settled_no_new_member(void **state)
{
    json_t *x, *cl;
    (void)state;
    ctrl_new(false);
    put_template(TPL, false);
    put(EXT_INF_POOL, pool_obj(TPL, 2, true));
    cl = claim_obj(false);
    put(EXT_INF_CLAIM, json_incref(cl));
    /* an earlier adoption PATCH of pool-xxxxx whose outcome is unknown: the server still
     * has it as the pool's, in that version; its PATCH now finds it gone (404) */
    x = member("pool-xxxxx", TPL, "10.0.0.1");
    ext__binding_put(E.x, cl, x);
    put_member(x, true);
    srv_set(S.patch_code, "pool-xxxxx", json_integer(404));
    put_member(member("pool-yyyyyyy", TPL, "10.0.0.2"), false);
    queue_candidate("pool-yyyyyyy");
    assert_int_equal(claim_pass(NULL), 0);
    assert_int_equal(n_of(S.patches, "pool-xxxxx"), 1);
    assert_int_equal(n_of(S.patches, "pool-yyyyyyy"), 0); /* the deleting pool's */
    assert_int_equal(n_posts(), 1);                       /* served cold */
    json_decref(cl);
}

/* ---- finding 9: status.sandbox of a Sandbox that is gone ---------------------------- */

static void test_status_sandbox_dropped_when_none(void **state)
{
    json_t *cl, *st;
    char now[64];
    (void)state;
    ctrl_new(false);
    now_text(now, sizeof(now));
    put_template(TPL, false);
    /* no pool (a transient failure), and the claim's Sandbox is gone */
    cl = claim_obj(false);
    json_object_set_new(cl, "status",
                        json_pack("{s:[{s:s, s:s, s:s, s:s, s:s, s:i}], s:{s:s, s:[s]}}",
                                  "conditions", "type", SB_COND_READY, "status", "True", "reason",
                                  "Ready", "message", "", "lastTransitionTime", now,
                                  "observedGeneration", 1, "sandbox", "name", "gone", "podIPs",
                                  "10.0.0.9"));
    put(EXT_INF_CLAIM, cl);
    assert_int_equal(claim_pass(NULL), 0);
    st = last_claim_status();
    assert_non_null(st);
    assert_true(json_is_null(json_object_get(st, "sandbox"))); /* removed by the merge patch */
    json_decref(st);
}

/* ---- finding 13b: an erring claim does not hold the refill -------------------------- */

static void test_erring_claim_does_not_defer_refill(void **state)
{
    json_t *cl;
    char now[64];
    usec_t rq = 0;
    (void)state;
    ctrl_new(false);
    now_text(now, sizeof(now));
    put_template(TPL, false);
    put(EXT_INF_POOL, pool_obj(TPL, 2, false));
    put_member(member("pool-aaaaa", TPL, "10.0.0.1"), false);
    queue_candidate("pool-aaaaa");
    cl = claim_obj(false);
    json_object_set_new(cl, "status",
                        json_pack("{s:[{s:s, s:s, s:s, s:s, s:s, s:i}]}", "conditions", "type",
                                  SB_COND_READY, "status", "False", "reason", SB_R_RECONCILER_ERROR,
                                  "message", "Error seen: x", "lastTransitionTime", now,
                                  "observedGeneration", 1));
    put(EXT_INF_CLAIM, cl);
    assert_int_equal(pool_reconcile(E.x, NS "/" POOL, &rq), 0);
    assert_int_equal(n_posts(), 1); /* created now, not deferred for the claim */
}

/* ---- findings 11, 12: the event handlers -------------------------------------------- */

static void test_recreated_pool_creates_not_lowered_by_old(void **state)
{
    struct kube_informer_handlers h;
    json_t *old_member;
    (void)state;
    ctrl_new(false);
    ext__handlers(EXT_INF_COUNT, &h);
    /* the pool made again under its name records one create */
    assert_true(pool_expect_try_creations(E.x->expect, NS "/" POOL, "p-new", 1, clock_now()));
    /* the first pool's in-flight create is seen */
    old_member = member("pool-aaaaa", TPL, "10.0.0.1");
    h.on_add(E.x, old_member);
    assert_int_equal(pool_expect_pending_creations(E.x->expect, NS "/" POOL), 1);
    json_decref(old_member);
}

static void test_claim_recreated_seen_as_update(void **state)
{
    struct kube_informer_handlers h;
    json_t *o, *n;
    (void)state;
    ctrl_new(false);
    ext__handlers(EXT_INF_CLAIM, &h);
    o = claim_obj(false);
    n = claim_obj(false);
    json_object_set_new(json_object_get(n, "metadata"), "uid",
                        json_string("c0000000-0000-0000-0000-000000000002"));
    ext__ready_once_mark(E.x, CL_UID);
    h.on_update(E.x, o, n);
    assert_false(ext__ready_once(E.x, CL_UID)); /* the old claim's: its deletion ran */
    json_decref(o);
    json_decref(n);
}

static void test_member_recreated_seen_as_update(void **state)
{
    struct kube_informer_handlers h;
    json_t *o, *n;
    (void)state;
    ctrl_new(false);
    ext__handlers(EXT_INF_COUNT, &h);
    o = member("pool-aaaaa", TPL, "10.0.0.1");
    n = member("pool-aaaaa", TPL, "10.0.0.1");
    json_object_set_new(json_object_get(n, "metadata"), "uid",
                        json_string("m0000000-0000-0000-0000-00000000ffff"));
    pool_expect_deletion(E.x->expect, NS "/" POOL, kube_obj_uid(o), clock_now());
    h.on_update(E.x, o, n);
    /* the pool's deletion of the old one is observed */
    assert_false(pool_expect_deleting(E.x->expect, NS "/" POOL, kube_obj_uid(o), clock_now()));
    json_decref(o);
    json_decref(n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_loops_keep_timers_on_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adoption_forbidden_goes_cold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adopted_member_idle_clock_starts_at_claim, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_adoption_invalid_goes_cold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adoption_5xx_stops_pass, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adoption_meta_conflict_goes_cold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adoption_pod_meta_from_template, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adoption_of_fresh_member_changes_no_spec, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_bound_claim_pod_meta_synced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cold_claim_pod_meta_synced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_template_edit_requeues_conflicting_claim, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_timed_out_claim_provisioned_when_template_appears,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_once_ready_claim_never_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bound_claim_pod_meta_conflict_and_unconfirmed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_other_template_member_not_adopted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recreate_stale_member_not_adopted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recreate_fresh_member_adopted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_template_member_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_deletes_batched, setup, teardown),
        cmocka_unit_test_setup_teardown(test_former_template_member_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fallback_deleted_not_rebound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fallback_retries_cold_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_undelivered_env_never_ready, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failing_delivery_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_fallback_after_ready_without_annotations, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_deleting_pool_prefer_settled_no_new_member, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_status_sandbox_dropped_when_none, setup, teardown),
        cmocka_unit_test_setup_teardown(test_erring_claim_does_not_defer_refill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recreated_pool_creates_not_lowered_by_old, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_claim_recreated_seen_as_update, setup, teardown),
        cmocka_unit_test_setup_teardown(test_member_recreated_seen_as_update, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
