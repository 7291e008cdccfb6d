/* SPDX-License-Identifier: Apache-2.0 */
/* The claim and warm-pool metric families of the extensions controller, named and
 * labelled as upstream agent-sandbox names them (docs/observability.md lists them):
 * the claim latency histograms in milliseconds with upstream's buckets, the claim
 * creation counter and our own warm-pool families; and the renderers of the build-info
 * gauge and of agent_sandboxes (computed from the Sandbox cache at scrape time). */
#pragma once

#include <jansson.h>

#include "common/clock.h"

struct buf;
struct ext_metrics;
struct kube_store;
struct metrics_registry;

/** sandbox_template of claim metrics when the Sandbox has no template annotation. */
#define EXT_METRICS_NO_TEMPLATE "__unknown__"

/** Registers the families in reg (borrowed) and fills m. reg NULL: m stays zeroed and
 * every update below does nothing. */
void ext_metrics_register(struct metrics_registry *reg, struct ext_metrics *m);

/** Counts one Sandbox created (cold) or adopted (warm) for claim: launch is "warm" or
 * "cold", pool the warm pool name (the claim's warmPoolRef for cold). All borrowed. */
void ext_metrics_creation(const struct ext_metrics *m, const json_t *claim, const json_t *sb,
                          const char *launch, const char *pool);

/** Records the latencies of a claim reaching Ready for the first time at now (wall
 * clock): controller (from seen, its first observation; 0: not known), client and
 * webhook annotations (when present and parseable), and the Sandbox's own creation to
 * Ready. Times before their start are skipped (clock skew). */
void ext_metrics_first_ready(const struct ext_metrics *m, const json_t *claim, const json_t *sb,
                             usec_t seen, usec_t now);

/* For the manager's collectors (manager_http.c), rendered at scrape time: */

/** Appends the agent_sandboxes family computed from the Sandboxes in store (borrowed;
 * NULL: the header only). Returns 0 or -E2BIG. */
int ext_metrics_render_sandboxes(struct kube_store *store, struct buf *out);
/** Appends agent_sandbox_build_info (constant 1, upstream's labels). Returns 0 or
 * -E2BIG. */
int ext_metrics_render_build_info(struct buf *out);
