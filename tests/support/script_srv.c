/* SPDX-License-Identifier: Apache-2.0 */
#include "support/script_srv.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/xalloc.h"
#include "kube/config.h"

#define READ_LIMIT (16u * 1024 * 1024) /* one connection's unanswered bytes */

struct script_srv {
    int lfd, port, wake[2];
    pthread_t th;
    pthread_mutex_t lock;
    script_handler *h; /* guarded by lock */
    void *ctx;
    bool locked;
    int accepted;
};

void script_send(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n <= 0)
            return;
        p += n;
        len -= (size_t)n;
    }
}

void script_respond(int fd, long status, const char *extra, const char *body)
{
    char head[1024];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %ld X\r\nContent-Type: application/json\r\nContent-Length: "
                     "%zu\r\n%s\r\n",
                     status, strlen(body), extra ? extra : "");
    assert_true(n > 0 && (size_t)n < sizeof(head));
    script_send(fd, head, (size_t)n);
    script_send(fd, body, strlen(body));
}

static const char *reason_of(long code)
{
    switch (code) {
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "NotFound";
    case 409:
        return "Conflict";
    case 422:
        return "Invalid";
    case 429:
        return "TooManyRequests";
    default:
        return "InternalError";
    }
}

char *script_failure(long code, const char *reason)
{
    json_t *st = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "kind", "Status", "apiVersion", "v1",
                           "status", "Failure", "reason", reason ? reason : reason_of(code),
                           "message", "scripted refusal", "code", (json_int_t)code);
    char *text = json_dumps(st, JSON_COMPACT);
    json_decref(st);
    return text;
}

void script_header(const char *head, const char *name, char *out, size_t size)
{
    const char *end = strstr(head, "\r\n\r\n");
    const char *p = strcasestr(head, name);
    out[0] = '\0';
    if (!p || (end && p > end))
        return;
    p += strlen(name);
    (void)snprintf(out, size, "%.*s", (int)strcspn(p, "\r\n"), p);
}

/* One complete request at the start of b handed to the handler. Returns the bytes it
 * took (0: not complete yet), with *close set when the handler closes the connection. */
static size_t serve_one(struct script_srv *s, int fd, struct buf *b, bool *close)
{
    const char *end = b->data ? strstr(b->data, "\r\n\r\n") : NULL;
    struct script_req rq = {0};
    char cl[32];
    size_t head_len, body_len;
    if (!end)
        return 0;
    head_len = (size_t)(end - b->data) + 4;
    script_header(b->data, "\r\nContent-Length: ", cl, sizeof(cl));
    body_len = cl[0] ? strtoul(cl, NULL, 10) : 0;
    if (b->len < head_len + body_len)
        return 0;
    if (sscanf(b->data, "%15s %2047s", rq.method, rq.target) != 2) {
        *close = true;
        return head_len + body_len;
    }
    char *head = xstrndup(b->data, head_len), *body = xstrndup(b->data + head_len, body_len);
    rq.head = head;
    rq.body = body;
    rq.body_len = body_len;
    pthread_mutex_lock(&s->lock);
    script_handler *h = s->h;
    void *ctx = s->ctx;
    if (!s->locked)
        pthread_mutex_unlock(&s->lock);
    *close = h(fd, &rq, ctx) != 0;
    if (s->locked)
        pthread_mutex_unlock(&s->lock);
    xfree(head);
    xfree(body);
    return head_len + body_len;
}

/* Reads what arrived on a connection and answers its complete requests. Returns false
 * when the connection is to be closed. */
static bool serve_conn(struct script_srv *s, int fd, struct buf *b)
{
    char chunk[4096];
    bool close = false;
    size_t used;
    ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0 || buf_append(b, chunk, (size_t)n) < 0)
        return false;
    while (!close && (used = serve_one(s, fd, b, &close)) > 0)
        buf_consume(b, used);
    return !close;
}

static void accept_one(struct script_srv *s, struct pollfd *p, struct buf *bufs, int *n)
{
    int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    pthread_mutex_lock(&s->lock);
    s->accepted++;
    pthread_mutex_unlock(&s->lock);
    p[*n] = (struct pollfd){.fd = fd, .events = POLLIN};
    buf_init(&bufs[(*n)++], READ_LIMIT);
}

static void *srv_main(void *arg)
{
    struct script_srv *s = arg;
    struct pollfd p[SCRIPT_SRV_CONNS + 2];
    struct buf bufs[SCRIPT_SRV_CONNS + 2];
    int n = 2;
    p[0] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
    p[1] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
    for (;;) {
        p[0].events = n < SCRIPT_SRV_CONNS + 2 ? POLLIN : 0; /* full: leave them queued */
        if (poll(p, (nfds_t)n, -1) < 0)
            continue;
        if (p[1].revents)
            break;
        if (p[0].revents & POLLIN)
            accept_one(s, p, bufs, &n);
        for (int i = 2; i < n; i++) {
            if (!p[i].revents || serve_conn(s, p[i].fd, &bufs[i]))
                continue;
            (void)close(p[i].fd);
            buf_done(&bufs[i]);
            p[i] = p[n - 1];
            bufs[i] = bufs[n - 1];
            n--;
            i--;
        }
    }
    for (int i = 2; i < n; i++) {
        (void)close(p[i].fd);
        buf_done(&bufs[i]);
    }
    return NULL;
}

struct script_srv *script_srv_start(script_handler *h, void *ctx, bool locked)
{
    struct script_srv *s = XNEW(struct script_srv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    pthread_mutex_init(&s->lock, NULL);
    s->h = h;
    s->ctx = ctx;
    s->locked = locked;
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s->lfd >= 0);
    assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(s->lfd, 16), 0);
    assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &alen), 0);
    s->port = ntohs(a.sin_port);
    assert_int_equal(pipe(s->wake), 0);
    assert_int_equal(pthread_create(&s->th, NULL, srv_main, s), 0);
    return s;
}

void script_srv_stop(struct script_srv *s)
{
    if (!s)
        return;
    assert_int_equal(write(s->wake[1], "x", 1), 1);
    assert_int_equal(pthread_join(s->th, NULL), 0);
    (void)close(s->lfd);
    (void)close(s->wake[0]);
    (void)close(s->wake[1]);
    pthread_mutex_destroy(&s->lock);
    xfree(s);
}

int script_srv_port(const struct script_srv *s)
{
    return s->port;
}

void script_srv_set_handler(struct script_srv *s, script_handler *h, void *ctx)
{
    pthread_mutex_lock(&s->lock);
    s->h = h;
    s->ctx = ctx;
    pthread_mutex_unlock(&s->lock);
}

void script_srv_lock(struct script_srv *s)
{
    pthread_mutex_lock(&s->lock);
}

void script_srv_unlock(struct script_srv *s)
{
    pthread_mutex_unlock(&s->lock);
}

int script_srv_accepted(struct script_srv *s)
{
    pthread_mutex_lock(&s->lock);
    int n = s->accepted;
    pthread_mutex_unlock(&s->lock);
    return n;
}

void script_srv_reset_accepted(struct script_srv *s)
{
    pthread_mutex_lock(&s->lock);
    s->accepted = 0;
    pthread_mutex_unlock(&s->lock);
}

struct kube_client *script_client(const struct script_srv *s, const char *dir, const char *ns,
                                  const char *user, const struct kube_client_opts *o)
{
    char kc[512], text[2048];
    struct kube_config *cfg = NULL;
    struct kube_client *c = NULL;
    struct kube_err e;
    FILE *f;
    assert_true(snprintf(kc, sizeof(kc), "%s/kubeconfig", dir) < (int)sizeof(kc));
    assert_true(snprintf(text, sizeof(text),
                         "current-context: t\nclusters:\n- name: k\n  cluster: {server: "
                         "'http://127.0.0.1:%d'}\ncontexts:\n- name: t\n  context: {cluster: "
                         "k, user: u, namespace: %s}\nusers:\n- name: u\n  user: %s\n",
                         s->port, ns, user) < (int)sizeof(text));
    f = fopen(kc, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(kube_config_load(&(struct kube_config_opts){.kubeconfig = kc}, &cfg, &e), 0);
    assert_int_equal(kube_client_new(cfg, o, &c), 0);
    return c;
}

void script_env_start(struct script_env *env, script_handler *h, void *ctx, bool locked,
                      const char *ns, const struct kube_client_opts *o)
{
    struct kube_client_opts dflt = {.max_retries = 0, .timeout = 5 * USEC_PER_SEC};
    memset(env, 0, sizeof(*env));
    (void)snprintf(env->dir, sizeof(env->dir), "/tmp/as-test-srv-XXXXXX");
    assert_non_null(mkdtemp(env->dir));
    env->srv = script_srv_start(h, ctx, locked);
    env->client = script_client(env->srv, env->dir, ns, "{token: t}", o ? o : &dflt);
}

void script_env_stop(struct script_env *env)
{
    char path[128];
    kube_client_free(env->client);
    script_srv_stop(env->srv);
    (void)snprintf(path, sizeof(path), "%s/kubeconfig", env->dir);
    (void)unlink(path);
    (void)rmdir(env->dir);
    memset(env, 0, sizeof(*env));
}
