/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox logs NAME: the log of the sandbox's pod, streamed from the API server
 * (GET /api/v1/namespaces/NS/pods/POD/log). */
#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <unistd.h>

#include "api/res.h"
#include "api/sandbox.h"
#include "cli/cli.h"
#include "common/buf.h"
#include "common/str.h"
#include "kube/obj.h"

void cli_help_logs(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox logs NAME [-c CONTAINER] [-f] [--tail N] [-n NS]\n"
                 "       kubectl-sandbox logs NAME --process ID [-f] [-n NS]\n\n"
                 "Prints the log of sandbox NAME's pod (the pod-name annotation, else NAME).\n"
                 "  -c, --container C   container (default: the pod's only/first one)\n"
                 "  -f, --follow        keep streaming until interrupted\n"
                 "  --tail N            only the last N lines\n"
                 "  -p, --process ID    the output of background process ID instead (see ps):\n"
                 "                      what sandboxd still holds, then with -f until it exits\n"
                 "                      (-c and --tail do not apply)\n"
                 "Exit codes: 0 ok, 1 no such sandbox or pod (e.g. suspended), 2 usage, 3 no\n"
                 "usable cluster config, 5 sandboxd failed or could not be reached (with -p;\n"
                 "1: no such process).\n");
}

/* Refuses what does not apply or cannot be used before anything is asked of the cluster:
 * a --tail that is no count, -c or --tail with --process (sandboxd holds no pod log). */
static int check_logs_opts(const struct cli_globals *g, const struct cli_logs_opts *o)
{
    uint64_t n;
    if (o->tail && cstr_to_u64(o->tail, &n) < 0) {
        fprintf(g->err, "error: --tail: not a count of lines: %s\n", o->tail);
        return CLI_USAGE;
    }
    if (o->process && (o->container || o->tail)) {
        fprintf(g->err, "error: -c and --tail do not apply to --process (see logs --help)\n");
        return CLI_USAGE;
    }
    return CLI_OK;
}

int cli_logs_path(const char *ns, const char *pod, const struct cli_logs_opts *o, struct buf *out)
{
    int r = kube_res_path(&KUBE_RES_PODS, ns, pod, "log", out);
    char sep = '?';
    uint64_t n;
    if (r == 0 && o->container) {
        for (const char *p = o->container; *p; p++)
            if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
                return -EINVAL; /* a DNS label: nothing to escape */
        r = buf_printf(out, "%ccontainer=%s", sep, o->container);
        sep = '&';
    }
    if (r == 0 && o->follow) {
        r = buf_printf(out, "%cfollow=true", sep);
        sep = '&';
    }
    if (r == 0 && o->tail)
        r = cstr_to_u64(o->tail, &n) < 0
                ? -EINVAL
                : buf_printf(out, "%ctailLines=%llu", sep, (unsigned long long)n);
    return r;
}

/* Where the log goes; err keeps why writing it failed (-EPIPE: the reader went away). */
struct log_out {
    FILE *out;
    int err;
};

static int write_out(void *ctx, const char *data, size_t len)
{
    struct log_out *o = ctx;
    errno = 0;
    if (fwrite(data, 1, len, o->out) == len && fflush(o->out) == 0)
        return 0;
    o->err = errno ? -errno : -EIO;
    return o->err;
}

static int parse_logs(const struct cli_globals *g, int argc, char **argv, struct cli_logs_opts *o)
{
    static const struct option lo[] = {
        {"container", required_argument, NULL, 'c'},
        {"follow", no_argument, NULL, 'f'},
        {"tail", required_argument, NULL, 'T'},
        {"process", required_argument, NULL, 'p'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    optind = 0;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "c:fp:", lo, NULL)) != -1) {
        if (ch == 'p') {
            o->process = optarg;
        } else if (ch == 'c') {
            o->container = optarg;
        } else if (ch == 'f') {
            o->follow = true;
        } else if (ch == 'T') {
            o->tail = optarg;
        } else {
            fprintf(g->err, "error: bad option %s; see logs --help\n", argv[optind - 1]);
            return CLI_USAGE;
        }
    }
    if (argc - optind != 1) {
        cli_help_logs(g->err);
        return CLI_USAGE;
    }
    return check_logs_opts(g, o);
}

static int stream_logs(struct cli_globals *g, struct kube_client *c, const char *ns,
                       const char *name, const struct cli_logs_opts *o)
{
    json_t *sb = NULL;
    struct kube_err e;
    char what[300];
    (void)snprintf(what, sizeof(what), "sandbox \"%s\" in namespace %s", name, ns);
    int r = kube_get(c, &API_RES_SANDBOXES, ns, name, &sb, &e);
    if (r < 0)
        return cli_fail(g, what, r, &e);
    const char *an = kube_obj_annotation(sb, SB_ANN_POD_NAME);
    struct buf path;
    buf_init(&path, 4096);
    r = cli_logs_path(ns, an ? an : name, o, &path);
    json_decref(sb);
    if (r < 0) {
        buf_done(&path);
        fprintf(g->err, "error: invalid --container or --tail value\n");
        return CLI_USAGE;
    }
    struct kube_req q;
    kube_req_init(&q, "GET", NULL);
    q.raw_path = buf_str(&path);
    struct log_out lo = {.out = g->out};
    r = kube_request_stream(c, &q, write_out, &lo, NULL, o->follow ? 24 * 3600 * USEC_PER_SEC : 0,
                            &e);
    buf_done(&path);
    if (lo.err == -EPIPE) {
        clearerr(g->out);
        return CLI_OK; /* the reader went away (| head) */
    }
    if (lo.err) {
        char eb[128];
        fprintf(g->err, "error: cannot write the log: %s\n", strerror_r(-lo.err, eb, sizeof(eb)));
        clearerr(g->out); /* reported here, not again at the end */
        return CLI_ERR;
    }
    if (r < 0 && e.http_status == 404)
        fprintf(g->err, "error: %s has no pod (suspended or not created yet)\n", what);
    return r < 0 ? (e.http_status == 404 ? CLI_ERR : cli_fail(g, "reading the pod log", r, &e))
                 : CLI_OK;
}

int cli_cmd_logs(struct cli_globals *g, int argc, char **argv)
{
    struct cli_logs_opts o = {0};
    int rc = parse_logs(g, argc, argv, &o);
    if (rc != CLI_OK)
        return rc;
    const char *name = argv[optind];
    if (o.process)
        return cli_proc_logs(g, name, o.process, o.follow);
    struct kube_client *c = NULL;
    rc = cli_client(g, &c);
    if (rc == CLI_OK)
        rc = stream_logs(g, c, cli_namespace(g, c), name, &o);
    kube_client_free(c);
    return rc;
}
