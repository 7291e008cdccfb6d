/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox shell [NAME] [--pool P | --template T] [--keep] [-- CMD...]: an
 * interactive shell on a pseudo-terminal in a sandbox, through `exec -i -t` (raw local
 * terminal, resizes forwarded). Without NAME a sandbox is made for the session (a
 * SandboxClaim on P, or a Sandbox from T, named shell-XXXXX) and deleted when the
 * session ends, also on SIGINT/SIGTERM/SIGHUP, unless --keep.
 *
 * The session runs in a child process; this process only waits for it, restores the
 * terminal (whatever way the child ended) and deletes what it made. What the child
 * creates carries the session's random token (CLI_ANN_SESSION); the delete is of the
 * object with that token, guarded by its UID, so a create that failed (the name taken)
 * or an object made again under the name later is never deleted. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <sys/random.h>
#include <sys/wait.h>

#include "api/res.h"
#include "cli/cli.h"
#include "common/limits.h"
#include "common/xalloc.h"
#include "kube/obj.h"

#define SHELL_DEFAULT "command -v bash >/dev/null 2>&1 && exec bash || exec sh"

struct shell_opts {
    const char *pool, *tmpl, *timeout;
    const char *name; /* --name: the session sandbox's (or claim's) name; NULL: shell-XXXXX */
    bool keep;
    char **cmd; /* borrowed from argv, NULL-terminated; NULL: SHELL_DEFAULT */
    int ncmd;
};

static volatile sig_atomic_t shell_sig;

static void on_shell_signal(int sig)
{
    shell_sig = sig;
}

void cli_help_shell(FILE *out)
{
    fprintf(out,
            "Usage: kubectl-sandbox shell NAME [-- COMMAND [ARG...]]\n"
            "       kubectl-sandbox shell --pool POOL | --template TMPL [--name NAME] [--keep]\n"
            "                             [--timeout D] [-- COMMAND [ARG...]]\n\n"
            "Opens an interactive shell (bash, else sh; or COMMAND) on a pseudo-terminal in\n"
            "sandbox NAME. Without NAME, a sandbox is made for the session: a SandboxClaim on\n"
            "the warm pool POOL, or a Sandbox from the template TMPL (named shell-XXXXX), and\n"
            "deleted when the shell exits or this command gets SIGINT, SIGTERM or SIGHUP\n"
            "(only the object this session made: one of that name made by another is kept).\n"
            "  --pool POOL      claim from this warm pool\n"
            "  --template TMPL  create from this SandboxTemplate\n"
            "  --name NAME      name the claim (--pool) or Sandbox (--template) NAME\n"
            "  --keep           keep the sandbox (its name is printed)\n"
            "  --timeout D      how long to wait for Ready (default 5m)\n"
            "The connection is the one of exec (pod proxy, --router-url or --sandboxd-url).\n"
            "Exit codes: the shell's exit code; 128+N after signal N; 1/2/3/4 as for claim and\n"
            "create; 5 when sandboxd could not be reached.\n");
}

static int parse_shell(const struct cli_globals *g, int argc, char **argv, struct shell_opts *o,
                       int *ret_pos)
{
    static const struct option lo[] = {
        {"pool", required_argument, NULL, 'p'},    {"template", required_argument, NULL, 'T'},
        {"keep", no_argument, NULL, 'k'},          {"name", required_argument, NULL, 'N'},
        {"timeout", required_argument, NULL, 't'}, {NULL, 0, NULL, 0},
    };
    int dd = 1, ch;
    while (dd < argc && strcmp(argv[dd], "--") != 0)
        dd++;
    optind = 0;
    opterr = 0;
    usec_t d;
    while ((ch = getopt_long(dd, argv, "", lo, NULL)) != -1) {
        if (ch == 'p')
            o->pool = optarg;
        else if (ch == 'T')
            o->tmpl = optarg;
        else if (ch == 'k')
            o->keep = true;
        else if (ch == 'N' && *optarg)
            o->name = optarg;
        else if (ch == 'N') {
            fprintf(g->err, "error: --name takes a name\n");
            return CLI_USAGE;
        } else if (ch == 't') {
            if (cli_parse_timeout(g, optarg, false, &d) != CLI_OK)
                return CLI_USAGE;
            o->timeout = optarg;
        } else {
            fprintf(g->err, "error: bad option %s; see shell --help\n", argv[optind - 1]);
            return CLI_USAGE;
        }
    }
    int npos = dd - optind;
    if ((o->pool && o->tmpl) || npos > 1 || (npos == 1) == (o->pool || o->tmpl)) {
        fprintf(g->err, "error: give NAME, or one of --pool and --template\n");
        return CLI_USAGE;
    }
    if (o->name && npos) {
        fprintf(g->err, "error: --name names a new session sandbox; it goes with --pool or "
                        "--template\n");
        return CLI_USAGE;
    }
    if (dd + 1 < argc) {
        o->cmd = argv + dd + 1;
        o->ncmd = argc - dd - 1;
    }
    *ret_pos = npos ? optind : -1;
    return CLI_OK;
}

/* `exec NAME -i -t -e TERM=.. -- CMD` in this process. Returns exec's exit code. */
static int attach(struct cli_globals *g, const char *name, const struct shell_opts *o)
{
    char term[128];
    const char *t = getenv("TERM");
    (void)snprintf(term, sizeof(term), "TERM=%s", t && *t ? t : "xterm");
    int n = 0, ncmd = o->cmd ? o->ncmd : 3;
    char **av = xcalloc((size_t)ncmd + 10, sizeof(char *));
    const char *head[] = {"exec", name, "-i", "-t", "-e", term, "--"};
    for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); i++)
        av[n++] = (char *)head[i];
    const char *def[] = {"sh", "-c", SHELL_DEFAULT};
    for (int i = 0; i < ncmd; i++)
        av[n++] = o->cmd ? o->cmd[i] : (char *)def[i];
    int rc = cli_cmd_exec(g, n, av);
    xfree(av);
    return rc;
}

/* n random [a-z0-9] after prefix into out (NUL-terminated; out holds prefix + n + 1). */
static void random_name(char *out, const char *prefix, size_t n)
{
    static const char al[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    uint8_t r[32] = {0};
    size_t pl = strlen(prefix);
    if (n > sizeof(r))
        n = sizeof(r);
    if (getrandom(r, n, 0) != (ssize_t)n) {
        uint64_t t[4] = {(uint64_t)clock_now(), (uint64_t)clock_wall_now(), (uint64_t)getpid(),
                         (uint64_t)(uintptr_t)out};
        memcpy(r, t, sizeof(r));
    }
    memcpy(out, prefix, pl);
    for (size_t i = 0; i < n; i++)
        out[pl + i] = al[r[i] % (sizeof(al) - 1)];
    out[pl + n] = '\0';
}

/* In the child: make the sandbox (marked with token), wait for Ready, attach. Returns
 * the exit code. */
static int session(struct cli_globals *g, const char *name, const char *token,
                   const struct shell_opts *o)
{
    char sbname[256] = "", cap[512] = "";
    const char *timeout = o->timeout ? o->timeout : "5m";
    struct cli_globals q = *g;
    q.output = "";
    q.session = token;
    q.out = fmemopen(cap, sizeof(cap) - 1, "w"); /* the sandbox name claim prints */
    if (!q.out)
        return CLI_ERR;
    int rc;
    if (o->pool) {
        char *av[] = {"claim",     (char *)o->pool, "--name", (char *)name,
                      "--timeout", (char *)timeout, NULL};
        rc = cli_cmd_claim(&q, 6, av);
    } else {
        char *av[] = {"create", (char *)name, "--template",    (char *)o->tmpl,
                      "--wait", "--timeout",  (char *)timeout, NULL};
        rc = cli_cmd_create(&q, 7, av);
    }
    (void)fclose(q.out);
    if (o->pool)
        (void)sscanf(cap, "%255s", sbname);
    else
        (void)snprintf(sbname, sizeof(sbname), "%s", name);
    if (rc != CLI_OK)
        return rc;
    if (o->keep)
        fprintf(g->err, "sandbox %s is kept: `kubectl-sandbox delete %s%s` removes it\n", sbname,
                o->pool ? "claim/" : "", name);
    return attach(g, sbname, o);
}

/* Deletes the claim or Sandbox name when it carries this session's token (by its UID);
 * quiet when it is gone already or is not the session's (its create failed). */
static void remove_sandbox(struct cli_globals *g, const char *name, const char *token, bool claim)
{
    struct kube_client *c = NULL;
    if (cli_client(g, &c) != CLI_OK)
        return;
    const struct kube_res *res = claim ? &API_RES_SANDBOXCLAIMS : &API_RES_SANDBOXES;
    const char *what = claim ? "sandboxclaim" : "sandbox";
    struct kube_err e;
    kube_err_clear(&e);
    json_t *obj = NULL;
    int r = kube_get(c, res, cli_namespace(g, c), name, &obj, &e);
    if (r == 0) {
        const char *mark = kube_obj_annotation(obj, CLI_ANN_SESSION);
        if (!mark || strcmp(mark, token) != 0)
            r = 1; /* another's object under the name */
        else
            r = kube_delete_obj(c, res, obj, false, NULL, &e);
    }
    if (r < 0 && !kube_err_is_not_found(&e) && !(r == -EBUSY && e.http_status == 409))
        (void)cli_fail(g, claim ? "deleting the sandbox claim" : "deleting the sandbox", r, &e);
    else if (r == 0)
        fprintf(g->err, "%s %s deleted\n", what, name);
    json_decref(obj);
    kube_client_free(c);
}

/* Waits for the child; a signal to this process ends it with SIGTERM. */
static int wait_child(pid_t pid, int *ret_sig)
{
    int st = 0;
    bool sent = false;
    for (;;) {
        pid_t w = waitpid(pid, &st, 0);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return CLI_ERR;
        if (shell_sig && !sent) {
            *ret_sig = shell_sig;
            (void)kill(pid, SIGTERM);
            sent = true;
        }
    }
    if (*ret_sig)
        return 128 + *ret_sig;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Runs the session in a child (attach to existing when set, else a new sandbox). */
static int run_session(struct cli_globals *g, const struct shell_opts *o, const char *existing)
{
    char name[256], token[40];
    if (o->name)
        (void)snprintf(name, sizeof(name), "%s", o->name);
    else
        random_name(name, "shell-", 5);
    random_name(token, "", 32);
    struct termios saved;
    bool tty = isatty(0) && tcgetattr(0, &saved) == 0;
    struct sigaction sa = {.sa_handler = on_shell_signal}, old[3];
    const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++)
        (void)sigaction(sigs[i], &sa, &old[i]);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 3; i++)
            (void)sigaction(sigs[i], &old[i], NULL);
        int rc = existing ? attach(g, existing, o) : session(g, name, token, o);
        fflush(NULL);
        _exit(rc);
    }
    int sig = 0, rc = pid < 0 ? CLI_ERR : wait_child(pid, &sig);
    if (tty)
        (void)tcsetattr(0, TCSANOW, &saved);
    if (pid > 0 && !o->keep && !existing)
        remove_sandbox(g, name, token, o->pool != NULL);
    for (int i = 0; i < 3; i++)
        (void)sigaction(sigs[i], &old[i], NULL);
    return rc;
}

int cli_cmd_shell(struct cli_globals *g, int argc, char **argv)
{
    struct shell_opts o = {0};
    int pos;
    int rc = parse_shell(g, argc, argv, &o, &pos);
    if (rc != CLI_OK)
        return rc;
    return run_session(g, &o, pos >= 0 ? argv[pos] : NULL);
}
