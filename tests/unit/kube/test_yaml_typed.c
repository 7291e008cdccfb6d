/* SPDX-License-Identifier: Apache-2.0 */
/* Typed YAML loading for manifests: numbers become JSON numbers, the rest as before. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <stdbool.h>
#include <string.h>

#include "kube/yaml.h"

static json_t *load(const char *y, bool typed)
{
    json_t *v = NULL;
    char err[256];
    int r = typed ? kube_yaml_load_typed(y, strlen(y), &v, err, sizeof(err))
                  : kube_yaml_load(y, strlen(y), &v, err, sizeof(err));
    assert_int_equal(r, 0);
    return v;
}

static void test_numbers(void **state)
{
    (void)state;
    json_t *v = load("a: 42\nb: -7\nc: 1.5\nd: 1e3\ne: \"42\"\nf: 0x1F\ng: 1.2.3\nh: v1\n"
                     "i: true\nj: ~\nk: 99999999999999999999\nl: '7'\nm: 12abc\n",
                     true);
    assert_true(json_is_integer(json_object_get(v, "a")));
    assert_int_equal(json_integer_value(json_object_get(v, "a")), 42);
    assert_int_equal(json_integer_value(json_object_get(v, "b")), -7);
    assert_true(json_is_real(json_object_get(v, "c")));
    assert_true(json_real_value(json_object_get(v, "d")) == 1000.0);
    assert_string_equal(json_string_value(json_object_get(v, "e")), "42"); /* quoted */
    assert_string_equal(json_string_value(json_object_get(v, "f")), "0x1F");
    assert_string_equal(json_string_value(json_object_get(v, "g")), "1.2.3");
    assert_string_equal(json_string_value(json_object_get(v, "h")), "v1");
    assert_true(json_is_true(json_object_get(v, "i")));
    assert_true(json_is_null(json_object_get(v, "j")));
    assert_true(json_is_real(json_object_get(v, "k"))); /* too big for int64 */
    assert_string_equal(json_string_value(json_object_get(v, "l")), "7");
    assert_string_equal(json_string_value(json_object_get(v, "m")), "12abc");
    json_decref(v);
}

static void test_untyped_keeps_strings(void **state)
{
    (void)state;
    json_t *v = load("port: 6443\nname: 123\n", false);
    assert_string_equal(json_string_value(json_object_get(v, "port")), "6443");
    assert_string_equal(json_string_value(json_object_get(v, "name")), "123");
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_untyped_keeps_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
