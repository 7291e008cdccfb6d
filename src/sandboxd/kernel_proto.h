/* SPDX-License-Identifier: Apache-2.0 */
/* The protocol between sandboxd and the kernel driver of a code context (driver/kernel.py):
 * NDJSON lines on the driver's stdout, split with a bounded line buffer and checked
 * event by event before they are passed on to a client. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"

/** Kinds of driver events. */
enum sbd_kevent {
    SBD_KEV_READY = 1,
    SBD_KEV_STDOUT,
    SBD_KEV_STDERR,
    SBD_KEV_RESULT,
    SBD_KEV_DISPLAY,
    SBD_KEV_ERROR,
    SBD_KEV_TRUNCATED,
    SBD_KEV_END,
    SBD_KEV_STARTED, /* the driver read an execute request (an interrupt now reaches it) */
};

/** Called for each complete line (without the '\n'; line borrowed for the call), or with
 * cut true (and n 0) for a line dropped because it passed the limit. */
typedef void sbd_kline_fn(void *ctx, const char *line, size_t n, bool cut);

/** A line splitter whose pending line holds at most max bytes. */
struct sbd_kline {
    struct buf line;
    bool skipping; /* inside an overlong line: drop until its '\n' */
};

void sbd_kline_init(struct sbd_kline *l, size_t max);
void sbd_kline_done(struct sbd_kline *l);
/** Forgets a partial line (a new kernel process). */
void sbd_kline_reset(struct sbd_kline *l);
/** Releases the memory of a large empty line buffer (more than keep bytes), so that an
 * idle context does not hold on to its largest event. */
void sbd_kline_trim(struct sbd_kline *l, size_t keep);
/** Splits data[0..n) (borrowed) into lines, calling fn for each. */
void sbd_kline_feed(struct sbd_kline *l, const char *data, size_t n, sbd_kline_fn *fn, void *ctx);

/** Parses and checks one event line: a JSON object whose "type" is a known event with
 * its fields of the right types. Returns 0 with *ret_event (a new reference holding only
 * the known fields) and *ret_kind, or -EINVAL. */
int sbd_kevent_parse(const char *p, size_t n, json_t **ret_event, enum sbd_kevent *ret_kind);
