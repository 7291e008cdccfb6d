/* SPDX-License-Identifier: Apache-2.0 */
/* WebSocket handshake, frame codec and server connection (see ws.h). */
#include "http/ws.h"

#include <errno.h>
#include <string.h>

#include "common/base64.h"
#include "common/buf.h"
#include "common/xalloc.h"
#include "http/progress.h"

/* ---- SHA-1 (for Sec-WebSocket-Accept only) and base64 ------------------------------ */

static uint32_t rol(uint32_t x, int n)
{
    return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const uint8_t *b)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
               (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20)
            f = (bb & c) | (~bb & d), k = 0x5A827999;
        else if (i < 40)
            f = bb ^ c ^ d, k = 0x6ED9EBA1;
        else if (i < 60)
            f = (bb & c) | (bb & d) | (c & d), k = 0x8F1BBCDC;
        else
            f = bb ^ c ^ d, k = 0xCA62C1D6;
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d, d = c, c = rol(bb, 30), bb = a, a = t;
    }
    h[0] += a, h[1] += bb, h[2] += c, h[3] += d, h[4] += e;
}

/* SHA-1 of p[0..n) for short inputs (the key plus the GUID). */
static void sha1(const uint8_t *p, size_t n, uint8_t out[20])
{
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    uint8_t block[64];
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        sha1_block(h, p + i);
    size_t rest = n - i;
    memset(block, 0, sizeof(block));
    memcpy(block, p + i, rest);
    block[rest] = 0x80;
    if (rest >= 56) {
        sha1_block(h, block);
        memset(block, 0, sizeof(block));
    }
    uint64_t bits = (uint64_t)n * 8;
    for (int j = 0; j < 8; j++)
        block[63 - j] = (uint8_t)(bits >> (8 * j));
    sha1_block(h, block);
    for (int j = 0; j < 20; j++)
        out[j] = (uint8_t)(h[j / 4] >> (24 - 8 * (j % 4)));
}

_Static_assert(BASE64_LEN(20) == HTTP_WS_ACCEPT_LEN, "accept key: base64 of a SHA-1 digest");

void http_ws_accept_key(struct str key, char out[HTTP_WS_ACCEPT_LEN + 1])
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    uint8_t in[128], d[21] = {0};
    size_t n = key.len < sizeof(in) - sizeof(guid) ? key.len : sizeof(in) - sizeof(guid);
    memcpy(in, key.p, n);
    memcpy(in + n, guid, sizeof(guid) - 1);
    sha1(in, n + sizeof(guid) - 1, d);
    struct buf b;
    buf_init(&b, HTTP_WS_ACCEPT_LEN);
    if (base64_encode(d, 20, &b) < 0) /* cannot fail: the limit is the exact length */
        out[0] = '\0';
    else
        memcpy(out, b.data, HTTP_WS_ACCEPT_LEN + 1);
    buf_done(&b);
}

static bool has_token(struct str list, const char *token)
{
    struct str rest = list, item;
    while (rest.len) {
        if (!str_cut(rest, ',', &item, &rest))
            rest = STR_NULL;
        if (str_eq_nocase(str_trim(item), str_c(token)))
            return true;
    }
    return false;
}

int http_ws_check_request(struct http_req *req, const char **ret_msg)
{
    struct str key = str_trim(http_req_header(req, "Sec-WebSocket-Key"));
    if (!str_eq_c(http_req_method(req), "GET"))
        return *ret_msg = "WebSocket handshake must be GET", -EINVAL;
    if (!has_token(http_req_header(req, "Upgrade"), "websocket") ||
        !has_token(http_req_header(req, "Connection"), "upgrade"))
        return *ret_msg = "not a WebSocket upgrade request", -EINVAL;
    if (!str_eq_c(str_trim(http_req_header(req, "Sec-WebSocket-Version")), "13"))
        return *ret_msg = "unsupported Sec-WebSocket-Version (want 13)", -EINVAL;
    /* The key is the base64 of 16 random bytes (RFC 6455 §4.1): 24 characters. */
    struct buf raw;
    buf_init(&raw, 16);
    int r = key.len == BASE64_LEN(16) ? base64_decode(key.p, key.len, &raw) : -EINVAL;
    if (r >= 0 && raw.len != 16)
        r = -EINVAL;
    buf_done(&raw);
    if (r < 0)
        return *ret_msg = "bad Sec-WebSocket-Key", -EINVAL;
    return 0;
}

/* ---- frame codec ------------------------------------------------------------------- */

int http_ws_parse_header(const uint8_t *p, size_t n, uint64_t max_payload,
                         struct http_ws_frame *ret)
{
    if (n < 2)
        return 0;
    struct http_ws_frame f = {.fin = p[0] & 0x80, .opcode = p[0] & 0x0f, .masked = p[1] & 0x80};
    if (p[0] & 0x70)
        return -EPROTO;
    bool control = f.opcode & 0x8;
    if ((f.opcode > 2 && f.opcode < 8) || f.opcode > 10)
        return -EPROTO;
    uint64_t len = p[1] & 0x7f;
    size_t h = 2;
    if (len == 126) {
        if (n < 4)
            return 0;
        len = (uint64_t)p[2] << 8 | p[3];
        h = 4;
    } else if (len == 127) {
        if (n < 10)
            return 0;
        len = 0;
        for (int i = 0; i < 8; i++)
            len = len << 8 | p[2 + i];
        if (len >> 63)
            return -EPROTO;
        h = 10;
    }
    if (control && (len > 125 || !f.fin))
        return -EPROTO;
    if (f.masked) {
        if (n < h + 4)
            return 0;
        memcpy(f.mask, p + h, 4);
        h += 4;
    }
    if (len > max_payload)
        return -E2BIG;
    f.len = len;
    f.header_len = h;
    *ret = f;
    return (int)h;
}

void http_ws_unmask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t off)
{
    for (size_t i = 0; i < n; i++)
        p[i] ^= mask[(off + i) & 3];
}

size_t http_ws_build_header(uint8_t opcode, bool fin, uint64_t len, const uint8_t *mask,
                            uint8_t out[HTTP_WS_MAX_HEADER])
{
    size_t h = 2;
    out[0] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0f));
    uint8_t m = mask ? 0x80 : 0;
    if (len < 126) {
        out[1] = (uint8_t)(m | len);
    } else if (len <= 0xffff) {
        out[1] = m | 126;
        out[2] = (uint8_t)(len >> 8);
        out[3] = (uint8_t)len;
        h = 4;
    } else {
        out[1] = m | 127;
        for (int i = 0; i < 8; i++)
            out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
        h = 10;
    }
    if (mask) {
        memcpy(out + h, mask, 4);
        h += 4;
    }
    return h;
}

/* Close codes a peer may send (RFC 6455 7.4): 1000-1003, 1007-1014, 3000-4999. */
static bool close_code_valid(uint16_t c)
{
    return (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1014) || (c >= 3000 && c <= 4999);
}

/* Length of the UTF-8 sequence that starts with c (0: not a valid lead byte). */
static size_t utf8_seq_len(uint8_t c)
{
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return 2;
    if ((c & 0xf0) == 0xe0)
        return 3;
    if (c >= 0xf0 && c <= 0xf4)
        return 4;
    return 0;
}

/* Is p[0..n) well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF)? */
static bool utf8_valid(const uint8_t *p, size_t n)
{
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    size_t i = 0;
    while (i < n) {
        size_t k = utf8_seq_len(p[i]);
        if (k == 0 || k > n - i)
            return false;
        uint32_t v = k == 1 ? p[i] : p[i] & (0x7fu >> k);
        for (size_t j = 1; j < k; j++) {
            if ((p[i + j] & 0xc0) != 0x80)
                return false;
            v = v << 6 | (p[i + j] & 0x3fu);
        }
        if (v < min[k] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
            return false;
        i += k;
    }
    return true;
}

int http_ws_check_close(const uint8_t *p, size_t n, uint16_t *ret_code)
{
    *ret_code = 0;
    if (n == 0)
        return 0;
    if (n == 1)
        return -EPROTO;
    uint16_t code = (uint16_t)(p[0] << 8 | p[1]);
    if (!close_code_valid(code) || !utf8_valid(p + 2, n - 2))
        return -EPROTO;
    *ret_code = code;
    return 0;
}

/* ---- connection -------------------------------------------------------------------- */

/* ms without progress before a closing connection is torn down: while queued frames
 * still drain (a slow reader) the wait is renewed, then the peer's end is awaited. */
#define WS_CLOSE_WAIT 2000

struct http_ws {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_timer_t stall; /* write_stall, while frames are queued (on_ws_stall) */
    uv_shutdown_t shutdown;
    struct http_ws_opts o;
    bool handed, closing, close_sent, paused, reading;
    bool backlogged; /* frames filled the write queue: the peer is not read until it drains */
    int handles;
    int close_code;
    struct buf in, msg, pre;
    uint8_t msg_opcode;
    size_t queued;
    bool want_drain;
    bool got_message;        /* a complete message arrived (first_message_timeout is met) */
    bool finishing;          /* the close is under way: shutdown asked, the peer read and dropped */
    bool shut;               /* every queued frame went to the kernel (the shutdown completed) */
    bool peer_eof;           /* the peer ended its side */
    bool peer_closed;        /* the peer's close frame arrived: nothing more will come */
    bool discard;            /* after our close, the peer's frames can no longer be followed */
    struct http_progress wp; /* the peer taking bytes: the last completed write, the
                                queue's start, or a change of the socket's queue */
};

struct ws_write {
    uv_write_t req;
    size_t len;
    char data[];
};

static void ws_free(struct http_ws *ws)
{
    buf_done(&ws->in);
    buf_done(&ws->msg);
    buf_done(&ws->pre);
    xfree(ws);
}

static void on_ws_handle_closed(uv_handle_t *h)
{
    struct http_ws *ws = h->data;
    if (--ws->handles > 0)
        return;
    ws->o.ops->closed(ws, ws->close_code, ws->o.ctx);
    ws_free(ws);
}

static void ws_teardown(struct http_ws *ws)
{
    if (ws->closing)
        return;
    ws->closing = true;
    uv_close((uv_handle_t *)&ws->tcp, on_ws_handle_closed);
    uv_close((uv_handle_t *)&ws->timer, on_ws_handle_closed);
    uv_close((uv_handle_t *)&ws->stall, on_ws_handle_closed);
}

/* The stall timer: the write queue made no progress for write_stall, unless the peer took
 * bytes of the socket's queue since (http/progress.h: a slow reader can go long between
 * completed writes while it reads). */
static void on_ws_stall(uv_timer_t *t)
{
    struct http_ws *ws = t->data;
    usec_t now = clock_now(), quiet = now - http_progress_at(&ws->wp, &ws->tcp, now);
    if (quiet < ws->o.write_stall) {
        (void)uv_timer_start(&ws->stall, on_ws_stall, (ws->o.write_stall - quiet + 999) / 1000, 0);
        return;
    }
    if (!ws->close_code)
        ws->close_code = 1006;
    ws_teardown(ws);
}

/* Arms the stall timer while frames are queued (from now: a write just completed or the
 * queue just became non-empty), stops it when none are. */
static void ws_stall_arm(struct http_ws *ws, bool restart)
{
    if (!ws->o.write_stall || !ws->handed || ws->closing)
        return;
    if (!ws->queued)
        (void)uv_timer_stop(&ws->stall);
    else if (restart || !uv_is_active((uv_handle_t *)&ws->stall))
        (void)uv_timer_start(&ws->stall, on_ws_stall, (ws->o.write_stall + 999) / 1000, 0);
}

static void ws_set_backlogged(struct http_ws *ws, bool on);
static void ws_update_read(struct http_ws *ws);
static void ws_drop_until_close(struct http_ws *ws, const char *p, size_t n);

static void on_ws_written(uv_write_t *w, int status)
{
    struct ws_write *op = container_of(w, struct ws_write, req);
    struct http_ws *ws = w->handle->data;
    ws->queued -= op->len;
    http_progress_mark(&ws->wp, &ws->tcp, clock_now());
    xfree(op);
    if (status < 0) {
        ws_teardown(ws);
        return;
    }
    ws_stall_arm(ws, true);
    if (ws->closing || ws->queued > ws->o.write_queue / 2)
        return;
    if (ws->want_drain) {
        ws->want_drain = false;
        if (ws->o.ops->drain)
            ws->o.ops->drain(ws, ws->o.ctx);
    }
    if (ws->backlogged && !ws->closing)
        ws_set_backlogged(ws, false);
}

static int ws_write_raw(struct http_ws *ws, const void *a, size_t alen, const void *b, size_t blen)
{
    if (!ws->handed) {
        int r = buf_append(&ws->pre, a, alen);
        return r ? r : buf_append(&ws->pre, b, blen);
    }
    if (ws->closing)
        return -EPIPE;
    struct ws_write *op = xmalloc(sizeof(*op) + alen + blen);
    op->len = alen + blen;
    memcpy(op->data, a, alen);
    if (blen)
        memcpy(op->data + alen, b, blen);
    uv_buf_t ub = uv_buf_init(op->data, (unsigned)op->len);
    if (uv_write(&op->req, (uv_stream_t *)&ws->tcp, &ub, 1, on_ws_written) < 0) {
        xfree(op);
        ws_teardown(ws);
        return -EPIPE;
    }
    if (!ws->queued) /* the stall clock starts with the queue (its bytes in the kernel) */
        http_progress_mark(&ws->wp, &ws->tcp, clock_now());
    ws->queued += op->len;
    ws_stall_arm(ws, false);
    return 0;
}

int http_ws_send(struct http_ws *ws, uint8_t opcode, const void *data, size_t len)
{
    if (ws->closing || ws->close_sent)
        return -EPIPE;
    uint8_t h[HTTP_WS_MAX_HEADER];
    size_t hl = http_ws_build_header(opcode, true, len, NULL, h);
    if (ws_write_raw(ws, h, hl, data, len) < 0)
        return -EPIPE;
    if (ws->queued + ws->pre.len >= ws->o.write_queue) {
        ws->want_drain = true;
        return 1;
    }
    return 0;
}

/* Every queued frame is with the kernel. The socket is closed once the peer ends its
 * side too (or at the timer): closing it with the peer's bytes unread would send a reset,
 * which can make the peer drop the end of what was sent. */
static void on_ws_shutdown(uv_shutdown_t *sr, int status)
{
    struct http_ws *ws = sr->handle->data;
    ws->shut = true;
    if (status < 0 || ws->peer_eof || ws->peer_closed)
        ws_teardown(ws);
}

static void on_ws_timer(uv_timer_t *t)
{
    struct http_ws *ws = t->data;
    if (ws->close_sent) {
        usec_t now = clock_now();
        if (!ws->shut &&
            now - http_progress_at(&ws->wp, &ws->tcp, now) < WS_CLOSE_WAIT * USEC_PER_MSEC) {
            /* a slow reader, still draining (the socket's queue counts: http/progress.h):
             * wait on */
            (void)uv_timer_start(&ws->timer, on_ws_timer, WS_CLOSE_WAIT, 0);
            return;
        }
        ws_teardown(ws); /* no progress, or the peer did not end its side in time */
        return;
    }
    if (!ws->got_message && ws->o.first_message_timeout)
        http_ws_close(ws, 1008, "no first message in time");
    else
        http_ws_close(ws, 1001, "idle timeout");
}

/* The peer's deadline after it sent something (first: the handshake is done): its first
 * message within first_message_timeout of the handshake, whatever trickles in before,
 * then a frame within idle_timeout of the last. */
static void ws_arm(struct http_ws *ws, bool first)
{
    usec_t t = ws->o.idle_timeout;
    if (ws->close_sent)
        return;
    if (!ws->got_message && ws->o.first_message_timeout) {
        if (!first)
            return; /* the first-message deadline runs on */
        t = ws->o.first_message_timeout;
    }
    if (t)
        (void)uv_timer_start(&ws->timer, on_ws_timer, (t + 999) / 1000, 0);
}

static void ws_finish_close(struct http_ws *ws)
{
    if (!ws->handed || ws->closing || ws->finishing)
        return;
    ws->finishing = true;
    (void)http_progress_at(&ws->wp, &ws->tcp, clock_now()); /* the base of the close wait */
    if (ws->in.len && !ws->peer_closed) /* frames read and not yet handled: dropped */
        ws_drop_until_close(ws, NULL, 0);
    (void)uv_timer_start(&ws->timer, on_ws_timer, WS_CLOSE_WAIT, 0);
    ws_update_read(ws); /* the peer is read (and dropped) until its end */
    if (uv_shutdown(&ws->shutdown, (uv_stream_t *)&ws->tcp, on_ws_shutdown) < 0)
        ws_teardown(ws);
}

void http_ws_close(struct http_ws *ws, uint16_t code, const char *reason)
{
    if (ws->close_sent || ws->closing)
        return;
    uint8_t payload[125];
    size_t rl = reason ? strlen(reason) : 0;
    rl = rl > sizeof(payload) - 2 ? sizeof(payload) - 2 : rl;
    payload[0] = (uint8_t)(code >> 8);
    payload[1] = (uint8_t)code;
    if (rl)
        memcpy(payload + 2, reason, rl);
    uint8_t h[HTTP_WS_MAX_HEADER];
    size_t hl = http_ws_build_header(HTTP_WS_CLOSE, true, rl + 2, NULL, h);
    (void)ws_write_raw(ws, h, hl, payload, rl + 2);
    ws->close_sent = true;
    if (!ws->close_code)
        ws->close_code = code;
    ws_finish_close(ws);
}

static void ws_deliver(struct http_ws *ws, uint8_t opcode, const uint8_t *p, size_t n)
{
    if (opcode == HTTP_WS_TEXT && !utf8_valid(p, n)) { /* RFC 6455 8.1 */
        http_ws_close(ws, 1007, "text message is not UTF-8");
        return;
    }
    if (!ws->got_message) {
        ws->got_message = true;
        if (ws->o.first_message_timeout && !ws->close_sent) {
            (void)uv_timer_stop(&ws->timer);
            ws_arm(ws, false);
        }
    }
    ws->o.ops->message(ws, opcode, str_make((const char *)p, n), ws->o.ctx);
}

static void ws_on_close_frame(struct http_ws *ws, const uint8_t *p, size_t n)
{
    uint16_t code;
    ws->peer_closed = true;
    if (http_ws_check_close(p, n, &code) < 0) {
        ws->close_code = 1002;
        if (!ws->close_sent)
            http_ws_close(ws, 1002, "invalid close frame");
        else
            ws_finish_close(ws);
        return;
    }
    ws->close_code = code ? code : 1005;
    if (!ws->close_sent)
        http_ws_close(ws, code ? code : 1000, NULL);
    else
        ws_finish_close(ws);
}

/* Handles one complete frame (payload unmasked). Returns 0 or negative to stop. */
static int ws_frame(struct http_ws *ws, const struct http_ws_frame *f, const uint8_t *p)
{
    size_t n = (size_t)f->len;
    switch (f->opcode) {
    case HTTP_WS_PING:
        (void)http_ws_send(ws, HTTP_WS_PONG, p, n); /* a full queue: see ws_process */
        return 0;
    case HTTP_WS_PONG:
        return 0;
    case HTTP_WS_CLOSE:
        ws_on_close_frame(ws, p, n);
        return -ECONNRESET;
    case HTTP_WS_CONT:
        if (!ws->msg_opcode || buf_append(&ws->msg, p, n) < 0)
            return ws->msg_opcode ? -E2BIG : -EPROTO;
        if (f->fin) {
            uint8_t op = ws->msg_opcode;
            ws->msg_opcode = 0;
            ws_deliver(ws, op, (const uint8_t *)ws->msg.data, ws->msg.len);
            buf_reset(&ws->msg);
        }
        return 0;
    default:
        if (ws->msg_opcode)
            return -EPROTO; /* a new message inside a fragmented one */
        if (f->fin) {
            ws_deliver(ws, f->opcode, p, n);
            return 0;
        }
        ws->msg_opcode = f->opcode;
        return buf_append(&ws->msg, p, n) < 0 ? -E2BIG : 0;
    }
}

static void ws_process(struct http_ws *ws)
{
    while (!ws->closing && !ws->close_sent && !ws->paused && !ws->backlogged && ws->in.len) {
        struct http_ws_frame f;
        int r =
            http_ws_parse_header((const uint8_t *)ws->in.data, ws->in.len, ws->o.max_message, &f);
        if (r == 0)
            return;
        if (r > 0 && !f.masked)
            r = -EPROTO; /* clients must mask */
        if (r < 0) {
            http_ws_close(ws, r == -E2BIG ? 1009 : 1002, NULL);
            return;
        }
        if (ws->in.len - f.header_len < f.len)
            return;
        uint8_t *payload = (uint8_t *)ws->in.data + f.header_len;
        http_ws_unmask(payload, (size_t)f.len, f.mask, 0);
        r = ws_frame(ws, &f, payload);
        if (ws->closing || ws->finishing)
            return; /* the close took what was read, this frame too (ws_drop_until_close) */
        /* The frame's answers (pongs, or what the handler sent) filled the queue: a peer
         * that sends without reading gets no more frames read until it drains. */
        if (ws->queued >= ws->o.write_queue)
            ws->backlogged = true;
        buf_consume(&ws->in, f.header_len + (size_t)f.len);
        if (r == -E2BIG || r == -EPROTO)
            http_ws_close(ws, r == -E2BIG ? 1009 : 1002, NULL);
        if (r < 0)
            return;
    }
    if (ws->backlogged)
        ws_update_read(ws);
}

static void on_ws_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)h;
    (void)suggested;
    static _Thread_local char chunk[64 * 1024]; /* per loop thread; consumed in on_ws_read */
    *b = uv_buf_init(chunk, sizeof(chunk));
}

static void on_ws_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct http_ws *ws = s->data;
    if (n == 0 || ws->closing)
        return;
    if (ws->finishing) {
        if (n > 0) {
            ws_drop_until_close(ws, b->base, (size_t)n);
            return;
        }
        ws->peer_eof = true;
        ws_update_read(ws);
        if (ws->shut || n != UV_EOF)
            ws_teardown(ws);
        return; /* else the shutdown's completion closes it, or the timer */
    }
    if (n < 0) {
        if (!ws->close_code)
            ws->close_code = 1006;
        ws_teardown(ws);
        return;
    }
    if (buf_append(&ws->in, b->base, (size_t)n) < 0) {
        http_ws_close(ws, 1009, NULL);
        return;
    }
    ws_arm(ws, false);
    ws_process(ws);
}

/* After our close: the peer's frames are read and dropped until its close frame, after
 * which nothing more comes and the socket may be closed without a reset once ours has
 * gone (RFC 6455: the server closes the connection first). */
static void ws_drop_until_close(struct http_ws *ws, const char *p, size_t n)
{
    struct http_ws_frame f;
    if (ws->peer_closed || ws->discard || (n && buf_append(&ws->in, p, n) < 0)) {
        ws->discard = !ws->peer_closed; /* more than a frame's worth: frames not followed */
        buf_reset(&ws->in);
        return;
    }
    while (!ws->peer_closed) {
        int r =
            http_ws_parse_header((const uint8_t *)ws->in.data, ws->in.len, ws->o.max_message, &f);
        if (r == 0 || (r > 0 && ws->in.len - f.header_len < f.len))
            return;
        if (r < 0) {
            /* the frame that made us close (1002, 1009) or garbage after it: its end is
             * not findable, so all is dropped until the peer's end or the timer, while
             * what we queued (the close frame too) still goes out */
            ws->discard = true;
            buf_reset(&ws->in);
            return;
        }
        ws->peer_closed = f.opcode == HTTP_WS_CLOSE;
        buf_consume(&ws->in, f.header_len + (size_t)f.len);
    }
    buf_reset(&ws->in);
    if (ws->shut)
        ws_teardown(ws);
}

static void ws_update_read(struct http_ws *ws)
{
    bool want = ws->handed && !ws->closing &&
                (ws->finishing ? !ws->peer_eof : !ws->close_sent && !ws->paused && !ws->backlogged);
    if (want && !ws->reading)
        ws->reading = uv_read_start((uv_stream_t *)&ws->tcp, on_ws_alloc, on_ws_read) == 0;
    else if (!want && ws->reading) {
        (void)uv_read_stop((uv_stream_t *)&ws->tcp);
        ws->reading = false;
    }
}

/* Stops reading the peer while the write queue is at its limit (on), or resumes (off). */
static void ws_set_backlogged(struct http_ws *ws, bool on)
{
    ws->backlogged = on;
    ws_update_read(ws);
    if (!on)
        ws_process(ws);
}

void http_ws_pause(struct http_ws *ws, bool pause)
{
    ws->paused = pause;
    ws_update_read(ws);
    if (!pause)
        ws_process(ws);
}

static void on_upgraded(void *ctx, int status, uv_tcp_t *tcp, struct str pending)
{
    struct http_ws *ws = ctx;
    (void)tcp;
    if (status < 0) {
        ws->o.ops->closed(ws, 1006, ws->o.ctx);
        ws_free(ws);
        return;
    }
    ws->handed = true;
    ws->tcp.data = ws;
    (void)uv_timer_init(ws->tcp.loop, &ws->timer);
    (void)uv_timer_init(ws->tcp.loop, &ws->stall);
    ws->timer.data = ws->stall.data = ws;
    ws->handles = 3;
    (void)uv_tcp_nodelay(&ws->tcp, 1);
    if (pending.len)
        (void)buf_append(&ws->in, pending.p, pending.len);
    if (ws->pre.len) {
        struct buf pre = ws->pre;
        buf_init(&ws->pre, pre.limit);
        (void)ws_write_raw(ws, pre.data, pre.len, NULL, 0);
        buf_done(&pre);
    }
    if (ws->close_sent) {
        ws_finish_close(ws);
        return;
    }
    ws_arm(ws, true);
    ws_update_read(ws);
    ws_process(ws);
}

int http_ws_accept(struct http_req *req, const struct http_ws_opts *opts, struct http_ws **ret)
{
    const char *msg;
    if (!opts->ops || !opts->ops->message || !opts->ops->closed ||
        http_ws_check_request(req, &msg) < 0)
        return -EINVAL;
    char accept[HTTP_WS_ACCEPT_LEN + 1];
    http_ws_accept_key(str_trim(http_req_header(req, "Sec-WebSocket-Key")), accept);
    int r = http_resp_header_add(req, "Sec-WebSocket-Accept", accept);
    if (r < 0)
        return r;
    struct http_ws *ws = XNEW(struct http_ws);
    ws->o = *opts;
    if (!ws->o.max_message)
        ws->o.max_message = 1024 * 1024;
    if (!ws->o.write_queue)
        ws->o.write_queue = 4 * 1024 * 1024;
    buf_init(&ws->in, ws->o.max_message + HTTP_WS_MAX_HEADER + 64 * 1024);
    buf_init(&ws->msg, ws->o.max_message);
    buf_init(&ws->pre, ws->o.write_queue * 2);
    struct http_upgrade_opts uo = {
        .protocol = "websocket", .tcp = &ws->tcp, .fn = on_upgraded, .ctx = ws};
    r = http_req_upgrade(req, &uo);
    if (r < 0) {
        ws_free(ws);
        return r;
    }
    *ret = ws;
    return 0;
}
