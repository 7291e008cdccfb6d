/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/hash: FNV-1a 32-bit reference values and piecewise feeding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <string.h>

#include "common/hash.h"

static uint32_t fnv(const char *s)
{
    return hash_fnv1a32(HASH_FNV1A32_INIT, s, strlen(s));
}

static void test_reference_values(void **state)
{
    (void)state;
    /* From the FNV reference test suite (Noll). */
    assert_int_equal(fnv(""), 0x811c9dc5u);
    assert_int_equal(fnv("a"), 0xe40c292cu);
    assert_int_equal(fnv("foobar"), 0xbf9cf968u);
    /* Bytes >= 0x80 are taken unsigned. */
    assert_int_equal(hash_fnv1a32(HASH_FNV1A32_INIT, "\xff", 1),
                     (0x811c9dc5u ^ 0xffu) * 0x01000193u);
}

static void test_piecewise(void **state)
{
    (void)state;
    uint32_t h = hash_fnv1a32(HASH_FNV1A32_INIT, "foo", 3);
    h = hash_fnv1a32(h, "", 0);
    h = hash_fnv1a32(h, "bar", 3);
    assert_int_equal(h, fnv("foobar"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_values),
        cmocka_unit_test(test_piecewise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
