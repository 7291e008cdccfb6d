/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox describe NAME: the sandbox, its conditions, pod, claim, pool and
 * events, in kubectl describe's layout. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/extensions.h"
#include "api/res.h"
#include "api/sandbox.h"
#include "cli/cli.h"
#include "cli/output.h"
#include "common/buf.h"
#include "common/xalloc.h"
#include "kube/obj.h"

void cli_help_describe(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox describe NAME... [-n NS]\n\n"
                 "Shows a sandbox: mode, conditions, its pod (phase, IP, node), the claim and\n"
                 "warm pool it came from, and recent events of the sandbox and its pod.\n"
                 "Exit codes: 0 ok, 1 not found or the request failed (the NAMEs after it are\n"
                 "not shown), 2 usage, 3 no usable cluster config.\n");
}

static const char *str_or(const char *s, const char *dflt)
{
    return s && *s ? s : dflt;
}

/* "Name:         value"; value (from the cluster) made safe for a terminal. */
static void field(FILE *out, const char *name, const char *value)
{
    char *safe = out_safe_dup(str_or(value, "<none>"));
    fprintf(out, "%-13s %s\n", name, safe);
    xfree(safe);
}

static void print_map(FILE *out, const char *name, const json_t *m)
{
    const char *k;
    const json_t *v;
    bool first = true;
    if (!json_is_object(m) || json_object_size(m) == 0) {
        field(out, name, NULL);
        return;
    }
    json_object_foreach((json_t *)m, k, v)
    {
        char *sk = out_safe_dup(k), *sv = out_safe_dup(str_or(json_string_value(v), ""));
        fprintf(out, "%-13s %s=%s\n", first ? name : "", sk, sv);
        xfree(sk);
        xfree(sv);
        first = false;
    }
}

static void print_conditions(FILE *out, const json_t *sb)
{
    const json_t *conds = kube_obj_path(sb, "status.conditions");
    fprintf(out, "Conditions:\n");
    if (json_array_size(conds) == 0) {
        fprintf(out, "  <none>\n");
        return;
    }
    struct out_table t;
    out_table_init(&t, 5);
    out_table_add(&t, (const char *const[]){"  TYPE", "STATUS", "REASON", "AGE", "MESSAGE"});
    size_t i;
    const json_t *c;
    json_array_foreach(conds, i, c)
    {
        char type[128], age[32];
        (void)snprintf(type, sizeof(type), "  %s", str_or(kube_obj_path_str(c, "type"), "?"));
        out_table_add(&t, (const char *const[]){
                              type, kube_obj_path_str(c, "status"), kube_obj_path_str(c, "reason"),
                              out_age(kube_obj_path_str(c, "lastTransitionTime"), age, sizeof(age)),
                              str_or(kube_obj_path_str(c, "message"), "")});
    }
    out_table_print(out, &t);
    out_table_done(&t);
}

/* The pod line: name, phase, IP and node, or why there is none. */
static void print_pod(FILE *out, struct kube_client *c, const char *ns, const json_t *sb)
{
    const char *mode = kube_obj_path_str(sb, "spec.operatingMode");
    const char *pod = kube_obj_annotation(sb, SB_ANN_POD_NAME);
    pod = pod ? pod : kube_obj_name(sb);
    json_t *p = NULL;
    struct kube_err e;
    char line[1400];
    kube_err_clear(&e);
    int r = kube_get(c, &KUBE_RES_PODS, ns, pod, &p, &e);
    if (r < 0 && (r == -ENOENT || e.http_status == 404)) {
        field(out, "Pod:",
              mode && !strcmp(mode, SB_MODE_SUSPENDED) ? "<none> (suspended)"
                                                       : "<none> (not created)");
        return;
    }
    if (r < 0) { /* 403, 5xx, unreachable: not knowing is not "not created" */
        char eb[128];
        (void)snprintf(line, sizeof(line), "%s (cannot read it: %s)", pod,
                       e.message[0] ? e.message : strerror_r(-r, eb, sizeof(eb)));
        field(out, "Pod:", line);
        return;
    }
    const json_t *ip = json_array_get(kube_obj_path(p, "status.podIPs"), 0);
    (void)snprintf(line, sizeof(line), "%s (phase %s, IP %s, node %s%s)", pod,
                   str_or(kube_obj_path_str(p, "status.phase"), "Unknown"),
                   str_or(json_string_value(json_object_get(ip, "ip")), "none"),
                   str_or(kube_obj_path_str(p, "spec.nodeName"), "none"),
                   kube_obj_deleting(p) ? ", terminating" : "");
    field(out, "Pod:", line);
    json_decref(p);
}

/* Claim and pool: the claim that owns the sandbox and its warm pool, or the pool that
 * owns an unclaimed member. */
static void print_origin(FILE *out, struct kube_client *c, const char *ns, const json_t *sb)
{
    const json_t *ref = kube_obj_controller_ref(sb);
    const char *kind = kube_obj_path_str(ref, "kind"), *name = kube_obj_path_str(ref, "name");
    const char *pool = NULL;
    json_t *claim = NULL, *swp = NULL;
    char line[512];
    if (kind && !strcmp(kind, EXT_KIND_CLAIM) &&
        kube_get(c, &API_RES_SANDBOXCLAIMS, ns, name, &claim, NULL) == 0) {
        const json_t *rc = kube_obj_condition(claim, SB_COND_READY);
        (void)snprintf(line, sizeof(line), "%s (Ready %s%s%s)", name,
                       str_or(kube_obj_path_str(rc, "status"), "Unknown"), rc ? ", " : "",
                       rc ? str_or(kube_obj_path_str(rc, "reason"), "") : "");
        field(out, "Claim:", line);
        pool = kube_obj_path_str(claim, "spec.warmPoolRef.name");
    } else {
        field(out, "Claim:", kind && !strcmp(kind, EXT_KIND_CLAIM) ? name : NULL);
        pool = kind && !strcmp(kind, EXT_KIND_POOL) ? name : NULL;
    }
    if (pool && kube_get(c, &API_RES_SANDBOXWARMPOOLS, ns, pool, &swp, NULL) == 0) {
        const json_t *d = kube_obj_path(swp, "spec.replicas");
        const json_t *r = kube_obj_path(swp, "status.readyReplicas");
        (void)snprintf(line, sizeof(line), "%s (template %s, desired %lld, ready %lld)", pool,
                       str_or(kube_obj_path_str(swp, "spec.sandboxTemplateRef.name"), "?"),
                       (long long)json_integer_value(d), (long long)json_integer_value(r));
        field(out, "Pool:", line);
    } else {
        field(out, "Pool:", pool);
    }
    json_decref(claim);
    json_decref(swp);
}

static int event_cmp(const void *a, const void *b)
{
    const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
    const char *tx = str_or(kube_obj_path_str(x, "lastTimestamp"),
                            str_or(kube_obj_path_str(x, "eventTime"), ""));
    const char *ty = str_or(kube_obj_path_str(y, "lastTimestamp"),
                            str_or(kube_obj_path_str(y, "eventTime"), ""));
    return strcmp(tx, ty);
}

/* Appends the events about objects named name to all. Returns 0 or a negative errno
 * with e filled. */
static int list_events(struct kube_client *c, const char *ns, const char *name, json_t *all,
                       struct kube_err *e)
{
    struct kube_req q;
    struct buf sel;
    json_t *list = NULL;
    buf_init(&sel, 512);
    (void)buf_printf(&sel, "involvedObject.name=%s", name);
    kube_req_init(&q, "GET", &KUBE_RES_EVENTS);
    q.field_selector = buf_str(&sel);
    int r = kube_list_all(c, &KUBE_RES_EVENTS, ns, &q, &list, e);
    buf_done(&sel);
    if (r == 0)
        (void)json_array_extend(all, json_object_get(list, "items"));
    json_decref(list);
    return r;
}

static void print_event_table(FILE *out, const json_t *items)
{
    size_t n = json_array_size(items);
    const json_t **v = xcalloc(n ? n : 1, sizeof(*v));
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(items, i);
    qsort(v, n, sizeof(*v), event_cmp);
    struct out_table t;
    out_table_init(&t, 5);
    out_table_add(&t, (const char *const[]){"  TYPE", "REASON", "AGE", "FROM", "MESSAGE"});
    for (size_t i = 0; i < n; i++) {
        const json_t *ev = v[i];
        char type[64], age[32];
        (void)snprintf(type, sizeof(type), "  %s", str_or(kube_obj_path_str(ev, "type"), ""));
        const char *ts = kube_obj_path_str(ev, "lastTimestamp");
        out_table_add(&t,
                      (const char *const[]){
                          type, kube_obj_path_str(ev, "reason"),
                          out_age(ts ? ts : kube_obj_path_str(ev, "eventTime"), age, sizeof(age)),
                          str_or(kube_obj_path_str(ev, "source.component"),
                                 kube_obj_path_str(ev, "reportingComponent")),
                          str_or(kube_obj_path_str(ev, "message"), "")});
    }
    out_table_print(out, &t);
    out_table_done(&t);
    xfree(v);
}

/* The events of the sandbox and of its pod: a claim's or pool's sandbox has a pod of
 * another name (the pod-name annotation). */
static void print_events(FILE *out, struct kube_client *c, const char *ns, const json_t *sb)
{
    const char *name = kube_obj_name(sb), *pod = kube_obj_annotation(sb, SB_ANN_POD_NAME);
    json_t *all = json_array();
    struct kube_err e;
    kube_err_clear(&e);
    int r = list_events(c, ns, name, all, &e);
    if (r == 0 && pod && *pod && strcmp(pod, name) != 0)
        r = list_events(c, ns, pod, all, &e);
    fprintf(out, "Events:\n");
    if (r < 0) {
        char eb[128];
        char *why = out_safe_dup(e.message[0] ? e.message : strerror_r(-r, eb, sizeof(eb)));
        fprintf(out, "  <cannot list events: %s>\n", why);
        xfree(why);
    } else if (json_array_size(all) == 0) {
        fprintf(out, "  <none>\n");
    } else {
        print_event_table(out, all);
    }
    json_decref(all);
}

static void describe(FILE *out, struct kube_client *c, const char *ns, const json_t *sb)
{
    char age[32], line[256];
    field(out, "Name:", kube_obj_name(sb));
    field(out, "Namespace:", ns);
    (void)snprintf(line, sizeof(line), "%s (%s ago)",
                   str_or(kube_obj_path_str(sb, "metadata.creationTimestamp"), "?"),
                   out_age(kube_obj_path_str(sb, "metadata.creationTimestamp"), age, sizeof(age)));
    field(out, "Created:", line);
    print_map(out, "Labels:", kube_obj_path(sb, "metadata.labels"));
    field(out, "Mode:", str_or(kube_obj_path_str(sb, "spec.operatingMode"), SB_MODE_RUNNING));
    field(out, "Service:", kube_obj_path_str(sb, "status.serviceFQDN"));
    field(out, "Shutdown:", kube_obj_path_str(sb, "spec.lifecycle.shutdownTime"));
    print_pod(out, c, ns, sb);
    print_origin(out, c, ns, sb);
    print_conditions(out, sb);
    print_events(out, c, ns, sb);
}

int cli_cmd_describe(struct cli_globals *g, int argc, char **argv)
{
    if (argc < 2) {
        cli_help_describe(g->err);
        return CLI_USAGE;
    }
    struct kube_client *c = NULL;
    int rc = cli_client(g, &c);
    const char *ns = rc == CLI_OK ? cli_namespace(g, c) : NULL;
    for (int i = 1; rc == CLI_OK && i < argc; i++) {
        json_t *sb = NULL;
        struct kube_err e;
        int r = kube_get(c, &API_RES_SANDBOXES, ns, argv[i], &sb, &e);
        if (r < 0) {
            char what[300];
            (void)snprintf(what, sizeof(what), "sandbox \"%s\" in namespace %s", argv[i], ns);
            rc = cli_fail(g, what, r, &e);
            break;
        }
        if (i > 1)
            fputc('\n', g->out);
        describe(g->out, c, ns, sb);
        json_decref(sb);
    }
    kube_client_free(c);
    return rc;
}
