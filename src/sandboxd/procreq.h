/* SPDX-License-Identifier: Apache-2.0 */
/* The JSON process request shared by run, stream and WebSocket starts:
 * {"command": [argv...] | "shell string", "env": {..}, "cwd": "dir", "timeout_seconds": N,
 *  "stdin": "text" | "stdin_b64": "...", "max_output_bytes": N, "encoding": "utf-8"|"base64",
 *  "pty": true | {"cols": C, "rows": R}, "background": true, "stdin_open": true} */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "common/buf.h"
#include "sandboxd/path.h"
#include "sandboxd/proc.h"

struct sbd_procreq {
    char **argv; /* NULL-terminated, owned */
    char **env;  /* NULL-terminated "K=V", owned */
    char *cwd;   /* cleaned relative path, owned; NULL: the root */
    double timeout_s;
    struct buf stdin_data;
    size_t max_output;
    bool base64;
    bool pty;
    unsigned short cols, rows;
    bool background;  /* detached: survives its client (api_bg.c) */
    bool stdin_open;  /* background: keep stdin open for later writes */
    bool stdin_given; /* the request carried stdin or stdin_b64 (empty ones too) */
    bool stdin_null;  /* set by the front: stdin is /dev/null (ignored with a PTY) */
};

/** Parses j (borrowed) into r (fresh; release with sbd_procreq_done). max_output caps the
 * requested output size. Returns 0, or -EINVAL / -EPERM (cwd escapes) / -E2BIG with a
 * static message in *ret_msg. */
int sbd_procreq_parse(const json_t *j, const struct sbd_root *root, size_t max_output,
                      struct sbd_procreq *r, const char **ret_msg);
void sbd_procreq_done(struct sbd_procreq *r);
/** Opens the request's cwd beneath root and fills spec (which borrows from r). Returns
 * 0 with *ret_cwd_fd (close it after the start, -1 when none) or a negative errno. */
int sbd_procreq_spec(const struct sbd_procreq *r, const struct sbd_root *root,
                     struct sbd_proc_spec *spec, int *ret_cwd_fd);
