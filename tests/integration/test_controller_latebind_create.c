/* SPDX-License-Identifier: Apache-2.0 */
/* Integration tests of a late-bound pool member's creation (lb_pool_create) against the
 * local kube-apiserver, driven directly (no manager: each case stages one request's
 * fate through the client's fault hook):
 * - the token Secret's create answered 503 after the server made it: the client's retry
 *   meets AlreadyExists; the Secret is read back and, being the member's, kept with the
 *   member (not the member deleted for a Secret it has);
 * - the same with a Secret of that name that is not the member's: the member is deleted
 *   and the foreign Secret left alone;
 * - the member deleted (and its delete event handled: lb_forget) before its Secret's
 *   create returns: no token stays cached for it;
 * - the Secret's create not carried out: the member is deleted, but not once a claim
 *   adopted it (the DELETE is guarded by the member's version). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "api/res.h"
#include "common/clock.h"
#include "common/log.h"
#include "controller/ext_int.h"
#include "controller/ext_names.h"
#include "controller/latebind_deliver.h"
#include "controller/latebind_spec.h"
#include "controller/pool_expect.h"
#include "controller/template_build.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "support/apiserver.h"
#include "support/ctrl_fixture.h"
#include "support/kube_fixture.h"

#define WAIT (60 * USEC_PER_SEC)

static struct kube_client *c, *fc; /* fc: lb_pool_create's, with the fault hook */
static struct ext_ctrl x;
static char ns[96];

/* ---- the fault hook: the next Secret create's fate ----------------------------------- */

enum fate {
    FATE_NONE,
    FATE_ANSWER_LOST, /* carried out, answered 503: the client retries into AlreadyExists */
    FATE_FOREIGN,     /* another's Secret of that name appears, then an unsent 503 */
};
static atomic_int fate;
static atomic_int fates_met;

/* A Sandbox of ns whose name starts with prefix and is not being deleted (new), or
 * NULL. */
static json_t *member_of(const char *prefix)
{
    json_t *list = NULL, *found = NULL;
    const json_t *sb;
    size_t i;
    if (kube_list_all(c, &API_RES_SANDBOXES, ns, NULL, &list, NULL) < 0)
        return NULL;
    json_array_foreach(json_object_get(list, "items"), i, sb)
    {
        const char *n = kube_obj_name(sb);
        if (n && strncmp(n, prefix, strlen(prefix)) == 0 && !kube_obj_deleting(sb)) {
            json_decref(found);
            found = json_incref((json_t *)sb);
        }
    }
    json_decref(list);
    return found;
}

/* Creates a Secret named after the "foreign-" member's token Secret, owned by nobody. */
static void foreign_secret(void)
{
    json_t *sb = member_of("foreign-"), *s;
    const char *name = sb ? kube_obj_annotation(sb, EXT_ANN_TOKEN_SECRET) : NULL;
    if (!name) {
        json_decref(sb);
        return;
    }
    s = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "Secret", "metadata",
                  "name", name, "stringData", "token", "someone-else");
    (void)kube_create(c, &KUBE_RES_SECRETS, ns, s, NULL, NULL);
    json_decref(s);
    json_decref(sb);
}

static long fault(void *ctx, const char *method, const struct kube_res *res, const char *sub,
                  const char *url, long status)
{
    bool secret_post =
        res == &KUBE_RES_SECRETS && !sub && strcmp(method, "POST") == 0 && url && strstr(url, ns);
    int want;
    if (secret_post && status / 100 == 2 &&
        (want = FATE_ANSWER_LOST, atomic_compare_exchange_strong(&fate, &want, FATE_NONE))) {
        atomic_fetch_add(&fates_met, 1);
        return 503;
    }
    if (secret_post && status == 0 &&
        (want = FATE_FOREIGN, atomic_compare_exchange_strong(&fate, &want, FATE_NONE))) {
        foreign_secret();
        atomic_fetch_add(&fates_met, 1);
        return 503;
    }
    return it_lose_answer(ctx, method, res, sub, url, status);
}

/* ---- objects ------------------------------------------------------------------------ */

/* A LateBound template (new). */
static json_t *lb_template(void)
{
    return json_pack("{s:{s:s, s:s, s:s}, s:{s:{s:s}, s:{s:{s:{s:s}}, s:{s:[{s:s, s:s}]}}}}",
                     "metadata", "name", "lb", "namespace", ns, "uid",
                     "00000000-0000-0000-0000-00000000cafe", "spec", "claimConfigDelivery", "mode",
                     "LateBound", "podTemplate", "metadata", "labels", "tier", "gold", "spec",
                     "containers", "name", "sandbox", "image", "x");
}

/* A Sandbox as the pool "<pool>" of a LateBound template builds it (generateName). The
 * pool is made (no manager runs: nothing reconciles it) so that the garbage collector
 * leaves its members alone. */
static json_t *pool_sandbox(const char *pool)
{
    json_t *p = NULL, *t = lb_template(), *sb, *want = it_pool_new(pool, "lb", 1);
    struct kube_err e;
    IT_OK(kube_create(c, &API_RES_SANDBOXWARMPOOLS, ns, want, &p, &e), &e);
    json_decref(want);
    sb = tpl_pool_sandbox(p, t, NULL);
    json_decref(t);
    json_decref(p);
    return sb;
}

/* Whether the cache has a token for Sandbox name (put-if-absent: a probe that leaves
 * the cache as it was). */
static bool cached(const char *name)
{
    int r = lb__cache_put(x.lb, ns, name, "probe");
    if (r == 0)
        lb_forget(x.lb, ns, name);
    return r == -EEXIST;
}

/* ---- setup -------------------------------------------------------------------------- */

static int group_setup(void **state)
{
    struct it_sandbox_ns_opts so = {.prefix = "lbcreate", .extensions = true, .timeout = WAIT};
    struct kube_client_opts co = {.qps = 0, .max_retries = -1};
    struct kube_client_opts fo = {.qps = 0, .max_retries = -1, .fault = fault};
    struct kube_err e;
    (void)state;
    if (it_client_new(&co, &c, &e) < 0 || it_client_new(&fo, &fc, &e) < 0)
        return -1;
    if (it_sandbox_ns_setup(c, &so, ns, sizeof(ns), &e) < 0)
        return -1;
    x.d.client = fc;
    x.lb = lb_state_new(false, 0);
    x.expect = pool_expect_new(WAIT);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (c && ns[0])
        (void)it_ns_delete(c, ns, 120 * USEC_PER_SEC);
    lb_state_free(x.lb);
    pool_expect_free(x.expect);
    kube_client_free(fc);
    kube_client_free(c);
    return 0;
}

static int case_teardown(void **state)
{
    (void)state;
    atomic_store(&fate, FATE_NONE);
    it_before_cancel();
    (void)it_answers_lost();
    return 0;
}

/* ---- tests -------------------------------------------------------------------------- */

/* The Secret's create was carried out but answered 503; the retry meets AlreadyExists.
 * The Secret is the member's: the member stays, with its token cached. */
static void test_secret_answer_lost(void **state)
{
    json_t *sb = pool_sandbox("lost"), *m, *s, *t;
    struct kube_err e;
    (void)state;
    atomic_store(&fates_met, 0);
    atomic_store(&fate, FATE_ANSWER_LOST);
    IT_OK(lb_pool_create(&x, "ns/lost", sb, &e), &e);
    assert_int_equal(atomic_load(&fates_met), 1);
    m = member_of("lost-");
    if (!m)
        fail_msg("the member was deleted although its Secret was made");
    s = it_obj_get(c, &KUBE_RES_SECRETS, ns, kube_obj_annotation(m, EXT_ANN_TOKEN_SECRET));
    assert_non_null(s);
    assert_true(lb_secret_is_for(s, m));
    assert_true(cached(kube_obj_name(m)));
    /* As the API server stores it, the member (token volume, mounts and env injected) is
     * built from its template, also after a pod template metadata edit. */
    t = lb_template();
    assert_true(tpl_blueprint_matches(t, m));
    json_object_set_new(json_object_get(kube_obj_path(t, "spec.podTemplate.metadata"), "labels"),
                        "tier", json_string("silver"));
    assert_true(tpl_blueprint_matches(t, m));
    json_decref(t);
    json_decref(s);
    json_decref(m);
    json_decref(sb);
}

/* The same unsure create, but the Secret of that name is someone else's: the member
 * (whose pod could not read its token) is deleted, the foreign Secret left alone. */
static void test_secret_foreign(void **state)
{
    json_t *sb = pool_sandbox("foreign"), *m, *list = NULL;
    const json_t *it;
    size_t i, n = 0;
    struct kube_err e;
    (void)state;
    atomic_store(&fates_met, 0);
    atomic_store(&fate, FATE_FOREIGN);
    IT_OK(lb_pool_create(&x, "ns/foreign", sb, &e), &e);
    assert_int_equal(atomic_load(&fates_met), 1);
    m = member_of("foreign-");
    assert_null(m);
    /* Not the member's token: the foreign Secret is as it was made. */
    IT_OK(kube_list_all(c, &KUBE_RES_SECRETS, ns, NULL, &list, &e), &e);
    json_array_foreach(json_object_get(list, "items"), i, it)
    {
        if (strncmp(kube_obj_name(it), "foreign-", 8) != 0)
            continue;
        n++;
        assert_null(kube_obj_path(it, "metadata.ownerReferences"));
        assert_string_equal(kube_obj_path_str(it, "data.token"), "c29tZW9uZS1lbHNl");
    }
    assert_int_equal(n, 1);
    json_decref(list);
    json_decref(sb);
}

struct race {
    char name[128];
    bool done;
};

/* Before the Secret's create is sent: the member is deleted and its delete event handled
 * (the controller's Sandbox informer calls lb_forget). */
static void delete_first(const char *url, void *ctx)
{
    struct race *r = ctx;
    json_t *m = member_of("race-");
    (void)url;
    if (!m)
        return;
    (void)snprintf(r->name, sizeof(r->name), "%s", kube_obj_name(m));
    if (kube_delete(c, &API_RES_SANDBOXES, ns, r->name, NULL) == 0) {
        lb_forget(x.lb, ns, r->name);
        r->done = true;
    }
    json_decref(m);
}

/* A member deleted before its create finished leaves no cached token: the entry (made
 * before the create) went with its delete event, and nothing puts it back after. */
static void test_deleted_member_not_cached(void **state)
{
    json_t *sb = pool_sandbox("race");
    struct race r = {0};
    struct kube_err e;
    char in_ns[128];
    size_t before = lb_cached(x.lb);
    (void)state;
    (void)snprintf(in_ns, sizeof(in_ns), "/namespaces/%s/secrets", ns);
    assert_int_equal(it_before_request("POST", &KUBE_RES_SECRETS, in_ns, 0, delete_first, &r), 0);
    IT_OK(lb_pool_create(&x, "ns/race", sb, &e), &e);
    assert_false(it_before_pending());
    assert_true(r.done);
    assert_false(cached(r.name));
    assert_int_equal(lb_cached(x.lb), before);
    json_decref(sb);
}

/* Before the DELETE of the member whose Secret could not be made is sent: a claim adopts
 * the member (as an adoption PATCH does: its owner reference becomes the claim's). */
static void adopt_first(const char *url, void *ctx)
{
    struct race *r = ctx;
    json_t *m = member_of("spare-"), *cl = NULL, *want = it_claim_new("spare-claim", "spare"), *p;
    (void)url;
    if (m && kube_create(c, &API_RES_SANDBOXCLAIMS, ns, want, &cl, NULL) == 0) {
        p = json_pack("{s:{s:[o]}}", "metadata", "ownerReferences",
                      ext_owner_ref(cl, EXT_KIND_CLAIM));
        if (it_merge_patch(c, &API_RES_SANDBOXES, ns, kube_obj_name(m), NULL, p, NULL) == 0) {
            (void)snprintf(r->name, sizeof(r->name), "%s", kube_obj_name(m));
            r->done = true;
        }
        json_decref(p);
    }
    json_decref(cl);
    json_decref(want);
    json_decref(m);
}

/* The member's Secret create was not carried out (its outcome unknown, the name read back
 * free): the member is deleted, guarded by the version its create returned. A claim
 * adopted it first: the DELETE meets a conflict, the member is read again, and being the
 * claim's now, it stays. Before, the DELETE (by UID only) took the claim's Sandbox. */
static void test_adopted_member_spared(void **state)
{
    json_t *sb = pool_sandbox("spare"), *m;
    struct race r = {0};
    struct kube_err e;
    char in_secrets[128], in_sandboxes[192];
    (void)state;
    (void)snprintf(in_secrets, sizeof(in_secrets), "/namespaces/%s/secrets", ns);
    (void)snprintf(in_sandboxes, sizeof(in_sandboxes), "/namespaces/%s/sandboxes/spare-", ns);
    assert_int_equal(it_drop_requests("POST", &KUBE_RES_SECRETS, in_secrets, 1), 0);
    assert_int_equal(
        it_before_request("DELETE", &API_RES_SANDBOXES, in_sandboxes, 0, adopt_first, &r), 0);
    IT_OK(lb_pool_create(&x, "ns/spare", sb, &e), &e);
    assert_int_equal(it_answers_lost(), 1);
    assert_false(it_before_pending());
    assert_true(r.done);
    m = it_obj_get(c, &API_RES_SANDBOXES, ns, r.name);
    if (!m || kube_obj_deleting(m))
        fail_msg("the adopted member %s was deleted", r.name);
    assert_true(sb_controller_is(m, SB_EXT_GROUP, EXT_KIND_CLAIM));
    json_decref(m);
    json_decref(sb);
}

/* Before the DELETE is sent: another writer changes the member (a label), which stays the
 * pool's. */
static void touch_first(const char *url, void *ctx)
{
    struct race *r = ctx;
    json_t *m = member_of("unstartable-"), *p;
    (void)url;
    p = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "touched", "yes");
    if (m && it_merge_patch(c, &API_RES_SANDBOXES, ns, kube_obj_name(m), NULL, p, NULL) == 0)
        r->done = true;
    json_decref(p);
    json_decref(m);
}

/* The same without a claim, and the member changed before the DELETE: its guard meets a
 * conflict, the member is read again, still the pool's, and deleted in that version. */
static void test_unstartable_member_deleted(void **state)
{
    json_t *sb = pool_sandbox("unstartable");
    struct race r = {0};
    struct kube_err e;
    char in_secrets[128], in_sandboxes[192];
    (void)state;
    (void)snprintf(in_secrets, sizeof(in_secrets), "/namespaces/%s/secrets", ns);
    (void)snprintf(in_sandboxes, sizeof(in_sandboxes), "/namespaces/%s/sandboxes/unstartable-", ns);
    assert_int_equal(it_drop_requests("POST", &KUBE_RES_SECRETS, in_secrets, 1), 0);
    assert_int_equal(
        it_before_request("DELETE", &API_RES_SANDBOXES, in_sandboxes, 0, touch_first, &r), 0);
    IT_OK(lb_pool_create(&x, "ns/unstartable", sb, &e), &e);
    assert_int_equal(it_answers_lost(), 1);
    assert_true(r.done);
    assert_null(member_of("unstartable-"));
    json_decref(sb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_secret_answer_lost, case_teardown),
        cmocka_unit_test_teardown(test_secret_foreign, case_teardown),
        cmocka_unit_test_teardown(test_deleted_member_not_cached, case_teardown),
        cmocka_unit_test_teardown(test_adopted_member_spared, case_teardown),
        cmocka_unit_test_teardown(test_unstartable_member_deleted, case_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
