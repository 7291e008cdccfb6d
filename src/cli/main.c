/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox entry point: global options, then dispatch to a subcommand. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/log.h"

static const struct cli_cmd commands[] = {
    {"get", "List or show sandboxes, templates, claims and warm pools", cli_cmd_get, cli_help_get},
    {"version", "Print the client and server versions", cli_cmd_version, cli_help_version},
};

static void usage(FILE *out)
{
    fprintf(out, "kubectl-sandbox: manage Agent Sandbox sandboxes (also as `kubectl sandbox`).\n\n"
                 "Usage: kubectl-sandbox [global options] COMMAND [options] [args]\n\n"
                 "Commands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "\nGlobal options (also accepted after COMMAND):\n"
            "  --kubeconfig PATH   kubeconfig file (default: $KUBECONFIG, ~/.kube/config,\n"
            "                      else in-cluster)\n"
            "  --context NAME      kubeconfig context to use\n"
            "  -n, --namespace NS  namespace (default: the context's)\n"
            "  -A, --all-namespaces\n"
            "  -o, --output FMT    wide | json | yaml | name\n"
            "  -l, --selector SEL  label selector\n"
            "  -v, --v LEVEL       log level (error, warn, info, debug, trace)\n"
            "  -h, --help          this help; `COMMAND --help` for a command's\n\n"
            "Exit codes: 0 ok, 1 request failed, 2 usage error, 3 no usable cluster config.\n");
}

static const struct option long_opts[] = {
    {"kubeconfig", required_argument, NULL, 'K'},
    {"context", required_argument, NULL, 'C'},
    {"namespace", required_argument, NULL, 'n'},
    {"all-namespaces", no_argument, NULL, 'A'},
    {"output", required_argument, NULL, 'o'},
    {"selector", required_argument, NULL, 'l'},
    {"v", required_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Parses global options anywhere on the line; leaves positional arguments in argv. */
static int parse_globals(struct cli_globals *g, int argc, char **argv, const char *optstring,
                         bool *help)
{
    int c;
    enum log_level lv;
    opterr = 0;
    while ((c = getopt_long(argc, argv, optstring, long_opts, NULL)) != -1) {
        switch (c) {
        case 'K':
            g->kubeconfig = optarg;
            break;
        case 'C':
            g->context = optarg;
            break;
        case 'n':
            g->ns = optarg;
            break;
        case 'A':
            g->all_namespaces = true;
            break;
        case 'o':
            g->output = optarg;
            break;
        case 'l':
            g->selector = optarg;
            break;
        case 'h':
            *help = true;
            break;
        case 'v':
            if (log_parse_level(optarg, &lv) < 0) {
                fprintf(g->err, "error: invalid log level %s\n", optarg);
                return -1;
            }
            log_set_level(lv);
            break;
        default:
            fprintf(g->err, "error: unknown or incomplete option %s\n", argv[optind - 1]);
            return -1;
        }
    }
    return 0;
}

static const struct cli_cmd *find_cmd(const char *name)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

int main(int argc, char **argv)
{
    struct cli_globals g = {.output = "", .out = stdout, .err = stderr};
    bool help = false;
    log_set_component("kubectl-sandbox");
    log_set_level(LOG_WARN);
    /* "+": stop at the command name; options after it are parsed with the command. */
    if (parse_globals(&g, argc, argv, "+n:Ao:l:v:h", &help) < 0)
        return CLI_USAGE;
    if (optind >= argc) {
        usage(help ? stdout : stderr);
        return help ? CLI_OK : CLI_USAGE;
    }
    const struct cli_cmd *cmd = find_cmd(argv[optind]);
    if (!cmd) {
        fprintf(stderr, "error: unknown command \"%s\"; see kubectl-sandbox --help\n",
                argv[optind]);
        return CLI_USAGE;
    }
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    optind = 0; /* 0, not 1: glibc re-initialises its permutation state */
    /* GNU getopt permutes: positional arguments end up after optind. */
    if (parse_globals(&g, sub_argc, sub_argv, "n:Ao:l:v:h", &help) < 0)
        return CLI_USAGE;
    if (help) {
        cmd->help(stdout);
        return CLI_OK;
    }
    return cmd->run(&g, sub_argc - optind, sub_argv + optind);
}
