/* SPDX-License-Identifier: Apache-2.0 */
/* A verified client certificate's subject as a Kubernetes identity, mapped the way
 * kube-apiserver's x509 authenticator does: the common name (CN) is the user name, each
 * organization (O) a group, and every identity is also in system:authenticated.
 *
 * Stricter than kube-apiserver: a subject with more than one CN, or a CN or O that is
 * empty, not valid UTF-8 (after conversion from its ASN.1 string type), holds a control
 * character (U+0000-U+001F, U+007F-U+009F) or is longer than LIMIT_TLS_PEER_NAME bytes,
 * or more than LIMIT_TLS_PEER_GROUPS organizations, gives no identity at all.
 *
 * The encoding (what a TLS front hands the HTTP server as a connection's peer info and
 * what the router's authz_check_identity reads): the user name, then each group, each
 * followed by one NUL byte; system:authenticated is always among the groups (last,
 * unless the certificate named it). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/limits.h"

struct X509_name_st; /* OpenSSL's X509_NAME */

#define TLS_IDENTITY_GROUP_ALL "system:authenticated"
/** The largest encoding: a user and LIMIT_TLS_PEER_GROUPS + 1 groups. */
#define TLS_IDENTITY_MAX ((LIMIT_TLS_PEER_GROUPS + 2) * (LIMIT_TLS_PEER_NAME + 1))

/** Maps subject (borrowed) to the encoding above, written into out (size bytes; at least
 * TLS_IDENTITY_MAX is always enough). Returns its length (> 0), -ENOENT (no CN or an
 * empty one), -EINVAL (more than one CN; an empty O; a value that does not convert to
 * UTF-8 or holds a control character), -E2BIG (a value longer than LIMIT_TLS_PEER_NAME
 * bytes, more than LIMIT_TLS_PEER_GROUPS organizations) or -ENOSPC (out too small). */
int tls_identity_from_subject(const struct X509_name_st *subject, char *out, size_t size);

/** Checks that s (len bytes) is valid UTF-8 (no overlong forms, surrogates or code points
 * past U+10FFFF) without control characters. */
bool tls_identity_text_ok(const char *s, size_t len);
