/* SPDX-License-Identifier: Apache-2.0 */
/* Go-syntax durations for flags (see duration.h). */
#include "common/duration.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "common/xalloc.h"

#define NSEC_PER_SEC   1000000000ull
#define FRAC_SCALE_MAX 1000000000000000000ull /* 18 fraction digits kept, the rest dropped */

static const struct {
    const char *name;
    uint64_t ns;
} units[] = {
    /* clang-format off */
    {"ns", 1},
    {"us", 1000},
    {"\xc2\xb5s", 1000}, /* U+00B5 MICRO SIGN */
    {"\xce\xbcs", 1000}, /* U+03BC GREEK SMALL LETTER MU */
    {"ms", 1000000},
    {"s", NSEC_PER_SEC},
    {"m", 60 * NSEC_PER_SEC},
    {"h", 3600 * NSEC_PER_SEC},
    /* clang-format on */
};

/* One "<digits>[.<digits>]" of a duration. */
struct number {
    uint64_t whole; /* the integer part (meaningless when big) */
    uint64_t frac;  /* fraction digits kept, as an integer ... */
    uint64_t scale; /* ... over this power of ten */
    bool big;       /* the integer part is past DURATION_MAX_NSEC */
};

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The unit named by the n bytes at p in nanoseconds, or 0 when there is none. */
static uint64_t unit_ns(const char *p, size_t n)
{
    for (size_t i = 0; i < ARRAY_SIZE(units); i++)
        if (strlen(units[i].name) == n && memcmp(p, units[i].name, n) == 0)
            return units[i].ns;
    return 0;
}

/* Reads a number at *p (advanced past it). Returns false when it has no digit. */
static bool read_number(const char **p, struct number *ret)
{
    struct number n = {.scale = 1};
    const char *s = *p;
    size_t digits = 0;

    for (; is_digit(*s); s++, digits++) {
        uint64_t d = (uint64_t)(*s - '0');
        if (n.whole > (DURATION_MAX_NSEC - d) / 10)
            n.big = true;
        else
            n.whole = n.whole * 10 + d;
    }
    if (*s == '.')
        for (s++; is_digit(*s); s++, digits++)
            if (n.scale < FRAC_SCALE_MAX) {
                n.frac = n.frac * 10 + (uint64_t)(*s - '0');
                n.scale *= 10;
            }
    *p = s;
    *ret = n;
    return digits > 0;
}

/* Adds n units of unit_ns to *total. Returns false when the sum passes the maximum. */
static bool add_term(const struct number *n, uint64_t unit, uint64_t *total)
{
    uint64_t ns;
    /* As in Go, the fraction goes through a double: it is below one unit (at most an hour,
     * under 2^42 ns), so the error stays under a nanosecond. */
    uint64_t frac_ns = (uint64_t)((double)n->frac * ((double)unit / (double)n->scale));

    if (n->big || n->whole > DURATION_MAX_NSEC / unit)
        return false;
    ns = n->whole * unit;
    if (frac_ns > DURATION_MAX_NSEC - ns)
        return false;
    ns += frac_ns;
    if (ns > DURATION_MAX_NSEC - *total)
        return false;
    *total += ns;
    return true;
}

/* Parses v; a lone number without a unit takes bare_unit (0: it is an error). */
static int parse(const char *v, uint64_t bare_unit, usec_t *ret)
{
    uint64_t total = 0;
    bool negative = false, range = false;
    const char *p = v;

    if (!v)
        return -EINVAL;
    if (*p == '-' || *p == '+')
        negative = *p++ == '-';
    if (strcmp(p, "0") == 0) {
        *ret = 0;
        return 0;
    }
    if (!*p)
        return -EINVAL;
    while (*p) {
        struct number n;
        const char *u;
        uint64_t unit;
        bool first = p == v + (v[0] == '-' || v[0] == '+');

        if (!read_number(&p, &n))
            return -EINVAL;
        u = p; /* the unit runs to the next number */
        while (*p && *p != '.' && !is_digit(*p))
            p++;
        unit = unit_ns(u, (size_t)(p - u));
        if (p == u && first && !*p)
            unit = bare_unit;
        if (!unit)
            return -EINVAL;
        if (!range && !add_term(&n, unit, &total))
            range = true;
    }
    if (range || (negative && total > 0))
        return -ERANGE;
    *ret = total / 1000;
    return 0;
}

int duration_parse(const char *v, usec_t *ret)
{
    return parse(v, 0, ret);
}

int duration_parse_secs(const char *v, usec_t *ret)
{
    return parse(v, NSEC_PER_SEC, ret);
}
