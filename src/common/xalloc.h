/* SPDX-License-Identifier: Apache-2.0 */
/* Allocation wrappers that never return NULL: out of memory logs and aborts.
 * These daemons are restarted by Kubernetes; handling OOM at every call site buys
 * nothing. Raw malloc/free/strdup are banned elsewhere (scripts/check-banned.sh). */
#pragma once

#include <stdarg.h>
#include <stddef.h>

/** Returns new memory of n bytes (uninitialised); aborts on OOM. */
void *xmalloc(size_t n);
/** Returns new zeroed memory for nmemb * size bytes; aborts on OOM or overflow. */
void *xcalloc(size_t nmemb, size_t size);
/** Resizes p (may be NULL) to n bytes; aborts on OOM. */
void *xrealloc(void *p, size_t n);
/** Resizes an array p of nmemb elements of size bytes; aborts on overflow or OOM. */
void *xreallocarray(void *p, size_t nmemb, size_t size);
/** Returns a new copy of s (NULL gives NULL). */
char *xstrdup(const char *s);
/** Returns a new NUL-terminated copy of the first n bytes of p. */
char *xstrndup(const char *p, size_t n);
/** Returns a new formatted string; aborts on OOM. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
/** Frees p (NULL is fine). */
void xfree(void *p);

/** Frees *pp and sets it to NULL. */
#define XFREE(pp)    \
    do {             \
        xfree(pp);   \
        (pp) = NULL; \
    } while (0)

/** Allocates one zeroed object of the pointed-to type. */
#define XNEW(type) ((type *)xcalloc(1, sizeof(type)))

/** Number of elements of a true array. */
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/** Recovers the containing struct from a pointer to one of its members. */
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/** Programmer-error check, always compiled in: logs file:line and aborts. Never use on
 * external input. */
#define ASSERT(expr)                                       \
    do {                                                   \
        if (__builtin_expect(!(expr), 0))                  \
            xalloc_assert_fail(#expr, __FILE__, __LINE__); \
    } while (0)

_Noreturn void xalloc_assert_fail(const char *expr, const char *file, int line);
