/* SPDX-License-Identifier: Apache-2.0 */
/* The sandboxd connection of kubectl-sandbox: pod proxy, router or direct (see sbd.h). */
#include "cli/sbd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/res.h"
#include "api/sandbox.h"
#include "as_version.h"
#include "cli/output.h"
#include "common/limits.h"
#include "common/loopback.h"
#include "common/pct.h"
#include "common/xalloc.h"
#include "kube/obj.h"

static bool bad_segment(const char *s)
{
    return !s || !*s || !strcmp(s, ".") || !strcmp(s, "..") || strchr(s, '/');
}

int cli_sbd_proxy_base(const char *server, const char *ns, const char *pod, unsigned port,
                       struct buf *out)
{
    if (bad_segment(ns) || bad_segment(pod) || port == 0 || port > 65535)
        return -EINVAL;
    size_t n = strlen(server);
    while (n > 0 && server[n - 1] == '/')
        n--;
    int r = buf_append(out, server, n);
    if (r == 0)
        r = buf_puts(out, "/api/v1/namespaces/");
    if (r == 0)
        r = pct_encode(out, ns, NULL);
    if (r == 0)
        r = buf_puts(out, "/pods/");
    if (r == 0)
        r = pct_encode(out, pod, NULL);
    if (r == 0)
        r = buf_printf(out, ":%u/proxy", port);
    return r;
}

int cli_sbd_files_path(const char *path, struct buf *out)
{
    while (*path == '/')
        path++;
    int r = buf_puts(out, "/v1/files/");
    return r == 0 ? pct_encode(out, path, "/") : r;
}

void cli_sbd_error_text(long status, const char *body, size_t len, char *out, size_t size)
{
    json_t *j = body && len ? json_loadb(body, len, 0, NULL) : NULL;
    const char *code = json_string_value(json_object_get(j, "code"));
    const char *msg = json_string_value(json_object_get(j, "message"));
    const char *detail = json_string_value(json_object_get(j, "detail"));
    if (msg && code)
        (void)snprintf(out, size, "HTTP %ld %s: %s", status, code, msg);
    else if (msg || detail)
        (void)snprintf(out, size, "HTTP %ld: %s", status, msg ? msg : detail);
    else if (len)
        (void)snprintf(out, size, "HTTP %ld: %.*s", status, (int)(len > 300 ? 300 : len), body);
    else
        (void)snprintf(out, size, "HTTP %ld", status);
    json_decref(j);
    for (char *p = out; *p; p++) /* one line */
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    out_safe_inplace(out, size); /* no terminal controls from the other side */
}

bool cli_sbd_error_is(const char *body, size_t len, const char *code)
{
    json_t *j = body && len ? json_loadb(body, len, 0, NULL) : NULL;
    const char *c = json_string_value(json_object_get(j, "code"));
    bool is = c && strcmp(c, code) == 0 && json_is_string(json_object_get(j, "message"));
    json_decref(j);
    return is;
}

/* What the sandboxd client is built from (owned strings). */
struct sbd_target {
    char *base;
    char *token;  /* wiped in target_done; NULL = none */
    char *hdr[4]; /* NULL-terminated "Name: value" lines */
};

static void target_done(struct sbd_target *t)
{
    xfree(t->base);
    if (t->token)
        explicit_bzero(t->token, strlen(t->token));
    xfree(t->token);
    for (size_t i = 0; t->hdr[i]; i++)
        xfree(t->hdr[i]);
}

/* The kubeconfig's bearer token, if it has one, into t->token. The buffer takes any token
 * the kubeconfig may hold (LIMIT_KUBE_TOKEN); a longer one is an error, never cut. */
static int add_kube_token(const struct cli_globals *g, struct kube_config *cfg,
                          struct sbd_target *t)
{
    char *tok = xmalloc(LIMIT_KUBE_TOKEN + 1);
    struct kube_err e;
    kube_err_clear(&e);
    int n = kube_config_token(cfg, tok, LIMIT_KUBE_TOKEN + 1, &e);
    if (n > 0)
        t->token = xstrndup(tok, (size_t)n);
    explicit_bzero(tok, n > 0 ? (size_t)n : 0);
    xfree(tok);
    if (n < 0) {
        fprintf(g->err, "error: cannot get a bearer token from the kubeconfig: %s\n", e.message);
        return CLI_NO_CONFIG;
    }
    return CLI_OK;
}

/* The kubeconfig's credential goes to the router only over https, to a loopback host
 * (a port-forward), from in-cluster config (the pod's service account and the cluster's
 * plain-HTTP router Service), or when $AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN says
 * so: else it would cross a network in clear text. */
static int check_router_plaintext(const struct cli_globals *g, const struct kube_config *cfg)
{
    if (g->router_plaintext_ok || !loopback_url_exposes(g->router_url) ||
        !kube_config_context(cfg)[0])
        return CLI_OK;
    fprintf(
        g->err,
        "error: refusing to send the kubeconfig's credentials in clear text to %s (not a "
        "loopback host)\n"
        "hint: use an https router URL, a port-forward to localhost, a router token "
        "($AGENT_SANDBOX_ROUTER_TOKEN), or set AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN=true\n",
        g->router_url);
    return CLI_USAGE;
}

/* Reads the Sandbox; it must be Ready. Writes the pod name into pod. */
static int check_sandbox(const struct cli_globals *g, struct kube_client *c, const char *ns,
                         const char *name, char *pod, size_t size)
{
    json_t *sb = NULL;
    struct kube_err e;
    int r = kube_get(c, &API_RES_SANDBOXES, ns, name, &sb, &e);
    if (r < 0) {
        char what[300];
        (void)snprintf(what, sizeof(what), "sandbox \"%s\" in namespace %s", name, ns);
        return cli_fail(g, what, r, &e);
    }
    const char *an = kube_obj_annotation(sb, SB_ANN_POD_NAME);
    (void)snprintf(pod, size, "%s", an ? an : name);
    int rc = CLI_OK;
    if (!kube_obj_condition_true(sb, SB_COND_READY)) {
        const json_t *cd = kube_obj_condition(sb, SB_COND_READY);
        const char *reason = json_string_value(json_object_get(cd, "reason"));
        fprintf(g->err,
                "error: sandbox \"%s\" in namespace %s is not Ready (%s)\n"
                "hint: `kubectl-sandbox describe %s`; a suspended sandbox needs "
                "`kubectl-sandbox resume %s --wait`\n",
                name, ns, reason ? reason : "no Ready condition", name, name);
        rc = CLI_ERR;
    }
    json_decref(sb);
    return rc;
}

static int open_cluster(const struct cli_globals *g, const char *name, struct cli_sbd *s,
                        struct sbd_target *t)
{
    struct kube_client *c = NULL;
    char pod[256];
    int rc = cli_client(g, &c);
    if (rc != CLI_OK)
        return rc;
    const char *ns = cli_namespace(g, c);
    (void)snprintf(s->what, sizeof(s->what), "sandbox %s/%s", ns, name);
    rc = check_sandbox(g, c, ns, name, pod, sizeof(pod));
    if (rc == CLI_OK)
        rc = cli_config(g, &s->cfg);
    if (rc == CLI_OK && s->mode == CLI_SBD_ROUTER && g->router_token)
        t->token = xstrdup(g->router_token);
    else if (rc == CLI_OK)
        rc = add_kube_token(g, s->cfg, t);
    if (rc == CLI_OK && s->mode == CLI_SBD_ROUTER && !g->router_token && t->token)
        rc = check_router_plaintext(g, s->cfg);
    if (rc == CLI_OK && s->mode == CLI_SBD_ROUTER) {
        t->hdr[0] = xasprintf("X-Sandbox-ID: %s", name);
        t->hdr[1] = xasprintf("X-Sandbox-Namespace: %s", ns);
        t->hdr[2] = xasprintf("X-Sandbox-Port: %u", g->sandboxd_port);
        kube_config_free(s->cfg); /* the router has its own TLS; only the token is used */
        s->cfg = NULL;
        t->base = xstrdup(g->router_url);
    } else if (rc == CLI_OK) {
        struct buf b;
        buf_init(&b, 4096);
        if (cli_sbd_proxy_base(kube_config_server(s->cfg), ns, pod, g->sandboxd_port, &b) < 0) {
            fprintf(g->err, "error: cannot build the pod proxy URL for pod %s\n", pod);
            rc = CLI_ERR;
        }
        t->base = buf_steal(&b);
    }
    kube_client_free(c);
    return rc;
}

/* The sandboxd client of s from t, with the TLS material of s->cfg (proxy mode). */
static int make_client(const struct cli_globals *g, struct cli_sbd *s, const struct sbd_target *t)
{
    struct sbd_client_opts o = {.base = t->base ? t->base : "",
                                .token = t->token,
                                .headers = (const char *const *)t->hdr,
                                .tls = s->cfg,
                                .verbose = getenv("KUBECTL_SANDBOX_CURL_VERBOSE") != NULL,
                                .connect_timeout = LIMIT_CLI_SBD_CONNECT,
                                .user_agent = "kubectl-sandbox/" AS_VERSION};
    int r = sbd_client_new(&o, &s->client);
    if (r == -E2BIG) {
        fprintf(g->err, "error: the bearer token for %s is longer than %u bytes\n", s->what,
                LIMIT_KUBE_TOKEN);
        return CLI_ERR;
    }
    if (r < 0) {
        fprintf(g->err, "error: %s: cannot set up the connection: %s\n", s->what, strerror(-r));
        return CLI_ERR;
    }
    return CLI_OK;
}

int cli_sbd_open(const struct cli_globals *g, const char *name, struct cli_sbd **ret)
{
    struct cli_sbd *s = XNEW(struct cli_sbd);
    struct sbd_target t = {0};
    int rc = CLI_OK;
    if (g->sandboxd_url) {
        s->mode = CLI_SBD_DIRECT;
        t.base = xstrdup(g->sandboxd_url);
        (void)snprintf(s->what, sizeof(s->what), "sandboxd at %s", g->sandboxd_url);
        if (g->sandboxd_token)
            t.token = xstrdup(g->sandboxd_token);
    } else {
        s->mode = g->router_url ? CLI_SBD_ROUTER : CLI_SBD_PROXY;
        rc = open_cluster(g, name, s, &t);
    }
    if (rc == CLI_OK)
        rc = make_client(g, s, &t);
    target_done(&t);
    if (rc != CLI_OK) {
        cli_sbd_free(s);
        return rc;
    }
    *ret = s;
    return CLI_OK;
}

int cli_sbd_open_server(const struct cli_globals *g, struct kube_config *cfg, struct cli_sbd **ret)
{
    struct cli_sbd *s = XNEW(struct cli_sbd);
    struct sbd_target t = {.base = xstrdup(kube_config_server(cfg))};
    int rc;
    s->mode = CLI_SBD_PROXY;
    s->cfg = cfg;
    s->cfg_borrowed = true;
    (void)snprintf(s->what, sizeof(s->what), "the API server");
    rc = make_client(g, s, &t);
    target_done(&t);
    if (rc != CLI_OK) {
        cli_sbd_free(s);
        return rc;
    }
    *ret = s;
    return CLI_OK;
}

void cli_sbd_free(struct cli_sbd *s)
{
    if (!s)
        return;
    sbd_client_free(s->client);
    if (!s->cfg_borrowed)
        kube_config_free(s->cfg);
    xfree(s);
}

int cli_sbd_setup(struct cli_sbd *s, CURL *h, const char *method, const char *path,
                  const char *const *extra, struct curl_slist **ret_headers, char *errbuf)
{
    return sbd_client_setup(s->client, h, method, path, extra, ret_headers, errbuf);
}

int cli_sbd_request(struct cli_sbd *s, const struct sbd_client_req *req, struct buf *resp,
                    long *ret_status, char *err, size_t errsize)
{
    char cerr[CURL_ERROR_SIZE] = "";
    int r = sbd_client_call(s->client, req, resp, ret_status, cerr, sizeof(cerr));
    if (r < 0)
        (void)snprintf(err, errsize, "%s: %s", s->what, cerr);
    if (r == -ETIMEDOUT && req->timeout)
        return r;
    return r < 0 && r != -E2BIG && r != -ENOMEM && r != -ECANCELED ? -EIO : r;
}

int cli_sbd_call(struct cli_sbd *s, const char *method, const char *path, const void *body,
                 size_t len, const char *ctype, struct buf *resp, long *ret_status, char *err,
                 size_t errsize)
{
    struct sbd_client_req req = {
        .method = method, .path = path, .body = body, .len = len, .content_type = ctype};
    return cli_sbd_request(s, &req, resp, ret_status, err, errsize);
}
