/* SPDX-License-Identifier: Apache-2.0 */
/* Binary min-heap of deadlines for timers and delayed work. Intrusive: the caller
 * embeds a struct heap_entry in its item and gets the item back with container_of.
 * Each entry knows its own index, so removing or re-timing an entry is O(log n).
 * Entries with equal deadlines come out in insertion order (FIFO).
 *
 *   struct delayed { char *key; struct heap_entry he; };
 *   heap_push(&h, &d->he, clock_now() + 5 * USEC_PER_SEC);
 *   struct heap_entry *e = heap_pop_due(&h, clock_now());
 *   struct delayed *d = container_of(e, struct delayed, he);
 *
 * Not thread-safe: callers serialise access to one heap. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/clock.h"

#define HEAP_NOT_QUEUED SIZE_MAX

/** Embedded in the caller's item. Initialise with heap_entry_init (or HEAP_ENTRY_INIT)
 * before first use; the fields are read-only for callers. */
struct heap_entry {
    usec_t deadline;
    uint64_t seq; /* insertion order, breaks ties between equal deadlines */
    size_t index; /* position in the heap, HEAP_NOT_QUEUED when not in one */
};

#define HEAP_ENTRY_INIT                                   \
    {                                                     \
        .deadline = 0, .seq = 0, .index = HEAP_NOT_QUEUED \
    }

/** The heap itself, embedded by the caller (heap_init / heap_done). */
struct heap {
    struct heap_entry **v;
    size_t len;
    size_t cap;
    uint64_t next_seq;
};

void heap_init(struct heap *h);
/** Releases the heap's array. The entries are borrowed and not touched beyond being
 * marked not queued; the caller frees its items. */
void heap_done(struct heap *h);

static inline void heap_entry_init(struct heap_entry *e)
{
    e->deadline = 0;
    e->seq = 0;
    e->index = HEAP_NOT_QUEUED;
}

/** Whether e is currently in a heap. */
static inline bool heap_entry_queued(const struct heap_entry *e)
{
    return e->index != HEAP_NOT_QUEUED;
}

static inline size_t heap_len(const struct heap *h)
{
    return h->len;
}

/** Adds e (borrowed: it must stay valid until popped or removed) with the deadline.
 * e must not be queued already (asserted). Never fails (aborts on OOM). */
void heap_push(struct heap *h, struct heap_entry *e, usec_t deadline);
/** Returns the entry with the earliest deadline (borrowed, stays queued), or NULL. */
struct heap_entry *heap_peek(const struct heap *h);
/** Earliest deadline, or USEC_INFINITY when empty (handy for poll timeouts). */
usec_t heap_next_deadline(const struct heap *h);
/** Removes and returns the earliest entry, or NULL when empty. */
struct heap_entry *heap_pop(struct heap *h);
/** Removes and returns the earliest entry if its deadline is <= now, else NULL. */
struct heap_entry *heap_pop_due(struct heap *h, usec_t now);
/** Removes e from h; e must be queued in h (asserted). */
void heap_remove(struct heap *h, struct heap_entry *e);
/** Changes the deadline of e: re-positions it when queued in h, pushes it otherwise.
 * A re-timed entry goes behind others with the same deadline. */
void heap_update(struct heap *h, struct heap_entry *e, usec_t deadline);
