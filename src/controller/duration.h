/* SPDX-License-Identifier: Apache-2.0 */
/* Durations in flags, in Go's time.ParseDuration syntax (what controller-runtime's
 * flags take): "0", or one or more decimal numbers, each with an optional fraction and
 * a unit: ns, us (or µs, μs), ms, s, m, h; e.g. "15s", "1m", "500ms", "1h30m", "1.5s".
 * No sign (negative durations are refused), at most LIMIT_CTRL_DURATION. */
#pragma once

#include "common/clock.h"
#include "common/limits.h"

/** Parses v into *ret (microseconds; nanoseconds are truncated). Returns 0 or -EINVAL
 * (*ret untouched). */
int ctrl_duration_parse(const char *v, usec_t *ret);
