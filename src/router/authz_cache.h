/* SPDX-License-Identifier: Apache-2.0 */
/* A bounded LRU of review decisions with expiry, keyed by strings. Not thread-safe (the
 * loop thread owns it). */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "common/clock.h"

struct authz_cache;

/** A cached decision: code is the caller's (verdict or errno); user a reference or NULL. */
struct authz_entry {
    int code;
    json_t *user;
};

/** Returns a new cache of at most max entries. */
struct authz_cache *authz_cache_new(size_t max);
/** NULL is fine. */
void authz_cache_free(struct authz_cache *c);
/** Looks key up at time now: an expired entry is dropped and not returned. Returns
 * borrowed (valid until the next put) or NULL, and marks the entry most recently used. */
const struct authz_entry *authz_cache_get(struct authz_cache *c, const char *key, usec_t now);
/** Inserts or replaces key with code and user (a new reference is taken; may be NULL)
 * until expires. Evicts the least recently used entry past max. Returns the number of
 * entries evicted (0 or 1). */
int authz_cache_put(struct authz_cache *c, const char *key, int code, const json_t *user,
                    usec_t expires);
size_t authz_cache_len(const struct authz_cache *c);
