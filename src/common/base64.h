/* SPDX-License-Identifier: Apache-2.0 */
/* Base64 with the standard alphabet (RFC 4648 §4), the only one the project speaks:
 * kubeconfig and Secret data, sandboxd's file and output payloads, WebSocket keys. */
#pragma once

#include <stddef.h>

#include "common/buf.h"

/** Length of the padded encoding of n bytes, without a NUL. */
#define BASE64_LEN(n) ((((size_t)(n) + 2) / 3) * 4)

/** Appends the padded encoding of p[0..n) to out. Returns 0 or -E2BIG when out's limit
 * is reached (out then keeps what it had). On success out->data is non-NULL even for
 * n == 0. */
int base64_encode(const void *p, size_t n, struct buf *out);

/** Appends the bytes encoded by s[0..len) to out. ASCII whitespace (space, tab, CR, LF)
 * is skipped anywhere; padding is optional, and when present it is one or two '=' at the
 * end. Returns 0, -EINVAL on a character outside the alphabet, misplaced padding or a
 * dangling sextet, or -E2BIG when out's limit is reached; on failure out keeps what it
 * had. On success out->data is non-NULL even when nothing was decoded. */
int base64_decode(const char *s, size_t len, struct buf *out);
