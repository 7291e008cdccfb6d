/* SPDX-License-Identifier: Apache-2.0 */
/* Output helpers for kubectl-sandbox: JSON, YAML, kubectl-style ages and tables. */
#pragma once

#include <jansson.h>
#include <stdio.h>

#include "common/buf.h"

/** Prints obj as indented JSON followed by a newline. */
void out_json(FILE *out, const json_t *obj);
/** Prints obj (borrowed) as one block-style YAML document through libyaml's emitter:
 * strings quoted where YAML needs it or where they would read back as another type,
 * multi-line strings as literal blocks. Returns 0, or -EIO (a write failed) or -ENOMEM;
 * the output may then be cut short. */
int out_yaml(FILE *out, const json_t *obj);
/** kubectl-style age of an RFC 3339 timestamp ("45s", "12m", "5h", "3d"); "<unknown>" if
 * ts is NULL or malformed. Writes into buf and returns it. */
const char *out_age(const char *ts, char *buf, unsigned size);

/** Appends s[0..len) to out made safe for a terminal: C0 control characters other than
 * those in keep (e.g. "\t"), DEL, C1 controls (U+0080..U+009F, as UTF-8) and bytes that
 * are not part of valid UTF-8 become "\xHH" escapes, one per byte; the rest is copied.
 * Text from a sandbox (file names, messages) goes through it before reaching a
 * terminal, where an ESC could move the cursor, retitle the window or write the
 * clipboard. Returns 0 or -E2BIG (out's limit; out then holds what fitted). */
int out_safe_append(struct buf *out, const char *s, size_t len, const char *keep);
/** s (NUL-terminated; NULL gives NULL) made safe as by out_safe_append with keep "\t",
 * as a new string (xfree). */
char *out_safe_dup(const char *s);
/** Rewrites the string in out (of size bytes) in place made safe as by out_safe_dup,
 * cut to fit size. */
void out_safe_inplace(char *out, size_t size);

#define OUT_MAX_COLS 10

/** A simple left-aligned table: rows are collected, then printed with column widths. */
struct out_table {
    unsigned ncols;
    unsigned nrows;
    unsigned cap;
    char **cells; /* nrows * ncols, owned */
};

void out_table_init(struct out_table *t, unsigned ncols);
/** Adds a row of ncols cells (copied, made safe with out_safe_dup; NULL prints as
 * "<none>"). */
void out_table_add(struct out_table *t, const char *const *cells);
void out_table_print(FILE *out, const struct out_table *t);
void out_table_done(struct out_table *t);
