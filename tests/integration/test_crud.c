/* SPDX-License-Identifier: Apache-2.0 */
/* CRUD against the real kube-apiserver: ConfigMaps and the Widget test CRD, status and
 * scale subresources, paginated lists, delete preconditions and propagation, dry-run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/xalloc.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "kube/res.h"
#include "support/apiserver.h"
#include "support/kube_fixture.h"

#define WAIT (60 * USEC_PER_SEC)

static struct kube_client *client;
static char ns[64];

static json_t *configmap(const char *name, const char *key, const char *value)
{
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                     "metadata", "name", name, "data", key, value);
}

static json_t *widget(const char *name, int replicas, const char *color)
{
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:i, s:s}}", "apiVersion",
                     "testing.agents.x-k8s.io/v1", "kind", "Widget", "metadata", "name", name,
                     "spec", "replicas", replicas, "color", color);
}

static int setup(void **state)
{
    (void)state;
    it_fixture_setup("it-crud", IT_WIDGET_CRD_FILE, &client, ns, sizeof(ns));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    it_fixture_teardown(client, ns, IT_WIDGET_CRD_NAME);
    return 0;
}

static void test_configmap_crud(void **state)
{
    struct kube_err err;
    json_t *obj = configmap("cm1", "k", "v1"), *got = NULL, *upd = NULL, *stale = NULL;
    (void)state;

    IT_OK(kube_create(client, &KUBE_RES_CONFIGMAPS, ns, obj, &got, &err), &err);
    assert_non_null(kube_obj_uid(got));
    assert_int_equal(kube_create(client, &KUBE_RES_CONFIGMAPS, ns, obj, NULL, &err), -EEXIST);
    assert_true(kube_err_is_already_exists(&err));
    json_decref(got);

    IT_OK(kube_get(client, &KUBE_RES_CONFIGMAPS, ns, "cm1", &got, &err), &err);
    assert_string_equal(kube_obj_path_str(got, "data.k"), "v1");
    stale = json_deep_copy(got);
    json_object_set_new(json_object_get(got, "data"), "k", json_string("v2"));
    IT_OK(kube_update(client, &KUBE_RES_CONFIGMAPS, ns, got, &upd, &err), &err);
    assert_string_equal(kube_obj_path_str(upd, "data.k"), "v2");
    assert_string_not_equal(kube_obj_resource_version(upd), kube_obj_resource_version(stale));

    /* An update carrying the old resourceVersion loses the optimistic-concurrency race. */
    json_object_set_new(json_object_get(stale, "data"), "k", json_string("v3"));
    assert_int_equal(kube_update(client, &KUBE_RES_CONFIGMAPS, ns, stale, NULL, &err), -EBUSY);
    assert_true(kube_err_is_conflict(&err));
    assert_int_equal(err.http_status, 409);

    IT_OK(kube_delete(client, &KUBE_RES_CONFIGMAPS, ns, "cm1", &err), &err);
    assert_int_equal(kube_get(client, &KUBE_RES_CONFIGMAPS, ns, "cm1", NULL, &err), -ENOENT);
    assert_true(kube_err_is_not_found(&err));
    assert_int_equal(kube_delete(client, &KUBE_RES_CONFIGMAPS, ns, "cm1", &err), -ENOENT);
    json_decref(obj);
    json_decref(got);
    json_decref(upd);
    json_decref(stale);
}

static void test_widget_crud(void **state)
{
    struct kube_err err;
    json_t *obj = widget("w1", 1, "red"), *got = NULL, *upd = NULL, *bad;
    (void)state;

    IT_OK(kube_create(client, &IT_RES_WIDGETS, ns, obj, &got, &err), &err);
    assert_int_equal(kube_obj_generation(got), 1);
    json_decref(got);
    IT_OK(kube_get(client, &IT_RES_WIDGETS, ns, "w1", &got, &err), &err);
    assert_string_equal(kube_obj_path_str(got, "spec.color"), "red");
    json_object_set_new(json_object_get(got, "spec"), "color", json_string("blue"));
    IT_OK(kube_update(client, &IT_RES_WIDGETS, ns, got, &upd, &err), &err);
    assert_string_equal(kube_obj_path_str(upd, "spec.color"), "blue");
    assert_int_equal(kube_obj_generation(upd), 2);

    /* The schema is enforced: replicas has a maximum of 1000. */
    bad = widget("w-bad", 5000, "red");
    assert_int_equal(kube_create(client, &IT_RES_WIDGETS, ns, bad, NULL, &err), -EINVAL);
    assert_true(kube_err_is_invalid(&err));

    IT_OK(kube_delete(client, &IT_RES_WIDGETS, ns, "w1", &err), &err);
    assert_int_equal(it_wait_gone(client, &IT_RES_WIDGETS, ns, "w1", WAIT), 0);
    json_decref(obj);
    json_decref(got);
    json_decref(upd);
    json_decref(bad);
}

/* Status writes touch only status; main-resource writes only spec. */
static void test_status_subresource(void **state)
{
    struct kube_err err;
    json_t *obj = widget("w-status", 2, "red"), *cur = NULL, *after = NULL;
    (void)state;

    IT_OK(kube_create(client, &IT_RES_WIDGETS, ns, obj, &cur, &err), &err);
    json_object_set_new(cur, "status", json_pack("{s:s, s:i}", "phase", "Running", "replicas", 2));
    json_object_set_new(json_object_get(cur, "spec"), "color", json_string("green"));
    IT_OK(kube_update_status(client, &IT_RES_WIDGETS, ns, cur, &after, &err), &err);
    assert_string_equal(kube_obj_path_str(after, "status.phase"), "Running");
    assert_string_equal(kube_obj_path_str(after, "spec.color"), "red");
    assert_int_equal(kube_obj_generation(after), 1);
    json_decref(cur);

    cur = after;
    after = NULL;
    json_object_set_new(json_object_get(cur, "status"), "phase", json_string("Lost"));
    json_object_set_new(json_object_get(cur, "spec"), "color", json_string("yellow"));
    IT_OK(kube_update(client, &IT_RES_WIDGETS, ns, cur, &after, &err), &err);
    assert_string_equal(kube_obj_path_str(after, "spec.color"), "yellow");
    assert_string_equal(kube_obj_path_str(after, "status.phase"), "Running");
    assert_int_equal(kube_obj_generation(after), 2);
    json_decref(obj);
    json_decref(cur);
    json_decref(after);
}

static void test_scale_subresource(void **state)
{
    struct kube_err err;
    struct kube_req req;
    json_t *obj = widget("w-scale", 3, "red"), *scale = NULL, *patch, *got = NULL;
    (void)state;

    IT_OK(kube_create(client, &IT_RES_WIDGETS, ns, obj, NULL, &err), &err);
    kube_req_init(&req, "GET", &IT_RES_WIDGETS);
    req.ns = ns;
    req.name = "w-scale";
    req.subresource = "scale";
    IT_OK(kube_request(client, &req, &scale, &err), &err);
    assert_string_equal(kube_obj_kind(scale), "Scale");
    assert_int_equal(json_integer_value(kube_obj_path(scale, "spec.replicas")), 3);

    patch = json_pack("{s:{s:i}}", "spec", "replicas", 7);
    req.method = "PATCH";
    req.body = patch;
    req.patch_type = KUBE_PATCH_MERGE;
    IT_OK(kube_request(client, &req, NULL, &err), &err);
    IT_OK(kube_get(client, &IT_RES_WIDGETS, ns, "w-scale", &got, &err), &err);
    assert_int_equal(json_integer_value(kube_obj_path(got, "spec.replicas")), 7);
    json_decref(obj);
    json_decref(scale);
    json_decref(patch);
    json_decref(got);
}

static void create_page_objects(int n)
{
    struct kube_err err;
    char name[32];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "page-%03d", i);
        json_t *obj = configmap(name, "i", name);
        json_object_set_new(json_object_get(obj, "metadata"), "labels",
                            json_pack("{s:s}", "it", "page"));
        IT_OK(kube_create(client, &KUBE_RES_CONFIGMAPS, ns, obj, NULL, &err), &err);
        json_decref(obj);
    }
}

/* Marks each item of a page in seen[]; fails on a duplicate or a stranger. */
static void mark_page(const json_t *items, bool *seen, int n)
{
    size_t i;
    const json_t *it;
    json_array_foreach(items, i, it)
    {
        int idx = -1;
        assert_int_equal(sscanf(kube_obj_name(it), "page-%d", &idx), 1);
        assert_true(idx >= 0 && idx < n);
        assert_false(seen[idx]);
        seen[idx] = true;
    }
}

static void test_paginated_list(void **state)
{
    enum { N = 120, LIMIT = 25 };
    struct kube_err err;
    struct kube_req req;
    bool seen[N] = {false};
    char *cont = NULL;
    int pages = 0;
    (void)state;

    create_page_objects(N);
    kube_req_init(&req, "GET", &KUBE_RES_CONFIGMAPS);
    req.ns = ns;
    req.label_selector = "it=page";
    req.limit = LIMIT;
    do {
        json_t *page = NULL;
        req.continue_token = cont;
        IT_OK(kube_request(client, &req, &page, &err), &err);
        const json_t *items = json_object_get(page, "items");
        assert_true(json_array_size(items) <= LIMIT);
        mark_page(items, seen, N);
        pages++;
        xfree(cont);
        const char *next = kube_obj_path_str(page, "metadata.continue");
        cont = next && *next ? xstrdup(next) : NULL;
        json_decref(page);
    } while (cont && pages < 100);
    assert_int_equal(pages, (N + LIMIT - 1) / LIMIT);
    for (int i = 0; i < N; i++)
        assert_true(seen[i]);

    json_t *all = NULL;
    req.limit = 0;
    req.continue_token = NULL;
    IT_OK(kube_list_all(client, &KUBE_RES_CONFIGMAPS, ns, &req, &all, &err), &err);
    assert_int_equal(json_array_size(json_object_get(all, "items")), N);
    assert_non_null(kube_obj_path_str(all, "metadata.resourceVersion"));
    json_decref(all);
}

static int delete_with(const char *name, const char *uid, const char *rv, const char *policy,
                       struct kube_err *err)
{
    struct kube_req req;
    kube_req_init(&req, "DELETE", &KUBE_RES_CONFIGMAPS);
    req.ns = ns;
    req.name = name;
    req.precondition_uid = uid;
    req.precondition_rv = rv;
    req.propagation_policy = policy;
    return kube_request(client, &req, NULL, err);
}

static void test_delete_preconditions(void **state)
{
    struct kube_err err;
    json_t *obj = configmap("pre", "k", "v"), *got = NULL;
    (void)state;

    IT_OK(kube_create(client, &KUBE_RES_CONFIGMAPS, ns, obj, &got, &err), &err);
    assert_int_equal(delete_with("pre", "00000000-0000-0000-0000-000000000000", NULL, NULL, &err),
                     -EBUSY);
    assert_true(kube_err_is_conflict(&err));
    assert_int_equal(delete_with("pre", NULL, "1", NULL, &err), -EBUSY);
    assert_true(kube_err_is_conflict(&err));
    IT_OK(kube_get(client, &KUBE_RES_CONFIGMAPS, ns, "pre", NULL, &err), &err);
    IT_OK(delete_with("pre", kube_obj_uid(got), kube_obj_resource_version(got), NULL, &err), &err);
    assert_int_equal(kube_get(client, &KUBE_RES_CONFIGMAPS, ns, "pre", NULL, &err), -ENOENT);
    json_decref(obj);
    json_decref(got);
}

/* kube_delete_obj deletes the object it was given, not a newer one of the same name:
 * made again (new UID) or, with same_version, changed since. */
static void test_delete_obj_guards(void **state)
{
    struct kube_err err;
    json_t *obj = configmap("guard", "k", "v"), *old = NULL, *now = NULL, *upd;
    (void)state;

    IT_OK(kube_create(client, &KUBE_RES_CONFIGMAPS, ns, obj, &old, &err), &err);
    IT_OK(kube_delete_obj(client, &KUBE_RES_CONFIGMAPS, old, true, NULL, &err), &err);
    IT_OK(kube_create(client, &KUBE_RES_CONFIGMAPS, ns, obj, &now, &err), &err);
    assert_int_equal(kube_delete_obj(client, &KUBE_RES_CONFIGMAPS, old, false, NULL, &err),
                     -EBUSY); /* the same name, made again */
    assert_true(kube_err_is_conflict(&err));

    upd = json_deep_copy(now);
    json_object_set_new(json_object_get(upd, "data"), "k", json_string("w"));
    IT_OK(kube_update(client, &KUBE_RES_CONFIGMAPS, ns, upd, NULL, &err), &err);
    assert_int_equal(kube_delete_obj(client, &KUBE_RES_CONFIGMAPS, now, true, NULL, &err),
                     -EBUSY); /* changed since now was read */
    IT_OK(kube_get(client, &KUBE_RES_CONFIGMAPS, ns, "guard", NULL, &err), &err);
    IT_OK(kube_delete_obj(client, &KUBE_RES_CONFIGMAPS, now, false, "Background", &err), &err);
    assert_int_equal(kube_get(client, &KUBE_RES_CONFIGMAPS, ns, "guard", NULL, &err), -ENOENT);
    json_decref(upd);
    json_decref(obj);
    json_decref(old);
    json_decref(now);
}

/* Creates owner and a dependent that names it in ownerReferences. */
static void create_owned_pair(const char *owner, const char *dep)
{
    struct kube_err err;
    json_t *o = configmap(owner, "k", "v"), *got = NULL, *d = configmap(dep, "k", "v");
    IT_OK(kube_create(client, &KUBE_RES_CONFIGMAPS, ns, o, &got, &err), &err);
    json_t *ref = json_pack("[{s:s, s:s, s:s, s:s, s:b}]", "apiVersion", "v1", "kind", "ConfigMap",
                            "name", owner, "uid", kube_obj_uid(got), "blockOwnerDeletion", 1);
    json_object_set_new(json_object_get(d, "metadata"), "ownerReferences", ref);
    IT_OK(kube_create(client, &KUBE_RES_CONFIGMAPS, ns, d, NULL, &err), &err);
    json_decref(o);
    json_decref(d);
    json_decref(got);
}

struct orphan_ctx {
    const char *name;
};

static bool orphaned(void *ctx)
{
    struct orphan_ctx *oc = ctx;
    json_t *obj = NULL;
    if (kube_get(client, &KUBE_RES_CONFIGMAPS, ns, oc->name, &obj, NULL) < 0)
        return false;
    bool none = json_array_size(kube_obj_path(obj, "metadata.ownerReferences")) == 0;
    json_decref(obj);
    return none;
}

/* Needs the garbage collector (kube-controller-manager of hack/apiserver.sh). */
static void test_delete_propagation(void **state)
{
    struct kube_err err;
    json_t *got = NULL;
    (void)state;

    create_owned_pair("fg-owner", "fg-dep");
    IT_OK(delete_with("fg-owner", NULL, NULL, "Foreground", &err), &err);
    /* The owner waits for its dependent with the foregroundDeletion finalizer; a fast
     * garbage collector may have finished both before this GET. */
    int r = kube_get(client, &KUBE_RES_CONFIGMAPS, ns, "fg-owner", &got, &err);
    if (r == -ENOENT) {
        assert_int_equal(kube_get(client, &KUBE_RES_CONFIGMAPS, ns, "fg-dep", NULL, &err), -ENOENT);
    } else {
        IT_OK(r, &err);
        assert_true(kube_obj_deleting(got));
        assert_true(kube_obj_has_finalizer(got, "foregroundDeletion"));
    }
    assert_int_equal(it_wait_gone(client, &KUBE_RES_CONFIGMAPS, ns, "fg-dep", WAIT), 0);
    assert_int_equal(it_wait_gone(client, &KUBE_RES_CONFIGMAPS, ns, "fg-owner", WAIT), 0);
    json_decref(got);

    create_owned_pair("bg-owner", "bg-dep");
    IT_OK(delete_with("bg-owner", NULL, NULL, "Background", &err), &err);
    assert_int_equal(kube_get(client, &KUBE_RES_CONFIGMAPS, ns, "bg-owner", NULL, &err), -ENOENT);
    assert_int_equal(it_wait_gone(client, &KUBE_RES_CONFIGMAPS, ns, "bg-dep", WAIT), 0);

    create_owned_pair("or-owner", "or-dep");
    IT_OK(delete_with("or-owner", NULL, NULL, "Orphan", &err), &err);
    assert_int_equal(it_wait_gone(client, &KUBE_RES_CONFIGMAPS, ns, "or-owner", WAIT), 0);
    struct orphan_ctx oc = {.name = "or-dep"};
    assert_int_equal(it_wait(orphaned, &oc, WAIT), 0);
}

static void test_dry_run(void **state)
{
    struct kube_err err;
    struct kube_req req;
    json_t *obj = configmap("dry", "k", "v"), *got = NULL;
    (void)state;

    kube_req_init(&req, "POST", &KUBE_RES_CONFIGMAPS);
    req.ns = ns;
    req.body = obj;
    req.dry_run = true;
    IT_OK(kube_request(client, &req, &got, &err), &err);
    assert_string_equal(kube_obj_name(got), "dry");
    assert_int_equal(kube_get(client, &KUBE_RES_CONFIGMAPS, ns, "dry", NULL, &err), -ENOENT);

    /* A dry-run delete of a real object leaves it in place. */
    IT_OK(kube_create(client, &KUBE_RES_CONFIGMAPS, ns, obj, NULL, &err), &err);
    kube_req_init(&req, "DELETE", &KUBE_RES_CONFIGMAPS);
    req.ns = ns;
    req.name = "dry";
    req.dry_run = true;
    IT_OK(kube_request(client, &req, NULL, &err), &err);
    IT_OK(kube_get(client, &KUBE_RES_CONFIGMAPS, ns, "dry", NULL, &err), &err);
    json_decref(obj);
    json_decref(got);
}

static bool terminating_refused(struct kube_client *c, const char *tns, int i, struct kube_err *e)
{
    char name[32];
    (void)snprintf(name, sizeof(name), "late-%d", i);
    json_t *cm = configmap(name, "k", "v");
    int r = kube_create(c, &KUBE_RES_CONFIGMAPS, tns, cm, NULL, e);
    json_decref(cm);
    return r == -ESHUTDOWN;
}

/* A namespace being deleted refuses creates with the cause NamespaceTerminating: the
 * client tells that 403 apart and answers the next creates there itself; updates still
 * go to the server. A ConfigMap's finalizer keeps the namespace terminating meanwhile. */
static void test_terminating_namespace(void **state)
{
    struct kube_err err;
    struct kube_client *c = NULL;
    struct kube_client_stats st0, st1;
    char tns[80];
    json_t *held = NULL, *cm = configmap("held", "k", "v");
    int i = 0;
    (void)state;
    (void)snprintf(tns, sizeof(tns), "%s-term", ns);
    json_t *nso = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                            "metadata", "name", tns);
    IT_OK(kube_create(client, &KUBE_RES_NAMESPACES, NULL, nso, NULL, &err), &err);
    json_object_set_new(json_object_get(cm, "metadata"), "finalizers",
                        json_pack("[s]", "testing.agents.x-k8s.io/hold"));
    IT_OK(kube_create(client, &KUBE_RES_CONFIGMAPS, tns, cm, &held, &err), &err);
    IT_OK(kube_delete(client, &KUBE_RES_NAMESPACES, NULL, tns, &err), &err);
    IT_OK(it_client_new(NULL, &c, &err), &err);
    /* the admission's view of the namespace may lag the delete by a moment */
    usec_t end = clock_now() + 10 * USEC_PER_SEC;
    while (!terminating_refused(c, tns, i++, &err) && clock_now() < end)
        clock_sleep(50 * USEC_PER_MSEC);
    assert_int_equal(err.code, -ESHUTDOWN);
    assert_true(err.ns_terminating);
    assert_int_equal(err.http_status, 403);
    kube_client_stats(c, &st0);
    for (int k = 0; k < 10; k++) {
        assert_true(terminating_refused(c, tns, i++, &err));
        assert_non_null(strstr(err.message, "not sent"));
    }
    kube_client_stats(c, &st1);
    assert_int_equal(st1.requests, st0.requests); /* none went out */
    /* an update still does: the finalizer goes and the namespace with it */
    json_object_del(json_object_get(held, "metadata"), "finalizers");
    IT_OK(kube_update(c, &KUBE_RES_CONFIGMAPS, tns, held, NULL, &err), &err);
    kube_client_stats(c, &st1);
    assert_int_equal(st1.requests, st0.requests + 1);
    assert_int_equal(it_ns_delete(client, tns, WAIT), 0);
    kube_client_free(c);
    json_decref(held);
    json_decref(cm);
    json_decref(nso);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_configmap_crud),        cmocka_unit_test(test_widget_crud),
        cmocka_unit_test(test_status_subresource),    cmocka_unit_test(test_scale_subresource),
        cmocka_unit_test(test_paginated_list),        cmocka_unit_test(test_delete_preconditions),
        cmocka_unit_test(test_delete_propagation),    cmocka_unit_test(test_dry_run),
        cmocka_unit_test(test_terminating_namespace), cmocka_unit_test(test_delete_obj_guards),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
