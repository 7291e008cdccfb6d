/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox stat/mkdir/mv/watch helpers: request paths and watch event lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "cli/fs.h"

static void test_api_path(void **state)
{
    (void)state;
    static const struct {
        const char *prefix, *in, *want;
    } cases[] = {
        {"/v1/stat/", "a b/c", "/v1/stat/a%20b/c"},
        {"/v1/watch/", "", "/v1/watch/"},
        {"/v1/mkdir/", "//x/y?z#", "/v1/mkdir/x/y%3Fz%23"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct buf b;
        buf_init(&b, 1024);
        assert_int_equal(cli_fs_api_path(cases[i].prefix, cases[i].in, &b), 0);
        assert_string_equal(buf_str(&b), cases[i].want);
        buf_done(&b);
    }
    struct buf small;
    buf_init(&small, 12);
    assert_int_equal(cli_fs_api_path("/v1/stat/", "abcdefghijkl", &small), -E2BIG);
    buf_done(&small);
}

static void test_format_event(void **state)
{
    (void)state;
    static const struct {
        const char *json, *want;
        int rc;
    } cases[] = {
        {"{\"type\":\"create\",\"path\":\"a/b\",\"is_dir\":false}", "create    a/b\n", 0},
        {"{\"type\":\"create\",\"path\":\"d\",\"is_dir\":true}", "create    d/\n", 0},
        {"{\"type\":\"delete\",\"path\":\"\",\"is_dir\":true}", "delete    ./\n", 0},
        {"{\"type\":\"move\",\"path\":\"b\",\"from\":\"a\",\"to\":\"b\",\"is_dir\":false}",
         "move      a -> b\n", 0},
        {"{\"type\":\"overflow\",\"lost\":3}", "overflow  3 events lost\n", 0},
        {"{\"type\":\"overflow\",\"lost\":null}", "overflow  events lost\n", 0},
        {"{\"type\":\"error\",\"message\":\"too many\"}", "error     too many\n", 0},
        {"{\"type\":\"ready\",\"path\":\"/\"}", "", 1},
        {"{\"path\":\"x\"}", "", -EINVAL},
        /* names from the sandbox reach the terminal without controls */
        {"{\"type\":\"create\",\"path\":\"\\u001b]52;c;aGk=\\u0007\",\"is_dir\":false}",
         "create    \\x1b]52;c;aGk=\\x07\n", 0},
        {"{\"type\":\"move\",\"from\":\"a\\nb\",\"to\":\"\\u009b31m\",\"is_dir\":false}",
         "move      a\\x0ab -> \\xc2\\x9b31m\n", 0},
        {"{\"type\":\"error\",\"message\":\"\\u001b[2J\\u007f\"}", "error     \\x1b[2J\\x7f\n", 0},
        {"{\"type\":\"\\u001b[H\",\"path\":\"p\"}", "\\x1b[H       p\n", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *j = json_loads(cases[i].json, 0, NULL);
        assert_non_null(j);
        struct buf b;
        buf_init(&b, 1024);
        assert_int_equal(cli_fs_format_event(j, &b), cases[i].rc);
        assert_string_equal(buf_str(&b), cases[i].want);
        assert_null(memchr(buf_str(&b), 0x1b, b.len));
        buf_done(&b);
        json_decref(j);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_path),
        cmocka_unit_test(test_format_event),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
