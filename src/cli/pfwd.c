/* SPDX-License-Identifier: Apache-2.0 */
/* The Kubernetes WebSocket port-forward protocol, client side, without I/O (see pfwd.h). */
#include "cli/pfwd.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "as_version.h"
#include "common/str.h"
#include "http/ws.h"

int cli_pfwd_parse_spec(const char *spec, unsigned *ret_local, unsigned *ret_remote)
{
    struct str s = str_c(spec), l, r;
    uint64_t lp = 0, rp = 0;
    bool pair = str_cut(s, ':', &l, &r);
    if (!pair)
        r = s;
    if (pair && l.len > 0 && str_to_u64(l, &lp) < 0)
        return -EINVAL;
    if (str_to_u64(r, &rp) < 0 || rp == 0 || rp > 65535 || lp > 65535)
        return -EINVAL;
    if (!pair)
        lp = rp; /* "5000": the same port on both sides, as kubectl */
    *ret_local = (unsigned)lp;
    *ret_remote = (unsigned)rp;
    return 0;
}

/* ---- the opening handshake ------------------------------------------------------------- */

static bool dns_name(const char *s)
{
    if (!s || !*s || strlen(s) > 253)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
            return false;
    return true;
}

static bool header_safe(const char *s)
{
    return s && !strpbrk(s, "\r\n");
}

int cli_pfwd_request(const struct cli_pfwd_req *q, struct buf *out)
{
    if (!dns_name(q->ns) || !dns_name(q->pod) || q->port == 0 || q->port > 65535 ||
        !header_safe(q->host_port) || !header_safe(q->path_prefix) || !header_safe(q->key) ||
        (q->authorization && !header_safe(q->authorization)) || strchr(q->path_prefix, ' '))
        return -EINVAL;
    size_t pl = strlen(q->path_prefix);
    while (pl > 0 && q->path_prefix[pl - 1] == '/')
        pl--;
    int r = buf_printf(out,
                       "GET %.*s/api/v1/namespaces/%s/pods/%s/portforward?ports=%u HTTP/1.1\r\n"
                       "Host: %s\r\n"
                       "User-Agent: kubectl-sandbox/" AS_VERSION "\r\n"
                       "Upgrade: websocket\r\n"
                       "Connection: Upgrade\r\n"
                       "Sec-WebSocket-Version: 13\r\n"
                       "Sec-WebSocket-Key: %s\r\n"
                       "Sec-WebSocket-Protocol: " CLI_PFWD_PROTOCOL "\r\n",
                       (int)pl, q->path_prefix, q->ns, q->pod, q->port, q->host_port, q->key);
    if (r == 0 && q->authorization)
        r = buf_printf(out, "Authorization: %s\r\n", q->authorization);
    return r == 0 ? buf_puts(out, "\r\n") : r;
}

/* Finds the end of the head ("\r\n\r\n"); returns its length or 0. */
static size_t head_end(const char *p, size_t n)
{
    for (size_t i = 3; i < n; i++)
        if (p[i] == '\n' && p[i - 1] == '\r' && p[i - 2] == '\n' && p[i - 3] == '\r')
            return i + 1;
    return 0;
}

/* Checks one header line of a 101 answer. */
static void check_header(struct str name, struct str value, const char *accept, unsigned *seen,
                         struct cli_pfwd_resp *ret)
{
    if (str_eq_nocase(name, str_c("Upgrade"))) {
        *seen |= 1;
        if (!str_eq_nocase(value, str_c("websocket")))
            ret->problem = "the answer upgrades to something other than websocket";
    } else if (str_eq_nocase(name, str_c("Sec-WebSocket-Accept"))) {
        *seen |= 2;
        if (!str_eq_c(value, accept))
            ret->problem = "Sec-WebSocket-Accept does not match the key";
    } else if (str_eq_nocase(name, str_c("Sec-WebSocket-Protocol"))) {
        *seen |= 4;
        if (!str_eq_c(value, CLI_PFWD_PROTOCOL))
            ret->problem = "the server chose another subprotocol than " CLI_PFWD_PROTOCOL;
    } else if (str_eq_nocase(name, str_c("Content-Length"))) {
        uint64_t len;
        ret->body_len = str_to_u64(value, &len) == 0 && len <= LONG_MAX ? (long)len : -1;
    }
}

static int parse_status(struct str line, int *ret)
{
    struct str ver, rest, code, reason;
    uint64_t st;
    if (!str_cut(line, ' ', &ver, &rest) || !str_has_prefix(ver, str_c("HTTP/1.")))
        return -EPROTO;
    if (!str_cut(rest, ' ', &code, &reason))
        code = rest;
    (void)reason;
    if (code.len != 3 || str_to_u64(code, &st) < 0 || st < 100)
        return -EPROTO;
    *ret = (int)st;
    return 0;
}

int cli_pfwd_parse_resp(const char *p, size_t n, const char *key, struct cli_pfwd_resp *ret)
{
    size_t end = head_end(p, n);
    if (end == 0)
        return n > 16384 ? -EPROTO : 0;
    struct cli_pfwd_resp r = {.head_len = end, .body_len = -1};
    struct str head = str_make(p, end - 4), line, rest;
    bool more = str_cut(head, '\n', &line, &rest);
    if (line.len && line.p[line.len - 1] == '\r')
        line.len--;
    if (parse_status(line, &r.status) < 0)
        return -EPROTO;
    char accept[HTTP_WS_ACCEPT_LEN + 1];
    http_ws_accept_key(str_c(key), accept);
    unsigned seen = 0;
    while (more) {
        more = str_cut(rest, '\n', &line, &rest);
        struct str name, value;
        if (!str_cut(line, ':', &name, &value))
            return -EPROTO;
        check_header(str_trim(name), str_trim(value), accept, &seen, &r);
    }
    if (r.status == 101 && !r.problem && seen != 7)
        r.problem = (seen & 4) ? "the answer lacks Upgrade or Sec-WebSocket-Accept"
                               : "the server did not agree to " CLI_PFWD_PROTOCOL;
    r.upgraded = r.status == 101 && !r.problem;
    *ret = r;
    return 1;
}

/* ---- frames ------------------------------------------------------------------------------ */

int cli_pfwd_frame(int opcode, int channel, const void *data, size_t len, const uint8_t mask[4],
                   struct buf *out)
{
    uint8_t h[HTTP_WS_MAX_HEADER];
    size_t plen = len + (channel >= 0 ? 1 : 0);
    size_t hl = http_ws_build_header((uint8_t)opcode, true, plen, mask, h);
    size_t start = out->len;
    int r = buf_append(out, h, hl);
    if (r == 0 && channel >= 0)
        r = buf_putc(out, (char)channel);
    if (r == 0 && len)
        r = buf_append(out, data, len);
    if (r < 0) {
        out->len = start; /* nothing half-written */
        if (out->data)
            out->data[start] = '\0';
        return r;
    }
    http_ws_unmask((uint8_t *)out->data + start + hl, plen, mask, 0);
    return 0;
}

void cli_pfwd_rx_init(struct cli_pfwd_rx *rx, unsigned port, uint64_t max_frame,
                      const struct cli_pfwd_ops *ops, void *ctx)
{
    *rx = (struct cli_pfwd_rx){
        .max_frame = max_frame, .port = port, .msg_channel = -1, .ops = ops, .ctx = ctx};
    buf_init(&rx->in, (size_t)max_frame + HTTP_WS_MAX_HEADER);
    buf_init(&rx->error, CLI_PFWD_MAX_ERROR);
}

void cli_pfwd_rx_done(struct cli_pfwd_rx *rx)
{
    buf_done(&rx->in);
    buf_done(&rx->error);
}

bool cli_pfwd_rx_has_error(const struct cli_pfwd_rx *rx)
{
    return rx->error.len > 0;
}

/* Channel payload p[0..n) (channel byte removed): the port prefix first, then data. */
static int channel_data(struct cli_pfwd_rx *rx, int ch, const uint8_t *p, size_t n)
{
    while (n > 0 && rx->prefix_len[ch] < 2) {
        rx->prefix[ch][rx->prefix_len[ch]++] = *p++;
        n--;
        if (rx->prefix_len[ch] == 2 &&
            (unsigned)(rx->prefix[ch][0] | rx->prefix[ch][1] << 8) != rx->port)
            return -EPROTO;
    }
    if (n == 0)
        return 0;
    if (ch == CLI_PFWD_CH_ERROR) {
        size_t room = rx->error.limit - rx->error.len;
        return buf_append(&rx->error, p, n < room ? n : room) < 0 ? -E2BIG : 0;
    }
    return rx->ops->data(rx->ctx, p, n);
}

static int on_message_frame(struct cli_pfwd_rx *rx, const struct http_ws_frame *f, const uint8_t *p)
{
    size_t n = (size_t)f->len;
    if (f->opcode == HTTP_WS_TEXT)
        return -EPROTO; /* the base64 protocol was not asked for */
    if (f->opcode == HTTP_WS_BINARY) {
        if (rx->msg_channel >= 0)
            return -EPROTO; /* a new message inside a fragmented one */
        if (n == 0)
            return 0;
        if (p[0] > CLI_PFWD_CH_ERROR)
            return -EPROTO;
        rx->msg_channel = p[0];
        p++;
        n--;
    } else if (rx->msg_channel < 0) { /* a continuation of nothing */
        return -EPROTO;
    }
    int ch = rx->msg_channel;
    if (f->fin)
        rx->msg_channel = -1;
    return channel_data(rx, ch, p, n);
}

static int on_frame(struct cli_pfwd_rx *rx, const struct http_ws_frame *f, const uint8_t *p)
{
    if (f->opcode == HTTP_WS_CLOSE) {
        rx->closed = true;
        rx->close_code = f->len >= 2 ? (uint16_t)(p[0] << 8 | p[1]) : 0;
        return 0;
    }
    if (f->opcode == HTTP_WS_PING) {
        if (rx->ops->ping)
            rx->ops->ping(rx->ctx, p, (size_t)f->len);
        return 0;
    }
    if (f->opcode == HTTP_WS_PONG)
        return 0;
    return on_message_frame(rx, f, p);
}

/* Handles the complete frames in rx->in and drops them. */
static int process(struct cli_pfwd_rx *rx)
{
    size_t off = 0;
    int r = 0;
    while (r == 0 && !rx->closed) {
        const uint8_t *p = (const uint8_t *)rx->in.data + off;
        size_t left = rx->in.len - off;
        struct http_ws_frame f;
        int h = http_ws_parse_header(p, left, rx->max_frame, &f);
        if (h <= 0) {
            r = h;
            break;
        }
        if (f.masked) {
            r = -EPROTO; /* a server never masks */
            break;
        }
        if (left - (size_t)h < f.len)
            break;
        r = on_frame(rx, &f, p + h);
        off += (size_t)h + (size_t)f.len;
    }
    buf_consume(&rx->in, off);
    return r;
}

int cli_pfwd_rx_feed(struct cli_pfwd_rx *rx, const void *data, size_t n)
{
    const uint8_t *p = data;
    int r = 0;
    while (r == 0 && n > 0 && !rx->closed) {
        size_t room = rx->in.limit - rx->in.len, take = n < room ? n : room;
        if (take == 0)
            return -E2BIG; /* cannot happen: a full buffer holds a complete frame */
        if (buf_append(&rx->in, p, take) < 0)
            return -E2BIG;
        p += take;
        n -= take;
        r = process(rx);
    }
    return r;
}
