/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox golden tables: list, pools, get claims (wide and -A), and -o name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/xalloc.h"

/* Prints items (JSON text) as `what` with output fmt; returns stdout's text (xfree). */
static char *render(const char *what, const char *fmt, bool all, const char *items_json)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    FILE *err = fopen("/dev/null", "w");
    struct cli_globals g = {.output = fmt, .all_namespaces = all, .out = out, .err = err};
    json_t *items = json_loads(items_json, 0, NULL);
    assert_non_null(items);
    assert_int_equal(cli_print_items(&g, what, items), CLI_OK);
    json_decref(items);
    fclose(out);
    fclose(err);
    return text;
}

/* No creationTimestamp: AGE is "<unknown>", so the output does not depend on the clock. */
static const char sandboxes[] =
    "[{\"metadata\":{\"name\":\"alpha\",\"namespace\":\"a\","
    "\"annotations\":{\"agents.x-k8s.io/pod-name\":\"pool-x1\"}},"
    "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
    "\"reason\":\"DependenciesReady\"}],\"nodeName\":\"node-1\",\"podIPs\":[\"10.0.0.7\"]}},"
    "{\"metadata\":{\"name\":\"b\",\"namespace\":\"long-namespace\"},"
    "\"spec\":{\"operatingMode\":\"Suspended\"},"
    "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\","
    "\"reason\":\"SandboxSuspended\"}]}}]";

static void test_list_golden(void **state)
{
    (void)state;
    char *t = render("list", "", false, sandboxes);
    assert_string_equal(t, "NAME    READY   REASON              POD       NODE     AGE\n"
                           "alpha   True    DependenciesReady   pool-x1   node-1   <unknown>\n"
                           "b       False   SandboxSuspended    <none>    <none>   <unknown>\n");
    xfree(t);
    t = render("list", "wide", true, sandboxes);
    assert_string_equal(
        t, "NAMESPACE        NAME    READY   REASON              POD       NODE     MODE        IP"
           "         AGE\n"
           "a                alpha   True    DependenciesReady   pool-x1   node-1   Running     "
           "10.0.0.7   <unknown>\n"
           "long-namespace   b       False   SandboxSuspended    <none>    <none>   Suspended   "
           "<none>     <unknown>\n");
    xfree(t);
    t = render("list", "name", false, sandboxes);
    assert_string_equal(t, "sandbox.agents.x-k8s.io/alpha\nsandbox.agents.x-k8s.io/b\n");
    xfree(t);
    t = render("list", "", false, "[]");
    assert_string_equal(t, ""); /* "No sandboxes found." goes to stderr */
    xfree(t);
}

static void test_pools_and_claims_golden(void **state)
{
    (void)state;
    char *t = render("pools", "", false,
                     "[{\"metadata\":{\"name\":\"python\"},\"spec\":{\"replicas\":10,"
                     "\"sandboxTemplateRef\":{\"name\":\"py-tmpl\"}},"
                     "\"status\":{\"readyReplicas\":7}},"
                     "{\"metadata\":{\"name\":\"empty\"},\"spec\":{\"replicas\":0,"
                     "\"sandboxTemplateRef\":{\"name\":\"t\"}}}]");
    assert_string_equal(t, "NAME     TEMPLATE   DESIRED   READY   AGE\n"
                           "python   py-tmpl    10        7       <unknown>\n"
                           "empty    t          0         0       <unknown>\n");
    xfree(t);
    t = render("claims", "", false,
               "[{\"metadata\":{\"name\":\"c1\"},\"status\":{\"sandbox\":{\"name\":\"python-ab\"},"
               "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"Bound\"}]}}]");
    assert_string_equal(t, "NAME   READY   SANDBOX     REASON   AGE\n"
                           "c1     True    python-ab   Bound    <unknown>\n");
    xfree(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_golden),
        cmocka_unit_test(test_pools_and_claims_golden),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
