/* SPDX-License-Identifier: Apache-2.0 */
/* Parsers of the filesystem-operation requests (fsops.c): the move and batch-write JSON
 * bodies and the query parameters of ranged reads, stat, mkdir and watch. They only check
 * the shape of untrusted bytes; paths are cleaned and confined by the handlers. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/types.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/str.h"

/** A move request: {"from": "...", "to": "...", "overwrite": false}. */
struct sbd_move_req {
    char *from, *to; /* new (xfree), raw user paths */
    bool overwrite;
};

/** Parses a move body. Returns 0 (ret filled; release with sbd_move_req_done) or -EINVAL
 * with *ret_err a static reason. */
int sbd_move_req_parse(struct str body, struct sbd_move_req *ret, const char **ret_err);
void sbd_move_req_done(struct sbd_move_req *m);

/** One file of a batch write. */
struct sbd_batch_file {
    char *path;      /* new, raw user path */
    struct buf data; /* decoded content */
    mode_t mode;     /* 0644 unless given */
};

struct sbd_batch_req {
    struct sbd_batch_file *files; /* new array */
    size_t n;
};

/** Parses {"files": [{"path": "...", "content": "<base64>", "mode": "0644"}, ...]} (also
 * "encoding": "utf-8" for plain text content). max_file bounds one decoded file, the
 * number of files is at most LIMIT_SBD_BATCH_FILES. Returns 0 (release with
 * sbd_batch_req_done), -EINVAL or -E2BIG with *ret_err a static reason. */
int sbd_batch_req_parse(struct str body, uint64_t max_file, struct sbd_batch_req *ret,
                        const char **ret_err);
void sbd_batch_req_done(struct sbd_batch_req *b);

/** A read window from "offset" and "max_bytes" query parameters. */
struct sbd_read_window {
    uint64_t offset, max_bytes;
    bool has_offset, has_max;
};

/** Parses the read window of query. Returns 0 or -EINVAL (*ret_err static). */
int sbd_read_window_parse(struct str query, struct sbd_read_window *ret, const char **ret_err);

/** Parses an octal permission string ("0755", "644"; at most 07777). Returns 0 or -EINVAL. */
int sbd_parse_mode(const char *s, mode_t *ret);

/** Options of mkdir: ?parents=bool&mode=octal. */
struct sbd_mkdir_opts {
    bool parents;
    mode_t mode; /* 0755 unless given */
};
int sbd_mkdir_opts_parse(struct str query, struct sbd_mkdir_opts *ret, const char **ret_err);

/** Options of stat: ?follow=bool (false: lstat semantics, the link itself is described). */
struct sbd_stat_opts {
    bool follow;
};
int sbd_stat_opts_parse(struct str query, struct sbd_stat_opts *ret, const char **ret_err);

/** Options of a directory listing: ?limit=N (1..LIMIT_SBD_LISTING, the default) and
 * ?continue=TOKEN, the "continue" of the page before: the hex of the last name it held
 * (opaque to clients). The page holds the first limit names after it, in byte order. */
struct sbd_list_opts {
    size_t limit;
    bool has_after;
    char after[256]; /* NUL-terminated name; names after it only */
};
int sbd_list_opts_parse(struct str query, struct sbd_list_opts *ret, const char **ret_err);

/** The continue token of name into out (2 * strlen(name) + 1 bytes). */
void sbd_list_token(const char *name, char *out, size_t size);

/** Options of watch: ?recursive=bool&queue=N (LIMIT_SBD_WATCH_QUEUE_MIN..LIMIT_SBD_WATCH_QUEUE). */
struct sbd_watch_opts {
    bool recursive;
    size_t queue;
};
int sbd_watch_opts_parse(struct str query, struct sbd_watch_opts *ret, const char **ret_err);
