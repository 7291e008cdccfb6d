/* SPDX-License-Identifier: Apache-2.0 */
/* String slices (pointer + length, not NUL-terminated by contract) and strict number
 * parsers that reject trailing garbage. Arguments go (ptr, len) in that order. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct str {
    const char *p;
    size_t len;
};

#define STR_LIT(s) ((struct str){.p = (s), .len = sizeof(s) - 1})
#define STR_NULL   ((struct str){.p = NULL, .len = 0})

/** A slice over a NUL-terminated string (NULL gives the empty slice). */
static inline struct str str_c(const char *s)
{
    return (struct str){.p = s, .len = s ? strlen(s) : 0};
}

static inline struct str str_make(const char *p, size_t len)
{
    return (struct str){.p = p, .len = len};
}

bool str_eq(struct str a, struct str b);
/** ASCII case-insensitive comparison. */
bool str_eq_nocase(struct str a, struct str b);
bool str_eq_c(struct str a, const char *b);
bool str_has_prefix(struct str s, struct str prefix);
bool str_has_suffix(struct str s, struct str suffix);
/** Trims ASCII spaces and tabs (and CR/LF) from both ends. */
struct str str_trim(struct str s);
/** Index of the first c in s, or -1. */
long str_index(struct str s, char c);
/** Splits s at the first sep: *ret_head is before it, *ret_tail after. Returns false
 * (and head = s, tail empty) when sep does not occur. */
bool str_cut(struct str s, char sep, struct str *ret_head, struct str *ret_tail);
/** Returns a new NUL-terminated copy (caller frees with xfree). */
char *str_dup(struct str s);

/** Parses a decimal unsigned integer: digits only, no sign, no space, no overflow.
 * Returns 0 or -EINVAL / -ERANGE; *ret untouched on failure. */
int str_to_u64(struct str s, uint64_t *ret);
/** Parses an optionally signed decimal integer. */
int str_to_i64(struct str s, int64_t *ret);
/** Same for NUL-terminated strings. */
int cstr_to_u64(const char *s, uint64_t *ret);
int cstr_to_i64(const char *s, int64_t *ret);
/** Parses a boolean as Go's strconv.ParseBool does (the controller's flags mirror Go
 * flags): true for "1", "t", "T", "true", "True", "TRUE"; false for "0", "f", "F",
 * "false", "False", "FALSE". Returns 0 or -EINVAL (NULL, "", anything else); *ret
 * untouched on failure. */
int cstr_to_bool(const char *s, bool *ret);
/** Parses a hex number (no 0x prefix) as used by chunked encoding. */
int str_hex_to_u64(struct str s, uint64_t *ret);

/** Bounded copy: copies at most size-1 bytes and NUL-terminates. Returns -E2BIG (and a
 * truncated result) when src did not fit, else 0. Replaces strcpy/strncpy. */
int str_copy(char *dst, size_t size, const char *src);
