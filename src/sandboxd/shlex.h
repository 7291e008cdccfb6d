/* SPDX-License-Identifier: Apache-2.0 */
/* Python's shlex.split (POSIX mode) and the JSON text of Python's json.dumps with
 * ensure_ascii=False, for byte-compatible legacy python-runtime responses. */
#pragma once

#include <stddef.h>

#include "common/buf.h"
#include "common/str.h"

/** Splits s like shlex.split(s). Returns 0 with *ret a new NULL-terminated array (free
 * with sbd_shlex_free), or -EINVAL with *ret_msg "No closing quotation" / "No escaped
 * character" (static). */
int sbd_shlex_split(struct str s, char ***ret, const char **ret_msg);
void sbd_shlex_free(char **v);
/** Appends "s" as Python's json.dumps(ensure_ascii=False) writes a string (s must be valid
 * UTF-8). Returns 0 or -E2BIG. */
int sbd_py_json_string(struct str s, struct buf *out);
/** Appends the shortest repr of a double that round-trips, as Python's repr(float). */
int sbd_py_float(double v, struct buf *out);
/** Appends Python's repr of a list of strings (['a', 'b']). */
int sbd_py_repr_list(char *const *v, struct buf *out);
