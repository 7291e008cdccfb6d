/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox entry point: global options, then dispatch to a subcommand. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/log.h"
#include "common/xalloc.h"

static void usage(FILE *out)
{
    fprintf(out, "kubectl-sandbox: manage Agent Sandbox sandboxes (also as `kubectl sandbox`).\n\n"
                 "Usage: kubectl-sandbox [global options] COMMAND [options] [args]\n\n"
                 "Commands:\n");
    for (const struct cli_cmd *c = cli_commands; c->name; c++)
        fprintf(out, "  %-12s %s\n", c->name, c->summary);
    fprintf(out,
            "\nGlobal options (also accepted after COMMAND):\n"
            "  --kubeconfig PATH   kubeconfig file (default: $KUBECONFIG, ~/.kube/config,\n"
            "                      else in-cluster)\n"
            "  --context NAME      kubeconfig context to use\n"
            "  -n, --namespace NS  namespace (default: the context's)\n"
            "  -A, --all-namespaces\n"
            "  -o, --output FMT    wide | json | yaml | name\n"
            "  -l, --selector SEL  label selector\n"
            "  --router-url URL    reach sandboxd through sandbox-router at URL\n"
            "                      (also $AGENT_SANDBOX_ROUTER_URL); default: the API\n"
            "                      server's pod proxy. Bearer token: $AGENT_SANDBOX_ROUTER_TOKEN,\n"
            "                      else the kubeconfig's: that one goes over plain http\n"
            "                      only to a loopback host (or from in-cluster config, or\n"
            "                      with $AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN=true)\n"
            "  --sandboxd-url URL  debugging: talk to one sandboxd directly at URL (also\n"
            "                      $AGENT_SANDBOX_SANDBOXD_URL); the sandbox is not looked up\n"
            "  --sandboxd-port N   sandboxd's port in the pod (default 8080)\n"
            "  -v, --v LEVEL       log level (error, warn, info, debug, trace)\n"
            "  --log-format F      log lines on stderr: text (default) or json\n"
            "  -h, --help          this help; `COMMAND --help` for a command's\n\n"
            "Exit codes: 0 ok, 1 request failed, 2 usage error, 3 no usable cluster config,\n"
            "4 timed out waiting, 5 sandboxd unreachable or failed; exec returns the\n"
            "command's exit code.\n");
}

static const struct cli_cmd *find_cmd(const char *name)
{
    for (const struct cli_cmd *c = cli_commands; c->name; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

int main(int argc, char **argv)
{
    struct cli_globals g = {.output = "", .out = stdout, .err = stderr};
    char **rest = NULL;
    /* a reader of the output that went away (| head) is an EPIPE each command ends on
     * quietly (cli_output_done, the streams' write errors), not a death by SIGPIPE (141) */
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigemptyset(&ign.sa_mask);
    (void)sigaction(SIGPIPE, &ign, NULL);
    log_set_component("kubectl-sandbox");
    log_set_level(LOG_WARN);
    int n = cli_split_globals(&g, argc, argv, &rest);
    if (n < 0)
        return CLI_USAGE;
    cli_globals_env(&g);
    int rc = CLI_USAGE;
    const struct cli_cmd *cmd = n > 0 ? find_cmd(rest[0]) : NULL;
    if (n == 0) {
        usage(g.help ? stdout : stderr);
        rc = g.help ? CLI_OK : CLI_USAGE;
    } else if (!cmd) {
        fprintf(stderr, "error: unknown command \"%s\"; see kubectl-sandbox --help\n", rest[0]);
    } else if (g.help) {
        cmd->help(stdout);
        rc = CLI_OK;
    } else {
        rc = cmd->run(&g, n, rest);
    }
    xfree(rest);
    return cli_output_done(stdout, stderr, rc);
}
