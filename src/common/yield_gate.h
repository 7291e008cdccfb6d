/* SPDX-License-Identifier: Apache-2.0 */
/* A gate for writes nobody waits for (Events, observability annotations): they hold back
 * while the work they would slow down runs, so that work gets the API server first. The
 * gate only delays: each write waits at most its bound, and a writer that is stopping
 * does not wait at all. One sleeping thread per writer checks it; no object is polled. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>

#include "common/clock.h"

/** How often a held write asks busy() again. */
#define YIELD_GATE_STEP (20 * USEC_PER_MSEC)

struct yield_gate {
    bool (*busy)(void *ctx); /* NULL: never busy (the gate is open) */
    void *ctx;               /* busy's argument (borrowed) */
    usec_t max_wait;         /* the most a write is held after it was queued */
};

/** Sleeps in steps of YIELD_GATE_STEP while g (may be NULL) says busy, for at most
 * at_most, returning early once *stop (may be NULL) is true. Returns true when it held
 * the caller at all. */
bool yield_gate_wait(const struct yield_gate *g, usec_t at_most, const atomic_bool *stop);
