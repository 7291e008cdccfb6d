/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox: shared state of one invocation and the command table. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "api/sandbox.h"
#include "common/buf.h"
#include "common/clock.h"
#include "kube/client.h"

/* Exit codes (documented in --help and docs/cli.md). exec passes the remote command's
 * exit code through instead (see cmd_exec.c). */
enum cli_exit {
    CLI_OK = 0,
    CLI_ERR = 1,       /* the request failed (API error, object not found, ...) */
    CLI_USAGE = 2,     /* bad command line */
    CLI_NO_CONFIG = 3, /* no usable kubeconfig / cluster unreachable */
    CLI_TIMEOUT = 4,   /* --wait / claim: the condition did not come within --timeout */
    CLI_SBD = 5,       /* exec/cp/logs: sandboxd (or the path to it) failed */
};

/** Options every command understands (kubectl's names). All strings borrowed from argv
 * or the environment. */
/** The annotation shell stamps on what it creates for a session: its random session
 * token, by which the end of the session knows the object named shell-XXXXX is its own. */
#define CLI_ANN_SESSION SB_KEY_PREFIX "cli-session"

struct cli_globals {
    const char *kubeconfig;
    const char *context;
    const char *ns;             /* -n/--namespace; NULL: the context's namespace */
    bool all_namespaces;        /* -A */
    const char *output;         /* -o: "", "wide", "json", "yaml", "name" */
    const char *selector;       /* -l */
    const char *router_url;     /* --router-url / $AGENT_SANDBOX_ROUTER_URL */
    const char *router_token;   /* $AGENT_SANDBOX_ROUTER_TOKEN: bearer for the router
                                   (default: the kubeconfig's token) */
    bool router_plaintext_ok;   /* $AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN=true: the
                                   kubeconfig's token may go to an http router URL whose
                                   host is not loopback */
    const char *sandboxd_url;   /* --sandboxd-url / $AGENT_SANDBOX_SANDBOXD_URL: direct mode */
    const char *sandboxd_token; /* $AGENT_SANDBOX_SANDBOXD_TOKEN: bearer for direct mode */
    unsigned sandboxd_port;     /* --sandboxd-port: sandboxd's port in the pod (8080) */
    const char *session;        /* set by shell: the claims and Sandboxes created carry it
                                   as annotation CLI_ANN_SESSION (NULL: none) */
    bool help;                  /* -h/--help seen */
    FILE *out;
    FILE *err;
};

/** One subcommand. run gets argv[0] = the command name, then its own options and
 * arguments (global options already removed). */
struct cli_cmd {
    const char *name;
    const char *summary;
    int (*run)(struct cli_globals *g, int argc, char **argv);
    void (*help)(FILE *out);
    const char *flags; /* space-separated long flags, for shell completion */
};

/** The command table (main.c), terminated by an entry with name NULL. */
extern const struct cli_cmd cli_commands[];

/** Splits argv (argv[0] = program) into the globals g and the rest: *ret_rest gets a new
 * array (free with xfree; the strings are borrowed from argv) whose first entry is the
 * command name, followed by everything that is not a global option, in order. Tokens
 * after "--" are never interpreted. Returns the number of rest entries (0 when there is
 * no command), or -EINVAL after printing the problem to g->err. */
int cli_split_globals(struct cli_globals *g, int argc, char **argv, char ***ret_rest);
/** Reads $AGENT_SANDBOX_ROUTER_URL and friends for options not given. */
void cli_globals_env(struct cli_globals *g);

/** Creates a client from the globals; on failure prints why and returns CLI_NO_CONFIG. */
int cli_client(const struct cli_globals *g, struct kube_client **ret);
/** Loads the kubeconfig again (for the sandboxd connection). Returns CLI_OK or prints
 * why and returns CLI_NO_CONFIG. */
int cli_config(const struct cli_globals *g, struct kube_config **ret);
/** Prints "error: <what>: <API message>" for a failed request and returns CLI_ERR. */
int cli_fail(const struct cli_globals *g, const char *what, int r, const struct kube_err *e);
/** At the end of a command: flushes out (stdout) and checks it for a failed write. A
 * write error other than EPIPE (the reader went away, as with `| head`) is printed to
 * err and turns rc CLI_OK into CLI_ERR; otherwise rc is returned as is. */
int cli_output_done(FILE *out, FILE *err, int rc);
/** The negative errno of a failed write to out: e (errno read right after the failing
 * stdio call, or 0 when it is lost) when set. Else -EPIPE when out is a pipe or socket
 * whose reader is gone, -EIO otherwise: glibc keeps no errno with the error flag and
 * discards the buffer, so a later fflush returns 0 with errno untouched. */
int cli_output_error(FILE *out, int e);
/** Namespace to use: -n, else the client's default. Borrowed. */
const char *cli_namespace(const struct cli_globals *g, const struct kube_client *c);
/** Parses a --timeout value arg into *ret (above 0 when positive). Returns CLI_OK, or
 * prints that arg is no such duration and returns CLI_USAGE. */
int cli_parse_timeout(const struct cli_globals *g, const char *arg, bool positive, usec_t *ret);
/** Checks g->output against the formats a command supports (a NULL-terminated list). */
int cli_check_output(const struct cli_globals *g, const char *const *allowed);
/** Prints one object for -o json|yaml|name (kind singular for name), dropping
 * managedFields. */
void cli_print_object(const struct cli_globals *g, const char *singular, const char *group,
                      json_t *obj);

/* Waiting (wait.c). A predicate on the latest state of the watched object: returns 1 when
 * done, 0 to keep waiting, or a negative errno for a terminal failure (with a message in
 * why). obj is NULL when the object was deleted. */
typedef int cli_wait_fn(void *ctx, const json_t *obj, char *why, size_t why_size);

/** Waits with a watch (field selector metadata.name) until fn says done, up to timeout.
 * *ret_obj (optional) gets a new reference to the last object seen. Returns 0,
 * -ETIMEDOUT, the predicate's error (why filled) or an API error (e filled). */
int cli_wait(struct kube_client *c, const struct kube_res *res, const char *ns, const char *name,
             usec_t timeout, cli_wait_fn *fn, void *ctx, json_t **ret_obj, char *why,
             size_t why_size, struct kube_err *e);
/** cli_wait that also ends with -ECANCELED once *stop (borrowed; may be NULL; a signal
 * handler may set it) turns true: before each request, and within about a second of
 * the watch. */
int cli_wait_stop(struct kube_client *c, const struct kube_res *res, const char *ns,
                  const char *name, usec_t timeout, cli_wait_fn *fn, void *ctx, json_t **ret_obj,
                  char *why, size_t why_size, const atomic_bool *stop, struct kube_err *e);

/** A cli_wait_fn for a Deployment, as `kubectl rollout status` judges it: its
 * controller observed the current generation, spec.replicas replicas run that
 * generation, none of an older one is left, and every one is available. Returns 1 done,
 * 0 waiting (why says on what) or -ETIME when the rollout exceeded its progress
 * deadline. ctx unused. */
int cli_rollout_done(void *ctx, const json_t *o, char *why, size_t n);

/** logs options; cli_logs_path appends
 * /api/v1/namespaces/NS/pods/POD/log[?container=..&follow=true&tailLines=N] to out.
 * Returns 0, -EINVAL (a container that is not a DNS label, a bad tail) or -E2BIG. */
struct cli_logs_opts {
    const char *container;
    bool follow;
    const char *tail;
    const char *process; /* --process ID: a background process's output instead */
};
int cli_logs_path(const char *ns, const char *pod, const struct cli_logs_opts *o, struct buf *out);

/* Background processes (cmd_proc.c). */
struct cli_sbd;
/** "running", "exited N", "signal N" or "exited" for a process description p of sandboxd's
 * list into out. */
void cli_proc_state(const json_t *p, char *out, size_t size);
/** exec --background: starts the process of body (a POST /v1/processes request, changed)
 * and prints its id (or the description with -o json). Returns a CLI exit code. */
int cli_proc_start_bg(const struct cli_globals *g, struct cli_sbd *s, json_t *body);
/** logs NAME --process ID [-f]: prints what sandboxd still holds of the process's output
 * (stdout to stdout, stderr to stderr), then with follow the live output until it exits.
 * Returns a CLI exit code. */
int cli_proc_logs(const struct cli_globals *g, const char *name, const char *id, bool follow);
int cli_cmd_ps(struct cli_globals *g, int argc, char **argv);
void cli_help_ps(FILE *out);
int cli_cmd_kill(struct cli_globals *g, int argc, char **argv);
void cli_help_kill(FILE *out);

/** Prints items (borrowed array) the way `kubectl-sandbox what` does ("list", "pools", or a
 * get KIND), honouring g->output and g->all_namespaces. Returns CLI_OK or CLI_USAGE for
 * an unknown what. */
int cli_print_items(const struct cli_globals *g, const char *what, json_t *items);

int cli_cmd_version(struct cli_globals *g, int argc, char **argv);
void cli_help_version(FILE *out);
int cli_cmd_get(struct cli_globals *g, int argc, char **argv);
void cli_help_get(FILE *out);
int cli_cmd_list(struct cli_globals *g, int argc, char **argv);
void cli_help_list(FILE *out);
int cli_cmd_pools(struct cli_globals *g, int argc, char **argv);
void cli_help_pools(FILE *out);
int cli_cmd_create(struct cli_globals *g, int argc, char **argv);
void cli_help_create(FILE *out);
int cli_cmd_claim(struct cli_globals *g, int argc, char **argv);
void cli_help_claim(FILE *out);
int cli_cmd_suspend(struct cli_globals *g, int argc, char **argv);
void cli_help_suspend(FILE *out);
int cli_cmd_resume(struct cli_globals *g, int argc, char **argv);
void cli_help_resume(FILE *out);
int cli_cmd_delete(struct cli_globals *g, int argc, char **argv);
void cli_help_delete(FILE *out);
int cli_cmd_describe(struct cli_globals *g, int argc, char **argv);
void cli_help_describe(FILE *out);
int cli_cmd_exec(struct cli_globals *g, int argc, char **argv);
/** exec -t -i: puts terminal fd in raw mode, keeping its settings, and makes SIGTERM,
 * SIGHUP, SIGQUIT and SIGINT restore them before the process dies of the signal, SIGTSTP
 * restore them before the process stops, and SIGCONT make the terminal raw again (signals
 * ignored before stay ignored). Returns whether fd is a terminal now raw (then call
 * cli_tty_restore). */
bool cli_tty_raw(int fd);
/** Restores the terminal settings cli_tty_raw changed and the signals' previous actions. */
void cli_tty_restore(void);
void cli_help_exec(FILE *out);
/* cmd_code.c */
/** Appends "/v1/contexts/ID/interrupt" for code context id (from sandboxd's stream) to
 * out, id percent-escaped as one segment. Returns 0, -EINVAL for an empty, "." or ".."
 * id (curl would resolve it to another path), or -E2BIG. */
int cli_code_interrupt_path(const char *id, struct buf *out);
int cli_cmd_run_code(struct cli_globals *g, int argc, char **argv);
void cli_help_run_code(FILE *out);
int cli_cmd_cp(struct cli_globals *g, int argc, char **argv);
void cli_help_cp(FILE *out);
/** cp's settings beyond its command line (tests set a small bound). */
struct cli_cp_opts {
    unsigned max_entries;  /* the most entries one cp copies: files of an upload; files and
                              directories, the top one included, of a download. 0:
                              LIMIT_CLI_CP_ENTRIES */
    unsigned listing_page; /* names per directory listing page asked of sandboxd (a
                              directory larger than a page comes in pages); 0: its default */
};
/** cp with o (NULL: the defaults, as cli_cmd_cp). Returns a CLI exit code. */
int cli_cp_run(struct cli_globals *g, const struct cli_cp_opts *o, int argc, char **argv);
int cli_cmd_stat(struct cli_globals *g, int argc, char **argv);
void cli_help_stat(FILE *out);
int cli_cmd_mkdir(struct cli_globals *g, int argc, char **argv);
void cli_help_mkdir(FILE *out);
int cli_cmd_mv(struct cli_globals *g, int argc, char **argv);
void cli_help_mv(FILE *out);
int cli_cmd_watch(struct cli_globals *g, int argc, char **argv);
/** watch's output of sandboxd's NDJSON line p[0..n) to out, then flushed: with json the
 * line as it is, else the event's line made safe (cli_fs_format_event) in a buffer
 * sized for its escapes, never cut; a line that is not an event prints nothing. Returns
 * 0 or the negative errno of a failed write (-EPIPE: the reader went away). */
int cli_watch_print(FILE *out, bool json, const char *p, size_t n);
void cli_help_watch(FILE *out);
int cli_cmd_logs(struct cli_globals *g, int argc, char **argv);
void cli_help_logs(FILE *out);
int cli_cmd_install(struct cli_globals *g, int argc, char **argv);
void cli_help_install(FILE *out);
int cli_cmd_uninstall(struct cli_globals *g, int argc, char **argv);
void cli_help_uninstall(FILE *out);
int cli_cmd_completion(struct cli_globals *g, int argc, char **argv);
void cli_help_completion(FILE *out);
int cli_cmd_portforward(struct cli_globals *g, int argc, char **argv);
void cli_help_portforward(FILE *out);
int cli_cmd_shell(struct cli_globals *g, int argc, char **argv);
void cli_help_shell(FILE *out);
