/* SPDX-License-Identifier: Apache-2.0 */
/* Background processes: the output ring (offsets, merging, eviction with a dropped count,
 * oversized appends, the memory charge) and the parsers of the path and query. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "common/xalloc.h"
#include "sandboxd/api_bg.h"
#include "sandboxd/bgring.h"

static void test_ring_empty(void **state)
{
    (void)state;
    struct sbd_ring *r = sbd_ring_new(0);
    struct sbd_ring_slice s;
    assert_int_equal(sbd_ring_next(r, 0, 0, &s), 0);
    assert_int_equal(sbd_ring_start(r), 0);
    assert_int_equal(sbd_ring_end(r), 0);
    sbd_ring_free(r);
}

static void test_ring_merges_and_tags(void **state)
{
    (void)state;
    struct sbd_ring *r = sbd_ring_new(64 * 1024);
    sbd_ring_append(r, 1, "ab", 2);
    sbd_ring_append(r, 1, "cd", 2);
    sbd_ring_append(r, 2, "ERR", 3);
    struct sbd_ring_slice s;
    assert_int_equal(sbd_ring_next(r, 0, 0, &s), 1);
    assert_int_equal(s.stream, 1);
    assert_int_equal(s.offset, 0);
    assert_int_equal(s.dropped, 0);
    assert_int_equal(s.len, 4);
    assert_memory_equal(s.data, "abcd", 4);
    assert_int_equal(sbd_ring_next(r, 1, 2, &s), 1); /* from the middle, capped */
    assert_int_equal(s.len, 2);
    assert_memory_equal(s.data, "bc", 2);
    assert_int_equal(sbd_ring_next(r, 4, 0, &s), 1);
    assert_int_equal(s.stream, 2);
    assert_int_equal(s.offset, 4);
    assert_memory_equal(s.data, "ERR", 3);
    assert_int_equal(sbd_ring_next(r, 7, 0, &s), 0);
    assert_int_equal(sbd_ring_end(r), 7);
    sbd_ring_free(r);
}

/* Alternating streams make one chunk per append: the older chunks are shrunk, so the
 * charge stays small and nothing is evicted below the limit. */
static void test_ring_small_chunks_keep_everything(void **state)
{
    (void)state;
    struct sbd_ring *r = sbd_ring_new(64 * 1024);
    for (int i = 0; i < 100; i++)
        sbd_ring_append(r, 1 + (i & 1), "x", 1);
    assert_int_equal(sbd_ring_start(r), 0);
    assert_int_equal(sbd_ring_end(r), 100);
    assert_true(sbd_ring_used(r) <= 64 * 1024);
    assert_true(sbd_ring_used(r) >= 100 * (1 + SBD_RING_CHUNK_OVERHEAD));
    sbd_ring_free(r);
}

static void test_ring_evicts_oldest(void **state)
{
    (void)state;
    const size_t limit = 32 * 1024;
    struct sbd_ring *r = sbd_ring_new(limit);
    char block[10000];
    for (int i = 0; i < 10; i++) {
        memset(block, 'a' + i, sizeof(block));
        sbd_ring_append(r, 1 + (i & 1), block, sizeof(block));
        assert_true(sbd_ring_used(r) <= limit);
    }
    assert_int_equal(sbd_ring_end(r), 100000);
    assert_true(sbd_ring_start(r) > 0);
    assert_true(sbd_ring_start(r) % 10000 == 0); /* whole chunks go */
    struct sbd_ring_slice s;
    assert_int_equal(sbd_ring_next(r, 0, 0, &s), 1);
    assert_int_equal(s.offset, sbd_ring_start(r));
    assert_int_equal(s.dropped, sbd_ring_start(r));
    assert_int_equal(s.data[0], 'a' + (int)(s.offset / 10000));
    /* The newest bytes are always there. */
    assert_int_equal(sbd_ring_next(r, 99999, 0, &s), 1);
    assert_int_equal(s.data[0], 'j');
    assert_int_equal(s.dropped, 0);
    sbd_ring_free(r);
}

/* Tiny appends that alternate streams make one chunk each: thousands of them, evicted
 * and appended round the circular array many times over. Every retained byte is found
 * at its offset with its stream, and an offset before the window reports the loss. */
static void test_ring_many_tiny_chunks(void **state)
{
    (void)state;
    const size_t limit = 64 * 1024;
    const uint64_t total = 50000;
    struct sbd_ring *r = sbd_ring_new(limit);
    for (uint64_t i = 0; i < total; i++) {
        char ch = (char)('a' + i % 26);
        sbd_ring_append(r, 1 + (int)(i & 1), &ch, 1);
        assert_true(sbd_ring_used(r) <= limit);
    }
    uint64_t start = sbd_ring_start(r);
    assert_int_equal(sbd_ring_end(r), total);
    assert_true(start > 0 && total - start > 500); /* ~1000 chunks of 65 charged bytes */
    struct sbd_ring_slice s;
    for (uint64_t off = start; off < total; off++) {
        assert_int_equal(sbd_ring_next(r, off, 0, &s), 1);
        assert_int_equal(s.offset, off);
        assert_int_equal(s.dropped, 0);
        assert_int_equal(s.len, 1);
        assert_int_equal(s.data[0], 'a' + (int)(off % 26));
        assert_int_equal(s.stream, 1 + (int)(off & 1));
    }
    assert_int_equal(sbd_ring_next(r, start / 2, 0, &s), 1);
    assert_int_equal(s.offset, start);
    assert_int_equal(s.dropped, start - start / 2);
    assert_int_equal(sbd_ring_next(r, total, 0, &s), 0);
    sbd_ring_free(r);
}

static void test_ring_oversized_append_keeps_tail(void **state)
{
    (void)state;
    const size_t limit = 16 * 1024;
    struct sbd_ring *r = sbd_ring_new(limit);
    sbd_ring_append(r, 1, "old", 3);
    size_t n = 100000;
    char *big = xmalloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)('0' + i % 10);
    sbd_ring_append(r, 2, big, n);
    assert_int_equal(sbd_ring_end(r), 3 + n);
    assert_true(sbd_ring_used(r) <= limit);
    struct sbd_ring_slice s;
    assert_int_equal(sbd_ring_next(r, 0, 0, &s), 1); /* the small chunk before stays */
    assert_int_equal(s.stream, 1);
    assert_memory_equal(s.data, "old", 3);
    assert_int_equal(sbd_ring_next(r, 3, 0, &s), 1);
    assert_true(s.dropped > n - limit);
    assert_true(s.len >= limit / 2);
    assert_int_equal(s.offset + s.len, 3 + n);
    assert_int_equal(s.data[s.len - 1], big[n - 1]);
    assert_int_equal(s.stream, 2);
    xfree(big);
    sbd_ring_free(r);
}

static void test_ring_limit_floor(void **state)
{
    (void)state;
    struct sbd_ring *r = sbd_ring_new(1);
    char block[20000];
    memset(block, 'z', sizeof(block));
    sbd_ring_append(r, 1, block, sizeof(block));
    assert_true(sbd_ring_used(r) <= 16 * 1024);
    assert_true(sbd_ring_end(r) - sbd_ring_start(r) > 8 * 1024);
    sbd_ring_free(r);
}

static void test_target_parse(void **state)
{
    (void)state;
    uint32_t id = 0;
    struct str action;
    assert_int_equal(sbd_bg_target_parse(STR_LIT("12"), &id, &action), 0);
    assert_int_equal(id, 12);
    assert_int_equal(action.len, 0);
    assert_int_equal(sbd_bg_target_parse(STR_LIT("7/output"), &id, &action), 0);
    assert_int_equal(id, 7);
    assert_true(str_eq_c(action, "output"));
    const char *bad[] = {"", "0", "x", "-1", "4294967296", "12x/wait", "/wait"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(sbd_bg_target_parse(str_c(bad[i]), &id, &action), -EINVAL);
}

static void test_query_parse(void **state)
{
    (void)state;
    struct sbd_bg_query q;
    const char *msg = NULL;
    assert_int_equal(sbd_bg_query_parse(STR_LIT(""), &q, &msg), 0);
    assert_true(q.follow);
    assert_int_equal(q.offset, 0);
    assert_true(q.timeout_s < 0);
    assert_int_equal(sbd_bg_query_parse(STR_LIT("follow=false&offset=123&timeout=1.5"), &q, &msg),
                     0);
    assert_false(q.follow);
    assert_int_equal(q.offset, 123);
    assert_true(q.timeout_s == 1.5);
    const char *bad[] = {"follow=maybe", "offset=-1", "offset=x", "timeout=-1", "timeout=1e9",
                         "timeout=nan",  "timeout=",  "offset=",  "timeout=1s", "follow=%ZZ"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        msg = NULL;
        assert_int_equal(sbd_bg_query_parse(str_c(bad[i]), &q, &msg), -EINVAL);
        assert_non_null(msg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_empty),
        cmocka_unit_test(test_ring_merges_and_tags),
        cmocka_unit_test(test_ring_small_chunks_keep_everything),
        cmocka_unit_test(test_ring_evicts_oldest),
        cmocka_unit_test(test_ring_many_tiny_chunks),
        cmocka_unit_test(test_ring_oversized_append_keeps_tail),
        cmocka_unit_test(test_ring_limit_floor),
        cmocka_unit_test(test_target_parse),
        cmocka_unit_test(test_query_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
