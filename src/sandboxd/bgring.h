/* SPDX-License-Identifier: Apache-2.0 */
/* Output ring of a background process: the last bytes of its stdout and stderr, tagged,
 * bounded. Every byte ever appended has a logical offset (0, 1, 2, ...); the ring keeps a
 * window [start, end) of them and drops the oldest chunks when the limit is reached, so a
 * reader that asks for an older offset learns how many bytes it lost. Pure data structure
 * (no loop), single-threaded. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct sbd_ring;

/** Bookkeeping charged per chunk on top of its bytes, so that many tiny chunks cannot
 * grow the memory past the limit. */
#define SBD_RING_CHUNK_OVERHEAD 64u

/** A piece of retained output (borrowed: valid until the next append or free). */
struct sbd_ring_slice {
    uint64_t offset;  /* logical offset of data[0] */
    uint64_t dropped; /* bytes between the asked offset and offset that are gone */
    int stream;       /* the tag given to sbd_ring_append */
    const char *data;
    size_t len;
};

/** Returns a new ring keeping about limit bytes (at least 16 KiB). */
struct sbd_ring *sbd_ring_new(size_t limit);
void sbd_ring_free(struct sbd_ring *r);
/** Appends n bytes (copied) tagged with stream; evicts the oldest chunks past the limit
 * (of a single append larger than the limit, only its tail is kept). */
void sbd_ring_append(struct sbd_ring *r, int stream, const char *data, size_t n);
/** The next retained piece at or after offset, at most max bytes (0: no cap). Returns 1
 * with *ret filled, or 0 when offset >= end (nothing more yet). */
int sbd_ring_next(const struct sbd_ring *r, uint64_t offset, size_t max,
                  struct sbd_ring_slice *ret);
/** Offset of the oldest retained byte. */
uint64_t sbd_ring_start(const struct sbd_ring *r);
/** Offset one past the newest byte (= bytes ever appended). */
uint64_t sbd_ring_end(const struct sbd_ring *r);
/** Bytes charged against the limit (data plus per-chunk overhead). */
size_t sbd_ring_used(const struct sbd_ring *r);
