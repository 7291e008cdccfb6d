/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox stat / mkdir / mv / watch (cmd_fs.c): the pure helpers, for tests. */
#pragma once

#include <jansson.h>

#include "common/buf.h"
#include "common/limits.h"

/** Appends prefix ("/v1/stat/") and path percent-escaped except '/' (a leading '/' is
 * dropped) to out. Returns 0 or -E2BIG. */
int cli_fs_api_path(const char *prefix, const char *path, struct buf *out);

/** Appends the human line of a watch event ev (borrowed) to out: "create    a/b\n",
 * "move      a -> b\n", "overflow  3 events lost\n"; a directory's path ends in '/'.
 * Control characters are escaped; a line whose escaped form does not fit out's limit is
 * cut at a character boundary and ends in "… (cut)". Returns 0, 1 for the "ready" line
 * (nothing appended), -EINVAL (no type) or -E2BIG (not even the cut line fits). */
int cli_fs_format_event(const json_t *ev, struct buf *out);
