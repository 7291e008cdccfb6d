/* SPDX-License-Identifier: Apache-2.0 */
/* Monotonic and wall time in microseconds. */
#include "common/clock.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static usec_t ts_to_usec(const struct timespec *ts)
{
    return (usec_t)ts->tv_sec * USEC_PER_SEC + (usec_t)ts->tv_nsec / 1000;
}

usec_t clock_now(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts_to_usec(&ts);
}

usec_t clock_wall_now(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    return ts_to_usec(&ts);
}

void clock_sleep(usec_t d)
{
    struct timespec ts = {.tv_sec = (time_t)(d / USEC_PER_SEC),
                          .tv_nsec = (long)(d % USEC_PER_SEC) * 1000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static void deadline(clockid_t id, usec_t d, struct timespec *ts)
{
    (void)clock_gettime(id, ts);
    usec_t ns = (usec_t)ts->tv_nsec + (d % USEC_PER_SEC) * 1000;
    ts->tv_sec += (time_t)(d / USEC_PER_SEC) + (time_t)(ns / 1000000000);
    ts->tv_nsec = (long)(ns % 1000000000);
}

void clock_deadline_realtime(usec_t d, struct timespec *ts)
{
    deadline(CLOCK_REALTIME, d, ts);
}

void clock_deadline_mono(usec_t d, struct timespec *ts)
{
    deadline(CLOCK_MONOTONIC, d, ts);
}

static void format(usec_t wall, char *out, unsigned size, int micros)
{
    time_t sec = (time_t)(wall / USEC_PER_SEC);
    struct tm tm;
    (void)gmtime_r(&sec, &tm);
    if (micros)
        (void)snprintf(out, size, "%04d-%02d-%02dT%02d:%02d:%02d.%06uZ", tm.tm_year + 1900,
                       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                       (unsigned)(wall % USEC_PER_SEC));
    else
        (void)snprintf(out, size, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
                       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

void clock_format_rfc3339(usec_t wall, char *out, unsigned size)
{
    format(wall, out, size, 1);
}

void clock_format_rfc3339_sec(usec_t wall, char *out, unsigned size)
{
    format(wall, out, size, 0);
}

/* Reads exactly n digits. */
static int digits(const char **s, int n, int *ret)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        char c = (*s)[i];
        if (c < '0' || c > '9')
            return -EINVAL;
        v = v * 10 + (c - '0');
    }
    *s += n;
    *ret = v;
    return 0;
}

static int expect(const char **s, char c)
{
    if (**s != c)
        return -EINVAL;
    (*s)++;
    return 0;
}

/* Parses an optional ".f..." (at least one digit; digits past microseconds are
 * truncated) into microseconds. */
static int fraction(const char **s, usec_t *ret)
{
    usec_t us = 0, scale = 100000;
    *ret = 0;
    if (**s != '.')
        return 0;
    (*s)++;
    if (**s < '0' || **s > '9')
        return -EINVAL;
    for (; **s >= '0' && **s <= '9'; (*s)++) {
        us += (usec_t)(**s - '0') * scale;
        scale /= 10;
    }
    *ret = us;
    return 0;
}

/* Parses "Z" or "+hh:mm"/"-hh:mm" into an offset in seconds east of UTC. */
static int zone(const char *s, long *ret)
{
    if ((s[0] == 'Z' || s[0] == 'z') && s[1] == '\0') {
        *ret = 0;
        return 0;
    }
    int hh, mm;
    if ((s[0] != '+' && s[0] != '-') || strlen(s) != 6)
        return -EINVAL;
    const char *p = s + 1;
    if (digits(&p, 2, &hh) < 0 || expect(&p, ':') < 0 || digits(&p, 2, &mm) < 0 || hh > 23 ||
        mm > 59)
        return -EINVAL;
    *ret = (s[0] == '-' ? -1 : 1) * (hh * 3600L + mm * 60L);
    return 0;
}

static int days_in_month(int y, int mo)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return mo == 2 && leap ? 29 : days[mo - 1];
}

/* Parses "YYYY-MM-DD" followed by 'T', 't' or ' '. */
static int date(const char **s, int *y, int *mo, int *d)
{
    if (digits(s, 4, y) < 0 || expect(s, '-') < 0 || digits(s, 2, mo) < 0 || expect(s, '-') < 0 ||
        digits(s, 2, d) < 0)
        return -EINVAL;
    if (*mo < 1 || *mo > 12 || *d < 1 || *d > days_in_month(*y, *mo))
        return -EINVAL;
    if (**s != 'T' && **s != 't' && **s != ' ')
        return -EINVAL;
    (*s)++;
    return 0;
}

int clock_parse_rfc3339(const char *s, usec_t *ret)
{
    struct tm tm = {0};
    int y, mo, d, h, mi, sec;
    if (date(&s, &y, &mo, &d) < 0)
        return -EINVAL;
    if (digits(&s, 2, &h) < 0 || expect(&s, ':') < 0 || digits(&s, 2, &mi) < 0 ||
        expect(&s, ':') < 0 || digits(&s, 2, &sec) < 0)
        return -EINVAL;
    if (h > 23 || mi > 59 || sec > 60) /* 60: a leap second */
        return -EINVAL;
    usec_t us;
    long off;
    if (fraction(&s, &us) < 0 || zone(s, &off) < 0)
        return -EINVAL;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    time_t t = timegm(&tm);
    if (t == (time_t)-1 || (long)t < off)
        return -EINVAL;
    *ret = (usec_t)(t - off) * USEC_PER_SEC + us;
    return 0;
}
