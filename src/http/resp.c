/* SPDX-License-Identifier: Apache-2.0 */
/* Responses: head serialisation, Content-Length and chunked bodies, error bodies. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/limits.h"
#include "common/xalloc.h"
#include "http/server_int.h"

#define HEAD_LIMIT (LIMIT_HTTP_RESP_HEADERS + 1024)

enum body_mode {
    MODE_LENGTH,
    MODE_CHUNKED,
    MODE_UNTIL_CLOSE,
};

struct head_spec {
    int status;
    const char *content_type;
    enum body_mode mode;
    size_t len;
    bool keep_alive;
    int minor;
    const struct buf *extra; /* "Name: value\r\n" lines, may be NULL */
};

static const struct {
    int status;
    const char *reason;
} reasons[] = {
    {100, "Continue"},
    {101, "Switching Protocols"},
    {200, "OK"},
    {201, "Created"},
    {202, "Accepted"},
    {204, "No Content"},
    {206, "Partial Content"},
    {301, "Moved Permanently"},
    {302, "Found"},
    {304, "Not Modified"},
    {307, "Temporary Redirect"},
    {400, "Bad Request"},
    {401, "Unauthorized"},
    {403, "Forbidden"},
    {404, "Not Found"},
    {405, "Method Not Allowed"},
    {408, "Request Timeout"},
    {409, "Conflict"},
    {410, "Gone"},
    {411, "Length Required"},
    {413, "Content Too Large"},
    {414, "URI Too Long"},
    {415, "Unsupported Media Type"},
    {416, "Range Not Satisfiable"},
    {417, "Expectation Failed"},
    {422, "Unprocessable Content"},
    {429, "Too Many Requests"},
    {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"},
    {501, "Not Implemented"},
    {502, "Bad Gateway"},
    {503, "Service Unavailable"},
    {504, "Gateway Timeout"},
    {505, "HTTP Version Not Supported"},
};

const char *http_status_reason(int status)
{
    for (size_t i = 0; i < ARRAY_SIZE(reasons); i++)
        if (reasons[i].status == status)
            return reasons[i].reason;
    return "Unknown";
}

/* IMF-fixdate, recomputed once per second. */
static const char *date_now(struct http_server *s)
{
    time_t now = (time_t)(clock_wall_now() / USEC_PER_SEC);
    if ((long)now != s->date_sec || !s->date[0]) {
        struct tm tm;
        gmtime_r(&now, &tm);
        if (strftime(s->date, sizeof(s->date), "%a, %d %b %Y %H:%M:%S GMT", &tm) == 0)
            s->date[0] = '\0';
        s->date_sec = (long)now;
    }
    return s->date;
}

static bool bodyless_status(int status)
{
    return status < 200 || status == 204 || status == 304;
}

static void build_head(struct http_server *s, const struct head_spec *h, struct buf *out)
{
    /* Sizes are bounded: extra is at most LIMIT_HTTP_RESP_HEADERS and the rest is small,
     * so the appends below cannot fail with HEAD_LIMIT. */
    char num[48];
    int n = snprintf(num, sizeof(num), "HTTP/1.1 %d ", h->status);
    (void)buf_append(out, num, n > 0 && (size_t)n < sizeof(num) ? (size_t)n : 0);
    (void)buf_puts(out, http_status_reason(h->status));
    (void)buf_puts(out, "\r\nDate: ");
    (void)buf_puts(out, date_now(s));
    (void)buf_puts(out, "\r\n");
    if (h->content_type) {
        (void)buf_puts(out, "Content-Type: ");
        (void)buf_puts(out, h->content_type);
        (void)buf_puts(out, "\r\n");
    }
    if (h->mode == MODE_LENGTH && !bodyless_status(h->status)) {
        n = snprintf(num, sizeof(num), "Content-Length: %zu\r\n", h->len);
        (void)buf_append(out, num, n > 0 && (size_t)n < sizeof(num) ? (size_t)n : 0);
    } else if (h->mode == MODE_CHUNKED)
        (void)buf_puts(out, "Transfer-Encoding: chunked\r\n");
    if (!h->keep_alive)
        (void)buf_puts(out, "Connection: close\r\n");
    else if (h->minor == 0)
        (void)buf_puts(out, "Connection: keep-alive\r\n");
    if (h->extra && h->extra->len)
        (void)buf_append(out, h->extra->data, h->extra->len);
    (void)buf_puts(out, "\r\n");
}

static void json_escape(struct buf *out, const char *s, size_t max)
{
    for (size_t i = 0; s[i] && i < max; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\')
            (void)buf_printf(out, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            (void)buf_printf(out, "\\u%04x", ch);
        else
            (void)buf_putc(out, (char)ch);
    }
}

void http__error_body(struct http_server *s, int status, const char *detail, struct buf *out,
                      const char **ret_content_type)
{
    const char *ct = NULL;
    if (s->opts.error_body &&
        s->opts.error_body(s->opts.error_ctx, status, detail, out, &ct) >= 0 && ct) {
        *ret_content_type = ct;
        return;
    }
    buf_reset(out);
    (void)buf_puts(out, "{\"detail\": \"");
    json_escape(out, detail ? detail : http_status_reason(status), out->limit / 8);
    (void)buf_puts(out, "\"}");
    *ret_content_type = "application/json";
}

void http__write_error(struct http_conn *c, int status, const char *detail)
{
    struct buf body, head;
    const char *ct;
    buf_init(&body, LIMIT_HTTP_ERROR_BODY);
    buf_init(&head, HEAD_LIMIT);
    http__error_body(c->server, status, detail, &body, &ct);
    struct head_spec h = {.status = status, .content_type = ct, .len = body.len, .minor = 1};
    build_head(c->server, &h, &head);
    struct str parts[] = {str_make(head.data, head.len), str_make(body.data, body.len)};
    (void)http__conn_write(c, parts, ARRAY_SIZE(parts));
    buf_done(&head);
    buf_done(&body);
}

/* The connection is kept after this response only if the client wants it, the whole
 * request body was read, and the server is not shutting down. */
static bool decide_keep_alive(struct http_req *req, bool close_delimited)
{
    struct http_conn *c = req->conn;
    c->keep_alive =
        c->keep_alive && req->body_done && !c->server->shutting_down && !close_delimited;
    return c->keep_alive;
}

static int can_respond(const struct http_req *req)
{
    if (!req->conn)
        return -EPIPE;
    return req->resp == HTTP_RESP_NONE ? 0 : -EALREADY;
}

static bool framing_header(struct str name)
{
    static const char *const names[] = {"content-length", "transfer-encoding", "connection"};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (str_eq_nocase(name, str_c(names[i])))
            return true;
    return false;
}

int http_resp_header_add_str(struct http_req *req, struct str name, struct str value)
{
    if (req->resp != HTTP_RESP_NONE)
        return -EALREADY;
    if (!name.len || framing_header(name))
        return -EINVAL;
    for (size_t i = 0; i < name.len; i++)
        if (!http_is_tchar((unsigned char)name.p[i]))
            return -EINVAL;
    for (size_t i = 0; i < value.len; i++)
        if ((unsigned char)value.p[i] < 0x20 && value.p[i] != '\t')
            return -EINVAL;
    /* Appends, not printf: this runs for every header a proxy passes on. */
    struct buf *b = &req->resp_headers;
    if (name.len + value.len + 4 > b->limit - b->len)
        return -E2BIG; /* checked first: no half header is left behind */
    (void)buf_append(b, name.p, name.len);
    (void)buf_append(b, ": ", 2);
    (void)buf_append(b, value.p, value.len);
    (void)buf_append(b, "\r\n", 2);
    return 0;
}

int http_resp_headers_reset(struct http_req *req)
{
    if (req->resp != HTTP_RESP_NONE)
        return -EALREADY;
    buf_reset(&req->resp_headers);
    return 0;
}

usec_t http_resp_write_progress(struct http_req *req)
{
    struct http_conn *c = req->conn;
    if (!c)
        return 0;
    return http_progress_at(&c->wp, &c->tcp, clock_now());
}

size_t http_resp_queued(const struct http_req *req)
{
    return req->conn ? req->conn->queued : 0;
}

int http_resp_header_add(struct http_req *req, const char *name, const char *value)
{
    return http_resp_header_add_str(req, str_c(name), str_c(value));
}

int http_respond(struct http_req *req, int status, const char *content_type, const void *body,
                 size_t len)
{
    int r = can_respond(req);
    if (r < 0)
        return r;
    if (status < 200 || status > 999)
        return -EINVAL;
    struct http_conn *c = req->conn;
    struct buf head;
    buf_init(&head, HEAD_LIMIT);
    struct head_spec h = {.status = status,
                          .content_type = content_type,
                          .len = len,
                          .keep_alive = decide_keep_alive(req, false),
                          .minor = req->head.minor_version,
                          .extra = &req->resp_headers};
    build_head(req->server, &h, &head);
    bool no_body = req->is_head_method || bodyless_status(status);
    struct str parts[] = {str_make(head.data, head.len), str_make(body, no_body ? 0 : len)};
    req->resp = HTTP_RESP_DONE;
    r = http__conn_write_whole(c, parts, ARRAY_SIZE(parts));
    buf_done(&head);
    if (r < 0)
        return -EPIPE;
    http__conn_response_done(c);
    return 0;
}

int http_respond_json(struct http_req *req, int status, const json_t *j)
{
    size_t n = json_dumpb(j, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
    if (n == 0)
        return -EINVAL;
    char *s = xmalloc(n);
    size_t m = json_dumpb(j, s, n, JSON_COMPACT | JSON_ENCODE_ANY);
    int r = m == n ? http_respond(req, status, "application/json", s, n) : -EINVAL;
    xfree(s);
    return r;
}

int http_respond_error(struct http_req *req, int status, const char *detail)
{
    int r = can_respond(req);
    if (r < 0)
        return r;
    struct buf body;
    const char *ct;
    buf_init(&body, LIMIT_HTTP_ERROR_BODY);
    http__error_body(req->server, status, detail, &body, &ct);
    r = http_respond(req, status, ct, body.data, body.len);
    buf_done(&body);
    return r;
}

int http_resp_start(struct http_req *req, int status, const char *content_type)
{
    int r = can_respond(req);
    if (r < 0)
        return r;
    if (status < 200 || status > 999 || bodyless_status(status))
        return -EINVAL;
    bool chunked = req->head.minor_version == 1;
    struct buf head;
    buf_init(&head, HEAD_LIMIT);
    struct head_spec h = {.status = status,
                          .content_type = content_type,
                          .mode = chunked ? MODE_CHUNKED : MODE_UNTIL_CLOSE,
                          .keep_alive = decide_keep_alive(req, !chunked),
                          .minor = req->head.minor_version,
                          .extra = &req->resp_headers};
    build_head(req->server, &h, &head);
    req->resp = HTTP_RESP_STREAMING;
    req->resp_chunked = chunked;
    req->resp_sized = false;
    struct str part = str_make(head.data, head.len);
    r = http__conn_write(req->conn, &part, 1);
    buf_done(&head);
    return r < 0 ? -EPIPE : 0;
}

int http_resp_start_length(struct http_req *req, int status, const char *content_type, uint64_t len)
{
    int r = can_respond(req);
    if (r < 0)
        return r;
    if (status < 200 || status > 999 || bodyless_status(status))
        return -EINVAL;
    struct buf head;
    buf_init(&head, HEAD_LIMIT);
    struct head_spec h = {.status = status,
                          .content_type = content_type,
                          .mode = MODE_LENGTH,
                          .len = (size_t)len,
                          .keep_alive = decide_keep_alive(req, false),
                          .minor = req->head.minor_version,
                          .extra = &req->resp_headers};
    build_head(req->server, &h, &head);
    req->resp = HTTP_RESP_STREAMING;
    req->resp_chunked = false;
    req->resp_sized = true;
    struct str part = str_make(head.data, head.len);
    r = http__conn_write(req->conn, &part, 1);
    buf_done(&head);
    return r < 0 ? -EPIPE : 0;
}

int http_resp_write(struct http_req *req, const void *data, size_t len)
{
    if (!req->conn)
        return -EPIPE;
    if (req->resp != HTTP_RESP_STREAMING)
        return -EINVAL;
    struct http_conn *c = req->conn;
    size_t limit = c->server->opts.write_queue;
    if (c->queued >= limit) {
        req->want_drain = true;
        return -EAGAIN;
    }
    if (len == 0 || req->is_head_method)
        return 0;
    char hex[24];
    int n = snprintf(hex, sizeof(hex), "%zx\r\n", len);
    ASSERT(n > 0 && (size_t)n < sizeof(hex));
    struct str parts[] = {str_make(hex, (size_t)n), str_make(data, len), STR_LIT("\r\n")};
    int r = req->resp_chunked ? http__conn_write(c, parts, 3) : http__conn_write(c, parts + 1, 1);
    if (r < 0)
        return -EPIPE;
    if (c->queued >= limit) {
        req->want_drain = true;
        return 1;
    }
    return 0;
}

int http_resp_end(struct http_req *req)
{
    if (!req->conn)
        return -EPIPE;
    if (req->resp != HTTP_RESP_STREAMING)
        return -EINVAL;
    struct http_conn *c = req->conn;
    req->resp = HTTP_RESP_DONE;
    if (req->resp_chunked && !req->is_head_method) {
        struct str last = STR_LIT("0\r\n\r\n");
        if (http__conn_write(c, &last, 1) < 0)
            return -EPIPE;
    }
    http__conn_response_done(c);
    return 0;
}
