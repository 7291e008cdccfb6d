/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers shared by sandboxd's handlers: query parameters, the
 * {"code","message"} error body, HTTP dates, JSON-safe text and one-shot timers. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <uv.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/str.h"
#include "http/server.h"

/** Starts t once, to run cb at due (clock_now() time; at once when it has passed): the
 * next keepalive or deadline of a stream. */
void sbd_timer_at(uv_timer_t *t, uv_timer_cb cb, usec_t due);

/** Finds name in a query string ("a=1&b=2") and decodes its value into out (form
 * encoding: '+' is a space). Returns 1 found, 0 absent, or negative as pct_decode. */
int sbd_query_get(struct str query, const char *name, struct buf *out);

/** Error codes of the sandboxd API (the code strings of its error body). */
#define SBD_PERMISSION_DENIED   "PERMISSION_DENIED"
#define SBD_NOT_FOUND           "NOT_FOUND"
#define SBD_INVALID_ARGUMENT    "INVALID_ARGUMENT"
#define SBD_CONFLICT            "CONFLICT"
#define SBD_INTERNAL            "INTERNAL"
#define SBD_UNAVAILABLE         "UNAVAILABLE"
#define SBD_UNAUTHENTICATED     "UNAUTHENTICATED"
#define SBD_RESOURCE_EXHAUSTED  "RESOURCE_EXHAUSTED"
#define SBD_FAILED_PRECONDITION "FAILED_PRECONDITION"

/** Sends {"code": code, "message": msg} with status (code and msg borrowed). */
int sbd_respond_error(struct http_req *req, int status, const char *code, const char *msg);
/** Maps a negative errno from a file operation to status + code and responds. ENOTDIR
 * there is a path that must exist (a read, a delete, a move's source) running through a
 * non-directory: 404 NOT_FOUND, as a missing one. */
int sbd_respond_errno(struct http_req *req, int err, const char *what);
/** The message of a write whose path runs through a non-directory (ENOTDIR: a regular
 * file where a parent directory should be). */
#define SBD_MSG_NOT_DIR "a path component is not a directory"
/** Answers a write (PUT, mkdir, a move's destination; a batch file's result says the
 * same) whose path runs through a non-directory: 409 CONFLICT "<what>: a path component
 * is not a directory" (what borrowed). */
int sbd_respond_not_dir(struct http_req *req, const char *what);
/** The default error code for an HTTP status ("NOT_FOUND" for 404...); static. */
const char *sbd_code_for_status(int status);
/** http_error_body_fn for the REST server: {"code","message"}. */
int sbd_error_body(void *ctx, int status, const char *detail, struct buf *out,
                   const char **ret_content_type);

/** Appends j (borrowed) as compact JSON, keys in insertion order, to out. Returns 0 or
 * -E2BIG. */
int sbd_json_dump(const json_t *j, struct buf *out);

/** Formats t as an IMF-fixdate into out (>= 30 bytes). */
void sbd_http_date(time_t t, char *out, size_t size);
/** Parses an IMF-fixdate. Returns 0 or -EINVAL. */
int sbd_parse_http_date(struct str s, time_t *ret);

/** Appends p[0..n) to out as valid UTF-8, replacing invalid sequences with U+FFFD.
 * Returns 0 or -E2BIG. */
int sbd_utf8_sanitize(const char *p, size_t n, struct buf *out);
/** A new JSON string of s (a file name or path: any bytes but NUL), its invalid UTF-8
 * replaced with U+FFFD as Go's encoding/json does (jansson refuses it: the name would be
 * dropped). NULL gives JSON null. */
json_t *sbd_json_name(const char *s);
/** Compares a guess `a` with the secret `b` in a time that depends on b's length only. */
bool sbd_secure_eq(struct str a, struct str b);
