/* SPDX-License-Identifier: Apache-2.0 */
/* The daemons' flag convention (see flag.h). */
#include "common/flag.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/duration.h"
#include "common/log.h"
#include "common/str.h"

/* The common flags. Returns 0, 1 (help/version printed) or -EINVAL. */
static int apply_common(const struct flag_spec *s, int id, const char *v)
{
    enum log_level lvl;

    switch (id) {
    case FLAG_LOG_LEVEL:
        if (log_parse_level(v, &lvl) < 0)
            return -EINVAL;
        log_set_level(lvl);
        return 0;
    case FLAG_LOG_FORMAT:
        return log_flag_format(v) < 0 ? -EINVAL : 0;
    case FLAG_VERSION:
        printf("%s, version %s\n", s->prog, s->version);
        return 1;
    default: /* FLAG_HELP */
        fputs(s->usage, stdout);
        return 1;
    }
}

static const char *why(int r)
{
    switch (r) {
    case -EINVAL:
        return "not valid";
    case -ERANGE:
        return "out of range";
    case -E2BIG:
        return "too many items";
    default:
        return "refused";
    }
}

/* Applies flag id (its table entry at index) with value v. Returns as flag_parse. */
static int apply(const struct flag_spec *s, int id, int index, const char *v)
{
    int r =
        id >= FLAG_LOG_LEVEL && id <= FLAG_HELP ? apply_common(s, id, v) : s->apply(s->ctx, id, v);
    if (r >= 0)
        return r;
    if (v)
        fprintf(stderr, "%s: bad value \"%s\" for --%s: %s (see --help)\n", s->prog, v,
                s->opts[index].name, why(r));
    else
        fprintf(stderr, "%s: --%s needs a value (see --help)\n", s->prog, s->opts[index].name);
    return -EINVAL;
}

int flag_parse(const struct flag_spec *s, int argc, char **argv)
{
    int id, index = 0, r;

    opterr = 0;
    optind = 0; /* glibc: start afresh at argv[1] (a process may parse more than once) */
    while ((id = getopt_long(argc, argv, "", s->opts, &index)) != -1) {
        if (id == '?' || id == ':') {
            fprintf(stderr, "%s: bad flag %s (see --help)\n", s->prog, argv[optind - 1]);
            return -EINVAL;
        }
        r = apply(s, id, index, optarg);
        if (r != 0)
            return r;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument %s (see --help)\n", s->prog, argv[optind]);
        return -EINVAL;
    }
    return 0;
}

int flag_bool(const char *v, bool *ret)
{
    if (!v) {
        *ret = true;
        return 0;
    }
    return cstr_to_bool(v, ret);
}

int flag_int(const char *v, int64_t min, int64_t max, int64_t *ret)
{
    int64_t n;
    int r = v ? cstr_to_i64(v, &n) : -EINVAL;

    if (r < 0)
        return r;
    if (n < min || n > max)
        return -ERANGE;
    *ret = n;
    return 0;
}

/* Checks a parse result r of *d against [min, max] and stores it in *ret. */
static int bounded(int r, usec_t d, usec_t min, usec_t max, usec_t *ret)
{
    if (r < 0)
        return r;
    if (d < min || d > max)
        return -ERANGE;
    *ret = d;
    return 0;
}

int flag_duration(const char *v, usec_t min, usec_t max, usec_t *ret)
{
    usec_t d = 0;
    int r = duration_parse(v, &d);
    return bounded(r, d, min, max, ret);
}

int flag_duration_secs(const char *v, usec_t min, usec_t max, usec_t *ret)
{
    usec_t d = 0;
    int r = duration_parse_secs(v, &d);
    return bounded(r, d, min, max, ret);
}
