/* SPDX-License-Identifier: Apache-2.0 */
#include "tls/tls_front.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common/clock.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "http/server.h"
#include "tls/tls_identity.h"

#define BRIDGE_CHUNK (16 * 1024) /* one TLS record's worth of plaintext each way */

struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
};

/* The connections one front has bridged: shared by the front and its bridges (which may
 * outlive it), freed by the last of them. Each front has its own, so a flood of one
 * listener (the proxy's) does not shut out another (the metrics one). */
struct tls_budget {
    atomic_int live; /* bridges with a thread */
    atomic_int refs; /* the front and each bridge */
    int max;
};

static struct tls_budget *budget_ref(struct tls_budget *b)
{
    atomic_fetch_add(&b->refs, 1);
    return b;
}

static void budget_unref(struct tls_budget *b)
{
    if (b && atomic_fetch_sub(&b->refs, 1) == 1)
        xfree(b);
}

struct tls_front {
    struct tls_front_opts o; /* strings owned */
    struct tls_budget *budget;
    struct http_server *server;
    SSL_CTX *ctx; /* the acceptor thread's; each SSL holds its own reference */
    struct file_id cert_id, key_id, ca_id; /* ca_id: zero without a client CA */
    int fd, stop_pipe[2];
    atomic_int connecting; /* bridges that may still post to server */
    atomic_bool stopping;
    uint16_t port;
    pthread_t thread;
};

struct bridge {
    SSL *ssl;
    int tcp, pair; /* the client's socket; our end of the socketpair */
    struct http_server *server;
    struct tls_front *front;   /* until connecting is decremented */
    struct tls_budget *budget; /* a reference */
    char peer[INET6_ADDRSTRLEN];
    char *ident; /* the client certificate's identity (tls_identity.h); NULL: none */
    size_t ident_len;
    struct http_cut *cut; /* shared with the server's connection (a reference); NULL: none */
    char in[BRIDGE_CHUNK], out[BRIDGE_CHUNK]; /* client->server, server->client */
    size_t in_len, in_off, out_len, out_off;
    uint64_t sent; /* bytes written to the client */
    bool client_eof, server_eof, failed;
    bool client_cut; /* the client's input ended without close_notify (client_ended) */
};

int tls_mtls_parse(const char *s, enum tls_mtls_mode *ret)
{
    static const char *const names[] = {"off", "optional", "required"};
    for (int i = 0; i < 3; i++)
        if (strcmp(s, names[i]) == 0) {
            *ret = (enum tls_mtls_mode)i;
            return 0;
        }
    return -EINVAL;
}

/* ---- certificates ---------------------------------------------------------------- */

static void log_ssl_error(const char *what, const char *file)
{
    char msg[256];
    unsigned long e = ERR_get_error();
    ERR_error_string_n(e, msg, sizeof(msg));
    ERR_clear_error();
    log_error("%s\tfile=\"%s\" detail=\"%s\"", what, file ? file : "", msg);
}

static bool file_id_of(const char *path, struct file_id *ret)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return false;
    *ret = (struct file_id){st.st_dev, st.st_ino, st.st_size, st.st_mtim};
    return true;
}

static bool file_id_same(const struct file_id *a, const struct file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* c is valid now (notBefore <= now <= notAfter). */
static bool cert_current(const X509 *c)
{
    return X509_cmp_current_time(X509_get0_notBefore(c)) < 0 &&
           X509_cmp_current_time(X509_get0_notAfter(c)) > 0;
}

/* SSL_CTX_set_session_ticket_cb's decrypt callback on contexts that verify clients: a
 * ticket whose session's client certificate is no longer valid (expired since) is not
 * resumed; the client gets a full handshake, which verifies the certificate again.
 * Otherwise what OpenSSL does without a callback. */
static SSL_TICKET_RETURN ticket_dec(SSL *ssl, SSL_SESSION *ss, const unsigned char *keyname,
                                    size_t keyname_len, SSL_TICKET_STATUS status, void *arg)
{
    (void)ssl, (void)keyname, (void)keyname_len, (void)arg;
    switch (status) {
    case SSL_TICKET_SUCCESS:
    case SSL_TICKET_SUCCESS_RENEW: {
        const X509 *peer = SSL_SESSION_get0_peer(ss);
        if (peer && !cert_current(peer))
            return SSL_TICKET_RETURN_IGNORE_RENEW;
        return status == SSL_TICKET_SUCCESS ? SSL_TICKET_RETURN_USE : SSL_TICKET_RETURN_USE_RENEW;
    }
    case SSL_TICKET_EMPTY:
    case SSL_TICKET_NO_DECRYPT:
        return SSL_TICKET_RETURN_IGNORE_RENEW;
    default:
        return SSL_TICKET_RETURN_ABORT;
    }
}

static int setup_client_ca(SSL_CTX *ctx, const struct tls_front_opts *o)
{
    if (o->mtls == TLS_MTLS_OFF)
        return 0;
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(o->client_ca);
    if (!names || SSL_CTX_load_verify_locations(ctx, o->client_ca, NULL) != 1) {
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        log_ssl_error("cannot load the client CA", o->client_ca);
        return -EINVAL;
    }
    SSL_CTX_set_client_CA_list(ctx, names);
    SSL_CTX_set_verify(
        ctx, SSL_VERIFY_PEER | (o->mtls == TLS_MTLS_REQUIRED ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
        NULL);
    if (SSL_CTX_set_session_ticket_cb(ctx, NULL, ticket_dec, NULL) != 1)
        return -EINVAL;
    return 0;
}

/* Builds a server context from the files. Returns it, or NULL (logged). */
static SSL_CTX *ctx_load(const struct tls_front_opts *o)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        return NULL;
    (void)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    (void)SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    /* A TCP end without close_notify must stay an error (client_ended), not read as one
     * (whatever a system openssl.cnf sets). */
    (void)SSL_CTX_clear_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
    (void)SSL_CTX_set_mode(ctx,
                           SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* Without a session ID context, OpenSSL fails the handshake of a client that resumes
     * a session on a context that verifies peers (mTLS) instead of starting afresh. */
    static const unsigned char sid[] = "agent-sandbox-tls-front";
    (void)SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
    if (SSL_CTX_use_certificate_chain_file(ctx, o->cert_file) != 1) {
        log_ssl_error("cannot load the TLS certificate", o->cert_file);
    } else if (SSL_CTX_use_PrivateKey_file(ctx, o->key_file, SSL_FILETYPE_PEM) != 1 ||
               SSL_CTX_check_private_key(ctx) != 1) {
        log_ssl_error("cannot load the TLS key (or it does not match the certificate)",
                      o->key_file);
    } else if (setup_client_ca(ctx, o) >= 0) {
        return ctx;
    }
    SSL_CTX_free(ctx);
    return NULL;
}

/* The client CA file's identity, when the front verifies clients (else zero). */
static bool ca_id_of(const struct tls_front_opts *o, struct file_id *ret)
{
    *ret = (struct file_id){0};
    return o->mtls == TLS_MTLS_OFF || !o->client_ca || file_id_of(o->client_ca, ret);
}

/* Acceptor thread: reloads the pair and the client CA when any of the files changed. */
static void maybe_reload(struct tls_front *t)
{
    struct file_id c, k, ca;
    SSL_CTX *ctx;
    if (!file_id_of(t->o.cert_file, &c) || !file_id_of(t->o.key_file, &k) ||
        !ca_id_of(&t->o, &ca) ||
        (file_id_same(&c, &t->cert_id) && file_id_same(&k, &t->key_id) &&
         file_id_same(&ca, &t->ca_id)))
        return;
    t->cert_id = c;
    t->key_id = k;
    t->ca_id = ca;
    ctx = ctx_load(&t->o);
    if (!ctx) {
        log_warn("TLS files changed but do not load; keeping the previous ones");
        return;
    }
    SSL_CTX_free(t->ctx);
    t->ctx = ctx;
    log_info("TLS certificate reloaded\tfile=\"%s\" client_ca=\"%s\"", t->o.cert_file,
             t->o.mtls != TLS_MTLS_OFF && t->o.client_ca ? t->o.client_ca : "");
}

/* ---- bridging -------------------------------------------------------------------- */

struct adopt_item {
    struct http_server *server;
    int fd;
    char peer[INET6_ADDRSTRLEN];
    char *ident; /* owned; NULL: none */
    size_t ident_len;
    struct http_cut *cut; /* a reference */
};

static void adopt_on_loop(void *arg)
{
    struct adopt_item *a = arg;
    struct http_adopt_opts o = {
        .peer = a->peer, .secure = true, .info = str_make(a->ident, a->ident_len), .cut = a->cut};
    int r = http_server_adopt(a->server, a->fd, &o);
    if (r < 0)
        log_debug_errno(r, "TLS connection not served\tclient_ip=%s", a->peer);
    http_cut_unref(a->cut);
    xfree(a->ident);
    xfree(a);
}

static void set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Why SSL_read ended the client's input with error e (not SSL_ERROR_ZERO_RETURN), for
 * the log; err: errno after the call. */
static const char *cut_reason(int e, int err)
{
    if (e == SSL_ERROR_SYSCALL)
        return err ? "reset or socket error" : "EOF without close_notify"; /* OpenSSL 1.1 */
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
    if (e == SSL_ERROR_SSL &&
        ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
        return "EOF without close_notify"; /* OpenSSL 3 */
#endif
    return "TLS error";
}

/* The client's input ended, SSL_read's error e (errno err). Its close_notify
 * (SSL_ERROR_ZERO_RETURN) ends it cleanly: passed on as a half-close. Anything else cuts
 * it off: a TCP FIN without close_notify (OpenSSL 3: SSL_ERROR_SSL with
 * SSL_R_UNEXPECTED_EOF_WHILE_READING; 1.1: SSL_ERROR_SYSCALL, errno 0), which anyone on
 * the path can forge, a reset, or a TLS error. The socketpair's EOF cannot tell the two
 * apart, so a cut is marked on the connection's http_cut before that EOF: the server and
 * proxy then abort the request or tunnel (the sandbox's connection is reset) instead of
 * taking the EOF for the end of a body or of a stream. */
static void client_ended(struct bridge *b, int e, int err)
{
    b->client_eof = true;
    if (e != SSL_ERROR_ZERO_RETURN) {
        b->client_cut = true;
        http_cut_mark(b->cut);
        log_debug("TLS client input cut off\tclient_ip=%s reason=\"%s\"", b->peer,
                  cut_reason(e, err));
        ERR_clear_error(); /* SSL_get_error of later calls reads this thread's queue */
    }
    (void)shutdown(b->pair, SHUT_WR);
}

/* Client -> server: decrypts into in[], writes it to the pair. Sets the poll events
 * this direction waits for. Returns true when it moved bytes. */
static bool pump_in(struct bridge *b, short *tcp_ev, short *pair_ev)
{
    bool moved = false;
    if (b->in_len == 0 && !b->client_eof) {
        errno = 0;
        int n = SSL_read(b->ssl, b->in, sizeof(b->in)), err = errno;
        if (n > 0) {
            b->in_len = (size_t)n, b->in_off = 0, moved = true;
        } else {
            int e = SSL_get_error(b->ssl, n);
            if (e == SSL_ERROR_WANT_READ)
                *tcp_ev |= POLLIN;
            else if (e == SSL_ERROR_WANT_WRITE)
                *tcp_ev |= POLLOUT;
            else
                client_ended(b, e, err);
        }
    }
    if (b->in_len > b->in_off) {
        ssize_t w = write(b->pair, b->in + b->in_off, b->in_len - b->in_off);
        if (w > 0) {
            b->in_off += (size_t)w, moved = true;
            if (b->in_off == b->in_len)
                b->in_len = b->in_off = 0;
        } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            *pair_ev |= POLLOUT;
        } else {
            b->failed = true;
        }
    }
    return moved;
}

/* Server -> client: reads the pair into out[], encrypts it. */
static bool pump_out(struct bridge *b, short *tcp_ev, short *pair_ev)
{
    bool moved = false;
    if (b->out_len == 0 && !b->server_eof) {
        ssize_t n = read(b->pair, b->out, sizeof(b->out));
        if (n > 0) {
            b->out_len = (size_t)n, b->out_off = 0, moved = true;
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            *pair_ev |= POLLIN;
        } else {
            b->server_eof = true; /* the proxy closed the connection */
        }
    }
    if (b->out_len > b->out_off) {
        int n = SSL_write(b->ssl, b->out + b->out_off, (int)(b->out_len - b->out_off));
        if (n > 0) {
            b->out_off += (size_t)n, moved = true;
            b->sent += (uint64_t)n;
            if (b->out_off == b->out_len)
                b->out_len = b->out_off = 0;
        } else {
            int e = SSL_get_error(b->ssl, n);
            if (e == SSL_ERROR_WANT_READ)
                *tcp_ev |= POLLIN;
            else if (e == SSL_ERROR_WANT_WRITE)
                *tcp_ev |= POLLOUT;
            else
                b->failed = true;
        }
    }
    return moved;
}

static int ms_until(usec_t end, usec_t now)
{
    return end > now ? (int)((end - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC) : 0;
}

/* Whether bytes for the client have waited LIMIT_TLS_WRITE_STALL without one of them
 * being taken (a client that does not read: its bridge would otherwise hold a thread and
 * a connection place for ever). *stall_from: when the wait began (0: none); *last: the
 * bytes sent when last looked at. */
static bool write_stalled(struct bridge *b, usec_t now, usec_t *stall_from, uint64_t *last)
{
    if (b->out_len == 0 || b->sent != *last) {
        *stall_from = 0;
        *last = b->sent;
        return false;
    }
    if (!*stall_from)
        *stall_from = now;
    return now - *stall_from >= LIMIT_TLS_WRITE_STALL;
}

/* After the server's end: our close_notify and FIN go out, then what the client still
 * sends is read and dropped until it ends its side, or for LIMIT_HTTP_LINGER at most (a
 * bound a client cannot stretch). Closing with its bytes unread would send a reset,
 * which discards the end of the answer still queued for it: an error answered before an
 * upload was read (401, 413, 503) reached an HTTPS client cut off, or not at all. */
static void bridge_linger(struct bridge *b)
{
    usec_t end = clock_now() + LIMIT_HTTP_LINGER;
    char drop[4096];
    (void)SSL_shutdown(b->ssl); /* best effort close_notify */
    (void)shutdown(b->tcp, SHUT_WR);
    for (;;) {
        ssize_t n = read(b->tcp, drop, sizeof(drop));
        usec_t now = clock_now();
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) || now >= end)
            return;
        struct pollfd p = {b->tcp, POLLIN, 0};
        if (n < 0 && poll(&p, 1, ms_until(end, now)) < 0 && errno != EINTR)
            return;
    }
}

static void bridge_run(struct bridge *b)
{
    usec_t stall_from = 0;
    uint64_t last = 0;
    set_nonblock(b->tcp);
    set_nonblock(b->pair);
    while (!b->failed && !(b->server_eof && b->out_len == 0)) {
        short tcp_ev = 0, pair_ev = 0;
        bool moved = pump_in(b, &tcp_ev, &pair_ev) | pump_out(b, &tcp_ev, &pair_ev);
        usec_t now = clock_now();
        if (write_stalled(b, now, &stall_from, &last)) {
            log_debug("TLS client does not read, closing\tclient_ip=%s", b->peer);
            b->failed = true;
            break;
        }
        if (moved)
            continue;
        if (b->failed || (b->server_eof && b->out_len == 0))
            break;
        /* A side nothing waits on is left out: its POLLHUP/POLLERR (a reset client
         * while the proxy still works, a closed proxy end while a slow client drains)
         * would otherwise wake the loop for ever without progress. */
        struct pollfd p[2] = {{tcp_ev ? b->tcp : -1, tcp_ev, 0},
                              {pair_ev ? b->pair : -1, pair_ev, 0}};
        if (!tcp_ev && !pair_ev)
            break; /* both directions ended */
        if (poll(p, 2, stall_from ? ms_until(stall_from + LIMIT_TLS_WRITE_STALL, now) : -1) < 0 &&
            errno != EINTR)
            break;
    }
    /* The bridge gives up on a client whose input has not ended (a failed write, a
     * client that does not read): what the server reads next is no clean end either.
     * After the server's end its reads are over (the linger below drains the client). */
    if (!b->client_eof && (b->failed || !b->server_eof))
        http_cut_mark(b->cut);
    /* No close_notify after a cut: OpenSSL's connection failed (SSL_shutdown is not to
     * be called then), and the server may have aborted its answer, whose end a
     * close_notify would vouch for. */
    if (b->failed || b->client_cut)
        return;
    if (b->server_eof && !b->client_eof)
        bridge_linger(b);
    else
        (void)SSL_shutdown(b->ssl); /* best effort close_notify */
}

/* The handshake, non-blocking, within LIMIT_TLS_HANDSHAKE_S in all (a client that
 * trickles its ClientHello a byte at a time does not stretch it). */
static bool handshake(struct bridge *b)
{
    usec_t end = clock_now() + (usec_t)LIMIT_TLS_HANDSHAKE_S * USEC_PER_SEC;
    const char *why = NULL;
    set_nonblock(b->tcp);
    if (SSL_set_fd(b->ssl, b->tcp) != 1)
        why = "cannot attach the socket";
    while (!why) {
        int r = SSL_accept(b->ssl), e;
        usec_t now = clock_now();
        struct pollfd p = {b->tcp, 0, 0};
        if (r == 1)
            return true;
        e = SSL_get_error(b->ssl, r);
        p.events = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
        if (!p.events) {
            why = "refused";
        } else if (now >= end) {
            why = "timed out";
        } else {
            int n = poll(&p, 1, ms_until(end, now));
            if (n < 0 && errno != EINTR)
                why = "poll failed";
            else if (n == 0 && clock_now() >= end)
                why = "timed out";
        }
    }
    char msg[256];
    ERR_error_string_n(ERR_get_error(), msg, sizeof(msg));
    ERR_clear_error();
    log_debug("TLS handshake failed\tclient_ip=%s reason=%s detail=\"%s\"", b->peer, why, msg);
    return false;
}

static const char *identity_error(int r)
{
    switch (r) {
    case -ENOENT:
        return "no common name";
    case -E2BIG:
        return "a name or the number of organizations is over the limit";
    default:
        return "more than one common name, or an empty, non-UTF-8 or control character value";
    }
}

/* With client_identity: the verified client certificate's identity into b->ident. */
static void peer_identity(struct bridge *b)
{
    char enc[TLS_IDENTITY_MAX];
    X509 *cert = SSL_get0_peer_certificate(b->ssl);
    if (!cert || SSL_get_verify_result(b->ssl) != X509_V_OK)
        return;
    int n = tls_identity_from_subject(X509_get_subject_name(cert), enc, sizeof(enc));
    if (n < 0) {
        log_warn("client certificate gives no identity, serving the connection without "
                 "one\tclient_ip=%s reason=\"%s\"",
                 b->peer, identity_error(n));
        return;
    }
    b->ident = xmalloc((size_t)n);
    memcpy(b->ident, enc, (size_t)n);
    b->ident_len = (size_t)n;
}

/* Hands the other end of a new socketpair to the proxy server. */
static bool connect_server(struct bridge *b)
{
    int sp[2];
    struct adopt_item *a;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
        return false;
    a = XNEW(struct adopt_item);
    a->server = b->server;
    a->fd = sp[1];
    (void)str_copy(a->peer, sizeof(a->peer), b->peer);
    a->ident = b->ident;
    a->ident_len = b->ident_len;
    b->cut = http_cut_new();
    a->cut = http_cut_ref(b->cut);
    if (http_server_post(b->server, adopt_on_loop, a) < 0) {
        http_cut_unref(a->cut);
        xfree(a); /* b still owns ident */
        (void)close(sp[0]);
        (void)close(sp[1]);
        return false;
    }
    b->ident = NULL; /* the adopt item's now */
    b->pair = sp[0];
    return true;
}

/* A resumed session (a TLS 1.2 session ID the ticket callback did not see) whose client
 * certificate is no longer valid: its connection is refused, as a full handshake would
 * refuse that certificate. */
static bool resumed_expired(const struct bridge *b)
{
    const X509 *cert = SSL_get0_peer_certificate(b->ssl);
    if (!SSL_session_reused(b->ssl) || !cert || cert_current(cert))
        return false;
    log_debug("resumed TLS session of an expired client certificate refused\tclient_ip=%s",
              b->peer);
    return true;
}

static void *bridge_thread(void *arg)
{
    struct bridge *b = arg;
    bool ok = handshake(b) && !resumed_expired(b) && !atomic_load(&b->front->stopping);
    if (ok && b->front->o.client_identity)
        peer_identity(b);
    ok = ok && connect_server(b);
    atomic_fetch_sub(&b->front->connecting, 1); /* b->front may be gone from here on */
    if (ok)
        bridge_run(b);
    SSL_free(b->ssl);
    (void)close(b->tcp);
    if (b->pair >= 0)
        (void)close(b->pair);
    xfree(b->ident);
    http_cut_unref(b->cut);
    atomic_fetch_sub(&b->budget->live, 1);
    budget_unref(b->budget);
    xfree(b);
    return NULL;
}

static void peer_name(int fd, char *out, size_t size)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    out[0] = '\0';
    if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
        return;
    if (ss.ss_family == AF_INET)
        (void)inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, (socklen_t)size);
    else if (ss.ss_family == AF_INET6)
        (void)inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, out, (socklen_t)size);
}

static void spawn_bridge(struct tls_front *t, int fd)
{
    pthread_attr_t attr;
    pthread_t th;
    struct bridge *b;
    SSL *ssl;
    if (atomic_fetch_add(&t->budget->live, 1) >= t->budget->max || !(ssl = SSL_new(t->ctx))) {
        atomic_fetch_sub(&t->budget->live, 1);
        (void)close(fd);
        return;
    }
    b = XNEW(struct bridge);
    b->budget = budget_ref(t->budget);
    b->ssl = ssl;
    b->tcp = fd;
    b->pair = -1;
    b->server = t->server;
    b->front = t;
    atomic_fetch_add(&t->connecting, 1);
    peer_name(fd, b->peer, sizeof(b->peer));
    (void)pthread_attr_init(&attr);
    (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    (void)pthread_attr_setstacksize(&attr, 256 * 1024);
    if (pthread_create(&th, &attr, bridge_thread, b) != 0) {
        atomic_fetch_sub(&t->connecting, 1);
        SSL_free(ssl);
        (void)close(fd);
        xfree(b);
        atomic_fetch_sub(&t->budget->live, 1);
        budget_unref(t->budget);
    }
    (void)pthread_attr_destroy(&attr);
}

/* ms the acceptor waits after running out of descriptors (EMFILE, ENFILE, ENOBUFS,
 * ENOMEM): the pending connection keeps the listener readable, so trying again at once
 * would spin a core until a descriptor is free. */
#define ACCEPT_BACKOFF_MS 100

static void *acceptor(void *arg)
{
    struct tls_front *t = arg;
    int wait_ms = -1;
    for (;;) {
        struct pollfd p[2] = {{wait_ms < 0 ? t->fd : -1, POLLIN, 0}, {t->stop_pipe[0], POLLIN, 0}};
        if (poll(p, 2, wait_ms) < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (wait_ms >= 0) { /* the back-off is over: listen again */
            wait_ms = -1;
            continue;
        }
        if (!(p[0].revents & POLLIN))
            continue;
        int fd = accept4(t->fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM))
            wait_ms = ACCEPT_BACKOFF_MS;
        if (fd < 0)
            continue; /* EAGAIN, ECONNABORTED: try again at the next event */
        maybe_reload(t);
        spawn_bridge(t, fd);
    }
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------------- */

static int listen_on(const char *host, uint16_t port, uint16_t *ret_port)
{
    struct sockaddr_storage ss = {0};
    socklen_t len;
    int fd, one = 1, r;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET, v4->sin_port = htons(port), len = sizeof(*v4);
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6, v6->sin6_port = htons(port), len = sizeof(*v6);
    } else {
        return -EINVAL;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 511) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
        r = -errno;
        (void)close(fd);
        return r;
    }
    *ret_port = ntohs(ss.ss_family == AF_INET ? v4->sin_port : v6->sin6_port);
    return fd;
}

static void front_free(struct tls_front *t)
{
    SSL_CTX_free(t->ctx);
    for (int i = 0; i < 2; i++)
        if (t->stop_pipe[i] >= 0)
            (void)close(t->stop_pipe[i]);
    if (t->fd >= 0)
        (void)close(t->fd);
    xfree((char *)t->o.host);
    xfree((char *)t->o.cert_file);
    xfree((char *)t->o.key_file);
    xfree((char *)t->o.client_ca);
    budget_unref(t->budget);
    xfree(t);
}

int tls_front_start(const struct tls_front_opts *opts, struct http_server *server,
                    struct tls_front **ret)
{
    struct tls_front *t;
    int r;
    if (!opts->cert_file || !opts->key_file || (opts->mtls != TLS_MTLS_OFF && !opts->client_ca))
        return -EINVAL;
    t = XNEW(struct tls_front);
    t->o = *opts;
    t->o.host = xstrdup(opts->host ? opts->host : "0.0.0.0");
    t->o.cert_file = xstrdup(opts->cert_file);
    t->o.key_file = xstrdup(opts->key_file);
    t->o.client_ca = opts->client_ca ? xstrdup(opts->client_ca) : NULL;
    t->server = server;
    t->budget = XNEW(struct tls_budget);
    atomic_init(&t->budget->refs, 1);
    t->budget->max = opts->max_conns ? (int)opts->max_conns : LIMIT_TLS_CONNECTIONS;
    t->fd = t->stop_pipe[0] = t->stop_pipe[1] = -1;
    (void)file_id_of(t->o.cert_file, &t->cert_id);
    (void)file_id_of(t->o.key_file, &t->key_id);
    (void)ca_id_of(&t->o, &t->ca_id);
    t->ctx = ctx_load(&t->o);
    r = t->ctx ? listen_on(t->o.host, opts->port, &t->port) : -EINVAL;
    if (r >= 0) {
        t->fd = r;
        r = pipe2(t->stop_pipe, O_CLOEXEC) < 0 ? -errno : 0;
    }
    if (r >= 0)
        r = -pthread_create(&t->thread, NULL, acceptor, t);
    if (r < 0) {
        front_free(t);
        return r;
    }
    *ret = t;
    return 0;
}

uint16_t tls_front_port(const struct tls_front *t)
{
    return t->port;
}

void tls_front_stop(struct tls_front *t)
{
    if (!t)
        return;
    atomic_store(&t->stopping, true);
    while (write(t->stop_pipe[1], "x", 1) < 0 && errno == EINTR)
        ;
    (void)pthread_join(t->thread, NULL);
    /* Handshakes in progress end within LIMIT_TLS_HANDSHAKE_S; none posts after. */
    while (atomic_load(&t->connecting) > 0)
        (void)usleep(10 * 1000);
    front_free(t);
}
