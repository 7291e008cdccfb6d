/* SPDX-License-Identifier: Apache-2.0 */
/* When the controller returns free heap pages to the system: after a busy spell (a burst,
 * a pool fill, the initial sync, a cache's switch to compact text) the malloc arenas keep
 * the pages that parse trees, request buffers and handles freed. Once the work (API
 * requests and reconciles: a restart's sync reconciles every Sandbox but sends hardly a
 * request) has been quiet for a check period they go back (malloc_trim; 2,000 Sandboxes:
 * about 10 MiB of the resident size). The decision is kept apart from the call to be
 * testable. */
#ifndef AS_CONTROLLER_HEAP_TRIM_H
#define AS_CONTROLLER_HEAP_TRIM_H

#include <stdbool.h>

#include "common/clock.h"

#define HEAP_TRIM_CHECK (5 * USEC_PER_SEC) /* how often the work is looked at */
#define HEAP_TRIM_BUSY  500 /* units of work since the last trim that make one worth it */
#define HEAP_TRIM_QUIET 10  /* at most this many in the last period count as quiet */

/** Zero-initialised before the first call. */
struct heap_trim {
    unsigned long seen; /* the work count at the last check */
    unsigned long done; /* at the last trim */
    usec_t next;        /* monotonic time of the next check */
};

/** Whether to trim now, given a count of work done (monotonic: the client's requests,
 * retries included, plus reconciles) at monotonic time now. At most once per
 * HEAP_TRIM_CHECK, and only when the last period was quiet and at least HEAP_TRIM_BUSY
 * units of work were done since the last trim. */
bool heap_trim_due(struct heap_trim *t, usec_t now, unsigned long work);

#endif
