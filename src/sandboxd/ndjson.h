/* SPDX-License-Identifier: Apache-2.0 */
/* The writer of a streaming NDJSON response (one JSON value a line) with back-pressure.
 * Lines go into a bounded queue that is handed to the connection whenever it is not
 * blocked; once the connection's own buffer is over its limit the writer is blocked, the
 * producer is told to wait (it pauses its process, stops reading its ring, ...) and the
 * owner's drain callback calls sbd_ndjson_drain. The queue only grows while blocked, and
 * never past its limit: an append that would pass it fails with -E2BIG and is dropped,
 * the producer decides what that means (a truncation, an overflow count). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"

struct http_req;

/** Hands len bytes (borrowed; copied) to the connection. Returns like http_resp_write: 0,
 * 1 (taken, now over the limit), -EAGAIN (not taken, already over the limit) or another
 * negative errno (the connection is gone). */
typedef int sbd_ndjson_sink_fn(void *sink, const void *data, size_t len);

struct sbd_ndjson {
    sbd_ndjson_sink_fn *write;
    void *sink;       /* borrowed; NULL once detached (lines are dropped) */
    struct buf queue; /* lines not yet handed to the connection */
    size_t nlines;    /* lines in queue */
    bool blocked;     /* the connection is full: wait for the drain */
};

/** Initialises w writing to the streaming response req (borrowed: the owner holds a
 * reference and keeps it alive as long as w), queueing at most limit bytes. */
void sbd_ndjson_init(struct sbd_ndjson *w, struct http_req *req, size_t limit);
/** Initialises w writing through fn(sink, ...), e.g. a test's fake connection. */
void sbd_ndjson_init_sink(struct sbd_ndjson *w, sbd_ndjson_sink_fn *fn, void *sink, size_t limit);
/** Releases the queue. */
void sbd_ndjson_done(struct sbd_ndjson *w);
/** Forgets the connection (it went away) and what was queued; later lines are dropped. */
void sbd_ndjson_detach(struct sbd_ndjson *w);

/** Appends j (taken) as compact JSON and a newline to out. Returns 0 or -E2BIG (out
 * unchanged). */
int sbd_ndjson_encode(json_t *j, struct buf *out);
/** Queues j (taken) as one line without writing. Returns 0, -E2BIG (the queue is full or
 * the line too long: nothing queued) or -EPIPE (detached). */
int sbd_ndjson_queue(struct sbd_ndjson *w, json_t *j);
/** Queues len raw bytes (one or more whole lines, or "\n" as a heartbeat) like
 * sbd_ndjson_queue. */
int sbd_ndjson_queue_raw(struct sbd_ndjson *w, const void *data, size_t len);
/** Hands the queue to the connection unless it is blocked. Returns 0 (all written, go
 * on), 1 (blocked: wait for the drain; what is queued stays queued) or a negative errno
 * (the connection is gone; the owner's abort callback follows). */
int sbd_ndjson_flush(struct sbd_ndjson *w);
/** sbd_ndjson_queue, then sbd_ndjson_flush. Returns like sbd_ndjson_flush, or
 * like sbd_ndjson_queue when j was not queued. */
int sbd_ndjson_send(struct sbd_ndjson *w, json_t *j);
/** The connection drained: unblocks w and flushes. Returns like sbd_ndjson_flush. */
int sbd_ndjson_drain(struct sbd_ndjson *w);

/** Returns whether lines wait in the queue. */
static inline bool sbd_ndjson_pending(const struct sbd_ndjson *w)
{
    return w->queue.len != 0;
}
