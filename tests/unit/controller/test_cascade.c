/* SPDX-License-Identifier: Apache-2.0 */
/* controller/cascade: a deleted owner's sole dependents are deleted after the delay,
 * with the cached UID and resourceVersion as preconditions; what the garbage collector
 * would keep is kept; a refused precondition is looked at again with the cache's newer
 * version, a bounded number of times; off, inactive, full and stopped queue nothing; the
 * sweep finds owners gone while nobody watched, once leading and synced, and deletes
 * only what a read confirms gone. */
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

#include "api/res.h"
#include "common/clock.h"
#include "common/xalloc.h"
#include "controller/cascade.h"
#include "kube/err.h"
#include "kube/obj.h"
#include "kube/res.h"
#include "kube/store.h"

#define IDX "owner"

struct call {
    char kind[32], ns[32], name[64], uid[64], rv[32];
    usec_t at;
};

struct fake {
    pthread_mutex_t lock;
    struct call calls[32];
    int n;
    long status[32]; /* answer to call i: 0 = success, else this HTTP status */
    atomic_bool active;
    struct kube_store *pods, *services, *sandboxes;
    /* a deleted Sandbox leaves the Sandbox cache with its DELETE (as its watch event) */
    bool drop_deleted;
    /* after a 409 answer, put this object in pods (the cache's newer version) */
    json_t *after_conflict;
    atomic_bool synced;
    char reads[16][64]; /* the sweep's owner reads: "Kind/name" */
    int nreads;
    int lose_after; /* when > 0: leadership is lost with that many DELETEs made */
    usec_t slow;    /* each DELETE takes this long; in_delete counts those under way */
    atomic_int in_delete;
    int workers; /* the cascade's workers (0: its default) */
    /* when set: the first Sandbox DELETE queues this owner of class CASCADE_OF_SANDBOX
     * (as its informer event would, the delay after the Sandbox goes) */
    struct cascade *mark_on_delete;
    const char *mark_uid;
};

static int fake_delete(void *ctx, const struct kube_res *res, const json_t *obj,
                       struct kube_err *reterr)
{
    const char *ns = kube_obj_namespace(obj), *name = kube_obj_name(obj);
    const char *uid = kube_obj_uid(obj), *rv = kube_obj_resource_version(obj);
    struct fake *f = ctx;
    const char *body;
    long st = 0;
    pthread_mutex_lock(&f->lock);
    if (f->n < 32) {
        struct call *c = &f->calls[f->n];
        (void)snprintf(c->kind, sizeof(c->kind), "%s", res->kind);
        (void)snprintf(c->ns, sizeof(c->ns), "%s", ns);
        (void)snprintf(c->name, sizeof(c->name), "%s", name);
        (void)snprintf(c->uid, sizeof(c->uid), "%s", uid);
        (void)snprintf(c->rv, sizeof(c->rv), "%s", rv);
        c->at = clock_now();
        st = f->status[f->n++];
        if (f->lose_after && f->n == f->lose_after)
            atomic_store(&f->active, false);
    }
    pthread_mutex_unlock(&f->lock);
    if (f->slow) {
        atomic_fetch_add(&f->in_delete, 1);
        clock_sleep(f->slow);
        atomic_fetch_sub(&f->in_delete, 1);
    }
    if (strcmp(res->kind, "Sandbox") == 0 && f->drop_deleted) {
        char key[300];
        (void)snprintf(key, sizeof(key), "%s/%s", ns, name);
        (void)kube_store_remove(f->sandboxes, key, NULL);
    }
    if (strcmp(res->kind, "Sandbox") == 0 && f->mark_on_delete) {
        assert_true(cascade_owner_deleted(f->mark_on_delete, CASCADE_OF_SANDBOX, ns, f->mark_uid));
        f->mark_on_delete = NULL;
    }
    if (!st)
        return 0;
    if (st == 409 && f->after_conflict) {
        (void)kube_store_put(f->pods, f->after_conflict, NULL);
        f->after_conflict = NULL;
    }
    body = st == 409 ? "{\"kind\":\"Status\",\"reason\":\"Conflict\"}"
                     : "{\"kind\":\"Status\",\"reason\":\"NotFound\"}";
    kube_err_from_response(reterr, st, body, strlen(body));
    return reterr->code ? reterr->code : -EIO;
}

static bool fake_active(void *ctx)
{
    struct fake *f = ctx;
    return atomic_load(&f->active);
}

static bool fake_synced(void *ctx)
{
    struct fake *f = ctx;
    return atomic_load(&f->synced);
}

/* A swept owner's read, answered by its name: "gone-*" 404, "renamed" another UID,
 * "racing" the same UID ("u-racing"), anything else 500. */
static int fake_get(void *ctx, const struct kube_res *res, const char *ns, const char *name,
                    json_t **ret_obj, struct kube_err *reterr)
{
    struct fake *f = ctx;
    const char *body;
    long st;
    (void)ns;
    pthread_mutex_lock(&f->lock);
    if (f->nreads < 16)
        (void)snprintf(f->reads[f->nreads++], sizeof(f->reads[0]), "%s/%s", res->kind, name);
    pthread_mutex_unlock(&f->lock);
    if (strcmp(name, "renamed") == 0 || strcmp(name, "racing") == 0) {
        *ret_obj = json_pack("{s:{s:s,s:s}}", "metadata", "name", name, "uid",
                             strcmp(name, "racing") == 0 ? "u-racing" : "u-new");
        return 0;
    }
    st = strncmp(name, "gone-", 5) == 0 ? 404 : 500;
    body = st == 404 ? "{\"kind\":\"Status\",\"reason\":\"NotFound\"}"
                     : "{\"kind\":\"Status\",\"reason\":\"InternalError\"}";
    kube_err_from_response(reterr, st, body, strlen(body));
    return reterr->code ? reterr->code : -EIO;
}

/* An object of kind in ns named name, uid "u-<name>", rv, owned by owner_uid
 * (controller unless refs says otherwise: "two" adds a second owner, "plain" makes the
 * one reference not the controller, "none" leaves them out). */
static json_t *obj(const char *ns, const char *name, const char *rv, const char *owner_uid,
                   const char *refs, bool deleting)
{
    char uid[64];
    json_t *o, *md, *arr = json_array();
    (void)snprintf(uid, sizeof(uid), "u-%s", name);
    if (strcmp(refs, "none") != 0)
        json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:s,s:b}", "apiVersion", "v1", "kind",
                                             "Owner", "name", "owner", "uid", owner_uid,
                                             "controller", strcmp(refs, "plain") != 0));
    if (strcmp(refs, "two") == 0)
        json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:s}", "apiVersion", "v1", "kind",
                                             "Other", "name", "other", "uid", "u-other"));
    md = json_pack("{s:s,s:s,s:s,s:s,s:o}", "namespace", ns, "name", name, "uid", uid,
                   "resourceVersion", rv, "ownerReferences", arr);
    if (deleting)
        json_object_set_new(md, "deletionTimestamp", json_string("2026-12-04T00:00:00Z"));
    o = json_pack("{s:o}", "metadata", md);
    return o;
}

static struct kube_store *store_new(void)
{
    struct kube_store *s = kube_store_new();
    assert_int_equal(kube_store_add_index(s, IDX, kube_index_controller_uid, NULL), 0);
    return s;
}

static int setup(void **state)
{
    struct fake *f = xcalloc(1, sizeof(*f));
    pthread_mutex_init(&f->lock, NULL);
    atomic_init(&f->active, true);
    f->pods = store_new();
    f->services = store_new();
    f->sandboxes = store_new();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fake *f = *state;
    kube_store_free(f->pods);
    kube_store_free(f->services);
    kube_store_free(f->sandboxes);
    json_decref(f->after_conflict);
    pthread_mutex_destroy(&f->lock);
    xfree(f);
    return 0;
}

static struct cascade *start(struct fake *f, usec_t delay, size_t max_queue)
{
    struct cascade_opts o = {.delay = delay,
                             .max_queue = max_queue,
                             .retry = 20 * USEC_PER_MSEC,
                             .chain_delay = 30 * USEC_PER_MSEC,
                             .workers = f->workers,
                             .active = fake_active,
                             .active_ctx = f,
                             .delete = fake_delete,
                             .delete_ctx = f};
    struct cascade *c = NULL;
    assert_int_equal(cascade_new(&o, &c), 0);
    assert_int_equal(cascade_add_dependent(c, CASCADE_OF_SANDBOX, &KUBE_RES_PODS, f->pods, IDX), 0);
    assert_int_equal(
        cascade_add_dependent(c, CASCADE_OF_SANDBOX, &KUBE_RES_SERVICES, f->services, IDX), 0);
    assert_int_equal(
        cascade_add_dependent(c, CASCADE_OF_EXT, &API_RES_SANDBOXES, f->sandboxes, IDX), 0);
    return c;
}

static int calls(struct fake *f)
{
    int n;
    pthread_mutex_lock(&f->lock);
    n = f->n;
    pthread_mutex_unlock(&f->lock);
    return n;
}

/* A Sandbox's Pod and Service go after the delay, not before, with the cached UID and
 * resourceVersion; the claim class finds Sandboxes only. */
static void test_deletes_after_delay(void **state)
{
    struct fake *f = *state;
    struct cascade *c = start(f, 150 * USEC_PER_MSEC, 0);
    struct cascade_stats st;
    usec_t t0;
    (void)kube_store_put(f->pods, obj("ns", "sb1", "11", "u-sb1", "ctl", false), NULL);
    (void)kube_store_put(f->services, obj("ns", "sb1", "12", "u-sb1", "ctl", false), NULL);
    (void)kube_store_put(f->sandboxes, obj("ns", "sb9", "13", "u-sb1", "ctl", false), NULL);
    t0 = clock_now();
    assert_true(cascade_owner_deleted(c, CASCADE_OF_SANDBOX, "ns", "u-sb1"));
    clock_sleep(60 * USEC_PER_MSEC);
    assert_int_equal(calls(f), 0);
    assert_int_equal(cascade_idle_wait(c, 5 * USEC_PER_SEC), 0);
    assert_int_equal(calls(f), 2);
    for (int i = 0; i < 2; i++) {
        const struct call *k = &f->calls[i];
        bool pod = strcmp(k->kind, "Pod") == 0;
        assert_true(pod || strcmp(k->kind, "Service") == 0);
        assert_string_equal(k->ns, "ns");
        assert_string_equal(k->name, "sb1");
        assert_string_equal(k->uid, "u-sb1");
        assert_string_equal(k->rv, pod ? "11" : "12");
        assert_true(k->at - t0 >= 150 * USEC_PER_MSEC);
    }
    cascade_stats(c, &st);
    assert_int_equal(st.queued, 1);
    assert_int_equal(st.deleted, 2);
    assert_int_equal(st.conflict + st.failed + st.gone + st.dropped, 0);
    /* the claim class: the Sandbox */
    assert_true(cascade_owner_deleted(c, CASCADE_OF_EXT, "ns", "u-sb1"));
    assert_int_equal(cascade_idle_wait(c, 5 * USEC_PER_SEC), 0);
    assert_int_equal(calls(f), 3);
    assert_string_equal(f->calls[2].kind, "Sandbox");
    assert_string_equal(f->calls[2].name, "sb9");
    cascade_free(c);
}

/* What the garbage collector would keep, or is already deleting, is not touched. */
static void test_keeps_what_gc_keeps(void **state)
{
    struct fake *f = *state;
    struct cascade *c = start(f, CASCADE_NOW, 0);
    struct cascade_stats st;
    (void)kube_store_put(f->pods, obj("ns", "two", "1", "u-o", "two", false), NULL);
    (void)kube_store_put(f->pods, obj("ns", "plain", "1", "u-o", "plain", false), NULL);
    (void)kube_store_put(f->pods, obj("ns", "going", "1", "u-o", "ctl", true), NULL);
    (void)kube_store_put(f->pods, obj("other", "elsewhere", "1", "u-o", "ctl", false), NULL);
    (void)kube_store_put(f->pods, obj("ns", "orphan", "1", "u-o", "none", false), NULL);
    (void)kube_store_put(f->pods, obj("ns", "sibling", "1", "u-p", "ctl", false), NULL);
    assert_true(cascade_owner_deleted(c, CASCADE_OF_SANDBOX, "ns", "u-o"));
    assert_int_equal(cascade_idle_wait(c, 5 * USEC_PER_SEC), 0);
    assert_int_equal(calls(f), 0);
    cascade_stats(c, &st);
    assert_int_equal(st.queued, 1);
    assert_int_equal(st.deleted, 0);
    cascade_free(c);
}

/* A refused precondition: the next look uses the cache's newer version; an object the
 * garbage collector orphaned meanwhile is left. */
static void test_conflict_then_newer_version(void **state)
{
    struct fake *f = *state;
    struct cascade *c = start(f, CASCADE_NOW, 0);
    struct cascade_stats st;
    (void)kube_store_put(f->pods, obj("ns", "p", "5", "u-o", "ctl", false), NULL);
    f->status[0] = 409;
    f->after_conflict = obj("ns", "p", "6", "u-o", "ctl", false);
    assert_true(cascade_owner_deleted(c, CASCADE_OF_SANDBOX, "ns", "u-o"));
    assert_int_equal(cascade_idle_wait(c, 5 * USEC_PER_SEC), 0);
    assert_int_equal(calls(f), 2);
    assert_string_equal(f->calls[0].rv, "5");
    assert_string_equal(f->calls[1].rv, "6");
    cascade_stats(c, &st);
    assert_int_equal(st.conflict, 1);
    assert_int_equal(st.retries, 1);
    assert_int_equal(st.deleted, 1);

    /* orphaned while the DELETE was on its way: refused, then no owner, nothing more */
    (void)kube_store_put(f->pods, obj("ns", "q", "7", "u-q", "ctl", false), NULL);
    f->status[2] = 409;
    f->after_conflict = obj("ns", "q", "8", "u-q", "none", false);
    assert_true(cascade_owner_deleted(c, CASCADE_OF_SANDBOX, "ns", "u-q"));
    assert_int_equal(cascade_idle_wait(c, 5 * USEC_PER_SEC), 0);
    assert_int_equal(calls(f), 3);
    cascade_stats(c, &st);
    assert_int_equal(st.conflict, 2);
    assert_int_equal(st.deleted, 1);
    cascade_free(c);
}

/* Refused every time: CASCADE_ATTEMPTS DELETEs, then the garbage collector's. A 404 is
 * counted as gone and not retried. */
static void test_attempts_bounded_and_gone(void **state)
{
    struct fake *f = *state;
    struct cascade *c = start(f, CASCADE_NOW, 0);
    struct cascade_stats st;
    (void)kube_store_put(f->pods, obj("ns", "p", "5", "u-o", "ctl", false), NULL);
    for (int i = 0; i < CASCADE_ATTEMPTS + 2; i++)
        f->status[i] = 409;
    assert_true(cascade_owner_deleted(c, CASCADE_OF_SANDBOX, "ns", "u-o"));
    assert_int_equal(cascade_idle_wait(c, 5 * USEC_PER_SEC), 0);
    clock_sleep(100 * USEC_PER_MSEC);
    assert_int_equal(calls(f), CASCADE_ATTEMPTS);
    cascade_stats(c, &st);
    assert_int_equal(st.conflict, CASCADE_ATTEMPTS);
    assert_int_equal(st.retries, CASCADE_ATTEMPTS - 1);
    assert_int_equal(st.given_up, 1);

    (void)kube_store_put(f->pods, obj("ns", "g", "5", "u-g", "ctl", false), NULL);
    f->status[CASCADE_ATTEMPTS] = 404;
    f->status[CASCADE_ATTEMPTS + 1] = 0;
    assert_true(cascade_owner_deleted(c, CASCADE_OF_SANDBOX, "ns", "u-g"));
    assert_int_equal(cascade_idle_wait(c, 5 * USEC_PER_SEC), 0);
    clock_sleep(60 * USEC_PER_MSEC);
    assert_int_equal(calls(f), CASCADE_ATTEMPTS + 1);
    cascade_stats(c, &st);
    assert_int_equal(st.gone, 1);
    assert_int_equal(st.retries, CASCADE_ATTEMPTS - 1);
    assert_int_equal(st.given_up, 1); /* a 404 is an answer: nothing given up */
    cascade_free(c);
}

/* Not leading when due: dropped unseen. */
static void test_inactive_drops(void **state)
{
    struct fake *f = *state;
    struct cascade *c = start(f, CASCADE_NOW, 0);
    struct cascade_stats st;
    (void)kube_store_put(f->pods, obj("ns", "p", "5", "u-o", "ctl", false), NULL);
    atomic_store(&f->active, false);
    assert_true(cascade_owner_deleted(c, CASCADE_OF_SANDBOX, "ns", "u-o"));
    assert_int_equal(cascade_idle_wait(c, 5 * USEC_PER_SEC), 0);
    assert_int_equal(calls(f), 0);
    cascade_stats(c, &st);
    assert_int_equal(st.dropped, 1);
    cascade_free(c);
}

/* Leadership lost while an owner's dependents are being deleted: no DELETE after it (a
 * successor deletes from then on), and the rest are left. */
static void test_lead_lost_midway(void **state)
{
    struct fake *f = *state;
    struct cascade *c = start(f, CASCADE_NOW, 0);
    for (int i = 0; i < 4; i++) {
        char name[16];
        (void)snprintf(name, sizeof(name), "p%d", i);
        (void)kube_store_put(f->pods, obj("ns", name, "5", "u-o", "ctl", false), NULL);
    }
    f->lose_after = 1;
    assert_true(cascade_owner_deleted(c, CASCADE_OF_SANDBOX, "ns", "u-o"));
    assert_int_equal(cascade_idle_wait(c, 5 * USEC_PER_SEC), 0);
    assert_int_equal(calls(f), 1);
    cascade_free(c);
}

/* Bounded queue; off queues nothing; bad input is refused; stopping drops what waits. */
static void test_bounds_off_stop(void **state)
{
    struct fake *f = *state;
    struct cascade *c = start(f, 10 * USEC_PER_SEC, 2);
    struct cascade_stats st;
    char ns[80];
    (void)kube_store_put(f->pods, obj("ns", "p", "5", "u-o", "ctl", false), NULL);
    assert_true(cascade_owner_deleted(c, CASCADE_OF_SANDBOX, "ns", "u-o"));
    assert_true(cascade_owner_deleted(c, CASCADE_OF_SANDBOX, "ns", "u-o2"));
    assert_false(cascade_owner_deleted(c, CASCADE_OF_SANDBOX, "ns", "u-o3"));
    memset(ns, 'a', sizeof(ns) - 1);
    ns[sizeof(ns) - 1] = '\0';
    assert_false(cascade_owner_deleted(c, CASCADE_OF_SANDBOX, ns, "u-o"));
    assert_false(cascade_owner_deleted(c, CASCADE_OF_SANDBOX, "ns", NULL));
    assert_false(cascade_owner_deleted(c, CASCADE_OF_SANDBOX, "ns", ""));
    assert_false(cascade_owner_deleted(c, CASCADE_CLASSES, "ns", "u-o"));
    cascade_stats(c, &st);
    assert_int_equal(st.queued, 2);
    assert_int_equal(st.dropped, 1);
    cascade_stop(c);
    assert_false(cascade_owner_deleted(c, CASCADE_OF_SANDBOX, "ns", "u-o"));
    assert_int_equal(cascade_idle_wait(c, USEC_PER_SEC), 0);
    assert_int_equal(calls(f), 0);
    cascade_free(c);

    c = start(f, CASCADE_OFF, 0);
    assert_false(cascade_owner_deleted(c, CASCADE_OF_SANDBOX, "ns", "u-o"));
    cascade_free(c);
    assert_int_equal(calls(f), 0);
}

static void *stop_thread(void *arg)
{
    cascade_stop(arg);
    return NULL;
}

/* Two stops at once: the second returns only when the first has joined the workers (a
 * DELETE under way has ended), as the first does; the cascade is freed after both. (If
 * the thread started more than 50 ms late, the main thread's stop joins and the check
 * holds either way.) */
static void test_concurrent_stops(void **state)
{
    struct fake *f = *state;
    struct cascade *c = start(f, CASCADE_NOW, 0);
    pthread_t t;
    f->slow = 300 * USEC_PER_MSEC;
    (void)kube_store_put(f->pods, obj("ns", "p", "5", "u-o", "ctl", false), NULL);
    assert_true(cascade_owner_deleted(c, CASCADE_OF_SANDBOX, "ns", "u-o"));
    for (int i = 0; i < 5000 && atomic_load(&f->in_delete) == 0; i++)
        clock_sleep(USEC_PER_MSEC);
    assert_int_equal(atomic_load(&f->in_delete), 1);
    assert_int_equal(pthread_create(&t, NULL, stop_thread, c), 0);
    clock_sleep(50 * USEC_PER_MSEC); /* the thread's stop is joining by now */
    cascade_stop(c);
    assert_int_equal(atomic_load(&f->in_delete), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(calls(f), 1);
    cascade_free(c);
}

/* A Sandbox the controller deletes itself (its claim gone) takes its Pod and Service
 * with it: looked at chain_delay later, not the delay after the Sandbox informer's event.
 * A Sandbox with finalizers (its DELETE only marks it) is not chained; a chained one is
 * not looked at while the Sandbox cache still holds it (the Sandbox controller could put
 * the Pod back), and is left to the informer's look after CASCADE_ATTEMPTS looks. */
static void test_chained_dependents(void **state)
{
    struct fake *f = *state;
    struct cascade *c;
    struct cascade_stats st;
    json_t *fin;
    /* One worker: owners are looked at one by one, in the order they fall due. */
    f->workers = 1;
    c = start(f, 400 * USEC_PER_MSEC, 0);
    (void)kube_store_put(f->sandboxes, obj("ns", "sb1", "3", "u-claim", "ctl", false), NULL);
    (void)kube_store_put(f->pods, obj("ns", "sb1", "4", "u-sb1", "ctl", false), NULL);
    (void)kube_store_put(f->services, obj("ns", "sb1", "5", "u-sb1", "ctl", false), NULL);
    /* A marker queued with the Sandbox's DELETE, as the Sandbox informer's event would
     * queue sb1 itself at the earliest: it falls due the delay after that DELETE. */
    (void)kube_store_put(f->pods, obj("ns", "mark", "6", "u-mark", "ctl", false), NULL);
    f->mark_on_delete = c;
    f->mark_uid = "u-mark";
    f->drop_deleted = true;
    assert_true(cascade_owner_deleted(c, CASCADE_OF_EXT, "ns", "u-claim"));
    assert_int_equal(cascade_idle_wait(c, 30 * USEC_PER_SEC), 0);
    assert_null(f->mark_on_delete);
    assert_int_equal(calls(f), 4);
    assert_string_equal(f->calls[0].kind, "Sandbox");
    for (int i = 1; i < 3; i++) {
        assert_string_equal(f->calls[i].name, "sb1");
        assert_string_equal(f->calls[i].uid, "u-sb1");
        assert_true(f->calls[i].at - f->calls[0].at >= 30 * USEC_PER_MSEC);
    }
    /* the chained look came before the marker's: sb1's Pod and Service went well before
     * the delay after the Sandbox's DELETE had run out */
    assert_string_equal(f->calls[3].name, "mark");
    assert_true(f->calls[3].at - f->calls[0].at >= 400 * USEC_PER_MSEC);
    cascade_stats(c, &st);
    assert_int_equal(st.chained, 1);
    assert_int_equal(st.deleted, 4);

    /* finalizers: the DELETE only marks the Sandbox; its Pod waits for it to go */
    fin = obj("ns", "sb2", "6", "u-claim2", "ctl", false);
    json_object_set_new(json_object_get(fin, "metadata"), "finalizers",
                        json_pack("[s]", "example.com/keep"));
    (void)kube_store_put(f->sandboxes, fin, NULL);
    (void)kube_store_put(f->pods, obj("ns", "sb2", "7", "u-sb2", "ctl", false), NULL);
    f->drop_deleted = false;
    assert_true(cascade_owner_deleted(c, CASCADE_OF_EXT, "ns", "u-claim2"));
    assert_int_equal(cascade_idle_wait(c, 5 * USEC_PER_SEC), 0);
    assert_int_equal(calls(f), 5);
    assert_string_equal(f->calls[4].kind, "Sandbox");
    cascade_stats(c, &st);
    assert_int_equal(st.chained, 1);

    /* still cached after its DELETE (the informer behind): nothing deleted under it */
    (void)kube_store_put(f->sandboxes, obj("ns", "sb3", "8", "u-claim3", "ctl", false), NULL);
    (void)kube_store_put(f->pods, obj("ns", "sb3", "9", "u-sb3", "ctl", false), NULL);
    assert_true(cascade_owner_deleted(c, CASCADE_OF_EXT, "ns", "u-claim3"));
    assert_int_equal(cascade_idle_wait(c, 5 * USEC_PER_SEC), 0);
    assert_int_equal(calls(f), 6);
    assert_string_equal(f->calls[5].kind, "Sandbox");
    cascade_stats(c, &st);
    assert_int_equal(st.chained, 2);
    assert_int_equal(st.retries, 0);
    cascade_free(c);
}

/* A chained owner whose Sandbox leaves the cache only after its DELETE (the informer
 * behind): its Pod goes at a look after that, not before. */
static void test_chained_waits_for_cache(void **state)
{
    struct fake *f = *state;
    struct cascade *c = start(f, CASCADE_NOW, 0);
    usec_t gone;
    (void)kube_store_put(f->sandboxes, obj("ns", "sb4", "10", "u-claim4", "ctl", false), NULL);
    (void)kube_store_put(f->pods, obj("ns", "sb4", "11", "u-sb4", "ctl", false), NULL);
    assert_true(cascade_owner_deleted(c, CASCADE_OF_EXT, "ns", "u-claim4"));
    for (int i = 0; i < 500 && calls(f) < 1; i++)
        clock_sleep(USEC_PER_MSEC);
    assert_int_equal(calls(f), 1);
    /* between the first look (30 ms after the DELETE) and the last (90 ms) */
    clock_sleep(45 * USEC_PER_MSEC);
    gone = clock_now(); /* before the removal: the cascade may act on it at once */
    assert_int_equal(kube_store_remove(f->sandboxes, "ns/sb4", NULL), 0);
    assert_int_equal(cascade_idle_wait(c, 5 * USEC_PER_SEC), 0);
    assert_int_equal(calls(f), 2);
    assert_string_equal(f->calls[1].kind, "Pod");
    assert_true(f->calls[1].at >= gone);
    cascade_free(c);
}

/* A Sandbox the controller deleted elsewhere (a pool's surplus member, a claim's unusable
 * Sandbox) is chained the same way: its Pod goes chain_delay later, not the delay after
 * the Sandbox informer's event; not a Sandbox with finalizers; NULLs are ignored. */
static void test_sandbox_deleted_elsewhere(void **state)
{
    struct fake *f = *state;
    struct cascade *c = start(f, 10 * USEC_PER_SEC, 0);
    json_t *sb = obj("ns", "sb5", "12", "u-pool", "ctl", false);
    json_t *fin = obj("ns", "sb6", "14", "u-pool", "ctl", false);
    struct cascade_stats st;
    (void)kube_store_put(f->pods, obj("ns", "sb5", "13", "u-sb5", "ctl", false), NULL);
    (void)kube_store_put(f->pods, obj("ns", "sb6", "15", "u-sb6", "ctl", false), NULL);
    cascade_sandbox_deleted(c, sb);
    assert_int_equal(cascade_idle_wait(c, 5 * USEC_PER_SEC), 0);
    assert_int_equal(calls(f), 1);
    assert_string_equal(f->calls[0].kind, "Pod");
    assert_string_equal(f->calls[0].uid, "u-sb5");
    json_object_set_new(json_object_get(fin, "metadata"), "finalizers",
                        json_pack("[s]", "example.com/keep"));
    cascade_sandbox_deleted(c, fin);
    cascade_sandbox_deleted(c, NULL);
    cascade_sandbox_deleted(NULL, sb);
    assert_int_equal(cascade_idle_wait(c, 5 * USEC_PER_SEC), 0);
    assert_int_equal(calls(f), 1);
    cascade_stats(c, &st);
    assert_int_equal(st.chained, 1);
    assert_int_equal(st.queued, 0);
    cascade_free(c);
    json_decref(sb);
    json_decref(fin);
}

/* An object of ns named name (uid "u-<name>", rv "1") whose one reference is the
 * controller reference to owner (apiVersion av, kind, uid "u-<owner>"). */
static json_t *owned(const char *name, const char *av, const char *kind, const char *owner)
{
    char uid[64], ouid[64];
    (void)snprintf(uid, sizeof(uid), "u-%s", name);
    (void)snprintf(ouid, sizeof(ouid), "u-%s", owner);
    return json_pack("{s:{s:s,s:s,s:s,s:s,s:[{s:s,s:s,s:s,s:s,s:b}]}}", "metadata", "namespace",
                     "ns", "name", name, "uid", uid, "resourceVersion", "1", "ownerReferences",
                     "apiVersion", av, "kind", kind, "name", owner, "uid", ouid, "controller", 1);
}

static bool deleted_name(struct fake *f, const char *name)
{
    for (int i = 0; i < calls(f); i++)
        if (strcmp(f->calls[i].name, name) == 0)
            return true;
    return false;
}

#define CLAIM_AV "extensions.agents.x-k8s.io/v1beta1"

/* A cascade with the sweep's callbacks on f, after delay (the caller registers kinds). */
static struct cascade *sweep_cascade(struct fake *f, usec_t delay)
{
    struct cascade_opts o = {.delay = delay,
                             .active = fake_active,
                             .synced = fake_synced,
                             .active_ctx = f,
                             .delete = fake_delete,
                             .delete_ctx = f,
                             .get = fake_get,
                             .get_ctx = f};
    struct cascade *c = NULL;
    assert_int_equal(cascade_new(&o, &c), 0);
    return c;
}

/* The sweep waits until leading and synced; then a Sandbox or Pod whose controller (a
 * registered kind, any version) is missing from its cache has it queued once, and after
 * the delay a read that answers 404 or another UID lets its sole dependents go; a
 * cached owner, a name the cache holds with another UID (the garbage collector's), one
 * the read finds, a failed read, an unknown kind and a second owner keep theirs. */
static void test_sweep(void **state)
{
    static const char *const gone[] = {"b", "c", "g", "h1", "h2", "p1"};
    struct fake *f = *state;
    struct kube_store *claims = kube_store_new();
    struct cascade *c = sweep_cascade(f, 100 * USEC_PER_MSEC);
    struct cascade_stats st;
    json_t *two = owned("k", CLAIM_AV, "SandboxClaim", "gone-4");
    assert_int_equal(cascade_add_dependent(c, CASCADE_OF_SANDBOX, &KUBE_RES_PODS, f->pods, IDX), 0);
    assert_int_equal(
        cascade_add_dependent(c, CASCADE_OF_EXT, &API_RES_SANDBOXES, f->sandboxes, IDX), 0);
    assert_int_equal(cascade_add_owner(c, CASCADE_OF_EXT, &API_RES_SANDBOXCLAIMS, claims), 0);
    assert_int_equal(cascade_add_owner(c, CASCADE_OF_SANDBOX, &API_RES_SANDBOXES, f->sandboxes), 0);
    (void)kube_store_put(claims, owned("live", "v1", "Namespace", "x"), NULL); /* uid u-live */
    (void)kube_store_put(claims,
                         json_pack("{s:{s:s,s:s,s:s}}", "metadata", "namespace", "ns", "name",
                                   "reused", "uid", "u-made-again"),
                         NULL);
    (void)kube_store_put(f->sandboxes, owned("a", CLAIM_AV, "SandboxClaim", "live"), NULL);
    (void)kube_store_put(f->sandboxes, owned("r", CLAIM_AV, "SandboxClaim", "reused"), NULL);
    (void)kube_store_put(f->sandboxes, owned("b", CLAIM_AV, "SandboxClaim", "gone-1"), NULL);
    (void)kube_store_put(f->sandboxes, owned("c", CLAIM_AV, "SandboxClaim", "renamed"), NULL);
    (void)kube_store_put(f->sandboxes, owned("d", CLAIM_AV, "SandboxClaim", "racing"), NULL);
    (void)kube_store_put(f->sandboxes, owned("e", CLAIM_AV, "SandboxClaim", "flaky"), NULL);
    (void)kube_store_put(f->sandboxes, owned("f", "example.com/v1", "SandboxClaim", "gone-x"),
                         NULL);
    (void)kube_store_put(
        f->sandboxes, owned("g", "extensions.agents.x-k8s.io/v1alpha1", "SandboxClaim", "gone-2"),
        NULL);
    (void)kube_store_put(f->sandboxes, owned("h1", CLAIM_AV, "SandboxClaim", "gone-3"), NULL);
    (void)kube_store_put(f->sandboxes, owned("h2", CLAIM_AV, "SandboxClaim", "gone-3"), NULL);
    json_array_append_new(json_object_get(json_object_get(two, "metadata"), "ownerReferences"),
                          json_pack("{s:s,s:s,s:s,s:s}", "apiVersion", "v1", "kind", "ConfigMap",
                                    "name", "cm", "uid", "u-cm"));
    (void)kube_store_put(f->sandboxes, two, NULL);
    (void)kube_store_put(f->pods, owned("p1", "agents.x-k8s.io/v1beta1", "Sandbox", "gone-5"),
                         NULL);
    (void)kube_store_put(f->pods, owned("p2", "agents.x-k8s.io/v1beta1", "Sandbox", "b"), NULL);

    atomic_store(&f->active, false);
    atomic_store(&f->synced, false);
    cascade_request_sweep(c);
    clock_sleep(300 * USEC_PER_MSEC); /* neither leading nor synced */
    atomic_store(&f->active, true);
    clock_sleep(300 * USEC_PER_MSEC); /* leading, not synced */
    cascade_stats(c, &st);
    assert_int_equal(st.sweeps, 0);
    atomic_store(&f->synced, true);
    for (int i = 0; i < 50 && st.sweeps == 0; i++) {
        clock_sleep(20 * USEC_PER_MSEC);
        cascade_stats(c, &st);
    }
    assert_int_equal(st.sweeps, 1);
    assert_int_equal(cascade_idle_wait(c, 5 * USEC_PER_SEC), 0);

    cascade_stats(c, &st);
    /* gone-1, renamed, racing, flaky, gone-2, gone-3 (once), gone-5; not gone-4 (two owners) */
    assert_int_equal(st.swept, 7);
    assert_int_equal(st.swept_present, 2); /* racing, flaky */
    assert_int_equal(calls(f), (int)(sizeof(gone) / sizeof(gone[0])));
    for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
        assert_true(deleted_name(f, gone[i]));
    assert_int_equal(f->nreads, 7);
    for (int i = 0; i < f->nreads; i++)
        assert_true(strncmp(f->reads[i], "SandboxClaim/", 13) == 0 ||
                    strcmp(f->reads[i], "Sandbox/gone-5") == 0);
    /* asked again: it runs again, and finds the same owners (the fake keeps what it deleted) */
    cascade_request_sweep(c);
    for (int i = 0; i < 50 && st.sweeps < 2; i++) {
        clock_sleep(20 * USEC_PER_MSEC);
        cascade_stats(c, &st);
    }
    assert_int_equal(st.sweeps, 2);
    cascade_free(c);
    kube_store_free(claims);
}

/* cascade_idle_wait right after a sweep is requested waits for the sweep and for the
 * owners it queued: it does not answer "idle" before a worker has taken the request. */
static void test_idle_wait_covers_sweep(void **state)
{
    struct fake *f = *state;
    struct kube_store *claims = kube_store_new();
    struct cascade *c = sweep_cascade(f, 50 * USEC_PER_MSEC);
    struct cascade_stats st;
    assert_int_equal(
        cascade_add_dependent(c, CASCADE_OF_EXT, &API_RES_SANDBOXES, f->sandboxes, IDX), 0);
    assert_int_equal(cascade_add_owner(c, CASCADE_OF_EXT, &API_RES_SANDBOXCLAIMS, claims), 0);
    (void)kube_store_put(f->sandboxes, owned("b", CLAIM_AV, "SandboxClaim", "gone-1"), NULL);
    atomic_store(&f->synced, true);
    for (int round = 0; round < 20; round++) {
        cascade_request_sweep(c);
        assert_int_equal(cascade_idle_wait(c, 5 * USEC_PER_SEC), 0);
        cascade_stats(c, &st);
        assert_int_equal(st.sweeps, round + 1);
        assert_int_equal(calls(f), round + 1); /* the fake keeps what it deleted */
    }
    cascade_free(c);
    kube_store_free(claims);
}

/* At the due time a swept owner is looked at again: one its cache holds by then (created
 * just after the sweep looked) keeps its dependents without a read; one whose name the
 * cache holds under another UID is read, and the read's answer decides (here: another
 * UID, so gone); a SandboxWarmPool, the second owner kind, is swept like a claim. */
static void test_swept_owner_at_due_time(void **state)
{
    struct fake *f = *state;
    struct kube_store *claims = kube_store_new(), *pools = kube_store_new();
    struct cascade *c = sweep_cascade(f, 300 * USEC_PER_MSEC);
    struct cascade_stats st = {0};
    assert_int_equal(
        cascade_add_dependent(c, CASCADE_OF_EXT, &API_RES_SANDBOXES, f->sandboxes, IDX), 0);
    assert_int_equal(cascade_add_owner(c, CASCADE_OF_EXT, &API_RES_SANDBOXCLAIMS, claims), 0);
    assert_int_equal(cascade_add_owner(c, CASCADE_OF_EXT, &API_RES_SANDBOXWARMPOOLS, pools), 0);
    (void)kube_store_put(f->sandboxes, owned("a", CLAIM_AV, "SandboxClaim", "late"), NULL);
    (void)kube_store_put(f->sandboxes, owned("b", CLAIM_AV, "SandboxClaim", "renamed"), NULL);
    (void)kube_store_put(f->sandboxes, owned("m", CLAIM_AV, "SandboxWarmPool", "gone-pool"), NULL);
    atomic_store(&f->synced, true);
    cascade_request_sweep(c);
    for (int i = 0; i < 100 && st.swept < 3; i++) {
        clock_sleep(10 * USEC_PER_MSEC);
        cascade_stats(c, &st);
    }
    assert_int_equal(st.swept, 3);
    assert_int_equal(calls(f), 0); /* nothing before the delay */
    /* created now, as owned() names it (uid u-late); "renamed" made again (uid u-again) */
    (void)kube_store_put(claims, owned("late", "v1", "Namespace", "x"), NULL);
    (void)kube_store_put(claims,
                         json_pack("{s:{s:s,s:s,s:s}}", "metadata", "namespace", "ns", "name",
                                   "renamed", "uid", "u-again"),
                         NULL);
    assert_int_equal(cascade_idle_wait(c, 5 * USEC_PER_SEC), 0);
    cascade_stats(c, &st);
    assert_int_equal(st.swept_present, 1); /* late, from its cache */
    assert_int_equal(calls(f), 2);
    assert_true(deleted_name(f, "b"));
    assert_true(deleted_name(f, "m"));
    assert_int_equal(f->nreads, 2); /* renamed and the pool; never late */
    for (int i = 0; i < f->nreads; i++)
        assert_true(strcmp(f->reads[i], "SandboxClaim/renamed") == 0 ||
                    strcmp(f->reads[i], "SandboxWarmPool/gone-pool") == 0);
    cascade_free(c);
    kube_store_free(claims);
    kube_store_free(pools);
}

/* Registration limits and a missing client and delete function. */
static void test_registration(void **state)
{
    struct fake *f = *state;
    struct cascade_opts none = {0};
    struct cascade *c = NULL;
    int r = 0;
    assert_int_equal(cascade_new(&none, &c), -EINVAL);
    c = start(f, CASCADE_NOW, 0);
    /* two registered for the Sandbox class by start(): two more fit */
    for (int i = 0; i < CASCADE_MAX_TARGETS - 2; i++)
        assert_int_equal(cascade_add_dependent(c, CASCADE_OF_SANDBOX, &KUBE_RES_PVCS, f->pods, IDX),
                         0);
    r = cascade_add_dependent(c, CASCADE_OF_SANDBOX, &KUBE_RES_PVCS, f->pods, IDX);
    assert_int_equal(r, -ENOSPC);
    assert_int_equal(cascade_add_owner(c, CASCADE_OF_EXT, &API_RES_SANDBOXCLAIMS, f->sandboxes), 0);
    assert_int_equal(cascade_add_owner(c, CASCADE_OF_EXT, &API_RES_SANDBOXWARMPOOLS, f->sandboxes),
                     0);
    assert_int_equal(cascade_add_owner(c, CASCADE_OF_EXT, &API_RES_SANDBOXES, f->sandboxes),
                     -ENOSPC);
    assert_int_equal(cascade_add_owner(c, CASCADE_CLASSES, &API_RES_SANDBOXES, f->sandboxes),
                     -EINVAL);
    assert_int_equal(cascade_add_owner(c, CASCADE_OF_EXT, NULL, f->sandboxes), -EINVAL);
    assert_int_equal(cascade_add_dependent(c, CASCADE_CLASSES, &KUBE_RES_PVCS, f->pods, IDX),
                     -EINVAL);
    cascade_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_deletes_after_delay, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keeps_what_gc_keeps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conflict_then_newer_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_attempts_bounded_and_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inactive_drops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lead_lost_midway, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounds_off_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_registration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chained_dependents, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chained_waits_for_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sandbox_deleted_elsewhere, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_wait_covers_sweep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_swept_owner_at_due_time, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
