/* SPDX-License-Identifier: Apache-2.0 */
/* Command-line flags of the daemons (controller, router), one convention:
 *   --name=value or --name value (getopt_long; no short flags);
 *   a boolean flag declared with an optional argument alone (--x) means true, else
 *   --x=BOOL in cstr_to_bool's spellings (true, false, 1, 0, t, f, ...);
 *   numbers are decimal integers within the flag's bounds;
 *   durations in duration.h's grammar within the flag's bounds;
 *   --log-level, --log-format, --version and --help are handled here;
 *   an unknown flag, a bad value or a stray argument is one line on stderr
 *   ("PROG: bad value "V" for --NAME: out of range (see --help)") and exit status 2. */
#pragma once

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/clock.h"

/* getopt_long ids of the flags every daemon has; a daemon's own ids start at FLAG_OWN. */
enum {
    FLAG_LOG_LEVEL = 200,
    FLAG_LOG_FORMAT,
    FLAG_VERSION,
    FLAG_HELP,
    FLAG_OWN = 256,
};

/* Their getopt_long entries, for the end of a daemon's table (before its terminator). */
/* clang-format off */
#define FLAG_COMMON_OPTIONS                                                                        \
    {"log-level", required_argument, NULL, FLAG_LOG_LEVEL},                                        \
    {"log-format", required_argument, NULL, FLAG_LOG_FORMAT},                                      \
    {"version", no_argument, NULL, FLAG_VERSION},                                                  \
    {"help", no_argument, NULL, FLAG_HELP}
/* clang-format on */

/** Applies one of the daemon's own flags: id from its table, v its value (borrowed from
 * argv; NULL for an optional argument left out). Returns 0 or a negative errno for a
 * bad value (-EINVAL, -ERANGE, ...). */
typedef int flag_apply_fn(void *ctx, int id, const char *v);

struct flag_spec {
    const char *prog;          /* "sandbox-router": messages and --version */
    const char *version;       /* what --version prints after "PROG, version " */
    const char *usage;         /* what --help prints */
    const struct option *opts; /* the getopt_long table, FLAG_COMMON_OPTIONS included */
    flag_apply_fn *apply;
    void *ctx;
};

/** Parses argv (borrowed: the values applied point into it) from argv[1]. Returns 0 to
 * run, 1 when --help or --version printed (exit 0), or -EINVAL after a message on
 * stderr (exit 2). Not thread-safe (getopt_long). */
int flag_parse(const struct flag_spec *s, int argc, char **argv);

/* Value parsers for apply functions: each returns 0, or -EINVAL (syntax) or -ERANGE
 * (outside [min, max]), and writes *ret only on success. */

/** A boolean: NULL (the flag alone) is true, else cstr_to_bool. */
int flag_bool(const char *v, bool *ret);
/** A decimal integer in [min, max]. */
int flag_int(const char *v, int64_t min, int64_t max, int64_t *ret);
/** A duration in Go syntax (duration_parse) in [min, max]. */
int flag_duration(const char *v, usec_t min, usec_t max, usec_t *ret);
/** A duration in Go syntax or bare seconds (duration_parse_secs) in [min, max]. */
int flag_duration_secs(const char *v, usec_t min, usec_t max, usec_t *ret);
