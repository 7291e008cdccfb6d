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
    struct tls_metrics_opts to = {.cn = "agent-sandbox-controller-metrics",
                                  .cert_dir = o->metrics_cert_dir,
                                  .cert_name = o->metrics_cert_name,
                                  .key_name = o->metrics_key_name,
                                  .host = host,
                                  .port = port};
    m->metrics_auth = metrics_auth_new(o->client);
    return tls_metrics_start(&to, http_server_thread_server(m->metrics_srv), &m->metrics_tls,
                             &m->metrics_tls_dir);
}

void ctrl__metrics_secure_stop(struct ctrl_manager *m)
{
    tls_front_stop(m->metrics_tls);
    m->metrics_tls = NULL;
    /* The metrics loop still runs: verdicts land, later scrapes get 503. The checker is
     * freed once the server has stopped (ctrl__metrics_secure_free): a NULL one would
     * serve the page without a review. */
    metrics_auth_stop(m->metrics_auth);
    tls_self_signed_remove(m->metrics_tls_dir);
    m->metrics_tls_dir = NULL;
}

void ctrl__metrics_secure_free(struct ctrl_manager *m)
{
    metrics_auth_free(m->metrics_auth);
    m->metrics_auth = NULL;
}
