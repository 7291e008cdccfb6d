/* SPDX-License-Identifier: Apache-2.0 */
/* Streaming multipart/form-data parser: fed the body in pieces of any size, it reports
 * each part's name and filename and hands its data on without buffering more than one
 * piece plus the delimiter. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "common/str.h"

/** A part starts: name and filename (borrowed for the call; filename .p NULL when absent).
 * Return 1 to receive its data, 0 to skip it, negative to abort. */
typedef int sbd_part_begin_fn(void *ctx, struct str name, struct str filename);
/** Data of a part that was accepted (borrowed for the call). Negative aborts. */
typedef int sbd_part_data_fn(void *ctx, struct str data);
/** The accepted part ended. Negative aborts. */
typedef int sbd_part_end_fn(void *ctx);

struct sbd_multipart {
    int state;
    char *delim; /* "\r\n--" boundary */
    size_t delim_len;
    struct buf in;
    size_t off; /* bytes of in already parsed: dropped once per feed, not per part (a
                   memmove of the rest for each of thousands of tiny parts was quadratic) */
    bool accepted;
    sbd_part_begin_fn *begin;
    sbd_part_data_fn *data;
    sbd_part_end_fn *end;
    void *ctx;
};

/** Extracts the boundary of a Content-Type value ("multipart/form-data; boundary=x") into
 * a new string (*ret, xfree). Returns 0, -ENOENT (not multipart/form-data) or -EINVAL. */
int sbd_multipart_boundary(struct str content_type, char **ret);
/** Initialises a parser for boundary (borrowed, copied). */
void sbd_multipart_init(struct sbd_multipart *m, const char *boundary, sbd_part_begin_fn *begin,
                        sbd_part_data_fn *data, sbd_part_end_fn *end, void *ctx);
/** Releases the parser's memory. */
void sbd_multipart_done(struct sbd_multipart *m);
/** Feeds body bytes (borrowed); last marks the end of the body. Returns 0, 1 when the
 * closing delimiter was seen, -EPROTO for a malformed body (or a body that ended early),
 * -E2BIG for oversized part headers, or a callback's negative value. */
int sbd_multipart_feed(struct sbd_multipart *m, struct str data, bool last);
/** Finds parameter name in a header value ("form-data; name=\"file\"") and unquotes it into
 * out. Returns 1 found, 0 absent, -E2BIG. */
int sbd_header_param(struct str value, const char *name, struct buf *out);
