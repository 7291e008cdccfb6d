/* SPDX-License-Identifier: Apache-2.0 */
/* cli_rollout_done: when `install --wait` counts a Deployment as rolled out (an upgrade
 * too: Available alone is true while the old pods still serve). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

struct rollout_case {
    const char *name;
    const char *deploy; /* JSON */
    int want;
    const char *why; /* a substring of why when want <= 0 */
};

#define AVAILABLE "{\"type\":\"Available\",\"status\":\"True\"}"
#define DEADLINE \
    "{\"type\":\"Progressing\",\"status\":\"False\",\"reason\":\"ProgressDeadlineExceeded\"}"

static const struct rollout_case cases[] = {
    {"generation not observed (an upgrade just applied, the old pods Available)",
     "{\"metadata\":{\"generation\":3},\"spec\":{\"replicas\":2},\"status\":{"
     "\"observedGeneration\":2,\"replicas\":2,\"updatedReplicas\":2,\"availableReplicas\":2,"
     "\"conditions\":[" AVAILABLE "]}}",
     0, "generation 3 not yet observed"},
    {"new replicas not all updated",
     "{\"metadata\":{\"generation\":3},\"spec\":{\"replicas\":2},\"status\":{"
     "\"observedGeneration\":3,\"replicas\":3,\"updatedReplicas\":1,\"availableReplicas\":2,"
     "\"conditions\":[" AVAILABLE "]}}",
     0, "1 of 2 new replicas updated"},
    {"old replicas left",
     "{\"metadata\":{\"generation\":3},\"spec\":{\"replicas\":2},\"status\":{"
     "\"observedGeneration\":3,\"replicas\":3,\"updatedReplicas\":2,\"availableReplicas\":2}}",
     0, "1 old replicas pending termination"},
    {"updated replicas not available (the new pods never start)",
     "{\"metadata\":{\"generation\":3},\"spec\":{\"replicas\":2},\"status\":{"
     "\"observedGeneration\":3,\"replicas\":2,\"updatedReplicas\":2,\"availableReplicas\":1}}",
     0, "1 of 2 updated replicas available"},
    {"progress deadline exceeded",
     "{\"metadata\":{\"generation\":3},\"spec\":{\"replicas\":2},\"status\":{"
     "\"observedGeneration\":3,\"replicas\":3,\"updatedReplicas\":1,\"availableReplicas\":2,"
     "\"conditions\":[" AVAILABLE "," DEADLINE "]}}",
     -ETIME, "ProgressDeadlineExceeded"},
    {"rolled out",
     "{\"metadata\":{\"generation\":3},\"spec\":{\"replicas\":2},\"status\":{"
     "\"observedGeneration\":3,\"replicas\":2,\"updatedReplicas\":2,\"availableReplicas\":2}}",
     1, NULL},
    {"spec.replicas absent means 1",
     "{\"metadata\":{\"generation\":1},\"spec\":{},\"status\":{"
     "\"observedGeneration\":1,\"replicas\":1,\"updatedReplicas\":1,\"availableReplicas\":1}}",
     1, NULL},
    {"scaled to zero",
     "{\"metadata\":{\"generation\":2},\"spec\":{\"replicas\":0},\"status\":{"
     "\"observedGeneration\":2}}",
     1, NULL},
    {"no status yet", "{\"metadata\":{\"generation\":1},\"spec\":{\"replicas\":1}}", 0,
     "not yet observed"},
};

static void test_rollout_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct rollout_case *c = &cases[i];
        json_error_t je;
        json_t *o = json_loads(c->deploy, 0, &je);
        if (!o)
            fail_msg("%s: bad fixture: %s", c->name, je.text);
        char why[200] = "";
        int r = cli_rollout_done(NULL, o, why, sizeof(why));
        json_decref(o);
        if (r != c->want)
            fail_msg("%s: got %d, want %d (%s)", c->name, r, c->want, why);
        if (c->why && !strstr(why, c->why))
            fail_msg("%s: why \"%s\" lacks \"%s\"", c->name, why, c->why);
    }
}

static void test_rollout_gone(void **state)
{
    (void)state;
    char why[64] = "";
    assert_int_equal(cli_rollout_done(NULL, NULL, why, sizeof(why)), 0);
    assert_string_equal(why, "not found");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rollout_cases),
        cmocka_unit_test(test_rollout_gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
