/* SPDX-License-Identifier: Apache-2.0 */
/* Filesystem operations of the REST API beyond read/write (fsops.c): GET /v1/stat/{path},
 * POST /v1/mkdir/{path}, POST /v1/move, POST /v1/files:batch, windowed reads of
 * GET /v1/files/{path}, and (watch.c) GET /v1/watch/{path}. */
#pragma once

#include <sys/stat.h>

#include "http/server.h"

struct sbd;

/** Registers the routes of fsops.c and watch.c on d's REST router (handlers get d as
 * ctx). Returns 0 or -EINVAL. */
int sbd__fsops_register(struct sbd *d);

/** Serves ?offset=&max_bytes= of the regular file fd (borrowed; st its fstat) for a GET
 * or HEAD of /v1/files/{path}. Returns 1 when it answered (the window, 400 or 416), 0
 * when the query has neither parameter (the caller serves the file as usual). */
int sbd__read_window(struct http_req *req, int fd, const struct stat *st);

/** Registers GET /v1/watch/ (watch.c). Returns 0 or -EINVAL. */
int sbd__watch_register(struct sbd *d);
/** Ends d's watch streams (shutdown): their responses end now, not at their next tick. */
void sbd__watch_shutdown(struct sbd *d);

/** Tests only: when nonzero (and below 64 KiB), each readiness of a watch's inotify
 * descriptor reads once, at most this many bytes, so that a rename's two events arrive in
 * different reads. Set before the daemon starts. */
extern size_t sbd__watch_test_read_size;
