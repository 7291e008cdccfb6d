/* SPDX-License-Identifier: Apache-2.0 */
/* Output ring (see bgring.h): chunks, oldest first, in a circular array. A new append
 * of the same stream fills the free room of the newest chunk before a new one is made,
 * so a chatty process does not pay the per-chunk overhead for every read; when a new
 * chunk is made the previous one is shrunk to its length, so only the newest chunk ever
 * holds unused room and the charge (bytes + overhead per chunk) matches the memory. */
#include "sandboxd/bgring.h"

#include <string.h>

#include "common/xalloc.h"

#define RING_MIN_LIMIT (16u * 1024)
#define RING_CHUNK_MIN (4u * 1024) /* capacity of a chunk made for a small append */

struct chunk {
    uint64_t offset;
    size_t len, cap;
    int stream;
    char data[];
};

struct sbd_ring {
    /* the chunks, oldest first, in a circular array: v[(first + i) % nv], i < count
     * (lookups by offset are binary searches: a chatty reader of many tiny chunks does
     * not walk them all for each piece) */
    struct chunk **v;
    size_t nv, first, count;
    uint64_t start, end;
    size_t used, limit;
};

static struct chunk **slot(const struct sbd_ring *r, size_t i)
{
    return &r->v[(r->first + i) % r->nv];
}

static struct chunk *tail(const struct sbd_ring *r)
{
    return r->count ? *slot(r, r->count - 1) : NULL;
}

struct sbd_ring *sbd_ring_new(size_t limit)
{
    struct sbd_ring *r = XNEW(struct sbd_ring);
    r->limit = limit < RING_MIN_LIMIT ? RING_MIN_LIMIT : limit;
    return r;
}

void sbd_ring_free(struct sbd_ring *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->count; i++)
        xfree(*slot(r, i));
    xfree(r->v);
    xfree(r);
}

static void drop_head(struct sbd_ring *r)
{
    struct chunk *c = *slot(r, 0);
    r->first = (r->first + 1) % r->nv;
    r->count--;
    r->used -= c->cap + SBD_RING_CHUNK_OVERHEAD;
    r->start = r->count ? (*slot(r, 0))->offset : r->end;
    xfree(c);
}

/* Copies into the newest chunk's free room; returns the bytes taken. */
static size_t fill_tail(struct sbd_ring *r, int stream, const char *data, size_t n)
{
    struct chunk *t = tail(r);
    if (!t || t->stream != stream || t->len == t->cap)
        return 0;
    size_t k = t->cap - t->len < n ? t->cap - t->len : n;
    memcpy(t->data + t->len, data, k);
    t->len += k;
    r->end += k;
    return k;
}

/* Makes room in the array for one more chunk (doubling it, oldest first again). */
static void grow(struct sbd_ring *r)
{
    if (r->count < r->nv)
        return;
    size_t nv = r->nv ? 2 * r->nv : 16;
    struct chunk **v = xcalloc(nv, sizeof(*v));
    for (size_t i = 0; i < r->count; i++)
        v[i] = *slot(r, i);
    xfree(r->v);
    r->v = v;
    r->nv = nv;
    r->first = 0;
}

static void add_chunk(struct sbd_ring *r, int stream, const char *data, size_t n)
{
    size_t cap = n < RING_CHUNK_MIN ? RING_CHUNK_MIN : n;
    struct chunk *c = xmalloc(sizeof(*c) + cap);
    *c = (struct chunk){.offset = r->end, .len = n, .cap = cap, .stream = stream};
    memcpy(c->data, data, n);
    grow(r);
    *slot(r, r->count) = c;
    r->count++;
    r->end += n;
    r->used += cap + SBD_RING_CHUNK_OVERHEAD;
}

/* Gives the newest chunk's unused room back before another chunk is made. */
static void seal_tail(struct sbd_ring *r)
{
    struct chunk *t = tail(r);
    if (!t || t->len == t->cap)
        return;
    r->used -= t->cap - t->len;
    t = xrealloc(t, sizeof(*t) + t->len);
    t->cap = t->len;
    *slot(r, r->count - 1) = t;
}

void sbd_ring_append(struct sbd_ring *r, int stream, const char *data, size_t n)
{
    size_t k = fill_tail(r, stream, data, n);
    data += k;
    n -= k;
    if (n == 0)
        return;
    /* Room for one small chunk after it stays, so the next append (say stderr after a
     * flood of stdout) does not evict all of it. */
    size_t room = r->limit - 2 * SBD_RING_CHUNK_OVERHEAD - RING_CHUNK_MIN;
    if (n > room) {
        /* Only the tail fits: the head of this append is lost at once. */
        r->end += n - room;
        data += n - room;
        n = room;
    }
    seal_tail(r);
    while (r->count &&
           r->used + (n < RING_CHUNK_MIN ? RING_CHUNK_MIN : n) + SBD_RING_CHUNK_OVERHEAD > r->limit)
        drop_head(r);
    if (!r->count)
        r->start = r->end;
    add_chunk(r, stream, data, n);
}

int sbd_ring_next(const struct sbd_ring *r, uint64_t offset, size_t max, struct sbd_ring_slice *ret)
{
    if (offset >= r->end)
        return 0;
    /* the first chunk that ends after offset */
    size_t lo = 0, hi = r->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct chunk *m = *slot(r, mid);
        if (m->offset + m->len <= offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == r->count)
        return 0;
    const struct chunk *c = *slot(r, lo);
    uint64_t at = offset < c->offset ? c->offset : offset;
    size_t skip = (size_t)(at - c->offset);
    size_t len = c->len - skip;
    if (max && len > max)
        len = max;
    *ret = (struct sbd_ring_slice){
        .offset = at,
        .dropped = at - offset,
        .stream = c->stream,
        .data = c->data + skip,
        .len = len,
    };
    return 1;
}

uint64_t sbd_ring_start(const struct sbd_ring *r)
{
    return r->start;
}

uint64_t sbd_ring_end(const struct sbd_ring *r)
{
    return r->end;
}

size_t sbd_ring_used(const struct sbd_ring *r)
{
    return r->used;
}
