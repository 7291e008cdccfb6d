/* SPDX-License-Identifier: Apache-2.0 */
/* Events recorder against an in-memory Event API and a fake clock: the Event written,
 * aggregation into count/lastTimestamp, the window, message cutting, the per-object spam
 * filter, the LRU cache, the bounded queue and stop. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/limits.h"
#include "common/xalloc.h"
#include "common/yield_gate.h"
#include "kube/events.h"

/* ---- in-memory Event API ---- */

struct fake_api {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    json_t *events; /* "ns/name" -> Event */
    int creates, patches, fail_creates;
    bool gate_closed; /* creates block while true */
    int blocked;      /* creates currently blocked at the gate */
};

static void fake_init(struct fake_api *f)
{
    memset(f, 0, sizeof(*f));
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    f->events = json_object();
}

static void fake_done(struct fake_api *f)
{
    json_decref(f->events);
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->cond);
}

static int fake_create(void *ctx, const char *ns, const json_t *obj, json_t **ret_obj,
                       struct kube_err *reterr)
{
    struct fake_api *f = ctx;
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    char key[512];
    int r = 0;
    (void)reterr;

    pthread_mutex_lock(&f->lock);
    f->blocked++;
    pthread_cond_broadcast(&f->cond);
    while (f->gate_closed)
        pthread_cond_wait(&f->cond, &f->lock);
    f->blocked--;
    f->creates++;
    (void)snprintf(key, sizeof(key), "%s/%s", ns, name);
    if (f->fail_creates) {
        r = f->fail_creates;
    } else if (json_object_get(f->events, key)) {
        r = -EEXIST;
    } else {
        json_object_set_new(f->events, key, json_deep_copy(obj));
        if (ret_obj)
            *ret_obj = json_deep_copy(obj);
    }
    pthread_mutex_unlock(&f->lock);
    return r;
}

static int fake_patch(void *ctx, const char *ns, const char *name, const json_t *patch,
                      json_t **ret_obj, struct kube_err *reterr)
{
    struct fake_api *f = ctx;
    char key[512];
    json_t *ev;
    int r = 0;
    (void)reterr;

    pthread_mutex_lock(&f->lock);
    f->patches++;
    (void)snprintf(key, sizeof(key), "%s/%s", ns, name);
    ev = json_object_get(f->events, key);
    if (!ev) {
        r = -ENOENT;
    } else {
        json_object_update(ev, (json_t *)patch);
        if (ret_obj)
            *ret_obj = json_deep_copy(ev);
    }
    pthread_mutex_unlock(&f->lock);
    return r;
}

/* The only stored Event (asserts there is exactly one). Borrowed. */
static json_t *only_event(struct fake_api *f)
{
    const char *key;
    json_t *v, *found = NULL;

    assert_int_equal(json_object_size(f->events), 1);
    json_object_foreach(f->events, key, v)
    {
        found = v;
    }
    return found;
}

static const char *field(const json_t *ev, const char *a, const char *b)
{
    const json_t *v = json_object_get(ev, a);
    if (b)
        v = json_object_get(v, b);
    return json_string_value(v);
}

/* ---- fake clock ---- */

struct fake_clock {
    pthread_mutex_t lock;
    usec_t mono, wall;
};

static usec_t fc_now(void *ctx)
{
    struct fake_clock *c = ctx;
    usec_t v;
    pthread_mutex_lock(&c->lock);
    v = c->mono;
    pthread_mutex_unlock(&c->lock);
    return v;
}

static usec_t fc_wall(void *ctx)
{
    struct fake_clock *c = ctx;
    usec_t v;
    pthread_mutex_lock(&c->lock);
    v = c->wall;
    pthread_mutex_unlock(&c->lock);
    return v;
}

static void advance(struct fake_clock *c, usec_t d)
{
    pthread_mutex_lock(&c->lock);
    c->mono += d;
    c->wall += d;
    pthread_mutex_unlock(&c->lock);
}

/* ---- fixture ---- */

struct fx {
    struct fake_api api;
    struct fake_clock clk;
    struct events_clock ec;
    struct events_opts opts;
    struct events_recorder *r;
    json_t *pod;
};

static void fx_opts(struct fx *x)
{
    fake_init(&x->api);
    pthread_mutex_init(&x->clk.lock, NULL);
    x->clk.mono = 1000 * USEC_PER_SEC;
    x->clk.wall = (usec_t)1767225600 * USEC_PER_SEC; /* 2026-01-01T00:00:00Z */
    x->ec = (struct events_clock){.ctx = &x->clk, .now = fc_now, .wall_now = fc_wall};
    x->opts = (struct events_opts){
        .component = "sandbox-controller",
        .instance = "ctrl-0",
        .api = {.ctx = &x->api, .create = fake_create, .patch = fake_patch},
        .clock = &x->ec,
    };
    x->pod = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s}}", "apiVersion", "v1", "kind", "Pod",
                       "metadata", "name", "pod1", "namespace", "ns1", "uid", "u-1",
                       "resourceVersion", "42");
}

static void fx_start(struct fx *x)
{
    assert_int_equal(events_recorder_new(&x->opts, &x->r), 0);
}

static int setup(void **state)
{
    struct fx *x = XNEW(struct fx);
    fx_opts(x);
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    struct fx *x = *state;
    events_recorder_free(x->r);
    json_decref(x->pod);
    fake_done(&x->api);
    pthread_mutex_destroy(&x->clk.lock);
    xfree(x);
    return 0;
}

static json_t *make_obj(const char *kind, const char *ns, const char *name)
{
    json_t *o = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "agents.x-k8s.io/v1beta1", "kind",
                          kind, "metadata", "name", name);
    if (ns)
        json_object_set_new(json_object_get(o, "metadata"), "namespace", json_string(ns));
    return o;
}

static struct events_stats stats(struct fx *x)
{
    struct events_stats st;
    events_stats(x->r, &st);
    return st;
}

/* ---- tests ---- */

static void test_event_fields(void **state)
{
    struct fx *x = *state;
    json_t *ev;

    fx_start(x);
    events_record(x->r, x->pod, EVENTS_WARNING, "MultiplePods", "found %d pods", 2);
    events_flush(x->r);
    ev = only_event(&x->api);
    assert_string_equal(field(ev, "apiVersion", NULL), "v1");
    assert_string_equal(field(ev, "kind", NULL), "Event");
    assert_string_equal(field(ev, "metadata", "namespace"), "ns1");
    assert_true(strncmp(field(ev, "metadata", "name"), "pod1.", 5) == 0);
    assert_string_equal(field(ev, "involvedObject", "kind"), "Pod");
    assert_string_equal(field(ev, "involvedObject", "apiVersion"), "v1");
    assert_string_equal(field(ev, "involvedObject", "namespace"), "ns1");
    assert_string_equal(field(ev, "involvedObject", "name"), "pod1");
    assert_string_equal(field(ev, "involvedObject", "uid"), "u-1");
    assert_string_equal(field(ev, "involvedObject", "resourceVersion"), "42");
    assert_string_equal(field(ev, "reason", NULL), "MultiplePods");
    assert_string_equal(field(ev, "message", NULL), "found 2 pods");
    assert_string_equal(field(ev, "type", NULL), "Warning");
    assert_string_equal(field(ev, "source", "component"), "sandbox-controller");
    assert_string_equal(field(ev, "reportingComponent", NULL), "sandbox-controller");
    assert_string_equal(field(ev, "reportingInstance", NULL), "ctrl-0");
    assert_string_equal(field(ev, "firstTimestamp", NULL), "2026-01-01T00:00:00Z");
    assert_string_equal(field(ev, "lastTimestamp", NULL), "2026-01-01T00:00:00Z");
    assert_int_equal(json_integer_value(json_object_get(ev, "count")), 1);
    assert_int_equal(stats(x).created, 1);
    assert_int_equal(stats(x).recorded, 1);
}

static void test_aggregation_patches_count(void **state)
{
    struct fx *x = *state;
    json_t *ev;

    fx_start(x);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Ready", "pod is ready");
    events_flush(x->r);
    advance(&x->clk, 30 * USEC_PER_SEC);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Ready", "pod is ready");
    advance(&x->clk, 30 * USEC_PER_SEC);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Ready", "pod is ready");
    events_flush(x->r);
    assert_int_equal(x->api.creates, 1);
    assert_int_equal(x->api.patches, 2);
    ev = only_event(&x->api);
    assert_int_equal(json_integer_value(json_object_get(ev, "count")), 3);
    assert_string_equal(field(ev, "firstTimestamp", NULL), "2026-01-01T00:00:00Z");
    assert_string_equal(field(ev, "lastTimestamp", NULL), "2026-01-01T00:01:00Z");
    assert_int_equal(stats(x).patched, 2);
    assert_int_equal(stats(x).created, 1);
}

/* Two threads record the same Event; the later stamp is queued, and written, first (each
 * record is stamped before it is queued). The earlier one is inside the window all the
 * same: one Event with count 2. Before, it started a second Event. */
static void test_records_queued_out_of_order_aggregate(void **state)
{
    struct fx *x = *state;
    json_t *ev;

    fx_start(x);
    advance(&x->clk, USEC_PER_MSEC);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Ready", "pod is ready");
    events_flush(x->r);
    pthread_mutex_lock(&x->clk.lock);
    x->clk.mono -= USEC_PER_MSEC; /* the other thread's earlier stamp */
    pthread_mutex_unlock(&x->clk.lock);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Ready", "pod is ready");
    events_flush(x->r);
    assert_int_equal(x->api.creates, 1);
    assert_int_equal(x->api.patches, 1);
    ev = only_event(&x->api);
    assert_int_equal(json_integer_value(json_object_get(ev, "count")), 2);
}

static void test_different_keys_do_not_aggregate(void **state)
{
    struct fx *x = *state;
    json_t *other = make_obj("Sandbox", "ns1", "sb1");

    fx_start(x);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Ready", "a");
    events_record(x->r, x->pod, EVENTS_NORMAL, "Ready", "b");    /* message */
    events_record(x->r, x->pod, EVENTS_WARNING, "Ready", "a");   /* type */
    events_record(x->r, x->pod, EVENTS_NORMAL, "NotReady", "a"); /* reason */
    events_record(x->r, other, EVENTS_NORMAL, "Ready", "a");     /* object */
    events_flush(x->r);
    assert_int_equal(x->api.creates, 5);
    assert_int_equal(x->api.patches, 0);
    assert_int_equal(json_object_size(x->api.events), 5);
    json_decref(other);
}

static void test_window_expiry_creates_new(void **state)
{
    struct fx *x = *state;

    x->opts.window = 60 * USEC_PER_SEC;
    fx_start(x);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Ready", "same");
    events_flush(x->r);
    advance(&x->clk, 59 * USEC_PER_SEC);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Ready", "same");
    events_flush(x->r);
    assert_int_equal(x->api.patches, 1);
    /* The window runs from the last occurrence. */
    advance(&x->clk, 60 * USEC_PER_SEC);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Ready", "same");
    events_flush(x->r);
    assert_int_equal(x->api.creates, 2);
    assert_int_equal(x->api.patches, 1);
    assert_int_equal(json_object_size(x->api.events), 2);
}

static void test_patch_of_deleted_event_recreates(void **state)
{
    struct fx *x = *state;

    fx_start(x);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Ready", "same");
    events_flush(x->r);
    /* The API server's event TTL removed it. */
    pthread_mutex_lock(&x->api.lock);
    json_object_clear(x->api.events);
    pthread_mutex_unlock(&x->api.lock);
    advance(&x->clk, USEC_PER_SEC);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Ready", "same");
    events_flush(x->r);
    assert_int_equal(x->api.patches, 1);
    assert_int_equal(x->api.creates, 2);
    assert_int_equal(json_integer_value(json_object_get(only_event(&x->api), "count")), 1);
    /* And the new one aggregates again. */
    events_record(x->r, x->pod, EVENTS_NORMAL, "Ready", "same");
    events_flush(x->r);
    assert_int_equal(json_integer_value(json_object_get(only_event(&x->api), "count")), 2);
}

static void test_message_cut_and_cleaned(void **state)
{
    struct fx *x = *state;
    char big[3000];
    const char *msg;

    fx_start(x);
    /* 1023 ASCII bytes, then a 2-byte character that does not fit. */
    memset(big, 'x', sizeof(big));
    big[1023] = (char)0xc3;
    big[1024] = (char)0xa9;
    big[sizeof(big) - 1] = '\0';
    events_record(x->r, x->pod, EVENTS_NORMAL, "Long", "%s", big);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Bad",
                  "a\xff"
                  "b\xc3");
    events_flush(x->r);
    assert_int_equal(x->api.creates, 2);
    {
        const char *key;
        json_t *v;
        json_object_foreach(x->api.events, key, v)
        {
            msg = field(v, "message", NULL);
            if (strcmp(field(v, "reason", NULL), "Long") == 0) {
                assert_int_equal(strlen(msg), 1023);
                assert_true(strlen(msg) <= LIMIT_EVENT_MESSAGE);
            } else {
                assert_string_equal(msg, "a?b?");
            }
        }
    }
}

static void test_spam_filter(void **state)
{
    struct fx *x = *state;
    json_t *other = make_obj("Sandbox", "ns1", "sb1");
    char reason[32];

    fx_start(x);
    for (int i = 0; i < LIMIT_EVENT_BURST + 5; i++) {
        (void)snprintf(reason, sizeof(reason), "R%d", i);
        events_record(x->r, x->pod, EVENTS_NORMAL, reason, "hot loop");
    }
    /* Another object has its own bucket. */
    events_record(x->r, other, EVENTS_NORMAL, "R", "fine");
    events_flush(x->r);
    assert_int_equal(stats(x).dropped_spam, 5);
    assert_int_equal(stats(x).recorded, LIMIT_EVENT_BURST + 1);
    assert_int_equal(x->api.creates, LIMIT_EVENT_BURST + 1);
    /* One token comes back per refill period (5 minutes by default). */
    advance(&x->clk, EVENTS_DEFAULT_REFILL);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Again", "1");
    events_record(x->r, x->pod, EVENTS_NORMAL, "Again", "2");
    events_flush(x->r);
    assert_int_equal(stats(x).dropped_spam, 6);
    assert_int_equal(x->api.creates, LIMIT_EVENT_BURST + 2);
    json_decref(other);
}

static void test_lru_cache_eviction(void **state)
{
    struct fx *x = *state;

    x->opts.cache_size = 2;
    fx_start(x);
    events_record(x->r, x->pod, EVENTS_NORMAL, "A", "m");
    events_record(x->r, x->pod, EVENTS_NORMAL, "B", "m");
    events_record(x->r, x->pod, EVENTS_NORMAL, "C", "m"); /* evicts A */
    events_record(x->r, x->pod, EVENTS_NORMAL, "B", "m"); /* patch; order B, C */
    events_record(x->r, x->pod, EVENTS_NORMAL, "A", "m"); /* new; evicts C */
    events_record(x->r, x->pod, EVENTS_NORMAL, "B", "m"); /* patch */
    events_record(x->r, x->pod, EVENTS_NORMAL, "C", "m"); /* new */
    events_flush(x->r);
    assert_int_equal(x->api.creates, 5);
    assert_int_equal(x->api.patches, 2);
}

static void wait_blocked(struct fake_api *f, int n)
{
    pthread_mutex_lock(&f->lock);
    while (f->blocked < n)
        pthread_cond_wait(&f->cond, &f->lock);
    pthread_mutex_unlock(&f->lock);
}

static void open_gate(struct fake_api *f)
{
    pthread_mutex_lock(&f->lock);
    f->gate_closed = false;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
}

static void test_queue_full_drops_without_blocking(void **state)
{
    struct fx *x = *state;

    x->opts.queue_size = 2;
    x->api.gate_closed = true;
    fx_start(x);
    events_record(x->r, x->pod, EVENTS_NORMAL, "R1", "m");
    wait_blocked(&x->api, 1); /* the writer holds R1 inside the API call */
    events_record(x->r, x->pod, EVENTS_NORMAL, "R2", "m");
    events_record(x->r, x->pod, EVENTS_NORMAL, "R3", "m");
    events_record(x->r, x->pod, EVENTS_NORMAL, "R4", "m"); /* queue full */
    events_record(x->r, x->pod, EVENTS_NORMAL, "R5", "m");
    assert_int_equal(stats(x).dropped_queue, 2);
    assert_int_equal(stats(x).recorded, 3);
    open_gate(&x->api);
    events_flush(x->r);
    assert_int_equal(x->api.creates, 3);
    assert_int_equal(stats(x).created, 3);
}

static void test_failures_counted(void **state)
{
    struct fx *x = *state;

    x->api.fail_creates = -EIO;
    fx_start(x);
    events_record(x->r, x->pod, EVENTS_NORMAL, "R", "m");
    events_record(x->r, x->pod, EVENTS_NORMAL, "R", "m");
    events_flush(x->r);
    assert_int_equal(stats(x).failed, 2);
    assert_int_equal(stats(x).created, 0);
    /* A failed create is not remembered: the next one creates, not patches. */
    x->api.fail_creates = 0;
    events_record(x->r, x->pod, EVENTS_NORMAL, "R", "m");
    events_flush(x->r);
    assert_int_equal(x->api.patches, 0);
    assert_int_equal(stats(x).created, 1);
}

static void test_cluster_scoped_object(void **state)
{
    struct fx *x = *state;
    json_t *node = make_obj("Node", NULL, "node-a");
    json_t *ev;

    fx_start(x);
    events_record(x->r, node, EVENTS_NORMAL, "Seen", "m");
    events_flush(x->r);
    ev = only_event(&x->api);
    assert_string_equal(field(ev, "metadata", "namespace"), "default");
    assert_null(json_object_get(json_object_get(ev, "involvedObject"), "namespace"));
    assert_string_equal(field(ev, "involvedObject", "name"), "node-a");
    json_decref(node);
}

static void test_stop_writes_queue_then_drops(void **state)
{
    struct fx *x = *state;

    x->api.gate_closed = true;
    fx_start(x);
    events_record(x->r, x->pod, EVENTS_NORMAL, "R1", "m");
    wait_blocked(&x->api, 1);
    events_record(x->r, x->pod, EVENTS_NORMAL, "R2", "m");
    open_gate(&x->api);
    events_stop(x->r);
    assert_int_equal(x->api.creates, 2);
    events_record(x->r, x->pod, EVENTS_NORMAL, "R3", "m");
    assert_int_equal(stats(x).dropped_queue, 1);
    events_stop(x->r);
    events_flush(x->r);
    assert_int_equal(x->api.creates, 2);
}

/* ---- the gate (events_set_gate) ---- */

struct busy_flag {
    atomic_bool busy;
    atomic_int calls;
};

static bool flag_busy(void *ctx)
{
    struct busy_flag *b = ctx;
    atomic_fetch_add(&b->calls, 1);
    return atomic_load(&b->busy);
}

static void gate_on(struct fx *x, struct busy_flag *b, bool busy, usec_t max_wait)
{
    struct yield_gate g = {.busy = flag_busy, .ctx = b, .max_wait = max_wait};
    atomic_init(&b->busy, busy);
    atomic_init(&b->calls, 0);
    events_set_gate(x->r, &g);
}

static int creates_of(struct fake_api *f)
{
    int n;
    pthread_mutex_lock(&f->lock);
    n = f->creates;
    pthread_mutex_unlock(&f->lock);
    return n;
}

/* Waits (up to 10 s) until the fake API has n creates. */
static bool wait_creates(struct fake_api *f, int n)
{
    for (int i = 0; i < 1000 && creates_of(f) < n; i++)
        clock_sleep(10 * USEC_PER_MSEC);
    return creates_of(f) >= n;
}

static void test_gate_holds_while_busy(void **state)
{
    struct fx *x = *state;
    struct busy_flag b;
    fx_start(x);
    gate_on(x, &b, true, 60 * USEC_PER_SEC);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Held", "m");
    while (atomic_load(&b.calls) < 3) /* the writer asked, and asks again */
        clock_sleep(YIELD_GATE_STEP);
    assert_int_equal(creates_of(&x->api), 0);
    atomic_store(&b.busy, false);
    events_flush(x->r);
    assert_int_equal(x->api.creates, 1);
    assert_int_equal(stats(x).held, 1);
    /* Not busy: the next one goes at once and is not counted as held. */
    events_record(x->r, x->pod, EVENTS_NORMAL, "Free", "m");
    events_flush(x->r);
    assert_int_equal(x->api.creates, 2);
    assert_int_equal(stats(x).held, 1);
}

static void test_gate_bound(void **state)
{
    struct fx *x = *state;
    struct busy_flag b;
    fx_start(x);
    gate_on(x, &b, true, 60 * USEC_PER_MSEC); /* busy for good: the bound lets it go */
    events_record(x->r, x->pod, EVENTS_NORMAL, "Held", "m");
    events_flush(x->r);
    assert_int_equal(x->api.creates, 1);
    assert_int_equal(stats(x).held, 1);
}

static void test_gate_not_held_with_half_full_queue(void **state)
{
    struct fx *x = *state;
    struct busy_flag b;
    x->opts.queue_size = 4;
    x->api.gate_closed = true;
    fx_start(x);
    gate_on(x, &b, false, 60 * USEC_PER_SEC);
    events_record(x->r, x->pod, EVENTS_NORMAL, "R1", "m");
    wait_blocked(&x->api, 1); /* R1 is inside the API call */
    atomic_store(&b.busy, true);
    events_record(x->r, x->pod, EVENTS_NORMAL, "R2", "m");
    events_record(x->r, x->pod, EVENTS_NORMAL, "R3", "m");
    events_record(x->r, x->pod, EVENTS_NORMAL, "R4", "m");
    open_gate(&x->api);
    /* R2 leaves two behind it (half of 4): written despite busy; R3 then waits. */
    assert_true(wait_creates(&x->api, 2));
    clock_sleep(5 * YIELD_GATE_STEP);
    assert_int_equal(creates_of(&x->api), 2);
    atomic_store(&b.busy, false);
    events_flush(x->r);
    assert_int_equal(x->api.creates, 4);
    assert_int_equal(stats(x).held, 1);
}

static void test_gate_removed_lets_go(void **state)
{
    struct fx *x = *state;
    struct busy_flag b;
    int calls;
    fx_start(x);
    gate_on(x, &b, true, 60 * USEC_PER_SEC);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Held", "m");
    while (atomic_load(&b.calls) < 2)
        clock_sleep(YIELD_GATE_STEP);
    events_set_gate(x->r, NULL); /* returns once the hold let go of the old gate */
    calls = atomic_load(&b.calls);
    events_flush(x->r);
    assert_int_equal(x->api.creates, 1);
    clock_sleep(3 * YIELD_GATE_STEP);
    assert_int_equal(atomic_load(&b.calls), calls); /* the old gate is no longer asked */
}

/* events_discard (leadership ended): the Event held at the gate and those queued behind
 * it are dropped, not written; the recorder is stopped (a later record is dropped too),
 * and a flush does not wait on them. */
static void test_discard_drops_held_and_queued(void **state)
{
    struct fx *x = *state;
    struct busy_flag b;
    fx_start(x);
    gate_on(x, &b, true, 60 * USEC_PER_SEC);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Held", "m");
    while (atomic_load(&b.calls) < 2) /* taken, and held at the gate */
        clock_sleep(YIELD_GATE_STEP);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Queued", "m");
    usec_t t0 = clock_now();
    events_discard(x->r);
    events_flush(x->r);
    assert_true(clock_now() - t0 < 10 * USEC_PER_SEC); /* not the gate's bound */
    events_record(x->r, x->pod, EVENTS_NORMAL, "Late", "m");
    assert_int_equal(x->api.creates, 0);
    assert_int_equal(x->api.patches, 0);
    assert_int_equal(stats(x).dropped_queue, 3);
    events_stop(x->r);
}

/* events_stop_within: a fast API server gets everything written; one that hangs on a
 * write gets the budget, then the queue behind that write is dropped (the write in
 * flight finishes) and later records are refused. */
static void test_stop_within_bounds_the_flush(void **state)
{
    struct fx *x = *state;
    fx_start(x);
    events_record(x->r, x->pod, EVENTS_NORMAL, "A", "m");
    events_record(x->r, x->pod, EVENTS_NORMAL, "B", "m");
    assert_true(events_stop_within(x->r, 30 * USEC_PER_SEC));
    assert_int_equal(x->api.creates, 2);
    assert_int_equal(stats(x).dropped_queue, 0);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Late", "m");
    assert_true(events_stop_within(x->r, USEC_PER_SEC)); /* idempotent, nothing left */
    assert_int_equal(stats(x).dropped_queue, 1);
}

static void *open_gate_later(void *arg)
{
    clock_sleep(USEC_PER_SEC);
    open_gate(arg);
    return NULL;
}

static void test_stop_within_drops_after_budget(void **state)
{
    struct fx *x = *state;
    pthread_t t;
    x->api.gate_closed = true;
    fx_start(x);
    events_record(x->r, x->pod, EVENTS_NORMAL, "InFlight", "m");
    wait_blocked(&x->api, 1); /* the writer is inside the API call */
    for (int i = 0; i < 5; i++)
        events_record(x->r, x->pod, EVENTS_NORMAL, "Queued", "m%d", i);
    assert_int_equal(pthread_create(&t, NULL, open_gate_later, &x->api), 0);
    usec_t t0 = clock_now();
    assert_false(events_stop_within(x->r, 200 * USEC_PER_MSEC));
    usec_t took = clock_now() - t0;
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(took < 20 * USEC_PER_SEC); /* the write in flight, not five more */
    assert_int_equal(x->api.creates, 1);
    assert_int_equal(stats(x).dropped_queue, 5);
    events_record(x->r, x->pod, EVENTS_NORMAL, "Late", "m");
    events_flush(x->r);
    assert_int_equal(x->api.creates, 1);
}

static void test_bad_opts(void **state)
{
    struct fx *x = *state;
    struct events_recorder *r = NULL;

    x->opts.component = "";
    assert_int_equal(events_recorder_new(&x->opts, &r), -EINVAL);
    x->opts.component = "c\xff";
    assert_int_equal(events_recorder_new(&x->opts, &r), -EINVAL);
    x->opts.component = "c";
    x->opts.api.patch = NULL;
    assert_int_equal(events_recorder_new(&x->opts, &r), -EINVAL);
    assert_null(r);
    x->opts.api.patch = fake_patch;
    x->opts.instance = NULL; /* host name */
    assert_int_equal(events_recorder_new(&x->opts, &r), 0);
    events_recorder_free(r);
    events_recorder_free(NULL);
}

struct recorder_thread {
    struct events_recorder *r;
    json_t *obj;
};

static void *record_many(void *arg)
{
    struct recorder_thread *t = arg;

    for (int i = 0; i < 100; i++)
        events_record(t->r, t->obj, EVENTS_NORMAL, "Busy", "same message");
    return NULL;
}

static void test_concurrent_record(void **state)
{
    struct fx *x = *state;
    struct recorder_thread t[4];
    pthread_t tid[4];
    char name[16];

    fx_start(x);
    for (int i = 0; i < 4; i++) {
        (void)snprintf(name, sizeof(name), "sb%d", i);
        t[i] = (struct recorder_thread){.r = x->r, .obj = make_obj("Sandbox", "ns1", name)};
        assert_int_equal(pthread_create(&tid[i], NULL, record_many, &t[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_join(tid[i], NULL), 0);
    events_flush(x->r);
    /* Each object gets its burst; each burst collapses into one Event. */
    assert_int_equal(stats(x).recorded, 4 * LIMIT_EVENT_BURST);
    assert_int_equal(stats(x).dropped_spam, 4 * (100 - LIMIT_EVENT_BURST));
    assert_int_equal(x->api.creates, 4);
    assert_int_equal(x->api.patches, 4 * (LIMIT_EVENT_BURST - 1));
    for (int i = 0; i < 4; i++)
        json_decref(t[i].obj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_event_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_aggregation_patches_count, setup, teardown),
        cmocka_unit_test_setup_teardown(test_records_queued_out_of_order_aggregate, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_different_keys_do_not_aggregate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_window_expiry_creates_new, setup, teardown),
        cmocka_unit_test_setup_teardown(test_patch_of_deleted_event_recreates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_message_cut_and_cleaned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spam_filter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lru_cache_eviction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_full_drops_without_blocking, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failures_counted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cluster_scoped_object, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_writes_queue_then_drops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gate_holds_while_busy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gate_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gate_not_held_with_half_full_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gate_removed_lets_go, setup, teardown),
        cmocka_unit_test_setup_teardown(test_discard_drops_held_and_queued, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_within_bounds_the_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_within_drops_after_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_opts, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
