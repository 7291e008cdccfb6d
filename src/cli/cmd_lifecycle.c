/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox suspend, resume and delete (with --wait through a watch). */
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "api/extensions.h"
#include "api/res.h"
#include "api/sandbox.h"
#include "cli/cli.h"
#include "cli/output.h"
#include "common/limits.h"
#include "kube/obj.h"

struct life_opts {
    bool wait;
    usec_t timeout;
};

void cli_help_suspend(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox suspend NAME... [--wait] [--timeout 5m] [-n NS]\n\n"
                 "Sets spec.operatingMode=Suspended: the controller deletes the pod and keeps\n"
                 "its volumes and service. --wait waits for the Suspended condition.\n"
                 "Every NAME is tried, also after one that failed.\n"
                 "Exit codes: 0 done, 1 failed, 2 usage, 3 no usable cluster config, 4 timed\n"
                 "out waiting (the first failure's).\n");
}

void cli_help_resume(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox resume NAME... [--wait] [--timeout 5m] [-n NS]\n\n"
                 "Sets spec.operatingMode=Running: the controller recreates the pod with the\n"
                 "same name and volumes. --wait waits until the sandbox is Ready again.\n"
                 "Every NAME is tried, also after one that failed.\n"
                 "Exit codes: 0 done, 1 failed, 2 usage, 3 no usable cluster config, 4 timed\n"
                 "out waiting (the first failure's).\n");
}

void cli_help_delete(FILE *out)
{
    fprintf(out,
            "Usage: kubectl-sandbox delete [sandbox/|claim/]NAME... [--wait] [--timeout 5m]\n\n"
            "Deletes sandboxes. A sandbox that a SandboxClaim owns is released by deleting\n"
            "the claim (the sandbox goes with it), else the claim would make a new one.\n"
            "claim/NAME deletes a SandboxClaim. --wait waits until the objects are gone.\n"
            "Every NAME is tried, also after one that failed; an argument of another form\n"
            "is a usage error before anything is deleted.\n"
            "Exit codes: 0 deleted, 1 failed (e.g. not found), 2 usage, 3 no usable cluster\n"
            "config, 4 timed out waiting (the first failure's).\n");
}

static const struct option life_long[] = {
    {"wait", no_argument, NULL, 'w'},
    {"timeout", required_argument, NULL, 'T'},
    {NULL, 0, NULL, 0},
};

static int parse_life(struct cli_globals *g, int argc, char **argv, struct life_opts *o,
                      int *ret_pos)
{
    int ch;
    o->timeout = LIMIT_CLI_WAIT;
    optind = 0;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "w", life_long, NULL)) != -1) {
        if (ch == 'w') {
            o->wait = true;
        } else if (ch == 'T') {
            if (cli_parse_timeout(g, optarg, false, &o->timeout) != CLI_OK)
                return CLI_USAGE;
        } else {
            fprintf(g->err, "error: bad option %s; see %s --help\n", argv[optind - 1], argv[0]);
            return CLI_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(g->err, "error: %s needs at least one NAME; see %s --help\n", argv[0], argv[0]);
        return CLI_USAGE;
    }
    *ret_pos = optind;
    return CLI_OK;
}

static int wait_fail(struct cli_globals *g, int r, const char *name, const char *what,
                     const char *why_raw, const struct kube_err *e)
{
    char why[1200];
    (void)snprintf(why, sizeof(why), "%s", why_raw);
    out_safe_inplace(why, sizeof(why)); /* condition text from the cluster */
    if (r == -ETIMEDOUT) {
        fprintf(g->err, "error: sandbox \"%s\" did not become %s within --timeout (last: %s)\n",
                name, what, why[0] ? why : "unknown");
        return CLI_TIMEOUT;
    }
    if (e->code == 0 && e->http_status == 0 && why[0]) { /* the predicate said no */
        fprintf(g->err, "error: sandbox \"%s\": %s\n", name, why);
        return CLI_ERR;
    }
    return cli_fail(g, "waiting", r, e);
}

/* ---- suspend / resume ------------------------------------------------------------------ */

static int is_suspended(void *ctx, const json_t *o, char *why, size_t n)
{
    (void)ctx;
    if (!o) {
        (void)snprintf(why, n, "the sandbox was deleted");
        return -ENOENT;
    }
    if (kube_obj_condition_true(o, SB_COND_SUSPENDED))
        return 1;
    const json_t *c = kube_obj_condition(o, SB_COND_SUSPENDED);
    const char *reason = c ? json_string_value(json_object_get(c, "reason")) : NULL;
    (void)snprintf(why, n, "Suspended: %s", reason ? reason : "not reported yet");
    return 0;
}

static int is_running(void *ctx, const json_t *o, char *why, size_t n)
{
    (void)ctx;
    if (!o) {
        (void)snprintf(why, n, "the sandbox was deleted");
        return -ENOENT;
    }
    if (kube_obj_condition_true(o, SB_COND_READY) && !kube_obj_condition_true(o, SB_COND_SUSPENDED))
        return 1;
    const json_t *c = kube_obj_condition(o, SB_COND_READY);
    const char *reason = c ? json_string_value(json_object_get(c, "reason")) : NULL;
    (void)snprintf(why, n, "Ready: %s", reason ? reason : "not reported yet");
    return 0;
}

static int set_mode(struct cli_globals *g, struct kube_client *c, const char *name,
                    const char *mode, const struct life_opts *o)
{
    const char *ns = cli_namespace(g, c);
    json_t *patch = json_pack("{s:{s:s}}", "spec", "operatingMode", mode);
    struct kube_err e;
    int r = kube_patch(c, &API_RES_SANDBOXES, ns, name, KUBE_PATCH_MERGE, patch, NULL, &e);
    json_decref(patch);
    char what[256];
    (void)snprintf(what, sizeof(what), "sandbox \"%s\" in namespace %s", name, ns);
    if (r < 0)
        return cli_fail(g, what, r, &e);
    bool susp = strcmp(mode, SB_MODE_SUSPENDED) == 0;
    fprintf(g->out, "sandbox." SB_GROUP "/%s %s\n", name, susp ? "suspended" : "resumed");
    if (!o->wait)
        return CLI_OK;
    char why[512] = "";
    kube_err_clear(&e);
    r = cli_wait(c, &API_RES_SANDBOXES, ns, name, o->timeout, susp ? is_suspended : is_running,
                 NULL, NULL, why, sizeof(why), &e);
    return r == 0 ? CLI_OK
                  : wait_fail(g, r, name, susp ? SB_COND_SUSPENDED : SB_COND_READY, why, &e);
}

/* Sets mode on every NAME, also past one that fails (as delete does); returns the first
 * failure's exit code. */
static int run_mode(struct cli_globals *g, int argc, char **argv, const char *mode)
{
    struct life_opts o = {0};
    int pos;
    int rc = parse_life(g, argc, argv, &o, &pos);
    struct kube_client *c = NULL;
    if (rc == CLI_OK)
        rc = cli_client(g, &c);
    int worst = rc;
    for (int i = pos; rc != CLI_USAGE && rc != CLI_NO_CONFIG && i < argc; i++) {
        rc = set_mode(g, c, argv[i], mode, &o);
        worst = worst == CLI_OK ? rc : worst;
    }
    kube_client_free(c);
    return worst;
}

int cli_cmd_suspend(struct cli_globals *g, int argc, char **argv)
{
    return run_mode(g, argc, argv, SB_MODE_SUSPENDED);
}

int cli_cmd_resume(struct cli_globals *g, int argc, char **argv)
{
    return run_mode(g, argc, argv, SB_MODE_RUNNING);
}

/* ---- delete ---------------------------------------------------------------------------- */

static int is_gone(void *ctx, const json_t *o, char *why, size_t n)
{
    (void)ctx;
    (void)snprintf(why, n, "still present%s", o && kube_obj_deleting(o) ? " (terminating)" : "");
    return o ? 0 : 1;
}

static bool is_claim_arg(const char *arg)
{
    return !strncmp(arg, "claim/", 6) || !strncmp(arg, "sandboxclaim/", 13);
}

/* Whether arg is NAME, sandbox/NAME (sbx/NAME) or claim/NAME (sandboxclaim/NAME), NAME
 * not empty; prints why not. */
static bool delete_arg_ok(const struct cli_globals *g, const char *arg)
{
    const char *slash = strchr(arg, '/'), *name = slash ? slash + 1 : arg;
    bool form =
        !slash || is_claim_arg(arg) || !strncmp(arg, "sandbox/", 8) || !strncmp(arg, "sbx/", 4);
    if (form && *name && !strchr(name, '/'))
        return true;
    fprintf(g->err, "error: cannot delete %s: use NAME, sandbox/NAME or claim/NAME\n", arg);
    return false;
}

/* Resolves "sandbox/NAME", "claim/NAME" or "NAME" (a sandbox, or the claim that owns
 * it; arg passed delete_arg_ok) to the object to delete: the resource and the name to
 * delete (borrowed from arg or written into owner). */
static void resolve(struct cli_globals *g, struct kube_client *c, const char *arg,
                    const struct kube_res **ret_res, const char **ret_name, char *owner,
                    size_t owner_size)
{
    const char *slash = strchr(arg, '/');
    if (is_claim_arg(arg)) {
        *ret_res = &API_RES_SANDBOXCLAIMS;
        *ret_name = slash + 1;
        return;
    }
    const char *name = slash ? slash + 1 : arg;
    json_t *sb = NULL;
    struct kube_err e;
    *ret_res = &API_RES_SANDBOXES;
    *ret_name = name;
    if (kube_get(c, &API_RES_SANDBOXES, cli_namespace(g, c), name, &sb, &e) < 0)
        return; /* the DELETE reports it */
    const json_t *ref = kube_obj_controller_ref(sb);
    const char *kind = json_string_value(json_object_get(ref, "kind"));
    if (kind && strcmp(kind, EXT_KIND_CLAIM) == 0) {
        *ret_res = &API_RES_SANDBOXCLAIMS;
        (void)snprintf(owner, owner_size, "%s", json_string_value(json_object_get(ref, "name")));
        *ret_name = owner;
        fprintf(g->err, "sandbox \"%s\" belongs to sandboxclaim \"%s\": deleting the claim\n", name,
                owner);
    }
    json_decref(sb);
}

static int delete_one(struct cli_globals *g, struct kube_client *c, const char *arg,
                      const struct life_opts *o)
{
    const struct kube_res *res;
    const char *name;
    char owner[256];
    resolve(g, c, arg, &res, &name, owner, sizeof(owner));
    const char *ns = cli_namespace(g, c);
    const char *kind = res == &API_RES_SANDBOXES ? "sandbox" : "sandboxclaim";
    struct kube_err e;
    int r = kube_delete(c, res, ns, name, &e);
    if (r < 0) {
        char what[300];
        (void)snprintf(what, sizeof(what), "%s \"%s\" in namespace %s", kind, name, ns);
        return cli_fail(g, what, r, &e);
    }
    fprintf(g->out, "%s.%s/%s deleted\n", kind, res->group, name);
    if (!o->wait)
        return CLI_OK;
    char why[256] = "";
    kube_err_clear(&e);
    r = cli_wait(c, res, ns, name, o->timeout, is_gone, NULL, NULL, why, sizeof(why), &e);
    return r == 0 ? CLI_OK : wait_fail(g, r, name, "gone", why, &e);
}

int cli_cmd_delete(struct cli_globals *g, int argc, char **argv)
{
    struct life_opts o = {0};
    int pos;
    int rc = parse_life(g, argc, argv, &o, &pos);
    for (int i = pos; rc == CLI_OK && i < argc; i++) /* before anything is deleted */
        rc = delete_arg_ok(g, argv[i]) ? CLI_OK : CLI_USAGE;
    struct kube_client *c = NULL;
    if (rc == CLI_OK)
        rc = cli_client(g, &c);
    int worst = rc;
    for (int i = pos; rc == CLI_OK && i < argc; i++) { /* every NAME, past one that failed */
        int r = delete_one(g, c, argv[i], &o);
        worst = worst == CLI_OK ? r : worst;
    }
    kube_client_free(c);
    return worst;
}
