/* SPDX-License-Identifier: Apache-2.0 */
/* Structured logging: one logfmt line per event on stderr, written with a single
 * write(2) (or batched, see log_batch_start) so lines from several threads never
 * interleave.
 *
 *   ts=2026-11-30T01:02:03.456Z level=info comp=controller msg="reconciled" key=ns/name
 *
 * The level is checked before any argument is evaluated. Library code (common, kube,
 * http) logs at debug level at most and returns errors instead. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

struct buf;

enum log_level {
    LOG_ERROR = 0,
    LOG_WARN = 1,
    LOG_INFO = 2,
    LOG_DEBUG = 3,
    LOG_TRACE = 4,
};

/* Line format: logfmt (above; the default) or JSON lines (common/log_json.h) with ts
 * (RFC 3339, nanoseconds), level, logger (the component), msg, err and the logfmt
 * fields as string members. */
enum log_format {
    LOG_FORMAT_TEXT = 0,
    LOG_FORMAT_JSON = 1,
};

/** Current maximum level that is written; read without locking on purpose. */
extern enum log_level log_max_level;

/** Sets the component name printed as comp=... (borrowed: must outlive logging). */
void log_set_component(const char *comp);
void log_set_level(enum log_level level);
/** Sets the line format (set it before other threads log). */
void log_set_format(enum log_format format);
/** Parses "text" or "json". Returns 0 or -EINVAL. */
int log_parse_format(const char *s, enum log_format *ret);
/** Parses a --log-format value and sets it. Returns 0 or -EINVAL. */
int log_flag_format(const char *s);
/** Parses "error", "warn", "info", "debug", "trace" (or 0-4). Returns 0 or -EINVAL. */
int log_parse_level(const char *s, enum log_level *ret);
/** Redirects output to fd (default 2), after writing any batched lines to the old one;
 * for tests. */
void log_set_fd(int fd);

/* Batching, for a thread that runs an event loop and logs per request (the router's
 * access log): between log_batch_start() and log_batch_stop() the calling thread's info,
 * debug and trace lines are collected in one process-wide buffer instead of costing a
 * write(2) each. Pending lines are written, in order and in as few writes as possible:
 * when that thread calls log_flush() (once per loop iteration, before the loop blocks),
 * when LOG_BATCH_BYTES are pending, when the oldest has waited LOG_BATCH_MAX_MS, with
 * any warn or error line, with any line of a thread that does not batch (so lines are
 * never reordered), at log_batch_stop(), log_set_fd() and exit(). A crash loses what
 * is pending. Without a batching thread every line is one write(2), as before. */
#define LOG_BATCH_BYTES  (64 * 1024)
#define LOG_BATCH_MAX_MS 100

/** The calling thread's lines are batched from now on. */
void log_batch_start(void);
/** Writes what is pending; the calling thread's lines are written at once again. */
void log_batch_stop(void);
/** Writes what is pending (from any thread). Cheap when nothing is. */
void log_flush(void);

/** Appends s[0..n) to b as a quoted logfmt value: '"' and '\\' get a backslash, a line
 * feed becomes \n, other control bytes and DEL become \xHH; bytes from 0x80 pass (UTF-8
 * stays readable). What passes b's limit is cut. The one quoting for every logfmt value a
 * caller builds itself (log_json.c undoes exactly these escapes). */
void log_quote(struct buf *b, const char *s, size_t n);

/** Writes one line from a printf format. A tab in the formatted text separates the
 * message from raw logfmt fields: log_info("reconciled\tkey=%s ms=%d", key, ms) gives
 * msg="reconciled" key=... ms=... (values with spaces must be quoted by the caller).
 * Use the macros below, not this. */
void log_emit(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define LOG_AT(level, ...)                  \
    do {                                    \
        if ((level) <= log_max_level)       \
            log_emit((level), __VA_ARGS__); \
    } while (0)

#define log_error(...) LOG_AT(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  LOG_AT(LOG_WARN, __VA_ARGS__)
#define log_info(...)  LOG_AT(LOG_INFO, __VA_ARGS__)
#define log_debug(...) LOG_AT(LOG_DEBUG, __VA_ARGS__)
#define log_trace(...) LOG_AT(LOG_TRACE, __VA_ARGS__)

/** Logs with an errno-style code r (negative or positive) as err="..." and evaluates
 * to r, so that `return log_error_errno(r, "...")` works. */
int log_emit_errno(enum log_level level, int r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define LOG_ERRNO_AT(level, r, ...) \
    ((level) <= log_max_level ? log_emit_errno((level), (r), __VA_ARGS__) : (r))

#define log_error_errno(r, ...) LOG_ERRNO_AT(LOG_ERROR, (r), __VA_ARGS__)
#define log_warn_errno(r, ...)  LOG_ERRNO_AT(LOG_WARN, (r), __VA_ARGS__)
#define log_debug_errno(r, ...) LOG_ERRNO_AT(LOG_DEBUG, (r), __VA_ARGS__)

/** Returns the message of an errno-style code (negative or positive); thread-safe. */
const char *log_strerror(int r, char *buf, unsigned size);
