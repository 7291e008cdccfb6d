/* SPDX-License-Identifier: Apache-2.0 */
/* Incremental chunked transfer-coding decoder (RFC 9112 7.1): a byte-at-a-time state
 * machine for the framing, zero-copy runs for the data. Trailers are validated for
 * size and skipped. */
#include <errno.h>

#include "common/limits.h"
#include "http/parse.h"

enum {
    CH_SIZE = 0, /* hex digits of the chunk size */
    CH_EXT,      /* chunk extension, up to CR */
    CH_SIZE_LF,  /* LF after the size line */
    CH_DATA,     /* chunk data */
    CH_DATA_CR,  /* CR after the data */
    CH_DATA_LF,  /* LF after the data */
    CH_TRAILER,  /* a trailer line (or the final empty line) */
    CH_TRAILER_LF,
    CH_FINAL_LF, /* LF of the empty line that ends the body */
    CH_DONE,
};

static const char too_long[] = "chunk size line too long";

static int bad(struct http_parse_err *e, int status, const char *msg, size_t pos)
{
    if (e)
        *e = (struct http_parse_err){.status = status, .msg = msg, .pos = pos};
    return status == 400 && msg != too_long ? -EPROTO : -E2BIG;
}

void http_chunked_init(struct http_chunked *c)
{
    *c = (struct http_chunked){.state = CH_SIZE};
}

static int hex_value(unsigned char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

static int step_size(struct http_chunked *c, unsigned char ch, size_t pos, struct http_parse_err *e)
{
    int d = hex_value(ch);
    if (d >= 0) {
        if (c->remaining > (UINT64_MAX >> 4))
            return bad(e, 400, "chunk size overflow", pos);
        c->remaining = (c->remaining << 4) | (uint64_t)d;
        return 0;
    }
    /* line_len already counts ch: digits are line_len - 1 */
    if (c->line_len == 1)
        return bad(e, 400, "invalid chunk size", pos);
    if (ch == ';')
        c->state = CH_EXT;
    else if (ch == '\r')
        c->state = CH_SIZE_LF;
    else
        return bad(e, 400, "invalid chunk size", pos);
    return 0;
}

static int step_ext(struct http_chunked *c, unsigned char ch, size_t pos, struct http_parse_err *e)
{
    if (ch == '\r')
        c->state = CH_SIZE_LF;
    else if (ch != '\t' && (ch < 0x20 || ch == 0x7f))
        return bad(e, 400, "invalid chunk extension", pos);
    return 0;
}

/* Expects exactly want, then moves to next. */
static int expect(struct http_chunked *c, unsigned char ch, unsigned char want, int next,
                  size_t pos, struct http_parse_err *e)
{
    if (ch != want)
        return bad(e, 400, "invalid chunk framing", pos);
    c->state = next;
    c->line_len = 0;
    return 0;
}

static int step_trailer(struct http_chunked *c, unsigned char ch, size_t pos,
                        struct http_parse_err *e)
{
    if (++c->trailer_bytes > LIMIT_HTTP_HEADER_BYTES)
        return bad(e, 431, "trailer section too large", pos);
    if (c->line_len == 1) {
        if (ch == '\r') {
            c->state = CH_FINAL_LF;
            return 0;
        }
        if (!http_is_tchar(ch))
            return bad(e, 400, "invalid trailer field", pos);
        if (++c->trailers > LIMIT_HTTP_HEADERS)
            return bad(e, 431, "too many trailer fields", pos);
        return 0;
    }
    if (ch == '\r')
        c->state = CH_TRAILER_LF;
    else if (ch != '\t' && (ch < 0x20 || ch == 0x7f))
        return bad(e, 400, "invalid trailer field", pos);
    return 0;
}

static int step(struct http_chunked *c, unsigned char ch, size_t pos, struct http_parse_err *e)
{
    c->line_len++;
    if ((c->state == CH_SIZE || c->state == CH_EXT) && c->line_len > LIMIT_HTTP_CHUNK_LINE)
        return bad(e, 400, too_long, pos);
    switch (c->state) {
    case CH_SIZE:
        return step_size(c, ch, pos, e);
    case CH_EXT:
        return step_ext(c, ch, pos, e);
    case CH_SIZE_LF:
        return expect(c, ch, '\n', c->remaining ? CH_DATA : CH_TRAILER, pos, e);
    case CH_DATA_CR:
        return expect(c, ch, '\r', CH_DATA_LF, pos, e);
    case CH_DATA_LF:
        return expect(c, ch, '\n', CH_SIZE, pos, e);
    case CH_TRAILER:
        return step_trailer(c, ch, pos, e);
    case CH_TRAILER_LF:
        return expect(c, ch, '\n', CH_TRAILER, pos, e);
    case CH_FINAL_LF:
        return expect(c, ch, '\n', CH_DONE, pos, e);
    default:
        return bad(e, 400, "invalid chunk state", pos);
    }
}

int http_chunked_feed(struct http_chunked *c, const char *p, size_t len, size_t *ret_used,
                      struct str *ret_data, struct http_parse_err *reterr)
{
    size_t i = 0;
    while (i < len && c->state != CH_DONE) {
        if (c->state == CH_DATA) {
            size_t n = len - i < c->remaining ? len - i : (size_t)c->remaining;
            c->remaining -= n;
            if (c->remaining == 0)
                c->state = CH_DATA_CR;
            *ret_used = i + n;
            *ret_data = str_make(p + i, n);
            return 0;
        }
        int r = step(c, (unsigned char)p[i], i, reterr);
        if (r < 0)
            return r;
        i++;
    }
    *ret_used = i;
    *ret_data = str_make(p + i, 0);
    return c->state == CH_DONE ? 1 : 0;
}
