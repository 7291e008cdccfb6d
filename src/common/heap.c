/* SPDX-License-Identifier: Apache-2.0 */
/* Binary min-heap of deadlines with per-entry index tracking. */
#include "common/heap.h"

#include "common/xalloc.h"

void heap_init(struct heap *h)
{
    *h = (struct heap){0};
}

void heap_done(struct heap *h)
{
    for (size_t i = 0; i < h->len; i++)
        h->v[i]->index = HEAP_NOT_QUEUED;
    XFREE(h->v);
    h->len = 0;
    h->cap = 0;
}

static bool before(const struct heap_entry *a, const struct heap_entry *b)
{
    return a->deadline < b->deadline || (a->deadline == b->deadline && a->seq < b->seq);
}

static void place(struct heap *h, size_t i, struct heap_entry *e)
{
    h->v[i] = e;
    e->index = i;
}

static void sift_up(struct heap *h, size_t i)
{
    struct heap_entry *e = h->v[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(e, h->v[parent]))
            break;
        place(h, i, h->v[parent]);
        i = parent;
    }
    place(h, i, e);
}

static void sift_down(struct heap *h, size_t i)
{
    struct heap_entry *e = h->v[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->len)
            break;
        if (c + 1 < h->len && before(h->v[c + 1], h->v[c]))
            c++;
        if (!before(h->v[c], e))
            break;
        place(h, i, h->v[c]);
        i = c;
    }
    place(h, i, e);
}

void heap_push(struct heap *h, struct heap_entry *e, usec_t deadline)
{
    ASSERT(!heap_entry_queued(e));
    if (h->len == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 16;
        h->v = xreallocarray(h->v, h->cap, sizeof(*h->v));
    }
    e->deadline = deadline;
    e->seq = h->next_seq++;
    place(h, h->len++, e);
    sift_up(h, e->index);
}

struct heap_entry *heap_peek(const struct heap *h)
{
    return h->len ? h->v[0] : NULL;
}

usec_t heap_next_deadline(const struct heap *h)
{
    return h->len ? h->v[0]->deadline : USEC_INFINITY;
}

void heap_remove(struct heap *h, struct heap_entry *e)
{
    size_t i = e->index;
    ASSERT(i < h->len && h->v[i] == e);
    struct heap_entry *last = h->v[--h->len];
    e->index = HEAP_NOT_QUEUED;
    if (last == e)
        return;
    place(h, i, last);
    /* The moved entry may belong either above or below its new position. */
    if (i > 0 && before(last, h->v[(i - 1) / 2]))
        sift_up(h, i);
    else
        sift_down(h, i);
}

struct heap_entry *heap_pop(struct heap *h)
{
    struct heap_entry *e = heap_peek(h);
    if (e)
        heap_remove(h, e);
    return e;
}

struct heap_entry *heap_pop_due(struct heap *h, usec_t now)
{
    struct heap_entry *e = heap_peek(h);
    if (!e || e->deadline > now)
        return NULL;
    heap_remove(h, e);
    return e;
}

void heap_update(struct heap *h, struct heap_entry *e, usec_t deadline)
{
    if (heap_entry_queued(e))
        heap_remove(h, e);
    heap_push(h, e, deadline);
}
