/* SPDX-License-Identifier: Apache-2.0 */
/* JSON lines for --log-format=json: one object per event,
 *
 *   {"ts":"2026-11-30T01:02:03.456789012Z","level":"info","logger":"controller",
 *    "msg":"reconciled","key":"ns/name","ms":"3"}
 *
 * built from the parts of a logfmt event (log.h): the message and the raw logfmt
 * fields after the tab, which are parsed here (key=value, key="quoted \"value\"").
 * Every string is escaped for JSON: quotes, backslashes, control bytes (\n, \t, \u00XX)
 * and bytes that are not valid UTF-8 (as \u00XX, their Latin-1 reading), so each line
 * parses whatever the caller logged. Field names keep letters, digits and _ - . /, any
 * other byte becomes '_'. Field values are strings. */
#pragma once

#include "common/buf.h"
#include "common/clock.h"
#include "common/str.h"

/** Appends the JSON line of one event to out, ending in '\n'. ts_ns is the wall-clock
 * time in nanoseconds since the epoch; comp and err may be NULL. Returns 0 or -E2BIG
 * (out's limit; out then holds a cut, unusable line). */
int log_json_line(struct buf *out, long long ts_ns, const char *level, const char *comp,
                  struct str msg, const char *err, struct str fields);

/** Appends s as a JSON string literal (with the quotes) to out. Returns 0 or -E2BIG. */
int log_json_string(struct buf *out, const char *s, size_t n);
