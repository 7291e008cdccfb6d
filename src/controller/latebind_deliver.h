/* SPDX-License-Identifier: Apache-2.0 */
/* Late-bound claim configuration, the part that talks to the API server and to sandboxd:
 * pool members created with their config-token Secret, and delivery of a claim's env
 * (values, Secret and ConfigMap keys read just in time) to the sandboxd of its adopted
 * Sandbox. Values are never logged, never put into an object, and never leave the
 * controller except in the delivery request to the Sandbox's own pod IP. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/clock.h"
#include "common/limits.h"

struct ext_ctrl;
struct kube_err;
struct lb_state;

/** Returns new delivery state: a token cache, the loopback permission (tests only) and
 * the request timeout (0 = LIMIT_LB_DELIVERY_TIMEOUT). Thread-safe. */
struct lb_state *lb_state_new(bool allow_loopback, usec_t timeout);
/** Wipes the cached tokens and frees (NULL is fine). */
void lb_state_free(struct lb_state *s);
/** Wipes and drops the cached token of Sandbox ns/name, if any (its deletion: a member
 * deleted unclaimed, or claimed without env, never delivers). s may be NULL. */
void lb_forget(struct lb_state *s, const char *ns, const char *name);
/** Number of cached tokens. */
size_t lb_cached(struct lb_state *s);
/** Caches token (copied) as Sandbox ns/name's (up to LIMIT_LB_TOKEN_CACHE) unless it has
 * an entry. Returns 0, -EEXIST (an entry, kept), -ENOSPC (full: not cached) or -E2BIG.
 * Internal: pool members' creation (before the create: lb_forget of the member's deletion
 * always comes after); tests. */
int lb__cache_put(struct lb_state *s, const char *ns, const char *name, const char *token);

/** Creates one pool member from sb (borrowed, as built for the pool with generateName)
 * under a name chosen here, then its config-token Secret owned by it. A Secret create
 * whose outcome is unknown (a retry after a 5xx meeting AlreadyExists) reads the Secret
 * back and keeps it when it is the member's (lb_secret_is_for). When the Secret cannot be
 * created, the member is deleted again (the pool replaces it). pool_key
 * (borrowed) is the pool's "namespace/name" for its expectations. Returns 0 (the
 * Sandbox was created) or a negative errno with reterr filled. */
int lb_pool_create(struct ext_ctrl *x, const char *pool_key, const json_t *sb,
                   struct kube_err *reterr);

/** Delivers claim's env to Sandbox sb (bound to it) under template tpl's policy: reads
 * the config token (cache, else its Secret, which must be controlled by sb), resolves
 * every value, checks the pod IP and PUTs the set to sandboxd. Returns 0, or a negative
 * errno with a message in msg that never contains a value. */
int lb_deliver(struct ext_ctrl *x, const json_t *claim, const json_t *sb, const json_t *tpl,
               char *msg, size_t size);
