/* SPDX-License-Identifier: Apache-2.0 */
/* Watches and informers against the real kube-apiserver: a watch from a compacted
 * resourceVersion gets 410 Expired and the informer relists and converges; an informer
 * converges exactly under 1,000 rapid changes. PodTemplates are used where the test
 * needs etcd's compaction to show: hack/apiserver.sh gives them no watch cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/xalloc.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/obj.h"
#include "kube/res.h"
#include "kube/store.h"
#include "kube/watch.h"
#include "support/apiserver.h"
#include "support/kube_fixture.h"

#define WAIT (60 * USEC_PER_SEC)

static const struct kube_res PODTEMPLATES = {
    .group = "",
    .version = "v1",
    .kind = "PodTemplate",
    .plural = "podtemplates",
    .namespaced = true,
};

static struct kube_client *client;
static char ns[64];

static int setup(void **state)
{
    (void)state;
    it_fixture_setup("it-watch", NULL, &client, ns, sizeof(ns));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    it_fixture_teardown(client, ns, NULL);
    return 0;
}

/* Creates PodTemplate name with label value v; returns its resourceVersion (new). */
static char *create_pt(const char *name, const char *v)
{
    struct kube_err err;
    json_t *got = NULL;
    json_t *obj = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:{s:[{s:s, s:s}]}}}", "apiVersion",
                            "v1", "kind", "PodTemplate", "metadata", "name", name, "labels", "v", v,
                            "template", "spec", "containers", "name", "c", "image", "none");
    IT_OK(kube_create(client, &PODTEMPLATES, ns, obj, &got, &err), &err);
    char *rv = xstrdup(kube_obj_resource_version(got));
    json_decref(obj);
    json_decref(got);
    return rv;
}

static void compact_now(void)
{
    int64_t rev = 0;
    assert_int_equal(it_etcd_revision(&rev), 0);
    assert_true(rev > 0);
    assert_int_equal(it_etcd_compact(rev), 0);
}

static int count_event(void *ctx, const struct kube_event *ev)
{
    (*(int *)ctx)++;
    (void)ev;
    return 0;
}

/* The raw protocol: a watch from a compacted resourceVersion ends with 410. */
static void test_watch_after_compaction_is_gone(void **state)
{
    struct kube_err err;
    struct kube_req req;
    atomic_bool stop = false;
    int events = 0;
    (void)state;

    char *old_rv = create_pt("gone-0", "a");
    xfree(create_pt("gone-1", "a"));
    xfree(create_pt("gone-2", "a"));
    compact_now();

    struct kube_watch *w = kube_watch_new(0, count_event, &events);
    kube_req_init(&req, "GET", &PODTEMPLATES);
    req.ns = ns;
    req.watch = true;
    req.resource_version = old_rv;
    req.timeout_seconds = 10;
    int r = kube_request_stream(client, &req, kube_watch_feed, w, &stop, 0, &err);
    bool gone = r == -ESTALE || kube_err_is_gone(&err) || kube_err_is_gone(kube_watch_error(w));
    if (!gone)
        fail_msg("watch from compacted rv %s returned %d (%ld %s)", old_rv, r, err.http_status,
                 err.message);
    assert_int_equal(events, 0);
    kube_watch_free(w);
    xfree(old_rv);
}

/* A source that lists and watches through the API server, except that a watch can be
 * held back ("paused") before it connects, so the test can change and compact the
 * store while the informer is between two watches. */
struct gated {
    pthread_mutex_t mu;
    bool paused, parked;
    int watches;
};

static bool gate_wait(struct gated *g, const atomic_bool *stop)
{
    pthread_mutex_lock(&g->mu);
    while (g->paused && !atomic_load(stop)) {
        g->parked = true;
        pthread_mutex_unlock(&g->mu);
        clock_sleep(5 * USEC_PER_MSEC);
        pthread_mutex_lock(&g->mu);
    }
    g->parked = false;
    g->watches++;
    pthread_mutex_unlock(&g->mu);
    return !atomic_load(stop);
}

static int gated_list(void *ctx, const struct kube_informer_opts *o, json_t **ret_list,
                      struct kube_err *reterr)
{
    (void)ctx;
    return kube_list_all(o->client, o->res, o->ns, NULL, ret_list, reterr);
}

static int gated_watch(void *ctx, const struct kube_informer_opts *o,
                       const struct kube_informer_watch_args *a, struct kube_err *reterr)
{
    struct kube_req r;
    if (!gate_wait(ctx, a->stop))
        return -ECANCELED;
    kube_req_init(&r, "GET", o->res);
    r.ns = o->ns;
    r.watch = true;
    r.allow_watch_bookmarks = true;
    r.resource_version = a->resource_version;
    r.timeout_seconds = a->timeout_seconds;
    int ret = kube_request_stream(o->client, &r, a->fn, a->fn_ctx, a->stop, 0, reterr);
    if (ret < 0 && ret != -ECANCELED && kube_err_is_gone(reterr))
        ret = -ESTALE;
    return ret;
}

static bool parked(void *ctx)
{
    struct gated *g = ctx;
    pthread_mutex_lock(&g->mu);
    bool p = g->parked;
    pthread_mutex_unlock(&g->mu);
    return p;
}

/* The store holds exactly what a fresh LIST of res in ns returns, resourceVersions
 * included. */
struct match_ctx {
    struct kube_informer *inf;
    const struct kube_res *res;
    size_t listed;
};

static bool store_matches_list(void *ctx)
{
    struct match_ctx *m = ctx;
    struct kube_store *s = kube_informer_store(m->inf);
    json_t *list = NULL, *item;
    size_t i;
    if (kube_list_all(client, m->res, ns, NULL, &list, NULL) < 0)
        return false;
    const json_t *items = json_object_get(list, "items");
    bool ok = kube_store_len(s) == json_array_size(items);
    json_array_foreach(items, i, item)
    {
        if (!ok)
            break;
        json_t *cached = kube_store_get_ns(s, ns, kube_obj_name(item));
        ok = cached &&
             strcmp(kube_obj_resource_version(cached), kube_obj_resource_version(item)) == 0;
        json_decref(cached);
    }
    m->listed = json_array_size(items);
    json_decref(list);
    return ok;
}

static void change_while_parked(void)
{
    struct kube_err err;
    xfree(create_pt("relist-new", "b"));
    IT_OK(kube_delete(client, &PODTEMPLATES, ns, "relist-0", &err), &err);
    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "v", "changed");
    IT_OK(kube_patch(client, &PODTEMPLATES, ns, "relist-1", KUBE_PATCH_MERGE, patch, NULL, &err),
          &err);
    json_decref(patch);
    compact_now();
}

static void test_informer_relists_after_compaction(void **state)
{
    struct gated g = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct kube_informer_source src = {.list = gated_list, .watch = gated_watch, .ctx = &g};
    struct kube_informer_opts o = {
        .client = client, .res = &PODTEMPLATES, .ns = ns, .watch_timeout_s = 1, .source = &src};
    struct kube_informer *inf = NULL;
    struct kube_informer_stats st;
    (void)state;

    xfree(create_pt("relist-0", "a"));
    xfree(create_pt("relist-1", "a"));
    assert_int_equal(kube_informer_new(&o, &inf), 0);
    assert_int_equal(kube_informer_start(inf), 0);
    assert_int_equal(kube_informer_wait_for_sync(inf, WAIT), 0);

    /* Hold the next watch back; the current one ends within its 1 s timeout. */
    pthread_mutex_lock(&g.mu);
    g.paused = true;
    pthread_mutex_unlock(&g.mu);
    assert_int_equal(it_wait(parked, &g, WAIT), 0);
    change_while_parked();
    pthread_mutex_lock(&g.mu);
    g.paused = false;
    pthread_mutex_unlock(&g.mu);

    struct match_ctx m = {.inf = inf, .res = &PODTEMPLATES};
    assert_int_equal(it_wait(store_matches_list, &m, WAIT), 0);
    struct kube_store *s = kube_informer_store(inf);
    json_t *gone = kube_store_get_ns(s, ns, "relist-0");
    json_t *added = kube_store_get_ns(s, ns, "relist-new");
    json_t *changed = kube_store_get_ns(s, ns, "relist-1");
    assert_null(gone);
    assert_non_null(added);
    assert_non_null(changed);
    assert_string_equal(kube_obj_label(changed, "v"), "changed");
    json_decref(added);
    json_decref(changed);
    kube_informer_stats(inf, &st);
    assert_true(st.gone >= 1);
    assert_true(st.relists >= 1);
    assert_true(st.deletes >= 1);
    kube_informer_free(inf);
}

/* 1,000 creates, updates and deletes over 100 keys, as fast as one client goes. */
static void churn(int ops, int keys)
{
    struct kube_err err;
    bool exists[128] = {false};
    char name[32], val[16];
    uint32_t x = 2463534242u; /* xorshift: the same sequence every run */
    for (int i = 0; i < ops; i++) {
        int k = i % keys;
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        snprintf(name, sizeof(name), "churn-%03d", k);
        snprintf(val, sizeof(val), "%d", i);
        if (!exists[k]) {
            json_t *obj = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind",
                                    "ConfigMap", "metadata", "name", name, "data", "v", val);
            IT_OK(kube_create(client, &KUBE_RES_CONFIGMAPS, ns, obj, NULL, &err), &err);
            json_decref(obj);
            exists[k] = true;
        } else if (x % 10 < 7) {
            json_t *p = json_pack("{s:{s:s}}", "data", "v", val);
            IT_OK(
                kube_patch(client, &KUBE_RES_CONFIGMAPS, ns, name, KUBE_PATCH_MERGE, p, NULL, &err),
                &err);
            json_decref(p);
        } else {
            IT_OK(kube_delete(client, &KUBE_RES_CONFIGMAPS, ns, name, &err), &err);
            exists[k] = false;
        }
    }
}

struct counts {
    atomic_int adds, updates, deletes;
};

static void on_add(void *ctx, const json_t *obj)
{
    struct counts *c = ctx;
    (void)obj;
    atomic_fetch_add(&c->adds, 1);
}

static void on_update(void *ctx, const json_t *old_obj, const json_t *new_obj)
{
    struct counts *c = ctx;
    (void)old_obj;
    (void)new_obj;
    atomic_fetch_add(&c->updates, 1);
}

static void on_delete(void *ctx, const json_t *obj, bool final_state_unknown)
{
    struct counts *c = ctx;
    (void)obj;
    (void)final_state_unknown;
    atomic_fetch_add(&c->deletes, 1);
}

static void test_informer_converges_under_churn(void **state)
{
    struct counts n = {0};
    struct kube_informer_handlers h = {
        .on_add = on_add, .on_update = on_update, .on_delete = on_delete, .ctx = &n};
    struct kube_informer_opts o = {.client = client, .res = &KUBE_RES_CONFIGMAPS, .ns = ns};
    struct kube_informer *inf = NULL;
    (void)state;

    assert_int_equal(kube_informer_new(&o, &inf), 0);
    assert_int_equal(kube_informer_add_handlers(inf, &h), 0);
    assert_int_equal(kube_informer_start(inf), 0);
    assert_int_equal(kube_informer_wait_for_sync(inf, WAIT), 0);
    churn(1000, 100);

    struct match_ctx m = {.inf = inf, .res = &KUBE_RES_CONFIGMAPS};
    assert_int_equal(it_wait(store_matches_list, &m, WAIT), 0);
    assert_true(m.listed > 0);
    /* Every object still present was added once more than it was deleted. */
    assert_int_equal((size_t)(atomic_load(&n.adds) - atomic_load(&n.deletes)), m.listed);
    assert_true(atomic_load(&n.updates) > 0);
    kube_informer_free(inf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watch_after_compaction_is_gone),
        cmocka_unit_test(test_informer_relists_after_compaction),
        cmocka_unit_test(test_informer_converges_under_churn),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
