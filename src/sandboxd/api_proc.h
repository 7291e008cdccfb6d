/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers of the process API shared with the WebSocket and legacy front ends. */
#pragma once

#include <jansson.h>

#include "http/server.h"
#include "sandboxd/proc.h"
#include "sandboxd/procreq.h"

struct sbd;

/** Starts the process of r for d with ops/ctx, its cwd resolved beneath root. Returns 0 with *ret
 * (borrowed), or a negative errno with *ret_status / *ret_code / *ret_msg describing the HTTP
 * error. */
int sbd__proc_start_req(struct sbd *d, const struct sbd_root *root, const struct sbd_procreq *r,
                        const struct sbd_proc_ops *ops, void *ctx, struct sbd_proc **ret,
                        int *ret_status, const char **ret_code, const char **ret_msg);
/** A signal from JSON: a name ("SIGINT", "TERM") or a number. Returns it or -EINVAL. */
int sbd__signal_from_json(const json_t *s);
/** A terminal size from JSON {"cols": N, "rows": N}, each 1 to 65535. Returns 0 with
 * *cols and *rows, or -EINVAL. */
int sbd__resize_from_json(const json_t *j, unsigned short *cols, unsigned short *rows);
/** Whether action is one of a process's POST actions (stdin, stdin/close, signal,
 *  resize). */
bool sbd__proc_action_known(struct str action);
/** Registers GET /v1/processes/ws (ws_proc.c). */
int sbd__ws_register(struct sbd *d);
/** Returns a new exit event object {"type":"exit","exit_code","signal","timed_out"}. */
json_t *sbd__exit_json(const struct sbd_exit *e);
