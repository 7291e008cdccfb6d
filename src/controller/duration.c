/* SPDX-License-Identifier: Apache-2.0 */
/* Go-syntax durations for flags. */
#include "controller/duration.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define NSEC_MAX ((uint64_t)LIMIT_CTRL_DURATION * 1000u)

static const struct {
    const char *name;
    uint64_t ns;
} units[] = {
    {"ns", 1},           {"us", 1000},      {"\xc2\xb5s", 1000}, /* U+00B5 MICRO SIGN */
    {"\xce\xbcs", 1000},                                         /* U+03BC GREEK SMALL LETTER MU */
    {"ms", 1000000},     {"s", 1000000000}, {"m", 60ull * 1000000000}, {"h", 3600ull * 1000000000},
};

/* Matches the unit at *p (the longest name wins: "ms" before "m"). Returns its length
 * and *ret_ns, or 0. */
static size_t match_unit(const char *p, uint64_t *ret_ns)
{
    size_t best = 0;

    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        size_t n = strlen(units[i].name);
        if (n > best && strncmp(p, units[i].name, n) == 0) {
            best = n;
            *ret_ns = units[i].ns;
        }
    }
    return best;
}

/* Reads digits at *p into *ret (stopping to add once it would pass max; *ret_big tells).
 * Returns how many digits were read. For a fraction, frac_den (non-NULL) gets 10^(digits
 * kept), at most 10^9: later digits are dropped. */
static size_t read_digits(const char **p, uint64_t max, uint64_t *ret, uint64_t *frac_den,
                          bool *ret_big)
{
    size_t n = 0;

    for (; **p >= '0' && **p <= '9'; (*p)++, n++) {
        if (frac_den && *frac_den >= 1000000000)
            continue; /* finer than a nanosecond: dropped */
        if (*ret > (max - (uint64_t)(**p - '0')) / 10) {
            *ret_big = true;
            continue;
        }
        *ret = *ret * 10 + (uint64_t)(**p - '0');
        if (frac_den)
            *frac_den *= 10;
    }
    return n;
}

/* One "<number>[.<fraction>]<unit>" at *p, added to *total_ns. Returns 0 or -EINVAL. */
static int parse_term(const char **p, uint64_t *total_ns)
{
    uint64_t whole = 0, frac = 0, den = 1, scale = 0, ns;
    bool big = false, frac_big = false;
    size_t digits = read_digits(p, NSEC_MAX, &whole, NULL, &big), u;

    if (**p == '.') {
        (*p)++;
        digits += read_digits(p, 999999999, &frac, &den, &frac_big);
    }
    u = match_unit(*p, &scale);
    if (digits == 0 || u == 0 || big || whole > NSEC_MAX / scale)
        return -EINVAL;
    *p += u;
    /* Every scale is k * 10^j with den | scale whenever scale >= den. */
    ns = whole * scale + (scale >= den ? frac * (scale / den) : frac * scale / den);
    if (ns > NSEC_MAX - *total_ns)
        return -EINVAL;
    *total_ns += ns;
    return 0;
}

int ctrl_duration_parse(const char *v, usec_t *ret)
{
    uint64_t total = 0;

    if (!v || !*v)
        return -EINVAL;
    if (strcmp(v, "0") == 0) {
        *ret = 0;
        return 0;
    }
    while (*v)
        if (parse_term(&v, &total) < 0)
            return -EINVAL;
    *ret = total / 1000;
    return 0;
}
