/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the WebSocket frame codec: the input is a stream of client frames,
 * taken apart the way the server connection does (header, unmask, control frames, close
 * payloads, fragment reassembly under a message limit). Invariants: a parsed header lies
 * inside the input and rebuilds to the same header; control frames are final and at most
 * 125 bytes; close payloads are accepted only with a valid code and a UTF-8 reason;
 * reassembled messages stay within the limit. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/xalloc.h"
#include "http/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MESSAGE 4096

static void check_header(const uint8_t *p, size_t n, int h, const struct http_ws_frame *f)
{
    ASSERT((size_t)h == f->header_len && (size_t)h <= n && h >= 2 && h <= HTTP_WS_MAX_HEADER);
    ASSERT(f->len <= MAX_MESSAGE);
    if (f->opcode & 0x8)
        ASSERT(f->fin && f->len <= 125);
    uint8_t again[HTTP_WS_MAX_HEADER];
    size_t hl = http_ws_build_header(f->opcode, f->fin, f->len, f->masked ? f->mask : NULL, again);
    struct http_ws_frame g;
    ASSERT(http_ws_parse_header(again, hl, MAX_MESSAGE, &g) == (int)hl);
    ASSERT(g.opcode == f->opcode && g.len == f->len && !g.fin == !f->fin);
    (void)p;
    ASSERT(hl <= (size_t)h); /* a peer may use a longer length form than needed */
}

static void check_close(const uint8_t *p, size_t n)
{
    uint16_t code = 1;
    int r = http_ws_check_close(p, n, &code);
    ASSERT(r == 0 || r == -EPROTO);
    if (r < 0)
        return;
    ASSERT(n == 0 ? code == 0 : n >= 2 && code == (p[0] << 8 | p[1]));
    ASSERT(code != 1005 && code != 1006 && code != 1015);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *in = xmalloc(size ? size : 1);
    memcpy(in, data, size);
    struct buf msg;
    buf_init(&msg, MAX_MESSAGE);
    bool in_message = false;
    size_t off = 0;
    while (off < size) {
        struct http_ws_frame f;
        int h = http_ws_parse_header(in + off, size - off, MAX_MESSAGE, &f);
        if (h <= 0) {
            ASSERT(h == 0 || h == -EPROTO || h == -E2BIG);
            break;
        }
        check_header(in + off, size - off, h, &f);
        if (size - off - (size_t)h < f.len)
            break;
        uint8_t *payload = in + off + h;
        if (f.masked)
            http_ws_unmask(payload, (size_t)f.len, f.mask, 0);
        off += (size_t)h + (size_t)f.len;
        if (f.opcode == HTTP_WS_CLOSE) {
            check_close(payload, (size_t)f.len);
            break;
        }
        if (f.opcode & 0x8)
            continue;
        if ((f.opcode == HTTP_WS_CONT) != in_message)
            break; /* the server closes with 1002 */
        if (buf_append(&msg, payload, (size_t)f.len) < 0)
            break; /* over the limit: 1009 */
        ASSERT(msg.len <= MAX_MESSAGE);
        in_message = !f.fin;
        if (f.fin)
            buf_reset(&msg);
    }
    buf_done(&msg);
    xfree(in);
    return 0;
}
