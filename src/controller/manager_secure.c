/* SPDX-License-Identifier: Apache-2.0 */
/* --metrics-secure: /metrics over HTTPS (tls/tls_front.h) for scrapers whose bearer
 * token passes a TokenReview and a SubjectAccessReview (tls/metrics_auth.h), as
 * kubebuilder's default secure metrics. The plain metrics server then listens on an
 * ephemeral loopback port only, and checks the token too. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "controller/manager.h"
#include "controller/manager_int.h"
#include "http/server.h"
#include "tls/metrics_auth.h"
#include "tls/tls_front.h"

struct pending {
    struct ctrl_manager *m;
    int (*render)(struct http_req *req, struct ctrl_manager *m);
};

static void verdict(struct http_req *req, int status, void *ctx)
{
    struct pending *p = ctx;
    static const char *const detail[] = {
        "a bearer token is required", "not allowed to get /metrics",
        "too many scrapes under review, try again", "the review of the token failed"};
    int which = status == 401 ? 0 : status == 403 ? 1 : status == 503 ? 2 : 3;
    if (status == 200)
        (void)p->render(req, p->m);
    else {
        if (status == 401)
            (void)http_resp_header_add(req, "WWW-Authenticate", "Bearer");
        (void)http_respond_error(req, status, detail[which]);
    }
    xfree(p);
}

int ctrl__metrics_serve(struct http_req *req, struct ctrl_manager *m,
                        int (*render)(struct http_req *req, struct ctrl_manager *m))
{
    struct pending *p;
    if (!m->metrics_auth)
        return render(req, m);
    p = XNEW(struct pending);
    p->m = m;
    p->render = render;
    metrics_auth_check(m->metrics_auth, req, verdict, p);
    return 0;
}

int ctrl__metrics_secure_start(struct ctrl_manager *m, const char *host, uint16_t port)
{
    const struct ctrl_opts *o = &m->opts;
    const char *dir = o->metrics_cert_dir;
    char *cert, *key;
    int r = 0;
    if (!dir) {
        r = tls_self_signed("agent-sandbox-controller-metrics", &m->metrics_tls_dir);
        if (r < 0)
            return log_error_errno(r, "cannot make a self-signed metrics certificate");
        dir = m->metrics_tls_dir;
        log_info("metrics: serving a self-signed certificate (give --metrics-cert-path to "
                 "use your own)");
    }
    cert = xasprintf("%s/%s", dir, o->metrics_cert_name ? o->metrics_cert_name : "tls.crt");
    key = xasprintf("%s/%s", dir, o->metrics_key_name ? o->metrics_key_name : "tls.key");
    struct tls_front_opts to = {.host = host, .port = port, .cert_file = cert, .key_file = key};
    m->metrics_auth = metrics_auth_new(o->client);
    r = tls_front_start(&to, http_server_thread_server(m->metrics_srv), &m->metrics_tls);
    xfree(cert);
    xfree(key);
    if (r < 0)
        return log_error_errno(r, "cannot serve secure metrics\thost=%s port=%u", host,
                               (unsigned)port);
    log_info("serving secure metrics\thost=%s port=%u authn=tokenreview authz=/metrics:get", host,
             (unsigned)tls_front_port(m->metrics_tls));
    return 0;
}

void ctrl__metrics_secure_stop(struct ctrl_manager *m)
{
    tls_front_stop(m->metrics_tls);
    m->metrics_tls = NULL;
    metrics_auth_free(m->metrics_auth); /* the metrics loop still runs: verdicts land */
    m->metrics_auth = NULL;
    tls_self_signed_remove(m->metrics_tls_dir);
    m->metrics_tls_dir = NULL;
}
