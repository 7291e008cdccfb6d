/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox version: client version and, when a cluster is reachable, the API
 * server's version (GET /version). */
#include <string.h>

#include "as_version.h"
#include "cli/cli.h"
#include "kube/obj.h"

void cli_help_version(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox version [--client]\n\n"
                 "Prints the client version, then the API server's version.\n"
                 "  --client   only the client version (no cluster needed)\n"
                 "Exit codes: 0 ok, 1 the API server did not answer, 2 usage, 3 no usable\n"
                 "cluster config.\n");
}

int cli_cmd_version(struct cli_globals *g, int argc, char **argv)
{
    bool client_only = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--client") != 0) {
            fprintf(g->err, "error: unexpected argument %s\n", argv[i]);
            return CLI_USAGE;
        }
        client_only = true;
    }
    fprintf(g->out, "Client Version: %s\n", AS_VERSION);
    if (client_only)
        return CLI_OK;
    struct kube_client *c = NULL;
    int r = cli_client(g, &c);
    if (r != CLI_OK)
        return r;
    struct kube_req req;
    struct kube_err e;
    json_t *v = NULL;
    kube_req_init(&req, "GET", NULL);
    req.raw_path = "/version";
    r = kube_request(c, &req, &v, &e);
    if (r < 0) {
        r = cli_fail(g, "cannot reach the API server", r, &e);
    } else {
        const char *gv = kube_obj_path_str(v, "gitVersion");
        fprintf(g->out, "Server Version: %s\n", gv ? gv : "unknown");
        r = CLI_OK;
    }
    json_decref(v);
    kube_client_free(c);
    return r;
}
