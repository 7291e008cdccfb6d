/* SPDX-License-Identifier: Apache-2.0 */
/* common/fifo_sem: at most limit holders, waiters admitted in arrival order, no limit
 * when limit <= 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>

#include "common/clock.h"
#include "common/fifo_sem.h"

#define WAITERS 6

struct run {
    struct fifo_sem *s;
    pthread_mutex_t lock;
    int order[WAITERS]; /* who got in, in turn */
    int n;
    atomic_int inside, most;
};

struct one {
    struct run *r;
    int id;
};

static void *waiter(void *arg)
{
    struct one *o = arg;
    struct run *r = o->r;
    (void)fifo_sem_acquire(r->s);
    pthread_mutex_lock(&r->lock);
    r->order[r->n++] = o->id;
    pthread_mutex_unlock(&r->lock);
    int in = atomic_fetch_add(&r->inside, 1) + 1;
    int m = atomic_load(&r->most);
    while (in > m && !atomic_compare_exchange_weak(&r->most, &m, in))
        ;
    clock_sleep(2 * USEC_PER_MSEC);
    atomic_fetch_sub(&r->inside, 1);
    fifo_sem_release(r->s);
    return NULL;
}

/* Waits until s has n waiters queued. */
static void wait_queued(struct fifo_sem *s, unsigned long n)
{
    for (int i = 0; i < 5000 && fifo_sem_waited(s) < n; i++)
        clock_sleep(USEC_PER_MSEC);
    assert_int_equal(fifo_sem_waited(s), n);
}

/* Starts WAITERS waiters on s while the test holds hold places, one by one so that each
 * is queued before the next arrives; then gives the places back and joins them. */
static void run_waiters(struct fifo_sem *s, struct run *r, int hold)
{
    struct one ones[WAITERS];
    pthread_t th[WAITERS];
    for (int i = 0; i < hold; i++)
        assert_false(fifo_sem_acquire(s));
    for (int i = 0; i < WAITERS; i++) {
        ones[i] = (struct one){.r = r, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, waiter, &ones[i]), 0);
        wait_queued(s, (unsigned long)i + 1);
    }
    for (int i = 0; i < hold; i++)
        fifo_sem_release(s);
    for (int i = 0; i < WAITERS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(r->n, WAITERS);
}

/* One place: the waiters get it strictly in the order they came. */
static void test_arrival_order(void **state)
{
    struct fifo_sem s;
    struct run r = {.s = &s};
    (void)state;
    fifo_sem_init(&s, 1);
    pthread_mutex_init(&r.lock, NULL);
    run_waiters(&s, &r, 1);
    for (int i = 0; i < WAITERS; i++)
        assert_int_equal(r.order[i], i);
    assert_int_equal(atomic_load(&r.most), 1);
    pthread_mutex_destroy(&r.lock);
    fifo_sem_done(&s);
}

/* Two places: never more than two holders, and both are used. */
static void test_limit(void **state)
{
    struct fifo_sem s;
    struct run r = {.s = &s};
    (void)state;
    fifo_sem_init(&s, 2);
    pthread_mutex_init(&r.lock, NULL);
    run_waiters(&s, &r, 2);
    assert_int_equal(atomic_load(&r.most), 2);
    /* all places are back: two go in at once, without queueing */
    assert_false(fifo_sem_acquire(&s));
    assert_false(fifo_sem_acquire(&s));
    fifo_sem_release(&s);
    fifo_sem_release(&s);
    assert_int_equal(fifo_sem_waited(&s), WAITERS);
    pthread_mutex_destroy(&r.lock);
    fifo_sem_done(&s);
}

static void test_no_limit(void **state)
{
    struct fifo_sem s;
    (void)state;
    fifo_sem_init(&s, 0);
    for (int i = 0; i < 1000; i++)
        assert_false(fifo_sem_acquire(&s));
    for (int i = 0; i < 1000; i++)
        fifo_sem_release(&s);
    assert_int_equal(fifo_sem_waited(&s), 0);
    fifo_sem_done(&s);
}

/* A release with no holder (a caller's bug) does not open an extra place. */
static void test_release_without_holder(void **state)
{
    struct fifo_sem s;
    (void)state;
    fifo_sem_init(&s, 1);
    fifo_sem_release(&s);
    assert_false(fifo_sem_acquire(&s));
    assert_int_equal(s.inside, 1);
    fifo_sem_release(&s);
    assert_int_equal(s.inside, 0);
    fifo_sem_done(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arrival_order),
        cmocka_unit_test(test_limit),
        cmocka_unit_test(test_no_limit),
        cmocka_unit_test(test_release_without_holder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
