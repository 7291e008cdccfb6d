/* SPDX-License-Identifier: Apache-2.0 */
/* Resume on traffic: a request to a Sandbox that its idle policy (spec.idlePolicy)
 * suspended is held while the router patches operatingMode back to Running (one patch
 * per sandbox however many requests arrive) and watches its cache until the Sandbox is
 * Ready; then every held request is forwarded. Holding is bounded in time and in
 * count (per sandbox and in all). A policy with resumeOnTraffic=false answers 409.
 *
 * The same hold, without a patch and for a shorter time (start_hold), serves a request
 * to a Sandbox that is coming up: no Ready condition yet, or Ready=False while its pod
 * starts (DependenciesNotReady), whatever its policy. A client that saw the Sandbox
 * Ready before the router's cache did, or that sends its first request right after the
 * create, is then forwarded once the cache shows it Ready, instead of answered 503; a
 * pod that fails its readiness probe for a moment does not fail requests either. One not
 * Ready for longer than start_hold is held LIMIT_ROUTER_START_LAG only (a crash loop is
 * DependenciesNotReady too); start holds take at most a quarter of max_total. A Sandbox
 * that is broken (PodFailed, SandboxExpired, ...) is answered at once.
 *
 * Threading: everything on the loop thread; the patch runs on a resume_worker. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/clock.h"

struct kube_client;
struct kube_store;
struct metrics_registry;
struct resume_worker;
struct resume_gate;
struct resume_waiter;

/** What to do with a request to a Sandbox that is not Ready. */
enum resume_class {
    RESUME_PASS,   /* not ours: answer as without auto-resume (503/404) */
    RESUME_REJECT, /* suspended and the policy forbids resume on traffic: 409 */
    RESUME_WAKE,   /* suspended, resumable: patch to Running and hold */
    RESUME_WAIT,   /* resuming or starting under an idle policy: hold */
    RESUME_START,  /* coming up, no resume involved: hold up to start_hold */
};

/** start_hold's value for "never hold a starting Sandbox". */
#define RESUME_START_OFF UINT64_MAX

/** Classifies sb (borrowed; NULL = not found). Pure. */
enum resume_class resume_classify(const json_t *sb);

/** Patches ns/name to operatingMode Running (worker thread). Returns 0 or negative,
 * with a detail in err (size bytes). */
typedef int resume_patch_fn(void *ctx, const char *ns, const char *name, char *err, size_t size);

struct resume_gate_opts {
    struct kube_store *store;         /* borrowed: Sandboxes */
    struct resume_worker *worker;     /* borrowed: runs the patches */
    struct kube_client *client;       /* borrowed; used by the default patch */
    struct metrics_registry *metrics; /* borrowed; NULL: none */
    usec_t hold_timeout;              /* 0: LIMIT_ROUTER_RESUME_HOLD */
    usec_t start_hold;                /* RESUME_START's bound; 0: LIMIT_ROUTER_START_HOLD;
                                         RESUME_START_OFF: not held (answered at once) */
    size_t max_per_sandbox;           /* 0: LIMIT_ROUTER_RESUME_PER_SANDBOX */
    size_t max_total;                 /* 0: LIMIT_ROUTER_RESUME_TOTAL */
    resume_patch_fn *patch;           /* NULL: resume_patch_kube */
    void *patch_ctx;
};

/** Called once for a held request: status 0 means "the Sandbox is Ready (or gone):
 * resolve again"; otherwise an HTTP status with detail (borrowed for the call): 504 when
 * a resume took longer than hold_timeout, 503 when a starting Sandbox was not Ready
 * within start_hold (the detail then says why, as an unheld request's 503 does). */
typedef void resume_wake_fn(void *ctx, int status, const char *detail);

/** Returns a new gate on loop (borrowed); opts copied. Free with resume_gate_free. */
struct resume_gate *resume_gate_new(uv_loop_t *loop, const struct resume_gate_opts *opts);
/** Answers every held request with 503 and frees once the timer closed. NULL is fine. */
void resume_gate_free(struct resume_gate *g);

/** Decides for a request to ns/name whose Sandbox sb (borrowed, may be NULL) is not
 * Ready. Returns 1 when held: fn(ctx, ...) runs later and *ret_w identifies the hold
 * for resume_gate_cancel. Returns 0 when not held: *status and detail (size bytes) are
 * left alone (RESUME_PASS) or replaced with the answer to send (409, or 503 when the
 * hold limits are reached). */
int resume_gate_hold(struct resume_gate *g, const json_t *sb, const char *ns, const char *name,
                     resume_wake_fn *fn, void *ctx, struct resume_waiter **ret_w, int *status,
                     char *detail, size_t size);
/** Drops a held request (the client went away or timed out); fn is not called. */
void resume_gate_cancel(struct resume_gate *g, struct resume_waiter *w);

/** Counters for tests. */
struct resume_gate_stats {
    uint64_t resumes, resume_errors, held, forwarded, timeouts, rejected, overflow;
    uint64_t start_held; /* of held: RESUME_START holds */
    size_t holding;
};
void resume_gate_stats(const struct resume_gate *g, struct resume_gate_stats *ret);

/** The default patch through the API server (client is the ctx). */
int resume_patch_kube(void *ctx, const char *ns, const char *name, char *err, size_t size);
