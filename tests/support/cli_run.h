/* SPDX-License-Identifier: Apache-2.0 */
/* Runs the kubectl-sandbox binary of the build ($AS_BIN_DIR, which ctest sets) against
 * the test API server (it_kubeconfig()) through the shell, with its stdout and stderr
 * captured together. Test code only: failures are returned, never asserted here. */
#pragma once

#include <stdarg.h>
#include <stdio.h>

#include "common/buf.h"

/** Starts `kubectl-sandbox --kubeconfig <it_kubeconfig()> <args>` with sh -c; args
 * (borrowed) is shell syntax: quoting, redirections that apply to the CLI, and more
 * commands after a ';' all work, because the command is run as `{ ...; } 2>&1`. Writes
 * the pipe of its output to *ret (finish it with it_cli_finish). Returns 0, -ENOENT
 * without AS_BIN_DIR, -E2BIG when the command line is too long, or a negative errno. */
int it_cli_start(const char *args, FILE **ret);
/** Reads the output of a command started with it_cli_start into out (reset first,
 * bounded by its limit) and closes p (taken). Returns the exit code (>= 0), -EPROTO
 * when the shell did not exit normally, or a negative errno (-E2BIG: out was full). */
int it_cli_finish(FILE *p, struct buf *out);
/** it_cli_start then it_cli_finish. Returns the exit code or a negative errno. */
int it_cli_run(const char *args, struct buf *out);
/** it_cli_run with args formatted from fmt. */
int it_cli_runf(struct buf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int it_cli_vrunf(struct buf *out, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
