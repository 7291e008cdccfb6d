/* SPDX-License-Identifier: Apache-2.0 */
/* Percent-encoding (RFC 3986 §2.1): URL path segments and query values for the API
 * server and sandboxd, RFC 5987 filenames, grpc-message; and the decoding of request
 * paths and query strings. */
#pragma once

#include <stdbool.h>

#include "common/buf.h"
#include "common/str.h"

/** Printable ASCII other than '%' and the unreserved characters: with it as keep,
 * pct_encode escapes exactly what grpc-message must escape. */
#define PCT_KEEP_PRINTABLE " !\"#$&'()*+,/:;<=>?@[\\]^`{|}"

/** Appends s (NUL-terminated, borrowed) to out with every byte except the RFC 3986
 * unreserved characters (ALPHA DIGIT - . _ ~) and those in keep (NULL: none) written
 * as %XX with upper-case hex digits, as curl_easy_escape does. Returns 0 or -E2BIG at
 * out's limit (out then keeps what it had). */
int pct_encode(struct buf *out, const char *s, const char *keep);

/** Appends the decoding of in to out: %XX (either case) becomes the byte, '+' becomes a
 * space when plus_space (form encoding of query values), and everything else is copied.
 * Returns 0, -EINVAL for a truncated or non-hex escape or an encoded NUL (%00), or
 * -E2BIG at out's limit; on failure out keeps what it had. On success out->data is
 * non-NULL even for empty input. */
int pct_decode(struct str in, bool plus_space, struct buf *out);
