/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox create and claim: a SandboxClaim on a warm pool, a Sandbox from a
 * template, or the objects of a manifest file; optionally waiting until Ready. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "api/extensions.h"
#include "api/res.h"
#include "api/sandbox.h"
#include "cli/cli.h"
#include "cli/manifest.h"
#include "cli/output.h"
#include "common/limits.h"
#include "common/xalloc.h"
#include "kube/obj.h"

#define CREATED_BY "kubectl-sandbox"

struct create_opts {
    const char *name;
    const char *pool;
    const char *tmpl;
    const char *file;
    bool wait;
    bool keep; /* claim --keep: an interrupted wait keeps the claim */
    usec_t timeout;
};

void cli_help_claim(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox claim POOL [--name NAME] [--timeout 5m] [--no-wait]\n"
                 "                                 [--keep] [-n NS] [-o json|yaml|name]\n\n"
                 "Creates a SandboxClaim on the warm pool POOL (name sandbox-claim-XXXXX unless\n"
                 "--name), says `sandboxclaim.../NAME created` on stderr, waits until it is Ready\n"
                 "and prints the name of its sandbox.\n"
                 "  --name NAME      claim name\n"
                 "  --timeout D      how long to wait (default 5m; 90s, 2m, 1h)\n"
                 "  --no-wait        print the claim name and return at once\n"
                 "  --keep           keep the claim when the wait is interrupted\n"
                 "SIGINT, SIGTERM or SIGHUP during the wait deletes the claim (only the one this\n"
                 "command made, by its UID) unless --keep; a second one ends at once.\n"
                 "Exit codes: 0 Ready, 1 the claim failed (reason printed), 2 usage, 3 no usable\n"
                 "cluster config, 4 timed out (the claim is kept: delete it with\n"
                 "`kubectl-sandbox delete claim/NAME`), 128+N after signal N.\n");
}

void cli_help_create(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox create NAME --pool POOL     [--wait] [--timeout D]\n"
                 "       kubectl-sandbox create NAME --template TMPL [--wait] [--timeout D]\n"
                 "       kubectl-sandbox create -f FILE              [--wait] [--timeout D]\n\n"
                 "  --pool POOL       claim a sandbox from a warm pool (a SandboxClaim NAME)\n"
                 "  --template TMPL   a Sandbox NAME built from the SandboxTemplate TMPL\n"
                 "                    (its podTemplate, volumeClaimTemplates and service)\n"
                 "  -f, --filename F  create the objects of a YAML/JSON file (\"-\": stdin)\n"
                 "  --wait            wait until sandboxes and claims are Ready\n"
                 "  --timeout D       how long to wait (default 5m)\n"
                 "  -o json|yaml|name with --pool only: print the claim (--wait: as claim does);\n"
                 "                    a bad format is refused before anything is created\n"
                 "Without --wait, --pool prints the claim's name (with -o: the claim).\n"
                 "Exit codes: 0 created (and Ready), 1 failed, 2 usage, 3 no usable cluster\n"
                 "config, 4 timed out waiting.\n");
}

/* ---- predicates ---------------------------------------------------------------------- */

static const char *const claim_terminal[] = {
    EXT_R_INVALID_METADATA, EXT_R_ENV_REJECTED,       EXT_R_VCT_ERROR,     EXT_R_CLAIM_EXPIRED,
    SB_R_EXPIRED,           EXT_R_TEMPLATE_NOT_FOUND, EXT_R_POOL_NOT_FOUND};

static int claim_ready(void *ctx, const json_t *o, char *why, size_t n)
{
    (void)ctx;
    if (!o) {
        (void)snprintf(why, n, "the claim was deleted while waiting");
        return -ENOENT;
    }
    const json_t *c = kube_obj_condition(o, SB_COND_READY);
    const char *st = c ? json_string_value(json_object_get(c, "status")) : NULL;
    const char *reason = c ? json_string_value(json_object_get(c, "reason")) : NULL;
    if (st && strcmp(st, "True") == 0 && kube_obj_path_str(o, "status.sandbox.name"))
        return 1;
    for (size_t i = 0; reason && i < ARRAY_SIZE(claim_terminal); i++)
        if (strcmp(reason, claim_terminal[i]) == 0) {
            const char *msg = json_string_value(json_object_get(c, "message"));
            (void)snprintf(why, n, "%s: %s", reason, msg ? msg : "");
            return -EIO;
        }
    (void)snprintf(why, n, "%s", reason ? reason : "no Ready condition yet");
    return 0;
}

static int sandbox_ready(void *ctx, const json_t *o, char *why, size_t n)
{
    (void)ctx;
    if (!o) {
        (void)snprintf(why, n, "the sandbox was deleted while waiting");
        return -ENOENT;
    }
    const json_t *c = kube_obj_condition(o, SB_COND_READY);
    const char *reason = c ? json_string_value(json_object_get(c, "reason")) : NULL;
    if (kube_obj_condition_true(o, SB_COND_READY))
        return 1;
    if (kube_obj_condition_true(o, SB_COND_FINISHED) ||
        (reason && strcmp(reason, SB_R_EXPIRED) == 0)) {
        (void)snprintf(why, n, "%s", reason ? reason : SB_COND_FINISHED);
        return -EIO;
    }
    (void)snprintf(why, n, "%s", reason ? reason : "no Ready condition yet");
    return 0;
}

/* Waits for obj (a Sandbox or SandboxClaim) to be Ready, or until *stop (may be NULL);
 * prints why not. *ret_obj gets the last state (optional). Returns a CLI exit code, or
 * -ECANCELED when stopped (nothing printed). */
static int wait_ready_stop(struct cli_globals *g, struct kube_client *c, const struct kube_res *res,
                           const char *ns, const char *name, usec_t timeout,
                           const atomic_bool *stop, json_t **ret_obj)
{
    char why[1200] = "";
    struct kube_err e;
    kube_err_clear(&e);
    bool claim = res == &API_RES_SANDBOXCLAIMS;
    int r = cli_wait_stop(c, res, ns, name, timeout, claim ? claim_ready : sandbox_ready, NULL,
                          ret_obj, why, sizeof(why), stop, &e);
    if (r == -ECANCELED && stop && atomic_load(stop))
        return -ECANCELED;
    out_safe_inplace(why, sizeof(why)); /* condition text from the cluster */
    const char *kind = claim ? "sandboxclaim" : "sandbox";
    if (r == -ETIMEDOUT) {
        fprintf(g->err,
                "error: %s \"%s\" in namespace %s is not Ready after the timeout (last: %s)\n"
                "hint: see `kubectl-sandbox describe` and `kubectl-sandbox get claims`; raise "
                "--timeout to wait longer\n",
                kind, name, ns, why);
        return CLI_TIMEOUT;
    }
    if (r < 0 && e.code == 0 && e.http_status == 0 && why[0]) { /* the predicate said no */
        fprintf(g->err, "error: %s \"%s\" in namespace %s failed: %s\n", kind, name, ns, why);
        return CLI_ERR;
    }
    if (r < 0)
        return cli_fail(g, "waiting for Ready", r, &e);
    return CLI_OK;
}

/* wait_ready_stop without a stop. */
static int wait_ready(struct cli_globals *g, struct kube_client *c, const struct kube_res *res,
                      const char *ns, const char *name, usec_t timeout, json_t **ret_obj)
{
    return wait_ready_stop(g, c, res, ns, name, timeout, NULL, ret_obj);
}

/* ---- claim ------------------------------------------------------------------------- */

/* Stamps g->session on obj (see CLI_ANN_SESSION), when set. */
static void mark_session(const struct cli_globals *g, json_t *obj)
{
    json_t *meta = json_object_get(obj, "metadata");
    if (!g->session || !json_is_object(meta))
        return;
    json_t *ann = json_object_get(meta, "annotations");
    if (!json_is_object(ann)) {
        ann = json_object();
        (void)json_object_set_new(meta, "annotations", ann);
    }
    (void)json_object_set_new(ann, CLI_ANN_SESSION, json_string(g->session));
}

static json_t *claim_object(const char *name, const char *pool)
{
    char now[40];
    clock_format_rfc3339(clock_wall_now(), now, sizeof(now));
    json_t *o =
        json_pack("{s:s,s:s,s:{s:{s:s},s:{s:s}},s:{s:{s:s}}}", "apiVersion", EXT_API_VERSION,
                  "kind", EXT_KIND_CLAIM, "metadata", "labels", SB_LABEL_CREATED_BY, CREATED_BY,
                  "annotations", EXT_ANN_CLIENT_REQ, now, "spec", "warmPoolRef", "name", pool);
    kube_obj_set_meta_str(o, name ? "name" : "generateName", name ? name : "sandbox-claim-");
    return o;
}

static int check_pool(struct cli_globals *g, struct kube_client *c, const char *ns,
                      const char *pool)
{
    struct kube_err e;
    int r = kube_get(c, &API_RES_SANDBOXWARMPOOLS, ns, pool, NULL, &e);
    if (r == 0)
        return CLI_OK;
    if (kube_err_is_not_found(&e) && e.reason[0]) {
        fprintf(g->err,
                "error: warm pool \"%s\" not found in namespace %s\n"
                "hint: `kubectl-sandbox pools -n %s` lists the pools\n",
                pool, ns, ns);
        return CLI_ERR;
    }
    return cli_fail(g, "reading the warm pool", r, &e);
}

/* SIGINT, SIGTERM and SIGHUP while claim waits: the claim is deleted (claim_interrupted). */
static const int claim_sigs[] = {SIGINT, SIGTERM, SIGHUP};
static atomic_bool claim_stop;
static volatile sig_atomic_t claim_sig;

static void on_claim_signal(int sig)
{
    claim_sig = sig;
    atomic_store(&claim_stop, true);
}

/* Catches claim_sigs, each once (SA_RESETHAND: a second one takes its default action),
 * unless ignored (nohup); old gets the dispositions that claim_unguard restores. */
static void claim_guard(struct sigaction old[ARRAY_SIZE(claim_sigs)])
{
    struct sigaction sa = {.sa_handler = on_claim_signal, .sa_flags = SA_RESETHAND};
    sigemptyset(&sa.sa_mask);
    atomic_store(&claim_stop, false);
    claim_sig = 0;
    for (size_t i = 0; i < ARRAY_SIZE(claim_sigs); i++) {
        (void)sigaction(claim_sigs[i], NULL, &old[i]);
        if (old[i].sa_handler != SIG_IGN)
            (void)sigaction(claim_sigs[i], &sa, NULL);
    }
}

static void claim_unguard(const struct sigaction old[ARRAY_SIZE(claim_sigs)])
{
    for (size_t i = 0; i < ARRAY_SIZE(claim_sigs); i++)
        (void)sigaction(claim_sigs[i], &old[i], NULL);
}

/* The wait of claim was interrupted: deletes the claim it created (borrowed; guarded by
 * its UID: one made again under the name is kept) unless keep. Returns 128 + signal. */
static int claim_interrupted(struct cli_globals *g, struct kube_client *c, const json_t *created,
                             bool keep)
{
    const char *name = kube_obj_name(created);
    struct kube_err e;
    kube_err_clear(&e);
    if (keep) {
        fprintf(g->err, "sandboxclaim %s is kept: `kubectl-sandbox delete claim/%s` removes it\n",
                name, name);
        return 128 + claim_sig;
    }
    int r = kube_delete_obj(c, &API_RES_SANDBOXCLAIMS, created, false, NULL, &e);
    if (r == 0)
        fprintf(g->err, "sandboxclaim %s deleted\n", name);
    else if (!kube_err_is_not_found(&e) && !(r == -EBUSY && e.http_status == 409))
        (void)cli_fail(g, "deleting the sandbox claim", r, &e);
    return 128 + claim_sig;
}

/* Prints what claim and create --pool --wait print once the claim is Ready. */
static void print_claimed(struct cli_globals *g, json_t *last)
{
    if (!strcmp(g->output, "json") || !strcmp(g->output, "yaml"))
        cli_print_object(g, "sandboxclaim", API_RES_SANDBOXCLAIMS.group, last);
    else if (!strcmp(g->output, "name"))
        fprintf(g->out, "sandbox." SB_GROUP "/%s\n",
                kube_obj_path_str(last, "status.sandbox.name"));
    else
        fprintf(g->out, "%s\n", kube_obj_path_str(last, "status.sandbox.name"));
}

/* Creates a claim on pool named o->name (NULL: generated) and, if o->wait, waits;
 * prints the sandbox name. The claim's name goes to stderr at once (claim: when it waits;
 * create --pool: without -o). For claim (is_claim) outside a shell session, a signal
 * during the wait deletes the claim unless o->keep. */
static int do_claim(struct cli_globals *g, struct kube_client *c, const struct create_opts *o,
                    const char *pool, bool is_claim)
{
    const char *ns = cli_namespace(g, c);
    int rc = check_pool(g, c, ns, pool);
    if (rc != CLI_OK)
        return rc;
    json_t *obj = claim_object(o->name, pool), *created = NULL, *last = NULL;
    mark_session(g, obj);
    bool guard = is_claim && o->wait && !g->session;
    struct sigaction old[ARRAY_SIZE(claim_sigs)];
    if (guard) /* from before the create: an early signal still deletes the claim */
        claim_guard(old);
    struct kube_err e;
    int r = kube_create(c, &API_RES_SANDBOXCLAIMS, ns, obj, &created, &e);
    json_decref(obj);
    const char *cname = r < 0 ? NULL : kube_obj_name(created);
    if (cname && !g->session && (is_claim ? o->wait : !g->output[0]))
        fprintf(g->err, "sandboxclaim." SB_EXT_GROUP "/%s created\n", cname);
    if (r < 0)
        rc = cli_fail(g, "creating the sandbox claim", r, &e);
    else if (!o->wait && g->output[0])
        cli_print_object(g, "sandboxclaim", API_RES_SANDBOXCLAIMS.group, created);
    else if (!o->wait)
        fprintf(g->out, "%s\n", cname);
    else
        rc = wait_ready_stop(g, c, &API_RES_SANDBOXCLAIMS, ns, cname, o->timeout,
                             guard ? &claim_stop : NULL, &last);
    if (guard)
        claim_unguard(old);
    if (rc == -ECANCELED)
        rc = claim_interrupted(g, c, created, o->keep);
    else if (rc == CLI_OK && o->wait)
        print_claimed(g, last);
    json_decref(last);
    json_decref(created);
    return rc;
}

static const struct option claim_opts[] = {
    {"name", required_argument, NULL, 'N'},
    {"timeout", required_argument, NULL, 'T'},
    {"no-wait", no_argument, NULL, 'W'},
    {"wait", no_argument, NULL, 'w'},
    {"pool", required_argument, NULL, 'p'},
    {"template", required_argument, NULL, 't'},
    {"filename", required_argument, NULL, 'f'},
    {"keep", no_argument, NULL, 'k'},
    {NULL, 0, NULL, 0},
};

/* Parses the options of claim and create into o; leaves positional arguments. */
static int parse_opts(struct cli_globals *g, int argc, char **argv, struct create_opts *o,
                      int *ret_optind)
{
    int ch;
    o->timeout = LIMIT_CLI_WAIT;
    optind = 0;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "f:", claim_opts, NULL)) != -1) {
        switch (ch) {
        case 'N':
            o->name = optarg;
            break;
        case 'T':
            if (cli_parse_timeout(g, optarg, false, &o->timeout) != CLI_OK)
                return CLI_USAGE;
            break;
        case 'W':
            o->wait = false;
            break;
        case 'w':
            o->wait = true;
            break;
        case 'p':
            o->pool = optarg;
            break;
        case 't':
            o->tmpl = optarg;
            break;
        case 'f':
            o->file = optarg;
            break;
        case 'k':
            o->keep = true;
            break;
        default:
            fprintf(g->err, "error: unknown or incomplete option %s\n", argv[optind - 1]);
            return CLI_USAGE;
        }
    }
    *ret_optind = optind;
    return CLI_OK;
}

int cli_cmd_claim(struct cli_globals *g, int argc, char **argv)
{
    struct create_opts o = {.wait = true};
    int pos;
    int rc = parse_opts(g, argc, argv, &o, &pos);
    static const char *const fmts[] = {"", "json", "yaml", "name", NULL};
    if (rc == CLI_OK)
        rc = cli_check_output(g, fmts);
    if (rc != CLI_OK)
        return rc;
    if (argc - pos != 1 || o.pool || o.tmpl || o.file) {
        cli_help_claim(g->err);
        return CLI_USAGE;
    }
    struct kube_client *c = NULL;
    rc = cli_client(g, &c);
    if (rc == CLI_OK)
        rc = do_claim(g, c, &o, argv[pos], true);
    kube_client_free(c);
    return rc;
}

/* ---- create from a template ------------------------------------------------------------ */

/* A Sandbox named name from template t (borrowed): its podTemplate (with
 * automountServiceAccountToken false unless set), volumeClaimTemplates and service. */
static json_t *sandbox_from_template(const char *name, const json_t *t)
{
    json_t *spec = json_object();
    json_t *pt = json_deep_copy(kube_obj_path(t, "spec.podTemplate"));
    json_t *ps = json_object_get(pt, "spec");
    if (json_is_object(ps) && !json_object_get(ps, "automountServiceAccountToken"))
        (void)json_object_set_new(ps, "automountServiceAccountToken", json_false());
    (void)json_object_set_new(spec, "podTemplate", pt ? pt : json_object());
    const json_t *v = kube_obj_path(t, "spec.volumeClaimTemplates");
    if (v)
        (void)json_object_set_new(spec, "volumeClaimTemplates", json_deep_copy(v));
    v = kube_obj_path(t, "spec.service");
    if (v)
        (void)json_object_set(spec, "service", (json_t *)v);
    return json_pack("{s:s,s:s,s:{s:s,s:{s:s}},s:o}", "apiVersion", SB_API_VERSION, "kind", SB_KIND,
                     "metadata", "name", name, "labels", SB_LABEL_CREATED_BY, CREATED_BY, "spec",
                     spec);
}

static int create_from_template(struct cli_globals *g, struct kube_client *c,
                                const struct create_opts *o)
{
    const char *ns = cli_namespace(g, c);
    json_t *t = NULL;
    struct kube_err e;
    int r = kube_get(c, &API_RES_SANDBOXTEMPLATES, ns, o->tmpl, &t, &e);
    if (r < 0) {
        if (kube_err_is_not_found(&e) && e.reason[0]) {
            fprintf(g->err, "error: sandbox template \"%s\" not found in namespace %s\n", o->tmpl,
                    ns);
            return CLI_ERR;
        }
        return cli_fail(g, "reading the sandbox template", r, &e);
    }
    json_t *sb = sandbox_from_template(o->name, t);
    json_decref(t);
    mark_session(g, sb);
    r = kube_create(c, &API_RES_SANDBOXES, ns, sb, NULL, &e);
    json_decref(sb);
    if (r < 0)
        return cli_fail(g, "creating the sandbox", r, &e);
    fprintf(g->out, "sandbox." SB_GROUP "/%s created\n", o->name);
    return o->wait ? wait_ready(g, c, &API_RES_SANDBOXES, ns, o->name, o->timeout, NULL) : CLI_OK;
}

/* ---- create from a file ----------------------------------------------------------------- */

static int create_one(struct cli_globals *g, struct kube_client *c, json_t *obj,
                      const struct create_opts *o)
{
    const struct kube_res *res = cli_manifest_res(obj);
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    if (!res) {
        fprintf(g->err, "error: %s: kind %s (%s) is not supported here; use kubectl apply\n",
                o->file, kind ? kind : "(none)",
                json_string_value(json_object_get(obj, "apiVersion")));
        return CLI_ERR;
    }
    const char *ns = kube_obj_namespace(obj);
    if (!res->namespaced)
        ns = NULL;
    else if (!ns || g->ns)
        ns = cli_namespace(g, c);
    json_t *created = NULL;
    struct kube_err e;
    int r = kube_create(c, res, ns, obj, &created, &e);
    if (r < 0) {
        char what[256];
        (void)snprintf(what, sizeof(what), "creating %s \"%s\"", kind,
                       kube_obj_name(obj) ? kube_obj_name(obj) : "(generated)");
        return cli_fail(g, what, r, &e);
    }
    const char *name = kube_obj_name(created);
    fprintf(g->out, "%s.%s/%s created\n", res->plural, res->group[0] ? res->group : "v1", name);
    int rc = CLI_OK;
    if (o->wait && (res == &API_RES_SANDBOXES || res == &API_RES_SANDBOXCLAIMS))
        rc = wait_ready(g, c, res, ns, name, o->timeout, NULL);
    json_decref(created);
    return rc;
}

static int create_from_file(struct cli_globals *g, struct kube_client *c,
                            const struct create_opts *o)
{
    json_t *objs = NULL;
    char err[512];
    if (cli_manifest_load(o->file, &objs, err, sizeof(err)) < 0) {
        fprintf(g->err, "error: %s\n", err);
        return CLI_ERR;
    }
    int rc = CLI_OK;
    size_t i;
    json_t *obj;
    json_array_foreach(objs, i, obj)
    {
        int r = create_one(g, c, obj, o);
        rc = rc == CLI_OK ? r : rc;
    }
    if (json_array_size(objs) == 0) {
        fprintf(g->err, "error: %s holds no objects\n", o->file);
        rc = CLI_ERR;
    }
    json_decref(objs);
    return rc;
}

static int check_create_args(struct cli_globals *g, const struct create_opts *o, int npos)
{
    int modes = !!o->pool + !!o->tmpl + !!o->file;
    if (o->keep) {
        fprintf(g->err, "error: --keep goes with claim\n");
        return CLI_USAGE;
    }
    if (modes != 1 || (o->file && npos != 0) || (!o->file && npos != 1)) {
        fprintf(g->err, "error: give NAME with exactly one of --pool, --template, or -f FILE\n");
        cli_help_create(g->err);
        return CLI_USAGE;
    }
    return CLI_OK;
}

int cli_cmd_create(struct cli_globals *g, int argc, char **argv)
{
    struct create_opts o = {0};
    int pos;
    int rc = parse_opts(g, argc, argv, &o, &pos);
    static const char *const fmts[] = {"", NULL};
    static const char *const pool_fmts[] = {"", "json", "yaml", "name", NULL};
    if (rc == CLI_OK) /* before anything is created */
        rc = cli_check_output(g, o.pool ? pool_fmts : fmts);
    if (rc == CLI_OK)
        rc = check_create_args(g, &o, argc - pos);
    if (rc != CLI_OK)
        return rc;
    if (!o.file)
        o.name = argv[pos];
    struct kube_client *c = NULL;
    rc = cli_client(g, &c);
    if (rc != CLI_OK)
        return rc;
    if (o.pool)
        rc = do_claim(g, c, &o, o.pool, false);
    else if (o.tmpl)
        rc = create_from_template(g, c, &o);
    else
        rc = create_from_file(g, c, &o);
    kube_client_free(c);
    return rc;
}
