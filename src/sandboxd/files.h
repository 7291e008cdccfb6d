/* SPDX-License-Identifier: Apache-2.0 */
/* File helpers shared by the REST and legacy APIs: listing entries, atomic confined
 * writes, and streamed uploads (raw or multipart) into them. */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include <sys/stat.h>

#include "http/server.h"
#include "sandboxd/path.h"

/** Returns a new DirectoryListing entry {name,size,type,modified_at,mode}. */
json_t *sbd_file_entry_json(const char *name, const struct stat *st);

/** Serves the regular file fd (borrowed) as application/octet-stream with Last-Modified
 * and a strong ETag, single-range requests (If-Range by entity tag or strong date) and
 * conditional GET; large files are streamed. */
int sbd_send_file(struct http_req *req, int fd, const struct stat *st);

/** Room for a file's ETag: quotes, four hex numbers and their separators, NUL. */
#define SBD_ETAG_LEN 80

/** Adds the validators of the regular file st (Last-Modified, ETag, Accept-Ranges) to the
 * response and evaluates If-Match, If-Unmodified-Since, If-None-Match and
 * If-Modified-Since. Returns 0 to go on, or 1 when it answered (304 or 412). */
int sbd__file_validate(struct http_req *req, const struct stat *st);

/** pick_range for fsops.c: the Range (and If-Range) of req against st. Returns 0 or
 * -ERANGE (unsatisfiable). */
int sbd__pick_range(struct http_req *req, const struct stat *st, uint64_t *start, uint64_t *len,
                    bool *partial);
/** Sends len bytes of fd (borrowed) from start with status (200/206), streamed when large. */
int sbd__send_range(struct http_req *req, int fd, int status, uint64_t start, uint64_t len);

struct sbd_writer;

/** Starts an atomic write of rel (cleaned) beneath root: parents are created (0755; an
 * abort removes the ones it made) and a temporary file is made next to the target; an
 * existing symlink that resolves beneath the root is written through (truncated in
 * place). Returns 0 with *ret new, -EISDIR when the target is a directory, -EPERM on
 * escape, or another negative errno. */
int sbd_writer_open(const struct sbd_root *root, const char *rel, mode_t mode,
                    struct sbd_writer **ret);
/** Appends n bytes. Returns 0 or a negative errno. */
int sbd_writer_write(struct sbd_writer *w, const void *p, size_t n);
/** Bytes written so far. */
uint64_t sbd_writer_size(const struct sbd_writer *w);
/** fsync, chmod, rename over the target; frees w. Returns 0 or a negative errno (the
 * temporary file is removed, as by sbd_writer_abort). */
int sbd_writer_commit(struct sbd_writer *w);
/** Removes the temporary file, then the missing parents sbd_writer_open made for the
 * target while they are empty, and frees w (NULL is fine). */
void sbd_writer_abort(struct sbd_writer *w);

/** The path beneath root (relative, new in *ret) of the regular file fd (borrowed; any
 * kind of open, O_PATH too) has open, from /proc/self/fd/N, checked to still name that
 * file (same st_dev and st_ino, the final component not followed) when read; internal
 * to sbd_writer_open (writes through a symlink), declared for tests. Returns 0 or a
 * negative errno: -ENOENT when the file was removed, or its name no longer names it
 * (unlinked while another hard link keeps it, or renamed and replaced), -EPERM when the
 * name is not beneath root's path, -EISDIR / -ENXIO for a directory / another
 * non-regular file, -ENAMETOOLONG. */
int sbd__fd_rel(const struct sbd_root *root, int fd, char **ret);

/** Outcome of an upload: err 0 on success, else -EPERM (escape), -EISDIR, -EPROTO (bad
 * multipart), -ENODATA (no file part), -EFBIG (over the limit), -EINVAL (bad filename) or
 * another negative errno. path is the cleaned relative path written (borrowed, may be
 * NULL on failure). The callback must respond to req. */
typedef void sbd_upload_done_fn(struct http_req *req, int err, const char *path, void *ctx);

struct sbd_upload_opts {
    const struct sbd_root *root; /* borrowed; must outlive the upload */
    const char *rel;             /* target (raw body, or multipart part "file"); NULL:
                                  * the "file" part's filename is the path (legacy) */
    const char *boundary;        /* multipart boundary, NULL: raw body */
    mode_t mode;
    uint64_t limit; /* bytes */
    sbd_upload_done_fn *done;
    void *ctx;
    struct sbd *activity; /* borrowed: touched as the body arrives (a long upload is activity
                             for the idle policy, not only its head); NULL: none */
};

/** Receives the body of req (a streamed-body route) into an atomic write. opts is
 * borrowed (copied). Returns 0, or negative when it could not start (nothing responded:
 * the caller answers). */
int sbd_upload_start(struct http_req *req, const struct sbd_upload_opts *opts);

/** The REST PUT handler (ctx: struct sbd). */
int sbd__files_put(struct http_req *req, void *ctx);
/** sbd_body_ok_fn of the REST PUT: false for a raw body whose Content-Length is over
 * --max-upload (sbd__files_put then answers 413 at the head). */
bool sbd__files_put_body_ok(struct http_req *req, struct sbd *d);
