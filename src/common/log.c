/* SPDX-License-Identifier: Apache-2.0 */
/* logfmt lines on stderr. */
#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/str.h"
#include "common/xalloc.h"

enum log_level log_max_level = LOG_INFO;
static const char *log_comp = NULL;
static int log_fd = 2;

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

void log_set_component(const char *comp)
{
    log_comp = comp;
}

void log_set_level(enum log_level level)
{
    log_max_level = level;
}

void log_set_fd(int fd)
{
    log_fd = fd;
}

int log_parse_level(const char *s, enum log_level *ret)
{
    for (unsigned i = 0; i < 5; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *ret = (enum log_level)i;
            return 0;
        }
    }
    if (s[0] >= '0' && s[0] <= '4' && s[1] == '\0') {
        *ret = (enum log_level)(s[0] - '0');
        return 0;
    }
    return -EINVAL;
}

const char *log_strerror(int r, char *b, unsigned size)
{
    if (r < 0)
        r = -r;
    /* GNU strerror_r returns the message, possibly not in b. */
    return strerror_r(r, b, size);
}

static void put_prefix(struct buf *b, enum log_level level)
{
    struct timespec ts;
    struct tm tm;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    (void)gmtime_r(&ts.tv_sec, &tm);
    (void)buf_printf(b, "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000,
                     level_names[(unsigned)level < ARRAY_SIZE(level_names) ? level : LOG_TRACE]);
    if (log_comp)
        (void)buf_printf(b, " comp=%s", log_comp);
}

/* Appends s[0..n) as a logfmt quoted value: quotes, backslashes, control bytes escaped. */
static void put_quoted(struct buf *b, const char *s, size_t n)
{
    (void)buf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            (void)buf_printf(b, "\\%c", c);
        else if (c == '\n')
            (void)buf_puts(b, "\\n");
        else if (c < 0x20 || c == 0x7f)
            (void)buf_printf(b, "\\x%02x", c);
        else
            (void)buf_putc(b, (char)c);
    }
    (void)buf_putc(b, '"');
}

/* Appends raw logfmt fields, escaping only line breaks and other control bytes so that
 * one event stays one line whatever the caller passed. */
static void put_fields(struct buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n')
            (void)buf_puts(b, "\\n");
        else if ((c < 0x20 && c != '\t') || c == 0x7f)
            (void)buf_printf(b, "\\x%02x", c);
        else
            (void)buf_putc(b, (char)c);
    }
}

/* Formats the caller's text, cut at LIMIT_LOG_LINE, and returns its length. The text is
 * in small when it fits (no allocation); otherwise *ret_heap gets a new string that the
 * caller frees. */
static size_t format_text(char *small, size_t size, char **ret_heap, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, size, fmt, ap2);
    va_end(ap2);
    *ret_heap = NULL;
    if (n < 0) {
        small[0] = '\0';
        return 0;
    }
    if ((size_t)n < size)
        return (size_t)n;
    size_t cut = (size_t)n > LIMIT_LOG_LINE ? LIMIT_LOG_LINE : (size_t)n;
    *ret_heap = xmalloc(cut + 1);
    (void)vsnprintf(*ret_heap, cut + 1, fmt, ap);
    return cut;
}

static void emit(enum log_level level, int err, const char *fmt, va_list ap)
{
    char small[1024], *heap;
    size_t len = format_text(small, sizeof(small), &heap, fmt, ap);
    struct str head, fields;
    bool has_fields = str_cut(str_make(heap ? heap : small, len), '\t', &head, &fields);
    struct buf line;
    buf_init(&line, LIMIT_LOG_LINE);
    put_prefix(&line, level);
    (void)buf_puts(&line, " msg=");
    put_quoted(&line, head.p, head.len);
    if (err) {
        char eb[128];
        const char *e = log_strerror(err, eb, sizeof(eb));
        (void)buf_puts(&line, " err=");
        put_quoted(&line, e, strlen(e));
    }
    if (has_fields && fields.len) {
        (void)buf_putc(&line, ' ');
        put_fields(&line, fields.p, fields.len);
    }
    if (buf_putc(&line, '\n') < 0 && line.len > 0)
        line.data[line.len - 1] = '\n'; /* over the limit: the tail is cut */
    (void)!write(log_fd, buf_str(&line), line.len);
    buf_done(&line);
    xfree(heap);
}

void log_emit(enum log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit(level, 0, fmt, ap);
    va_end(ap);
}

int log_emit_errno(enum log_level level, int r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit(level, r, fmt, ap);
    va_end(ap);
    return r;
}
