/* SPDX-License-Identifier: Apache-2.0 */
/* Percent-encoding and decoding into bounded buffers. */
#include "common/pct.h"

#include <errno.h>
#include <string.h>

static bool unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Drops what was appended after start (a failed call leaves out as it was). */
static int roll_back(struct buf *out, size_t start, int r)
{
    out->len = start;
    if (out->data)
        out->data[start] = '\0';
    return r;
}

int pct_encode(struct buf *out, const char *s, const char *keep)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t start = out->len;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int r;
        if (unreserved(*p) || (keep && strchr(keep, *p))) {
            r = buf_putc(out, (char)*p);
        } else {
            char enc[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            r = buf_append(out, enc, sizeof(enc));
        }
        if (r < 0)
            return roll_back(out, start, r);
    }
    return 0;
}

int pct_decode(struct str in, bool plus_space, struct buf *out)
{
    size_t start = out->len;
    int r = buf_puts(out, "");
    for (size_t i = 0; i < in.len && r >= 0; i++) {
        char c = in.p[i];
        if (c == '%') {
            int hi = i + 2 < in.len ? hex_value(in.p[i + 1]) : -1;
            int lo = i + 2 < in.len ? hex_value(in.p[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                return roll_back(out, start, -EINVAL);
            c = (char)(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus_space) {
            c = ' ';
        }
        r = buf_putc(out, c);
    }
    return r < 0 ? roll_back(out, start, r) : 0;
}
