/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox get KIND [NAME...]: tables like kubectl's printer columns, or
 * -o json|yaml|name. */
#include <string.h>

#include "api/res.h"
#include "api/sandbox.h"
#include "cli/cli.h"
#include "cli/output.h"
#include "common/buf.h"
#include "common/xalloc.h"
#include "kube/obj.h"

/* One column: a header and how to compute the cell from an object into buf. */
struct column {
    const char *header;
    const char *(*cell)(const json_t *obj, char *buf, unsigned size);
    bool wide_only;
};

struct kind {
    const char *names[5]; /* accepted spellings, first is canonical */
    const struct kube_res *res;
    const struct column *cols;
};

static const char *c_name(const json_t *o, char *b, unsigned n)
{
    (void)b, (void)n;
    return kube_obj_name(o);
}

static const char *c_age(const json_t *o, char *b, unsigned n)
{
    return out_age(kube_obj_path_str(o, "metadata.creationTimestamp"), b, n);
}

static const char *cond_field(const json_t *o, const char *field)
{
    const json_t *c = kube_obj_condition(o, SB_COND_READY);
    return c ? json_string_value(json_object_get(c, field)) : NULL;
}

static const char *c_ready(const json_t *o, char *b, unsigned n)
{
    (void)b, (void)n;
    const char *s = cond_field(o, "status");
    return s ? s : "";
}

static const char *c_reason(const json_t *o, char *b, unsigned n)
{
    (void)b, (void)n;
    const char *s = cond_field(o, "reason");
    return s ? s : "";
}

static const char *c_pod(const json_t *o, char *b, unsigned n)
{
    (void)b, (void)n;
    return kube_obj_annotation(o, SB_ANN_POD_NAME);
}

/* The pod a sandbox runs in: the pod-name annotation, else the sandbox's own name; none
 * while suspended. */
static const char *c_list_pod(const json_t *o, char *b, unsigned n)
{
    const char *mode = kube_obj_path_str(o, "spec.operatingMode");
    if (mode && strcmp(mode, SB_MODE_SUSPENDED) == 0)
        return NULL;
    const char *p = c_pod(o, b, n);
    return p ? p : kube_obj_name(o);
}

static const char *c_pool_template(const json_t *o, char *b, unsigned n)
{
    (void)b, (void)n;
    return kube_obj_path_str(o, "spec.sandboxTemplateRef.name");
}

static const char *c_mode(const json_t *o, char *b, unsigned n)
{
    (void)b, (void)n;
    const char *m = kube_obj_path_str(o, "spec.operatingMode");
    return m ? m : SB_MODE_RUNNING;
}

static const char *c_node(const json_t *o, char *b, unsigned n)
{
    (void)b, (void)n;
    return kube_obj_path_str(o, "status.nodeName");
}

static const char *c_ip(const json_t *o, char *b, unsigned n)
{
    (void)b, (void)n;
    const json_t *ips = kube_obj_path(o, "status.podIPs");
    return json_string_value(json_array_get(ips, 0));
}

static const char *c_claim_sandbox(const json_t *o, char *b, unsigned n)
{
    (void)b, (void)n;
    return kube_obj_path_str(o, "status.sandbox.name");
}

static const char *int_at(const json_t *o, const char *path, char *b, unsigned n)
{
    const json_t *v = kube_obj_path(o, path);
    (void)snprintf(b, n, "%lld", json_is_integer(v) ? (long long)json_integer_value(v) : 0LL);
    return b;
}

static const char *c_pool_ready(const json_t *o, char *b, unsigned n)
{
    return int_at(o, "status.readyReplicas", b, n);
}

static const char *c_pool_desired(const json_t *o, char *b, unsigned n)
{
    return int_at(o, "spec.replicas", b, n);
}

static const struct column sandbox_cols[] = {
    {"NAME", c_name, false}, {"READY", c_ready, false}, {"REASON", c_reason, false},
    {"POD", c_pod, true},    {"NODE", c_node, true},    {"IP", c_ip, true},
    {"AGE", c_age, false},   {NULL, NULL, false},
};
static const struct column template_cols[] = {
    {"NAME", c_name, false}, {"AGE", c_age, false}, {NULL, NULL, false}};
static const struct column claim_cols[] = {
    {"NAME", c_name, false},     {"READY", c_ready, false}, {"SANDBOX", c_claim_sandbox, false},
    {"REASON", c_reason, false}, {"AGE", c_age, false},     {NULL, NULL, false},
};
static const struct column pool_cols[] = {
    {"NAME", c_name, false},
    {"READY", c_pool_ready, false},
    {"DESIRED", c_pool_desired, false},
    {"AGE", c_age, false},
    {NULL, NULL, false},
};

static const struct column list_cols[] = {
    {"NAME", c_name, false},    {"READY", c_ready, false}, {"REASON", c_reason, false},
    {"POD", c_list_pod, false}, {"NODE", c_node, false},   {"MODE", c_mode, true},
    {"IP", c_ip, true},         {"AGE", c_age, false},     {NULL, NULL, false},
};
static const struct column pools_cols[] = {
    {"NAME", c_name, false},
    {"TEMPLATE", c_pool_template, false},
    {"DESIRED", c_pool_desired, false},
    {"READY", c_pool_ready, false},
    {"AGE", c_age, false},
    {NULL, NULL, false},
};

static const struct kind kinds[] = {
    {{"sandboxes", "sandbox", "sbx", "sandboxes." SB_GROUP, NULL},
     &API_RES_SANDBOXES,
     sandbox_cols},
    {{"sandboxtemplates", "sandboxtemplate", "templates", "template", NULL},
     &API_RES_SANDBOXTEMPLATES,
     template_cols},
    {{"sandboxclaims", "sandboxclaim", "claims", "claim", NULL},
     &API_RES_SANDBOXCLAIMS,
     claim_cols},
    {{"sandboxwarmpools", "sandboxwarmpool", "pools", "pool", "swp"},
     &API_RES_SANDBOXWARMPOOLS,
     pool_cols},
};
/* The same kinds with the columns of `list` and `pools`. */
static const struct kind list_kind = {
    {"sandboxes", "sandbox", NULL, NULL, NULL}, &API_RES_SANDBOXES, list_cols};
static const struct kind pools_kind = {{"sandboxwarmpools", "sandboxwarmpool", NULL, NULL, NULL},
                                       &API_RES_SANDBOXWARMPOOLS,
                                       pools_cols};

static const struct kind *find_kind(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
        for (size_t j = 0; j < ARRAY_SIZE(kinds[i].names) && kinds[i].names[j]; j++)
            if (strcmp(kinds[i].names[j], name) == 0)
                return &kinds[i];
    return NULL;
}

void cli_help_get(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox get KIND [NAME...] [-n NS | -A] [-l SELECTOR]\n"
                 "                            [-o wide|json|yaml|name]\n\n"
                 "KIND: sandboxes (sandbox, sbx), sandboxtemplates (template), sandboxclaims\n"
                 "(claim), sandboxwarmpools (pool, swp).\n"
                 "Without NAME, lists every object of KIND in the namespace.\n"
                 "Exit codes: 0 ok, 1 the request failed or a NAME was not found (the others\n"
                 "are still printed), 2 usage, 3 no usable cluster config.\n");
}

static void print_table(const struct cli_globals *g, const struct kind *k, const json_t *items)
{
    bool wide = strcmp(g->output, "wide") == 0;
    struct out_table t;
    const char *cells[OUT_MAX_COLS];
    char bufs[OUT_MAX_COLS][64];
    unsigned n = 0;
    if (g->all_namespaces)
        cells[n++] = "NAMESPACE";
    for (const struct column *c = k->cols; c->header; c++)
        if (wide || !c->wide_only)
            cells[n++] = c->header;
    out_table_init(&t, n);
    out_table_add(&t, cells);
    size_t i;
    const json_t *o;
    json_array_foreach(items, i, o)
    {
        n = 0;
        if (g->all_namespaces)
            cells[n++] = kube_obj_namespace(o);
        for (const struct column *c = k->cols; c->header; c++)
            if (wide || !c->wide_only) {
                cells[n] = c->cell(o, bufs[n], sizeof(bufs[n]));
                n++;
            }
        out_table_add(&t, cells);
    }
    out_table_print(g->out, &t);
    out_table_done(&t);
}

static int print_items(const struct cli_globals *g, const struct kind *k, json_t *items,
                       bool single)
{
    if (strcmp(g->output, "json") == 0 || strcmp(g->output, "yaml") == 0) {
        size_t i;
        json_t *o;
        json_array_foreach(items, i, o) /* as kubectl: no managedFields unless asked */
            (void) json_object_del(json_object_get(o, "metadata"), "managedFields");
        json_t *doc =
            single ? json_incref(json_array_get(items, 0))
                   : json_pack("{s:s,s:s,s:O}", "apiVersion", "v1", "kind", "List", "items", items);
        int r = 0;
        if (strcmp(g->output, "json") == 0)
            out_json(g->out, doc);
        else
            r = out_yaml(g->out, doc);
        json_decref(doc);
        if (r < 0) {
            fprintf(g->err, "error: cannot write the YAML output\n");
            return CLI_ERR;
        }
    } else if (strcmp(g->output, "name") == 0) {
        size_t i;
        const json_t *o;
        json_array_foreach(items, i, o)
            fprintf(g->out, "%s.%s/%s\n", k->names[1], k->res->group, kube_obj_name(o));
    } else if (json_array_size(items) == 0) {
        fprintf(g->err, "No %s found.\n", k->names[0]);
    } else {
        print_table(g, k, items);
    }
    return CLI_OK;
}

static int get_named(struct cli_globals *g, struct kube_client *c, const struct kind *k, int argc,
                     char **argv)
{
    json_t *items = json_array();
    int rc = CLI_OK;
    for (int i = 0; i < argc; i++) {
        json_t *o = NULL;
        struct kube_err e;
        int r = kube_get(c, k->res, cli_namespace(g, c), argv[i], &o, &e);
        if (r < 0) {
            struct buf what;
            buf_init(&what, 1024);
            (void)buf_printf(&what, "%s \"%s\" in namespace %s", k->names[1], argv[i],
                             cli_namespace(g, c));
            rc = cli_fail(g, buf_str(&what), r, &e);
            buf_done(&what);
            continue;
        }
        (void)json_array_append_new(items, o);
    }
    if (json_array_size(items) > 0)
        (void)print_items(g, k, items, argc == 1);
    json_decref(items);
    return rc;
}

static int get_list(struct cli_globals *g, struct kube_client *c, const struct kind *k)
{
    struct kube_req q;
    struct kube_err e;
    json_t *list = NULL;
    kube_req_init(&q, "GET", k->res);
    q.label_selector = g->selector;
    int r = kube_list_all(c, k->res, g->all_namespaces ? NULL : cli_namespace(g, c), &q, &list, &e);
    if (r < 0)
        return cli_fail(g, k->names[0], r, &e);
    r = print_items(g, k, json_object_get(list, "items"), false);
    json_decref(list);
    return r;
}

static int run_kind(struct cli_globals *g, const struct kind *k, int argc, char **argv)
{
    static const char *const fmts[] = {"", "wide", "json", "yaml", "name", NULL};
    int r = cli_check_output(g, fmts);
    if (r != CLI_OK)
        return r;
    for (int i = 0; i < argc; i++)
        if (argv[i][0] == '-') {
            fprintf(g->err, "error: unknown option %s\n", argv[i]);
            return CLI_USAGE;
        }
    struct kube_client *c = NULL;
    r = cli_client(g, &c);
    if (r != CLI_OK)
        return r;
    r = argc > 0 ? get_named(g, c, k, argc, argv) : get_list(g, c, k);
    kube_client_free(c);
    return r;
}

int cli_print_items(const struct cli_globals *g, const char *what, json_t *items)
{
    const struct kind *k = !strcmp(what, "list")    ? &list_kind
                           : !strcmp(what, "pools") ? &pools_kind
                                                    : find_kind(what);
    return k ? print_items(g, k, items, false) : CLI_USAGE;
}

int cli_cmd_get(struct cli_globals *g, int argc, char **argv)
{
    if (argc < 2) {
        cli_help_get(g->err);
        return CLI_USAGE;
    }
    const struct kind *k = find_kind(argv[1]);
    if (!k) {
        fprintf(g->err, "error: unknown kind \"%s\"; try sandboxes, templates, claims, pools\n",
                argv[1]);
        return CLI_USAGE;
    }
    return run_kind(g, k, argc - 2, argv + 2);
}

void cli_help_list(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox list [NAME...] [-n NS | -A] [-l SELECTOR]\n"
                 "                             [-o wide|json|yaml|name]\n\n"
                 "Lists sandboxes with READY, REASON, POD, NODE and AGE (wide adds the\n"
                 "operating mode and the pod IP).\n"
                 "Exit codes as for get.\n");
}

int cli_cmd_list(struct cli_globals *g, int argc, char **argv)
{
    return run_kind(g, &list_kind, argc - 1, argv + 1);
}

void cli_help_pools(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox pools [NAME...] [-n NS | -A] [-l SELECTOR]\n"
                 "                              [-o json|yaml|name]\n\n"
                 "Lists warm pools with their template and the desired and ready number of\n"
                 "pool sandboxes.\n"
                 "Exit codes as for get.\n");
}

int cli_cmd_pools(struct cli_globals *g, int argc, char **argv)
{
    return run_kind(g, &pools_kind, argc - 1, argv + 1);
}
