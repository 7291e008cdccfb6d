/* SPDX-License-Identifier: Apache-2.0 */
/* Commands not implemented yet. */
#include "cli/cli.h"

#define PENDING(n)                                                     \
    int cli_cmd_##n(struct cli_globals *g, int argc, char **argv)      \
    {                                                                  \
        (void)argc, (void)argv;                                        \
        fprintf(g->err, "error: %s is not implemented yet\n", #n);     \
        return CLI_ERR;                                                \
    }                                                                  \
    void cli_help_##n(FILE *out)                                       \
    {                                                                  \
        fprintf(out, "kubectl-sandbox %s: not implemented yet\n", #n); \
    }

PENDING(install)
PENDING(uninstall)
PENDING(completion)
