/* SPDX-License-Identifier: Apache-2.0 */
/* Newline frame splitter with a bounded carry-over buffer. */
#include "kube/linebuf.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "common/limits.h"

void linebuf_init(struct linebuf *lb, size_t max_frame)
{
    lb->max_frame = max_frame ? max_frame : LIMIT_KUBE_WATCH_FRAME;
    buf_init(&lb->tail, lb->max_frame);
}

void linebuf_done(struct linebuf *lb)
{
    if (!lb)
        return;
    buf_done(&lb->tail);
}

void linebuf_reset(struct linebuf *lb)
{
    buf_reset(&lb->tail);
}

size_t linebuf_pending(const struct linebuf *lb)
{
    return lb->tail.len;
}

static bool is_blank(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return false;
    return true;
}

/* Delivers one line (without its "\n"): strips one trailing "\r", skips blank lines. */
static int deliver(const char *p, size_t len, linebuf_frame_fn *fn, void *ctx)
{
    if (is_blank(p, len))
        return 0;
    if (p[len - 1] == '\r')
        len--;
    return fn(ctx, p, len);
}

/* Completes the carried-over frame with the first len bytes of the chunk. */
static int finish_tail(struct linebuf *lb, const char *p, size_t len, linebuf_frame_fn *fn,
                       void *ctx)
{
    int r = buf_append(&lb->tail, p, len);
    if (r < 0)
        return r;
    r = deliver(lb->tail.data, lb->tail.len, fn, ctx);
    buf_reset(&lb->tail);
    return r;
}

static int feed_lines(struct linebuf *lb, const char *data, size_t len, linebuf_frame_fn *fn,
                      void *ctx)
{
    const char *p = data, *end = data + len;
    int r;

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            return buf_append(&lb->tail, p, (size_t)(end - p));
        size_t n = (size_t)(nl - p);
        if (lb->tail.len > 0)
            r = finish_tail(lb, p, n, fn, ctx);
        else if (n > lb->max_frame)
            r = -E2BIG;
        else
            r = deliver(p, n, fn, ctx);
        if (r < 0)
            return r;
        p = nl + 1;
    }
    return 0;
}

int linebuf_feed(struct linebuf *lb, const char *data, size_t len, linebuf_frame_fn *fn, void *ctx)
{
    int r = feed_lines(lb, data, len, fn, ctx);
    if (r < 0)
        linebuf_reset(lb);
    return r;
}
