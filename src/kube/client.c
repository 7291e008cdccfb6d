/* SPDX-License-Identifier: Apache-2.0 */
/* The client object, its pool of curl easy handles and the retrying request path. */
#include "kube/client.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "as_version.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "kube/client_int.h"
#include "kube/config_int.h"
#include "kube/mux.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init(void)
{
    curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *userp)
{
    (void)h;
    (void)access;
    struct kube_client *c = userp;
    pthread_mutex_lock(&c->share_locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *userp)
{
    (void)h;
    struct kube_client *c = userp;
    pthread_mutex_unlock(&c->share_locks[data]);
}

/* DNS and TLS sessions are shared between handles. The connection cache is not: curl
 * does not support using shared connections from several threads at once, so each
 * pooled handle keeps its own (HTTP/2) connection alive instead. */
static void share_setup(struct kube_client *c)
{
    for (size_t i = 0; i < ARRAY_SIZE(c->share_locks); i++)
        pthread_mutex_init(&c->share_locks[i], NULL);
    c->share = curl_share_init();
    curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(c->share, CURLSHOPT_USERDATA, c);
    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
}

int kube__server_name_target(const char *url, const char *server_name, char **ret_url,
                             struct curl_slist **ret_connect_to)
{
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL, *out = NULL;
    int r = 0;
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
        curl_url_set(u, CURLUPART_HOST, server_name, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_URL, &out, 0) != CURLUE_OK) {
        r = -EINVAL;
        goto out;
    }
    struct str s = str_c(out);
    while (s.len > 0 && s.p[s.len - 1] == '/')
        s.len--;
    *ret_url = str_dup(s);
    char *map = xasprintf("%s:%s:%s:%s", server_name, port, host, port);
    *ret_connect_to = curl_slist_append(NULL, map);
    xfree(map);
out:
    curl_free(host);
    curl_free(port);
    curl_free(out);
    curl_url_cleanup(u);
    return r;
}

/* With tls-server-name, curl connects to the real host but verifies (and sends SNI for)
 * the given name: the URL names server_name and CONNECT_TO maps it back. */
static int base_url_setup(struct kube_client *c, struct kube_err *reterr)
{
    struct kube_tls tls;
    kube_config_tls(c->cfg, &tls);
    const char *server = kube_config_server(c->cfg);
    if (!tls.server_name) {
        c->base_url = xstrdup(server);
        return 0;
    }
    int r = kube__server_name_target(server, tls.server_name, &c->base_url, &c->connect_to);
    if (r < 0)
        kube_err_set(reterr, r, "server URL %s or tls-server-name %s is invalid", server,
                     tls.server_name);
    return r;
}

int kube_client_new(struct kube_config *cfg, const struct kube_client_opts *opts,
                    struct kube_client **ret)
{
    static const struct kube_client_opts defaults = {.max_retries = -1};
    if (!opts)
        opts = &defaults;
    pthread_once(&curl_once, curl_init);
    if (curl_init_result != CURLE_OK) {
        kube_config_free(cfg);
        return -EIO;
    }
    struct kube_client *c = XNEW(struct kube_client);
    c->cfg = cfg;
    c->qps = opts->qps;
    c->observe = opts->observe;
    c->observe_ctx = opts->observe_ctx;
    c->fault = opts->fault;
    c->fault_ctx = opts->fault_ctx;
    c->max_retries = opts->max_retries < 0 ? LIMIT_KUBE_RETRIES : opts->max_retries;
    c->timeout = opts->timeout ? opts->timeout : LIMIT_KUBE_REQUEST;
    c->read_stall = opts->read_stall ? opts->read_stall : LIMIT_KUBE_READ_STALL;
    c->watch_slack = opts->watch_slack ? opts->watch_slack : LIMIT_KUBE_WATCH_SLACK;
    c->user_agent =
        opts->user_agent ? xstrdup(opts->user_agent) : xstrdup("agent-sandbox/" AS_VERSION);
    pthread_mutex_init(&c->pool_lock, NULL);
    kube_ratelimit_init(&c->rl, opts->qps, opts->burst, clock_now());
    kube_nsterm_init(&c->nsterm);
    kube__loglimit_init(&c->loglimit);
    share_setup(c);
    int r = base_url_setup(c, NULL);
    if (r < 0) {
        kube_client_free(c);
        return r;
    }
    /* HTTP/2 (so streams on one connection) is negotiated over TLS only: a plain-HTTP
     * server keeps one connection per concurrent request, without the multiplexer. */
    if (!opts->no_mux && strncmp(c->base_url, "https://", 8) == 0)
        c->mux = kube__mux_new(opts->mux_lanes > 0 ? opts->mux_lanes : LIMIT_KUBE_MUX_LANES,
                               LIMIT_KUBE_MUX_CONNECTIONS);
    *ret = c;
    return 0;
}

void kube_client_free(struct kube_client *c)
{
    if (!c)
        return;
    kube__mux_free(c->mux);
    for (size_t i = 0; i < c->pool_len; i++)
        curl_easy_cleanup(c->pool[i]);
    if (c->share)
        curl_share_cleanup(c->share);
    for (size_t i = 0; i < ARRAY_SIZE(c->share_locks); i++)
        pthread_mutex_destroy(&c->share_locks[i]);
    pthread_mutex_destroy(&c->pool_lock);
    kube_ratelimit_done(&c->rl);
    kube_nsterm_done(&c->nsterm);
    kube__loglimit_done(&c->loglimit);
    curl_slist_free_all(c->connect_to);
    xfree(c->base_url);
    xfree(c->user_agent);
    kube_config_free(c->cfg);
    xfree(c);
}

const char *kube_client_namespace(const struct kube_client *c)
{
    return kube_config_namespace(c->cfg);
}

const struct kube_config *kube_client_config(const struct kube_client *c)
{
    return c->cfg;
}

void kube_client_stats(const struct kube_client *c, struct kube_client_stats *ret)
{
    struct kube_client *m = (struct kube_client *)c;
    ret->requests = atomic_load(&m->requests);
    ret->retries = atomic_load(&m->retries);
    ret->throttled_us = atomic_load(&m->throttled_us);
    ret->connections = atomic_load(&m->connections);
}

static CURL *pool_get(struct kube_client *c)
{
    CURL *h = NULL;
    pthread_mutex_lock(&c->pool_lock);
    if (c->pool_len > 0)
        h = c->pool[--c->pool_len];
    pthread_mutex_unlock(&c->pool_lock);
    return h ? h : curl_easy_init();
}

static void pool_put(struct kube_client *c, CURL *h)
{
    pthread_mutex_lock(&c->pool_lock);
    if (c->pool_len < ARRAY_SIZE(c->pool)) {
        c->pool[c->pool_len++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&c->pool_lock);
    if (h)
        curl_easy_cleanup(h);
}

int kube__throttle(struct kube_client *c, const struct kube__prep *p, const atomic_bool *stop,
                   struct kube_err *e)
{
    usec_t waited = 0;
    const atomic_bool *cancel = p->cancel ? p->cancel : stop;
    /* a token due in the call's last millisecond would be taken and never used */
    usec_t by = p->deadline > USEC_PER_MSEC ? p->deadline - USEC_PER_MSEC : p->deadline;
    int r = kube_ratelimit_wait_by(&c->rl, by, cancel, &waited);
    unsigned long suppressed = 0;
    char path[512];
    if (r == -ETIMEDOUT)
        kube_err_set(e, r, "%s: the client-side rate limiter's turn comes after the call's timeout",
                     p->method);
    else if (r == -ECANCELED)
        kube_err_set(e, r, "%s: cancelled while waiting for the client-side rate limiter",
                     p->method);
    if (waited)
        atomic_fetch_add(&c->throttled_us, (unsigned long)waited);
    if (waited >= LIMIT_KUBE_LOG_THROTTLE && log_max_level >= LOG_DEBUG &&
        kube__loglimit_allow(&c->loglimit, clock_now(), &suppressed)) {
        kube__url_path(buf_str(&p->url), path, sizeof(path));
        log_debug("kube request waited for the client-side rate limiter\tmethod=%s path=\"%s\" "
                  "waited_ms=%llu suppressed=%lu",
                  p->method, path, (unsigned long long)(waited / USEC_PER_MSEC), suppressed);
    }
    return r;
}

static void set_blob(CURL *h, CURLoption opt, const char *data, size_t len)
{
    struct curl_blob b = {.data = (void *)data, .len = len, .flags = CURL_BLOB_COPY};
    curl_easy_setopt(h, opt, &b);
}

void kube__curl_tls(CURL *h, const struct kube_config *cfg)
{
    struct kube_tls t;
    kube_config_tls(cfg, &t);
    /* A configured CA is the only trust anchor, as for kubectl: libcurl's built-in CA
     * directory (the system's, /etc/ssl/certs) would also accept any server with a
     * publicly signed certificate for the name, and get the bearer token. */
    if (t.ca_data || t.ca_file)
        curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
    if (t.ca_data) {
        curl_easy_setopt(h, CURLOPT_CAINFO, NULL);
        set_blob(h, CURLOPT_CAINFO_BLOB, t.ca_data, t.ca_len);
    } else if (t.ca_file) {
        curl_easy_setopt(h, CURLOPT_CAINFO, t.ca_file);
    }
    if (t.cert_data) {
        set_blob(h, CURLOPT_SSLCERT_BLOB, t.cert_data, t.cert_len);
        curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    } else if (t.cert_file) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, t.cert_file);
    }
    if (t.key_data) {
        set_blob(h, CURLOPT_SSLKEY_BLOB, t.key_data, t.key_len);
        curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    } else if (t.key_file) {
        curl_easy_setopt(h, CURLOPT_SSLKEY, t.key_file);
    }
    if (t.insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
}

static struct curl_slist *add_header(struct curl_slist *l, const char *h)
{
    struct curl_slist *n = curl_slist_append(l, h);
    ASSERT(n); /* curl only fails here when out of memory */
    return n;
}

static int build_headers(struct kube_client *c, const struct kube__prep *p, struct curl_slist **ret,
                         uint64_t *ret_gen, struct kube_err *reterr)
{
    char *tok = xmalloc(LIMIT_KUBE_TOKEN + 1);
    int r = kube_config_token_gen(c->cfg, tok, LIMIT_KUBE_TOKEN + 1, ret_gen, reterr);
    if (r < 0) {
        xfree(tok);
        return r;
    }
    struct curl_slist *l = add_header(NULL, "Accept: application/json");
    l = add_header(l, "Expect:");
    if (r > 0) {
        char *auth = xasprintf("Authorization: Bearer %s", tok);
        l = add_header(l, auth);
        explicit_bzero(auth, strlen(auth));
        xfree(auth);
    }
    explicit_bzero(tok, (size_t)r);
    xfree(tok);
    if (p->has_body) {
        char *ct = xasprintf("Content-Type: %s", p->content_type);
        l = add_header(l, ct);
        xfree(ct);
    }
    *ret = l;
    return 0;
}

static void set_method(CURL *h, const struct kube__prep *p)
{
    if (p->has_body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)p->body.len);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, buf_str(&p->body));
    } else if (strcmp(p->method, "POST") == 0) {
        /* an empty body: without POSTFIELDS libcurl reads one from the process's stdin */
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    }
    if (strcmp(p->method, "GET") == 0)
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    else if (strcmp(p->method, "POST") == 0)
        curl_easy_setopt(h, CURLOPT_POST, 1L);
    if (strcmp(p->method, "GET") != 0 && strcmp(p->method, "POST") != 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, p->method);
}

/* CURLOPT_XFERINFOFUNCTION of a cancellable request: aborts once its flag is set. */
static int on_cancel_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                              curl_off_t ulnow)
{
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    return atomic_load((atomic_bool *)ctx) ? 1 : 0;
}

int kube__sockopt(void *ctx, curl_socket_t fd, curlsocktype purpose)
{
    unsigned int ms = (unsigned int)(LIMIT_KUBE_TCP_UNACKED / USEC_PER_MSEC);
    (void)ctx;
    if (purpose == CURLSOCKTYPE_IPCXN)
        (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms));
    return CURL_SOCKOPT_OK;
}

/* The transfer's timeout: the client's per-request timeout (one attempt on a dead
 * connection must not take the whole call), cut to what is left of the call's deadline
 * once the headers are built (a credential plugin may have run, or been waited for).
 * Returns 0, or -ETIMEDOUT (e filled) when nothing is left. */
static int transfer_timeout(const struct kube_client *c, const struct kube__prep *p, usec_t *ret,
                            struct kube_err *e)
{
    usec_t t = c->timeout, now;
    if (p->deadline) {
        now = clock_now();
        if (now + USEC_PER_MSEC > p->deadline) {
            kube_err_set(e, -ETIMEDOUT, "%s: no time left for the request (call timeout)",
                         p->method);
            return -ETIMEDOUT;
        }
        if (!t || p->deadline - now < t)
            t = p->deadline - now;
    }
    *ret = t;
    return 0;
}

int kube__setup(struct kube_client *c, CURL *h, const struct kube__prep *p,
                struct curl_slist **ret_headers, uint64_t *ret_gen, struct kube_err *reterr)
{
    struct curl_slist *hdrs = NULL;
    usec_t timeout;
    int r = build_headers(c, p, &hdrs, ret_gen, reterr);
    if (r >= 0)
        r = transfer_timeout(c, p, &timeout, reterr);
    if (r < 0) {
        curl_slist_free_all(hdrs);
        return r;
    }
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, buf_str(&p->url));
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, (long)LIMIT_KUBE_TCP_KEEPIDLE_S);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, (long)LIMIT_KUBE_TCP_KEEPINTVL_S);
    curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, kube__sockopt);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(LIMIT_KUBE_CONNECT / USEC_PER_MSEC));
    /* at least 1 ms: 0 would mean no timeout at all */
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
                     timeout && timeout < USEC_PER_MSEC ? 1L : (long)(timeout / USEC_PER_MSEC));
    if (strcmp(p->method, "GET") == 0) {
        long s = (long)(c->read_stall / USEC_PER_SEC);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, s > 0 ? s : 1L);
    }
    curl_easy_setopt(h, CURLOPT_SHARE, c->share);
    curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    if (c->connect_to)
        curl_easy_setopt(h, CURLOPT_CONNECT_TO, c->connect_to);
    kube__curl_tls(h, c->cfg);
    set_method(h, p);
    if (p->cancel) {
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_cancel_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)p->cancel);
    }
    *ret_headers = hdrs;
    return 0;
}

int kube__curl_errno(CURLcode cc)
{
    switch (cc) {
    case CURLE_OK:
        return 0;
    case CURLE_COULDNT_RESOLVE_HOST:
        return -EHOSTUNREACH;
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return -ECONNRESET;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CIPHER:
        return -EPROTO;
    case CURLE_ABORTED_BY_CALLBACK:
        return -ECANCELED;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        return -EINVAL;
    default:
        return -EIO;
    }
}

void kube__transport_err(struct kube_err *reterr, CURLcode cc, const char *errbuf)
{
    kube_err_set(reterr, kube__curl_errno(cc), "%s",
                 errbuf && errbuf[0] ? errbuf : curl_easy_strerror(cc));
}

void kube__parse_retry_after(const char *line, size_t len, long *ret_s)
{
    struct str s = str_make(line, len), name, value;
    uint64_t v;
    if (!str_cut(s, ':', &name, &value) || !str_eq_nocase(str_trim(name), STR_LIT("Retry-After")))
        return;
    if (str_to_u64(str_trim(value), &v) == 0)
        *ret_s = v > LIMIT_KUBE_RETRY_AFTER / USEC_PER_SEC
                     ? (long)(LIMIT_KUBE_RETRY_AFTER / USEC_PER_SEC)
                     : (long)v;
}

/* One response being received. */
struct resp {
    CURL *h;
    struct buf body;
    long status;
    long retry_after;
    bool sent;           /* the attempt's request left (some of it), so the server may act on it */
    uint64_t token_gen;  /* of the credential the attempt carried */
    unsigned sends;      /* times the attempt's request was sent (libcurl resends on its own) */
    bool no_resend;      /* a generated create: never sent twice (a second object) */
    bool resend_refused; /* on_prereq refused such a resend */
};

static bool is_2xx(long s)
{
    return s >= 200 && s < 300;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userp)
{
    struct resp *rs = userp;
    size_t n = size * nmemb;
    if (rs->status == 0)
        curl_easy_getinfo(rs->h, CURLINFO_RESPONSE_CODE, &rs->status);
    if (is_2xx(rs->status))
        return buf_append(&rs->body, ptr, n) < 0 ? 0 : n; /* 0 aborts: too large */
    size_t room = rs->body.len < LIMIT_KUBE_ERROR_BODY ? LIMIT_KUBE_ERROR_BODY - rs->body.len : 0;
    (void)buf_append(&rs->body, ptr, n < room ? n : room); /* the rest is dropped */
    return n;
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *userp)
{
    struct resp *rs = userp;
    size_t n = size * nmemb;
    if (n >= 5 && memcmp(ptr, "HTTP/", 5) == 0) {
        rs->retry_after = 0;
        rs->status = 0;
        buf_reset(&rs->body);
    } else {
        kube__parse_retry_after(ptr, n, &rs->retry_after);
    }
    return n;
}

/* The test hook's answer replaces a real one (kube_client_opts.fault). */
static void inject_fault(struct kube_client *c, const struct kube__prep *p, struct resp *rs)
{
    long st =
        c->fault(c->fault_ctx, p->method, p->res, p->subresource, buf_str(&p->url), rs->status);
    if (st < 500 || st > 599)
        return;
    rs->status = st;
    rs->retry_after = 0;
    buf_reset(&rs->body);
}

/* The test hook's answer before the attempt: a 5xx answers it unsent (the outcome is
 * unknown to the caller). Returns whether the attempt is answered so. */
static bool fault_unsent(struct kube_client *c, const struct kube__prep *p, struct resp *rs)
{
    long st = c->fault
                  ? c->fault(c->fault_ctx, p->method, p->res, p->subresource, buf_str(&p->url), 0)
                  : 0;
    if (st < 500 || st > 599)
        return false;
    rs->status = st;
    rs->sent = true;
    rs->retry_after = 0;
    buf_reset(&rs->body);
    if (c->observe)
        c->observe(c->observe_ctx, p->method, p->res, p->subresource, rs->status);
    return true;
}

/* CURLOPT_PREREQFUNCTION: called before each send of the request, libcurl's own resends
 * included. libcurl sends a request again, unasked, when a reused connection died before
 * any answer: the first copy may have reached the server and been carried out. Counted
 * (the outcome is then unknown), and refused for a generated create, which would make a
 * second object. */
static int on_prereq(void *ctx, char *primary_ip, char *local_ip, int primary_port, int local_port)
{
    struct resp *rs = ctx;
    (void)primary_ip, (void)local_ip, (void)primary_port, (void)local_port;
    if (++rs->sends > 1 && rs->no_resend) {
        rs->resend_refused = true;
        return CURL_PREREQFUNC_ABORT;
    }
    return CURL_PREREQFUNC_OK;
}

/* Runs one transfer on a pooled handle. Returns the curl result; rs gets the status. */
static CURLcode perform_once(struct kube_client *c, const struct kube__prep *p, struct resp *rs,
                             char *errbuf, struct kube_err *reterr, int *ret_r)
{
    struct curl_slist *hdrs = NULL;
    if (fault_unsent(c, p, rs)) {
        errbuf[0] = '\0';
        *ret_r = 0;
        return CURLE_OK;
    }
    CURL *h = pool_get(c);
    if (!h) {
        kube_err_set(reterr, -ENOMEM, "cannot create a curl handle");
        *ret_r = -ENOMEM;
        return CURLE_OK;
    }
    *ret_r = kube__setup(c, h, p, &hdrs, &rs->token_gen, reterr);
    if (*ret_r < 0) {
        pool_put(c, h);
        return CURLE_OK;
    }
    rs->h = h;
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, rs);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, rs);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, (long)LIMIT_KUBE_UPLOAD_BUFFER);
    rs->sends = 0;
    rs->no_resend = p->generated;
    rs->resend_refused = false;
    curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, on_prereq);
    curl_easy_setopt(h, CURLOPT_PREREQDATA, rs);
    errbuf[0] = '\0';
    atomic_fetch_add(&c->requests, 1);
    CURLcode cc = kube__mux_usable(c->mux) ? kube__mux_perform(c->mux, h) : curl_easy_perform(h);
    long nconn = 0;
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &nconn);
    atomic_fetch_add(&c->connections, (unsigned long)nconn);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &rs->status);
    long sent = 0;
    curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &sent);
    rs->sent = sent > 0 || rs->status != 0 || rs->sends > 0;
    if (c->fault && cc == CURLE_OK && rs->status)
        inject_fault(c, p, rs);
    if (c->observe)
        c->observe(c->observe_ctx, p->method, p->res, p->subresource, rs->status);
    /* nothing borrowed stays on the pooled handle */
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 1L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, NULL);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, NULL);
    curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, NULL);
    curl_easy_setopt(h, CURLOPT_PREREQDATA, NULL);
    curl_slist_free_all(hdrs);
    rs->h = NULL;
    pool_put(c, h);
    return cc;
}

/* Exponential back-off with jitter in [d/2, d], or the server's Retry-After. */
static usec_t backoff(int attempt, long retry_after_s)
{
    if (retry_after_s > 0) /* compared before the product, which could wrap */
        return (usec_t)retry_after_s < LIMIT_KUBE_RETRY_AFTER / USEC_PER_SEC
                   ? (usec_t)retry_after_s * USEC_PER_SEC
                   : LIMIT_KUBE_RETRY_AFTER;
    usec_t d = LIMIT_KUBE_BACKOFF_MIN;
    for (int i = 0; i < attempt && d < LIMIT_KUBE_BACKOFF_MAX; i++)
        d *= 2;
    if (d > LIMIT_KUBE_BACKOFF_MAX)
        d = LIMIT_KUBE_BACKOFF_MAX;
    static _Thread_local unsigned seed;
    if (seed == 0)
        seed = (unsigned)clock_now() | 1u;
    return d / 2 + (usec_t)rand_r(&seed) % (d / 2 + 1);
}

bool kube__nothing_sent(CURLcode cc, bool sent)
{
    return !sent && (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST ||
                     cc == CURLE_SSL_CONNECT_ERROR);
}

static bool should_retry(const struct kube__prep *p, CURLcode cc, const struct resp *rs)
{
    if (cc == CURLE_OK)
        return rs->status == 429 ||
               (rs->status >= 500 && rs->status != 501 && rs->status != 505 && !p->generated);
    if (kube__nothing_sent(cc, rs->sent))
        return true;
    return p->idempotent && kube__curl_errno(cc) != -EPROTO && cc != CURLE_WRITE_ERROR;
}

/* Whether a failed attempt that is retried may still have been carried out: it got a 5xx
 * (429 is refused before anything happens) or lost its connection after sending. */
static bool attempt_maybe_done(CURLcode cc, const struct resp *rs)
{
    if (cc == CURLE_OK)
        return rs->status >= 500;
    return !kube__nothing_sent(cc, rs->sent);
}

static int parse_ok(const struct resp *rs, json_t **ret_obj, struct kube_err *reterr)
{
    if (!ret_obj)
        return 0;
    json_t *j = NULL;
    if (rs->body.len > 0) {
        json_error_t je;
        j = json_loadb(rs->body.data, rs->body.len, 0, &je);
        if (!j) {
            kube_err_set(reterr, -EPROTO, "response is not JSON: %s", je.text);
            return -EPROTO;
        }
    }
    *ret_obj = j;
    return 0;
}

/* Sends p once (after the rate limiter). Returns 0 on a 2xx, else a negative errno with
 * e filled. */
static int attempt_once(struct kube_client *c, const struct kube__prep *p, struct resp *rs,
                        CURLcode *ret_cc, struct kube_err *e)
{
    char errbuf[CURL_ERROR_SIZE];
    int r;
    buf_reset(&rs->body);
    rs->status = 0;
    rs->retry_after = 0;
    rs->sent = false;
    *ret_cc = CURLE_OK;
    r = kube__throttle(c, p, NULL, e);
    if (r < 0)
        return r; /* nothing sent, no status: not retried */
    *ret_cc = perform_once(c, p, rs, errbuf, e, &r);
    if (r < 0)
        return r; /* no transfer: no handle, no credential, or no time left */
    if (*ret_cc == CURLE_WRITE_ERROR) {
        kube_err_set(e, -E2BIG, "response body larger than %u bytes", LIMIT_KUBE_RESPONSE);
        return -E2BIG;
    }
    if (*ret_cc != CURLE_OK) {
        kube__transport_err(e, *ret_cc, errbuf);
        return e->code;
    }
    if (is_2xx(rs->status))
        return 0;
    kube_err_from_response(e, rs->status, rs->body.data, rs->body.len);
    if (rs->retry_after > e->retry_after_s)
        e->retry_after_s = rs->retry_after;
    return e->code;
}

/* Logs a failed attempt (rate-limited): verb, path, status, Retry-After; delay 0 means
 * the call gives up. */
static void log_retry(struct kube_client *c, const struct kube__prep *p, const struct resp *rs,
                      CURLcode cc, const struct kube_err *e, int attempt, usec_t delay)
{
    struct kube__retry_note n = {.method = p->method,
                                 .url = buf_str(&p->url),
                                 .status = rs->status,
                                 .reason = cc == CURLE_OK ? e->reason : e->message,
                                 .retry_after_s =
                                     rs->retry_after ? rs->retry_after : e->retry_after_s,
                                 .attempt = attempt,
                                 .delay = delay};
    char line[1024];
    if (log_max_level < LOG_DEBUG ||
        !kube__loglimit_allow(&c->loglimit, clock_now(), &n.suppressed))
        return;
    (void)kube__retry_note_format(&n, line, sizeof(line));
    if (delay)
        log_debug("kube request failed, will retry\t%s", line);
    else
        log_debug("kube request failed, giving up\t%s", line);
}

/* Whether a failed attempt is retried, and after how long (*ret_delay). */
static bool retry_after_failure(struct kube_client *c, const struct kube__prep *p,
                                const struct resp *rs, CURLcode cc, const struct kube_err *e,
                                int attempt, usec_t *ret_delay)
{
    usec_t d;
    if ((cc == CURLE_OK && rs->status == 0) || !should_retry(p, cc, rs))
        return false;
    /* a handshake that keeps failing is a configuration (https to a plain port, a
     * refused client certificate): reported after a couple of tries, not 8 back-offs */
    if (p->no_retry || attempt >= c->max_retries ||
        (cc == CURLE_SSL_CONNECT_ERROR && attempt >= LIMIT_KUBE_TLS_RETRIES)) {
        log_retry(c, p, rs, cc, e, attempt + 1, 0);
        return false;
    }
    d = backoff(attempt, e->retry_after_s);
    if (p->deadline && clock_now() + d >= p->deadline) {
        log_retry(c, p, rs, cc, e, attempt + 1, 0);
        return false; /* the call's time is up before the next attempt */
    }
    log_retry(c, p, rs, cc, e, attempt + 1, d);
    *ret_delay = d;
    return true;
}

/* A create (POST to a collection): what a terminating namespace refuses. */
static bool plain_create(const struct kube_req *r)
{
    return r->ns && !r->raw_path && !r->name && !r->subresource && strcmp(r->method, "POST") == 0;
}

/* A create in a namespace the server refused creates in less than KUBE_NSTERM_TTL ago:
 * answered here as the server would (returns -ESHUTDOWN, e filled), else 0. The text is
 * the same on every such answer: callers that put it into a status must not see a change
 * (a status rewritten per retry would requeue its object through its own event). */
static int nsterm_refuse(struct kube_client *c, const struct kube_req *r, struct kube_err *e)
{
    if (!plain_create(r) || kube_nsterm_check(&c->nsterm, r->ns, clock_now()) < 0)
        return 0;
    kube_err_set(e, -ESHUTDOWN,
                 "unable to create new content in namespace %s because it is being terminated "
                 "(not sent: the API server said so less than %d s ago)",
                 r->ns, (int)(KUBE_NSTERM_TTL / USEC_PER_SEC));
    e->http_status = 403;
    e->ns_terminating = true;
    (void)str_copy(e->reason, sizeof(e->reason), "Forbidden");
    return -ESHUTDOWN;
}

bool kube_client_ns_terminating(struct kube_client *c, const char *ns)
{
    return c && ns && kube_nsterm_check(&c->nsterm, ns, clock_now()) >= 0;
}

bool kube_client_ns_terminated_within(struct kube_client *c, const char *ns, usec_t window)
{
    return c && ns && kube_nsterm_seen(&c->nsterm, ns, clock_now(), window) >= 0;
}

/* -ECANCELED (e filled) when the caller's cancel flag is set, else 0. */
static int cancelled(const struct kube__prep *p, struct kube_err *e)
{
    if (!p->cancel || !atomic_load(p->cancel))
        return 0;
    kube_err_set(e, -ECANCELED, "%s cancelled: the caller stops", p->method);
    return -ECANCELED;
}

void kube_client_set_write_gate(struct kube_client *c, const struct kube_write_gate *g)
{
    atomic_store(&c->gate, g);
}

/* A write the client's gate refuses now (kube_client_set_write_gate): -ENOLCK, unsent. */
static int gate_refuses(struct kube_client *c, const struct kube_req *r, struct kube_err *e)
{
    const struct kube_write_gate *g = atomic_load(&c->gate);
    if (!g || !r->method || strcmp(r->method, "GET") == 0 || g->may(g->ctx, r))
        return 0;
    kube_err_set(e, -ENOLCK, "%s not sent: this process may not write now (no longer the leader)",
                 r->method);
    return -ENOLCK;
}

/* The back-off between attempts; a cancellable request looks at its flag every 20 ms. */
static void backoff_sleep(const struct kube__prep *p, usec_t d)
{
    usec_t end = clock_now() + d;
    if (!p->cancel) {
        clock_sleep(d);
        return;
    }
    for (usec_t now = clock_now(); now < end && !atomic_load(p->cancel); now = clock_now())
        clock_sleep(end - now < 20 * USEC_PER_MSEC ? end - now : 20 * USEC_PER_MSEC);
}

int kube_request(struct kube_client *c, const struct kube_req *r, json_t **ret_obj,
                 struct kube_err *reterr)
{
    struct kube__prep p;
    struct resp rs = {0};
    struct kube_err e;
    bool refreshed = false, maybe_done = false;
    kube_err_clear(&e);
    if (nsterm_refuse(c, r, &e) < 0) {
        if (reterr)
            *reterr = e;
        return -ESHUTDOWN;
    }
    buf_init(&rs.body, LIMIT_KUBE_RESPONSE);
    int ret = kube__prepare(c, r, &p, &e);
    p.no_retry = r->no_retry;
    p.cancel = r->cancel;
    p.deadline = r->timeout ? clock_now() + r->timeout : 0;
    for (int attempt = 0; ret >= 0;) {
        CURLcode cc = CURLE_OK;
        usec_t d = 0;
        if ((ret = cancelled(&p, &e)) < 0 || (ret = gate_refuses(c, r, &e)) < 0)
            break;
        ret = attempt_once(c, &p, &rs, &cc, &e);
        e.sent = rs.sent;
        /* libcurl sent it twice on its own: the first copy may have been carried out */
        maybe_done = maybe_done || rs.sends > 1;
        if (rs.resend_refused) {
            kube_err_set(&e, -ECONNRESET,
                         "the connection was lost after the request was sent; not sent again "
                         "(it may have been carried out)");
            e.sent = true;
            maybe_done = true;
            break;
        }
        if (ret >= 0) {
            ret = parse_ok(&rs, ret_obj, &e);
            e.sent = true;
            break;
        }
        if (rs.status == 401 && !refreshed) {
            /* a rotated or expired token: fetch a fresh one and try once more */
            refreshed = true;
            kube_config_invalidate_token_gen(c->cfg, rs.token_gen);
            atomic_fetch_add(&c->retries, 1);
            ret = 0;
            continue;
        }
        if (cc == CURLE_ABORTED_BY_CALLBACK) /* cancelled in the transfer */
            break;
        if (!retry_after_failure(c, &p, &rs, cc, &e, attempt, &d))
            break;
        maybe_done = maybe_done || attempt_maybe_done(cc, &rs);
        backoff_sleep(&p, d);
        attempt++;
        atomic_fetch_add(&c->retries, 1);
        ret = 0;
    }
    e.maybe_done = maybe_done;
    if (ret < 0 && e.ns_terminating && plain_create(r))
        kube_nsterm_mark(&c->nsterm, r->ns, clock_now());
    if (ret < 0 && reterr)
        *reterr = e;
    buf_done(&rs.body);
    kube__prep_done(&p);
    return ret;
}
