/* SPDX-License-Identifier: Apache-2.0 */
/* Standard base64 encoding and decoding into bounded buffers. */
#include "common/base64.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Sextet value of c, or -1 outside the alphabet. */
static int value_of(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Drops what was appended after start (a failed call leaves out as it was). */
static int roll_back(struct buf *out, size_t start, int r)
{
    out->len = start;
    if (out->data)
        out->data[start] = '\0';
    return r;
}

int base64_encode(const void *p, size_t n, struct buf *out)
{
    const unsigned char *s = p;
    size_t start = out->len;
    if (buf_puts(out, "") < 0)
        return -E2BIG;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)s[i + 1] << 8;
        if (i + 2 < n)
            v |= s[i + 2];
        char q[4] = {alphabet[(v >> 18) & 63], alphabet[(v >> 12) & 63],
                     i + 1 < n ? alphabet[(v >> 6) & 63] : '=', i + 2 < n ? alphabet[v & 63] : '='};
        if (buf_append(out, q, sizeof(q)) < 0)
            return roll_back(out, start, -E2BIG);
    }
    return 0;
}

/* Emits the bytes held in acc for n (2..4) collected sextets. */
static int flush(struct buf *out, uint32_t acc, int n)
{
    unsigned char b[3];
    acc <<= 6 * (4 - n);
    b[0] = (unsigned char)(acc >> 16);
    b[1] = (unsigned char)(acc >> 8);
    b[2] = (unsigned char)acc;
    return buf_append(out, b, (size_t)(n - 1));
}

int base64_decode(const char *s, size_t len, struct buf *out)
{
    size_t start = out->len;
    uint32_t acc = 0;
    int n = 0, pad = 0, r = buf_puts(out, "");
    for (size_t i = 0; i < len && r >= 0; i++) {
        if (is_space(s[i]))
            continue;
        if (s[i] == '=') {
            pad++;
            continue;
        }
        int v = value_of(s[i]);
        if (v < 0 || pad > 0)
            return roll_back(out, start, -EINVAL);
        acc = (acc << 6) | (uint32_t)v;
        if (++n == 4) {
            r = flush(out, acc, 4);
            acc = 0;
            n = 0;
        }
    }
    if (r >= 0 && (n == 1 || pad > 2 || (pad > 0 && n == 0)))
        r = -EINVAL;
    if (r >= 0 && n > 1)
        r = flush(out, acc, n);
    return r < 0 ? roll_back(out, start, r) : 0;
}
