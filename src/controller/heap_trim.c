/* SPDX-License-Identifier: Apache-2.0 */
/* The heap-trim decision (heap_trim.h). */
#include "controller/heap_trim.h"

bool heap_trim_due(struct heap_trim *t, usec_t now, unsigned long requests)
{
    if (now < t->next)
        return false;
    t->next = now + HEAP_TRIM_CHECK;
    bool quiet = requests - t->seen <= HEAP_TRIM_QUIET;
    t->seen = requests;
    if (!quiet || requests - t->done < HEAP_TRIM_BUSY)
        return false;
    t->done = requests;
    return true;
}
