/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the kubectl-sandbox commands: client set-up, error reporting,
 * output format checks and single-object output. */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/output.h"
#include "common/duration.h"
#include "common/xalloc.h"
#include "kube/obj.h"

int cli_config(const struct cli_globals *g, struct kube_config **ret)
{
    struct kube_config_opts o = {
        .kubeconfig = g->kubeconfig, .context = g->context, .namespace_override = g->ns};
    struct kube_err e;
    kube_err_clear(&e);
    if (kube_config_load(&o, ret, &e) < 0) {
        fprintf(g->err,
                "error: no usable cluster configuration: %s\n"
                "hint: pass --kubeconfig PATH or --context NAME, or set KUBECONFIG\n",
                e.message[0] ? e.message : "unknown error");
        return CLI_NO_CONFIG;
    }
    return CLI_OK;
}

int cli_client(const struct cli_globals *g, struct kube_client **ret)
{
    struct kube_config *cfg = NULL;
    int r = cli_config(g, &cfg);
    if (r != CLI_OK)
        return r;
    r = kube_client_new(cfg, &(struct kube_client_opts){.user_agent = "kubectl-sandbox"}, ret);
    if (r < 0) {
        fprintf(g->err, "error: cannot create the API client\n");
        return CLI_NO_CONFIG;
    }
    return CLI_OK;
}

int cli_fail(const struct cli_globals *g, const char *what, int r, const struct kube_err *e)
{
    char eb[128];
    const char *msg = e && e->message[0] ? e->message : strerror_r(-r, eb, sizeof(eb));
    if (e && e->http_status == 404 && !e->reason[0])
        msg = "the server does not know this resource type; are the Agent Sandbox CRDs "
              "installed? (kubectl-sandbox install)";
    char *safe = out_safe_dup(msg); /* an API message may quote object data */
    fprintf(g->err, "error: %s: %s\n", what, safe);
    xfree(safe);
    if (e && e->http_status == 0 && r != -ENOENT)
        fprintf(g->err, "hint: is the cluster reachable? check --kubeconfig / --context\n");
    return CLI_ERR;
}

/* Whether fd is a pipe or socket whose reading end is closed: poll reports POLLERR on
 * the write end of a pipe without readers, POLLHUP on a socket whose peer is gone. */
static bool reader_gone(int fd)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
        return false;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP));
}

int cli_output_error(FILE *out, int e)
{
    if (e > 0)
        return -e;
    return reader_gone(fileno(out)) ? -EPIPE : -EIO;
}

int cli_output_done(FILE *out, FILE *err, int rc)
{
    errno = 0;
    if (fflush(out) == 0 && !ferror(out))
        return rc;
    int e = -cli_output_error(out, errno); /* errno 0: an earlier write failed */
    if (e == EPIPE)
        return rc;
    char eb[128];
    fprintf(err, "error: cannot write the output: %s\n", strerror_r(e, eb, sizeof(eb)));
    return rc == CLI_OK ? CLI_ERR : rc;
}

const char *cli_namespace(const struct cli_globals *g, const struct kube_client *c)
{
    return g->ns ? g->ns : kube_client_namespace(c);
}

int cli_parse_timeout(const struct cli_globals *g, const char *arg, bool positive, usec_t *ret)
{
    usec_t d;
    if (duration_parse_secs(arg, &d) == 0 && (d > 0 || !positive)) {
        *ret = d;
        return CLI_OK;
    }
    fprintf(g->err, "error: --timeout: not a duration%s: %s (try 90s, 5m)\n",
            positive ? " above 0" : "", arg);
    return CLI_USAGE;
}

int cli_check_output(const struct cli_globals *g, const char *const *allowed)
{
    for (const char *const *a = allowed; *a; a++)
        if (strcmp(g->output, *a) == 0)
            return CLI_OK;
    if (!allowed[0] || (!allowed[0][0] && !allowed[1])) { /* only "": no -o at all */
        fprintf(g->err, "error: this command takes no output format (-o %s)\n", g->output);
        return CLI_USAGE;
    }
    fprintf(g->err, "error: unknown output format \"%s\" for this command (", g->output);
    for (const char *const *a = allowed; *a; a++)
        if (**a)
            fprintf(g->err, "%s%s", a == allowed || !a[-1][0] ? "" : ", ", *a);
    fprintf(g->err, ")\n");
    return CLI_USAGE;
}

void cli_print_object(const struct cli_globals *g, const char *singular, const char *group,
                      json_t *obj)
{
    (void)json_object_del(json_object_get(obj, "metadata"), "managedFields");
    if (strcmp(g->output, "json") == 0)
        out_json(g->out, obj);
    else if (strcmp(g->output, "yaml") == 0) {
        if (out_yaml(g->out, obj) < 0)
            fprintf(g->err, "error: cannot write the YAML output\n");
    } else
        fprintf(g->out, "%s.%s/%s\n", singular, group, kube_obj_name(obj));
}
