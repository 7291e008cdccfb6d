/* SPDX-License-Identifier: Apache-2.0 */
/* Splits a byte stream into newline-terminated frames (the watch stream's framing)
 * across arbitrary chunk boundaries, with a bound on the size of one frame. */
#pragma once

#include <stddef.h>

#include "common/buf.h"

/** Called with each complete frame: borrowed bytes, valid only during the call, without
 * the terminating "\n" or "\r\n"; never empty and never whitespace-only. Return 0 to go
 * on, or a negative errno to stop (linebuf_feed then returns that value). */
typedef int linebuf_frame_fn(void *ctx, const char *frame, size_t len);

/** A partial frame carried between chunks. Embed it and use linebuf_init/linebuf_done. */
struct linebuf {
    struct buf tail;  /* the unterminated end of the stream so far */
    size_t max_frame; /* longest accepted frame, "\r" included, "\n" not */
};

/** Initialises lb to accept frames of at most max_frame bytes (0 means
 * LIMIT_KUBE_WATCH_FRAME). No allocation until a frame is split across chunks. */
void linebuf_init(struct linebuf *lb, size_t max_frame);
/** Releases the memory; lb may be fed again afterwards. NULL is fine. */
void linebuf_done(struct linebuf *lb);
/** Drops a partial frame (call when the stream is reconnected). */
void linebuf_reset(struct linebuf *lb);
/** Bytes of an unfinished frame held back for the next chunk. */
size_t linebuf_pending(const struct linebuf *lb);

/** Feeds the next chunk (borrowed) and calls fn for every frame it completes, in order.
 * Frames that lie wholly inside data are passed without copying; only an unterminated
 * tail is copied. Returns 0; -E2BIG as soon as a frame is known to be longer than
 * max_frame (its bytes are never buffered past the limit); or fn's negative value.
 * After any error the partial frame is dropped and the stream is out of sync: the
 * caller must reconnect. */
int linebuf_feed(struct linebuf *lb, const char *data, size_t len, linebuf_frame_fn *fn, void *ctx);
