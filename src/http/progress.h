/* SPDX-License-Identifier: Apache-2.0 */
/* Whether a peer is still taking what we send: the progress of a write queue.
 *
 * A write completes only once all of its bytes are in the kernel's send queue, and the
 * kernel wakes a writer only when a good part of a large send buffer is free: a peer that
 * reads slowly but steadily can go seconds, or minutes, between completed writes. So the
 * socket's own queue (SIOCOUTQ: bytes sent and not yet acknowledged, or not yet sent) is
 * sampled too: a change of it since the last sample means the peer took bytes (or the
 * kernel took more of ours, which it does only once the peer made room). */
#ifndef AS_HTTP_PROGRESS_H
#define AS_HTTP_PROGRESS_H

#include <uv.h>

#include "common/clock.h"

struct http_progress {
    usec_t at; /* the last progress seen: a completed write, a queue's start, a change */
    int outq;  /* the socket's queue at the last sample; -1 unknown */
};

/* A write completed, or a queue started, at now: progress, and the socket's queue is
 * sampled afresh as the base of the next comparison. */
void http_progress_mark(struct http_progress *p, uv_tcp_t *tcp, usec_t now);

/* The last progress seen: the socket's queue is sampled, and a change since the last
 * sample counts as progress at now. */
usec_t http_progress_at(struct http_progress *p, uv_tcp_t *tcp, usec_t now);

#endif
