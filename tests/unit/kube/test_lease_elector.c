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

static void cand_new(struct cand *c, const char *id, struct fake_api *f, struct fake_clock *clk)
{
    struct lease_clock lc = {.ctx = clk, .now = fc_now, .wall_now = fc_wall};
    struct lease_opts o = {
        .ns = "ns1",
        .name = "ctrl",
        .identity = id,
        .api = {.ctx = f, .get = fake_get, .create = fake_create, .update = fake_update},
        .clock = clk ? &lc : NULL,
    };

    calls_init(&c->calls);
    o.cb = (struct lease_callbacks){.ctx = &c->calls,
                                    .started_leading = on_started,
                                    .stopped_leading = on_stopped,
                                    .new_leader = on_new_leader};
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

/* ---- tests ---- */

static void test_acquire_absent_creates(void **state)
{
    struct fake_api f = {0};
    struct fake_clock clk = start_clock();
    struct cand a;
    (void)state;

    cand_new(&a, "a", &f, &clk);
    assert_false(lease_elector_is_leader(a.le));
    assert_int_equal(lease_elector_tick(a.le), 1);
    assert_true(lease_elector_is_leader(a.le));
    assert_int_equal(f.creates, 1);
    assert_int_equal(a.calls.started, 1);
    assert_int_equal(a.calls.new_leader, 1);
    assert_string_equal(a.calls.last_leader, "a");
    assert_leader_is(a.le, "a");
    assert_string_equal(json_string_value(json_object_get(f.obj, "kind")), "Lease");
    assert_string_equal(json_string_value(json_object_get(f.obj, "apiVersion")),
                        "coordination.k8s.io/v1");
    assert_string_equal(spec_s(&f, "holderIdentity"), "a");
    assert_int_equal(spec_i(&f, "leaseDurationSeconds"), 15);
    assert_int_equal(spec_i(&f, "leaseTransitions"), 0);
    /* MicroTime: RFC 3339 with microseconds. */
    assert_string_equal(spec_s(&f, "acquireTime"), "2026-01-01T00:00:00.000000Z");
    assert_string_equal(spec_s(&f, "renewTime"), "2026-01-01T00:00:00.000000Z");
    cand_free(&a);
    json_decref(f.obj);
}

static void test_renew_keeps_acquire_time(void **state)
{
    struct fake_api f = {0};
    struct fake_clock clk = start_clock();
    struct cand a;
    (void)state;

    cand_new(&a, "a", &f, &clk);
    assert_int_equal(lease_elector_tick(a.le), 1);
    advance(&clk, 2 * USEC_PER_SEC + 5);
    assert_int_equal(lease_elector_tick(a.le), 1);
    assert_int_equal(f.updates, 1);
    assert_string_equal(spec_s(&f, "acquireTime"), "2026-01-01T00:00:00.000000Z");
    assert_string_equal(spec_s(&f, "renewTime"), "2026-01-01T00:00:02.000005Z");
    assert_int_equal(spec_i(&f, "leaseTransitions"), 0);
    assert_int_equal(a.calls.started, 1);
    assert_int_equal(a.calls.stopped, 0);
    assert_int_equal(a.calls.new_leader, 1);
    cand_free(&a);
    json_decref(f.obj);
}

static void test_follower_waits_while_renewed(void **state)
{
    struct fake_api f = {0};
    struct fake_clock clk = start_clock();
    struct cand a, b;
    (void)state;

    cand_new(&a, "a", &f, &clk);
    cand_new(&b, "b", &f, &clk);
    assert_int_equal(lease_elector_tick(a.le), 1);
    /* A renews every 2 s for a minute: B never gets it. */
    for (int i = 0; i < 30; i++) {
        assert_int_equal(lease_elector_tick(b.le), 0);
        advance(&clk, 2 * USEC_PER_SEC);
        assert_int_equal(lease_elector_tick(a.le), 1);
    }
    assert_false(lease_elector_is_leader(b.le));
    assert_int_equal(b.calls.started, 0);
    assert_int_equal(b.calls.new_leader, 1);
    assert_string_equal(b.calls.last_leader, "a");
    assert_leader_is(b.le, "a");
    assert_int_equal(f.conflicts, 0);
    cand_free(&a);
    cand_free(&b);
    json_decref(f.obj);
}

static void test_takeover_after_expiry_by_own_observation(void **state)
{
    struct fake_api f = {0};
    struct fake_clock clk = start_clock();
    struct cand a, b;
    (void)state;

    cand_new(&a, "a", &f, &clk);
    assert_int_equal(lease_elector_tick(a.le), 1);
    /* The remote timestamps look ancient (clock skew), which must not matter: only how
     * long B itself has seen the record unchanged does. */
    advance(&clk, 5 * USEC_PER_SEC);
    json_object_set_new(json_object_get(f.obj, "spec"), "renewTime",
                        json_string("2000-01-01T00:00:00.000000Z"));
    cand_new(&b, "b", &f, &clk);
    assert_int_equal(lease_elector_tick(b.le), 0);
    advance(&clk, 14 * USEC_PER_SEC);
    assert_int_equal(lease_elector_tick(b.le), 0);
    advance(&clk, USEC_PER_SEC - 1);
    assert_int_equal(lease_elector_tick(b.le), 0);
    advance(&clk, 1);
    assert_int_equal(lease_elector_tick(b.le), 1);
    assert_int_equal(b.calls.started, 1);
    assert_string_equal(spec_s(&f, "holderIdentity"), "b");
    assert_int_equal(spec_i(&f, "leaseTransitions"), 1);
    assert_string_equal(spec_s(&f, "acquireTime"), spec_s(&f, "renewTime"));
    /* A wakes up (it was partitioned), sees B's valid record and steps down. */
    assert_int_equal(lease_elector_tick(a.le), 0);
    assert_false(lease_elector_is_leader(a.le));
    assert_int_equal(a.calls.stopped, 1);
    assert_leader_is(a.le, "b");
    assert_string_equal(spec_s(&f, "holderIdentity"), "b");
    cand_free(&a);
    cand_free(&b);
    json_decref(f.obj);
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
    struct fake_api f = {0};
    struct fake_clock clk = start_clock();
    struct cand a;
    (void)state;

    cand_new(&a, "a", &f, &clk);
    assert_int_equal(lease_elector_tick(a.le), 1);
    advance(&clk, 2 * USEC_PER_SEC);
    f.before_update = steal_lease;
    assert_int_equal(lease_elector_tick(a.le), 0);
    assert_int_equal(f.conflicts, 1);
    assert_false(lease_elector_is_leader(a.le));
    assert_int_equal(a.calls.stopped, 1);
    assert_string_equal(a.calls.last_leader, "thief");
    assert_string_equal(spec_s(&f, "holderIdentity"), "thief");
    /* Still not ours on the next periods while the thief's record is fresh. */
    advance(&clk, 2 * USEC_PER_SEC);
    assert_int_equal(lease_elector_tick(a.le), 0);
    assert_int_equal(a.calls.started, 1);
    cand_free(&a);
    json_decref(f.obj);
}

static void test_renew_deadline(void **state)
{
    struct fake_api f = {0};
    struct fake_clock clk = start_clock();
    struct cand a;
    (void)state;

    cand_new(&a, "a", &f, &clk);
    assert_int_equal(lease_elector_tick(a.le), 1);
    f.fail = -EIO;
    /* Failing renewals keep leadership until 10 s after the last success. */
    for (int i = 0; i < 4; i++) {
        advance(&clk, 2 * USEC_PER_SEC);
        assert_int_equal(lease_elector_tick(a.le), 1);
    }
    advance(&clk, 2 * USEC_PER_SEC - 1);
    assert_int_equal(lease_elector_tick(a.le), 1);
    assert_int_equal(a.calls.stopped, 0);
    advance(&clk, 1);
    assert_int_equal(lease_elector_tick(a.le), 0);
    assert_int_equal(a.calls.stopped, 1);
    assert_false(lease_elector_is_leader(a.le));
    /* When the API comes back, our own unexpired record is ours to renew. */
    f.fail = 0;
    advance(&clk, 2 * USEC_PER_SEC);
    assert_int_equal(lease_elector_tick(a.le), 1);
    assert_int_equal(a.calls.started, 2);
    assert_int_equal(spec_i(&f, "leaseTransitions"), 0);
    cand_free(&a);
    json_decref(f.obj);
}

/* An outage shorter than the renew deadline: every renewal fails for 8 s, then one
 * succeeds; the leader never stops leading and nobody else could have taken over. */
static void test_outage_shorter_than_deadline_keeps_lead(void **state)
{
    struct fake_api f = {0};
    struct fake_clock clk = start_clock();
    struct cand a, b;
    (void)state;

    cand_new(&a, "a", &f, &clk);
    cand_new(&b, "b", &f, &clk);
    assert_int_equal(lease_elector_tick(a.le), 1);
    assert_int_equal(lease_elector_tick(b.le), 0);
    f.fail = -ECONNREFUSED;
    for (int i = 0; i < 4; i++) {
        advance(&clk, 2 * USEC_PER_SEC);
        assert_int_equal(lease_elector_tick(a.le), 1);
        assert_true(lease_elector_is_leader(a.le));
    }
    advance(&clk, 2 * USEC_PER_SEC - 1); /* 10 s - 1 us after the last renew */
    assert_true(lease_elector_is_leader(a.le));
    f.fail = 0;
    assert_int_equal(lease_elector_tick(a.le), 1);
    assert_int_equal(lease_elector_tick(b.le), 0);
    assert_int_equal(a.calls.stopped, 0);
    assert_int_equal(a.calls.started, 1);
    /* The deadline counts from the new renew. */
    advance(&clk, 9 * USEC_PER_SEC);
    assert_true(lease_elector_is_leader(a.le));
    assert_string_equal(spec_s(&f, "holderIdentity"), "a");
    assert_false(lease_elector_is_leader(b.le));
    cand_free(&a);
    cand_free(&b);
    json_decref(f.obj);
}

/* Requests that hang (an API server that stopped answering) are cut at their own
 * timeout, renew_deadline / 2, and never run past the renew deadline: the leader gives
 * up exactly 10 s after its last renew, 5 s before anyone may take over. */
static void test_hung_requests_bounded_by_deadline(void **state)
{
    struct fake_api f = {0};
    struct fake_clock clk = start_clock();
    struct cand a;
    usec_t t0 = clk.mono;
    (void)state;

    cand_new(&a, "a", &f, &clk);
    assert_int_equal(lease_elector_tick(a.le), 1);
    assert_int_equal(f.last_timeout, 5 * USEC_PER_SEC);
    f.hang = &clk;
    f.gets = 0;
    advance(&clk, 2 * USEC_PER_SEC);
    assert_int_equal(lease_elector_tick(a.le), 1); /* hung 5 s: now t0 + 7 s */
    assert_int_equal(f.last_timeout, 5 * USEC_PER_SEC);
    assert_int_equal(clk.mono - t0, 7 * USEC_PER_SEC);
    assert_int_equal(f.gets, 0); /* the leader renews without reading first */
    advance(&clk, 2 * USEC_PER_SEC);
    /* 1 s left before the deadline: the request gets 1 s, then leadership is gone. */
    assert_int_equal(lease_elector_tick(a.le), 0);
    assert_int_equal(f.last_timeout, USEC_PER_SEC);
    assert_int_equal(clk.mono - t0, 10 * USEC_PER_SEC);
    assert_int_equal(a.calls.stopped, 1);
    assert_false(lease_elector_is_leader(a.le));
    assert_int_equal(f.max_timeout, 5 * USEC_PER_SEC);
    cand_free(&a);
    json_decref(f.obj);
}

/* is_leader turns false at the renew deadline even when no tick ran (a blocked
 * election thread), so gated work stops before the lease can expire for others. */
static void test_is_leader_expires_without_tick(void **state)
{
    struct fake_api f = {0};
    struct fake_clock clk = start_clock();
    struct cand a;
    (void)state;

    cand_new(&a, "a", &f, &clk);
    assert_int_equal(lease_elector_tick(a.le), 1);
    advance(&clk, 10 * USEC_PER_SEC - 1);
    assert_true(lease_elector_is_leader(a.le));
    advance(&clk, 1);
    assert_false(lease_elector_is_leader(a.le));
    /* The next tick notices it, reports the loss, and (the Lease still being ours and
     * unexpired) takes it back. */
    assert_int_equal(lease_elector_tick(a.le), 1);
    assert_int_equal(a.calls.stopped, 1);
    assert_int_equal(a.calls.started, 2);
    assert_true(lease_elector_is_leader(a.le));
    cand_free(&a);
    json_decref(f.obj);
}

static void test_request_timeout_option(void **state)
{
    struct fake_api f = {0};
    struct fake_clock clk = start_clock();
    struct lease_clock lc = {.ctx = &clk, .now = fc_now, .wall_now = fc_wall};
    struct lease_opts o = {
        .ns = "ns1",
        .name = "ctrl",
        .identity = "a",
        .lease_duration = 3 * USEC_PER_SEC,
        .renew_deadline = 1500 * USEC_PER_MSEC,
        .retry_period = 500 * USEC_PER_MSEC,
        .api = {.ctx = &f, .get = fake_get, .create = fake_create, .update = fake_update},
        .clock = &lc,
    };
    struct lease_elector *le = NULL;
    (void)state;

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
    struct fake_api f = {0};
    struct fake_clock clk = start_clock();
    struct cand a, b;
    (void)state;

    cand_new(&a, "a", &f, &clk);
    cand_new(&b, "b", &f, &clk);
    assert_int_equal(lease_elector_tick(a.le), 1);
    assert_int_equal(lease_elector_tick(b.le), 0);
    advance(&clk, USEC_PER_SEC);
    assert_int_equal(lease_elector_release(a.le), 0);
    assert_false(lease_elector_is_leader(a.le));
    assert_int_equal(a.calls.stopped, 1);
    assert_string_equal(spec_s(&f, "holderIdentity"), "");
    assert_int_equal(spec_i(&f, "leaseDurationSeconds"), 1);
    /* No clock advance: B takes over on its very next attempt. */
    assert_int_equal(lease_elector_tick(b.le), 1);
    assert_string_equal(spec_s(&f, "holderIdentity"), "b");
    assert_int_equal(spec_i(&f, "leaseDurationSeconds"), 15);
    assert_int_equal(spec_i(&f, "leaseTransitions"), 1);
    assert_string_equal(b.calls.last_leader, "b");
    /* Releasing when not leading is a no-op. */
    assert_int_equal(lease_elector_release(a.le), 0);
    assert_int_equal(a.calls.stopped, 1);
    assert_string_equal(spec_s(&f, "holderIdentity"), "b");
    cand_free(&a);
    cand_free(&b);
    json_decref(f.obj);
}

static void test_create_race_lost(void **state)
{
    struct fake_api f = {0};
    struct fake_clock clk = start_clock();
    struct cand a, b;
    (void)state;

    cand_new(&a, "a", &f, &clk);
    cand_new(&b, "b", &f, &clk);
    assert_int_equal(lease_elector_tick(a.le), 1);
    /* B saw "not found" but A created it first: B's create fails with -EEXIST. */
    f.hide_gets = 1;
    assert_int_equal(lease_elector_tick(b.le), 0);
    assert_int_equal(f.creates, 2);
    assert_false(lease_elector_is_leader(b.le));
    assert_string_equal(spec_s(&f, "holderIdentity"), "a");
    /* The next attempt sees A's record and leaves it alone. */
    assert_int_equal(lease_elector_tick(b.le), 0);
    assert_int_equal(f.creates, 2);
    assert_leader_is(b.le, "a");
    cand_free(&a);
    cand_free(&b);
    json_decref(f.obj);
}

static void test_preserves_unknown_fields(void **state)
{
    struct fake_api f = {0};
    struct fake_clock clk = start_clock();
    struct cand a;
    json_t *obj;
    (void)state;

    cand_new(&a, "a", &f, &clk);
    assert_int_equal(lease_elector_tick(a.le), 1);
    /* Someone else's write (a new resourceVersion): the optimistic renew conflicts and
     * the elector reads the Lease, keeping what it does not know. */
    obj = json_deep_copy(f.obj);
    json_object_set_new(json_object_get(obj, "metadata"), "labels",
                        json_pack("{s:s}", "app", "ctrl"));
    json_object_set_new(json_object_get(obj, "spec"), "strategy",
                        json_string("OldestEmulationVersion"));
    store(&f, obj);
    advance(&clk, 2 * USEC_PER_SEC);
    assert_int_equal(lease_elector_tick(a.le), 1);
    assert_int_equal(f.conflicts, 1);
    assert_string_equal(spec_s(&f, "strategy"), "OldestEmulationVersion");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(f.obj, "metadata"), "labels"), "app")),
                        "ctrl");
    cand_free(&a);
    json_decref(f.obj);
}

static void test_bad_opts(void **state)
{
    struct fake_api f = {0};
    struct lease_opts o = {
        .ns = "ns1",
        .name = "ctrl",
        .identity = "a",
        .api = {.ctx = &f, .get = fake_get, .create = fake_create, .update = fake_update},
    };
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

static void thread_cand_new(struct cand *c, const char *id, struct fake_api *f)
{
    struct lease_opts o = {
        .ns = "ns1",
        .name = "ctrl",
        .identity = id,
        .lease_duration = 2 * USEC_PER_SEC,
        .renew_deadline = USEC_PER_SEC,
        .retry_period = 5 * USEC_PER_MSEC,
        .api = {.ctx = f, .get = fake_get, .create = fake_create, .update = fake_update},
    };

    calls_init(&c->calls);
    o.cb = (struct lease_callbacks){
        .ctx = &c->calls, .started_leading = on_started, .stopped_leading = on_stopped};
    assert_int_equal(lease_elector_new(&o, &c->le), 0);
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

/* The fake API is not thread-safe; here B's thread only starts after A's stopped. */
static void test_thread_handover(void **state)
{
    struct fake_api f = {0};
    struct cand a, b;
    usec_t t0;
    (void)state;

    thread_cand_new(&a, "a", &f);
    thread_cand_new(&b, "b", &f);
    assert_int_equal(lease_elector_start(a.le), 0);
    wait_for(&a.calls, &a.calls.started, 1);
    lease_elector_stop(a.le);
    t0 = clock_now();
    assert_int_equal(lease_elector_start(b.le), 0);
    wait_for(&b.calls, &b.calls.started, 1);
    /* Far less than the 2 s lease duration: the release made it free at once. */
    assert_true(clock_now() - t0 < USEC_PER_SEC);
    lease_elector_stop(b.le);
    assert_int_equal(spec_i(&f, "leaseTransitions"), 1);
    cand_free(&a);
    cand_free(&b);
    json_decref(f.obj);
}

/* A leader whose renewals hang: each attempt is cut at its timeout (1 s here, renew
 * deadline / 2) and the next one starts at once, not a retry period later; leadership
 * ends at the renew deadline. */
static void test_thread_hung_renewals_back_to_back(void **state)
{
    struct fake_api f = {0};
    struct lease_opts o = {
        .ns = "ns1",
        .name = "ctrl",
        .identity = "a",
        .lease_duration = 4 * USEC_PER_SEC,
        .renew_deadline = 2 * USEC_PER_SEC,
        .retry_period = 500 * USEC_PER_MSEC,
        .api = {.ctx = &f, .get = fake_get, .create = fake_create, .update = fake_update},
    };
    struct cand a;
    usec_t t_hang, t_lost;
    (void)state;

    calls_init(&a.calls);
    o.cb = (struct lease_callbacks){
        .ctx = &a.calls, .started_leading = on_started, .stopped_leading = on_stopped};
    assert_int_equal(lease_elector_new(&o, &a.le), 0);
    assert_int_equal(lease_elector_start(a.le), 0);
    wait_for(&a.calls, &a.calls.started, 1);
    t_hang = clock_now();
    atomic_store(&f.sleep, true);
    wait_for(&a.calls, &a.calls.stopped, 1);
    t_lost = clock_now();
    lease_elector_stop(a.le);
    int n = atomic_load(&f.nstarts);
    print_message("lost %llu ms after the renewals started to hang; %d attempts\n",
                  (unsigned long long)((t_lost - t_hang) / USEC_PER_MSEC), n);
    assert_true(n >= 2);
    for (int i = 1; i < n && i < 64; i++)
        if (f.starts[i] - f.starts[i - 1] > USEC_PER_SEC + 300 * USEC_PER_MSEC)
            fail_msg("attempt %d started %llu ms after the previous one", i,
                     (unsigned long long)((f.starts[i] - f.starts[i - 1]) / USEC_PER_MSEC));
    /* Within the renew deadline (plus the period before the first hung attempt and
     * scheduling slack), well before the 4 s lease duration. */
    assert_true(t_lost - t_hang < 2 * USEC_PER_SEC + 800 * USEC_PER_MSEC);
    cand_free(&a);
    json_decref(f.obj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acquire_absent_creates),
        cmocka_unit_test(test_renew_keeps_acquire_time),
        cmocka_unit_test(test_follower_waits_while_renewed),
        cmocka_unit_test(test_takeover_after_expiry_by_own_observation),
        cmocka_unit_test(test_lose_on_conflict),
        cmocka_unit_test(test_renew_deadline),
        cmocka_unit_test(test_outage_shorter_than_deadline_keeps_lead),
        cmocka_unit_test(test_hung_requests_bounded_by_deadline),
        cmocka_unit_test(test_is_leader_expires_without_tick),
        cmocka_unit_test(test_request_timeout_option),
        cmocka_unit_test(test_check_timings),
        cmocka_unit_test(test_release_hands_over_at_once),
        cmocka_unit_test(test_create_race_lost),
        cmocka_unit_test(test_preserves_unknown_fields),
        cmocka_unit_test(test_bad_opts),
        cmocka_unit_test(test_thread_lead_and_release_on_stop),
        cmocka_unit_test(test_thread_handover),
        cmocka_unit_test(test_thread_hung_renewals_back_to_back),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
