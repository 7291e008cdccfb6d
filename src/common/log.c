/* SPDX-License-Identifier: Apache-2.0 */
/* logfmt lines on stderr, optionally batched per event-loop iteration. */
#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log_json.h"
#include "common/str.h"
#include "common/xalloc.h"

enum log_level log_max_level = LOG_INFO;
static enum log_format log_fmt = LOG_FORMAT_TEXT;
static const char *log_comp = NULL;
static int log_fd = 2;

/* Batching state: pending lines, guarded by batch_lock; batchers counts the threads
 * between log_batch_start and log_batch_stop (0: every line is written at once, no
 * lock taken). */
static pthread_mutex_t batch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct buf batch_pending;
static struct timespec batch_since; /* CLOCK_MONOTONIC of the oldest pending line */
static atomic_int batchers;
static atomic_bool batch_dirty; /* batch_pending is not empty (read without the lock) */
static _Thread_local bool batching;
static pthread_once_t batch_once = PTHREAD_ONCE_INIT;

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

void log_set_component(const char *comp)
{
    log_comp = comp;
}

void log_set_level(enum log_level level)
{
    log_max_level = level;
}

void log_set_format(enum log_format format)
{
    log_fmt = format;
}

int log_parse_format(const char *s, enum log_format *ret)
{
    if (strcmp(s, "text") == 0)
        *ret = LOG_FORMAT_TEXT;
    else if (strcmp(s, "json") == 0)
        *ret = LOG_FORMAT_JSON;
    else
        return -EINVAL;
    return 0;
}

void log_set_fd(int fd)
{
    log_flush();
    log_fd = fd;
}

/* Writes all of p[0..n) (a short write continues; errors drop the rest, as before). */
static void write_all(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(log_fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return;
        p += k;
        n -= (size_t)k;
    }
}

/* Called with batch_lock held. */
static void flush_locked(void)
{
    if (batch_pending.len == 0)
        return;
    write_all(batch_pending.data, batch_pending.len);
    buf_reset(&batch_pending);
    atomic_store_explicit(&batch_dirty, false, memory_order_relaxed);
}

void log_flush(void)
{
    if (!atomic_load_explicit(&batch_dirty, memory_order_acquire))
        return;
    (void)pthread_mutex_lock(&batch_lock);
    flush_locked();
    (void)pthread_mutex_unlock(&batch_lock);
}

static void flush_at_exit(void)
{
    log_flush();
}

static void batch_init(void)
{
    buf_init(&batch_pending, LOG_BATCH_BYTES + LIMIT_LOG_LINE + 1);
    (void)atexit(flush_at_exit);
}

void log_batch_start(void)
{
    (void)pthread_once(&batch_once, batch_init);
    if (batching)
        return;
    batching = true;
    atomic_fetch_add(&batchers, 1);
}

void log_batch_stop(void)
{
    if (!batching)
        return;
    batching = false;
    log_flush();
    atomic_fetch_sub(&batchers, 1);
}

static bool batch_too_old(const struct timespec *now)
{
    long ms = (long)(now->tv_sec - batch_since.tv_sec) * 1000 +
              (now->tv_nsec - batch_since.tv_nsec) / 1000000;
    return ms >= LOG_BATCH_MAX_MS;
}

/* Writes one finished line, or adds it to the batch (see log.h for when a batch is
 * written). */
static void output(enum log_level level, const struct buf *line)
{
    if (atomic_load_explicit(&batchers, memory_order_acquire) == 0) {
        /* Nobody batches; a batch left by a thread that just stopped goes first. */
        log_flush();
        write_all(line->data, line->len);
        return;
    }
    struct timespec now;
    (void)clock_gettime(CLOCK_MONOTONIC, &now);
    (void)pthread_mutex_lock(&batch_lock);
    if (batch_pending.len == 0)
        batch_since = now;
    bool hold = batching && level > LOG_WARN && !batch_too_old(&now) &&
                batch_pending.len + line->len <= LOG_BATCH_BYTES;
    if (buf_append(&batch_pending, line->data, line->len) < 0) {
        flush_locked(); /* cannot happen with the limit above; never drop a line */
        write_all(line->data, line->len);
    } else if (!hold) {
        flush_locked();
    } else {
        atomic_store_explicit(&batch_dirty, true, memory_order_release);
    }
    (void)pthread_mutex_unlock(&batch_lock);
}

int log_flag_format(const char *s)
{
    enum log_format f;
    int r = log_parse_format(s, &f);
    if (r >= 0)
        log_set_format(f);
    return r;
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

/* "ts=YYYY-MM-DDTHH:MM:SS." of the last second this thread logged in: formatted once
 * per second, not per line. */
static _Thread_local time_t ts_sec = (time_t)-1;
static _Thread_local char ts_text[40];
static _Thread_local size_t ts_len;

static void put_prefix(struct buf *b, enum log_level level)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    if (ts.tv_sec != ts_sec) {
        struct tm tm;
        (void)gmtime_r(&ts.tv_sec, &tm);
        int n = snprintf(ts_text, sizeof(ts_text), "ts=%04d-%02d-%02dT%02d:%02d:%02d.",
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                         tm.tm_sec);
        ts_len = n > 0 && (size_t)n < sizeof(ts_text) ? (size_t)n : 0;
        ts_sec = ts.tv_sec;
    }
    unsigned ms = (unsigned)(ts.tv_nsec / 1000000);
    char tail[8] = {(char)('0' + ms / 100), (char)('0' + ms / 10 % 10), (char)('0' + ms % 10), 'Z',
                    ' '};
    (void)buf_append(b, ts_text, ts_len);
    (void)buf_append(b, tail, 5);
    (void)buf_puts(b, "level=");
    (void)buf_puts(b, level_names[(unsigned)level < ARRAY_SIZE(level_names) ? level : LOG_TRACE]);
    if (log_comp) {
        (void)buf_puts(b, " comp=");
        (void)buf_puts(b, log_comp);
    }
}

/* Appends the escape of byte c (quoted: also '"' and '\\'). */
static void put_escape(struct buf *b, unsigned char c)
{
    static const char hex[] = "0123456789abcdef";
    if (c == '\n') {
        (void)buf_puts(b, "\\n");
    } else if (c == '"' || c == '\\') {
        char e[2] = {'\\', (char)c};
        (void)buf_append(b, e, 2);
    } else {
        char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
        (void)buf_append(b, e, 4);
    }
}

/* Appends p[0..n), or as much of it as the line limit leaves (the tail is cut). */
static void append_cut(struct buf *b, const char *p, size_t n)
{
    if (buf_append(b, p, n) < 0 && b->len < b->limit)
        (void)buf_append(b, p, b->limit - b->len);
}

/* Appends s[0..n), escaping control bytes (and, quoted, '"' and '\\'); runs of
 * plain bytes are appended at once. */
static void put_escaped(struct buf *b, const char *s, size_t n, bool quoted)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool ctl = (c < 0x20 && (quoted || c != '\t')) || c == 0x7f;
        if (!ctl && !(quoted && (c == '"' || c == '\\')))
            continue;
        append_cut(b, s + run, i - run);
        put_escape(b, c);
        run = i + 1;
    }
    append_cut(b, s + run, n - run);
}

void log_quote(struct buf *b, const char *s, size_t n)
{
    (void)buf_putc(b, '"');
    put_escaped(b, s, n, true);
    (void)buf_putc(b, '"');
}

/* Appends raw logfmt fields, escaping only line breaks and other control bytes so that
 * one event stays one line whatever the caller passed. */
static void put_fields(struct buf *b, const char *s, size_t n)
{
    put_escaped(b, s, n, false);
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

/* The JSON line of an event (log_json.h); escaping grows a byte to 6 at most, so the
 * buffer always holds the whole line and the line stays valid JSON. */
static void emit_json(enum log_level level, const char *err, struct str head, struct str fields)
{
    struct timespec ts;
    struct buf line;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    buf_init(&line, 7 * (size_t)LIMIT_LOG_LINE + 1024);
    (void)log_json_line(&line, (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec,
                        level_names[(unsigned)level < ARRAY_SIZE(level_names) ? level : LOG_TRACE],
                        log_comp, head, err, fields);
    output(level, &line);
    buf_done(&line);
}

static void emit(enum log_level level, int err, const char *fmt, va_list ap)
{
    char small[1024], *heap;
    size_t len = format_text(small, sizeof(small), &heap, fmt, ap);
    struct str head, fields;
    bool has_fields = str_cut(str_make(heap ? heap : small, len), '\t', &head, &fields);
    struct buf line;
    if (log_fmt == LOG_FORMAT_JSON) {
        char eb[128];
        emit_json(level, err ? log_strerror(err, eb, sizeof(eb)) : NULL, head,
                  has_fields ? fields : str_make("", 0));
        xfree(heap);
        return;
    }
    buf_init(&line, LIMIT_LOG_LINE);
    put_prefix(&line, level);
    (void)buf_puts(&line, " msg=");
    log_quote(&line, head.p, head.len);
    if (err) {
        char eb[128];
        const char *e = log_strerror(err, eb, sizeof(eb));
        (void)buf_puts(&line, " err=");
        log_quote(&line, e, strlen(e));
    }
    if (has_fields && fields.len) {
        (void)buf_putc(&line, ' ');
        put_fields(&line, fields.p, fields.len);
    }
    if (buf_putc(&line, '\n') < 0 && line.len > 0)
        line.data[line.len - 1] = '\n'; /* over the limit: the tail is cut */
    output(level, &line);
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
