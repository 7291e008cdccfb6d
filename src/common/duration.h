/* SPDX-License-Identifier: Apache-2.0 */
/* Durations in flags: one grammar for every binary.
 *
 * duration_parse takes Go's time.ParseDuration syntax (what controller-runtime's flags
 * take): "0", or one or more decimal numbers, each with an optional fraction and a unit
 * out of ns, us (or µs, μs), ms, s, m, h; e.g. "300ms", "1.5s", "1h2m3.5s". An optional
 * leading "+" is allowed; a negative duration ("-1s") is refused with -ERANGE, as is one
 * past DURATION_MAX_NSEC (Go's longest, about 292 years). Digits finer than a nanosecond
 * are dropped, and the result is truncated to microseconds ("1500ns" is 1 us).
 *
 * duration_parse_secs also takes a bare decimal number of seconds ("30", "0.5"), for the
 * flags that have always taken seconds (the router's and sandboxd's timeouts, the CLI's
 * --timeout); a number without a unit inside a longer duration ("1m30") stays an error. */
#pragma once

#include <stdint.h>

#include "common/clock.h"

#define DURATION_MAX_NSEC ((uint64_t)INT64_MAX)

/** Parses v (borrowed) into *ret. Returns 0, -EINVAL (not the syntax; also NULL) or
 * -ERANGE (negative or too long); *ret untouched on failure. */
int duration_parse(const char *v, usec_t *ret);
/** Same, and a bare number means seconds. */
int duration_parse_secs(const char *v, usec_t *ret);
