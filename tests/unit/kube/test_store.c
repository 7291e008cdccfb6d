/* SPDX-License-Identifier: Apache-2.0 */
/* Indexed store: keys, replace/remove, secondary indexes, transform, immutability of
 * stored objects, and concurrent readers and writers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/limits.h"
#include "common/xalloc.h"
#include "kube/obj.h"
#include "kube/store.h"

/* {"metadata":{"namespace":ns,"name":name,"resourceVersion":rv,"labels":{"app":app}}} */
static json_t *mkobj(const char *ns, const char *name, const char *rv, const char *app)
{
    json_t *md = json_pack("{s:s, s:s}", "name", name, "resourceVersion", rv);
    assert_non_null(md);
    if (ns)
        json_object_set_new(md, "namespace", json_string(ns));
    if (app)
        json_object_set_new(md, "labels", json_pack("{s:s}", "app", app));
    return json_pack("{s:s, s:o}", "kind", "Pod", "metadata", md);
}

static void add_owner(json_t *obj, const char *uid, bool controller)
{
    json_t *md = json_object_get(obj, "metadata");
    json_t *refs = json_object_get(md, "ownerReferences");
    if (!refs) {
        refs = json_array();
        json_object_set_new(md, "ownerReferences", refs);
    }
    json_array_append_new(refs, json_pack("{s:s, s:s, s:b}", "uid", uid, "kind", "Sandbox",
                                          "controller", controller));
}

static bool objv_has(const struct kube_objv *ov, const char *name)
{
    for (size_t i = 0; i < ov->n; i++)
        if (strcmp(kube_obj_name(ov->v[i]), name) == 0)
            return true;
    return false;
}

static bool strv_has(const struct kube_strv *sv, const char *s)
{
    for (size_t i = 0; i < sv->n; i++)
        if (strcmp(sv->v[i], s) == 0)
            return true;
    return false;
}

static void test_put_get_remove(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    json_t *a = mkobj("ns1", "a", "1", NULL);
    assert_int_equal(kube_store_put(s, json_incref(a), NULL), 0);
    assert_int_equal(kube_store_put(s, mkobj(NULL, "node1", "2", NULL), NULL), 0);
    assert_int_equal(kube_store_len(s), 2);

    json_t *got = kube_store_get(s, "ns1/a");
    assert_ptr_equal(got, a); /* stored as is, never copied */
    json_decref(got);
    got = kube_store_get_ns(s, "ns1", "a");
    assert_ptr_equal(got, a);
    json_decref(got);
    got = kube_store_get_ns(s, NULL, "node1");
    assert_non_null(got);
    assert_string_equal(kube_obj_name(got), "node1");
    json_decref(got);
    assert_null(kube_store_get(s, "ns2/a"));
    assert_null(kube_store_get(s, "a"));
    assert_true(kube_store_has_ns(s, "ns1", "a"));
    assert_true(kube_store_has_ns(s, "", "node1"));
    assert_false(kube_store_has_ns(s, "ns2", "a"));
    assert_false(kube_store_has_ns(s, "ns1", "node1"));
    /* no name, or a key over the limit: nothing is looked up */
    assert_false(kube_store_has_ns(s, "ns1", NULL));
    assert_false(kube_store_has_ns(s, "ns1", ""));
    assert_null(kube_store_get_ns(s, "ns1", NULL));
    char longname[LIMIT_KUBE_STORE_KEY + 2];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_false(kube_store_has_ns(s, NULL, longname));
    assert_null(kube_store_get_ns(s, "ns1", longname + 4));

    /* no name: rejected, and the reference is still taken (ASan would report a leak) */
    assert_int_equal(kube_store_put(s, json_pack("{s:{}}", "metadata"), NULL), -EINVAL);
    assert_int_equal(kube_store_len(s), 2);

    json_t *old = NULL;
    assert_int_equal(kube_store_put(s, mkobj("ns1", "a", "3", NULL), &old), 0);
    assert_ptr_equal(old, a);
    json_decref(old);
    assert_int_equal(kube_store_put(s, mkobj("ns1", "b", "4", NULL), &old), 0);
    assert_null(old);

    struct kube_strv keys = {0};
    kube_store_keys(s, &keys);
    assert_int_equal(keys.n, 3);
    assert_true(strv_has(&keys, "ns1/a") && strv_has(&keys, "ns1/b") && strv_has(&keys, "node1"));
    kube_strv_done(&keys);

    assert_int_equal(kube_store_remove(s, "ns1/a", &old), 0);
    assert_string_equal(kube_obj_resource_version(old), "3");
    json_decref(old);
    assert_int_equal(kube_store_remove(s, "ns1/a", &old), -ENOENT);
    assert_int_equal(kube_store_remove(s, "node1", NULL), 0);
    assert_int_equal(kube_store_len(s), 1);

    struct kube_objv all = {0};
    kube_store_list(s, &all);
    assert_int_equal(all.n, 1);
    assert_true(objv_has(&all, "b"));
    kube_objv_done(&all);
    assert_int_equal(all.n, 0);
    json_decref(a);
    kube_store_free(s);
    kube_store_free(NULL);
}

static void test_key(void **state)
{
    (void)state;
    char key[LIMIT_KUBE_STORE_KEY + 1];
    json_t *o = mkobj("ns", "n", "1", NULL);
    assert_int_equal(kube_store_key(o, key, sizeof(key)), 0);
    assert_string_equal(key, "ns/n");
    assert_int_equal(kube_store_key(o, key, 4), -E2BIG);
    json_decref(o);
    o = mkobj("", "n", "1", NULL);
    assert_int_equal(kube_store_key(o, key, sizeof(key)), 0);
    assert_string_equal(key, "n");
    json_decref(o);
    char longname[LIMIT_KUBE_STORE_KEY + 10];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    o = mkobj("ns", longname, "1", NULL);
    assert_int_equal(kube_store_key(o, key, sizeof(key)), -E2BIG);
    struct kube_store *s = kube_store_new();
    assert_int_equal(kube_store_put(s, o, NULL), -E2BIG);
    kube_store_free(s);
}

static const char *const app_key = "app";

static void test_indexes(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    json_t *p1 = mkobj("ns1", "p1", "1", "web");
    add_owner(p1, "uid-1", true);
    add_owner(p1, "uid-2", false);
    json_t *p2 = mkobj("ns2", "p2", "1", "web");
    add_owner(p2, "uid-2", true);
    assert_int_equal(kube_store_put(s, p1, NULL), 0);
    /* an index added after objects are stored indexes them at once */
    assert_int_equal(kube_store_add_index(s, "ns", kube_index_namespace, NULL), 0);
    assert_int_equal(kube_store_add_index(s, "owner", kube_index_owner_uid, NULL), 0);
    assert_int_equal(kube_store_add_index(s, "ctrl", kube_index_controller_uid, NULL), 0);
    assert_int_equal(kube_store_add_index(s, "app", kube_index_label, (void *)app_key), 0);
    assert_int_equal(kube_store_add_index(s, "app", kube_index_label, (void *)app_key), -EEXIST);
    assert_int_equal(kube_store_put(s, p2, NULL), 0);
    assert_int_equal(kube_store_put(s, mkobj("ns1", "p3", "1", NULL), NULL), 0);

    struct kube_objv ov = {0};
    assert_int_equal(kube_store_by_index(s, "owner", "uid-2", &ov), 2);
    assert_true(objv_has(&ov, "p1") && objv_has(&ov, "p2"));
    kube_objv_done(&ov);
    assert_int_equal(kube_store_by_index(s, "ctrl", "uid-2", &ov), 1);
    assert_true(objv_has(&ov, "p2"));
    kube_objv_done(&ov);
    assert_int_equal(kube_store_by_index(s, "ctrl", "uid-1", &ov), 1);
    assert_true(objv_has(&ov, "p1"));
    kube_objv_done(&ov);
    assert_int_equal(kube_store_by_index(s, "ns", "ns1", &ov), 2);
    kube_objv_done(&ov);
    assert_int_equal(kube_store_by_index(s, "app", "web", &ov), 2);
    kube_objv_done(&ov);
    assert_int_equal(kube_store_by_index(s, "app", "db", &ov), 0);
    assert_int_equal(kube_store_by_index(s, "nope", "web", &ov), -ENOENT);
    assert_int_equal(ov.n, 0);

    /* replacing moves the object between index values */
    assert_int_equal(kube_store_put(s, mkobj("ns1", "p1", "2", "db"), NULL), 0);
    struct kube_strv keys = {0};
    assert_int_equal(kube_store_index_keys(s, "app", "web", &keys), 1);
    assert_string_equal(keys.v[0], "ns2/p2");
    kube_strv_done(&keys);
    assert_int_equal(kube_store_index_keys(s, "app", "db", &keys), 1);
    assert_string_equal(keys.v[0], "ns1/p1");
    kube_strv_done(&keys);
    assert_int_equal(kube_store_index_keys(s, "owner", "uid-1", &keys), 0);
    assert_int_equal(kube_store_index_keys(s, "owner", "uid-2", &keys), 1);
    kube_strv_done(&keys);

    assert_int_equal(kube_store_remove(s, "ns2/p2", NULL), 0);
    assert_int_equal(kube_store_index_keys(s, "owner", "uid-2", &keys), 0);
    assert_int_equal(kube_store_index_keys(s, "app", "web", &keys), 0);
    assert_int_equal(kube_store_index_keys(s, "ns", "ns2", &keys), 0);
    assert_int_equal(kube_store_index_keys(s, "nope", "x", &keys), -ENOENT);
    assert_int_equal(keys.n, 0);
    kube_store_free(s);
}

static void test_transform(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    kube_store_set_transform(s, kube_store_strip_transform, NULL);
    json_t *o = mkobj("ns", "a", "1", NULL);
    json_t *md = json_object_get(o, "metadata");
    json_object_set_new(md, "managedFields", json_pack("[{s:s}]", "manager", "kubectl"));
    json_object_set_new(md, "annotations",
                        json_pack("{s:s, s:s}", "kubectl.kubernetes.io/last-applied-configuration",
                                  "{...}", "keep", "me"));
    assert_int_equal(kube_store_put(s, o, NULL), 0);
    json_t *got = kube_store_get(s, "ns/a");
    assert_null(kube_obj_path(got, "metadata.managedFields"));
    assert_null(kube_obj_annotation(got, "kubectl.kubernetes.io/last-applied-configuration"));
    assert_string_equal(kube_obj_annotation(got, "keep"), "me");
    assert_string_equal(kube_obj_name(got), "a");
    json_decref(got);

    o = mkobj("ns", "b", "1", NULL);
    md = json_object_get(o, "metadata");
    json_object_set_new(
        md, "annotations",
        json_pack("{s:s}", "kubectl.kubernetes.io/last-applied-configuration", "x"));
    assert_int_equal(kube_store_put(s, o, NULL), 0);
    got = kube_store_get(s, "ns/b");
    assert_null(kube_obj_path(got, "metadata.annotations"));
    json_decref(got);

    kube_store_set_transform(s, NULL, NULL);
    o = mkobj("ns", "c", "1", NULL);
    json_object_set_new(json_object_get(o, "metadata"), "managedFields", json_array());
    assert_int_equal(kube_store_put(s, o, NULL), 0);
    got = kube_store_get(s, "ns/c");
    assert_non_null(kube_obj_path(got, "metadata.managedFields"));
    json_decref(got);
    kube_store_free(s);
}

/* A reader's reference survives replacement and removal unchanged. */
static void test_immutability(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    assert_int_equal(kube_store_put(s, mkobj("ns", "a", "1", "web"), NULL), 0);
    json_t *held = kube_store_get(s, "ns/a");
    json_t *snapshot = json_deep_copy(held);
    size_t refs = held->refcount;
    assert_int_equal(refs, 2); /* the store's and ours */

    assert_int_equal(kube_store_put(s, mkobj("ns", "a", "2", "db"), NULL), 0);
    assert_int_equal(held->refcount, 1);
    assert_true(json_equal(held, snapshot));
    assert_int_equal(kube_store_remove(s, "ns/a", NULL), 0);
    assert_true(json_equal(held, snapshot));
    json_decref(held);
    json_decref(snapshot);
    kube_store_free(s);
}

enum { N_KEYS = 32, N_WRITES = 3000, N_READS = 3000 };

struct conc {
    struct kube_store *s;
    int id;
    int failures;
};

static void *writer(void *arg)
{
    struct conc *c = arg;
    char name[32], app[32], rv[32];
    for (int i = 0; i < N_WRITES; i++) {
        int k = (i * 7 + c->id) % N_KEYS;
        (void)snprintf(name, sizeof(name), "obj-%d", k);
        (void)snprintf(app, sizeof(app), "app-%d", i % 4);
        (void)snprintf(rv, sizeof(rv), "%d", i);
        if (i % 5 == 4) {
            char key[64];
            (void)snprintf(key, sizeof(key), "ns/%s", name);
            (void)kube_store_remove(c->s, key, NULL);
        } else if (kube_store_put(c->s, mkobj("ns", name, rv, app), NULL) < 0) {
            c->failures++;
        }
    }
    return NULL;
}

/* Every object a reader sees is complete and filed under the values it carries. */
static void *reader(void *arg)
{
    struct conc *c = arg;
    char key[64], app[32];
    for (int i = 0; i < N_READS; i++) {
        (void)snprintf(key, sizeof(key), "ns/obj-%d", i % N_KEYS);
        json_t *o = kube_store_get(c->s, key);
        if (o && strcmp(kube_obj_name(o), key + 3) != 0)
            c->failures++;
        json_decref(o);
        (void)snprintf(app, sizeof(app), "app-%d", i % 4);
        struct kube_objv ov = {0};
        if (kube_store_by_index(c->s, "app", app, &ov) < 0)
            c->failures++;
        for (size_t j = 0; j < ov.n; j++)
            if (!ov.v[j] || strcmp(kube_obj_label(ov.v[j], "app"), app) != 0)
                c->failures++;
        kube_objv_done(&ov);
        if (i % 100 == 0) {
            kube_store_list(c->s, &ov);
            if (ov.n > N_KEYS)
                c->failures++;
            kube_objv_done(&ov);
        }
    }
    return NULL;
}

static void test_concurrent(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    assert_int_equal(kube_store_add_index(s, "app", kube_index_label, (void *)app_key), 0);
    struct conc cs[6];
    pthread_t th[6];
    for (int i = 0; i < 6; i++) {
        cs[i] = (struct conc){.s = s, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, i < 2 ? writer : reader, &cs[i]), 0);
    }
    for (int i = 0; i < 6; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(cs[i].failures, 0);
    }
    /* the index agrees with the objects once writers are done */
    size_t indexed = 0;
    for (int a = 0; a < 4; a++) {
        char app[32];
        (void)snprintf(app, sizeof(app), "app-%d", a);
        struct kube_objv ov = {0};
        assert_true(kube_store_by_index(s, "app", app, &ov) >= 0);
        indexed += ov.n;
        kube_objv_done(&ov);
    }
    assert_int_equal(indexed, kube_store_len(s));
    kube_store_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_remove), cmocka_unit_test(test_key),
        cmocka_unit_test(test_indexes),        cmocka_unit_test(test_transform),
        cmocka_unit_test(test_immutability),   cmocka_unit_test(test_concurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
