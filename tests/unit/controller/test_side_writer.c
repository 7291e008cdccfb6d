/* SPDX-License-Identifier: Apache-2.0 */
/* controller/side_writer: writes in order, held while busy (at most the bound), a full
 * queue refuses, stopping writes what is queued without holding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "api/res.h"
#include "common/xalloc.h"
#include "controller/side_writer.h"

struct fake {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    char names[16][32];
    int n;
    int fail;         /* returned by every write */
    bool blocked;     /* writes wait while true */
    atomic_bool busy; /* the gate */
    atomic_int asked; /* gate calls */
};

static int fake_write(void *ctx, const struct kube_res *res, const char *ns, const char *name,
                      const json_t *patch)
{
    struct fake *f = ctx;
    assert_ptr_equal(res, &API_RES_SANDBOXCLAIMS);
    assert_string_equal(ns, "ns");
    assert_non_null(json_object_get(patch, "metadata"));
    pthread_mutex_lock(&f->lock);
    while (f->blocked)
        pthread_cond_wait(&f->cond, &f->lock);
    if (f->n < 16)
        (void)snprintf(f->names[f->n++], sizeof(f->names[0]), "%s", name);
    pthread_mutex_unlock(&f->lock);
    return f->fail;
}

static bool fake_busy(void *ctx)
{
    struct fake *f = ctx;
    atomic_fetch_add(&f->asked, 1);
    return atomic_load(&f->busy);
}

static int written(struct fake *f)
{
    int n;
    pthread_mutex_lock(&f->lock);
    n = f->n;
    pthread_mutex_unlock(&f->lock);
    return n;
}

static void unblock(struct fake *f)
{
    pthread_mutex_lock(&f->lock);
    f->blocked = false;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
}

static struct side_writer *start(struct fake *f, usec_t max_wait, size_t max_queue)
{
    struct side_opts o = {.write = fake_write,
                          .ctx = f,
                          .gate = {.busy = fake_busy, .ctx = f, .max_wait = max_wait},
                          .max_queue = max_queue};
    struct side_writer *w = NULL;
    memset(f, 0, sizeof(*f));
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    atomic_init(&f->busy, false);
    atomic_init(&f->asked, 0);
    assert_int_equal(side_writer_new(&o, &w), 0);
    return w;
}

static void finish(struct fake *f, struct side_writer *w)
{
    side_writer_free(w);
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->lock);
}

static bool add(struct side_writer *w, const char *name)
{
    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", "k", "v");
    bool ok = side_writer_add(w, &API_RES_SANDBOXCLAIMS, "ns", name, patch);
    json_decref(patch);
    return ok;
}

static void test_in_order(void **state)
{
    struct fake f;
    struct side_writer *w = start(&f, 60 * USEC_PER_SEC, 0);
    struct side_stats st;
    (void)state;
    assert_true(add(w, "a"));
    assert_true(add(w, "b"));
    assert_true(add(w, "c"));
    side_writer_flush(w);
    assert_int_equal(f.n, 3);
    assert_string_equal(f.names[0], "a");
    assert_string_equal(f.names[2], "c");
    side_writer_stats(w, &st);
    assert_int_equal(st.queued, 3);
    assert_int_equal(st.written, 3);
    assert_int_equal(st.held, 0);
    f.fail = -EIO;
    assert_true(add(w, "d"));
    side_writer_flush(w);
    side_writer_stats(w, &st);
    assert_int_equal(st.failed, 1);
    /* nothing to write (the object went): counted apart, and a flush does not wait on it */
    f.fail = SIDE_SKIPPED;
    assert_true(add(w, "e"));
    side_writer_flush(w);
    side_writer_stats(w, &st);
    assert_int_equal(st.skipped, 1);
    assert_int_equal(st.written, 3);
    assert_int_equal(st.failed, 1);
    finish(&f, w);
}

static void test_held_while_busy(void **state)
{
    struct fake f;
    struct side_writer *w = start(&f, 60 * USEC_PER_SEC, 0);
    struct side_stats st;
    (void)state;
    atomic_store(&f.busy, true);
    assert_true(add(w, "a"));
    while (atomic_load(&f.asked) < 3)
        clock_sleep(YIELD_GATE_STEP);
    assert_int_equal(written(&f), 0);
    atomic_store(&f.busy, false);
    side_writer_flush(w);
    assert_int_equal(f.n, 1);
    side_writer_stats(w, &st);
    assert_int_equal(st.held, 1);
    finish(&f, w);
}

static void test_bound(void **state)
{
    struct fake f;
    struct side_writer *w = start(&f, 50 * USEC_PER_MSEC, 0);
    (void)state;
    atomic_store(&f.busy, true); /* for good: only the bound lets the writes go */
    assert_true(add(w, "a"));
    assert_true(add(w, "b"));
    side_writer_flush(w);
    assert_int_equal(f.n, 2);
    finish(&f, w);
}

static void test_full_queue_refuses(void **state)
{
    struct fake f;
    struct side_writer *w = start(&f, 60 * USEC_PER_SEC, 2);
    (void)state;
    f.blocked = true;
    assert_true(add(w, "a"));
    while (atomic_load(&f.asked) < 1) /* a is taken, and sits in the write */
        clock_sleep(YIELD_GATE_STEP);
    assert_true(add(w, "b"));
    assert_true(add(w, "c"));
    assert_false(add(w, "d")); /* two queued: the caller writes it itself */
    unblock(&f);
    side_writer_flush(w);
    assert_int_equal(f.n, 3);
    finish(&f, w);
}

static void test_stop_writes_without_holding(void **state)
{
    struct fake f;
    struct side_writer *w = start(&f, 60 * USEC_PER_SEC, 0);
    (void)state;
    atomic_store(&f.busy, true);
    assert_true(add(w, "a"));
    assert_true(add(w, "b"));
    while (atomic_load(&f.asked) < 1)
        clock_sleep(YIELD_GATE_STEP);
    side_writer_free(w); /* not 60 s: stopping lets the held write go */
    assert_int_equal(f.n, 2);
    pthread_cond_destroy(&f.cond);
    pthread_mutex_destroy(&f.lock);
}

/* side_writer_drop (a leadership that ended): the write under way finishes, the queued
 * ones and those added after are dropped (an add still says true: its caller must not
 * write it itself), and a flush does not wait on them. */
static void test_drop_forgets_queued(void **state)
{
    struct fake f;
    struct side_writer *w = start(&f, 60 * USEC_PER_SEC, 0);
    struct side_stats st;
    (void)state;
    f.blocked = true;
    assert_true(add(w, "a"));
    while (atomic_load(&f.asked) < 1) /* a is taken, and sits in the write */
        clock_sleep(YIELD_GATE_STEP);
    assert_true(add(w, "b"));
    assert_true(add(w, "c"));
    side_writer_drop(w);
    assert_true(add(w, "d"));
    unblock(&f);
    side_writer_flush(w);
    side_writer_stats(w, &st);
    assert_int_equal(st.dropped, 3);
    assert_int_equal(st.written, 1);
    finish(&f, w);
    assert_int_equal(f.n, 1);
    assert_string_equal(f.names[0], "a");
}

/* A job taken from the queue and held at the gate when the drop comes is dropped too
 * (before, only the queue behind it was: with one claim served, nothing was). The drop
 * wakes it: it does not wait out the gate's bound. */
static void test_drop_forgets_held(void **state)
{
    struct fake f;
    struct side_writer *w = start(&f, 60 * USEC_PER_SEC, 0);
    struct side_stats st;
    (void)state;
    atomic_store(&f.busy, true);
    assert_true(add(w, "a"));
    while (atomic_load(&f.asked) < 2) /* a is taken, and held at the gate */
        clock_sleep(YIELD_GATE_STEP);
    usec_t t0 = clock_now();
    side_writer_drop(w);
    side_writer_flush(w);
    assert_true(clock_now() - t0 < 10 * USEC_PER_SEC);
    side_writer_stats(w, &st);
    assert_int_equal(st.dropped, 1);
    assert_int_equal(st.held, 1);
    assert_int_equal(st.written, 0);
    finish(&f, w);
    assert_int_equal(f.n, 0);
}

static void test_bad_opts(void **state)
{
    struct side_opts o = {0};
    struct side_writer *w = NULL;
    (void)state;
    assert_int_equal(side_writer_new(&o, &w), -EINVAL);
    assert_int_equal(side_writer_new(NULL, &w), -EINVAL);
    assert_null(w);
    side_writer_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_order),
        cmocka_unit_test(test_held_while_busy),
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_full_queue_refuses),
        cmocka_unit_test(test_stop_writes_without_holding),
        cmocka_unit_test(test_drop_forgets_queued),
        cmocka_unit_test(test_drop_forgets_held),
        cmocka_unit_test(test_bad_opts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
