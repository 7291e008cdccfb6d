/* SPDX-License-Identifier: Apache-2.0 */
/* Work queue semantics: dedup, exclusive processing, re-add during processing, delayed
 * adds, back-off and token bucket, shutdown and drain, metrics. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/limits.h"
#include "kube/workqueue.h"

static struct wq *new_queue(usec_t base, usec_t max, double qps, unsigned burst)
{
    struct wq_opts o = {
        .name = "test", .backoff_base = base, .backoff_max = max, .qps = qps, .burst = burst};
    struct wq *q = NULL;

    assert_int_equal(wq_new(&o, &q), 0);
    assert_non_null(q);
    return q;
}

static const char *get_key(struct wq *q)
{
    const char *k = NULL;

    assert_int_equal(wq_get(q, &k), 0);
    assert_non_null(k);
    return k;
}

/* wq_get_for: gives up after its idle time on an empty queue, hands out a key that is
 * there or becomes due in time, and still reports shutdown. */
static void test_get_for(void **state)
{
    (void)state;
    struct wq *q = new_queue(0, 0, 0, 0);
    const char *k = NULL;
    usec_t t0 = clock_now();
    assert_int_equal(wq_get_for(q, &k, 30 * USEC_PER_MSEC), -ETIMEDOUT);
    assert_true(clock_now() - t0 >= 30 * USEC_PER_MSEC);
    assert_null(k);
    wq_add_after(q, "ns/later", 10 * USEC_PER_MSEC);
    assert_int_equal(wq_get_for(q, &k, USEC_PER_SEC), 0);
    assert_string_equal(k, "ns/later");
    wq_done(q, k);
    wq_add(q, "ns/now");
    assert_int_equal(wq_get_for(q, &k, 0), 0); /* queued: no wait needed */
    wq_done(q, "ns/now");
    wq_shutdown(q);
    assert_int_equal(wq_get_for(q, &k, USEC_PER_SEC), -ESHUTDOWN);
    wq_free(q);
}

static void test_dedup(void **state)
{
    struct wq *q = new_queue(0, 0, 0, 0);
    const char *k;
    (void)state;

    wq_add(q, "a");
    wq_add(q, "a");
    wq_add(q, "b");
    wq_add(q, "a");
    assert_int_equal(wq_len(q), 2);
    k = get_key(q);
    assert_string_equal(k, "a");
    wq_done(q, k);
    k = get_key(q);
    assert_string_equal(k, "b");
    wq_done(q, k);
    assert_int_equal(wq_len(q), 0);
    wq_free(q);
}

static void test_readd_during_processing(void **state)
{
    struct wq *q = new_queue(0, 0, 0, 0);
    const char *k;
    struct wq_stats st;
    (void)state;

    wq_add(q, "a");
    k = get_key(q);
    wq_add(q, "a");
    wq_add(q, "a");
    /* Not handed out again while being processed. */
    assert_int_equal(wq_len(q), 0);
    wq_stats(q, &st);
    assert_int_equal(st.processing, 1);
    wq_done(q, k);
    assert_int_equal(wq_len(q), 1);
    k = get_key(q);
    assert_string_equal(k, "a");
    wq_done(q, k);
    assert_int_equal(wq_len(q), 0);
    wq_stats(q, &st);
    assert_int_equal(st.gets, 2);
    assert_int_equal(st.processing, 0);
    wq_free(q);
}

static void test_fifo_order(void **state)
{
    struct wq *q = new_queue(0, 0, 0, 0);
    char key[16];
    (void)state;

    for (int i = 0; i < 50; i++) {
        (void)snprintf(key, sizeof(key), "k%d", i);
        wq_add(q, key);
    }
    for (int i = 0; i < 50; i++) {
        const char *k = get_key(q);
        (void)snprintf(key, sizeof(key), "k%d", i);
        assert_string_equal(k, key);
        wq_done(q, k);
    }
    wq_free(q);
}

/* ---- many workers hammering few keys ---- */

#define HAMMER_KEYS      16
#define HAMMER_WORKERS   6
#define HAMMER_PRODUCERS 3
#define HAMMER_ADDS      3000

struct hammer {
    struct wq *q;
    atomic_int in_flight[HAMMER_KEYS];
    atomic_int pending[HAMMER_KEYS];
    atomic_int overlaps;
    atomic_long processed;
};

static int key_index(const char *k)
{
    return (k[1] - 'a') * 4 + (k[2] - 'a');
}

static void *hammer_worker(void *arg)
{
    struct hammer *h = arg;
    const char *k;

    while (wq_get(h->q, &k) == 0) {
        int i = key_index(k);
        int expected = 0;

        atomic_store(&h->pending[i], 0);
        if (!atomic_compare_exchange_strong(&h->in_flight[i], &expected, 1))
            atomic_fetch_add(&h->overlaps, 1);
        for (int y = 0; y < 3; y++)
            sched_yield();
        atomic_store(&h->in_flight[i], 0);
        atomic_fetch_add(&h->processed, 1);
        wq_done(h->q, k);
    }
    return NULL;
}

static void *hammer_producer(void *arg)
{
    struct hammer *h = arg;
    unsigned seed = (unsigned)(uintptr_t)pthread_self();
    char key[4] = {'k', 0, 0, 0};

    for (int n = 0; n < HAMMER_ADDS; n++) {
        int i = (int)(rand_r(&seed) % HAMMER_KEYS);
        key[1] = (char)('a' + i / 4);
        key[2] = (char)('a' + i % 4);
        atomic_store(&h->pending[i], 1);
        wq_add(h->q, key);
        if (n % 64 == 0)
            sched_yield();
    }
    return NULL;
}

static void test_no_concurrent_processing(void **state)
{
    struct hammer h = {0};
    pthread_t workers[HAMMER_WORKERS], producers[HAMMER_PRODUCERS];
    (void)state;

    h.q = new_queue(0, 0, 0, 0);
    for (int i = 0; i < HAMMER_WORKERS; i++)
        assert_int_equal(pthread_create(&workers[i], NULL, hammer_worker, &h), 0);
    for (int i = 0; i < HAMMER_PRODUCERS; i++)
        assert_int_equal(pthread_create(&producers[i], NULL, hammer_producer, &h), 0);
    for (int i = 0; i < HAMMER_PRODUCERS; i++)
        assert_int_equal(pthread_join(producers[i], NULL), 0);
    /* Keys queued before shutdown are still handed out, so every add is honoured. */
    wq_shutdown(h.q);
    for (int i = 0; i < HAMMER_WORKERS; i++)
        assert_int_equal(pthread_join(workers[i], NULL), 0);
    assert_int_equal(atomic_load(&h.overlaps), 0);
    for (int i = 0; i < HAMMER_KEYS; i++)
        assert_int_equal(atomic_load(&h.pending[i]), 0);
    assert_true(atomic_load(&h.processed) >= HAMMER_KEYS);
    assert_true(atomic_load(&h.processed) <= HAMMER_PRODUCERS * HAMMER_ADDS);
    wq_free(h.q);
}

/* ---- delayed adds ---- */

/* Keys come out in the order they fall due, not the order they were added. The due times
 * are taken from the clock at each add, so a slow run (valgrind on a loaded machine) that
 * lets one add lag changes the expected order of a, b and c rather than failing the test;
 * "z", added first and due in an hour, is still waiting once they are out on any run. */
static void test_add_after_ordering(void **state)
{
    static const struct {
        const char *key;
        usec_t delay;
    } adds[] = {{"z", 3600 * USEC_PER_SEC},
                {"c", 300 * USEC_PER_MSEC},
                {"a", 100 * USEC_PER_MSEC},
                {"b", 200 * USEC_PER_MSEC}};
    struct wq *q = new_queue(0, 0, 0, 0);
    struct wq_stats st;
    usec_t due[4];
    size_t order[4] = {0, 1, 2, 3};
    (void)state;

    for (size_t i = 0; i < 4; i++) {
        due[i] = clock_now() + adds[i].delay;
        wq_add_after(q, adds[i].key, adds[i].delay);
    }
    assert_int_equal(wq_len(q), 0);
    for (size_t i = 1; i < 4; i++) /* insertion sort of the indices by due time */
        for (size_t j = i; j > 0 && due[order[j]] < due[order[j - 1]]; j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    assert_string_equal(adds[order[3]].key, "z");
    for (size_t i = 0; i < 3; i++) {
        const char *k = get_key(q);
        assert_string_equal(k, adds[order[i]].key);
        assert_true(clock_now() >= due[order[i]]);
        wq_done(q, k);
    }
    /* the first one added is the last to fall due: not handed out yet */
    assert_int_equal(wq_len(q), 0);
    wq_stats(q, &st);
    assert_int_equal(st.waiting, 1);
    assert_int_equal(st.gets, 3);
    wq_free(q);
}

static void test_add_after_earlier_wins(void **state)
{
    struct wq *q = new_queue(0, 0, 0, 0);
    struct wq_stats st;
    const char *k;
    (void)state;

    wq_add_after(q, "x", 3600 * USEC_PER_SEC);
    wq_add_after(q, "x", USEC_PER_MSEC);
    /* A later time does not postpone the earlier one. */
    wq_add_after(q, "x", 7200 * USEC_PER_SEC);
    wq_stats(q, &st);
    assert_true(st.waiting <= 1);
    k = get_key(q);
    assert_string_equal(k, "x");
    wq_done(q, k);
    wq_stats(q, &st);
    assert_int_equal(st.waiting, 0);
    assert_int_equal(st.gets, 1);
    wq_free(q);
}

static void test_add_after_zero_is_add(void **state)
{
    struct wq *q = new_queue(0, 0, 0, 0);
    (void)state;

    wq_add_after(q, "now", 0);
    assert_int_equal(wq_len(q), 1);
    wq_free(q);
}

/* A getter already waiting for a far timer must notice an earlier one. */
struct getter {
    struct wq *q;
    char key[16];
    int r;
};

static void *getter_thread(void *arg)
{
    struct getter *g = arg;
    const char *k = NULL;

    g->r = wq_get(g->q, &k);
    if (g->r == 0) {
        (void)snprintf(g->key, sizeof(g->key), "%s", k);
        wq_done(g->q, k);
    }
    return NULL;
}

static void test_add_after_wakes_waiter(void **state)
{
    struct wq *q = new_queue(0, 0, 0, 0);
    struct getter g = {.q = q, .r = 1};
    pthread_t t;
    (void)state;

    wq_add_after(q, "far", 3600 * USEC_PER_SEC);
    assert_int_equal(pthread_create(&t, NULL, getter_thread, &g), 0);
    wq_add_after(q, "near", 5 * USEC_PER_MSEC);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(g.r, 0);
    assert_string_equal(g.key, "near");
    wq_free(q);
}

/* ---- idle getters: who wakes ---- */

#define IDLE_GETTERS 8

/* Getters that take keys until shutdown; a key named "hold" is kept until release. */
struct pool {
    struct wq *q;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned done, inside; /* keys processed; getters holding a key right now */
    bool release;          /* keys held may be done */
    bool hold_all;         /* every key is held until release */
};

static void *pool_thread(void *arg)
{
    struct pool *p = arg;
    const char *k;
    while (wq_get(p->q, &k) == 0) {
        bool hold = p->hold_all || strcmp(k, "hold") == 0;
        (void)pthread_mutex_lock(&p->lock);
        p->inside++;
        (void)pthread_cond_broadcast(&p->cond);
        while (hold && !p->release)
            (void)pthread_cond_wait(&p->cond, &p->lock);
        p->inside--;
        p->done++;
        (void)pthread_cond_broadcast(&p->cond);
        (void)pthread_mutex_unlock(&p->lock);
        wq_done(p->q, k);
    }
    return NULL;
}

/* Waits (at most 5 s) until *field reaches want; returns whether it did. */
static bool pool_wait(struct pool *p, const unsigned *field, unsigned want)
{
    struct timespec ts;
    bool ok;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 5;
    (void)pthread_mutex_lock(&p->lock);
    while (*field < want)
        if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) != 0)
            break;
    ok = *field >= want;
    (void)pthread_mutex_unlock(&p->lock);
    return ok;
}

static void pool_start(struct pool *p, pthread_t *t, unsigned n)
{
    (void)pthread_mutex_init(&p->lock, NULL);
    (void)pthread_cond_init(&p->cond, NULL);
    for (unsigned i = 0; i < n; i++)
        assert_int_equal(pthread_create(&t[i], NULL, pool_thread, p), 0);
    sched_yield();
    clock_sleep(20 * USEC_PER_MSEC); /* let them all go idle */
}

static void pool_stop(struct pool *p, pthread_t *t, unsigned n)
{
    (void)pthread_mutex_lock(&p->lock);
    p->release = true;
    (void)pthread_cond_broadcast(&p->cond);
    (void)pthread_mutex_unlock(&p->lock);
    wq_shutdown(p->q);
    for (unsigned i = 0; i < n; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    (void)pthread_cond_destroy(&p->cond);
    (void)pthread_mutex_destroy(&p->lock);
}

static unsigned long wakeups(struct wq *q)
{
    struct wq_stats st;
    wq_stats(q, &st);
    return st.wakeups;
}

/* A parked key's deadline wakes the one getter waiting for it, not every idle getter
 * (each deadline woke all of them before: a thundering herd at every timer). */
static void test_deadline_wakes_one_getter(void **state)
{
    enum { KEYS = 20 };
    struct pool p = {.q = new_queue(0, 0, 0, 0)};
    pthread_t t[IDLE_GETTERS];
    unsigned long before;
    char key[16];
    (void)state;
    pool_start(&p, t, IDLE_GETTERS);
    before = wakeups(p.q);
    for (unsigned i = 0; i < KEYS; i++) {
        (void)snprintf(key, sizeof(key), "k%u", i);
        wq_add_after(p.q, key, 2 * USEC_PER_MSEC);
        assert_true(pool_wait(&p, &p.done, i + 1));
    }
    unsigned long n = wakeups(p.q) - before;
    print_message("%lu wakeups of %d idle getters for %d deadlines\n", n, IDLE_GETTERS, KEYS);
    /* Per key: the new deadline, the deadline itself and a getter for the due key (3
     * measured); waking every idle getter at each of the first two would be 16. */
    assert_true(n <= 5 * KEYS);
    pool_stop(&p, t, IDLE_GETTERS);
    wq_free(p.q);
}

/* Keys queued at once reach as many idle getters: none is left asleep while a key waits. */
static void test_keys_reach_every_idle_getter(void **state)
{
    struct pool p = {.q = new_queue(0, 0, 0, 0), .hold_all = true};
    pthread_t t[IDLE_GETTERS];
    char key[16];
    (void)state;
    wq_add_after(p.q, "parked", 3600 * USEC_PER_SEC); /* one of them waits for it */
    pool_start(&p, t, IDLE_GETTERS);
    for (unsigned i = 0; i < IDLE_GETTERS; i++) {
        (void)snprintf(key, sizeof(key), "k%u", i);
        wq_add(p.q, key);
    }
    assert_true(pool_wait(&p, &p.inside, IDLE_GETTERS));
    pool_stop(&p, t, IDLE_GETTERS);
    wq_free(p.q);
}

/* The getter waiting for the deadlines takes a due key and keeps it: another idle getter
 * waits for the next deadline, which is met while the first key is held. */
static void test_deadline_met_while_key_held(void **state)
{
    struct pool p = {.q = new_queue(0, 0, 0, 0)};
    pthread_t t[2];
    (void)state;
    pool_start(&p, t, 2);
    wq_add_after(p.q, "hold", 5 * USEC_PER_MSEC);
    wq_add_after(p.q, "next", 30 * USEC_PER_MSEC);
    assert_true(pool_wait(&p, &p.inside, 1));
    assert_true(pool_wait(&p, &p.done, 1)); /* "next", while "hold" is held */
    pool_stop(&p, t, 2);
    assert_int_equal(p.done, 2);
    wq_free(p.q);
}

struct idle_getter {
    struct wq *q;
    usec_t idle;
    int r;
    atomic_bool finished;
    char key[16];
};

static void *idle_getter_thread(void *arg)
{
    struct idle_getter *g = arg;
    const char *k;
    g->r = wq_get_for(g->q, &k, g->idle);
    if (g->r == 0) {
        (void)snprintf(g->key, sizeof(g->key), "%s", k);
        wq_done(g->q, k);
    }
    atomic_store(&g->finished, true);
    return NULL;
}

/* The timer waiter gives up (its idle time ends, as an elastic worker's does) before the
 * deadline: it hands the waiting to an idle getter, which then takes the key when due.
 * Without the hand-over that getter sleeps on until shutdown. */
static void test_timer_role_handed_over(void **state)
{
    struct idle_getter a = {.idle = 30 * USEC_PER_MSEC, .r = 1},
                       b = {.idle = USEC_INFINITY, .r = 1};
    pthread_t ta, tb;
    (void)state;
    a.q = b.q = new_queue(0, 0, 0, 0);
    wq_add_after(a.q, "k", 150 * USEC_PER_MSEC);
    assert_int_equal(pthread_create(&ta, NULL, idle_getter_thread, &a), 0);
    clock_sleep(10 * USEC_PER_MSEC); /* a waits for the deadline; b for keys */
    assert_int_equal(pthread_create(&tb, NULL, idle_getter_thread, &b), 0);
    assert_int_equal(pthread_join(ta, NULL), 0);
    assert_int_equal(a.r, -ETIMEDOUT);
    for (int i = 0; i < 500 && !atomic_load(&b.finished); i++)
        clock_sleep(10 * USEC_PER_MSEC);
    wq_shutdown(b.q);
    assert_int_equal(pthread_join(tb, NULL), 0);
    assert_int_equal(b.r, 0);
    assert_string_equal(b.key, "k");
    wq_free(a.q);
}

/* ---- rate limiting ---- */

static void test_backoff_growth_and_forget(void **state)
{
    struct wq *q = new_queue(USEC_PER_MSEC, 8 * USEC_PER_MSEC, -1, 0);
    (void)state;

    assert_int_equal(wq_num_requeues(q, "k"), 0);
    assert_int_equal(wq_when(q, "k"), 1 * USEC_PER_MSEC);
    assert_int_equal(wq_when(q, "k"), 2 * USEC_PER_MSEC);
    assert_int_equal(wq_when(q, "k"), 4 * USEC_PER_MSEC);
    assert_int_equal(wq_when(q, "k"), 8 * USEC_PER_MSEC);
    assert_int_equal(wq_when(q, "k"), 8 * USEC_PER_MSEC);
    assert_int_equal(wq_num_requeues(q, "k"), 5);
    /* Keys are independent. */
    assert_int_equal(wq_when(q, "other"), 1 * USEC_PER_MSEC);
    wq_forget(q, "k");
    assert_int_equal(wq_num_requeues(q, "k"), 0);
    assert_int_equal(wq_when(q, "k"), 1 * USEC_PER_MSEC);
    wq_forget(q, "k");
    wq_forget(q, "other");
    wq_forget(q, "never-seen");
    wq_free(q);
}

static void test_backoff_cap_no_overflow(void **state)
{
    struct wq *q = new_queue(0, 0, -1, 0);
    usec_t d = 0;
    (void)state;

    for (int i = 0; i < 100; i++)
        d = wq_when(q, "k");
    assert_int_equal(d, LIMIT_WQ_BACKOFF_MAX);
    wq_free(q);
}

static void test_bucket(void **state)
{
    struct wq_bucket b;
    usec_t t0 = 1000 * USEC_PER_SEC;
    (void)state;

    wq_bucket_init(&b, 10.0, 2, t0);
    assert_int_equal(wq_bucket_reserve(&b, t0), 0);
    assert_int_equal(wq_bucket_reserve(&b, t0), 0);
    assert_int_equal(wq_bucket_reserve(&b, t0), 100 * USEC_PER_MSEC);
    assert_int_equal(wq_bucket_reserve(&b, t0), 200 * USEC_PER_MSEC);
    /* 0.5 s later five tokens arrived: the debt of two is paid, but the bucket holds at
     * most two, so the next two are free and the third waits again. */
    assert_int_equal(wq_bucket_reserve(&b, t0 + 500 * USEC_PER_MSEC), 0);
    assert_int_equal(wq_bucket_reserve(&b, t0 + 500 * USEC_PER_MSEC), 0);
    assert_int_equal(wq_bucket_reserve(&b, t0 + 500 * USEC_PER_MSEC), 100 * USEC_PER_MSEC);
}

static void test_max_of_backoff_and_bucket(void **state)
{
    /* Burst 1 at 1 qps: the second add is held by the bucket, not the 1 us back-off. */
    struct wq *q = new_queue(1, USEC_PER_SEC, 1.0, 1);
    usec_t d1, d2;
    (void)state;

    d1 = wq_when(q, "a");
    d2 = wq_when(q, "b");
    assert_int_equal(d1, 1);
    assert_true(d2 > USEC_PER_SEC / 2);
    assert_true(d2 <= USEC_PER_SEC);
    wq_free(q);
}

static void test_add_rate_limited(void **state)
{
    struct wq *q = new_queue(USEC_PER_MSEC, 4 * USEC_PER_MSEC, -1, 0);
    struct wq_stats st;
    const char *k;
    (void)state;

    for (int i = 0; i < 4; i++) {
        wq_add_rate_limited(q, "r");
        k = get_key(q);
        assert_string_equal(k, "r");
        wq_done(q, k);
    }
    assert_int_equal(wq_num_requeues(q, "r"), 4);
    wq_stats(q, &st);
    assert_int_equal(st.retries, 4);
    assert_int_equal(st.gets, 4);
    wq_forget(q, "r");
    assert_int_equal(wq_num_requeues(q, "r"), 0);
    wq_free(q);
}

/* ---- shutdown ---- */

static void test_shutdown_wakes_getters(void **state)
{
    struct wq *q = new_queue(0, 0, 0, 0);
    struct getter g[4];
    pthread_t t[4];
    (void)state;

    for (int i = 0; i < 4; i++) {
        g[i] = (struct getter){.q = q, .r = 1};
        assert_int_equal(pthread_create(&t[i], NULL, getter_thread, &g[i]), 0);
    }
    wq_shutdown(q);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(g[i].r, -ESHUTDOWN);
    }
    assert_true(wq_shutting_down(q));
    wq_free(q);
}

static void test_shutdown_hands_out_queued_then_stops(void **state)
{
    struct wq *q = new_queue(0, 0, 0, 0);
    const char *k;
    (void)state;

    wq_add(q, "queued");
    wq_add_after(q, "parked", 3600 * USEC_PER_SEC);
    wq_shutdown(q);
    wq_add(q, "late");
    wq_add_rate_limited(q, "late2");
    k = get_key(q);
    assert_string_equal(k, "queued");
    wq_done(q, k);
    assert_int_equal(wq_get(q, &k), -ESHUTDOWN);
    wq_shutdown(q);
    wq_free(q);
}

/* wq_shutdown_discard: the queued keys are dropped, and a key re-added while it was
 * being processed does not come back at its wq_done; nothing is handed out after it. */
static void test_shutdown_discard_drops_queued(void **state)
{
    struct wq *q = new_queue(0, 0, 0, 0);
    const char *k;
    (void)state;

    wq_add(q, "running");
    wq_add(q, "a");
    wq_add(q, "b");
    wq_add_after(q, "parked", 3600 * USEC_PER_SEC);
    k = get_key(q);
    assert_string_equal(k, "running");
    wq_add(q, "running"); /* re-added while processing */
    wq_shutdown_discard(q);
    assert_int_equal(wq_len(q), 0);
    wq_add(q, "late");
    wq_done(q, k);
    assert_int_equal(wq_len(q), 0);
    assert_int_equal(wq_get(q, &k), -ESHUTDOWN);
    wq_shutdown_discard(q);
    wq_free(q);
}

struct drainer {
    struct wq *q;
    atomic_bool done;
};

static void *drain_thread(void *arg)
{
    struct drainer *d = arg;

    wq_shutdown_drain(d->q);
    atomic_store(&d->done, true);
    return NULL;
}

static void test_drain_waits_for_in_flight(void **state)
{
    struct drainer d = {0};
    pthread_t t;
    const char *k;
    (void)state;

    d.q = new_queue(0, 0, 0, 0);
    wq_add(d.q, "busy");
    k = get_key(d.q);
    assert_int_equal(pthread_create(&t, NULL, drain_thread, &d), 0);
    while (!wq_shutting_down(d.q))
        sched_yield();
    /* The drainer cannot return while "busy" is still being processed. */
    assert_false(atomic_load(&d.done));
    wq_add(d.q, "ignored");
    assert_int_equal(wq_len(d.q), 0);
    wq_done(d.q, k);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(atomic_load(&d.done));
    assert_int_equal(wq_get(d.q, &k), -ESHUTDOWN);
    wq_free(d.q);
}

static void test_drain_without_work_returns(void **state)
{
    struct wq *q = new_queue(0, 0, 0, 0);
    (void)state;

    wq_shutdown_drain(q);
    assert_true(wq_shutting_down(q));
    wq_free(q);
}

/* ---- metrics ---- */

struct counts {
    int adds, retries, latencies, works;
    size_t last_depth;
    const char *name;
};

static void m_add(void *ctx, const char *name)
{
    struct counts *c = ctx;
    c->adds++;
    c->name = name;
}

static void m_depth(void *ctx, const char *name, size_t depth)
{
    struct counts *c = ctx;
    (void)name;
    c->last_depth = depth;
}

static void m_latency(void *ctx, const char *name, usec_t d)
{
    struct counts *c = ctx;
    (void)name;
    (void)d;
    c->latencies++;
}

static void m_work(void *ctx, const char *name, usec_t d)
{
    struct counts *c = ctx;
    (void)name;
    (void)d;
    c->works++;
}

static void m_retry(void *ctx, const char *name)
{
    struct counts *c = ctx;
    (void)name;
    c->retries++;
}

static void test_metrics_hooks(void **state)
{
    struct counts c = {0};
    struct wq_metrics_ops ops = {.ctx = &c,
                                 .add = m_add,
                                 .depth = m_depth,
                                 .latency = m_latency,
                                 .work = m_work,
                                 .retry = m_retry};
    struct wq_opts o = {.name = "pods", .metrics = &ops, .backoff_base = 1, .qps = -1};
    struct wq *q = NULL;
    struct wq_stats st;
    const char *k;
    (void)state;

    assert_int_equal(wq_new(&o, &q), 0);
    wq_add(q, "a");
    wq_add(q, "b");
    assert_int_equal(c.last_depth, 2);
    k = get_key(q);
    assert_int_equal(c.last_depth, 1);
    wq_done(q, k);
    wq_add_rate_limited(q, "c");
    for (int i = 0; i < 2; i++) {
        k = get_key(q);
        wq_done(q, k);
    }
    assert_int_equal(c.adds, 3);
    assert_int_equal(c.retries, 1);
    assert_int_equal(c.latencies, 3);
    assert_int_equal(c.works, 3);
    assert_int_equal(c.last_depth, 0);
    assert_string_equal(c.name, "pods");
    wq_stats(q, &st);
    assert_int_equal(st.adds, 3);
    assert_int_equal(st.gets, 3);
    assert_int_equal(st.retries, 1);
    assert_true(st.latency_max <= st.latency_total);
    wq_free(q);
}

static void test_bad_opts(void **state)
{
    struct wq_opts o = {.backoff_base = 10 * USEC_PER_SEC, .backoff_max = USEC_PER_SEC};
    struct wq *q = (struct wq *)0x1;
    (void)state;

    assert_int_equal(wq_new(&o, &q), -EINVAL);
    assert_ptr_equal(q, (struct wq *)0x1);
    assert_int_equal(wq_new(NULL, &q), 0);
    wq_free(q);
    wq_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dedup),
        cmocka_unit_test(test_readd_during_processing),
        cmocka_unit_test(test_fifo_order),
        cmocka_unit_test(test_no_concurrent_processing),
        cmocka_unit_test(test_add_after_ordering),
        cmocka_unit_test(test_add_after_earlier_wins),
        cmocka_unit_test(test_add_after_zero_is_add),
        cmocka_unit_test(test_get_for),
        cmocka_unit_test(test_add_after_wakes_waiter),
        cmocka_unit_test(test_backoff_growth_and_forget),
        cmocka_unit_test(test_backoff_cap_no_overflow),
        cmocka_unit_test(test_bucket),
        cmocka_unit_test(test_max_of_backoff_and_bucket),
        cmocka_unit_test(test_add_rate_limited),
        cmocka_unit_test(test_shutdown_wakes_getters),
        cmocka_unit_test(test_shutdown_hands_out_queued_then_stops),
        cmocka_unit_test(test_shutdown_discard_drops_queued),
        cmocka_unit_test(test_drain_waits_for_in_flight),
        cmocka_unit_test(test_drain_without_work_returns),
        cmocka_unit_test(test_metrics_hooks),
        cmocka_unit_test(test_bad_opts),
        cmocka_unit_test(test_deadline_wakes_one_getter),
        cmocka_unit_test(test_keys_reach_every_idle_getter),
        cmocka_unit_test(test_deadline_met_while_key_held),
        cmocka_unit_test(test_timer_role_handed_over),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
