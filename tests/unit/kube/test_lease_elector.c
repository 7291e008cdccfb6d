/* SPDX-License-Identifier: Apache-2.0 */
/* Leader election state machine against an in-memory Lease API and a fake clock:
 * acquire, renew, expiry by our own observation, loss on conflict, renew deadline
 * (failures shorter than it keep the lead, longer lose it, hung requests are cut at
 * their own timeout), release and immediate take-over, and the election thread. */
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
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "kube/err.h"
#include "kube/lease.h"

/* ---- fake clock ---- */

struct fake_clock {
    usec_t mono;
    usec_t wall;
};

static void advance(struct fake_clock *c, usec_t d)
{
    c->mono += d;
    c->wall += d;
}

/* ---- in-memory Lease API (one object) ---- */

struct fake_api {
    json_t *obj; /* the stored Lease, or NULL */
    long rv;     /* its resourceVersion */
    int fail;    /* when non-zero, every call fails with it */
    /* When set, every call hangs until its timeout (the clock advances by it) and fails
     * with -ETIMEDOUT, as a request to a stopped API server does. */
    struct fake_clock *hang;
    usec_t last_timeout, max_timeout; /* timeouts the calls were given */
    /* Thread tests: when set, every call sleeps (really) until its timeout and fails
     * with -ETIMEDOUT; the start of each such call is recorded. */
    atomic_bool sleep;
    atomic_int nstarts;
    usec_t starts[64];
    int gets, creates, updates, conflicts;
    int hide_gets; /* this many gets report "not found" although the object exists */
    /* Runs once just before the next update is checked (to simulate a racing writer). */
    void (*before_update)(struct fake_api *f);
    /* Runs once while the next get is under way, before it reads the object. */
    void (*before_get)(struct fake_api *f);
};

static void store(struct fake_api *f, json_t *obj)
{
    char rv[32];

    (void)snprintf(rv, sizeof(rv), "%ld", ++f->rv);
    json_object_set_new(json_object_get(obj, "metadata"), "resourceVersion", json_string(rv));
    json_decref(f->obj);
    f->obj = obj;
}

static void set_conflict(struct kube_err *e)
{
    if (!e)
        return;
    e->code = -EBUSY;
    e->http_status = 409;
    (void)snprintf(e->reason, sizeof(e->reason), "Conflict");
}

/* Records the timeout of a call; returns -ETIMEDOUT after "hanging" for it, else 0. */
static int fake_call(struct fake_api *f, usec_t timeout)
{
    assert_true(timeout > 0);
    f->last_timeout = timeout;
    if (timeout > f->max_timeout)
        f->max_timeout = timeout;
    if (atomic_load(&f->sleep)) {
        int i = atomic_fetch_add(&f->nstarts, 1);
        if (i < 64)
            f->starts[i] = clock_now();
        clock_sleep(timeout);
        return -ETIMEDOUT;
    }
    if (!f->hang)
        return 0;
    advance(f->hang, timeout);
    return -ETIMEDOUT;
}

static int fake_get(void *ctx, const char *ns, const char *name, usec_t timeout, json_t **ret_obj,
                    struct kube_err *reterr)
{
    struct fake_api *f = ctx;
    (void)ns;
    (void)name;
    (void)reterr;

    f->gets++;
    if (fake_call(f, timeout) < 0)
        return -ETIMEDOUT;
    if (f->before_get) {
        void (*hook)(struct fake_api *) = f->before_get;
        f->before_get = NULL;
        hook(f);
    }
    if (f->fail)
        return f->fail;
    if (f->hide_gets > 0) {
        f->hide_gets--;
        return -ENOENT;
    }
    if (!f->obj)
        return -ENOENT;
    *ret_obj = json_deep_copy(f->obj);
    return 0;
}

static int fake_create(void *ctx, const char *ns, const json_t *obj, usec_t timeout,
                       json_t **ret_obj, struct kube_err *reterr)
{
    struct fake_api *f = ctx;
    (void)reterr;

    f->creates++;
    if (fake_call(f, timeout) < 0)
        return -ETIMEDOUT;
    if (f->fail)
        return f->fail;
    if (f->obj)
        return -EEXIST;
    assert_string_equal(ns, "ns1");
    store(f, json_deep_copy(obj));
    if (ret_obj)
        *ret_obj = json_deep_copy(f->obj);
    return 0;
}

static int fake_update(void *ctx, const char *ns, const json_t *obj, usec_t timeout,
                       json_t **ret_obj, struct kube_err *reterr)
{
    struct fake_api *f = ctx;
    const char *rv;
    char cur[32];
    (void)ns;

    f->updates++;
    if (fake_call(f, timeout) < 0)
        return -ETIMEDOUT;
    if (f->before_update) {
        void (*hook)(struct fake_api *) = f->before_update;
        f->before_update = NULL;
        hook(f);
    }
    if (f->fail)
        return f->fail;
    if (!f->obj)
        return -ENOENT;
    rv = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    (void)snprintf(cur, sizeof(cur), "%ld", f->rv);
    if (!rv || strcmp(rv, cur) != 0) {
        f->conflicts++;
        set_conflict(reterr);
        return -EBUSY;
    }
    store(f, json_deep_copy(obj));
    if (ret_obj)
        *ret_obj = json_deep_copy(f->obj);
    return 0;
}

static const char *spec_s(struct fake_api *f, const char *key)
{
    return json_string_value(json_object_get(json_object_get(f->obj, "spec"), key));
}

static json_int_t spec_i(struct fake_api *f, const char *key)
{
    return json_integer_value(json_object_get(json_object_get(f->obj, "spec"), key));
}

/* ---- fake clock sources and callback recorder ---- */

static usec_t fc_now(void *ctx)
{
    return ((struct fake_clock *)ctx)->mono;
}

static usec_t fc_wall(void *ctx)
{
    return ((struct fake_clock *)ctx)->wall;
}

struct calls {
    int started, stopped, new_leader;
    char last_leader[64];
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

static void on_started(void *ctx)
{
    struct calls *c = ctx;
    pthread_mutex_lock(&c->lock);
    c->started++;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

static void on_stopped(void *ctx)
{
    struct calls *c = ctx;
    pthread_mutex_lock(&c->lock);
    c->stopped++;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

static void on_new_leader(void *ctx, const char *id)
{
    struct calls *c = ctx;
    pthread_mutex_lock(&c->lock);
    c->new_leader++;
    (void)snprintf(c->last_leader, sizeof(c->last_leader), "%s", id);
    pthread_mutex_unlock(&c->lock);
}

static void calls_init(struct calls *c)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
}

struct cand {
    struct lease_elector *le;
    struct calls calls;
};

/* Options naming Lease ns1/ctrl, identity id, on the fake API f (borrowed). */
static struct lease_opts base_opts(const char *id, struct fake_api *f)
{
    return (struct lease_opts){
        .ns = "ns1",
        .name = "ctrl",
        .identity = id,
        .api = {.ctx = f, .get = fake_get, .create = fake_create, .update = fake_update},
    };
}

/* Records c's callbacks in c->calls; new_leader too when all. */
static struct lease_callbacks cand_callbacks(struct cand *c, bool all)
{
    calls_init(&c->calls);
    return (struct lease_callbacks){.ctx = &c->calls,
                                    .started_leading = on_started,
                                    .stopped_leading = on_stopped,
                                    .new_leader = all ? on_new_leader : NULL};
}

static void cand_new(struct cand *c, const char *id, struct fake_api *f, struct fake_clock *clk)
{
    struct lease_clock lc = {.ctx = clk, .now = fc_now, .wall_now = fc_wall};
    struct lease_opts o = base_opts(id, f);

    o.clock = clk ? &lc : NULL;
    o.cb = cand_callbacks(c, true);
    assert_int_equal(lease_elector_new(&o, &c->le), 0);
}

static void cand_free(struct cand *c)
{
    lease_elector_free(c->le);
    pthread_mutex_destroy(&c->calls.lock);
    pthread_cond_destroy(&c->calls.cond);
}

static void assert_leader_is(struct lease_elector *le, const char *id)
{
    char buf[64];

    assert_int_equal(lease_elector_leader(le, buf, sizeof(buf)), 0);
    assert_string_equal(buf, id);
}

static struct fake_clock start_clock(void)
{
    /* 2026-01-01T00:00:00Z */
    return (struct fake_clock){.mono = 1000 * USEC_PER_SEC,
                               .wall = (usec_t)1767225600 * USEC_PER_SEC};
}

/* One test's world: the fake API on a fake clock, candidate "a" and maybe "b". */
struct world {
    struct fake_api f;
    struct fake_clock clk;
    struct cand a, b;
    bool has_b; /* b was created (and is freed at teardown) */
};

static int world_setup(void **state, bool with_b)
{
    struct world *w = test_calloc(1, sizeof(*w));

    w->clk = start_clock();
    cand_new(&w->a, "a", &w->f, &w->clk);
    if (with_b)
        cand_new(&w->b, "b", &w->f, &w->clk);
    w->has_b = with_b;
    *state = w;
    return 0;
}

static int setup_a(void **state)
{
    return world_setup(state, false);
}

static int setup_ab(void **state)
{
    return world_setup(state, true);
}

static int world_teardown(void **state)
{
    struct world *w = *state;

    cand_free(&w->a);
    if (w->has_b)
        cand_free(&w->b);
    json_decref(w->f.obj);
    test_free(w);
    return 0;
}

/* ---- tests ---- */

static void test_acquire_absent_creates(void **state)
{
    struct world *w = *state;

    assert_false(lease_elector_is_leader(w->a.le));
    assert_int_equal(lease_elector_tick(w->a.le), 1);
    assert_true(lease_elector_is_leader(w->a.le));
    assert_int_equal(w->f.creates, 1);
    assert_int_equal(w->a.calls.started, 1);
    assert_int_equal(w->a.calls.new_leader, 1);
    assert_string_equal(w->a.calls.last_leader, "a");
    assert_leader_is(w->a.le, "a");
    assert_string_equal(json_string_value(json_object_get(w->f.obj, "kind")), "Lease");
    assert_string_equal(json_string_value(json_object_get(w->f.obj, "apiVersion")),
                        "coordination.k8s.io/v1");
    assert_string_equal(spec_s(&w->f, "holderIdentity"), "a");
    assert_int_equal(spec_i(&w->f, "leaseDurationSeconds"), 15);
    assert_int_equal(spec_i(&w->f, "leaseTransitions"), 0);
    /* MicroTime: RFC 3339 with microseconds. */
    assert_string_equal(spec_s(&w->f, "acquireTime"), "2026-01-01T00:00:00.000000Z");
    assert_string_equal(spec_s(&w->f, "renewTime"), "2026-01-01T00:00:00.000000Z");
}

static void test_renew_keeps_acquire_time(void **state)
{
    struct world *w = *state;

    assert_int_equal(lease_elector_tick(w->a.le), 1);
    advance(&w->clk, 2 * USEC_PER_SEC + 5);
    assert_int_equal(lease_elector_tick(w->a.le), 1);
    assert_int_equal(w->f.updates, 1);
    assert_string_equal(spec_s(&w->f, "acquireTime"), "2026-01-01T00:00:00.000000Z");
    assert_string_equal(spec_s(&w->f, "renewTime"), "2026-01-01T00:00:02.000005Z");
    assert_int_equal(spec_i(&w->f, "leaseTransitions"), 0);
    assert_int_equal(w->a.calls.started, 1);
    assert_int_equal(w->a.calls.stopped, 0);
    assert_int_equal(w->a.calls.new_leader, 1);
}

static void test_follower_waits_while_renewed(void **state)
{
    struct world *w = *state;

    assert_int_equal(lease_elector_tick(w->a.le), 1);
    /* A renews every 2 s for a minute: B never gets it. */
    for (int i = 0; i < 30; i++) {
        assert_int_equal(lease_elector_tick(w->b.le), 0);
        advance(&w->clk, 2 * USEC_PER_SEC);
        assert_int_equal(lease_elector_tick(w->a.le), 1);
    }
    assert_false(lease_elector_is_leader(w->b.le));
    assert_int_equal(w->b.calls.started, 0);
    assert_int_equal(w->b.calls.new_leader, 1);
    assert_string_equal(w->b.calls.last_leader, "a");
    assert_leader_is(w->b.le, "a");
    assert_int_equal(w->f.conflicts, 0);
}

static void test_takeover_after_expiry_by_own_observation(void **state)
{
    struct world *w = *state;

    assert_int_equal(lease_elector_tick(w->a.le), 1);
    /* The remote timestamps look ancient (clock skew), which must not matter: only how
     * long B itself has seen the record unchanged does. */
    advance(&w->clk, 5 * USEC_PER_SEC);
    json_object_set_new(json_object_get(w->f.obj, "spec"), "renewTime",
                        json_string("2000-01-01T00:00:00.000000Z"));
    cand_new(&w->b, "b", &w->f, &w->clk);
    w->has_b = true;
    assert_int_equal(lease_elector_tick(w->b.le), 0);
    advance(&w->clk, 14 * USEC_PER_SEC);
    assert_int_equal(lease_elector_tick(w->b.le), 0);
    advance(&w->clk, USEC_PER_SEC - 1);
    assert_int_equal(lease_elector_tick(w->b.le), 0);
    advance(&w->clk, 1);
    assert_int_equal(lease_elector_tick(w->b.le), 1);
    assert_int_equal(w->b.calls.started, 1);
    assert_string_equal(spec_s(&w->f, "holderIdentity"), "b");
    assert_int_equal(spec_i(&w->f, "leaseTransitions"), 1);
    assert_string_equal(spec_s(&w->f, "acquireTime"), spec_s(&w->f, "renewTime"));
    /* A wakes up (it was partitioned), sees B's valid record and steps down. */
    assert_int_equal(lease_elector_tick(w->a.le), 0);
    assert_false(lease_elector_is_leader(w->a.le));
    assert_int_equal(w->a.calls.stopped, 1);
    assert_leader_is(w->a.le, "b");
    assert_string_equal(spec_s(&w->f, "holderIdentity"), "b");
}

/* A record another writer gave a duration past the int32 field's range (2^62 s) is held
 * for the largest one. Before, its microseconds wrapped to 0 and it looked expired at
 * once: another holder's valid Lease taken. */
static void test_huge_duration_not_expired(void **state)
{
    struct world *w = *state;
    json_t *spec;

    assert_int_equal(lease_elector_tick(w->a.le), 1);
    spec = json_object_get(w->f.obj, "spec");
    json_object_set_new(spec, "holderIdentity", json_string("other"));
    json_object_set_new(spec, "leaseDurationSeconds", json_integer((json_int_t)1 << 62));
    cand_new(&w->b, "b", &w->f, &w->clk);
    w->has_b = true;
    assert_int_equal(lease_elector_tick(w->b.le), 0);
    advance(&w->clk, 60 * USEC_PER_SEC);
    assert_int_equal(lease_elector_tick(w->b.le), 0);
    assert_false(lease_elector_is_leader(w->b.le));
    assert_string_equal(spec_s(&w->f, "holderIdentity"), "other");
}

/* The world of test_follower_times_expiry_after_its_read. */
static struct world *slow_read_world;

/* B's read takes 6.9 s, and A renews while it is under way. */
static void renew_during_read(struct fake_api *f)
{
    (void)f;
    advance(&slow_read_world->clk, 6900 * USEC_PER_MSEC);
    assert_int_equal(lease_elector_tick(slow_read_world->a.le), 1);
}

/* A follower times another holder's record from when its read returned. With lease 15 s
 * and renew deadline 14 s (request timeout 7 s), B's read at T+2 s takes 6.9 s and A
 * renews meanwhile (at T+8.9 s; A leads until T+22.9 s). Before, B timed that record from
 * the start of its tick (T+2 s) and took the Lease at T+17 s: two leaders for 5.9 s. */
static void test_follower_times_expiry_after_its_read(void **state)
{
    struct world *w = *state;
    struct lease_clock lc = {.ctx = &w->clk, .now = fc_now, .wall_now = fc_wall};
    struct lease_opts o = base_opts("a", &w->f);
    cand_free(&w->a);
    o.lease_duration = 15 * USEC_PER_SEC;
    o.renew_deadline = 14 * USEC_PER_SEC;
    o.retry_period = 2 * USEC_PER_SEC;
    o.clock = &lc;
    o.cb = cand_callbacks(&w->a, true);
    assert_int_equal(lease_elector_new(&o, &w->a.le), 0);
    o.identity = "b";
    o.cb = cand_callbacks(&w->b, true);
    assert_int_equal(lease_elector_new(&o, &w->b.le), 0);
    w->has_b = true;
    slow_read_world = w;

    assert_int_equal(lease_elector_tick(w->a.le), 1);
    assert_int_equal(lease_elector_tick(w->b.le), 0);
    advance(&w->clk, 2 * USEC_PER_SEC);
    w->f.before_get = renew_during_read;
    assert_int_equal(lease_elector_tick(w->b.le), 0);
    /* T+17 s: A renewed 8.1 s ago and still leads */
    advance(&w->clk, 15 * USEC_PER_SEC - 6900 * USEC_PER_MSEC);
    assert_true(lease_elector_is_leader(w->a.le));
    assert_int_equal(lease_elector_tick(w->b.le), 0);
    assert_false(lease_elector_is_leader(w->b.le));
    /* A stops renewing: B takes over once A's record is lease_duration old to it */
    advance(&w->clk, 7 * USEC_PER_SEC);
    assert_false(lease_elector_is_leader(w->a.le));
    assert_int_equal(lease_elector_tick(w->b.le), 1);
    assert_string_equal(spec_s(&w->f, "holderIdentity"), "b");
}

/* A racing writer: another candidate wins between our get and our update. */
static void steal_lease(struct fake_api *f)
{
    json_t *obj = json_deep_copy(f->obj);
    json_t *spec = json_object_get(obj, "spec");

    json_object_set_new(spec, "holderIdentity", json_string("thief"));
    json_object_set_new(spec, "renewTime", json_string("2026-01-01T00:00:03.000000Z"));
    store(f, obj);
}

static void test_lose_on_conflict(void **state)
{
    struct world *w = *state;

    assert_int_equal(lease_elector_tick(w->a.le), 1);
    advance(&w->clk, 2 * USEC_PER_SEC);
    w->f.before_update = steal_lease;
    assert_int_equal(lease_elector_tick(w->a.le), 0);
    assert_int_equal(w->f.conflicts, 1);
    assert_false(lease_elector_is_leader(w->a.le));
    assert_int_equal(w->a.calls.stopped, 1);
    assert_string_equal(w->a.calls.last_leader, "thief");
    assert_string_equal(spec_s(&w->f, "holderIdentity"), "thief");
    /* Still not ours on the next periods while the thief's record is fresh. */
    advance(&w->clk, 2 * USEC_PER_SEC);
    assert_int_equal(lease_elector_tick(w->a.le), 0);
    assert_int_equal(w->a.calls.started, 1);
}

static void test_renew_deadline(void **state)
{
    struct world *w = *state;

    assert_int_equal(lease_elector_tick(w->a.le), 1);
    w->f.fail = -EIO;
    /* Failing renewals keep leadership until 10 s after the last success. */
    for (int i = 0; i < 4; i++) {
        advance(&w->clk, 2 * USEC_PER_SEC);
        assert_int_equal(lease_elector_tick(w->a.le), 1);
    }
    advance(&w->clk, 2 * USEC_PER_SEC - 1);
    assert_int_equal(lease_elector_tick(w->a.le), 1);
    assert_int_equal(w->a.calls.stopped, 0);
    advance(&w->clk, 1);
    assert_int_equal(lease_elector_tick(w->a.le), 0);
    assert_int_equal(w->a.calls.stopped, 1);
    assert_false(lease_elector_is_leader(w->a.le));
    /* When the API comes back, our own unexpired record is ours to renew. */
    w->f.fail = 0;
    advance(&w->clk, 2 * USEC_PER_SEC);
    assert_int_equal(lease_elector_tick(w->a.le), 1);
    assert_int_equal(w->a.calls.started, 2);
    assert_int_equal(spec_i(&w->f, "leaseTransitions"), 0);
}

/* An outage shorter than the renew deadline: every renewal fails for 8 s, then one
 * succeeds; the leader never stops leading and nobody else could have taken over. */
static void test_outage_shorter_than_deadline_keeps_lead(void **state)
{
    struct world *w = *state;

    assert_int_equal(lease_elector_tick(w->a.le), 1);
    assert_int_equal(lease_elector_tick(w->b.le), 0);
    w->f.fail = -ECONNREFUSED;
    for (int i = 0; i < 4; i++) {
        advance(&w->clk, 2 * USEC_PER_SEC);
        assert_int_equal(lease_elector_tick(w->a.le), 1);
        assert_true(lease_elector_is_leader(w->a.le));
    }
    advance(&w->clk, 2 * USEC_PER_SEC - 1); /* 10 s - 1 us after the last renew */
    assert_true(lease_elector_is_leader(w->a.le));
    w->f.fail = 0;
    assert_int_equal(lease_elector_tick(w->a.le), 1);
    assert_int_equal(lease_elector_tick(w->b.le), 0);
    assert_int_equal(w->a.calls.stopped, 0);
    assert_int_equal(w->a.calls.started, 1);
    /* The deadline counts from the new renew. */
    advance(&w->clk, 9 * USEC_PER_SEC);
    assert_true(lease_elector_is_leader(w->a.le));
    assert_string_equal(spec_s(&w->f, "holderIdentity"), "a");
    assert_false(lease_elector_is_leader(w->b.le));
}

/* Requests that hang (an API server that stopped answering) are cut at their own
 * timeout, renew_deadline / 2, and never run past the renew deadline: the leader gives
 * up exactly 10 s after its last renew, 5 s before anyone may take over. */
static void test_hung_requests_bounded_by_deadline(void **state)
{
    struct world *w = *state;
    usec_t t0 = w->clk.mono;

    assert_int_equal(lease_elector_tick(w->a.le), 1);
    assert_int_equal(w->f.last_timeout, 5 * USEC_PER_SEC);
    w->f.hang = &w->clk;
    w->f.gets = 0;
    advance(&w->clk, 2 * USEC_PER_SEC);
    assert_int_equal(lease_elector_tick(w->a.le), 1); /* hung 5 s: now t0 + 7 s */
    assert_int_equal(w->f.last_timeout, 5 * USEC_PER_SEC);
    assert_int_equal(w->clk.mono - t0, 7 * USEC_PER_SEC);
    assert_int_equal(w->f.gets, 0); /* the leader renews without reading first */
    advance(&w->clk, 2 * USEC_PER_SEC);
    /* 1 s left before the deadline: the request gets 1 s, then leadership is gone. */
    assert_int_equal(lease_elector_tick(w->a.le), 0);
    assert_int_equal(w->f.last_timeout, USEC_PER_SEC);
    assert_int_equal(w->clk.mono - t0, 10 * USEC_PER_SEC);
    assert_int_equal(w->a.calls.stopped, 1);
    assert_false(lease_elector_is_leader(w->a.le));
    assert_int_equal(w->f.max_timeout, 5 * USEC_PER_SEC);
}

/* is_leader turns false at the renew deadline even when no tick ran (a blocked
 * election thread), so gated work stops before the lease can expire for others. */
static void test_is_leader_expires_without_tick(void **state)
{
    struct world *w = *state;

    assert_int_equal(lease_elector_tick(w->a.le), 1);
    advance(&w->clk, 10 * USEC_PER_SEC - 1);
    assert_true(lease_elector_is_leader(w->a.le));
    advance(&w->clk, 1);
    assert_false(lease_elector_is_leader(w->a.le));
    /* The next tick notices it, reports the loss, and (the Lease still being ours and
     * unexpired) takes it back. */
    assert_int_equal(lease_elector_tick(w->a.le), 1);
    assert_int_equal(w->a.calls.stopped, 1);
    assert_int_equal(w->a.calls.started, 2);
    assert_true(lease_elector_is_leader(w->a.le));
}

static void test_request_timeout_option(void **state)
{
    struct fake_api f = {0};
    struct fake_clock clk = start_clock();
    struct lease_clock lc = {.ctx = &clk, .now = fc_now, .wall_now = fc_wall};
    struct lease_opts o = base_opts("a", &f);
    struct lease_elector *le = NULL;
    (void)state;

    o.lease_duration = 3 * USEC_PER_SEC;
    o.renew_deadline = 1500 * USEC_PER_MSEC;
    o.retry_period = 500 * USEC_PER_MSEC;
    o.clock = &lc;
    /* renew_deadline / 2 = 750 ms is raised to the 1 s floor. */
    assert_int_equal(lease_elector_new(&o, &le), 0);
    assert_int_equal(lease_elector_tick(le), 1);
    assert_int_equal(f.last_timeout, USEC_PER_SEC);
    lease_elector_free(le);
    o.request_timeout = 300 * USEC_PER_MSEC;
    assert_int_equal(lease_elector_new(&o, &le), 0);
    advance(&clk, 5 * USEC_PER_SEC);
    assert_int_equal(lease_elector_tick(le), 1);
    assert_int_equal(f.last_timeout, 300 * USEC_PER_MSEC);
    lease_elector_free(le);
    json_decref(f.obj);
}

static void test_check_timings(void **state)
{
    const char *why = NULL;
    (void)state;

    assert_int_equal(lease_check_timings(0, 0, 0, &why), 0);
    assert_null(why);
    assert_int_equal(
        lease_check_timings(15 * USEC_PER_SEC, 10 * USEC_PER_SEC, 500 * USEC_PER_MSEC, &why), 0);
    assert_int_equal(lease_check_timings(10 * USEC_PER_SEC, 0, 0, &why), -EINVAL);
    assert_non_null(strstr(why, "renew deadline"));
    assert_int_equal(lease_check_timings(0, 3 * USEC_PER_SEC, 3 * USEC_PER_SEC, &why), -EINVAL);
    assert_non_null(strstr(why, "retry period"));
    assert_int_equal(lease_check_timings(1500 * USEC_PER_MSEC, USEC_PER_SEC, 1, &why), -EINVAL);
    assert_non_null(strstr(why, "whole number of seconds"));
    assert_int_equal(lease_check_timings(500 * USEC_PER_MSEC, 1, 1, NULL), -EINVAL);
}

static void test_release_hands_over_at_once(void **state)
{
    struct world *w = *state;

    assert_int_equal(lease_elector_tick(w->a.le), 1);
    assert_int_equal(lease_elector_tick(w->b.le), 0);
    advance(&w->clk, USEC_PER_SEC);
    assert_int_equal(lease_elector_release(w->a.le), 0);
    assert_false(lease_elector_is_leader(w->a.le));
    assert_int_equal(w->a.calls.stopped, 1);
    assert_string_equal(spec_s(&w->f, "holderIdentity"), "");
    assert_int_equal(spec_i(&w->f, "leaseDurationSeconds"), 1);
    /* No clock advance: B takes over on its very next attempt. */
    assert_int_equal(lease_elector_tick(w->b.le), 1);
    assert_string_equal(spec_s(&w->f, "holderIdentity"), "b");
    assert_int_equal(spec_i(&w->f, "leaseDurationSeconds"), 15);
    assert_int_equal(spec_i(&w->f, "leaseTransitions"), 1);
    assert_string_equal(w->b.calls.last_leader, "b");
    /* Releasing when not leading is a no-op. */
    assert_int_equal(lease_elector_release(w->a.le), 0);
    assert_int_equal(w->a.calls.stopped, 1);
    assert_string_equal(spec_s(&w->f, "holderIdentity"), "b");
}

static void test_create_race_lost(void **state)
{
    struct world *w = *state;

    assert_int_equal(lease_elector_tick(w->a.le), 1);
    /* B saw "not found" but A created it first: B's create fails with -EEXIST. */
    w->f.hide_gets = 1;
    assert_int_equal(lease_elector_tick(w->b.le), 0);
    assert_int_equal(w->f.creates, 2);
    assert_false(lease_elector_is_leader(w->b.le));
    assert_string_equal(spec_s(&w->f, "holderIdentity"), "a");
    /* The next attempt sees A's record and leaves it alone. */
    assert_int_equal(lease_elector_tick(w->b.le), 0);
    assert_int_equal(w->f.creates, 2);
    assert_leader_is(w->b.le, "a");
}

static void test_preserves_unknown_fields(void **state)
{
    struct world *w = *state;
    json_t *obj;

    assert_int_equal(lease_elector_tick(w->a.le), 1);
    /* Someone else's write (a new resourceVersion): the optimistic renew conflicts and
     * the elector reads the Lease, keeping what it does not know. */
    obj = json_deep_copy(w->f.obj);
    json_object_set_new(json_object_get(obj, "metadata"), "labels",
                        json_pack("{s:s}", "app", "ctrl"));
    json_object_set_new(json_object_get(obj, "spec"), "strategy",
                        json_string("OldestEmulationVersion"));
    store(&w->f, obj);
    advance(&w->clk, 2 * USEC_PER_SEC);
    assert_int_equal(lease_elector_tick(w->a.le), 1);
    assert_int_equal(w->f.conflicts, 1);
    assert_string_equal(spec_s(&w->f, "strategy"), "OldestEmulationVersion");
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(w->f.obj, "metadata"), "labels"), "app")),
        "ctrl");
}

static void test_bad_opts(void **state)
{
    struct fake_api f = {0};
    struct lease_opts o = base_opts("a", &f);
    struct lease_elector *le = NULL;
    (void)state;

    o.renew_deadline = 20 * USEC_PER_SEC; /* > default lease duration */
    assert_int_equal(lease_elector_new(&o, &le), -EINVAL);
    o.renew_deadline = 0;
    o.retry_period = 10 * USEC_PER_SEC; /* == default renew deadline */
    assert_int_equal(lease_elector_new(&o, &le), -EINVAL);
    o.retry_period = 0;
    o.identity = "";
    assert_int_equal(lease_elector_new(&o, &le), -EINVAL);
    o.identity = "a";
    o.api.update = NULL;
    assert_int_equal(lease_elector_new(&o, &le), -EINVAL);
    assert_null(le);
    o.api.update = fake_update;
    assert_int_equal(lease_elector_new(&o, &le), 0);
    lease_elector_free(le);
    lease_elector_free(NULL);
}

/* ---- the election thread, on real clocks ---- */

static void wait_for(struct calls *c, int *field, int value)
{
    pthread_mutex_lock(&c->lock);
    while (*field < value)
        pthread_cond_wait(&c->cond, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

/* A candidate for the election thread (real clocks) with these timings. */
static void thread_cand_new_timed(struct cand *c, const char *id, struct fake_api *f, usec_t lease,
                                  usec_t renew, usec_t retry)
{
    struct lease_opts o = base_opts(id, f);

    o.lease_duration = lease;
    o.renew_deadline = renew;
    o.retry_period = retry;
    o.cb = cand_callbacks(c, false);
    assert_int_equal(lease_elector_new(&o, &c->le), 0);
}

/* Timings of 2 s, 1 s and 5 ms. */
static void thread_cand_new(struct cand *c, const char *id, struct fake_api *f)
{
    thread_cand_new_timed(c, id, f, 2 * USEC_PER_SEC, USEC_PER_SEC, 5 * USEC_PER_MSEC);
}

/* Starts c's election thread and waits until it leads. */
static void thread_cand_lead(struct cand *c)
{
    assert_int_equal(lease_elector_start(c->le), 0);
    wait_for(&c->calls, &c->calls.started, 1);
}

static void test_thread_lead_and_release_on_stop(void **state)
{
    struct fake_api f = {0};
    struct cand a;
    (void)state;

    thread_cand_new(&a, "a", &f);
    assert_int_equal(lease_elector_start(a.le), 0);
    assert_int_equal(lease_elector_start(a.le), -EALREADY);
    wait_for(&a.calls, &a.calls.started, 1);
    assert_true(lease_elector_is_leader(a.le));
    lease_elector_stop(a.le);
    assert_int_equal(a.calls.stopped, 1);
    assert_false(lease_elector_is_leader(a.le));
    assert_string_equal(spec_s(&f, "holderIdentity"), "");
    assert_int_equal(spec_i(&f, "leaseDurationSeconds"), 1);
    lease_elector_stop(a.le);
    assert_int_equal(a.calls.stopped, 1);
    cand_free(&a);
    json_decref(f.obj);
}

/* The fake API is not thread-safe; here B's thread only starts after A's stopped. With a
 * lease of two minutes, B leading within 30 s means it did not wait for A's lease to
 * expire: the release made it free at once. */
static void test_thread_handover(void **state)
{
    struct fake_api f = {0};
    struct cand a, b;
    usec_t t0;
    (void)state;

    thread_cand_new_timed(&a, "a", &f, 120 * USEC_PER_SEC, 60 * USEC_PER_SEC, 5 * USEC_PER_MSEC);
    thread_cand_new_timed(&b, "b", &f, 120 * USEC_PER_SEC, 60 * USEC_PER_SEC, 5 * USEC_PER_MSEC);
    thread_cand_lead(&a);
    lease_elector_stop(a.le);
    assert_string_equal(spec_s(&f, "holderIdentity"), "");
    t0 = clock_now();
    thread_cand_lead(&b);
    assert_true(clock_now() - t0 < 30 * USEC_PER_SEC);
    lease_elector_stop(b.le);
    assert_int_equal(spec_i(&f, "leaseTransitions"), 1);
    cand_free(&a);
    cand_free(&b);
    json_decref(f.obj);
}

/* A leader whose renewals hang: each attempt is cut at its timeout (1 s here) and the next
 * one starts at once, not a retry period later; leadership ends at the renew deadline.
 *
 * Timings: renew deadline 3 s, attempts of 1 s, a retry period of 1 s. The first hung
 * attempt starts a retry period after the last renewal (R) and ends at R + 2 s; the next
 * one starts at once and is cut at the deadline (R + 3 s), where leadership ends: two
 * attempts. Had the second waited a retry period after the first, it would have started
 * at the deadline, too late for a call: one attempt. (The two hold as long as the thread
 * is not held up for a second in all.) The lease lasts a minute: leadership lost within
 * 30 s ended at the renew deadline, not with the lease. */
static void test_thread_hung_renewals_back_to_back(void **state)
{
    struct fake_api f = {0};
    struct cand a;
    struct lease_opts o = base_opts("a", &f);
    usec_t t_hang, t_lost;
    (void)state;

    o.lease_duration = 60 * USEC_PER_SEC;
    o.renew_deadline = 3 * USEC_PER_SEC;
    o.retry_period = USEC_PER_SEC;
    o.request_timeout = USEC_PER_SEC;
    o.cb = cand_callbacks(&a, false);
    assert_int_equal(lease_elector_new(&o, &a.le), 0);
    thread_cand_lead(&a);
    t_hang = clock_now();
    atomic_store(&f.sleep, true);
    wait_for(&a.calls, &a.calls.stopped, 1);
    t_lost = clock_now();
    lease_elector_stop(a.le);
    int n = atomic_load(&f.nstarts);
    print_message("lost %llu ms after the renewals started to hang; %d attempts\n",
                  (unsigned long long)((t_lost - t_hang) / USEC_PER_MSEC), n);
    assert_int_equal(n, 2);
    /* each attempt was given at most the request timeout, the last what was left of the
     * renew deadline */
    assert_true(f.max_timeout <= USEC_PER_SEC);
    assert_true(t_lost - t_hang < 30 * USEC_PER_SEC);
    assert_false(lease_elector_is_leader(a.le));
    cand_free(&a);
    json_decref(f.obj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_acquire_absent_creates, setup_a, world_teardown),
        cmocka_unit_test_setup_teardown(test_renew_keeps_acquire_time, setup_a, world_teardown),
        cmocka_unit_test_setup_teardown(test_follower_waits_while_renewed, setup_ab,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_huge_duration_not_expired, setup_a, world_teardown),
        cmocka_unit_test_setup_teardown(test_follower_times_expiry_after_its_read, setup_a,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_takeover_after_expiry_by_own_observation, setup_a,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_lose_on_conflict, setup_a, world_teardown),
        cmocka_unit_test_setup_teardown(test_renew_deadline, setup_a, world_teardown),
        cmocka_unit_test_setup_teardown(test_outage_shorter_than_deadline_keeps_lead, setup_ab,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_hung_requests_bounded_by_deadline, setup_a,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_is_leader_expires_without_tick, setup_a,
                                        world_teardown),
        cmocka_unit_test(test_request_timeout_option),
        cmocka_unit_test(test_check_timings),
        cmocka_unit_test_setup_teardown(test_release_hands_over_at_once, setup_ab, world_teardown),
        cmocka_unit_test_setup_teardown(test_create_race_lost, setup_ab, world_teardown),
        cmocka_unit_test_setup_teardown(test_preserves_unknown_fields, setup_a, world_teardown),
        cmocka_unit_test(test_bad_opts),
        cmocka_unit_test(test_thread_lead_and_release_on_stop),
        cmocka_unit_test(test_thread_handover),
        cmocka_unit_test(test_thread_hung_renewals_back_to_back),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
