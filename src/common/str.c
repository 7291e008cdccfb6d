/* SPDX-License-Identifier: Apache-2.0 */
/* String slices and strict number parsing. */
#include "common/str.h"

#include <errno.h>

#include "common/xalloc.h"

bool str_eq(struct str a, struct str b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

static char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

bool str_eq_nocase(struct str a, struct str b)
{
    if (a.len != b.len)
        return false;
    for (size_t i = 0; i < a.len; i++)
        if (lower(a.p[i]) != lower(b.p[i]))
            return false;
    return true;
}

bool str_eq_c(struct str a, const char *b)
{
    return str_eq(a, str_c(b));
}

bool str_has_prefix(struct str s, struct str prefix)
{
    return s.len >= prefix.len && (prefix.len == 0 || memcmp(s.p, prefix.p, prefix.len) == 0);
}

bool str_has_suffix(struct str s, struct str suffix)
{
    return s.len >= suffix.len &&
           (suffix.len == 0 || memcmp(s.p + s.len - suffix.len, suffix.p, suffix.len) == 0);
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

struct str str_trim(struct str s)
{
    while (s.len && is_space(s.p[0])) {
        s.p++;
        s.len--;
    }
    while (s.len && is_space(s.p[s.len - 1]))
        s.len--;
    return s;
}

long str_index(struct str s, char c)
{
    const char *q = s.len ? memchr(s.p, c, s.len) : NULL;
    return q ? (long)(q - s.p) : -1;
}

bool str_cut(struct str s, char sep, struct str *ret_head, struct str *ret_tail)
{
    long i = str_index(s, sep);
    if (i < 0) {
        *ret_head = s;
        *ret_tail = str_make(s.p ? s.p + s.len : NULL, 0);
        return false;
    }
    *ret_head = str_make(s.p, (size_t)i);
    *ret_tail = str_make(s.p + i + 1, s.len - (size_t)i - 1);
    return true;
}

char *str_dup(struct str s)
{
    return xstrndup(s.p ? s.p : "", s.len);
}

int str_to_u64(struct str s, uint64_t *ret)
{
    if (s.len == 0)
        return -EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < s.len; i++) {
        char c = s.p[i];
        if (c < '0' || c > '9')
            return -EINVAL;
        unsigned d = (unsigned)(c - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *ret = v;
    return 0;
}

int str_to_i64(struct str s, int64_t *ret)
{
    bool neg = false;
    if (s.len && (s.p[0] == '-' || s.p[0] == '+')) {
        neg = s.p[0] == '-';
        s.p++;
        s.len--;
    }
    uint64_t u;
    int r = str_to_u64(s, &u);
    if (r < 0)
        return r;
    if (neg ? u > (uint64_t)INT64_MAX + 1 : u > (uint64_t)INT64_MAX)
        return -ERANGE;
    *ret = neg ? (int64_t)(0 - u) : (int64_t)u;
    return 0;
}

int cstr_to_u64(const char *s, uint64_t *ret)
{
    return str_to_u64(str_c(s), ret);
}

int cstr_to_i64(const char *s, int64_t *ret)
{
    return str_to_i64(str_c(s), ret);
}

int cstr_to_bool(const char *s, bool *ret)
{
    static const char *const yes[] = {"1", "t", "T", "true", "True", "TRUE"};
    static const char *const no[] = {"0", "f", "F", "false", "False", "FALSE"};
    for (size_t i = 0; s && i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcmp(s, yes[i]) == 0 || strcmp(s, no[i]) == 0) {
            *ret = strcmp(s, yes[i]) == 0;
            return 0;
        }
    }
    return -EINVAL;
}

static int hex_digit(char c)
{
    c = lower(c);
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int str_hex_to_u64(struct str s, uint64_t *ret)
{
    if (s.len == 0)
        return -EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < s.len; i++) {
        int d = hex_digit(s.p[i]);
        if (d < 0)
            return -EINVAL;
        if (v >> 60) /* leading zeros are fine; a 17th significant digit is not */
            return -ERANGE;
        v = (v << 4) | (uint64_t)d;
    }
    *ret = v;
    return 0;
}

int str_copy(char *dst, size_t size, const char *src)
{
    if (size == 0)
        return -E2BIG;
    size_t n = strlen(src);
    int r = 0;
    if (n >= size) {
        n = size - 1;
        r = -E2BIG;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
    return r;
}
