/* SPDX-License-Identifier: Apache-2.0 */
/* --namespace=a,b against the real kube-apiserver: one informer over two of three
 * namespaces (controller/ns_source.h). Its store gets the objects of the two and never
 * of the third, through the initial LIST, live events, watch streams that end every
 * second and resume (each namespace from its own resourceVersion), updates and
 * deletes. ConfigMaps stand in for every kind (the source does not care). Then the
 * controller manager in-process with --namespace=a,b: a Sandbox in a and one in b get
 * their Pods, one in c is left alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "api/res.h"
#include "common/log.h"
#include "controller/manager.h"
#include "controller/ns_source.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/obj.h"
#include "kube/res.h"
#include "kube/store.h"
#include "support/apiserver.h"
#include "support/kube_fixture.h"

#define WAIT (60 * USEC_PER_SEC)

static struct kube_client *client;
static char ns[3][64]; /* a and b are watched, c is not */

static int setup(void **state)
{
    struct kube_err err;
    (void)state;
    struct it_sandbox_ns_opts o = {.prefix = "it-nsset", .default_sa = true, .timeout = WAIT};
    log_set_level(LOG_WARN);
    IT_OK(it_client_new(NULL, &client, &err), &err);
    for (int i = 0; i < 3; i++)
        IT_OK(it_sandbox_ns_setup(client, &o, ns[i], sizeof(ns[i]), &err), &err);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++)
        assert_int_equal(it_ns_delete(client, ns[i], WAIT), 0);
    kube_client_free(client);
    return 0;
}

static void put_cm(int which, const char *name, const char *value)
{
    struct kube_err err;
    json_t *cm = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                           "metadata", "name", name, "data", "v", value);
    json_t *cur = NULL;
    if (kube_get(client, &KUBE_RES_CONFIGMAPS, ns[which], name, &cur, &err) == 0) {
        json_object_set_new(cm, "metadata",
                            json_pack("{s:s, s:s}", "name", name, "resourceVersion",
                                      kube_obj_resource_version(cur)));
        IT_OK(kube_update(client, &KUBE_RES_CONFIGMAPS, ns[which], cm, NULL, &err), &err);
    } else {
        IT_OK(kube_create(client, &KUBE_RES_CONFIGMAPS, ns[which], cm, NULL, &err), &err);
    }
    json_decref(cm);
    json_decref(cur);
}

struct probe {
    struct kube_store *store;
    int which;
    const char *name;
    const char *value; /* NULL: must be absent */
};

static bool store_has(void *ctx)
{
    struct probe *p = ctx;
    char key[200];
    (void)snprintf(key, sizeof(key), "%s/%s", ns[p->which], p->name);
    json_t *obj = kube_store_get(p->store, key);
    const char *v = obj ? kube_obj_path_str(json_object_get(obj, "data"), "v") : NULL;
    bool ok = p->value ? v && strcmp(v, p->value) == 0 : obj == NULL;
    json_decref(obj);
    return ok;
}

static void expect(struct kube_store *st, int which, const char *name, const char *value)
{
    struct probe p = {st, which, name, value};
    if (it_wait(store_has, &p, WAIT) < 0)
        fail_msg("%s/%s: expected %s", ns[which], name, value ? value : "absent");
}

static size_t store_len(struct kube_store *st)
{
    struct kube_objv all = {0};
    size_t n;
    kube_store_list(st, &all);
    n = all.n;
    kube_objv_done(&all);
    return n;
}

static void test_two_of_three_namespaces(void **state)
{
    char spec[200];
    struct ctrl_ns_source *s = NULL;
    struct kube_informer_source src;
    struct kube_informer *inf = NULL;
    struct kube_informer_stats stats;
    (void)state;
    for (int i = 0; i < 3; i++)
        put_cm(i, "before", "0");
    (void)snprintf(spec, sizeof(spec), "%s,%s", ns[0], ns[1]);
    assert_int_equal(ctrl_ns_source_for(spec, &s, &src), 0);
    assert_non_null(s);
    struct kube_informer_opts o = {
        .client = client, .res = &KUBE_RES_CONFIGMAPS, .source = &src, .watch_timeout_s = 1};
    assert_int_equal(kube_informer_new(&o, &inf), 0);
    assert_int_equal(kube_informer_start(inf), 0);
    assert_int_equal(kube_informer_wait_for_sync(inf, WAIT), 0);
    struct kube_store *st = kube_informer_store(inf);
    /* The LIST: a and b, not c. */
    expect(st, 0, "before", "0");
    expect(st, 1, "before", "0");
    expect(st, 2, "before", NULL);
    /* Live events in all three namespaces. */
    for (int i = 0; i < 3; i++)
        put_cm(i, "live", "1");
    expect(st, 0, "live", "1");
    expect(st, 1, "live", "1");
    /* Past several 1 s watch timeouts: every namespace resumes where it was. */
    clock_sleep(3 * USEC_PER_SEC);
    put_cm(1, "live", "2");
    put_cm(2, "live", "2");
    expect(st, 1, "live", "2");
    put_cm(0, "live", "3");
    expect(st, 0, "live", "3");
    struct kube_err err;
    IT_OK(kube_delete(client, &KUBE_RES_CONFIGMAPS, ns[1], "before", &err), &err);
    expect(st, 1, "before", NULL);
    /* c never appeared; only a's and b's objects are there (each namespace also has the
     * kube-root-ca.crt ConfigMap when that controller runs). */
    expect(st, 2, "live", NULL);
    expect(st, 2, "before", NULL);
    struct kube_objv all = {0};
    kube_store_list(st, &all);
    for (size_t i = 0; i < all.n; i++) {
        const char *n = kube_obj_namespace(all.v[i]);
        if (!n || (strcmp(n, ns[0]) != 0 && strcmp(n, ns[1]) != 0))
            fail_msg("object from namespace %s in the store", n ? n : "(none)");
    }
    kube_objv_done(&all);
    kube_informer_stats(inf, &stats);
    print_message("store %zu objects; lists %llu, watch starts %llu (restarts %llu), events %llu, "
                  "410s %llu\n",
                  store_len(st), (unsigned long long)stats.lists,
                  (unsigned long long)stats.watch_starts, (unsigned long long)stats.watch_restarts,
                  (unsigned long long)stats.events, (unsigned long long)stats.gone);
    assert_true(stats.watch_restarts >= 2);
    assert_int_equal(stats.lists, 1); /* resumed, never relisted */
    kube_informer_free(inf);
    ctrl_ns_source_free(s);
}

static void create_sandbox(int which)
{
    struct kube_err err;
    json_t *sb = json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:{s:[{s:s, s:s}]}}}}", "apiVersion",
                           "agents.x-k8s.io/v1beta1", "kind", "Sandbox", "metadata", "name", "sb",
                           "spec", "podTemplate", "spec", "containers", "name", "c", "image",
                           "registry.local/none:1");
    IT_OK(kube_create(client, &API_RES_SANDBOXES, ns[which], sb, NULL, &err), &err);
    json_decref(sb);
}

struct pod_probe {
    int which;
};

static bool pod_exists(void *ctx)
{
    struct pod_probe *p = ctx;
    json_t *pod = NULL;
    bool ok = kube_get(client, &KUBE_RES_PODS, ns[p->which], "sb", &pod, NULL) == 0;
    json_decref(pod);
    return ok;
}

static void test_manager_two_namespaces(void **state)
{
    char spec[200];
    struct ctrl_manager *m = NULL;
    struct pod_probe pa = {0}, pb = {1}, pc = {2};
    (void)state;
    (void)snprintf(spec, sizeof(spec), "%s, %s", ns[0], ns[1]);
    struct ctrl_opts o = {.client = client, .workers = 2, .ns = spec, .events = false};
    assert_int_equal(ctrl_manager_new(&o, &m), 0);
    assert_int_equal(ctrl_manager_start(m), 0);
    assert_int_equal(ctrl_manager_wait_synced(m, WAIT), 0);
    for (int i = 0; i < 3; i++)
        create_sandbox(i);
    assert_int_equal(it_wait(pod_exists, &pa, WAIT), 0);
    assert_int_equal(it_wait(pod_exists, &pb, WAIT), 0);
    clock_sleep(USEC_PER_SEC); /* time enough to have acted in c too, if it did */
    assert_false(pod_exists(&pc));
    ctrl_manager_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_of_three_namespaces),
        cmocka_unit_test(test_manager_two_namespaces),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
