/* SPDX-License-Identifier: Apache-2.0 */
/* Standard base64 decoding (RFC 4648) for inline kubeconfig data. */
#pragma once

#include <stddef.h>

#include "common/buf.h"

/** Appends the decoded bytes of s (borrowed, len bytes) to out. Whitespace is skipped;
 * padding is optional. Returns 0, -EINVAL on a bad character or length, or -E2BIG when
 * out's limit is reached (out then keeps what it had). */
int kube_b64_decode(const char *s, size_t len, struct buf *out);

/** Appends the base64 encoding (with padding) of p (len bytes) to out. Returns 0 or
 * -E2BIG. */
int kube_b64_encode(const void *p, size_t len, struct buf *out);
