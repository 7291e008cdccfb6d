/* SPDX-License-Identifier: Apache-2.0 */
/* The informer's paged LIST against a scripted list_pages source: each page is stored
 * before the next is read, the resourceVersion comes from the last page, a restarted
 * list (expired continue token) tombstones what only the abandoned pages had, a list
 * failing part-way keeps its pages but deletes nothing and is retried, a page without
 * a resourceVersion fails the list, and a compact store behaves the same. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "common/buf.h"
#include "common/clock.h"
#include "kube/informer.h"

#define OBJ(n, rv) \
    "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"" n "\",\"resourceVersion\":\"" rv "\"}}"
#define PAGE(rv, items) "{\"metadata\":{\"resourceVersion\":\"" rv "\"},\"items\":[" items "]}"
#define MAX_PAGES       4

/* One call of list_pages: its pages in order, the restarted flag of each, and the
 * result after them (0, or an error after the pages). */
struct call {
    const char *pages[MAX_PAGES];
    bool restarted[MAX_PAGES];
    int ret;
};

struct fake {
    const struct call *calls;
    size_t n, pos;
    int gone; /* watches to end with 410 (each forces a relist) */
    int bad;  /* watches after those to end with -EPROTO (an event that cannot be taken) */
    struct kube_informer *inf;
    size_t stored_before[8]; /* store size seen when each page of call 0 was handed over */
    struct buf log;          /* "D:ns/a:1;" deletes, "A:ns/a;" adds */
};

static struct fake F;
static bool compact;                  /* informers started with compact_store */
static usec_t bo_min = USEC_PER_MSEC; /* the informers' back-off */
static int start_bad;                 /* F.bad of the informers started next */
static usec_t bo_max = 2 * USEC_PER_MSEC;
static usec_t gone_after; /* how long each watch takes to meet its 410 */

static int fake_list_pages(void *ctx, const struct kube_informer_opts *o, kube_list_page_fn *fn,
                           void *fn_ctx, struct kube_err *reterr)
{
    struct fake *f = ctx;
    (void)o;
    if (f->pos == f->n)
        return -EAGAIN; /* past the script: the test has what it needs */
    const struct call *c = &f->calls[f->pos++];
    for (size_t i = 0; i < MAX_PAGES && c->pages[i]; i++) {
        if (f->pos == 1)
            f->stored_before[i] = kube_store_len(kube_informer_store(f->inf));
        json_t *page = json_loads(c->pages[i], 0, NULL);
        assert_non_null(page);
        int r = fn(fn_ctx, page, c->restarted[i]);
        json_decref(page);
        if (r < 0)
            return r;
    }
    if (c->ret < 0)
        kube_err_set(reterr, c->ret, "scripted failure");
    return c->ret;
}

static int fake_list(void *ctx, const struct kube_informer_opts *o, json_t **ret_list,
                     struct kube_err *reterr)
{
    (void)ctx, (void)o, (void)ret_list, (void)reterr;
    fail_msg("list_pages must be preferred over list");
    return -EINVAL;
}

static int fake_watch(void *ctx, const struct kube_informer_opts *o,
                      const struct kube_informer_watch_args *a, struct kube_err *reterr)
{
    struct fake *f = ctx;
    (void)o, (void)reterr;
    if (f->gone > 0) {
        f->gone--;
        clock_sleep(gone_after); /* a slow API server's answer */
        return -ESTALE;
    }
    if (f->bad > 0) {
        f->bad--;
        return -EPROTO;
    }
    while (!atomic_load(a->stop))
        clock_sleep(5 * USEC_PER_MSEC);
    return -ECANCELED;
}

static void on_add(void *ctx, const json_t *obj)
{
    struct fake *f = ctx;
    char key[256];
    assert_int_equal(kube_store_key(obj, key, sizeof(key)), 0);
    assert_true(buf_printf(&f->log, "A:%s;", key) >= 0);
}

static void on_delete(void *ctx, const json_t *obj, bool unknown)
{
    struct fake *f = ctx;
    char key[256];
    assert_int_equal(kube_store_key(obj, key, sizeof(key)), 0);
    assert_true(buf_printf(&f->log, "D:%s:%d;", key, unknown) >= 0);
}

/* Starts an informer over the script; gone watches end with 410. */
static void start(const struct call *calls, size_t n, int gone)
{
    static struct kube_informer_source src = {
        .list = fake_list, .list_pages = fake_list_pages, .watch = fake_watch, .ctx = &F};
    struct kube_informer_opts o = {.res = &KUBE_RES_CONFIGMAPS,
                                   .source = &src,
                                   .backoff_min = bo_min,
                                   .backoff_max = bo_max,
                                   .compact_store = compact};
    memset(&F, 0, sizeof(F));
    F.calls = calls;
    F.n = n;
    F.gone = gone;
    F.bad = start_bad;
    buf_init(&F.log, 1u << 16);
    assert_int_equal(kube_informer_new(&o, &F.inf), 0);
    struct kube_informer_handlers h = {.on_add = on_add, .on_delete = on_delete, .ctx = &F};
    assert_int_equal(kube_informer_add_handlers(F.inf, &h), 0);
    assert_int_equal(kube_informer_start(F.inf), 0);
}

/* Waits until the informer has made `lists` successful LISTs. */
static void wait_lists(uint64_t lists)
{
    struct kube_informer_stats st;
    usec_t end = clock_now() + 10 * USEC_PER_SEC;
    do {
        kube_informer_stats(F.inf, &st);
        if (st.lists >= lists)
            return;
        clock_sleep(USEC_PER_MSEC);
    } while (clock_now() < end);
    fail_msg("%llu lists, expected %llu", (unsigned long long)st.lists, (unsigned long long)lists);
}

static void finish(void)
{
    kube_informer_free(F.inf);
    buf_done(&F.log);
}

static void assert_rv(const char *want)
{
    char rv[128];
    assert_int_equal(kube_informer_last_rv(F.inf, rv, sizeof(rv)), 0);
    assert_string_equal(rv, want);
}

/* Every watch meets 410 at once (the LIST's version is already too old, as on a busy
 * resource behind API servers with short watch caches): the re-lists back off, growing,
 * instead of reading everything again in a tight loop (before: the script's 60 LISTs
 * within milliseconds). */
static void test_quick_gone_relists_back_off(void **state)
{
    enum { CALLS = 60 };
    static struct call calls[CALLS];
    struct kube_informer_stats st;
    (void)state;
    for (size_t i = 0; i < CALLS; i++)
        calls[i] = (struct call){.pages = {PAGE("5", OBJ("a", "5"))}};
    bo_min = 20 * USEC_PER_MSEC;
    bo_max = 200 * USEC_PER_MSEC;
    start(calls, CALLS, 1000);
    clock_sleep(USEC_PER_SEC);
    kube_informer_stats(F.inf, &st);
    finish();
    bo_min = USEC_PER_MSEC;
    bo_max = 2 * USEC_PER_MSEC;
    print_message("LISTs in 1 s with every watch gone at once: %llu\n",
                  (unsigned long long)st.lists);
    assert_true(st.lists >= 2);
    assert_true(st.lists <= 15); /* 20, 40, 80, 160, then 200 ms apart (with jitter) */
}

/* The same with a slow API server: each watch meets its 410 after 1.1 s (more than the
 * 1 s a watch must live to count as progress). A failed watch is no progress however
 * long it took: the re-lists still back off. Before, its duration counted: the back-off
 * was reset and each 410 re-listed at once, a full LIST every 1.1 s. */
static void test_slow_gone_relists_back_off(void **state)
{
    enum { CALLS = 8 };
    static struct call calls[CALLS];
    struct kube_informer_stats st;
    (void)state;
    for (size_t i = 0; i < CALLS; i++)
        calls[i] = (struct call){.pages = {PAGE("5", OBJ("a", "5"))}};
    bo_min = 1500 * USEC_PER_MSEC;
    bo_max = 3 * USEC_PER_SEC;
    gone_after = 1100 * USEC_PER_MSEC;
    start(calls, CALLS, 1000);
    clock_sleep(3500 * USEC_PER_MSEC);
    kube_informer_stats(F.inf, &st);
    finish();
    bo_min = USEC_PER_MSEC;
    bo_max = 2 * USEC_PER_MSEC;
    gone_after = 0;
    print_message("LISTs in 3.5 s with every watch gone after 1.1 s: %llu\n",
                  (unsigned long long)st.lists);
    assert_true(st.lists >= 1);
    assert_true(st.lists <= 2); /* at 0 and after 1.1 + 1.5 s; before: 0, 1.1, 2.2, 3.3 s */
}

/* Every watch breaks on an event it cannot take (-EPROTO, nothing applied): after three
 * resumes from the same version the informer re-lists instead of resuming for ever (the
 * store stayed stale while has_synced said true). */
static void test_unreadable_event_relists(void **state)
{
    static const struct call calls[] = {{.pages = {PAGE("5", OBJ("a", "5"))}},
                                        {.pages = {PAGE("6", OBJ("a", "6"))}}};
    (void)state;
    start_bad = 3;
    start(calls, 2, 0);
    start_bad = 0;
    wait_lists(2);
    assert_rv("6");
    finish();
}

static void test_pages_stored_as_they_arrive(void **state)
{
    (void)state;
    static const struct call calls[] = {
        {.pages = {PAGE("10", OBJ("a", "1") "," OBJ("b", "2")), PAGE("10", OBJ("c", "3")),
                   PAGE("11", OBJ("d", "4"))}},
    };
    start(calls, 1, 0);
    assert_int_equal(kube_informer_wait_for_sync(F.inf, 10 * USEC_PER_SEC), 0);
    /* page k was handed over with the items of the pages before it already stored */
    assert_int_equal(F.stored_before[0], 0);
    assert_int_equal(F.stored_before[1], 2);
    assert_int_equal(F.stored_before[2], 3);
    assert_int_equal(kube_store_len(kube_informer_store(F.inf)), 4);
    assert_string_equal(F.log.data, "A:ns/a;A:ns/b;A:ns/c;A:ns/d;");
    assert_rv("11"); /* the last page's */
    finish();
}

static void test_restart_tombstones_abandoned_pages(void **state)
{
    (void)state;
    static const struct call calls[] = {
        {.pages = {PAGE("10", OBJ("a", "1") "," OBJ("b", "2"))}},
        /* relist after 410: one page of a snapshot whose continue token expired, then the
         * restarted list; x appeared only in the abandoned page, b is gone */
        {.pages = {PAGE("20", OBJ("a", "1") "," OBJ("x", "15")), PAGE("21", OBJ("a", "1")),
                   PAGE("21", OBJ("c", "18"))},
         .restarted = {false, true, false}},
    };
    start(calls, 2, 1);
    wait_lists(2);
    struct kube_store *s = kube_informer_store(F.inf);
    assert_int_equal(kube_store_len(s), 2);
    json_t *a = kube_store_get(s, "ns/a"), *c = kube_store_get(s, "ns/c");
    assert_non_null(a);
    assert_non_null(c);
    json_decref(a);
    json_decref(c);
    /* a unchanged: no event; deletes (final state unknown, in store order) after the adds */
    static const char adds[] = "A:ns/a;A:ns/b;A:ns/x;A:ns/c;";
    assert_int_equal(strncmp(F.log.data, adds, strlen(adds)), 0);
    const char *dels = F.log.data + strlen(adds);
    assert_true(strcmp(dels, "D:ns/b:1;D:ns/x:1;") == 0 || strcmp(dels, "D:ns/x:1;D:ns/b:1;") == 0);
    assert_rv("21");
    finish();
}

static void test_failure_midway_keeps_pages_and_retries(void **state)
{
    (void)state;
    static const struct call calls[] = {
        {.pages = {PAGE("10", OBJ("a", "1") "," OBJ("b", "2"))}, .ret = -EIO},
        {.pages = {PAGE("12", OBJ("b", "2"))}},
    };
    start(calls, 2, 0);
    assert_int_equal(kube_informer_wait_for_sync(F.inf, 10 * USEC_PER_SEC), 0);
    struct kube_informer_stats st;
    kube_informer_stats(F.inf, &st);
    assert_int_equal(st.list_errors, 1);
    assert_int_equal(st.lists, 1);
    /* the failed list stored a and b and deleted nothing; the retry drops a */
    assert_string_equal(F.log.data, "A:ns/a;A:ns/b;D:ns/a:1;");
    assert_int_equal(kube_store_len(kube_informer_store(F.inf)), 1);
    assert_rv("12");
    finish();
}

static void test_page_without_rv_fails_the_list(void **state)
{
    (void)state;
    static const struct call calls[] = {
        {.pages = {PAGE("10", OBJ("a", "1")), "{\"items\":[" OBJ("b", "2") "]}"}},
        {.pages = {"{\"metadata\":{\"resourceVersion\":\"13\"},\"items\":{}}"}},
        {.pages = {PAGE("14", OBJ("a", "1"))}},
    };
    start(calls, 3, 0);
    assert_int_equal(kube_informer_wait_for_sync(F.inf, 10 * USEC_PER_SEC), 0);
    struct kube_informer_stats st;
    kube_informer_stats(F.inf, &st);
    assert_int_equal(st.list_errors, 2); /* no resourceVersion; items not an array */
    assert_string_equal(F.log.data, "A:ns/a;");
    assert_rv("14");
    finish();
}

/* The same with the store keeping JSON text: reads parse, the outcome is the same. */
static void test_restart_with_compact_store(void **state)
{
    compact = true;
    test_restart_tombstones_abandoned_pages(state);
    compact = false;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pages_stored_as_they_arrive),
        cmocka_unit_test(test_restart_tombstones_abandoned_pages),
        cmocka_unit_test(test_failure_midway_keeps_pages_and_retries),
        cmocka_unit_test(test_page_without_rv_fails_the_list),
        cmocka_unit_test(test_restart_with_compact_store),
        cmocka_unit_test(test_quick_gone_relists_back_off),
        cmocka_unit_test(test_slow_gone_relists_back_off),
        cmocka_unit_test(test_unreadable_event_relists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
