/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded growable byte buffer. */
#include "common/buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/xalloc.h"

void buf_init(struct buf *b, size_t limit)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->limit = limit;
}

void buf_done(struct buf *b)
{
    XFREE(b->data);
    b->len = 0;
    b->cap = 0;
}

void buf_reset(struct buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

/* Makes room for n more bytes plus the NUL. */
static int reserve(struct buf *b, size_t n)
{
    if (n > b->limit || b->len > b->limit - n)
        return -E2BIG;
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > (SIZE_MAX / 2) ? need : cap * 2;
    /* Never allocate more than the limit allows (limit + 1 would wrap at SIZE_MAX). */
    if (b->limit < SIZE_MAX && cap > b->limit + 1)
        cap = b->limit + 1;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
    return 0;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
    int r = reserve(b, n);
    if (r < 0)
        return r;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int buf_puts(struct buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

int buf_putc(struct buf *b, char c)
{
    return buf_append(b, &c, 1);
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return -EINVAL;
    int r = reserve(b, (size_t)n);
    if (r < 0)
        return r;
    (void)vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = buf_vprintf(b, fmt, ap);
    va_end(ap);
    return r;
}

void buf_consume(struct buf *b, size_t n)
{
    if (n >= b->len) {
        buf_reset(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

char *buf_steal(struct buf *b)
{
    char *s = b->data ? b->data : xstrdup("");
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    return s;
}

const char *buf_str(const struct buf *b)
{
    return b->data ? b->data : "";
}
