/* SPDX-License-Identifier: Apache-2.0 */
/* In-cluster configuration: the service account mounted into the pod. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "kube/config_int.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

static char *build_server(const char *host, const char *port)
{
    if (strchr(host, ':'))
        return xasprintf("https://[%s]:%s", host, port);
    return xasprintf("https://%s:%s", host, port);
}

static char *read_namespace(const char *dir)
{
    struct buf b;
    char *path = xasprintf("%s/namespace", dir);
    char *ns = NULL;
    buf_init(&b, 256);
    if (kube__read_file(path, 256, &b) >= 0) {
        struct str t = str_trim(str_make(buf_str(&b), b.len));
        if (t.len > 0)
            ns = str_dup(t);
    }
    buf_done(&b);
    xfree(path);
    return ns ? ns : xstrdup("default");
}

int kube__config_in_cluster(struct kube_config *cfg, const struct kube_config_opts *opts,
                            struct kube_err *reterr)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    const char *dir = opts->sa_dir ? opts->sa_dir : SA_DIR;
    if (!host || !host[0] || !port || !port[0]) {
        kube_err_set(reterr, -ENOENT,
                     "no kubeconfig found and not running in a cluster "
                     "(KUBERNETES_SERVICE_HOST/PORT unset)");
        return -ENOENT;
    }
    uint64_t p;
    if (cstr_to_u64(port, &p) < 0 || p == 0 || p > 65535) {
        kube_err_set(reterr, -EINVAL, "KUBERNETES_SERVICE_PORT \"%s\" is not a port", port);
        return -EINVAL;
    }
    char *token = xasprintf("%s/token", dir);
    char *ca = xasprintf("%s/ca.crt", dir);
    int r = 0;
    if (access(token, R_OK) < 0 || access(ca, R_OK) < 0) {
        r = -errno;
        kube_err_set(reterr, r, "in-cluster config: %s: %s", access(token, R_OK) < 0 ? token : ca,
                     strerror(-r));
        xfree(token);
        xfree(ca);
        return r;
    }
    cfg->server = build_server(host, port);
    cfg->token_file = token;
    cfg->ca_file = ca;
    cfg->namespace =
        opts->namespace_override ? xstrdup(opts->namespace_override) : read_namespace(dir);
    cfg->context = xstrdup("");
    return 0;
}
