/* SPDX-License-Identifier: Apache-2.0 */
/* The store in compact mode (objects kept as JSON text): reads return equal but fresh
 * objects, put/remove hand back the old object, indexes, transform and list work as in
 * the default mode, and the mode can only be set on an empty store; a store with a
 * threshold switches to compact mode past it, keeping every object and index. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kube/store.h"

static json_t *pod(const char *name, const char *rv, const char *owner)
{
    return json_pack("{s:s,s:{s:s,s:s,s:s,s:[{s:s,s:b}],s:{s:s}},s:{s:f,s:I,s:s}}", "kind", "Pod",
                     "metadata", "namespace", "ns", "name", name, "resourceVersion", rv,
                     "ownerReferences", "uid", owner, "controller", 1, "managedFields", "x", "y",
                     "spec", "ratio", 0.1, "big", (json_int_t)9007199254740993LL, "nul",
                     "a\u00e9b");
}

static void test_roundtrip_and_fresh_objects(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    assert_int_equal(kube_store_set_compact(s, true), 0);
    json_t *p = pod("a", "1", "u1");
    json_t *copy = json_deep_copy(p);
    assert_int_equal(kube_store_put(s, p, NULL), 0);
    json_t *g1 = kube_store_get(s, "ns/a"), *g2 = kube_store_get_ns(s, "ns", "a");
    assert_non_null(g1);
    assert_true(json_equal(g1, copy)); /* reals, large integers and UTF-8 survive */
    assert_true(json_equal(g1, g2));
    assert_ptr_not_equal(g1, g2); /* each read parses afresh */
    assert_null(kube_store_get(s, "ns/none"));
    json_decref(g1);
    json_decref(g2);
    json_decref(copy);
    assert_int_equal(kube_store_set_compact(s, false), -EBUSY);
    kube_store_free(s);
}

static void test_put_remove_index_transform(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    assert_int_equal(kube_store_set_compact(s, true), 0);
    kube_store_set_transform(s, kube_store_strip_transform, NULL);
    assert_int_equal(kube_store_add_index(s, "owner", kube_index_controller_uid, NULL), 0);
    json_t *old = NULL;
    assert_int_equal(kube_store_put(s, pod("a", "1", "u1"), &old), 0);
    assert_null(old);
    assert_int_equal(kube_store_put(s, pod("b", "1", "u1"), NULL), 0);
    /* a moves to owner u2: the index follows, the old object comes back */
    assert_int_equal(kube_store_put(s, pod("a", "2", "u2"), &old), 0);
    assert_non_null(old);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(old, "metadata"), "resourceVersion")),
        "1");
    assert_null(json_object_get(json_object_get(old, "metadata"), "managedFields"));
    json_decref(old);
    struct kube_objv v = {0};
    assert_int_equal(kube_store_by_index(s, "owner", "u1", &v), 1);
    assert_int_equal(kube_store_by_index(s, "owner", "u2", &v), 1);
    assert_int_equal(v.n, 2);
    kube_objv_done(&v);
    kube_store_list(s, &v);
    assert_int_equal(v.n, 2);
    kube_objv_done(&v);
    /* an index added later sees the stored objects */
    assert_int_equal(kube_store_add_index(s, "ns", kube_index_namespace, NULL), 0);
    assert_int_equal(kube_store_by_index(s, "ns", "ns", &v), 2);
    kube_objv_done(&v);
    assert_int_equal(kube_store_remove(s, "ns/a", &old), 0);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(old, "metadata"), "name")), "a");
    json_decref(old);
    assert_int_equal(kube_store_remove(s, "ns/a", NULL), -ENOENT);
    assert_int_equal(kube_store_by_index(s, "owner", "u2", &v), 0);
    assert_int_equal(kube_store_len(s), 1);
    kube_store_free(s); /* frees the remaining text (ASan checks) */
}

static void test_switch_past_threshold(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    char name[16];
    kube_store_set_compact_above(s, 3);
    assert_int_equal(kube_store_add_index(s, "owner", kube_index_controller_uid, NULL), 0);
    for (int i = 0; i < 3; i++) {
        (void)snprintf(name, sizeof(name), "p%d", i);
        assert_int_equal(kube_store_put(s, pod(name, "1", i % 2 ? "odd" : "even"), NULL), 0);
    }
    json_t *held = kube_store_get(s, "ns/p0"); /* a tree handed out before the switch */
    json_t *g;
    assert_false(kube_store_is_compact(s)); /* 3 is not past 3 */
    g = kube_store_get(s, "ns/p0");
    assert_ptr_equal(g, held); /* parsed mode: the same tree */
    json_decref(g);
    json_t *old = NULL;
    assert_int_equal(kube_store_put(s, pod("p0", "2", "even"), &old), 0); /* a replace */
    assert_ptr_equal(old, held);
    json_decref(old);
    assert_false(kube_store_is_compact(s));
    assert_int_equal(kube_store_put(s, pod("p3", "1", "odd"), NULL), 0); /* the 4th */
    assert_true(kube_store_is_compact(s));
    assert_int_equal(kube_store_len(s), 4);
    g = kube_store_get(s, "ns/p0");
    assert_ptr_not_equal(g, held); /* now parsed per read */
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(g, "metadata"), "resourceVersion")), "2");
    json_decref(g);
    struct kube_objv v = {0};
    assert_int_equal(kube_store_by_index(s, "owner", "odd", &v), 2);
    kube_objv_done(&v);
    /* a replace and a remove after the switch hand back the old object */
    assert_int_equal(kube_store_put(s, pod("p1", "2", "even"), &old), 0);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(old, "metadata"), "name")), "p1");
    json_decref(old);
    assert_int_equal(kube_store_remove(s, "ns/p3", &old), 0);
    json_decref(old);
    assert_int_equal(kube_store_by_index(s, "owner", "odd", &v), 0);
    assert_true(kube_store_is_compact(s)); /* never switches back */
    json_decref(held);                     /* still valid after the switch (ASan checks) */
    kube_store_free(s);
}

/* An object whose text cannot be read back (a key with a NUL byte: jansson writes it as
 * \u0000 and refuses it in a key when parsing), standing in for a damaged blob. */
static json_t *unreadable_pod(const char *name, const char *rv, const char *owner)
{
    json_t *p = pod(name, rv, owner);
    assert_int_equal(json_object_setn(json_object_get(p, "spec"), "k\0x", 3, json_true()), 0);
    return p;
}

/* A stored object that cannot be unpacked still leaves every index when it is replaced or
 * removed (its values are unknown, so its key is taken out of every value), and a remove
 * says what happened: -EIO, not -ENOENT. */
static void test_unreadable_leaves_indexes(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    struct kube_strv keys = {0};
    json_t *old = NULL;
    assert_int_equal(kube_store_set_compact(s, true), 0);
    assert_int_equal(kube_store_add_index(s, "owner", kube_index_controller_uid, NULL), 0);
    assert_int_equal(kube_store_put(s, unreadable_pod("a", "1", "u1"), NULL), 0);
    assert_int_equal(kube_store_put(s, pod("b", "1", "u1"), NULL), 0);
    assert_null(kube_store_get(s, "ns/a")); /* held, but unreadable */
    assert_int_equal(kube_store_index_keys(s, "owner", "u1", &keys), 2);
    kube_strv_done(&keys);

    /* replaced by a readable object of another owner: a leaves u1's set */
    assert_int_equal(kube_store_put(s, pod("a", "2", "u2"), &old), 0);
    assert_null(old);
    assert_int_equal(kube_store_index_keys(s, "owner", "u1", &keys), 1);
    assert_string_equal(keys.v[0], "ns/b");
    kube_strv_done(&keys);
    assert_int_equal(kube_store_index_keys(s, "owner", "u2", &keys), 1);
    kube_strv_done(&keys);

    /* removed while unreadable: -EIO, and out of the index (its value set goes) */
    assert_int_equal(kube_store_put(s, unreadable_pod("c", "1", "u3"), NULL), 0);
    assert_int_equal(kube_store_remove(s, "ns/c", &old), -EIO);
    assert_null(old);
    assert_int_equal(kube_store_index_keys(s, "owner", "u3", &keys), 0);
    assert_int_equal(keys.n, 0);
    assert_int_equal(kube_store_remove(s, "ns/c", NULL), -ENOENT);
    assert_int_equal(kube_store_len(s), 2);
    kube_store_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_and_fresh_objects),
        cmocka_unit_test(test_put_remove_index_transform),
        cmocka_unit_test(test_switch_past_threshold),
        cmocka_unit_test(test_unreadable_leaves_indexes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
