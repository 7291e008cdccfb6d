/* SPDX-License-Identifier: Apache-2.0 */
/* Idle auto-suspend, runtime part: after each Sandbox reconcile pass, schedules the
 * next idle check, asks sandboxd (GET /v1/activity on the pod IP) before suspending,
 * and suspends with one guarded merge patch (operatingMode Suspended). Remembers, in
 * memory, when sandboxd last reported running processes, so a process that just ended
 * starts a fresh idle period. Metrics: agent_sandbox_idle_suspends_total and
 * agent_sandbox_idle_probes_total{result}. Thread-safe (reconcile workers share it). */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "common/clock.h"
#include "controller/idle_policy.h"

struct kube_client;
struct events_recorder;
struct metrics_registry;
struct idle_ctrl;

/** Asks the sandboxd at ip:port for its activity. Returns 0 and *ret, or negative. */
typedef int idle_probe_fn(void *ctx, const char *ip, uint16_t port, usec_t timeout,
                          struct idle_probe *ret);

struct idle_ctrl_opts {
    struct kube_client *client;       /* borrowed; required */
    struct events_recorder *events;   /* borrowed; NULL: no Events */
    struct metrics_registry *metrics; /* borrowed; NULL: no metrics */
    uint16_t probe_port;              /* 0: LIMIT_IDLE_PROBE_PORT */
    usec_t probe_timeout;             /* 0: LIMIT_IDLE_PROBE_TIMEOUT */
    idle_probe_fn *probe;             /* NULL: idle_probe_http */
    void *probe_ctx;
};

/** Returns a new idle controller (free with idle_ctrl_free); opts copied. */
struct idle_ctrl *idle_ctrl_new(const struct idle_ctrl_opts *opts);
void idle_ctrl_free(struct idle_ctrl *c);

/** The idle step of one pass over sb (borrowed) whose status (borrowed) was just
 * written: may probe and suspend. Lowers *requeue_after (0 = none) to the next time
 * the Sandbox must be looked at. stale (0: sb is the server's current version): sb's
 * resourceVersion is known to be old (this pass wrote the status), so a Sandbox due for
 * a probe is looked at again after stale instead (the write's watch event comes
 * sooner). Returns 1 when it suspended the Sandbox, else 0. */
int idle_ctrl_check(struct idle_ctrl *c, const json_t *sb, const json_t *status, usec_t stale,
                    usec_t *requeue_after);

/** Forgets what is remembered of the Sandbox of uid (borrowed; NULL: nothing), once it
 * is deleted. */
void idle_ctrl_forget(struct idle_ctrl *c, const char *uid);

/** Suspends (and probes) so far, for tests. */
struct idle_ctrl_stats {
    uint64_t suspends, probes, probe_busy, probe_errors;
    uint64_t conflicts;      /* suspend PATCHes refused with 409 (retried after 1 s) */
    uint64_t suspend_errors; /* refused otherwise (retried after min(timeout, 30 s)) */
};
void idle_ctrl_stats(struct idle_ctrl *c, struct idle_ctrl_stats *ret);

/** The default probe: GET http://ip:port/v1/activity (kube/sbd_client.h: no proxy,
 * timeout). */
int idle_probe_http(void *ctx, const char *ip, uint16_t port, usec_t timeout,
                    struct idle_probe *ret);
