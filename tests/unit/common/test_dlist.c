/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/dlist: push order, removal at the head, middle and tail (links
 * both ways stay consistent), the last node, and a second removal doing nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include "common/dlist.h"

struct node {
    int v;
    struct node *prev, *next;
};

/* Writes the values head to tail into out (checking every back link); returns the count. */
static int walk(const struct node *head, int *out)
{
    int n = 0;
    const struct node *prev = NULL;
    for (const struct node *e = head; e; e = e->next) {
        assert_ptr_equal(e->prev, prev);
        out[n++] = e->v;
        prev = e;
    }
    return n;
}

static void test_push_remove(void **state)
{
    (void)state;
    struct node a = {.v = 1}, b = {.v = 2}, c = {.v = 3}, d = {.v = 4};
    struct node *head = NULL;
    int got[4];
    DLIST_PUSH(head, &a);
    DLIST_PUSH(head, &b);
    DLIST_PUSH(head, &c);
    DLIST_PUSH(head, &d);
    assert_int_equal(walk(head, got), 4);
    assert_int_equal(got[0], 4);
    assert_int_equal(got[3], 1);

    struct node *p = &b; /* the middle */
    DLIST_REMOVE(head, p);
    assert_null(b.prev);
    assert_null(b.next);
    assert_int_equal(walk(head, got), 3);
    assert_int_equal(got[0], 4);
    assert_int_equal(got[1], 3);
    assert_int_equal(got[2], 1);

    p = &d; /* the head */
    DLIST_REMOVE(head, p);
    assert_ptr_equal(head, &c);
    assert_int_equal(walk(head, got), 2);

    p = &a; /* the tail */
    DLIST_REMOVE(head, p);
    assert_int_equal(walk(head, got), 1);
    assert_null(c.next);

    DLIST_REMOVE(head, p); /* again: nothing happens */
    assert_ptr_equal(head, &c);
    p = &c;
    DLIST_REMOVE(head, p);
    assert_null(head);
    DLIST_REMOVE(head, p);
    assert_null(head);

    DLIST_PUSH(head, p); /* a removed node can be pushed again */
    assert_int_equal(walk(head, got), 1);
    assert_int_equal(got[0], 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push_remove),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
