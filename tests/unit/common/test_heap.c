/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/heap: ordering, FIFO ties, removal and re-timing from any
 * position, and a randomised comparison against a sorted reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <stdlib.h>

#include "common/heap.h"
#include "common/xalloc.h"

struct item {
    int id;
    struct heap_entry he;
};

static struct item *item_of(struct heap_entry *e)
{
    return e ? container_of(e, struct item, he) : NULL;
}

static void init_items(struct item *it, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        it[i].id = (int)i;
        heap_entry_init(&it[i].he);
    }
}

static void test_empty(void **state)
{
    (void)state;
    struct heap h;
    heap_init(&h);
    assert_null(heap_peek(&h));
    assert_null(heap_pop(&h));
    assert_null(heap_pop_due(&h, USEC_INFINITY));
    assert_true(heap_next_deadline(&h) == USEC_INFINITY);
    assert_int_equal(heap_len(&h), 0);
    heap_done(&h);
}

static void test_order_and_ties(void **state)
{
    (void)state;
    struct heap h;
    struct item it[6];
    static const usec_t dl[6] = {50, 10, 30, 10, 20, 10};
    static const int want[6] = {1, 3, 5, 4, 2, 0};
    heap_init(&h);
    init_items(it, 6);
    for (int i = 0; i < 6; i++)
        heap_push(&h, &it[i].he, dl[i]);
    assert_int_equal(heap_len(&h), 6);
    assert_true(heap_next_deadline(&h) == 10);
    for (int i = 0; i < 6; i++) {
        struct item *x = item_of(heap_pop(&h));
        assert_non_null(x);
        assert_int_equal(x->id, want[i]);
        assert_false(heap_entry_queued(&x->he));
    }
    assert_null(heap_pop(&h));
    heap_done(&h);
}

static void test_pop_due(void **state)
{
    (void)state;
    struct heap h;
    struct item it[3];
    heap_init(&h);
    init_items(it, 3);
    heap_push(&h, &it[0].he, 100);
    heap_push(&h, &it[1].he, 200);
    heap_push(&h, &it[2].he, 300);
    assert_null(heap_pop_due(&h, 99));
    assert_int_equal(item_of(heap_pop_due(&h, 100))->id, 0);
    assert_int_equal(item_of(heap_pop_due(&h, 250))->id, 1);
    assert_null(heap_pop_due(&h, 250));
    assert_int_equal(heap_len(&h), 1);
    heap_done(&h);
    assert_false(heap_entry_queued(&it[2].he));
}

static void test_remove_and_update(void **state)
{
    (void)state;
    struct heap h;
    struct item it[5];
    heap_init(&h);
    init_items(it, 5);
    for (int i = 0; i < 5; i++)
        heap_push(&h, &it[i].he, (usec_t)(i + 1) * 10);
    heap_remove(&h, &it[2].he); /* middle */
    assert_false(heap_entry_queued(&it[2].he));
    heap_update(&h, &it[0].he, 45); /* earliest moves down */
    heap_update(&h, &it[4].he, 5);  /* latest moves up */
    heap_update(&h, &it[2].he, 35); /* not queued: pushed */
    static const int want[5] = {4, 1, 2, 3, 0};
    for (int i = 0; i < 5; i++)
        assert_int_equal(item_of(heap_pop(&h))->id, want[i]);
    heap_done(&h);
}

static int cmp_usec(const void *a, const void *b)
{
    usec_t x = *(const usec_t *)a, y = *(const usec_t *)b;
    return x < y ? -1 : x > y;
}

static void test_random_against_sort(void **state)
{
    (void)state;
    enum { N = 5000 };
    struct item *it = xcalloc(N, sizeof(*it));
    usec_t *ref = xcalloc(N, sizeof(*ref));
    struct heap h;
    heap_init(&h);
    init_items(it, N);
    srand(12345);
    for (int i = 0; i < N; i++)
        heap_push(&h, &it[i].he, (usec_t)(rand() % 1000));
    /* Re-time a third and remove a third, from arbitrary positions. */
    size_t n = 0;
    for (int i = 0; i < N; i++) {
        if (i % 3 == 0)
            heap_update(&h, &it[i].he, (usec_t)(rand() % 1000));
        else if (i % 3 == 1)
            heap_remove(&h, &it[i].he);
        if (i % 3 != 1)
            ref[n++] = it[i].he.deadline;
    }
    assert_int_equal(heap_len(&h), n);
    qsort(ref, n, sizeof(*ref), cmp_usec);
    for (size_t i = 0; i < n; i++) {
        struct heap_entry *e = heap_pop(&h);
        assert_non_null(e);
        assert_true(e->deadline == ref[i]);
    }
    assert_null(heap_pop(&h));
    heap_done(&h);
    xfree(ref);
    xfree(it);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_order_and_ties),
        cmocka_unit_test(test_pop_due),
        cmocka_unit_test(test_remove_and_update),
        cmocka_unit_test(test_random_against_sort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
