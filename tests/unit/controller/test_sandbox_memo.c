/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: the read-your-writes memo suppresses status writes on the version our write
 * replaced, only for that version and UID, and only for SB_MEMO_TTL (the backstop for a
 * watch event lost across an API server restart). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <jansson.h>

#include "controller/sandbox_memo.h"

static json_t *obj(const char *uid, const char *rv)
{
    json_t *o = json_pack("{s:{s:s, s:s, s:s}}", "metadata", "name", "x", "uid", uid,
                          "resourceVersion", rv);
    assert_non_null(o);
    return o;
}

static void test_stale_only_for_replaced_version(void **state)
{
    json_t *v1 = obj("uid-memo-1", "100"), *v2 = obj("uid-memo-1", "101");
    json_t *other = obj("uid-memo-2", "100");
    usec_t t0 = 1000 * USEC_PER_SEC;
    (void)state;
    assert_false(sb_memo_stale_at(v1, t0));
    sb_memo_wrote_at(v1, t0);
    assert_true(sb_memo_stale_at(v1, t0));
    assert_true(sb_memo_stale_at(v1, t0 + SB_MEMO_TTL - 1));
    assert_false(sb_memo_stale_at(v2, t0 + 1));    /* the cache moved on */
    assert_false(sb_memo_stale_at(other, t0 + 1)); /* another object */
    json_decref(v1);
    json_decref(v2);
    json_decref(other);
}

static void test_expires_after_ttl(void **state)
{
    json_t *v = obj("uid-memo-3", "7");
    usec_t t0 = 2000 * USEC_PER_SEC;
    (void)state;
    sb_memo_wrote_at(v, t0);
    assert_true(sb_memo_stale_at(v, t0 + SB_MEMO_TTL / 2));
    assert_false(sb_memo_stale_at(v, t0 + SB_MEMO_TTL)); /* the event never came */
    assert_false(sb_memo_stale_at(v, t0 - 1));           /* a clock before the write */
    sb_memo_wrote_at(v, t0 + SB_MEMO_TTL);               /* a new write re-arms it */
    assert_true(sb_memo_stale_at(v, t0 + SB_MEMO_TTL + 1));
    json_decref(v);
}

static void test_unusable_objects_never_stale(void **state)
{
    json_t *no_rv = json_pack("{s:{s:s}}", "metadata", "uid", "uid-memo-4");
    json_t *long_uid =
        obj("uid-memo-5-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "1");
    (void)state;
    sb_memo_wrote_at(no_rv, 5);
    sb_memo_wrote_at(long_uid, 5);
    assert_false(sb_memo_stale_at(no_rv, 5));
    assert_false(sb_memo_stale_at(long_uid, 5));
    json_decref(no_rv);
    json_decref(long_uid);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_only_for_replaced_version),
        cmocka_unit_test(test_expires_after_ttl),
        cmocka_unit_test(test_unusable_objects_never_stale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
