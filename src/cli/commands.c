/* SPDX-License-Identifier: Apache-2.0 */
/* The kubectl-sandbox command table (used by main, --help and shell completion). */
#include "cli/cli.h"

#define OUTF "--output --selector --all-namespaces"

const struct cli_cmd cli_commands[] = {
    {"create", "Create a sandbox from a pool (claim), a template or a file", cli_cmd_create,
     cli_help_create, "--pool --template --filename --wait --timeout --output"},
    {"claim", "Claim a sandbox from a warm pool and print its name", cli_cmd_claim, cli_help_claim,
     "--name --timeout --no-wait --output"},
    {"list", "List sandboxes (Ready, Reason, Pod, Node, Age)", cli_cmd_list, cli_help_list, OUTF},
    {"get", "List or show sandboxes, templates, claims and warm pools", cli_cmd_get, cli_help_get,
     OUTF},
    {"describe", "Show a sandbox with its conditions, pod, claim, pool and events",
     cli_cmd_describe, cli_help_describe, ""},
    {"pools", "List warm pools with desired and ready sandboxes", cli_cmd_pools, cli_help_pools,
     OUTF},
    {"exec", "Run a command in a sandbox (through sandboxd)", cli_cmd_exec, cli_help_exec,
     "--stdin --tty --cwd --env --timeout"},
    {"run-code", "Run Python code in a sandbox's code context (state kept)", cli_cmd_run_code,
     cli_help_run_code, "--code --code-context --timeout --json"},
    {"cp", "Copy files and directories to and from a sandbox", cli_cmd_cp, cli_help_cp, ""},
    {"logs", "Print the logs of a sandbox's pod", cli_cmd_logs, cli_help_logs,
     "--container --follow --tail"},
    {"suspend", "Suspend a sandbox (its pod is deleted, storage kept)", cli_cmd_suspend,
     cli_help_suspend, "--wait --timeout"},
    {"resume", "Resume a suspended sandbox", cli_cmd_resume, cli_help_resume, "--wait --timeout"},
    {"delete", "Delete sandboxes (or the claims that own them)", cli_cmd_delete, cli_help_delete,
     "--wait --timeout"},
    {"install", "Install CRDs, RBAC, controller and router into the cluster", cli_cmd_install,
     cli_help_install, "--dry-run --wait --timeout"},
    {"uninstall", "Remove what install installed", cli_cmd_uninstall, cli_help_uninstall,
     "--keep-crds --yes"},
    {"completion", "Print a shell completion script (bash or zsh)", cli_cmd_completion,
     cli_help_completion, ""},
    {"version", "Print the client and server versions", cli_cmd_version, cli_help_version,
     "--client"},
    {NULL, NULL, NULL, NULL, NULL},
};
