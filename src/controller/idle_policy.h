/* SPDX-License-Identifier: Apache-2.0 */
/* Idle auto-suspend, pure part: spec.idlePolicy (an extension of v1beta1), when a
 * Sandbox was last active, what the controller does next (nothing, wait, ask sandboxd,
 * suspend), the suspend patch, and the condition reason of an idle suspension. No I/O;
 * every function is thread-safe. See docs/idle.md. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/sandbox.h"
#include "common/clock.h"

/** spec.idlePolicy of a Sandbox. */
struct idle_policy {
    bool set;               /* false: no policy, never suspended for idleness */
    usec_t timeout;         /* timeoutSeconds */
    bool resume_on_traffic; /* default true */
};

/** Reads spec.idlePolicy of sb (borrowed). Returns 0 (ret->set false when absent) or
 * -EINVAL when it is malformed (then treated as absent by callers). */
int idle_policy_get(const json_t *sb, struct idle_policy *ret);

/** Wall-clock usec of the latest known activity of sb (borrowed) with status (borrowed,
 * the status being written; NULL: sb's): the router's last-activity annotation, the
 * last time Ready became True, the creation time, and extra (0: none). 0 if unknown. */
usec_t idle_last_activity(const json_t *sb, const json_t *status, usec_t extra);

enum idle_action {
    IDLE_SKIP,    /* no policy, not Running, not Ready, a warm-pool member, deleting */
    IDLE_WAIT,    /* active recently: look again after *ret_wait */
    IDLE_PROBE,   /* idle by what the API shows: ask sandboxd before suspending */
    IDLE_SUSPEND, /* idle everywhere: suspend now */
};

/** First step, from the API objects only: sb and status (borrowed) at now_wall, with
 * extra activity (wall usec, 0: none) remembered by the caller. */
enum idle_action idle_decide(const json_t *sb, const json_t *status, usec_t extra, usec_t now_wall,
                             usec_t *ret_wait);

/** What sandboxd's GET /v1/activity said. */
struct idle_probe {
    size_t running_processes;
    usec_t last_activity; /* wall usec */
};

/** Parses a /v1/activity body (len bytes) read at now_wall (our wall clock): the last
 * activity is now_wall - idle_seconds when sandboxd gives it (its own clock's measure,
 * whatever the node's wall clock says), else its last_activity stamp. Returns 0 or
 * -EINVAL. */
int idle_probe_parse(const char *body, size_t len, usec_t now_wall, struct idle_probe *ret);

/** Second step after a successful probe: IDLE_SUSPEND, or IDLE_WAIT with *ret_wait
 * (busy: re-check after half the timeout, at least 1 s). since is idle_last_activity. */
enum idle_action idle_after_probe(const struct idle_policy *pol, usec_t since,
                                  const struct idle_probe *pr, usec_t now_wall, usec_t *ret_wait);

/** Returns a new merge patch that suspends sb (borrowed): operatingMode Suspended, the
 * idle annotation set to generation + 1, guarded by sb's resourceVersion. */
json_t *idle_suspend_patch(const json_t *sb);

/** Adjusts status (the one about to be written for sb, both borrowed) after an idle
 * suspension: Suspended=True gets reason IdleTimeout and a message naming the timeout.
 * No-op otherwise. */
void idle_status_adjust(const json_t *sb, json_t *status);
