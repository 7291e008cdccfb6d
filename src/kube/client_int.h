/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the files of the Kubernetes client (not for other modules). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"

struct kube_config;

/** Appends s percent-encoded: every byte except RFC 3986 unreserved characters
 * (ALPHA DIGIT - . _ ~) becomes %XX, as curl_easy_escape does. Returns 0 or -E2BIG. */
int kube__escape(struct buf *out, const char *s);

/** A counter that changes whenever the TLS material reported by kube_config_tls
 * changes (an exec plugin returned a new client certificate). Thread-safe. */
unsigned kube__config_tls_generation(const struct kube_config *cfg);
