/* SPDX-License-Identifier: Apache-2.0 */
/* Side writes: merge patches no client waits for (a claim's first-ready annotations),
 * taken off the reconcile that decided them. One thread writes them in order; before each
 * it asks a yield_gate, which holds it while claims are being served, at most the gate's
 * bound after the write was queued. The queue is bounded: side_writer_add refuses a write
 * when it is full (or stopping), and the caller writes it itself. Stopping writes what is
 * queued without holding. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/yield_gate.h"

struct kube_res;
struct side_writer;

/** side_write_fn's answer when there was nothing to write (the object went while its
 *  write waited). */
#define SIDE_SKIPPED 1

/** Writes one merge patch (borrowed) to res ns/name. Returns 0, SIDE_SKIPPED or a
 *  negative errno. */
typedef int side_write_fn(void *ctx, const struct kube_res *res, const char *ns, const char *name,
                          const json_t *patch);

struct side_opts {
    side_write_fn *write; /* required */
    void *ctx;            /* write's argument (borrowed) */
    struct yield_gate gate;
    size_t max_queue; /* 0 = SIDE_DEFAULT_QUEUE */
};

#define SIDE_DEFAULT_QUEUE 4096

struct side_stats {
    unsigned long queued, written, failed;
    unsigned long skipped; /* the write function found nothing to write */
    unsigned long held;    /* writes the gate held back */
    unsigned long dropped; /* queued, or added, after side_writer_drop: never written */
};

/** Starts the writer thread (opts copied). Returns 0 and *ret, -EINVAL without a write
 * function, or a pthread error. */
int side_writer_new(const struct side_opts *opts, struct side_writer **ret);
/** Writes what is queued, stops and frees. NULL is fine. */
void side_writer_free(struct side_writer *w);
/** Queues a patch (borrowed; a reference is kept) for res ns/name (copied). Returns false,
 * queuing nothing, when the queue is full or the writer stops. Any thread. */
bool side_writer_add(struct side_writer *w, const struct kube_res *res, const char *ns,
                     const char *name, const json_t *patch);
/** Drops the queued writes, the one held at the gate, and every one added from now on
 * (side_writer_add still returns true: its caller must not write it itself); a write
 * already sent finishes. For a
 * controller whose leadership ended: what waits is a successor's to write. Any thread. */
void side_writer_drop(struct side_writer *w);
/** Waits until every write queued before the call was made, failed, skipped or
 * dropped. */
void side_writer_flush(struct side_writer *w);
void side_writer_stats(struct side_writer *w, struct side_stats *ret);
