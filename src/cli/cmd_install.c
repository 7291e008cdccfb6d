/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox install / uninstall: the built-in manifests (CRDs, RBAC, controller,
 * router) applied with server-side apply (field manager kubectl-sandbox), or deleted in
 * reverse order. */
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/install.h"
#include "cli/manifest.h"
#include "common/limits.h"
#include "kube/obj.h"

#define FIELD_MANAGER "kubectl-sandbox"

struct install_opts {
    bool dry_run, wait, keep_crds, yes;
    usec_t timeout;
};

void cli_help_install(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox install [--dry-run] [--wait] [--timeout 5m]\n\n"
                 "Applies the manifests built into this binary to the current cluster with\n"
                 "server-side apply (field manager kubectl-sandbox): the CRDs (waiting until\n"
                 "they are Established), the controller's namespace, service account and RBAC,\n"
                 "and the controller and router deployments when the build had them.\n"
                 "  --dry-run   print what would be applied\n"
                 "  --wait      wait until each deployment is rolled out (kubectl rollout\n"
                 "              status: every replica new and available, none old left)\n"
                 "Exit codes: 0 installed, 1 an apply or a rollout failed, 2 usage, 3 no cluster,\n"
                 "4 timed out.\n");
}

void cli_help_uninstall(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox uninstall (--yes | --keep-crds) [--dry-run]\n\n"
                 "Deletes what install applies, in reverse order. Deleting the CRDs deletes\n"
                 "every Sandbox, claim, template and pool in the cluster, so it needs --yes;\n"
                 "--keep-crds removes only the controller, router and RBAC: the CRDs, every\n"
                 "object of theirs and the agent-sandbox-system namespace (with what else is\n"
                 "in it, such as agent-sandbox-config) stay.\n"
                 "  --dry-run   print what would be deleted\n"
                 "Exit codes: 0 removed (objects already gone are skipped), 1 a delete failed,\n"
                 "2 usage (neither --yes nor --keep-crds), 3 no cluster.\n");
}

static int parse_install(const struct cli_globals *g, int argc, char **argv, struct install_opts *o)
{
    static const struct option lo[] = {
        {"dry-run", no_argument, NULL, 'd'},       {"wait", no_argument, NULL, 'w'},
        {"timeout", required_argument, NULL, 'T'}, {"keep-crds", no_argument, NULL, 'k'},
        {"yes", no_argument, NULL, 'y'},           {NULL, 0, NULL, 0},
    };
    int ch;
    o->timeout = LIMIT_CLI_WAIT;
    optind = 0;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (ch == 'd')
            o->dry_run = true;
        else if (ch == 'w')
            o->wait = true;
        else if (ch == 'k')
            o->keep_crds = true;
        else if (ch == 'y')
            o->yes = true;
        else if (ch == 'T') {
            if (cli_parse_timeout(g, optarg, false, &o->timeout) != CLI_OK)
                return CLI_USAGE;
        } else {
            fprintf(g->err, "error: bad option %s; see %s --help\n", argv[optind - 1], argv[0]);
            return CLI_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(g->err, "error: unexpected argument %s\n", argv[optind]);
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* Apply order: what others refer to first (kubectl apply's order, in short). */
static int kind_rank(const json_t *o)
{
    static const char *const order[] = {"CustomResourceDefinition", "Namespace", "ServiceAccount",
                                        "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                                        /* before the controller runs */
                                        "ValidatingAdmissionPolicy",
                                        "ValidatingAdmissionPolicyBinding", "ConfigMap", "Secret",
                                        "Service"};
    const char *kind = json_string_value(json_object_get(o, "kind"));
    for (size_t i = 0; kind && i < sizeof(order) / sizeof(order[0]); i++)
        if (!strcmp(kind, order[i]))
            return (int)i;
    return 100;
}

/* Stable insertion sort of a small array by kind_rank. */
static void sort_by_kind(json_t *all)
{
    size_t n = json_array_size(all);
    for (size_t i = 1; i < n; i++) {
        json_t *x = json_incref(json_array_get(all, i));
        size_t j = i;
        while (j > 0 && kind_rank(json_array_get(all, j - 1)) > kind_rank(x)) {
            (void)json_array_set(all, j, json_array_get(all, j - 1));
            j--;
        }
        (void)json_array_set_new(all, j, x);
    }
}

/* Every object of the built-in manifests, in apply order (new array). */
static int load_all(const struct cli_globals *g, json_t **ret)
{
    json_t *all = json_array();
    for (const struct cli_manifest *m = cli_manifests; m->path; m++) {
        json_t *objs = NULL;
        char err[300];
        if (cli_manifest_parse(m->text, m->len, &objs, err, sizeof(err)) < 0) {
            fprintf(g->err, "error: built-in %s: %s\n", m->path, err);
            json_decref(all);
            return CLI_ERR;
        }
        (void)json_array_extend(all, objs);
        json_decref(objs);
    }
    sort_by_kind(all);
    *ret = all;
    return CLI_OK;
}

/* kubectl's "kind.group/name" form, with the namespace when there is one. */
static void describe_obj(const json_t *o, const struct kube_res *res, char *out, size_t size)
{
    char kind[64];
    const char *ns = kube_obj_namespace(o);
    (void)snprintf(kind, sizeof(kind), "%s", res ? res->kind : "?");
    for (char *p = kind; *p; p++)
        *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    (void)snprintf(out, size, "%s%s%s/%s%s%s", kind, res && res->group[0] ? "." : "",
                   res ? res->group : "", kube_obj_name(o), ns ? " -n " : "", ns ? ns : "");
}

static int is_established(void *ctx, const json_t *o, char *why, size_t n)
{
    (void)ctx;
    (void)snprintf(why, n, "not Established yet");
    return o && kube_obj_condition_true(o, "Established") ? 1 : 0;
}

static int is_gone(void *ctx, const json_t *o, char *why, size_t n)
{
    (void)ctx;
    (void)snprintf(why, n, "still terminating");
    return o ? 0 : 1;
}

/* Server-side apply; a namespace still terminating from an uninstall is waited for and
 * applied again (objects cannot be created in it meanwhile). */
static int apply_obj(struct kube_client *c, const struct kube_res *res, const char *ns,
                     const json_t *o, usec_t timeout, struct kube_err *e)
{
    json_t *got = NULL;
    int r = kube_apply(c, res, ns, o, FIELD_MANAGER, true, &got, e);
    if (r == 0 && res == &KUBE_RES_NAMESPACES && kube_obj_deleting(got)) {
        char why[64];
        r = cli_wait(c, res, NULL, kube_obj_name(o), timeout, is_gone, NULL, NULL, why, sizeof(why),
                     e);
        if (r == 0)
            r = kube_apply(c, res, ns, o, FIELD_MANAGER, true, NULL, e);
    }
    json_decref(got);
    return r;
}

static int apply_one(struct cli_globals *g, struct kube_client *c, const json_t *o,
                     const struct install_opts *opt)
{
    const struct kube_res *res = cli_manifest_res(o);
    char what[400];
    describe_obj(o, res, what, sizeof(what));
    if (!res) {
        fprintf(g->err, "error: built-in manifest with unknown kind %s\n",
                json_string_value(json_object_get(o, "kind")));
        return CLI_ERR;
    }
    if (opt->dry_run) {
        fprintf(g->out, "%s (dry run)\n", what);
        return CLI_OK;
    }
    struct kube_err e;
    const char *ns = res->namespaced ? kube_obj_namespace(o) : NULL;
    int r = apply_obj(c, res, ns, o, opt->timeout, &e);
    if (r < 0)
        return cli_fail(g, what, r, &e);
    fprintf(g->out, "%s serverside-applied\n", what);
    cli_wait_fn *fn = res == &KUBE_RES_CRDS                       ? is_established
                      : res == &KUBE_RES_DEPLOYMENTS && opt->wait ? cli_rollout_done
                                                                  : NULL;
    if (!fn)
        return CLI_OK;
    char why[128] = "";
    kube_err_clear(&e);
    r = cli_wait(c, res, ns, kube_obj_name(o), opt->timeout, fn, NULL, NULL, why, sizeof(why), &e);
    if (r == -ETIMEDOUT) {
        fprintf(g->err, "error: %s: %s after --timeout\n", what, why);
        return CLI_TIMEOUT;
    }
    if (r == -ETIME) {
        fprintf(g->err, "error: %s: %s\n", what, why);
        return CLI_ERR;
    }
    return r < 0 ? cli_fail(g, what, r, &e) : CLI_OK;
}

int cli_cmd_install(struct cli_globals *g, int argc, char **argv)
{
    struct install_opts o = {0};
    int rc = parse_install(g, argc, argv, &o);
    json_t *all = NULL;
    if (rc == CLI_OK)
        rc = load_all(g, &all);
    struct kube_client *c = NULL;
    if (rc == CLI_OK && !o.dry_run)
        rc = cli_client(g, &c);
    size_t i;
    json_t *obj;
    json_array_foreach(all, i, obj)
    {
        if (rc != CLI_OK)
            break;
        rc = apply_one(g, c, obj, &o);
    }
    json_decref(all);
    kube_client_free(c);
    return rc;
}

static int delete_one(struct cli_globals *g, struct kube_client *c, const json_t *o,
                      const struct install_opts *opt)
{
    const struct kube_res *res = cli_manifest_res(o);
    char what[400];
    describe_obj(o, res, what, sizeof(what));
    /* the namespace holds more than install made (the config map, Sandboxes, claims) */
    if (!res || (opt->keep_crds && (res == &KUBE_RES_CRDS || res == &KUBE_RES_NAMESPACES)))
        return CLI_OK;
    if (opt->dry_run) {
        fprintf(g->out, "%s deleted (dry run)\n", what);
        return CLI_OK;
    }
    struct kube_err e;
    int r =
        kube_delete(c, res, res->namespaced ? kube_obj_namespace(o) : NULL, kube_obj_name(o), &e);
    if (r < 0 && kube_err_is_not_found(&e)) {
        fprintf(g->out, "%s not found, skipped\n", what);
        return CLI_OK;
    }
    if (r < 0 && res == &KUBE_RES_NAMESPACES && kube_err_is_conflict(&e)) {
        /* a second uninstall while the first one's namespace still terminates */
        fprintf(g->out, "%s already being deleted, skipped\n", what);
        return CLI_OK;
    }
    if (r < 0)
        return cli_fail(g, what, r, &e);
    fprintf(g->out, "%s deleted\n", what);
    return CLI_OK;
}

int cli_cmd_uninstall(struct cli_globals *g, int argc, char **argv)
{
    struct install_opts o = {0};
    int rc = parse_install(g, argc, argv, &o);
    if (rc == CLI_OK && !o.yes && !o.keep_crds) {
        fprintf(g->err, "error: uninstall deletes the CRDs and with them every sandbox in the\n"
                        "cluster; pass --yes to confirm, or --keep-crds\n");
        rc = CLI_USAGE;
    }
    json_t *all = NULL;
    if (rc == CLI_OK)
        rc = load_all(g, &all);
    struct kube_client *c = NULL;
    if (rc == CLI_OK && !o.dry_run)
        rc = cli_client(g, &c);
    for (size_t i = json_array_size(all); rc == CLI_OK && i-- > 0;)
        rc = delete_one(g, c, json_array_get(all, i), &o);
    json_decref(all);
    kube_client_free(c);
    return rc;
}
