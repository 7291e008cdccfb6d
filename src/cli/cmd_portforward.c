/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox port-forward NAME [LOCAL:]REMOTE: listens on LOCAL and, for every
 * accepted connection, opens a WebSocket to the API server's
 * pods/POD/portforward?ports=REMOTE (pfwd.h) and pumps bytes both ways. Only a kubeconfig
 * is needed (RBAC: get on pods/portforward, the verb of a WebSocket upgrade). One thread per
 * connection, each with bounded buffers in both directions: a side that does not read stops the
 * other. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "api/res.h"
#include "api/sandbox.h"
#include "cli/output.h"
#include "cli/pfwd.h"
#include "cli/sbd.h"
#include "common/base64.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/xalloc.h"
#include "http/ws.h"
#include "kube/obj.h"

#define PF_CHUNK        (16u * 1024)   /* one read from either side */
#define PF_TX_SOFT      (256u * 1024)  /* frames queued for the server */
#define PF_OUT_SOFT     (256u * 1024)  /* data queued for the local side */
#define PF_MAX_FRAME    (1024u * 1024) /* largest frame taken from the server */
#define PF_MAX_CONNS    128            /* connections forwarded at once */
#define PF_HANDSHAKE    (30 * 1000)    /* ms: the answer to the upgrade request */
#define PF_LINGER       (5 * 1000)     /* ms: idle after the local side's EOF */
#define PF_IO_TIMEOUT   (10 * 1000)    /* ms: a blocked write during set-up/flush */
#define PF_REFUSAL_BODY (10 * 1000)    /* ms: the body of a refused upgrade */

/* What every connection shares (read-only after set-up, except the token lock). */
struct pf_ctx {
    const struct cli_globals *g;
    struct kube_config *cfg; /* owned: the API server and its TLS */
    pthread_mutex_t token_lock;
    char host_port[512], prefix[1024];
    char ns[254], pod[254], name[254];
    unsigned remote;
    atomic_int conns;
};

struct pf_conn {
    struct pf_ctx *ctx;
    int fd; /* the accepted local connection (owned) */
    CURL *h;
    char errbuf[CURL_ERROR_SIZE]; /* h's CURLOPT_ERRORBUFFER: lives as long as h */
    curl_socket_t sock;
    struct buf tx;  /* frames for the server */
    struct buf out; /* data for the local side */
    struct cli_pfwd_rx rx;
    bool local_eof, remote_eof;
};

static volatile sig_atomic_t pf_stop;

static void on_stop(int sig)
{
    (void)sig;
    pf_stop = 1;
}

void cli_help_portforward(FILE *out)
{
    fprintf(out,
            "Usage: kubectl-sandbox port-forward NAME [LOCAL:]REMOTE [--address ADDR] [-n NS]\n\n"
            "Forwards connections to ADDR:LOCAL (default 127.0.0.1; LOCAL 0 or empty: a free\n"
            "port, printed) to port REMOTE of sandbox NAME's pod (NAME: a Sandbox or the\n"
            "SandboxClaim that owns one), through the API server's pod port-forward: only a\n"
            "kubeconfig is needed, with RBAC get on pods/portforward. Prints\n"
            "\"Forwarding from ADDR:LOCAL -> REMOTE\" and runs until interrupted.\n"
            "  --address ADDR   local IPv4 or IPv6 address to listen on\n"
            "Exit codes: 0 interrupted, 1 no such sandbox / not Ready / cannot listen,\n"
            "2 usage, 3 no kubeconfig.\n");
}

/* ---- one connection ----------------------------------------------------------------------- */

static void random_mask(uint8_t mask[4])
{
    if (getrandom(mask, 4, 0) != 4)
        memset(mask, 0x5a, 4); /* masking is for proxies' caches, not secrecy */
}

static int on_rx_data(void *ctx, const uint8_t *p, size_t n)
{
    struct pf_conn *c = ctx;
    return buf_append(&c->out, p, n) < 0 ? -E2BIG : 0;
}

static void on_rx_ping(void *ctx, const uint8_t *p, size_t n)
{
    struct pf_conn *c = ctx;
    uint8_t mask[4];
    random_mask(mask);
    (void)cli_pfwd_frame(HTTP_WS_PONG, -1, p, n, mask, &c->tx);
}

static const struct cli_pfwd_ops pf_rx_ops = {.data = on_rx_data, .ping = on_rx_ping};

/* Waits for events on the server socket (ms). Returns > 0 ready, 0 timeout. */
static int wait_sock(struct pf_conn *c, short events, int ms)
{
    struct pollfd p = {.fd = c->sock, .events = events};
    int r;
    do
        r = poll(&p, 1, ms);
    while (r < 0 && errno == EINTR);
    return r;
}

/* Sends all of tx to the server; blocks up to PF_IO_TIMEOUT per stall. */
static int send_all(struct pf_conn *c)
{
    while (c->tx.len > 0) {
        size_t sent = 0;
        CURLcode cc = curl_easy_send(c->h, c->tx.data, c->tx.len, &sent);
        if (cc == CURLE_AGAIN) {
            if (wait_sock(c, POLLOUT, PF_IO_TIMEOUT) <= 0)
                return -ETIMEDOUT;
            continue;
        }
        if (cc != CURLE_OK)
            return -EIO;
        buf_consume(&c->tx, sent);
    }
    return 0;
}

/* Tells why the upgrade was refused (status and the start of the body). */
static void print_refusal(struct pf_conn *c, int status, const char *body, size_t len)
{
    const struct pf_ctx *x = c->ctx;
    char text[600];
    cli_sbd_error_text(status, body, len, text, sizeof(text));
    fprintf(x->g->err, "error: port-forward to pod %s/%s port %u refused: %s\n", x->ns, x->pod,
            x->remote, text);
    if (status == 403)
        fprintf(x->g->err,
                "hint: the kubeconfig's user needs RBAC on pods/portforward (get for WebSocket, "
                "create for SPDY clients) in "
                "namespace %s\n",
                x->ns);
}

/* Reads the rest of a refusal's body (its Status, for the message) into in, which holds
 * the head: up to its Content-Length (without one, until the server closes), what in
 * holds (32 KiB) or PF_REFUSAL_BODY ms, whichever comes first. A loaded API server may
 * send the body well after the head. */
static void read_refusal_body(struct pf_conn *c, struct buf *in, const struct cli_pfwd_resp *resp)
{
    usec_t end = clock_now() + (usec_t)PF_REFUSAL_BODY * USEC_PER_MSEC;
    for (;;) {
        size_t have = in->len - resp->head_len, n = 0;
        usec_t now = clock_now();
        char chunk[4096];
        if ((resp->body_len >= 0 && have >= (size_t)resp->body_len) || now >= end)
            return;
        /* read first: TLS may hold decrypted bytes the socket no longer shows */
        CURLcode cc = curl_easy_recv(c->h, chunk, sizeof(chunk), &n);
        if (cc == CURLE_AGAIN) {
            if (wait_sock(c, POLLIN, (int)((end - now) / USEC_PER_MSEC) + 1) <= 0)
                return;
            continue;
        }
        if (cc != CURLE_OK || n == 0 || buf_append(in, chunk, n) < 0)
            return;
    }
}

/* Reads the answer to the upgrade request; leftover bytes go to the frame reader. */
static int read_answer(struct pf_conn *c, const char *key)
{
    struct buf in;
    buf_init(&in, 32 * 1024);
    struct cli_pfwd_resp resp;
    int r = 0;
    while (r == 0) {
        char chunk[4096];
        size_t n = 0;
        CURLcode cc = curl_easy_recv(c->h, chunk, sizeof(chunk), &n);
        if (cc == CURLE_AGAIN) {
            r = wait_sock(c, POLLIN, PF_HANDSHAKE) > 0 ? 0 : -ETIMEDOUT;
            continue;
        }
        if (cc != CURLE_OK || n == 0 || buf_append(&in, chunk, n) < 0)
            r = -EIO;
        else
            r = cli_pfwd_parse_resp(in.data, in.len, key, &resp);
    }
    if (r == 1 && resp.upgraded) {
        r = cli_pfwd_rx_feed(&c->rx, in.data + resp.head_len, in.len - resp.head_len);
    } else if (r == 1 && resp.status != 101) {
        read_refusal_body(c, &in, &resp);
        print_refusal(c, resp.status, in.data + resp.head_len, in.len - resp.head_len);
        r = -EPERM;
    } else if (r == 1) {
        fprintf(c->ctx->g->err, "error: port-forward: bad upgrade answer: %s\n", resp.problem);
        r = -EPROTO;
    } else {
        fprintf(c->ctx->g->err, "error: port-forward: no valid answer from the API server (%s)\n",
                r == -ETIMEDOUT ? "timed out" : "connection failed");
    }
    buf_done(&in);
    return r < 0 ? r : 0;
}

/* The Authorization header value (a fresh token per connection) into *ret: new (wipe
 * and free), NULL without a token. Any token the kubeconfig may hold fits; it is never
 * cut. Returns 0 or a negative errno (printed). */
static int authorization(struct pf_ctx *x, char **ret)
{
    char *tok = xmalloc(LIMIT_KUBE_TOKEN + 1);
    struct kube_err e;
    kube_err_clear(&e);
    pthread_mutex_lock(&x->token_lock);
    int n = kube_config_token(x->cfg, tok, LIMIT_KUBE_TOKEN + 1, &e);
    pthread_mutex_unlock(&x->token_lock);
    *ret = n > 0 ? xasprintf("Bearer %s", tok) : NULL;
    explicit_bzero(tok, n > 0 ? (size_t)n : 0);
    xfree(tok);
    if (n < 0)
        fprintf(x->g->err, "error: port-forward: cannot get a bearer token: %s\n", e.message);
    return n < 0 ? n : 0;
}

/* Connects (TCP + TLS through libcurl) as the kubeconfig's user. Returns 0 or < 0
 * (printed). Under the token lock: another connection's token refresh may replace the
 * exec plugin's client certificate that the set-up copies. */
static int remote_connect(struct pf_conn *c)
{
    struct pf_ctx *x = c->ctx;
    struct curl_slist *hdrs = NULL;
    struct cli_sbd *s = NULL;
    CURLcode cc;
    c->h = curl_easy_init();
    if (!c->h || cli_sbd_open_server(x->g, x->cfg, &s) != CLI_OK)
        return -ENOMEM;
    pthread_mutex_lock(&x->token_lock);
    (void)cli_sbd_setup(s, c->h, "GET", "/", NULL, &hdrs, c->errbuf);
    pthread_mutex_unlock(&x->token_lock);
    cli_sbd_free(s); /* h holds copies of everything it needs */
    curl_easy_setopt(c->h, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(c->h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    cc = curl_easy_perform(c->h);
    curl_slist_free_all(hdrs);
    if (cc != CURLE_OK || curl_easy_getinfo(c->h, CURLINFO_ACTIVESOCKET, &c->sock) != CURLE_OK) {
        fprintf(x->g->err, "error: port-forward: cannot reach the API server: %s\n",
                c->errbuf[0] ? c->errbuf : curl_easy_strerror(cc));
        return -EIO;
    }
    return 0;
}

/* Sends the upgrade request with Authorization auth (may be NULL) and key. */
static int send_upgrade(struct pf_conn *c, const char *auth, const char *key)
{
    struct pf_ctx *x = c->ctx;
    struct cli_pfwd_req q = {.host_port = x->host_port,
                             .path_prefix = x->prefix,
                             .ns = x->ns,
                             .pod = x->pod,
                             .port = x->remote,
                             .authorization = auth,
                             .key = key};
    /* Room for the whole request first: a buffer that grew while it held the token would
     * free a copy of it unwiped. */
    int r = buf_printf(&c->tx, "%*s", (int)(4096 + (auth ? strlen(auth) : 0)), "");
    buf_reset(&c->tx);
    if (r == 0)
        r = cli_pfwd_request(&q, &c->tx);
    if (r == 0)
        r = send_all(c);
    if (c->tx.data) /* the request's Authorization line, sent or not */
        explicit_bzero(c->tx.data, c->tx.cap);
    buf_reset(&c->tx);
    return r;
}

/* Connects, sends the upgrade request and checks the answer. The token comes first: an
 * exec credential plugin's client certificate comes with it, and the TLS handshake needs
 * it (before, the first connection and the first after an expiry went without). */
static int remote_open(struct pf_conn *c)
{
    char *auth = NULL;
    uint8_t raw[16];
    struct buf key;
    int r;
    if (authorization(c->ctx, &auth) < 0)
        return -EACCES;
    buf_init(&key, 64);
    r = remote_connect(c);
    if (r == 0 && (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw) ||
                   base64_encode(raw, sizeof(raw), &key) < 0))
        r = -EIO;
    if (r == 0)
        r = send_upgrade(c, auth, buf_str(&key));
    if (auth) {
        explicit_bzero(auth, strlen(auth));
        xfree(auth);
    }
    if (r == 0)
        r = read_answer(c, buf_str(&key));
    buf_done(&key);
    return r;
}

/* Reads what the server has (when the local side has room). Returns 0 or < 0 to end.
 * One read completes at most the frame buffered in rx plus PF_CHUNK bytes of frames, so
 * out never holds more than PF_OUT_SOFT + PF_MAX_FRAME + PF_CHUNK. */
static int pump_remote_in(struct pf_conn *c)
{
    while (c->out.len < PF_OUT_SOFT && !c->remote_eof && !c->rx.closed) {
        char chunk[PF_CHUNK];
        size_t n = 0;
        CURLcode cc = curl_easy_recv(c->h, chunk, sizeof(chunk), &n);
        if (cc == CURLE_AGAIN)
            return 0;
        if (cc != CURLE_OK || n == 0) {
            c->remote_eof = true;
            return 0;
        }
        int r = cli_pfwd_rx_feed(&c->rx, chunk, n);
        if (r < 0) {
            fprintf(c->ctx->g->err, "error: port-forward: bad data from the API server (%s)\n",
                    r == -E2BIG ? "frame too large" : "protocol error");
            return r;
        }
    }
    return 0;
}

/* Reads what the local side has (when the server side has room) into data frames. */
static int pump_local_in(struct pf_conn *c)
{
    if (c->local_eof || c->tx.len >= PF_TX_SOFT)
        return 0;
    char chunk[PF_CHUNK];
    ssize_t n = read(c->fd, chunk, sizeof(chunk));
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -errno;
    if (n == 0) {
        c->local_eof = true;
        return 0;
    }
    uint8_t mask[4];
    random_mask(mask);
    return cli_pfwd_frame(HTTP_WS_BINARY, CLI_PFWD_CH_DATA, chunk, (size_t)n, mask, &c->tx);
}

static int pump_out(struct pf_conn *c)
{
    while (c->tx.len > 0) {
        size_t sent = 0;
        CURLcode cc = curl_easy_send(c->h, c->tx.data, c->tx.len, &sent);
        if (cc == CURLE_AGAIN)
            break;
        if (cc != CURLE_OK)
            return -EIO;
        buf_consume(&c->tx, sent);
    }
    if (c->out.len > 0) {
        ssize_t w = write(c->fd, c->out.data, c->out.len);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -errno;
        if (w > 0)
            buf_consume(&c->out, (size_t)w);
    }
    return 0;
}

/* Whether the connection is over: the server closed, or the channel carried an error,
 * and everything the server sent before was written to the local side. */
static bool finished(const struct pf_conn *c)
{
    return (cli_pfwd_rx_has_error(&c->rx) || c->remote_eof || c->rx.closed) && c->out.len == 0;
}

static void pump(struct pf_conn *c)
{
    int r = 0;
    while (r == 0 && !finished(c) && !pf_stop) {
        struct pollfd p[2] = {{.fd = c->fd}, {.fd = c->sock}};
        if (!c->local_eof && c->tx.len < PF_TX_SOFT)
            p[0].events |= POLLIN;
        if (c->out.len)
            p[0].events |= POLLOUT;
        /* once the server is done its socket stays readable (EOF): waiting on it would
         * spin while a slow local client drains what is queued for it */
        if (c->out.len < PF_OUT_SOFT && !c->remote_eof && !c->rx.closed)
            p[1].events |= POLLIN;
        if (c->tx.len)
            p[1].events |= POLLOUT;
        for (int i = 0; i < 2; i++)
            if (!p[i].events)
                p[i].fd = -1; /* no hang-up reports for a side not waited on */
        int n = poll(p, 2, c->local_eof ? PF_LINGER : 500);
        if (n == 0 && c->local_eof)
            break; /* the local side is done and the server has been quiet */
        if (n < 0 && errno != EINTR)
            break;
        r = pump_remote_in(c);
        if (r == 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            r = pump_local_in(c);
        if (r == 0)
            r = pump_out(c);
    }
    if (cli_pfwd_rx_has_error(&c->rx)) {
        char *safe = out_safe_dup(buf_str(&c->rx.error)); /* the cluster's text, shown escaped */
        fprintf(c->ctx->g->err, "error: port-forward to %s port %u: %s\n", c->ctx->name,
                c->ctx->remote, safe);
        xfree(safe);
    }
}

/* Sends a close frame (best effort) and releases everything. */
static void conn_free(struct pf_conn *c)
{
    if (c->h && c->sock != CURL_SOCKET_BAD && !c->remote_eof) {
        uint8_t mask[4], code[2] = {0x03, 0xe8}; /* 1000 */
        random_mask(mask);
        buf_reset(&c->tx);
        if (cli_pfwd_frame(HTTP_WS_CLOSE, -1, code, 2, mask, &c->tx) == 0) {
            size_t sent;
            (void)curl_easy_send(c->h, c->tx.data, c->tx.len, &sent);
        }
    }
    if (c->h)
        curl_easy_cleanup(c->h);
    (void)close(c->fd);
    cli_pfwd_rx_done(&c->rx);
    buf_done(&c->tx);
    buf_done(&c->out);
    atomic_fetch_sub(&c->ctx->conns, 1);
    xfree(c);
}

static void *conn_main(void *arg)
{
    struct pf_conn *c = arg;
    if (remote_open(c) == 0)
        pump(c);
    conn_free(c);
    return NULL;
}

static void conn_start(struct pf_ctx *x, int fd)
{
    if (atomic_fetch_add(&x->conns, 1) >= PF_MAX_CONNS) {
        atomic_fetch_sub(&x->conns, 1);
        fprintf(x->g->err, "warning: %d connections are forwarded already; refusing one\n",
                PF_MAX_CONNS);
        (void)close(fd);
        return;
    }
    struct pf_conn *c = XNEW(struct pf_conn);
    *c = (struct pf_conn){.ctx = x, .fd = fd, .sock = CURL_SOCKET_BAD};
    buf_init(&c->tx, PF_TX_SOFT + PF_CHUNK + 64);
    buf_init(&c->out, PF_OUT_SOFT + PF_MAX_FRAME + PF_CHUNK); /* see pump_remote_in */
    cli_pfwd_rx_init(&c->rx, x->remote, PF_MAX_FRAME, &pf_rx_ops, c);
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, conn_main, c) != 0)
        conn_free(c);
    pthread_attr_destroy(&a);
}

/* ---- set-up ------------------------------------------------------------------------------- */

/* Resolves NAME (a Sandbox, else a SandboxClaim's sandbox) to its pod; it must be Ready. */
static int resolve_pod(struct pf_ctx *x, struct kube_client *kc, const char *name)
{
    const struct cli_globals *g = x->g;
    json_t *sb = NULL, *claim = NULL;
    struct kube_err e;
    const char *sbname = name;
    int r = kube_get(kc, &API_RES_SANDBOXES, x->ns, name, &sb, &e);
    if (r < 0 && kube_err_is_not_found(&e) &&
        kube_get(kc, &API_RES_SANDBOXCLAIMS, x->ns, name, &claim, NULL) == 0) {
        sbname = kube_obj_path_str(claim, "status.sandbox.name");
        r = sbname ? kube_get(kc, &API_RES_SANDBOXES, x->ns, sbname, &sb, &e) : -ENOENT;
        if (!sbname)
            fprintf(g->err, "error: sandboxclaim \"%s\" has no sandbox yet\n", name);
    }
    int rc = CLI_OK;
    if (r < 0 && (sbname != NULL || !claim)) {
        char what[300];
        (void)snprintf(what, sizeof(what), "sandbox \"%s\" in namespace %s", sbname, x->ns);
        rc = cli_fail(g, what, r, &e);
    } else if (r < 0) {
        rc = CLI_ERR;
    } else if (!kube_obj_condition_true(sb, SB_COND_READY)) {
        fprintf(g->err, "error: sandbox \"%s\" in namespace %s is not Ready\n", sbname, x->ns);
        rc = CLI_ERR;
    } else {
        const char *an = kube_obj_annotation(sb, SB_ANN_POD_NAME);
        (void)snprintf(x->pod, sizeof(x->pod), "%s", an ? an : sbname);
    }
    json_decref(sb);
    json_decref(claim);
    return rc;
}

/* Host header and path prefix from the API server URL. */
static int server_parts(struct pf_ctx *x)
{
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL, *path = NULL;
    int rc = CLI_NO_CONFIG;
    if (u && curl_url_set(u, CURLUPART_URL, kube_config_server(x->cfg), 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
        (void)curl_url_get(u, CURLUPART_PORT, &port, 0);
        (void)curl_url_get(u, CURLUPART_PATH, &path, 0);
        (void)snprintf(x->host_port, sizeof(x->host_port), "%s%s%s", host, port ? ":" : "",
                       port ? port : "");
        (void)snprintf(x->prefix, sizeof(x->prefix), "%s", path && strcmp(path, "/") ? path : "");
        rc = CLI_OK;
    } else {
        fprintf(x->g->err, "error: cannot parse the API server URL %s\n",
                kube_config_server(x->cfg));
    }
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_url_cleanup(u);
    return rc;
}

/* Listens on addr:port; prints the "Forwarding from" line. Returns the socket or -1. */
static int listen_on(const struct cli_globals *g, const char *addr, unsigned port, unsigned remote)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    socklen_t len;
    if (inet_pton(AF_INET, addr, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        len = sizeof(*v4);
    } else if (inet_pton(AF_INET6, addr, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        len = sizeof(*v6);
    } else {
        fprintf(g->err, "error: --address %s is not an IPv4 or IPv6 address\n", addr);
        return -1;
    }
    int one = 1, fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
        char eb[128];
        fprintf(g->err, "error: cannot listen on %s port %u: %s\n", addr, port,
                strerror_r(errno, eb, sizeof(eb)));
        if (fd >= 0)
            (void)close(fd);
        return -1;
    }
    unsigned got = ntohs(ss.ss_family == AF_INET ? v4->sin_port : v6->sin6_port);
    fprintf(g->out,
            ss.ss_family == AF_INET ? "Forwarding from %s:%u -> %u\n"
                                    : "Forwarding from [%s]:%u -> %u\n",
            addr, got, remote);
    fflush(g->out);
    return fd;
}

static void accept_loop(struct pf_ctx *x, int lfd)
{
    while (!pf_stop) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        if (poll(&p, 1, 500) <= 0)
            continue;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            /* out of descriptors (or memory): the connection stays queued and the
             * listener readable; wait instead of spinning on it */
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                (void)poll(NULL, 0, 100);
            continue;
        }
        fprintf(x->g->out, "Handling connection for %u\n", x->remote);
        fflush(x->g->out);
        conn_start(x, fd);
    }
}

static int parse_pf(const struct cli_globals *g, int argc, char **argv, const char **ret_addr)
{
    static const struct option lo[] = {{"address", required_argument, NULL, 'a'},
                                       {NULL, 0, NULL, 0}};
    int ch;
    optind = 0;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (ch != 'a') {
            fprintf(g->err, "error: bad option %s; see port-forward --help\n", argv[optind - 1]);
            return CLI_USAGE;
        }
        *ret_addr = optarg;
    }
    if (argc - optind != 2) {
        cli_help_portforward(g->err);
        return CLI_USAGE;
    }
    return CLI_OK;
}

static void set_signals(void)
{
    struct sigaction sa = {.sa_handler = on_stop}, ign = {.sa_handler = SIG_IGN};
    sigemptyset(&sa.sa_mask);
    sigemptyset(&ign.sa_mask);
    (void)sigaction(SIGINT, &sa, NULL);
    (void)sigaction(SIGTERM, &sa, NULL);
    (void)sigaction(SIGPIPE, &ign, NULL);
}

int cli_cmd_portforward(struct cli_globals *g, int argc, char **argv)
{
    const char *addr = "127.0.0.1";
    unsigned local, remote;
    int rc = parse_pf(g, argc, argv, &addr);
    if (rc != CLI_OK)
        return rc;
    if (cli_pfwd_parse_spec(argv[optind + 1], &local, &remote) < 0) {
        fprintf(g->err, "error: bad port %s: want [LOCAL:]REMOTE (1-65535; LOCAL 0: any)\n",
                argv[optind + 1]);
        return CLI_USAGE;
    }
    struct pf_ctx *x = XNEW(struct pf_ctx);
    *x = (struct pf_ctx){.g = g, .remote = remote};
    pthread_mutex_init(&x->token_lock, NULL);
    struct kube_client *kc = NULL;
    (void)curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cli_client(g, &kc);
    if (rc == CLI_OK) {
        (void)snprintf(x->ns, sizeof(x->ns), "%s", cli_namespace(g, kc));
        (void)snprintf(x->name, sizeof(x->name), "%s", argv[optind]);
        rc = resolve_pod(x, kc, argv[optind]);
    }
    kube_client_free(kc);
    if (rc == CLI_OK)
        rc = cli_config(g, &x->cfg);
    if (rc == CLI_OK)
        rc = server_parts(x);
    int lfd = rc == CLI_OK ? listen_on(g, addr, local, remote) : -1;
    if (rc == CLI_OK && lfd < 0)
        rc = CLI_ERR;
    if (rc == CLI_OK) {
        set_signals();
        accept_loop(x, lfd);
        (void)close(lfd);
        for (int i = 0; i < 100 && atomic_load(&x->conns) > 0; i++)
            clock_sleep(50 * USEC_PER_MSEC); /* connections see pf_stop within a poll */
    }
    if (atomic_load(&x->conns) > 0) {
        /* A connection thread still inside a connect or TLS handshake (up to 30 s): the
         * exit handlers (OpenSSL's, libcurl's) must not run under it. */
        (void)fflush(NULL);
        _exit(rc);
    }
    kube_config_free(x->cfg);
    pthread_mutex_destroy(&x->token_lock);
    xfree(x);
    return rc;
}
