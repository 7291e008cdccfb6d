/* SPDX-License-Identifier: Apache-2.0 */
/* Path confinement: every user path is cleaned lexically (absolute paths are mapped under
 * the root) and then opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) on the
 * root's directory descriptor, so neither "..", symlinks (existing ones or ones in the
 * parents of new files, even if swapped concurrently) nor sibling-prefix tricks escape. */
#pragma once

#include <stdbool.h>

#include <sys/types.h>

#include "common/str.h"

struct sbd_root;

/** Opens (and with create, first creates with 0755, parents included) the directory path
 * as a confinement root; symlinks in path are resolved once here. Returns 0 or a
 * negative errno (-EINVAL empty path, -ENOTDIR, ...). *ret is new (sbd_root_free). */
int sbd_root_open(const char *path, bool create, struct sbd_root **ret);
/** Closes and frees (NULL is fine). */
void sbd_root_free(struct sbd_root *r);
/** The root's O_PATH directory descriptor (borrowed). */
int sbd_root_fd(const struct sbd_root *r);
/** The canonical absolute path of the root (borrowed). */
const char *sbd_root_path(const struct sbd_root *r);

/** Cleans a user path lexically into a root-relative path: empty, "/" and root_path
 * itself give "."; "<root_path>/x" gives "x"; other absolute paths are taken relative to
 * the root ("/etc/passwd" gives "etc/passwd"); "." and empty components are dropped and
 * ".." is applied lexically. in is borrowed. Returns 0 with *ret new (xfree), -EPERM when
 * a relative path climbs above the root, -EINVAL for a NUL byte, -ENAMETOOLONG past
 * LIMIT_SBD_PATH. root_path (borrowed) may be NULL (no prefix stripping). */
int sbd_path_clean(const char *root_path, struct str in, char **ret);

/** Opens rel (a cleaned path from sbd_path_clean) beneath the root with openat2. flags are
 * open(2) flags (O_CLOEXEC is added); mode is used with O_CREAT. Returns the new fd or a
 * negative errno: -EPERM when resolution would leave the root (also for absolute symlinks
 * and magic links), -ENOENT, -ELOOP, ... */
int sbd_path_open(const struct sbd_root *root, const char *rel, int flags, mode_t mode);

/** Opens rel beneath the root to read it (O_RDONLY | O_NONBLOCK | O_NOCTTY), a regular file
 * or a directory only: its type is looked at first through an O_PATH descriptor, since
 * opening a FIFO to read pairs with a writer in the sandbox (its data taken, or the
 * writer killed by SIGPIPE once closed). Returns the fd, -ENXIO for any other type,
 * -EAGAIN when rel was replaced between the two opens, or a negative errno as
 * sbd_path_open. */
int sbd_path_open_read(const struct sbd_root *root, const char *rel);

/** Opens the directory that holds the last component of rel (O_PATH | O_DIRECTORY),
 * creating missing directories (0755) when create. *ret_name points into rel (borrowed)
 * at the last component. rel "." gives -EINVAL (the root has no parent here). Returns the
 * new fd or a negative errno as sbd_path_open. */
int sbd_path_open_parent(const struct sbd_root *root, const char *rel, bool create,
                         const char **ret_name);

/** The directories an sbd_path_open_parent_made created, to remove again when what they
 * were made for failed. */
struct sbd_path_made;

/** sbd_path_open_parent with create, recording the directories it created: *ret_made is
 * new (sbd_path_made_undo or sbd_path_made_free), or NULL when none was. On failure the
 * ones it made are removed again (sbd_path_made_undo). Holds one descriptor (the
 * directory the first one was made in), until undone or freed. */
int sbd_path_open_parent_made(const struct sbd_root *root, const char *rel, const char **ret_name,
                              struct sbd_path_made **ret_made);
/** Removes the directories m recorded, deepest first, each only while it is still the one
 * made and empty: the chain is walked down from the directory the first was made in
 * (openat with O_NOFOLLOW, each made one checked by device and inode; no path is resolved
 * from the root again), and frees m (NULL is fine). Where a link or another directory
 * took a step's place meanwhile, the walk stops there: the directories made below it are
 * left (empty), never reached through the link. */
void sbd_path_made_undo(struct sbd_path_made *m);
/** Frees m (NULL is fine), keeping the directories. */
void sbd_path_made_free(struct sbd_path_made *m);

/** Maps an error of this module to a short reason and whether it is an escape
 * (-EPERM/-EACCES/-EXDEV/-ELOOP). */
bool sbd_path_err_is_denied(int err);
