/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for sandboxd's streaming multipart/form-data parser (uploads). The
 * input is "boundary\n" then the body; the first byte also picks a piece size. The body is
 * fed whole and again in pieces of that size. Invariants: both feedings report the same
 * parts, data and result; accepted data never exceeds the body; a result of 1 (closing
 * delimiter seen) comes with every accepted part ended.
 * A first line "Content-Type: VALUE" takes the boundary from the header value as the
 * upload endpoints do (sbd_multipart_boundary): a value that is not multipart/form-data
 * is -ENOENT; an accepted boundary has 1 to 70 bytes and, when it is a plain token, comes
 * back the same from a canonical header. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/xalloc.h"
#include "sandboxd/multipart.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct log {
    struct buf events; /* "B<name>|<filename>\n", data bytes, "E\n" */
    size_t data_len;
    int open;
};

static int on_begin(void *ctx, struct str name, struct str filename)
{
    struct log *l = ctx;
    (void)buf_append(&l->events, "B", 1);
    (void)buf_append(&l->events, name.p, name.len);
    (void)buf_append(&l->events, "|", 1);
    if (filename.p)
        (void)buf_append(&l->events, filename.p, filename.len);
    (void)buf_append(&l->events, "\n", 1);
    if (!str_eq_c(name, "file"))
        return 0;
    l->open++;
    return 1;
}

static int on_data(void *ctx, struct str data)
{
    struct log *l = ctx;
    ASSERT(l->open == 1);
    l->data_len += data.len;
    (void)buf_append(&l->events, data.p, data.len);
    return 0;
}

static int on_end(void *ctx)
{
    struct log *l = ctx;
    ASSERT(l->open == 1);
    l->open--;
    (void)buf_append(&l->events, "E\n", 2);
    return 0;
}

/* Feeds body in pieces of step bytes (0: whole). Returns the parser's last result. */
static int run(const char *boundary, struct str body, size_t step, struct log *l)
{
    struct sbd_multipart m;
    buf_init(&l->events, 16u << 20);
    sbd_multipart_init(&m, boundary, on_begin, on_data, on_end, l);
    int r = 0;
    size_t off = 0;
    do {
        size_t n = step && body.len - off > step ? step : body.len - off;
        bool last = off + n == body.len;
        r = sbd_multipart_feed(&m, str_make(body.p + off, n), last);
        off += n;
        if (r != 0)
            break;
    } while (off < body.len);
    sbd_multipart_done(&m);
    return r;
}

/* A boundary of token characters only must survive a canonical header unchanged. */
static void check_roundtrip(const char *b)
{
    if (strspn(b, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'+_-.") !=
        strlen(b))
        return;
    char *ct = xasprintf("multipart/form-data; boundary=%s", b);
    char *again = NULL;
    ASSERT(sbd_multipart_boundary(str_c(ct), &again) == 0 && strcmp(again, b) == 0);
    xfree(again);
    xfree(ct);
}

/* The boundary named by the first line (see the top), new; NULL to skip the input. */
static char *boundary_of(struct str line)
{
    static const char hdr[] = "Content-Type: ";
    if (line.len >= sizeof(hdr) - 1 && memcmp(line.p, hdr, sizeof(hdr) - 1) == 0) {
        struct str ct = str_make(line.p + sizeof(hdr) - 1, line.len - (sizeof(hdr) - 1));
        if (memchr(ct.p, '\0', ct.len) || memchr(ct.p, '\r', ct.len))
            return NULL; /* a header value holds neither (the HTTP parser refuses them) */
        char *b = NULL;
        int r = sbd_multipart_boundary(ct, &b);
        ASSERT((r == 0 || r == -ENOENT || r == -EINVAL) && (r == 0) == (b != NULL));
        if (b) {
            ASSERT(strlen(b) >= 1 && strlen(b) <= 70);
            check_roundtrip(b);
        }
        return b;
    }
    if (line.len == 0 || line.len > 70 || memchr(line.p, '\0', line.len))
        return NULL;
    return xstrndup(line.p, line.len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *nl = size ? memchr(p, '\n', size) : NULL;
    char *boundary = nl ? boundary_of(str_make(p, (size_t)(nl - p))) : NULL;
    if (!boundary)
        return 0;
    struct str body = str_make(nl + 1, size - (size_t)(nl - p) - 1);
    size_t step = 1 + (size_t)(data[0] % 13);
    struct log whole = {0}, pieces = {0};
    int a = run(boundary, body, 0, &whole);
    int b = run(boundary, body, step, &pieces);
    ASSERT(a == b);
    ASSERT(whole.data_len <= body.len);
    ASSERT(whole.events.len == pieces.events.len);
    ASSERT(whole.events.len == 0 ||
           memcmp(whole.events.data, pieces.events.data, whole.events.len) == 0);
    if (a == 1)
        ASSERT(whole.open == 0);
    buf_done(&whole.events);
    buf_done(&pieces.events);
    xfree(boundary);
    return 0;
}
