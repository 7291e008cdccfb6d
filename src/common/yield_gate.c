/* SPDX-License-Identifier: Apache-2.0 */
#include "common/yield_gate.h"

bool yield_gate_wait(const struct yield_gate *g, usec_t at_most, const atomic_bool *stop)
{
    usec_t end, now;
    bool held = false;
    if (!g || !g->busy || at_most == 0)
        return false;
    now = clock_now();
    end = now + at_most;
    while (now < end && !(stop && atomic_load(stop)) && g->busy(g->ctx)) {
        held = true;
        clock_sleep(end - now < YIELD_GATE_STEP ? end - now : YIELD_GATE_STEP);
        now = clock_now();
    }
    return held;
}
