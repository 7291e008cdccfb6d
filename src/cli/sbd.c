/* SPDX-License-Identifier: Apache-2.0 */
/* The sandboxd connection of kubectl-sandbox: pod proxy, router or direct (see sbd.h). */
#include "cli/sbd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "as_version.h"
#include "api/res.h"
#include "api/sandbox.h"
#include "common/limits.h"
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
}

static void add_header(struct cli_sbd *s, const char *name, const char *v)
{
    char *h = xasprintf("%s: %s", name, v);
    s->headers = curl_slist_append(s->headers, h);
    xfree(h);
}

static const char *bearer(const char *tok, char *out, size_t size)
{
    (void)snprintf(out, size, "Bearer %s", tok);
    return out;
}

/* Adds "Authorization: Bearer" with the kubeconfig's token (if it has one). */
static int add_kube_token(const struct cli_globals *g, struct cli_sbd *s, struct kube_config *cfg)
{
    char tok[8192], hb[8300];
    struct kube_err e;
    kube_err_clear(&e);
    int n = kube_config_token(cfg, tok, sizeof(tok), &e);
    if (n < 0) {
        fprintf(g->err, "error: cannot get a bearer token from the kubeconfig: %s\n", e.message);
        return CLI_NO_CONFIG;
    }
    if (n > 0)
        add_header(s, "Authorization", bearer(tok, hb, sizeof(hb)));
    return CLI_OK;
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

static int open_cluster(const struct cli_globals *g, const char *name, struct cli_sbd *s)
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
    if (rc == CLI_OK && s->mode == CLI_SBD_ROUTER && g->router_token) {
        char hb[8300];
        add_header(s, "Authorization", bearer(g->router_token, hb, sizeof(hb)));
    } else if (rc == CLI_OK) {
        rc = add_kube_token(g, s, s->cfg);
    }
    if (rc == CLI_OK && s->mode == CLI_SBD_ROUTER) {
        char port[16];
        (void)snprintf(port, sizeof(port), "%u", g->sandboxd_port);
        add_header(s, "X-Sandbox-ID", name);
        add_header(s, "X-Sandbox-Namespace", ns);
        add_header(s, "X-Sandbox-Port", port);
        kube_config_free(s->cfg); /* the router has its own TLS; only the token is used */
        s->cfg = NULL;
        s->base = xstrdup(g->router_url);
    } else if (rc == CLI_OK) {
        struct buf b;
        buf_init(&b, 4096);
        if (cli_sbd_proxy_base(kube_config_server(s->cfg), ns, pod, g->sandboxd_port, &b) < 0) {
            fprintf(g->err, "error: cannot build the pod proxy URL for pod %s\n", pod);
            rc = CLI_ERR;
        }
        s->base = buf_steal(&b);
    }
    kube_client_free(c);
    return rc;
}

int cli_sbd_open(const struct cli_globals *g, const char *name, struct cli_sbd **ret)
{
    struct cli_sbd *s = XNEW(struct cli_sbd);
    char hb[8300];
    int rc = CLI_OK;
    if (g->sandboxd_url) {
        s->mode = CLI_SBD_DIRECT;
        s->base = xstrdup(g->sandboxd_url);
        (void)snprintf(s->what, sizeof(s->what), "sandboxd at %s", g->sandboxd_url);
        if (g->sandboxd_token)
            add_header(s, "Authorization", bearer(g->sandboxd_token, hb, sizeof(hb)));
    } else {
        s->mode = g->router_url ? CLI_SBD_ROUTER : CLI_SBD_PROXY;
        rc = open_cluster(g, name, s);
    }
    if (rc != CLI_OK) {
        cli_sbd_free(s);
        return rc;
    }
    size_t n = strlen(s->base);
    while (n > 0 && s->base[n - 1] == '/')
        s->base[--n] = '\0';
    *ret = s;
    return CLI_OK;
}

void cli_sbd_free(struct cli_sbd *s)
{
    if (!s)
        return;
    xfree(s->base);
    curl_slist_free_all(s->headers);
    kube_config_free(s->cfg);
    xfree(s);
}

static void set_blob(CURL *h, CURLoption opt, const char *data, size_t len)
{
    struct curl_blob b = {.data = (void *)data, .len = len, .flags = CURL_BLOB_COPY};
    curl_easy_setopt(h, opt, &b);
}

/* TLS material of the API server (proxy mode). */
static void setup_tls(struct cli_sbd *s, CURL *h)
{
    struct kube_tls t;
    kube_config_tls(s->cfg, &t);
    if (t.ca_data)
        set_blob(h, CURLOPT_CAINFO_BLOB, t.ca_data, t.ca_len);
    else if (t.ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, t.ca_file);
    if (t.cert_data)
        set_blob(h, CURLOPT_SSLCERT_BLOB, t.cert_data, t.cert_len);
    else if (t.cert_file)
        curl_easy_setopt(h, CURLOPT_SSLCERT, t.cert_file);
    if (t.key_data)
        set_blob(h, CURLOPT_SSLKEY_BLOB, t.key_data, t.key_len);
    else if (t.key_file)
        curl_easy_setopt(h, CURLOPT_SSLKEY, t.key_file);
    if (t.insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
}

int cli_sbd_setup(struct cli_sbd *s, CURL *h, const char *method, const char *path,
                  const char *const *extra, struct curl_slist **ret_headers, char *errbuf)
{
    char *url = xasprintf("%s%s", s->base, path);
    struct curl_slist *hdrs = NULL;
    for (const struct curl_slist *l = s->headers; l; l = l->next)
        hdrs = curl_slist_append(hdrs, l->data);
    for (const char *const *x = extra; x && *x; x++)
        hdrs = curl_slist_append(hdrs, *x);
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, url);
    xfree(url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (!strcmp(method, "HEAD"))
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "kubectl-sandbox/" AS_VERSION);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(LIMIT_CLI_SBD_CONNECT / USEC_PER_MSEC));
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (getenv("KUBECTL_SANDBOX_CURL_VERBOSE"))
        curl_easy_setopt(h, CURLOPT_VERBOSE, 1L);
    if (s->cfg)
        setup_tls(s, h);
    errbuf[0] = '\0';
    *ret_headers = hdrs;
    return 0;
}

static size_t to_buf(char *p, size_t size, size_t n, void *ctx)
{
    return buf_append(ctx, p, size * n) == 0 ? size * n : 0;
}

int cli_sbd_call(struct cli_sbd *s, const char *method, const char *path, const void *body,
                 size_t len, const char *ctype, struct buf *resp, long *ret_status, char *err,
                 size_t errsize)
{
    CURL *h = curl_easy_init();
    if (!h)
        return -ENOMEM;
    char errbuf[CURL_ERROR_SIZE], ct[200];
    const char *extra[] = {ct, NULL};
    (void)snprintf(ct, sizeof(ct), "Content-Type: %s", ctype ? ctype : "application/json");
    struct curl_slist *hdrs = NULL;
    (void)cli_sbd_setup(s, h, method, path, body ? extra : NULL, &hdrs, errbuf);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, to_buf);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, resp);
    CURLcode cc = curl_easy_perform(h);
    int r = 0;
    if (cc != CURLE_OK) {
        (void)snprintf(err, errsize, "%s: %s", s->what,
                       errbuf[0] ? errbuf : curl_easy_strerror(cc));
        r = cc == CURLE_WRITE_ERROR ? -E2BIG : -EIO;
    } else {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, ret_status);
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return r;
}
