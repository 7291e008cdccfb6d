/* SPDX-License-Identifier: Apache-2.0 */
/* shlex.split and Python-compatible JSON/repr text (see shlex.h). */
#include "sandboxd/shlex.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

struct lexer {
    struct str s;
    size_t i;
    char **v;
    size_t n, cap;
    struct buf tok;
    bool in_tok;
};

static void push(struct lexer *l)
{
    if (l->n + 2 > l->cap) {
        l->cap = l->cap ? l->cap * 2 : 8;
        l->v = xreallocarray(l->v, l->cap, sizeof(char *));
    }
    l->v[l->n++] = xstrndup(l->tok.data ? l->tok.data : "", l->tok.len);
    l->v[l->n] = NULL;
    buf_reset(&l->tok);
    l->in_tok = false;
}

static int quoted(struct lexer *l, char q)
{
    for (l->i++; l->i < l->s.len; l->i++) {
        char c = l->s.p[l->i];
        if (c == q)
            return 0;
        if (q == '"' && c == '\\' && l->i + 1 < l->s.len &&
            (l->s.p[l->i + 1] == '"' || l->s.p[l->i + 1] == '\\'))
            c = l->s.p[++l->i];
        (void)buf_putc(&l->tok, c);
    }
    return -EINVAL;
}

static int lex_char(struct lexer *l, const char **msg)
{
    char c = l->s.p[l->i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        if (l->in_tok)
            push(l);
        return 0;
    }
    l->in_tok = true;
    if (c == '\'' || c == '"') {
        if (quoted(l, c) < 0)
            return *msg = "No closing quotation", -EINVAL;
        return 0;
    }
    if (c == '\\') {
        if (++l->i >= l->s.len)
            return *msg = "No escaped character", -EINVAL;
        c = l->s.p[l->i];
    }
    return buf_putc(&l->tok, c) < 0 ? -E2BIG : 0;
}

int sbd_shlex_split(struct str s, char ***ret, const char **ret_msg)
{
    struct lexer l = {.s = s};
    buf_init(&l.tok, s.len + 1);
    l.v = xcalloc(1, sizeof(char *));
    l.cap = 1;
    int r = 0;
    for (; r == 0 && l.i < s.len; l.i++)
        r = lex_char(&l, ret_msg);
    if (r == 0 && l.in_tok)
        push(&l);
    buf_done(&l.tok);
    if (r < 0) {
        sbd_shlex_free(l.v);
        return r;
    }
    *ret = l.v;
    return 0;
}

void sbd_shlex_free(char **v)
{
    for (char **p = v; p && *p; p++)
        xfree(*p);
    xfree(v);
}

int sbd_py_json_string(struct str s, struct buf *out)
{
    int r = buf_putc(out, '"');
    for (size_t i = 0; r == 0 && i < s.len; i++) {
        unsigned char c = (unsigned char)s.p[i];
        switch (c) {
        case '"':
            r = buf_puts(out, "\\\"");
            break;
        case '\\':
            r = buf_puts(out, "\\\\");
            break;
        case '\n':
            r = buf_puts(out, "\\n");
            break;
        case '\r':
            r = buf_puts(out, "\\r");
            break;
        case '\t':
            r = buf_puts(out, "\\t");
            break;
        case '\b':
            r = buf_puts(out, "\\b");
            break;
        case '\f':
            r = buf_puts(out, "\\f");
            break;
        default:
            r = c < 0x20 ? buf_printf(out, "\\u%04x", c) : buf_putc(out, (char)c);
            break;
        }
    }
    return r ? r : buf_putc(out, '"');
}

/* Positional text of digits d (no dot) times 10^(e - len(d) + 1), Python style. */
static int positional(const char *d, int e, struct buf *out)
{
    int n = (int)strlen(d), r = 0;
    if (e < 0) {
        r = buf_puts(out, "0.");
        for (int i = 0; r == 0 && i < -e - 1; i++)
            r = buf_putc(out, '0');
        return r ? r : buf_puts(out, d);
    }
    for (int i = 0; r == 0 && i <= e; i++)
        r = buf_putc(out, i < n ? d[i] : '0');
    if (r == 0)
        r = buf_putc(out, '.');
    return r ? r : buf_puts(out, n > e + 1 ? d + e + 1 : "0");
}

int sbd_py_float(double v, struct buf *out)
{
    char b[48], d[24];
    if (!isfinite(v))
        return buf_puts(out, "null");
    int p = 1;
    for (; p <= 17; p++) {
        (void)snprintf(b, sizeof(b), "%.*e", p - 1, v);
        if (strtod(b, NULL) == v)
            break;
    }
    const char *s = b;
    int r = 0;
    if (*s == '-') {
        r = buf_putc(out, '-');
        s++;
    }
    size_t k = 0;
    for (; *s && *s != 'e' && k + 1 < sizeof(d); s++)
        if (*s != '.')
            d[k++] = *s;
    d[k] = '\0';
    while (k > 1 && d[k - 1] == '0')
        d[--k] = '\0';
    int e = (int)strtol(s + 1, NULL, 10);
    if (r == 0 && e >= -4 && e < 16)
        return positional(d, e, out);
    if (r == 0)
        r = buf_printf(out, "%c%s%s", d[0], k > 1 ? "." : "", d + 1);
    return r ? r : buf_printf(out, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
}

static int repr_str(const char *s, struct buf *out)
{
    char q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
    int r = buf_putc(out, q);
    for (; r == 0 && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\' || c == (unsigned char)q)
            r = buf_printf(out, "\\%c", c);
        else if (c == '\n')
            r = buf_puts(out, "\\n");
        else if (c == '\t')
            r = buf_puts(out, "\\t");
        else if (c == '\r')
            r = buf_puts(out, "\\r");
        else if (c < 0x20 || c == 0x7f)
            r = buf_printf(out, "\\x%02x", c);
        else
            r = buf_putc(out, (char)c);
    }
    return r ? r : buf_putc(out, q);
}

int sbd_py_repr_list(char *const *v, struct buf *out)
{
    int r = buf_putc(out, '[');
    for (size_t i = 0; r == 0 && v && v[i]; i++) {
        if (i)
            r = buf_puts(out, ", ");
        if (r == 0)
            r = repr_str(v[i], out);
    }
    return r ? r : buf_putc(out, ']');
}
