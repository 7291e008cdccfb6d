/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: --namespace lists (controller/ns_source.h), table-driven. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "controller/ns_source.h"

static void test_valid(void **state)
{
    static const struct {
        const char *in;
        size_t n;
        const char *joined; /* the names, joined by '|' */
    } v[] = {
        {NULL, 0, ""},
        {"", 0, ""},
        {"a", 1, "a"},
        {"team-a,team-b", 2, "team-a|team-b"},
        {" a , b,c ", 3, "a|b|c"},
        {"x1,y2,z3,0", 4, "x1|y2|z3|0"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char **nsv = NULL, joined[256] = "";
        size_t n = 99, len = 0;
        if (ctrl_ns_list_parse(v[i].in, &nsv, &n) != 0)
            fail_msg("\"%s\": refused", v[i].in ? v[i].in : "(null)");
        assert_int_equal(n, v[i].n);
        for (size_t k = 0; k < n; k++)
            len +=
                (size_t)snprintf(joined + len, sizeof(joined) - len, "%s%s", k ? "|" : "", nsv[k]);
        assert_string_equal(joined, v[i].joined);
        ctrl_ns_list_free(nsv, n);
    }
}

static void test_invalid(void **state)
{
    static const char *const v[] = {
        ",",    "a,",   ",a",
        "a,,b", "A",    "a_b",
        "a.b",  "-a",   "a-",
        "a,a",  "a, a", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", /* 64 */
    };
    char many[1024] = "";
    char **nsv = NULL;
    size_t n = 7, len = 0;
    (void)state;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        if (ctrl_ns_list_parse(v[i], &nsv, &n) != -EINVAL)
            fail_msg("\"%s\": accepted", v[i]);
    assert_int_equal(n, 7);
    for (int i = 0; i <= LIMIT_CTRL_NAMESPACES; i++)
        len += (size_t)snprintf(many + len, sizeof(many) - len, "%sn%d", i ? "," : "", i);
    assert_int_equal(ctrl_ns_list_parse(many, &nsv, &n), -EINVAL);
}

static void test_source_only_for_several(void **state)
{
    struct ctrl_ns_source *s = (void *)1;
    struct kube_informer_source src = {0};
    (void)state;
    assert_int_equal(ctrl_ns_source_for(NULL, &s, &src), 0);
    assert_null(s);
    assert_int_equal(ctrl_ns_source_for("one", &s, &src), 0);
    assert_null(s);
    assert_null(src.list_pages);
    assert_int_equal(ctrl_ns_source_for("a,b", &s, &src), 0);
    assert_non_null(s);
    assert_non_null(src.list_pages);
    assert_non_null(src.watch);
    assert_ptr_equal(src.ctx, s);
    ctrl_ns_source_free(s);
    assert_int_equal(ctrl_ns_source_for("a,B", &s, &src), -EINVAL);
    ctrl_ns_source_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_source_only_for_several),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
