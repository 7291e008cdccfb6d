/* SPDX-License-Identifier: Apache-2.0 */
/* Connection upgrade: answers 101 Switching Protocols and hands the socket (a duplicate
 * of the connection's descriptor, opened as the caller's uv_tcp_t) plus any bytes read
 * past the request head to the caller, then retires the HTTP connection. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "http/server_int.h"

struct upgrade_op {
    uv_write_t wr;
    struct http_conn *conn;
    uv_tcp_t *tcp;
    http_upgrade_fn *fn;
    void *ctx;
    size_t len;
    char head[];
};

static bool valid_protocol(const char *p)
{
    if (!*p)
        return false;
    for (; *p; p++)
        if (!http_is_tchar((unsigned char)*p) && *p != '/')
            return false;
    return true;
}

static int check_upgrade(const struct http_req *req, const struct http_upgrade_opts *opts)
{
    if (!opts || !opts->fn || !opts->tcp)
        return -EINVAL;
    if (opts->protocol && !valid_protocol(opts->protocol))
        return -EINVAL;
    if (!req->conn || req->conn->closing)
        return -EPIPE;
    if (req->resp != HTTP_RESP_NONE)
        return -EALREADY;
    if (!req->body_done || req->conn->upgrading)
        return -EINVAL;
    return 0;
}

static struct upgrade_op *build_op(struct http_req *req, const struct http_upgrade_opts *opts)
{
    struct buf h;
    buf_init(&h, LIMIT_HTTP_RESP_HEADERS + 1024);
    /* Bounded: the extra headers are at most LIMIT_HTTP_RESP_HEADERS. */
    (void)buf_puts(&h, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n");
    if (opts->protocol)
        (void)buf_printf(&h, "Upgrade: %s\r\n", opts->protocol);
    if (req->resp_headers.len)
        (void)buf_append(&h, req->resp_headers.data, req->resp_headers.len);
    (void)buf_puts(&h, "\r\n");
    struct upgrade_op *op = xmalloc(sizeof(*op) + h.len);
    memcpy(op->head, h.data, h.len);
    op->len = h.len;
    op->conn = req->conn;
    op->tcp = opts->tcp;
    op->fn = opts->fn;
    op->ctx = opts->ctx;
    buf_done(&h);
    return op;
}

/* Opens a duplicate of c's socket as tcp. Returns 0, or a negative errno with
 * *ret_inited telling whether tcp was initialised (it must then be closed). */
static int adopt_socket(struct http_conn *c, uv_tcp_t *tcp, bool *ret_inited)
{
    uv_os_fd_t fd;
    int r = uv_fileno((uv_handle_t *)&c->tcp, &fd);
    if (r < 0)
        return r;
    int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (dup_fd < 0)
        return -errno;
    r = uv_tcp_init(c->server->loop, tcp);
    if (r >= 0) {
        *ret_inited = true;
        r = uv_tcp_open(tcp, dup_fd);
    }
    if (r < 0) {
        (void)close(dup_fd);
        return r;
    }
    (void)uv_tcp_nodelay(tcp, 1);
    return 0;
}

/* The caller's handle could not be opened: report once libuv no longer uses it. */
static void on_failed_handle_closed(uv_handle_t *h)
{
    struct upgrade_op *op = h->data;
    op->fn(op->ctx, -EIO, NULL, STR_NULL);
    xfree(op);
}

static void on_upgrade_written(uv_write_t *wr, int status)
{
    struct upgrade_op *op = container_of(wr, struct upgrade_op, wr);
    struct http_conn *c = op->conn;
    bool inited = false;
    c->queued -= op->len;
    http__server_queued_add(c->server, -(ptrdiff_t)op->len);
    int r = status;
    if (r >= 0 && c->closing)
        r = -ECONNABORTED;
    if (r >= 0)
        r = adopt_socket(c, op->tcp, &inited);
    if (r < 0)
        log_debug_errno(r, "connection upgrade failed");
    if (r >= 0) {
        op->fn(op->ctx, 0, op->tcp, str_make(c->in.data ? c->in.data : "", c->in.len));
        xfree(op);
    } else if (inited) {
        op->tcp->data = op;
        uv_close((uv_handle_t *)op->tcp, on_failed_handle_closed);
    } else {
        op->fn(op->ctx, r, NULL, STR_NULL);
        xfree(op);
    }
    buf_reset(&c->in);
    /* The original descriptor closes; the duplicate keeps the connection open. */
    http__conn_close(c);
}

int http_req_upgrade(struct http_req *req, const struct http_upgrade_opts *opts)
{
    int r = check_upgrade(req, opts);
    if (r < 0)
        return r;
    struct http_conn *c = req->conn;
    struct upgrade_op *op = build_op(req, opts);
    c->upgrading = true;
    http__conn_update_read(c);
    /* The request ends here for the HTTP layer. */
    req->resp = HTTP_RESP_DONE;
    c->req = NULL;
    req->conn = NULL;
    http_req_unref(req);
    uv_buf_t b = uv_buf_init(op->head, (unsigned)op->len);
    r = uv_write(&op->wr, (uv_stream_t *)&c->tcp, &b, 1, on_upgrade_written);
    if (r < 0) {
        xfree(op);
        http__conn_close(c);
        return -EPIPE;
    }
    if (c->queued == 0) /* the stall clock starts with the queue (its bytes in the kernel) */
        http_progress_mark(&c->wp, &c->tcp, clock_now());
    c->queued += op->len;
    http__server_queued_add(c->server, (ptrdiff_t)op->len);
    http__conn_arm_upgrade(c); /* a 101 the client never takes must not hold it forever */
    return 0;
}

void http_req_abort(struct http_req *req)
{
    if (req->conn)
        http__conn_close(req->conn);
}

bool http_req_secure(const struct http_req *req)
{
    return req->conn && req->conn->secure;
}

bool http_req_input_cut(const struct http_req *req)
{
    return req->input_cut;
}

struct http_cut *http_req_cut(const struct http_req *req)
{
    return req->conn ? req->conn->cut : NULL;
}

struct str http_req_peer_info(const struct http_req *req)
{
    if (!req->conn || !req->conn->info)
        return STR_NULL;
    return str_make(req->conn->info, req->conn->info_len);
}

int http_req_peer(const struct http_req *req, char *out, size_t size)
{
    if (!req->conn)
        return -EPIPE;
    struct http_conn *c = req->conn;
    if (!c->peer[0]) { /* once per connection: a syscall per request is measurable */
        struct sockaddr_storage ss;
        int len = sizeof(ss);
        int r = uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len);
        if (r >= 0)
            r = ss.ss_family == AF_INET
                    ? uv_ip4_name((struct sockaddr_in *)&ss, c->peer, sizeof(c->peer))
                    : uv_ip6_name((struct sockaddr_in6 *)&ss, c->peer, sizeof(c->peer));
        if (r < 0) {
            c->peer[0] = '\0';
            return r;
        }
    }
    if (strlen(c->peer) >= size)
        return -ENOSPC;
    memcpy(out, c->peer, strlen(c->peer) + 1);
    return 0;
}
