/* SPDX-License-Identifier: Apache-2.0 */
/* Every patch type against the real kube-apiserver: JSON merge, JSON patch, strategic
 * merge (built-in kinds only), and server-side apply with field managers, conflicts and
 * force. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "kube/client.h"
#include "kube/obj.h"
#include "kube/res.h"
#include "support/apiserver.h"
#include "support/kube_fixture.h"

#define WAIT (60 * USEC_PER_SEC)

static struct kube_client *client;
static char ns[64];

static int setup(void **state)
{
    (void)state;
    it_fixture_setup("it-patch", IT_WIDGET_CRD_FILE, &client, ns, sizeof(ns));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    it_fixture_teardown(client, ns, IT_WIDGET_CRD_NAME);
    return 0;
}

static void create_cm(const char *name)
{
    struct kube_err err;
    json_t *obj = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s}}", "apiVersion", "v1", "kind",
                            "ConfigMap", "metadata", "name", name, "data", "a", "0", "b", "0");
    IT_OK(kube_create(client, &KUBE_RES_CONFIGMAPS, ns, obj, NULL, &err), &err);
    json_decref(obj);
}

/* Patches the ConfigMap name with type and the JSON text patch; returns the result. */
static json_t *patch_cm(const char *name, enum kube_patch_type type, const char *text, int *ret_rc,
                        struct kube_err *err)
{
    json_t *patch = json_loads(text, 0, NULL), *got = NULL;
    assert_non_null(patch);
    *ret_rc = kube_patch(client, &KUBE_RES_CONFIGMAPS, ns, name, type, patch, &got, err);
    json_decref(patch);
    return got;
}

static void test_merge_patch(void **state)
{
    struct kube_err err;
    int rc;
    (void)state;
    create_cm("merge");
    json_t *got =
        patch_cm("merge", KUBE_PATCH_MERGE, "{\"data\":{\"a\":\"1\",\"b\":null}}", &rc, &err);
    IT_OK(rc, &err);
    assert_string_equal(kube_obj_path_str(got, "data.a"), "1");
    assert_null(kube_obj_path(got, "data.b"));
    json_decref(got);
}

static void test_json_patch(void **state)
{
    struct kube_err err;
    int rc;
    (void)state;
    create_cm("jsonpatch");
    json_t *got = patch_cm("jsonpatch", KUBE_PATCH_JSON,
                           "[{\"op\":\"test\",\"path\":\"/data/a\",\"value\":\"0\"},"
                           "{\"op\":\"add\",\"path\":\"/data/c\",\"value\":\"3\"},"
                           "{\"op\":\"remove\",\"path\":\"/data/b\"}]",
                           &rc, &err);
    IT_OK(rc, &err);
    assert_string_equal(kube_obj_path_str(got, "data.c"), "3");
    assert_null(kube_obj_path(got, "data.b"));
    json_decref(got);

    /* A failing "test" operation rejects the whole patch. */
    got = patch_cm("jsonpatch", KUBE_PATCH_JSON,
                   "[{\"op\":\"test\",\"path\":\"/data/a\",\"value\":\"nope\"},"
                   "{\"op\":\"add\",\"path\":\"/data/d\",\"value\":\"4\"}]",
                   &rc, &err);
    assert_true(rc < 0);
    assert_null(got);
    assert_true(err.http_status >= 400 && err.http_status < 500);
    IT_OK(kube_get(client, &KUBE_RES_CONFIGMAPS, ns, "jsonpatch", &got, &err), &err);
    assert_null(kube_obj_path(got, "data.d"));
    json_decref(got);
}

static void test_strategic_merge_patch(void **state)
{
    struct kube_err err;
    int rc;
    (void)state;
    create_cm("smp");
    /* "$patch": "replace" is a strategic-merge directive: data is replaced as a whole. */
    json_t *got = patch_cm("smp", KUBE_PATCH_STRATEGIC,
                           "{\"data\":{\"$patch\":\"replace\",\"only\":\"this\"}}", &rc, &err);
    IT_OK(rc, &err);
    assert_string_equal(kube_obj_path_str(got, "data.only"), "this");
    assert_null(kube_obj_path(got, "data.a"));
    assert_int_equal(json_object_size(json_object_get(got, "data")), 1);
    json_decref(got);

    /* Custom resources do not support strategic merge: 415 Unsupported Media Type. */
    json_t *w =
        json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "testing.agents.x-k8s.io/v1",
                  "kind", "Widget", "metadata", "name", "smp-w", "spec", "color", "red");
    IT_OK(kube_create(client, &IT_RES_WIDGETS, ns, w, NULL, &err), &err);
    json_t *p = json_pack("{s:{s:s}}", "spec", "color", "blue");
    rc = kube_patch(client, &IT_RES_WIDGETS, ns, "smp-w", KUBE_PATCH_STRATEGIC, p, NULL, &err);
    assert_true(rc < 0);
    assert_int_equal(err.http_status, 415);
    json_decref(w);
    json_decref(p);
}

static json_t *apply_widget(const char *manager, bool force, const char *spec_json, int *ret_rc,
                            struct kube_err *err)
{
    json_t *spec = json_loads(spec_json, 0, NULL), *got = NULL;
    assert_non_null(spec);
    json_t *obj = json_pack("{s:s, s:s, s:{s:s}, s:o}", "apiVersion", "testing.agents.x-k8s.io/v1",
                            "kind", "Widget", "metadata", "name", "ssa", "spec", spec);
    *ret_rc = kube_apply(client, &IT_RES_WIDGETS, ns, obj, manager, force, &got, err);
    json_decref(obj);
    return got;
}

/* True when manager appears in metadata.managedFields. */
static bool manages(const json_t *obj, const char *manager)
{
    size_t i;
    const json_t *mf;
    json_array_foreach(kube_obj_path(obj, "metadata.managedFields"), i, mf)
    {
        const char *m = json_string_value(json_object_get(mf, "manager"));
        if (m && strcmp(m, manager) == 0)
            return true;
    }
    return false;
}

static void test_server_side_apply(void **state)
{
    struct kube_err err;
    int rc;
    (void)state;
    json_t *got = apply_widget("mgr-a", false,
                               "{\"color\":\"red\",\"replicas\":1,"
                               "\"ports\":[{\"name\":\"http\",\"port\":80}]}",
                               &rc, &err);
    IT_OK(rc, &err);
    assert_true(manages(got, "mgr-a"));
    json_decref(got);

    /* Another manager setting a field mgr-a owns to another value: conflict. */
    got = apply_widget("mgr-b", false, "{\"color\":\"blue\"}", &rc, &err);
    assert_int_equal(rc, -EBUSY);
    assert_int_equal(err.http_status, 409);
    assert_null(got);

    /* Entries of a map-list merge by key across managers. */
    got = apply_widget("mgr-b", false, "{\"ports\":[{\"name\":\"grpc\",\"port\":90}]}", &rc, &err);
    IT_OK(rc, &err);
    assert_int_equal(json_array_size(kube_obj_path(got, "spec.ports")), 2);
    json_decref(got);

    /* Forced, mgr-b takes color over. */
    got = apply_widget("mgr-b", true, "{\"color\":\"blue\",\"ports\":[{\"name\":\"grpc\"}]}", &rc,
                       &err);
    IT_OK(rc, &err);
    assert_string_equal(kube_obj_path_str(got, "spec.color"), "blue");
    assert_true(manages(got, "mgr-b"));
    json_decref(got);

    /* mgr-a re-applies without color: it no longer owns it, so blue stays. */
    got = apply_widget("mgr-a", false,
                       "{\"replicas\":2,\"ports\":[{\"name\":\"http\",\"port\":80}]}", &rc, &err);
    IT_OK(rc, &err);
    assert_string_equal(kube_obj_path_str(got, "spec.color"), "blue");
    assert_int_equal(json_integer_value(kube_obj_path(got, "spec.replicas")), 2);
    json_decref(got);

    /* mgr-a drops its port: the entry it alone owned goes, mgr-b's stays. */
    got = apply_widget("mgr-a", false, "{\"replicas\":2}", &rc, &err);
    IT_OK(rc, &err);
    const json_t *ports = kube_obj_path(got, "spec.ports");
    assert_int_equal(json_array_size(ports), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ports, 0), "name")),
                        "grpc");
    json_decref(got);
}

static void test_apply_creates_configmap(void **state)
{
    struct kube_err err;
    json_t *got = NULL;
    (void)state;
    json_t *obj = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                            "metadata", "name", "applied", "data", "k", "v");
    IT_OK(kube_apply(client, &KUBE_RES_CONFIGMAPS, ns, obj, "as-it", false, &got, &err), &err);
    assert_string_equal(kube_obj_path_str(got, "data.k"), "v");
    assert_true(manages(got, "as-it"));
    json_decref(got);
    /* Re-applying the same configuration is a no-op: the resourceVersion stays. */
    IT_OK(kube_get(client, &KUBE_RES_CONFIGMAPS, ns, "applied", &got, &err), &err);
    json_t *again = NULL;
    IT_OK(kube_apply(client, &KUBE_RES_CONFIGMAPS, ns, obj, "as-it", false, &again, &err), &err);
    assert_string_equal(kube_obj_resource_version(again), kube_obj_resource_version(got));
    json_decref(got);
    json_decref(again);
    json_decref(obj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_patch),
        cmocka_unit_test(test_json_patch),
        cmocka_unit_test(test_strategic_merge_patch),
        cmocka_unit_test(test_server_side_apply),
        cmocka_unit_test(test_apply_creates_configmap),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
