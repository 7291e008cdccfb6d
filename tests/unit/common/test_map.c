/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/map: insert/replace/remove, resize, iteration, destructor,
 * binary keys and the SipHash-2-4 reference vectors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "common/map.h"
#include "common/xalloc.h"

static int freed;

static void count_free(void *v)
{
    freed++;
    xfree(v);
}

static void test_put_get_replace(void **state)
{
    (void)state;
    struct map *m = map_new(NULL);
    int a = 1, b = 2;
    void *old = &a;
    assert_null(map_get(m, "x"));
    assert_int_equal(map_put(m, "x", &a, &old), 1);
    assert_null(old);
    assert_ptr_equal(map_get(m, "x"), &a);
    assert_int_equal(map_put(m, "x", &b, &old), 0);
    assert_ptr_equal(old, &a);
    assert_ptr_equal(map_get(m, "x"), &b);
    assert_int_equal(map_len(m), 1);
    assert_null(map_get(m, "y"));
    map_free(m);
}

static void test_key_is_copied(void **state)
{
    (void)state;
    struct map *m = map_new(NULL);
    char key[8];
    (void)snprintf(key, sizeof(key), "k1");
    assert_int_equal(map_put(m, key, key, NULL), 1);
    (void)snprintf(key, sizeof(key), "k2");
    assert_ptr_equal(map_get(m, "k1"), key);
    assert_null(map_get(m, "k2"));
    map_free(m);
}

static void test_null_value_and_find(void **state)
{
    (void)state;
    struct map *m = map_new(NULL);
    void *v = &v;
    assert_false(map_find(m, "n", 1, &v));
    assert_ptr_equal(v, &v); /* untouched on miss */
    assert_int_equal(map_put(m, "n", NULL, NULL), 1);
    assert_true(map_find(m, "n", 1, &v));
    assert_null(v);
    assert_true(map_find(m, "n", 1, NULL));
    map_free(m);
}

static void test_many_keys_resize_remove(void **state)
{
    (void)state;
    enum { N = 20000 };
    struct map *m = map_new(NULL);
    char key[32];
    for (uintptr_t i = 0; i < N; i++) {
        (void)snprintf(key, sizeof(key), "key-%lu", (unsigned long)i);
        assert_int_equal(map_put(m, key, (void *)(i + 1), NULL), 1);
    }
    assert_int_equal(map_len(m), N);
    for (uintptr_t i = 0; i < N; i++) {
        (void)snprintf(key, sizeof(key), "key-%lu", (unsigned long)i);
        assert_ptr_equal(map_get(m, key), (void *)(i + 1));
    }
    /* Remove the even keys; every odd key must survive the backward shifts. */
    for (uintptr_t i = 0; i < N; i += 2) {
        (void)snprintf(key, sizeof(key), "key-%lu", (unsigned long)i);
        assert_ptr_equal(map_remove(m, key), (void *)(i + 1));
    }
    assert_int_equal(map_len(m), N / 2);
    for (uintptr_t i = 0; i < N; i++) {
        (void)snprintf(key, sizeof(key), "key-%lu", (unsigned long)i);
        if (i % 2)
            assert_ptr_equal(map_get(m, key), (void *)(i + 1));
        else
            assert_null(map_get(m, key));
    }
    assert_null(map_remove(m, "key-0"));
    assert_null(map_remove(m, "absent"));
    map_free(m);
}

static void test_churn(void **state)
{
    (void)state;
    /* Repeated insert/remove of a small working set keeps lookups correct and the
     * table small (no tombstones accumulate). */
    struct map *m = map_new(NULL);
    char key[32];
    for (uintptr_t round = 0; round < 2000; round++) {
        for (uintptr_t i = 0; i < 5; i++) {
            (void)snprintf(key, sizeof(key), "%lu/%lu", (unsigned long)round, (unsigned long)i);
            assert_int_equal(map_put(m, key, (void *)(i + 1), NULL), 1);
        }
        for (uintptr_t i = 0; i < 5; i++) {
            (void)snprintf(key, sizeof(key), "%lu/%lu", (unsigned long)round, (unsigned long)i);
            assert_ptr_equal(map_get(m, key), (void *)(i + 1));
            assert_ptr_equal(map_remove(m, key), (void *)(i + 1));
        }
        assert_int_equal(map_len(m), 0);
    }
    map_free(m);
}

static void test_iteration(void **state)
{
    (void)state;
    enum { N = 100 };
    struct map *m = map_new(NULL);
    char key[16];
    for (uintptr_t i = 0; i < N; i++) {
        (void)snprintf(key, sizeof(key), "%lu", (unsigned long)i);
        (void)map_put(m, key, (void *)i, NULL);
    }
    int seen[N] = {0};
    struct map_iter it;
    const char *k;
    void *v;
    size_t count = 0;
    map_foreach (m, it, k, v) {
        uintptr_t i = (uintptr_t)v;
        assert_true(i < N);
        (void)snprintf(key, sizeof(key), "%lu", (unsigned long)i);
        assert_string_equal(k, key);
        seen[i]++;
        count++;
        /* Replacing a value during iteration is allowed. */
        (void)map_put(m, k, v, NULL);
    }
    assert_int_equal(count, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(seen[i], 1);
    size_t len = 0;
    map_iter_init(&it, m);
    assert_true(map_iter_next(&it, &k, &len, NULL));
    assert_int_equal(len, strlen(k));
    map_free(m);

    struct map *empty = map_new(NULL);
    map_iter_init(&it, empty);
    assert_false(map_iter_next(&it, &k, NULL, &v));
    map_free(empty);
}

static void test_destructor(void **state)
{
    (void)state;
    freed = 0;
    struct map *m = map_new(count_free);
    (void)map_put(m, "a", xstrdup("1"), NULL);
    (void)map_put(m, "b", xstrdup("2"), NULL);
    /* Replacing without ret_old frees the old value. */
    (void)map_put(m, "a", xstrdup("3"), NULL);
    assert_int_equal(freed, 1);
    /* Replacing with ret_old hands it back instead. */
    void *old = NULL;
    (void)map_put(m, "a", xstrdup("4"), &old);
    assert_int_equal(freed, 1);
    assert_string_equal(old, "3");
    xfree(old);
    /* Remove does not free. */
    char *v = map_remove(m, "b");
    assert_string_equal(v, "2");
    assert_int_equal(freed, 1);
    xfree(v);
    (void)map_put(m, "c", xstrdup("5"), NULL);
    map_clear(m);
    assert_int_equal(freed, 3);
    assert_int_equal(map_len(m), 0);
    assert_null(map_get(m, "a"));
    (void)map_put(m, "d", xstrdup("6"), NULL);
    map_free(m);
    assert_int_equal(freed, 4);
    map_free(NULL);
}

static void test_binary_keys(void **state)
{
    (void)state;
    struct map *m = map_new(NULL);
    const char k1[] = {'a', '\0', 'b'};
    const char k2[] = {'a', '\0', 'c'};
    int x = 1, y = 2, z = 3;
    assert_int_equal(map_putn(m, k1, 3, &x, NULL), 1);
    assert_int_equal(map_putn(m, k2, 3, &y, NULL), 1);
    assert_int_equal(map_putn(m, k1, 1, &z, NULL), 1); /* "a" */
    assert_int_equal(map_putn(m, "", 0, &z, NULL), 1);
    assert_int_equal(map_len(m), 4);
    assert_ptr_equal(map_getn(m, k1, 3), &x);
    assert_ptr_equal(map_getn(m, k2, 3), &y);
    assert_ptr_equal(map_get(m, "a"), &z);
    assert_ptr_equal(map_get(m, ""), &z);
    assert_null(map_getn(m, k1, 2));
    struct map_iter it;
    const char *k;
    size_t len;
    void *v;
    int found = 0;
    map_iter_init(&it, m);
    while (map_iter_next(&it, &k, &len, &v)) {
        if (v == &x) {
            assert_int_equal(len, 3);
            assert_memory_equal(k, k1, 3);
            assert_int_equal(k[3], '\0');
            found++;
        }
    }
    assert_int_equal(found, 1);
    assert_ptr_equal(map_removen(m, k2, 3), &y);
    assert_null(map_getn(m, k2, 3));
    assert_ptr_equal(map_getn(m, k1, 3), &x);
    map_free(m);
}

static void test_siphash_vectors(void **state)
{
    (void)state;
    /* Reference vectors from the SipHash paper: key 00..0f, message 00..(n-1). */
    uint8_t k[16], msg[64];
    for (int i = 0; i < 16; i++)
        k[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    assert_true(map_siphash24(k, msg, 0) == 0x726fdb47dd0e0e31ULL);
    assert_true(map_siphash24(k, msg, 1) == 0x74f839c593dc67fdULL);
    assert_true(map_siphash24(k, msg, 8) == 0x93f5f5799a932462ULL);
    assert_true(map_siphash24(k, msg, 15) == 0xa129ca6149be45e5ULL);
    assert_true(map_siphash24(k, msg, 63) == 0x958a324ceb064572ULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_replace),
        cmocka_unit_test(test_key_is_copied),
        cmocka_unit_test(test_null_value_and_find),
        cmocka_unit_test(test_many_keys_resize_remove),
        cmocka_unit_test(test_churn),
        cmocka_unit_test(test_iteration),
        cmocka_unit_test(test_destructor),
        cmocka_unit_test(test_binary_keys),
        cmocka_unit_test(test_siphash_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
