/* SPDX-License-Identifier: Apache-2.0 */
/* Abort-on-OOM allocation wrappers: the only file allowed to call malloc and friends. */
#include "common/xalloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Noreturn void oom(size_t n)
{
    char msg[96];
    int len = snprintf(msg, sizeof(msg), "fatal: out of memory allocating %zu bytes\n", n);
    if (len > 0)
        (void)!write(STDERR_FILENO, msg, (size_t)len);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n);
    return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
    void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
    if (!p)
        oom(nmemb * size);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom(n);
    return q;
}

void *xreallocarray(void *p, size_t nmemb, size_t size)
{
    if (size && nmemb > SIZE_MAX / size)
        oom(SIZE_MAX);
    return xrealloc(p, nmemb * size);
}

char *xstrdup(const char *s)
{
    if (!s)
        return NULL;
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *p, size_t n)
{
    char *s = xmalloc(n + 1);
    if (n)
        memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

char *xvasprintf(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        oom(0);
    char *s = xmalloc((size_t)n + 1);
    (void)vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = xvasprintf(fmt, ap);
    va_end(ap);
    return s;
}

void xfree(void *p)
{
    free(p);
}

void xalloc_assert_fail(const char *expr, const char *file, int line)
{
    char msg[512];
    int len = snprintf(msg, sizeof(msg), "fatal: assertion failed: %s (%s:%d)\n", expr, file, line);
    if (len > 0)
        (void)!write(STDERR_FILENO, msg, (size_t)len > sizeof(msg) ? sizeof(msg) : (size_t)len);
    abort();
}
