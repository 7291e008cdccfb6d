/* SPDX-License-Identifier: Apache-2.0 */
/* A streaming NDJSON response from sandboxd read through curl (exec, run-code, logs of
 * a background process, watch): the lines of a 200 answer go one by one to a callback,
 * the start of any other answer's body is kept for the error message; and the loop that
 * drives one such transfer while the command does its own work between turns. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

#include "common/buf.h"
#include "kube/linebuf.h"

struct cli_stream {
    CURL *h;                   /* the transfer (borrowed), asked for its status */
    long status;               /* the HTTP status once the first bytes came (or after
                                  cli_stream_settle); 0 before */
    struct linebuf lb;         /* a line split across chunks */
    struct buf errbody;        /* the start of a refusal's body (LIMIT_CLI_SBD_ERROR) */
    linebuf_frame_fn *on_line; /* each line of a 200 answer; negative stops the transfer */
    void *ctx;
    int err; /* why cli_stream_write stopped the transfer: on_line's negative value or
                -E2BIG (a line over max_line); 0 while it did not */
};

/** Initialises st for on_line(ctx, ...) with lines of at most max_line bytes. */
void cli_stream_init(struct cli_stream *st, size_t max_line, linebuf_frame_fn *on_line, void *ctx);
/** Readies st for a (new) transfer h: no status, no partial line, no error body. */
void cli_stream_start(struct cli_stream *st, CURL *h);
void cli_stream_done(struct cli_stream *st);
/** After the transfer: the status of an answer with an empty body (no write call saw
 * it, as a 503 of a proxy with no body) read from st->h; kept when already known. */
void cli_stream_settle(struct cli_stream *st);
/** The CURLOPT_WRITEFUNCTION of a stream (CURLOPT_WRITEDATA: the struct cli_stream).
 * Returns size * n, or 0 to end the transfer (a line too long or on_line's stop). */
size_t cli_stream_write(char *p, size_t size, size_t n, void *st);
/** Why a stream broke, for "error: ...: %s": "event line too long" (proto_err -E2BIG),
 * "malformed event" (another proto_err), curl's message (errbuf first) or "connection
 * closed". */
const char *cli_stream_why(int proto_err, CURLcode cc, const char *errbuf);

/** Between the turns of cli_stream_run: returns whether to go on (running: the
 * transfer still runs) and sets *ret_fd to a descriptor to wait for as well (or -1). */
typedef bool cli_stream_turn_fn(void *ctx, bool running, int *ret_fd);
/** Runs the transfer h to its end or until turn says stop, calling turn after every
 * step and ready(ctx) when turn's descriptor is readable (or hung up). Returns the
 * transfer's CURLcode (CURLE_OK when stopped early). */
CURLcode cli_stream_run(CURL *h, cli_stream_turn_fn *turn, void (*ready)(void *ctx), void *ctx);

/** Writes all n bytes to fd (retrying short writes and EINTR). Returns 0 or a negative
 * errno (-EPIPE when the reader went away). */
int cli_write_all(int fd, const char *p, size_t n);
