/* SPDX-License-Identifier: Apache-2.0 */
/* Plain HTTP calls to sandboxd over libcurl (see sbd_client.h). */
#include "kube/sbd_client.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/limits.h"
#include "common/xalloc.h"
#include "kube/client_int.h"
#include "kube/config.h"

struct sbd_client {
    struct sbd_client_opts o; /* strings below are the copies */
    char *base, *auth, *user_agent;
    struct curl_slist *headers;    /* the client's own header lines */
    struct curl_slist *connect_to; /* tls-server-name: its name mapped to the real host */
};

int sbd_client_base_url(const char *scheme, const char *host, uint16_t port, char *out, size_t size)
{
    bool v6 = host && host[0] != '[' && strchr(host, ':');
    int n;
    if (!scheme || !*scheme || !host || !*host || !port)
        return -EINVAL;
    n = snprintf(out, size, "%s://%s%s%s:%u", scheme, v6 ? "[" : "", host, v6 ? "]" : "",
                 (unsigned)port);
    return n < 0 || (size_t)n >= size ? -E2BIG : 0;
}

static struct curl_slist *append(struct curl_slist *l, const char *line)
{
    struct curl_slist *n = curl_slist_append(l, line);
    ASSERT(n); /* curl only fails here when out of memory */
    return n;
}

int sbd_client_new(const struct sbd_client_opts *opts, struct sbd_client **ret)
{
    struct sbd_client *c;
    size_t n;
    if (!opts || !opts->base)
        return -EINVAL;
    if (opts->token && strnlen(opts->token, LIMIT_KUBE_TOKEN + 1) > LIMIT_KUBE_TOKEN)
        return -E2BIG;
    c = XNEW(struct sbd_client);
    c->o = *opts;
    struct kube_tls tls = {0};
    if (opts->tls)
        kube_config_tls(opts->tls, &tls);
    /* the API server's tls-server-name, as the kube client's (its pod proxy is there) */
    if (tls.server_name &&
        kube__server_name_target(opts->base, tls.server_name, &c->base, &c->connect_to) < 0) {
        xfree(c);
        return -EINVAL;
    }
    if (!c->base)
        c->base = xstrdup(opts->base);
    for (n = strlen(c->base); n > 0 && c->base[n - 1] == '/'; n--)
        c->base[n - 1] = '\0';
    if (opts->token && *opts->token)
        c->auth = xasprintf("Authorization: Bearer %s", opts->token);
    c->user_agent = opts->user_agent ? xstrdup(opts->user_agent) : NULL;
    for (const char *const *h = opts->headers; h && *h; h++)
        c->headers = append(c->headers, *h);
    c->o.base = c->base;
    c->o.token = NULL;
    c->o.headers = NULL;
    c->o.user_agent = c->user_agent;
    *ret = c;
    return 0;
}

void sbd_client_free(struct sbd_client *c)
{
    if (!c)
        return;
    if (c->auth)
        explicit_bzero(c->auth, strlen(c->auth));
    xfree(c->auth);
    xfree(c->base);
    xfree(c->user_agent);
    curl_slist_free_all(c->headers);
    curl_slist_free_all(c->connect_to);
    xfree(c);
}

static struct curl_slist *build_headers(const struct sbd_client *c, const char *const *extra)
{
    struct curl_slist *l = NULL;
    if (c->auth)
        l = append(l, c->auth);
    for (const struct curl_slist *h = c->headers; h; h = h->next)
        l = append(l, h->data);
    for (const char *const *x = extra; x && *x; x++)
        l = append(l, *x);
    return append(l, "Expect:");
}

/* Writes one block of header text to stderr, each line after prefix, with the value of
 * an Authorization header masked (a bearer token must not reach a terminal or a log). */
static void debug_headers(const char *prefix, const char *data, size_t size)
{
    static const char auth[] = "authorization:";
    while (size > 0) {
        const char *nl = memchr(data, '\n', size);
        size_t n = nl ? (size_t)(nl - data) + 1 : size;
        if (n >= sizeof(auth) - 1 && strncasecmp(data, auth, sizeof(auth) - 1) == 0)
            fprintf(stderr, "%sAuthorization: <masked>\n", prefix);
        else
            fprintf(stderr, "%s%.*s", prefix, (int)n, data);
        data += n;
        size -= n;
    }
}

/* libcurl's verbose output without bodies and without the token. */
static int on_debug(CURL *h, curl_infotype type, char *data, size_t size, void *ctx)
{
    (void)h;
    (void)ctx;
    if (type == CURLINFO_TEXT)
        debug_headers("* ", data, size);
    else if (type == CURLINFO_HEADER_OUT)
        debug_headers("> ", data, size);
    else if (type == CURLINFO_HEADER_IN)
        debug_headers("< ", data, size);
    return 0;
}

static void set_options(const struct sbd_client *c, CURL *h)
{
    const struct sbd_client_opts *o = &c->o;
    (void)curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    (void)curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, o->http_only ? "http" : "http,https");
    if (o->no_proxy) /* "" turns every proxy off, the environment's included */
        (void)curl_easy_setopt(h, CURLOPT_PROXY, "");
    if (o->connect_timeout)
        (void)curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                               (long)(o->connect_timeout / USEC_PER_MSEC));
    if (o->timeout)
        (void)curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(o->timeout / USEC_PER_MSEC));
    if (o->user_agent)
        (void)curl_easy_setopt(h, CURLOPT_USERAGENT, o->user_agent);
    if (o->verbose) {
        (void)curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, on_debug);
        (void)curl_easy_setopt(h, CURLOPT_VERBOSE, 1L);
    }
    if (o->tls)
        kube__curl_tls(h, o->tls);
    (void)curl_easy_setopt(h, CURLOPT_CONNECT_TO, c->connect_to);
}

int sbd_client_setup(const struct sbd_client *c, CURL *h, const char *method, const char *path,
                     const char *const *extra, struct curl_slist **ret_headers, char *errbuf)
{
    char *url;
    if (!method)
        method = "GET";
    url = xasprintf("%s%s", c->base, path ? path : "");
    (void)curl_easy_setopt(h, CURLOPT_URL, url);
    xfree(url);
    (void)curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (!strcmp(method, "HEAD"))
        (void)curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    set_options(c, h);
    if (errbuf) {
        errbuf[0] = '\0';
        (void)curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    }
    *ret_headers = build_headers(c, extra);
    (void)curl_easy_setopt(h, CURLOPT_HTTPHEADER, *ret_headers);
    return 0;
}

static size_t to_buf(char *p, size_t size, size_t n, void *ctx)
{
    return buf_append(ctx, p, size * n) == 0 ? size * n : 0;
}

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
    (void)p;
    (void)ctx;
    return size * n;
}

/* CURLOPT_XFERINFOFUNCTION of a call with a cancel function: non-zero aborts. */
static int on_progress(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    const struct sbd_client_req *req = ctx;
    (void)dt;
    (void)dn;
    (void)ut;
    (void)un;
    return req->cancel(req->cancel_ctx) ? 1 : 0;
}

static int transport_error(CURLcode cc)
{
    switch (cc) {
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_ABORTED_BY_CALLBACK:
        return -ECANCELED;
    case CURLE_WRITE_ERROR:
        return -E2BIG;
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    default:
        return -EIO;
    }
}

int sbd_client_call(const struct sbd_client *c, const struct sbd_client_req *req, struct buf *resp,
                    long *ret_status, char *err, size_t size)
{
    char errbuf[CURL_ERROR_SIZE], ct[200];
    const char *extra[] = {ct, NULL};
    struct curl_slist *hdrs = NULL;
    CURL *h = curl_easy_init();
    CURLcode cc;
    int r = 0;
    if (!h)
        return -ENOMEM;
    (void)snprintf(ct, sizeof(ct), "Content-Type: %s",
                   req->content_type ? req->content_type : "application/json");
    (void)sbd_client_setup(c, h, req->method, req->path, req->body ? extra : NULL, &hdrs, errbuf);
    if (req->body) {
        (void)curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body);
        (void)curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->len);
    }
    (void)curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, resp ? to_buf : discard);
    (void)curl_easy_setopt(h, CURLOPT_WRITEDATA, resp);
    /* a peer that takes the request and then says nothing (a long answer sends
     * keepalive spaces) must not hold a caller for ever, a terminal in raw mode included */
    (void)curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    (void)curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)(LIMIT_SBD_CALL_STALL / USEC_PER_SEC));
    if (req->timeout)
        (void)curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(req->timeout / USEC_PER_MSEC));
    if (req->cancel) {
        (void)curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        (void)curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        (void)curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)req);
    }
    cc = curl_easy_perform(h);
    if (cc != CURLE_OK) {
        r = transport_error(cc);
        if (err)
            (void)snprintf(err, size, "%s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
    } else {
        (void)curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, ret_status);
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return r;
}
