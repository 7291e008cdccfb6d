/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox: shared state of one invocation and the command table. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "kube/client.h"

/* Exit codes (documented in --help and docs/cli.md). */
enum cli_exit {
    CLI_OK = 0,
    CLI_ERR = 1,       /* the request failed (API error, object not found, ...) */
    CLI_USAGE = 2,     /* bad command line */
    CLI_NO_CONFIG = 3, /* no usable kubeconfig / cluster unreachable */
};

/** Options every command understands (kubectl's names). */
struct cli_globals {
    const char *kubeconfig;
    const char *context;
    const char *ns;       /* -n/--namespace; NULL: the context's namespace */
    bool all_namespaces;  /* -A */
    const char *output;   /* -o: "", "wide", "json", "yaml", "name" */
    const char *selector; /* -l */
    FILE *out;
    FILE *err;
};

/** One subcommand: argv[0] is the subcommand name. */
struct cli_cmd {
    const char *name;
    const char *summary;
    int (*run)(struct cli_globals *g, int argc, char **argv);
    void (*help)(FILE *out);
};

/** Creates a client from the globals; on failure prints why and returns CLI_NO_CONFIG. */
int cli_client(const struct cli_globals *g, struct kube_client **ret);
/** Prints "error: <what>: <API message>" for a failed request and returns CLI_ERR. */
int cli_fail(const struct cli_globals *g, const char *what, int r, const struct kube_err *e);
/** Namespace to use: -n, else the client's default. Borrowed. */
const char *cli_namespace(const struct cli_globals *g, const struct kube_client *c);

int cli_cmd_version(struct cli_globals *g, int argc, char **argv);
void cli_help_version(FILE *out);
int cli_cmd_get(struct cli_globals *g, int argc, char **argv);
void cli_help_get(FILE *out);
