/* SPDX-License-Identifier: Apache-2.0 */
/* The STATE column of kubectl-sandbox ps for the process descriptions sandboxd lists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <jansson.h>

#include "cli/cli.h"

static void check(const char *json, const char *want)
{
    json_t *j = json_loads(json, 0, NULL);
    assert_non_null(j);
    char out[40];
    cli_proc_state(j, out, sizeof(out));
    assert_string_equal(out, want);
    json_decref(j);
}

static void test_states(void **state)
{
    (void)state;
    check("{\"state\":\"running\",\"exit_code\":null,\"signal\":null}", "running");
    check("{\"state\":\"exited\",\"exit_code\":0,\"signal\":null}", "exited 0");
    check("{\"state\":\"exited\",\"exit_code\":null,\"signal\":9}", "signal 9");
    check("{\"state\":\"exited\"}", "exited");
    /* an attached process of an older sandboxd: only "running" */
    check("{\"running\":true}", "running");
    check("{\"running\":false,\"exit_code\":3}", "exited 3");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_states)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
