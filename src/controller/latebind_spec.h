/* SPDX-License-Identifier: Apache-2.0 */
/* Late-bound claim configuration, the pure part: the template's claimConfigDelivery
 * policy, which claims it serves warm, the per-Sandbox config token (its Secret and how
 * a pool Sandbox mounts it), the env sources of a claim and the delivery target check.
 * No API access; every function borrows its inputs. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "api/extensions.h"

struct claim_err;

#define LB_TOKEN_KEY         "token"
#define LB_SECRET_SUFFIX     "-config-token"
#define LB_VOLUME            "agent-sandbox-config-token"
#define LB_MOUNT_DIR         "/var/run/agent-sandbox/config"
#define LB_ENV_TOKEN_FILE    "SANDBOXD_CONFIG_TOKEN_FILE"
#define LB_R_DELIVERY_FAILED "ConfigDeliveryFailed"
#define LB_TOKEN_BYTES       32 /* random bytes of a token (hex-encoded: 64 characters) */
#define LB_NAME_MAX          63 /* a Sandbox name chosen for a pool member */

/** The template's spec.claimConfigDelivery. */
struct lb_policy {
    bool late_bound; /* mode LateBound */
    bool fail;       /* onFailure Fail (else ColdStart) */
    int port;        /* sandboxd REST port (default 8080) */
};

/** Reads tpl's policy (NULL or unset: ColdStart, ColdStart, 8080). */
void lb_policy_of(const json_t *tpl, struct lb_policy *ret);
/** True when claim is one that late binding serves warm: tpl is LateBound, the claim
 * sets env and no volumeClaimTemplates. */
bool lb_claim_wants(const json_t *claim, const json_t *tpl);
/** Checks the claim's env against tpl's envVarsInjectionPolicy exactly as a cold start
 * would (names the template sets, containers). Returns 0 or negative with reterr. */
int lb_env_check(const json_t *claim, const json_t *tpl, struct claim_err *reterr);

/** Where an env entry's value comes from. */
enum lb_source { LB_SRC_VALUE, LB_SRC_SECRET, LB_SRC_CONFIGMAP, LB_SRC_INVALID };
/** Classifies env entry ev; for Secret/ConfigMap keys *ret_obj and *ret_key get the
 * object name and key (borrowed from ev). */
enum lb_source lb_env_source(const json_t *ev, const char **ret_obj, const char **ret_key);

/** Writes a random Sandbox name for a pool member into out: the generateName prefix of
 * sb (cut to fit) followed by 5 random characters. Returns 0 or -EINVAL (no prefix). */
int lb_member_name(const json_t *sb, char *out, size_t size);
/** Writes a new random token (LB_TOKEN_BYTES as hex) into out (>= 2*LB_TOKEN_BYTES+1).
 * Returns 0 or a negative errno from getrandom. */
int lb_token_new(char *out, size_t size);
/** Writes "<sandbox>-config-token" into out. Returns 0 or -E2BIG. */
int lb_secret_name(const char *sandbox, char *out, size_t size);
/** Adds what a late-bound pool member's pod needs to read its config token to pod_spec
 * (mutable; nothing when not an object): a read-only volume of Secret secret (mode 0444)
 * mounted at LB_MOUNT_DIR in every regular container, with LB_ENV_TOKEN_FILE naming the
 * token file. */
void lb_pod_spec_inject(json_t *pod_spec, const char *secret);
/** Makes the pool Sandbox sb (mutable) named name and able to receive late-bound
 * configuration: metadata.name instead of generateName, the token-Secret annotation,
 * and lb_pod_spec_inject on its pod template's spec. */
void lb_pool_inject(json_t *sb, const char *name, const char *secret);
/** Returns a new Secret named secret in sb's namespace holding token under
 * LB_TOKEN_KEY, owned (controller, blockOwnerDeletion) by Sandbox sb. */
json_t *lb_token_secret(const json_t *sb, const char *secret, const char *token);

/** True when secret (a Secret as read back) is Sandbox sb's config-token Secret: its
 * controller ownerReference is the Sandbox kind with sb's UID and its EXT_LABEL_TOKEN_FOR
 * label is sb's name. */
bool lb_secret_is_for(const json_t *secret, const json_t *sb);

/** Checks that ip is a literal address the controller may send configuration to: not
 * unspecified, multicast, broadcast or link-local (cloud metadata), and not loopback
 * unless allow_loopback (tests). Returns 0, -EINVAL (not an address) or -EPERM. */
int lb_target_check(const char *ip, bool allow_loopback);
/** The path of the delivery on sandboxd (the URL is built by kube/sbd_client.h). */
#define LB_DELIVERY_PATH "/v1/config/env"
