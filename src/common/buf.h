/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded growable byte buffer (after curl's dynbuf). Every buffer an outsider can
 * grow is a struct buf with an explicit maximum from common/limits.h. The content is
 * always NUL-terminated (the NUL is not counted in len) so it can be used as a string. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

struct buf {
    char *data;   /* NULL until the first append; NUL-terminated after */
    size_t len;   /* bytes used, without the terminating NUL */
    size_t cap;   /* bytes allocated */
    size_t limit; /* maximum len; an append past it fails with -E2BIG */
};

/** Initialises an empty buffer that may hold at most limit bytes (no allocation). */
void buf_init(struct buf *b, size_t limit);
/** Releases the memory; the buffer is empty and reusable with the same limit. */
void buf_done(struct buf *b);
/** Drops the content but keeps the memory. */
void buf_reset(struct buf *b);

/** Appends n bytes. Returns 0, or -E2BIG when len would pass the limit (the buffer is
 * left unchanged in that case, unlike curl, so nothing already received is lost). */
int buf_append(struct buf *b, const void *p, size_t n);
/** Appends a NUL-terminated string. */
int buf_puts(struct buf *b, const char *s);
/** Appends one byte. */
int buf_putc(struct buf *b, char c);
/** Appends formatted text; -E2BIG past the limit (buffer unchanged). */
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/** Removes the first n bytes (n > len empties it). */
void buf_consume(struct buf *b, size_t n);
/** Detaches and returns the content (new string, caller frees with xfree; never NULL);
 * the buffer is left empty. */
char *buf_steal(struct buf *b);
/** Returns the content as a string: borrowed, "" when empty. */
const char *buf_str(const struct buf *b);
