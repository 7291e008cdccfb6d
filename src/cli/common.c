/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the kubectl-sandbox commands: client set-up and error reporting. */
#include <string.h>

#include "cli/cli.h"

int cli_client(const struct cli_globals *g, struct kube_client **ret)
{
    struct kube_config_opts o = {
        .kubeconfig = g->kubeconfig, .context = g->context, .namespace_override = g->ns};
    struct kube_config *cfg = NULL;
    struct kube_err e;
    kube_err_clear(&e);
    int r = kube_config_load(&o, &cfg, &e);
    if (r < 0) {
        fprintf(g->err, "error: no usable cluster configuration: %s\n",
                e.message[0] ? e.message : "unknown error");
        return CLI_NO_CONFIG;
    }
    r = kube_client_new(cfg, &(struct kube_client_opts){.user_agent = "kubectl-sandbox"}, ret);
    if (r < 0) {
        fprintf(g->err, "error: cannot create the API client\n");
        return CLI_NO_CONFIG;
    }
    return CLI_OK;
}

int cli_fail(const struct cli_globals *g, const char *what, int r, const struct kube_err *e)
{
    char eb[128];
    const char *msg = e && e->message[0] ? e->message : strerror_r(-r, eb, sizeof(eb));
    if (e && e->http_status == 404 && !e->reason[0])
        msg = "the server does not know this resource type; are the Agent Sandbox CRDs "
              "installed? (kubectl apply -f api/crds/)";
    fprintf(g->err, "error: %s: %s\n", what, msg);
    return CLI_ERR;
}

const char *cli_namespace(const struct cli_globals *g, const struct kube_client *c)
{
    return g->ns ? g->ns : kube_client_namespace(c);
}
