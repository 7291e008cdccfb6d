/* SPDX-License-Identifier: Apache-2.0 */
#include "common/log_json.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Length of the valid UTF-8 sequence at s[0..n), or 0 when it is not one (overlongs,
 * surrogates and code points past U+10FFFF are invalid). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len;
    uint32_t cp;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2, cp = s[0] & 0x1fu;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        len = 3, cp = s[0] & 0x0fu;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4, cp = s[0] & 0x07u;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3fu);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

static int put_escape(struct buf *out, unsigned char c)
{
    static const char hex[] = "0123456789abcdef";
    switch (c) {
    case '"':
        return buf_puts(out, "\\\"");
    case '\\':
        return buf_puts(out, "\\\\");
    case '\n':
        return buf_puts(out, "\\n");
    case '\r':
        return buf_puts(out, "\\r");
    case '\t':
        return buf_puts(out, "\\t");
    default: {
        char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        return buf_append(out, e, sizeof(e));
    }
    }
}

int log_json_string(struct buf *out, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0;
    int r = buf_putc(out, '"');
    while (r >= 0 && i < n) {
        size_t len = utf8_len(u + i, n - i);
        bool plain =
            len > 1 || (len == 1 && u[i] >= 0x20 && u[i] != 0x7f && u[i] != '"' && u[i] != '\\');
        if (plain) {
            i += len;
            continue;
        }
        r = buf_append(out, s + run, i - run);
        if (r >= 0)
            r = put_escape(out, u[i]); /* control, quote, backslash or a stray byte */
        run = ++i;
    }
    if (r >= 0)
        r = buf_append(out, s + run, n - run);
    return r < 0 ? r : buf_putc(out, '"');
}

/* Appends a member name: the bytes of key that may name a logfmt field (letters,
 * digits, '_', '-', '.', '/'), any other byte as '_', so a key never needs escaping
 * (and no parser meets a NUL or an invalid byte in one); an empty key is "_". */
static int put_key(struct buf *out, const char *key, size_t klen)
{
    int r = buf_putc(out, '"');
    for (size_t i = 0; i < klen && r >= 0; i++) {
        char c = key[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.' || c == '/';
        r = buf_putc(out, ok ? c : '_');
    }
    if (r >= 0 && klen == 0)
        r = buf_putc(out, '_');
    return r < 0 ? r : buf_putc(out, '"');
}

static int put_member(struct buf *out, const char *key, size_t klen, const char *v, size_t vlen)
{
    int r = buf_putc(out, ',');
    if (r >= 0)
        r = put_key(out, key, klen);
    if (r >= 0)
        r = buf_putc(out, ':');
    return r < 0 ? r : log_json_string(out, v, vlen);
}

/* Reads a quoted logfmt value at *p (past the opening quote) into val, undoing the
 * escapes log.h callers and log.c write (\" \\ \n \t \xHH); stops at the closing quote
 * or the end. */
static int read_quoted(struct str *p, struct buf *val)
{
    int r = 0;
    while (p->len && r >= 0) {
        char c = *p->p++;
        p->len--;
        if (c == '"')
            break;
        if (c == '\\' && p->len) {
            char e = *p->p++;
            p->len--;
            if (e == 'n')
                c = '\n';
            else if (e == 't')
                c = '\t';
            else if (e == 'x' && p->len >= 2 && sscanf(p->p, "%2hhx", (unsigned char *)&c) == 1) {
                p->p += 2;
                p->len -= 2;
            } else
                c = e;
        }
        r = buf_putc(val, c);
    }
    return r;
}

/* Parses logfmt fields: "k=v k2=\"v 2\" flag". A token without '=' becomes a member with
 * an empty value. */
static int put_fields(struct buf *out, struct str f)
{
    struct buf val;
    int r = 0;
    buf_init(&val, f.len + 1);
    while (r >= 0 && f.len) {
        size_t k = 0;
        if (*f.p == ' ') {
            f.p++, f.len--;
            continue;
        }
        while (k < f.len && f.p[k] != '=' && f.p[k] != ' ')
            k++;
        struct str key = {f.p, k};
        f.p += k, f.len -= k;
        buf_reset(&val);
        if (f.len && *f.p == '=') {
            f.p++, f.len--;
            if (f.len && *f.p == '"') {
                f.p++, f.len--;
                r = read_quoted(&f, &val);
            } else {
                size_t v = 0;
                while (v < f.len && f.p[v] != ' ')
                    v++;
                r = buf_append(&val, f.p, v);
                f.p += v, f.len -= v;
            }
        }
        if (r >= 0)
            r = put_member(out, key.p, key.len, val.data ? val.data : "", val.len);
    }
    buf_done(&val);
    return r;
}

static int put_ts(struct buf *out, long long ts_ns)
{
    time_t sec = (time_t)(ts_ns / 1000000000LL);
    struct tm tm;
    (void)gmtime_r(&sec, &tm);
    return buf_printf(out, "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ\"", tm.tm_year + 1900,
                      tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                      ts_ns % 1000000000LL);
}

int log_json_line(struct buf *out, long long ts_ns, const char *level, const char *comp,
                  struct str msg, const char *err, struct str fields)
{
    int r = put_ts(out, ts_ns);
    if (r >= 0)
        r = put_member(out, "level", 5, level, strlen(level));
    if (r >= 0 && comp)
        r = put_member(out, "logger", 6, comp, strlen(comp));
    if (r >= 0)
        r = put_member(out, "msg", 3, msg.p ? msg.p : "", msg.len);
    if (r >= 0 && err)
        r = put_member(out, "err", 3, err, strlen(err));
    if (r >= 0 && fields.len)
        r = put_fields(out, fields);
    if (r >= 0)
        r = buf_puts(out, "}\n");
    return r;
}
