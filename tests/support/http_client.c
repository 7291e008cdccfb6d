/* SPDX-License-Identifier: Apache-2.0 */
/* Blocking test HTTP client: poll(2) with a deadline around read/write. */
#include "support/http_client.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "common/str.h"
#include "common/xalloc.h"

#define LIMIT_TEST_RESPONSE (64u * 1024 * 1024)

int test_http_free_port(uint16_t *ret)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int r = 0, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0)
        r = -errno;
    (void)close(fd);
    if (r < 0)
        return r;
    *ret = ntohs(a.sin_port);
    return 0;
}

int test_http_connect(uint16_t port, struct test_http_conn *ret)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
        int r = -errno;
        (void)close(fd);
        return r;
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ret->fd = fd;
    buf_init(&ret->in, LIMIT_TEST_RESPONSE);
    return 0;
}

void test_http_close(struct test_http_conn *c)
{
    if (c->fd >= 0)
        (void)close(c->fd);
    c->fd = -1;
    buf_done(&c->in);
}

int test_http_send(struct test_http_conn *c, const void *p, size_t n)
{
    const char *q = p;
    while (n > 0) {
        ssize_t w = send(c->fd, q, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        q += w;
        n -= (size_t)w;
    }
    return 0;
}

int test_http_send_str(struct test_http_conn *c, const char *s)
{
    return test_http_send(c, s, strlen(s));
}

/* Reads more bytes into c->in before the deadline. 0 on data, -ECONNRESET on EOF or
 * reset, -ETIMEDOUT. */
static int fill(struct test_http_conn *c, usec_t deadline)
{
    usec_t now = clock_now();
    if (now >= deadline)
        return -ETIMEDOUT;
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    int n = poll(&pfd, 1, (int)((deadline - now + 999) / 1000));
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    if (n == 0)
        return -ETIMEDOUT;
    char tmp[16384];
    ssize_t r = recv(c->fd, tmp, sizeof(tmp), 0);
    if (r < 0 && errno == EINTR)
        return 0;
    if (r <= 0)
        return -ECONNRESET;
    return buf_append(&c->in, tmp, (size_t)r);
}

/* Index just past the next CRLF at or after from, or 0 when there is none yet. */
static size_t line_end(const struct buf *b, size_t from)
{
    for (size_t i = from; i + 1 < b->len; i++)
        if (b->data[i] == '\r' && b->data[i + 1] == '\n')
            return i + 2;
    return 0;
}

static int read_head(struct test_http_conn *c, usec_t deadline, struct test_http_resp *r)
{
    for (;;) {
        const char *end = c->in.len ? memmem(c->in.data, c->in.len, "\r\n\r\n", 4) : NULL;
        if (end) {
            size_t n = (size_t)(end - c->in.data) + 4;
            int ret = buf_append(&r->head, c->in.data, n);
            buf_consume(&c->in, n);
            return ret;
        }
        int ret = fill(c, deadline);
        if (ret < 0)
            return ret;
    }
}

char *test_http_header(const struct test_http_resp *r, const char *name)
{
    size_t nlen = strlen(name), pos = line_end(&r->head, 0);
    while (pos && pos < r->head.len) {
        size_t next = line_end(&r->head, pos);
        if (!next)
            break;
        const char *l = r->head.data + pos;
        if (next - pos > nlen + 1 && strncasecmp(l, name, nlen) == 0 && l[nlen] == ':')
            return str_dup(str_trim(str_make(l + nlen + 1, next - pos - nlen - 1)));
        pos = next;
    }
    return NULL;
}

static int read_exact(struct test_http_conn *c, size_t n, usec_t deadline, struct buf *out)
{
    while (c->in.len < n) {
        int r = fill(c, deadline);
        if (r < 0)
            return r;
    }
    int r = buf_append(out, c->in.data, n);
    buf_consume(&c->in, n);
    return r;
}

static int read_line(struct test_http_conn *c, usec_t deadline, struct buf *line)
{
    size_t e;
    while ((e = line_end(&c->in, 0)) == 0) {
        int r = fill(c, deadline);
        if (r < 0)
            return r;
    }
    buf_reset(line);
    int r = buf_append(line, c->in.data, e - 2);
    buf_consume(&c->in, e);
    return r;
}

static int read_chunked(struct test_http_conn *c, usec_t deadline, struct test_http_resp *r)
{
    struct buf line;
    buf_init(&line, 4096);
    int ret;
    for (;;) {
        uint64_t size;
        ret = read_line(c, deadline, &line);
        if (ret < 0)
            break;
        struct str sz, ext;
        str_cut(str_make(line.data, line.len), ';', &sz, &ext);
        ret = str_hex_to_u64(sz, &size) < 0 ? -EPROTO : 0;
        if (ret < 0 || size == 0)
            break;
        r->chunks++;
        ret = read_exact(c, size, deadline, &r->body);
        if (ret >= 0)
            ret = read_line(c, deadline, &line);
        if (ret >= 0 && line.len != 0)
            ret = -EPROTO;
        if (ret < 0)
            break;
    }
    while (ret >= 0 && (ret = read_line(c, deadline, &line)) >= 0 && line.len > 0)
        ; /* trailers */
    buf_done(&line);
    return ret;
}

static int read_until_close(struct test_http_conn *c, usec_t deadline, struct buf *out)
{
    int r;
    while ((r = fill(c, deadline)) >= 0)
        ;
    if (r != -ECONNRESET)
        return r;
    int ret = buf_append(out, c->in.data ? c->in.data : "", c->in.len);
    buf_reset(&c->in);
    return ret;
}

static int read_body(struct test_http_conn *c, bool head_request, usec_t deadline,
                     struct test_http_resp *r)
{
    char *te = test_http_header(r, "transfer-encoding");
    char *cl = test_http_header(r, "content-length");
    int ret = 0;
    uint64_t n = 0;
    r->chunked = te && strcasecmp(te, "chunked") == 0;
    if (head_request || r->status < 200 || r->status == 204 || r->status == 304)
        ret = 0;
    else if (r->chunked)
        ret = read_chunked(c, deadline, r);
    else if (cl)
        ret = cstr_to_u64(cl, &n) < 0 ? -EPROTO : read_exact(c, (size_t)n, deadline, &r->body);
    else
        ret = read_until_close(c, deadline, &r->body);
    xfree(te);
    xfree(cl);
    return ret;
}

void test_http_resp_init(struct test_http_resp *r)
{
    *r = (struct test_http_resp){0};
    buf_init(&r->head, 1024 * 1024);
    buf_init(&r->body, LIMIT_TEST_RESPONSE);
}

void test_http_resp_done(struct test_http_resp *r)
{
    buf_done(&r->head);
    buf_done(&r->body);
}

int test_http_read(struct test_http_conn *c, bool head_request, usec_t timeout,
                   struct test_http_resp *ret)
{
    usec_t deadline = clock_now() + timeout;
    test_http_resp_done(ret);
    test_http_resp_init(ret);
    int r = read_head(c, deadline, ret);
    if (r < 0)
        return r;
    if (ret->head.len < 12 || memcmp(ret->head.data, "HTTP/1.", 7) != 0)
        return -EPROTO;
    uint64_t st;
    if (str_to_u64(str_make(ret->head.data + 9, 3), &st) < 0)
        return -EPROTO;
    ret->status = (int)st;
    char *conn = test_http_header(ret, "connection");
    ret->conn_close = conn && strcasecmp(conn, "close") == 0;
    xfree(conn);
    return read_body(c, head_request, deadline, ret);
}

int test_http_wait_closed(struct test_http_conn *c, usec_t timeout)
{
    usec_t deadline = clock_now() + timeout;
    for (;;) {
        int r = fill(c, deadline);
        buf_reset(&c->in);
        if (r == -ECONNRESET)
            return 0;
        if (r < 0)
            return r;
    }
}

int test_http_wait_silent_close(struct test_http_conn *c, usec_t timeout)
{
    usec_t deadline = clock_now() + timeout;
    for (;;) {
        int r = fill(c, deadline);
        if (c->in.len > 0)
            return -EPROTO; /* the server wrote something first */
        if (r == -ECONNRESET)
            return 0;
        if (r < 0)
            return r;
    }
}

int test_http_request(uint16_t port, const char *raw, usec_t timeout, struct test_http_resp *ret)
{
    struct test_http_conn c;
    int r = test_http_connect(port, &c);
    if (r < 0)
        return r;
    r = test_http_send_str(&c, raw);
    if (r >= 0)
        r = test_http_read(&c, strncmp(raw, "HEAD ", 5) == 0, timeout, ret);
    test_http_close(&c);
    return r;
}
