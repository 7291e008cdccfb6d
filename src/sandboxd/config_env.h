/* SPDX-License-Identifier: Apache-2.0 */
/* Late-bound claim configuration: an environment set delivered by the controller after a
 * warm sandbox was claimed (PUT /v1/config/env, authenticated by a per-sandbox config
 * token distinct from the API token). It lives in memory only: never on disk, never in
 * /v1/metadata, never logged. Processes started afterwards get it on top of the
 * daemon's environment (a request's own env still wins). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/limits.h"
#include "common/str.h"

struct sbd_config_env;
struct sbd;

/** Returns a new empty set that accepts deliveries authenticated by token (borrowed,
 * copied; NULL or "" disables delivery: every request is refused). */
struct sbd_config_env *sbd_config_env_new(const char *token);
/** Wipes the values and frees (NULL is fine). */
void sbd_config_env_free(struct sbd_config_env *ce);
/** True when delivery is enabled (a token is configured). */
bool sbd_config_env_enabled(const struct sbd_config_env *ce);
/** True when the Authorization header value (borrowed) is "Bearer <token>". */
bool sbd_config_env_authorized(const struct sbd_config_env *ce, struct str authorization);
/** Replaces the whole set with the one in body ({"env": {"NAME": "value", ...}}).
 * Names are POSIX names ([A-Za-z_][A-Za-z0-9_]*), values strings without NUL. Returns
 * 0, or -EINVAL / -E2BIG with *ret_msg (static text that never quotes the input) and
 * the set unchanged. */
int sbd_config_env_set_json(struct sbd_config_env *ce, struct str body, const char **ret_msg);
/** Number of variables set. */
size_t sbd_config_env_count(const struct sbd_config_env *ce);
/** The set as a NULL-terminated "NAME=value" vector (borrowed; valid until the next
 * set or free). Never NULL. */
char *const *sbd_config_env_vector(const struct sbd_config_env *ce);
/** True for a POSIX environment variable name of at most LIMIT_SBD_CONFIG_ENV_NAME. */
bool sbd_config_env_name_ok(const char *name, size_t len);

/** Registers PUT/GET /v1/config/env on d's REST router (own token check). */
int sbd__config_env_register(struct sbd *d);
