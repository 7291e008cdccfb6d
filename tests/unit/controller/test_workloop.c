/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: the controller work loop reconciles queued keys on its workers, retries a
 * failure with back-off and a requested requeue after its delay, waits for the caches
 * before the first reconcile (giving up on shutdown or a failed wait), lets a running
 * reconcile finish on stop, never starts again after stop, and reports the
 * controller-runtime reconcile and workqueue metrics under its name. An elastic loop
 * starts with its minimum of workers, grows to its most while keys wait and shrinks back
 * once they have been idle, and stops cleanly at any size. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/metrics.h"
#include "controller/workloop.h"
#include "kube/workqueue.h"

static const char *const L_CTRL[] = {"controller", NULL};
static const char *const L_CTRL_RESULT[] = {"controller", "result", NULL};
static const char *const L_NAME[] = {"name", NULL};

struct fake {
    atomic_int calls;     /* reconcile calls */
    atomic_int fail_left; /* calls that still fail with -EIO */
    atomic_int requeue_left;
    usec_t fail_requeue; /* a failing reconcile still asks to come back this soon */
    atomic_bool synced;
    int wait_error;         /* returned by the cache wait when set */
    atomic_int waits;       /* cache wait calls */
    usec_t reconcile_sleep; /* each reconcile takes this long */
    atomic_int max_active;  /* most reconciles seen at once */
    atomic_int active;
    struct ctrl_metrics met;
};

static void sleep_us(usec_t us)
{
    struct timespec ts = {.tv_sec = (time_t)(us / USEC_PER_SEC),
                          .tv_nsec = (long)(us % USEC_PER_SEC) * 1000};
    (void)nanosleep(&ts, NULL);
}

static int fake_reconcile(void *ctx, const char *key, usec_t *ret_requeue)
{
    struct fake *f = ctx;
    int a = atomic_fetch_add(&f->active, 1) + 1, m = atomic_load(&f->max_active);
    (void)key;
    while (a > m && !atomic_compare_exchange_weak(&f->max_active, &m, a)) {
    }
    if (f->reconcile_sleep)
        sleep_us(f->reconcile_sleep);
    atomic_fetch_sub(&f->active, 1);
    atomic_fetch_add(&f->calls, 1);
    if (atomic_fetch_sub(&f->fail_left, 1) > 0) {
        *ret_requeue = f->fail_requeue;
        return -EIO;
    }
    if (atomic_fetch_sub(&f->requeue_left, 1) > 0)
        *ret_requeue = 20 * USEC_PER_MSEC;
    return 0;
}

static int fake_wait(void *ctx, usec_t timeout)
{
    struct fake *f = ctx;
    atomic_fetch_add(&f->waits, 1);
    if (f->wait_error)
        return f->wait_error;
    if (atomic_load(&f->synced))
        return 0;
    sleep_us(timeout < 5 * USEC_PER_MSEC ? timeout : 5 * USEC_PER_MSEC);
    return -ETIMEDOUT;
}

static void metrics_init(struct ctrl_metrics *x)
{
    double b[16];
    metrics_exp_buckets(0.001, 2, 16, b);
    x->reg = metrics_registry_new();
    x->reconcile_total =
        metrics_counter(x->reg, "controller_runtime_reconcile_total", "t", L_CTRL_RESULT);
    x->reconcile_errors =
        metrics_counter(x->reg, "controller_runtime_reconcile_errors_total", "e", L_CTRL);
    x->reconcile_time =
        metrics_histogram(x->reg, "controller_runtime_reconcile_time_seconds", "l", L_CTRL, b, 16);
    x->max_concurrent =
        metrics_gauge(x->reg, "controller_runtime_max_concurrent_reconciles", "w", L_CTRL);
    x->active_workers = metrics_gauge(x->reg, "controller_runtime_active_workers", "a", L_CTRL);
    x->wq_depth = metrics_gauge(x->reg, "workqueue_depth", "d", L_NAME);
    x->wq_adds = metrics_counter(x->reg, "workqueue_adds_total", "a", L_NAME);
    x->wq_latency =
        metrics_histogram(x->reg, "workqueue_queue_duration_seconds", "q", L_NAME, b, 16);
    x->wq_work = metrics_histogram(x->reg, "workqueue_work_duration_seconds", "w", L_NAME, b, 16);
    x->wq_retries = metrics_counter(x->reg, "workqueue_retries_total", "r", L_NAME);
}

static int setup(void **state)
{
    struct fake *f = test_calloc(1, sizeof(*f));
    atomic_store(&f->synced, true);
    metrics_init(&f->met);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fake *f = *state;
    metrics_registry_free(f->met.reg);
    test_free(f);
    return 0;
}

static struct workloop *new_loop(struct fake *f, int workers, bool wait)
{
    struct workloop_opts o = {.name = "test",
                              .workers = workers,
                              .reconcile = fake_reconcile,
                              .wait_synced = wait ? fake_wait : NULL,
                              .ctx = f,
                              .metrics = &f->met};
    struct workloop *l = NULL;
    assert_int_equal(workloop_new(&o, &l), 0);
    assert_non_null(l);
    return l;
}

/* Polls until the loop finished n reconciles (5 s at most). */
static void wait_reconciles(struct workloop *l, unsigned long n)
{
    for (int i = 0; i < 5000 && workloop_reconciles(l) < n; i++)
        sleep_us(USEC_PER_MSEC);
    assert_int_equal(workloop_reconciles(l), n);
}

static double value(struct metric *m, const char *const *lv)
{
    double v = -1;
    assert_int_equal(metric_get(m, lv, &v), 0);
    return v;
}

static void test_rejects_bad_options(void **state)
{
    struct fake *f = *state;
    struct workloop *l = NULL;
    struct workloop_opts o = {.name = "x", .workers = 1, .reconcile = fake_reconcile, .ctx = f};
    struct workloop_opts bad = o;
    bad.workers = 0;
    assert_int_equal(workloop_new(&bad, &l), -EINVAL);
    bad = o;
    bad.reconcile = NULL;
    assert_int_equal(workloop_new(&bad, &l), -EINVAL);
    bad = o;
    bad.name = NULL;
    assert_int_equal(workloop_new(&bad, &l), -EINVAL);
    assert_int_equal(workloop_new(NULL, &l), -EINVAL);
    assert_null(l);
    workloop_free(NULL);
    workloop_stop(NULL);
    workloop_shutdown(NULL);
}

static void test_reconciles_every_key(void **state)
{
    struct fake *f = *state;
    struct workloop *l = new_loop(f, 4, false);
    char key[32];
    f->reconcile_sleep = 2 * USEC_PER_MSEC;
    for (int i = 0; i < 40; i++) {
        (void)snprintf(key, sizeof(key), "ns/sb-%d", i);
        wq_add(workloop_queue(l), key);
    }
    assert_int_equal(workloop_reconciles(l), 0); /* no workers yet */
    assert_int_equal(workloop_start(l), 4);
    assert_int_equal(workloop_start(l), 4); /* idempotent */
    wait_reconciles(l, 40);
    assert_true(atomic_load(&f->max_active) > 1); /* workers run in parallel */
    assert_true(atomic_load(&f->max_active) <= 4);
    assert_true(value(f->met.reconcile_total, (const char *const[]){"test", "success"}) == 40);
    assert_true(value(f->met.reconcile_time, (const char *const[]){"test"}) == 40);
    assert_true(value(f->met.max_concurrent, (const char *const[]){"test"}) == 4);
    assert_true(value(f->met.wq_adds, (const char *const[]){"test"}) == 40);
    workloop_free(l);
    assert_true(value(f->met.active_workers, (const char *const[]){"test"}) == 0);
}

static void test_failure_retried_and_requeue_after(void **state)
{
    struct fake *f = *state;
    struct workloop *l = new_loop(f, 1, false);
    atomic_store(&f->fail_left, 2);
    atomic_store(&f->requeue_left, 1);
    wq_add(workloop_queue(l), "ns/a");
    (void)workloop_start(l);
    /* fail, fail (back-off), requeue after 20 ms, success */
    wait_reconciles(l, 4);
    assert_true(value(f->met.reconcile_errors, (const char *const[]){"test"}) == 2);
    assert_true(value(f->met.reconcile_total, (const char *const[]){"test", "error"}) == 2);
    assert_true(value(f->met.reconcile_total, (const char *const[]){"test", "requeue_after"}) == 1);
    assert_true(value(f->met.reconcile_total, (const char *const[]){"test", "success"}) == 1);
    assert_true(value(f->met.wq_retries, (const char *const[]){"test"}) == 2);
    sleep_us(50 * USEC_PER_MSEC);
    assert_int_equal(workloop_reconciles(l), 4); /* done: no further requeue */
    workloop_free(l);
}

/* A failing reconcile that still asks to come back soon (a Sandbox whose shutdownTime
 * comes while its Pod creates are refused) comes back then, not after its grown back-off
 * (5 ms doubling: ten failures in a row and it waits 5 s; before, 12 failures took about
 * 20 s). */
static void test_failure_keeps_its_requeue(void **state)
{
    struct fake *f = *state;
    struct workloop_opts o = {.name = "timers",
                              .workers = 1,
                              .reconcile = fake_reconcile,
                              .ctx = f,
                              .metrics = &f->met,
                              .requeue_on_error = true};
    struct workloop *l = NULL;
    assert_int_equal(workloop_new(&o, &l), 0);
    atomic_store(&f->fail_left, 1000);
    f->fail_requeue = 20 * USEC_PER_MSEC;
    wq_add(workloop_queue(l), "ns/a");
    (void)workloop_start(l);
    sleep_us(USEC_PER_SEC);
    workloop_stop(l);
    int with = atomic_load(&f->calls);
    workloop_free(l);
    /* Without the option (the claim and pool loops), the back-off alone. */
    o.requeue_on_error = false;
    assert_int_equal(workloop_new(&o, &l), 0);
    atomic_store(&f->calls, 0);
    atomic_store(&f->fail_left, 1000);
    wq_add(workloop_queue(l), "ns/a");
    (void)workloop_start(l);
    sleep_us(USEC_PER_SEC);
    workloop_stop(l);
    int without = atomic_load(&f->calls);
    workloop_free(l);
    print_message("failing reconciles in 1 s with a 20 ms requeue: %d kept, %d not\n", with,
                  without);
    assert_true(with >= 15);    /* about 50 */
    assert_true(without <= 12); /* 5 ms doubling: about 8 */
}

static void test_waits_for_caches(void **state)
{
    struct fake *f = *state;
    struct workloop *l = new_loop(f, 2, true);
    atomic_store(&f->synced, false);
    wq_add(workloop_queue(l), "ns/a");
    (void)workloop_start(l);
    sleep_us(100 * USEC_PER_MSEC);
    assert_int_equal(workloop_reconciles(l), 0); /* the caches have not synced */
    assert_true(atomic_load(&f->waits) > 2);
    atomic_store(&f->synced, true);
    wait_reconciles(l, 1);
    workloop_free(l);
}

static void test_stop_while_waiting_for_caches(void **state)
{
    struct fake *f = *state;
    struct workloop *l = new_loop(f, 3, true);
    int waits;
    atomic_store(&f->synced, false);
    wq_add(workloop_queue(l), "ns/a");
    (void)workloop_start(l);
    /* the workers are waiting (every wait ends after 5 ms, unsynced, and is repeated) */
    for (int i = 0; i < 30000 && atomic_load(&f->waits) < 6; i++)
        sleep_us(USEC_PER_MSEC);
    assert_true(atomic_load(&f->waits) >= 6);
    /* The waiting workers give up: the stop returns (the caches never sync, so workers
     * that kept waiting would hang it) and none of them waits or reconciles again, even
     * once the caches are synced. */
    workloop_stop(l);
    waits = atomic_load(&f->waits);
    atomic_store(&f->synced, true);
    sleep_us(50 * USEC_PER_MSEC);
    assert_int_equal(atomic_load(&f->waits), waits);
    assert_int_equal(workloop_reconciles(l), 0);
    workloop_free(l);
}

static void test_failed_wait_exits_workers(void **state)
{
    struct fake *f = *state;
    struct workloop *l = new_loop(f, 2, true);
    f->wait_error = -ECANCELED;
    wq_add(workloop_queue(l), "ns/a");
    (void)workloop_start(l);
    sleep_us(50 * USEC_PER_MSEC);
    assert_int_equal(atomic_load(&f->waits), 2); /* once per worker, no retry */
    assert_int_equal(workloop_reconciles(l), 0);
    workloop_free(l);
}

static void test_stop_finishes_running_and_never_restarts(void **state)
{
    struct fake *f = *state;
    struct workloop *l = new_loop(f, 1, false);
    f->reconcile_sleep = 100 * USEC_PER_MSEC;
    wq_add(workloop_queue(l), "ns/a");
    (void)workloop_start(l);
    while (atomic_load(&f->active) == 0)
        sleep_us(USEC_PER_MSEC);
    workloop_stop(l);
    assert_int_equal(workloop_reconciles(l), 1); /* the running reconcile finished */
    assert_int_equal(workloop_start(l), 0);
    wq_add(workloop_queue(l), "ns/b"); /* ignored after shutdown */
    sleep_us(20 * USEC_PER_MSEC);
    assert_int_equal(workloop_reconciles(l), 1);
    workloop_free(l);
}

/* Keys still queued when the loop stops are not reconciled: a controller that lost its
 * Lease (or is stopping) starts no more work than what runs. Before, every queued key
 * was still handed out after the shutdown (here: 20 reconciles, not 1). */
static void test_stop_drops_queued_keys(void **state)
{
    struct fake *f = *state;
    struct workloop *l = new_loop(f, 1, false);
    char key[16];
    f->reconcile_sleep = 100 * USEC_PER_MSEC;
    for (int i = 0; i < 20; i++) {
        (void)snprintf(key, sizeof(key), "ns/k%d", i);
        wq_add(workloop_queue(l), key);
    }
    (void)workloop_start(l);
    while (atomic_load(&f->active) == 0)
        sleep_us(USEC_PER_MSEC);
    workloop_shutdown(l);
    workloop_stop(l);
    assert_int_equal(workloop_reconciles(l), 1);
    assert_int_equal(atomic_load(&f->calls), 1);
    workloop_free(l);
}

static void test_without_metrics(void **state)
{
    struct fake *f = *state;
    struct workloop_opts o = {.name = "bare", .workers = 2, .reconcile = fake_reconcile, .ctx = f};
    struct workloop *l = NULL;
    double v;
    atomic_store(&f->fail_left, 1);
    assert_int_equal(workloop_new(&o, &l), 0);
    wq_add(workloop_queue(l), "ns/a");
    (void)workloop_start(l);
    wait_reconciles(l, 2);
    assert_int_equal(
        metric_get(f->met.reconcile_total, (const char *const[]){"bare", "success"}, &v), -ENOENT);
    workloop_free(l);
}

static struct workloop *new_elastic(struct fake *f, int workers, int min, usec_t idle)
{
    struct workloop_opts o = {.name = "elastic",
                              .workers = workers,
                              .min_workers = min,
                              .idle_exit = idle,
                              .reconcile = fake_reconcile,
                              .ctx = f,
                              .metrics = &f->met};
    struct workloop *l = NULL;
    assert_int_equal(workloop_new(&o, &l), 0);
    return l;
}

/* Polls until the loop has n worker threads (5 s at most). */
static void wait_threads(struct workloop *l, int n)
{
    for (int i = 0; i < 5000 && workloop_threads(l) != n; i++)
        sleep_us(USEC_PER_MSEC);
    assert_int_equal(workloop_threads(l), n);
}

static void test_elastic_grows_and_shrinks(void **state)
{
    struct fake *f = *state;
    struct workloop *l = new_elastic(f, 8, 2, 100 * USEC_PER_MSEC);
    char key[32];
    f->reconcile_sleep = 10 * USEC_PER_MSEC;
    assert_int_equal(workloop_start(l), 2);
    sleep_us(20 * USEC_PER_MSEC);
    assert_int_equal(workloop_threads(l), 2); /* nothing queued: no growth */
    for (int i = 0; i < 64; i++) {
        (void)snprintf(key, sizeof(key), "ns/sb-%d", i);
        wq_add(workloop_queue(l), key);
    }
    wait_reconciles(l, 64);
    assert_int_equal(atomic_load(&f->max_active), 8); /* grew to the most, no further */
    assert_true(value(f->met.max_concurrent, (const char *const[]){"elastic"}) == 8);
    wait_threads(l, 2); /* the extra workers ended after 100 ms without a key */
    /* and grow again for the next burst */
    atomic_store(&f->max_active, 0);
    for (int i = 0; i < 32; i++) {
        (void)snprintf(key, sizeof(key), "ns/again-%d", i);
        wq_add(workloop_queue(l), key);
    }
    wait_reconciles(l, 96);
    assert_true(atomic_load(&f->max_active) > 2);
    workloop_free(l);
}

static void test_elastic_stop_at_any_size(void **state)
{
    struct fake *f = *state;
    struct workloop *l = new_elastic(f, 6, 1, 50 * USEC_PER_MSEC);
    char key[32];
    f->reconcile_sleep = 20 * USEC_PER_MSEC;
    (void)workloop_start(l);
    for (int i = 0; i < 30; i++) {
        (void)snprintf(key, sizeof(key), "ns/sb-%d", i);
        wq_add(workloop_queue(l), key);
    }
    while (atomic_load(&f->active) < 3)
        sleep_us(USEC_PER_MSEC);
    workloop_stop(l); /* busy, idle and ending workers all stop; none is left behind */
    assert_int_equal(workloop_threads(l), 0);
    assert_int_equal(atomic_load(&f->active), 0);
    assert_int_equal(workloop_start(l), 0);
    workloop_free(l);
    /* a minimum above the most is the most; a negative one is refused */
    l = new_elastic(f, 2, 5, 0);
    assert_int_equal(workloop_start(l), 2);
    workloop_free(l);
    struct workloop_opts bad = {
        .name = "x", .workers = 2, .min_workers = -1, .reconcile = fake_reconcile, .ctx = f};
    assert_int_equal(workloop_new(&bad, &l), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rejects_bad_options, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconciles_every_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failure_retried_and_requeue_after, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failure_keeps_its_requeue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_waits_for_caches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_while_waiting_for_caches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_wait_exits_workers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_drops_queued_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_finishes_running_and_never_restarts, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_without_metrics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_elastic_grows_and_shrinks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_elastic_stop_at_any_size, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
