/* SPDX-License-Identifier: Apache-2.0 */
/* The in-memory queue of warm candidates: per pool ("namespace/pool"), the names of
 * the pool's Sandboxes that are Ready and adoptable, oldest first, without duplicates.
 * Fed by Sandbox informer events; claims pop from it and never list the pool. A pop
 * removes the name, so two claims never get the same candidate from it (the adoption
 * write is still guarded by resourceVersion: the queue may lag the cache).
 *
 * Thread-safe (one mutex). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct claim_queue;

/** Returns a new empty queue. */
struct claim_queue *claim_queue_new(void);
/** NULL is fine. */
void claim_queue_free(struct claim_queue *q);

/** Appends name (copied) to pool's queue unless it is already there. */
void claim_queue_push(struct claim_queue *q, const char *pool, const char *name);
/** Pops the oldest name of pool into out (size bytes). Returns true, or false when the
 * pool's queue is empty (or the name does not fit, in which case it is dropped). */
bool claim_queue_pop(struct claim_queue *q, const char *pool, char *out, size_t size);
/** Removes name from pool's queue, if present; a queue left empty is freed. */
void claim_queue_remove(struct claim_queue *q, const char *pool, const char *name);
/** Drops pool's queue. */
void claim_queue_drop(struct claim_queue *q, const char *pool);
/** Number of names queued for pool. */
size_t claim_queue_len(struct claim_queue *q, const char *pool);
/** Number of pools with a queue record (empty ones included, until a remove frees them). */
size_t claim_queue_pools(struct claim_queue *q);
