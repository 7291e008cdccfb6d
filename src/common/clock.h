/* SPDX-License-Identifier: Apache-2.0 */
/* Time in one unit: microseconds (usec_t) on CLOCK_MONOTONIC for all timing; the wall
 * clock only for timestamps that leave the process. */
#pragma once

#include <stdint.h>
#include <time.h>

typedef uint64_t usec_t;

#define USEC_PER_MSEC ((usec_t)1000)
#define USEC_PER_SEC  ((usec_t)1000000)
#define USEC_INFINITY UINT64_MAX

/** Monotonic now in microseconds. */
usec_t clock_now(void);
/** Wall-clock now in microseconds since the epoch. */
usec_t clock_wall_now(void);
/** Sleeps for d microseconds (restarts on EINTR). Only for back-off loops, never as a
 * substitute for waiting on an event. */
void clock_sleep(usec_t d);
/** Fills ts with the CLOCK_REALTIME deadline d microseconds from now (for
 * pthread_cond_timedwait on a default condition variable). */
void clock_deadline_realtime(usec_t d, struct timespec *ts);
/** Fills ts with the CLOCK_MONOTONIC deadline d from now (for condvars created with
 * pthread_condattr_setclock(CLOCK_MONOTONIC)). */
void clock_deadline_mono(usec_t d, struct timespec *ts);
/** Formats wall time (usec since epoch) as RFC 3339 with microseconds
 * ("2026-11-30T01:02:03.000004Z") into out (at least 32 bytes). */
void clock_format_rfc3339(usec_t wall, char *out, unsigned size);
/** Formats wall time as RFC 3339 in whole seconds ("2026-11-30T01:02:03Z"). */
void clock_format_rfc3339_sec(usec_t wall, char *out, unsigned size);
/** Parses RFC 3339 ("2026-11-30T01:02:03Z", fractional seconds and offsets allowed) into
 * usec since the epoch. Returns 0 or -EINVAL. */
int clock_parse_rfc3339(const char *s, usec_t *ret);
