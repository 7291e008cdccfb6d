/* SPDX-License-Identifier: Apache-2.0 */
/* Typed accessors over jansson objects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>

#include "common/xalloc.h"
#include "kube/obj.h"

static const char *pod_json =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\","
    "\"uid\":\"u1\",\"resourceVersion\":\"42\",\"generation\":7,"
    "\"deletionTimestamp\":\"2026-01-01T00:00:00Z\",\"labels\":{\"app\":\"x\"},"
    "\"annotations\":{\"a/b\":\"c\"},\"finalizers\":[\"f1\",\"agents.x-k8s.io/f\"],"
    "\"ownerReferences\":[{\"uid\":\"o1\"},{\"uid\":\"o2\",\"controller\":true}]},"
    "\"status\":{\"podIP\":\"10.0.0.1\",\"conditions\":[{\"type\":\"Ready\",\"status\":"
    "\"True\"},{\"type\":\"Scheduled\",\"status\":\"False\"}]}}";

static void test_accessors(void **state)
{
    (void)state;
    json_t *o = json_loads(pod_json, 0, NULL);
    assert_non_null(o);
    assert_string_equal(kube_obj_name(o), "p");
    assert_string_equal(kube_obj_namespace(o), "ns");
    assert_string_equal(kube_obj_uid(o), "u1");
    assert_string_equal(kube_obj_resource_version(o), "42");
    assert_string_equal(kube_obj_kind(o), "Pod");
    assert_int_equal(kube_obj_generation(o), 7);
    assert_true(kube_obj_deleting(o));
    assert_string_equal(kube_obj_label(o, "app"), "x");
    assert_null(kube_obj_label(o, "nope"));
    assert_string_equal(kube_obj_annotation(o, "a/b"), "c");
    assert_string_equal(kube_obj_controller_uid(o), "o2");
    assert_true(kube_obj_has_finalizer(o, "agents.x-k8s.io/f"));
    assert_false(kube_obj_has_finalizer(o, "f"));
    assert_string_equal(kube_obj_path_str(o, "status.podIP"), "10.0.0.1");
    assert_null(kube_obj_path(o, "status.podIP.x"));
    assert_null(kube_obj_path(o, "status.nope"));
    assert_true(kube_obj_condition_true(o, "Ready"));
    assert_false(kube_obj_condition_true(o, "Scheduled"));
    assert_null(kube_obj_condition(o, "Other"));
    struct buf b;
    buf_init(&b, 64);
    assert_int_equal(kube_obj_key(o, &b), 0);
    assert_string_equal(buf_str(&b), "ns/p");
    buf_done(&b);
    json_decref(o);
}

static void test_absent_and_wrong_types(void **state)
{
    (void)state;
    json_t *o = json_loads("{\"metadata\":{\"name\":5,\"labels\":[],\"deletionTimestamp\":null,"
                           "\"ownerReferences\":{}}}",
                           0, NULL);
    assert_null(kube_obj_name(o));
    assert_null(kube_obj_label(o, "x"));
    assert_false(kube_obj_deleting(o));
    assert_null(kube_obj_controller_ref(o));
    assert_int_equal(kube_obj_generation(o), 0);
    assert_null(kube_obj_name(NULL));
    struct buf b;
    buf_init(&b, 64);
    assert_int_equal(kube_obj_key(o, &b), -EINVAL);
    json_decref(o);
    o = json_object();
    kube_obj_set_meta_str(o, "name", "cluster-thing");
    kube_obj_set_meta_str(o, "resourceVersion", "9");
    assert_string_equal(kube_obj_name(o), "cluster-thing");
    assert_string_equal(kube_obj_resource_version(o), "9");
    assert_int_equal(kube_obj_key(o, &b), 0);
    assert_string_equal(buf_str(&b), "cluster-thing");
    buf_done(&b);
    json_decref(o);
}

/* The reset is one empty entry (an empty list would leave the fields as they are), added
 * beside what the patch already holds, with metadata created when absent. */
static void test_reset_managed_fields(void **state)
{
    (void)state;
    json_t *p = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "a", "b");
    kube_obj_reset_managed_fields(p);
    char *got = json_dumps(p, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(got, "{\"metadata\":{\"labels\":{\"a\":\"b\"},\"managedFields\":[{}]}}");
    xfree(got); /* jansson allocates with malloc */
    json_decref(p);
    p = json_pack("{s:{s:s}}", "spec", "x", "y");
    kube_obj_reset_managed_fields(p);
    kube_obj_reset_managed_fields(p); /* twice: the same */
    got = json_dumps(p, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(got, "{\"metadata\":{\"managedFields\":[{}]},\"spec\":{\"x\":\"y\"}}");
    xfree(got); /* jansson allocates with malloc */
    json_decref(p);
}

static void test_rv_compare(void **state)
{
    static const struct {
        const char *a, *b;
        int want; /* -1, 0, 1, or 9: not comparable */
    } cases[] = {
        {"42", "42", 0},
        {"41", "42", -1},
        {"43", "42", 1},
        {"9", "10", -1}, /* by length first, not as text */
        {"100", "99", 1},
        {"123456789012345678901", "123456789012345678900", 1}, /* beyond 64 bits */
        {"012", "12", 9}, /* a leading zero: not the promised form */
        {"0", "1", 9},
        {"", "1", 9},
        {"12a", "12", 9},
        {"-1", "1", 9},
        {NULL, "1", 9},
        {"1", NULL, 9},
        {"123456789012345678901234567890123", "1", 9}, /* longer than any real one */
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got = 7;
        int r = kube_rv_compare(cases[i].a, cases[i].b, &got);
        if (cases[i].want == 9) {
            assert_int_equal(r, -EINVAL);
            assert_int_equal(got, 7);
        } else {
            assert_int_equal(r, 0);
            assert_int_equal(got, cases[i].want);
        }
    }
}

static json_t *with_rv(const char *rv)
{
    json_t *o = json_pack("{s:{s:s}}", "metadata", "name", "a");
    if (rv)
        json_object_set_new(json_object_get(o, "metadata"), "resourceVersion", json_string(rv));
    return o;
}

static void test_same_version(void **state)
{
    static const struct {
        const char *a, *b;
        bool want;
    } cases[] = {
        {"42", "42", true},   {"42", "43", false},
        {"abc", "abc", true}, /* no order needed: any server's opaque version */
        {"42", NULL, false},  {NULL, "42", false},
        {NULL, NULL, false}, /* two unknown versions are not the same one */
        {"", "", false},     /* no version: a write guarded by it is not guarded */
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *a = with_rv(cases[i].a), *b = with_rv(cases[i].b);
        assert_int_equal(kube_obj_same_version(a, b), cases[i].want);
        assert_int_equal(kube_obj_same_version(b, a), cases[i].want);
        json_decref(a);
        json_decref(b);
    }
    assert_false(kube_obj_same_version(NULL, NULL));
}

/* The diff as a merge patch: changed members, nested objects member by member, arrays
 * whole, and null for what went (a claim's status.sandbox.podIPs, its status.sandbox). */
static void test_merge_patch_diff(void **state)
{
    static const struct {
        const char *from, *to, *want;
    } rows[] = {
        {"{}", "{}", "{}"},
        {"{\"a\":1}", "{\"a\":1}", "{}"},
        {"{\"a\":1}", "{\"a\":2}", "{\"a\":2}"},
        {"{\"a\":1,\"b\":2}", "{\"a\":1}", "{\"b\":null}"},
        {"{\"s\":{\"name\":\"x\",\"podIPs\":[\"1\"]}}", "{\"s\":{\"name\":\"x\"}}",
         "{\"s\":{\"podIPs\":null}}"},
        {"{\"s\":{\"name\":\"x\",\"podIPs\":[\"1\"]}}", "{\"s\":{\"name\":\"y\"}}",
         "{\"s\":{\"name\":\"y\",\"podIPs\":null}}"},
        {"{\"s\":{\"name\":\"x\"},\"c\":[1]}", "{\"c\":[1,2]}", "{\"s\":null,\"c\":[1,2]}"},
        {"{\"s\":1}", "{\"s\":{\"a\":1}}", "{\"s\":{\"a\":1}}"},
        {"{\"s\":{\"a\":1}}", "{\"s\":3}", "{\"s\":3}"},
        {"null", "{\"a\":{\"b\":1}}", "{\"a\":{\"b\":1}}"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        json_t *from = json_loads(rows[i].from, JSON_DECODE_ANY, NULL);
        json_t *to = json_loads(rows[i].to, 0, NULL), *want = json_loads(rows[i].want, 0, NULL);
        json_t *got = kube_merge_patch_diff(from, to);
        if (!json_equal(got, want)) {
            char *g = json_dumps(got, JSON_COMPACT);
            print_error("row %zu: got %s, want %s\n", i, g, rows[i].want);
            xfree(g);
            fail();
        }
        json_decref(from);
        json_decref(to);
        json_decref(want);
        json_decref(got);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accessors),
        cmocka_unit_test(test_absent_and_wrong_types),
        cmocka_unit_test(test_rv_compare),
        cmocka_unit_test(test_same_version),
        cmocka_unit_test(test_reset_managed_fields),
        cmocka_unit_test(test_merge_patch_diff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
