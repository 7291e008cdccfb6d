/* SPDX-License-Identifier: Apache-2.0 */
/* The heap-trim decision (heap_trim.h). */
#include "controller/heap_trim.h"

bool heap_trim_due(struct heap_trim *t, usec_t now, unsigned long work)
{
    if (now < t->next)
        return false;
    t->next = now + HEAP_TRIM_CHECK;
    bool quiet = work - t->seen <= HEAP_TRIM_QUIET;
    t->seen = work;
    if (!quiet || work - t->done < HEAP_TRIM_BUSY)
        return false;
    t->done = work;
    return true;
}
