/* SPDX-License-Identifier: Apache-2.0 */
/* What the controller suites share: reading and merge-patching objects, waiting for a
 * condition, the extension objects they create, and a simulated kubelet (an informer on
 * the namespace's Pods plus worker threads) that marks new Pods Running and Ready, as
 * hack/apiserver.sh runs no kubelet. Test code only: failures are returned, never
 * asserted here. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "common/clock.h"
#include "kube/client.h"
#include "kube/err.h"
#include "kube/res.h"

/* ---- objects ------------------------------------------------------------------------ */

/** GET of ns/name of res. Returns the object (a new reference) or NULL on any error
 * (NotFound included). */
json_t *it_obj_get(struct kube_client *c, const struct kube_res *res, const char *ns,
                   const char *name);
/** A JSON merge patch (borrowed) of ns/name of res, or of its subresource sub ("status";
 * NULL: the object). Returns 0 or a negative errno with reterr filled (may be NULL). */
int it_merge_patch(struct kube_client *c, const struct kube_res *res, const char *ns,
                   const char *name, const char *sub, json_t *patch, struct kube_err *reterr);
/** Plays the kubelet for Pod ns/name: its status becomes phase Running with podIP and
 * podIPs ip (borrowed) and the conditions PodScheduled and Ready True, as of now. Returns
 * 0 or a negative errno with reterr filled (may be NULL). */
int it_pod_ready(struct kube_client *c, const char *ns, const char *name, const char *ip,
                 struct kube_err *reterr);

/** A SandboxWarmPool name of replicas from SandboxTemplate tpl. Returns new (json_decref). */
json_t *it_pool_new(const char *name, const char *tpl, int replicas);
/** A SandboxClaim name on warm pool pool. Returns new (json_decref). */
json_t *it_claim_new(const char *name, const char *pool);

/* ---- conditions --------------------------------------------------------------------- */

/** A condition wanted on an object (every pointer borrowed). */
struct it_cond {
    const struct kube_res *res;
    const char *name;
    const char *type;   /* condition type, e.g. "Ready" */
    const char *status; /* "True", "False", ...; NULL: any */
    const char *reason; /* NULL: any */
};

/** True when obj (may be NULL) has condition want->type with want's status and reason. */
bool it_cond_match(const json_t *obj, const struct it_cond *want);
/** Polls ns/want->name of want->res until it_cond_match. Returns 0 or -ETIMEDOUT. */
int it_cond_wait(struct kube_client *c, const char *ns, const struct it_cond *want, usec_t timeout);

/* ---- the simulated kubelet ---------------------------------------------------------- */

#define IT_KUBELET_MAX_WORKERS 16

struct it_kubelet;

/** A Pod (borrowed, immutable) the kubelet must leave alone: return true. */
typedef bool it_kubelet_skip_fn(void *ctx, const json_t *pod);
/** Runs Pod name (borrowed); seq counts the calls from 0. Returns 0 when done, or a
 * negative errno (retried with back-off when the kubelet was started with retry). */
typedef int it_kubelet_run_fn(void *ctx, const char *name, unsigned seq);

struct it_kubelet_opts {
    struct kube_client *client; /* borrowed: must outlive the kubelet */
    const char *ns;             /* borrowed: must outlive the kubelet */
    unsigned workers;           /* threads running Pods, 1 to IT_KUBELET_MAX_WORKERS */
    /* Pods with a status.podIP are always skipped; skip (NULL: none) may skip more. */
    it_kubelet_skip_fn *skip;
    /* NULL: it_pod_ready with IP "<ip_prefix>.<seq / 250 % 250>.<seq % 250 + 1>";
     * a NotFound Pod (deleted meanwhile) counts as done. */
    it_kubelet_run_fn *run;
    const char *ip_prefix; /* for the default run, e.g. "10.2" (borrowed) */
    bool retry;            /* a failed run is queued again, rate-limited */
    void *ctx;             /* of skip and run */
};

/** Starts the informer and the workers. Returns 0 and *ret (new, it_kubelet_free) or a
 * negative errno. */
int it_kubelet_start(const struct it_kubelet_opts *o, struct it_kubelet **ret);
/** Stops the informer and the workers (waiting for them) and frees k. Accepts NULL. */
void it_kubelet_free(struct it_kubelet *k);

/* ---- lost answers ------------------------------------------------------------------- */

/** kube_client_opts.fault for a manager's client (ctx unused): answers the requests the
 * rules name with a 501 after the API server served them: a write whose outcome the
 * controller cannot know, or a failed read. 501 is not retried, so the controller sees
 * the failure at once. Without rules it changes nothing. Process-wide state. */
long it_lose_answer(void *ctx, const char *method, const struct kube_res *res, const char *sub,
                    const char *url, long status);
/** Adds a rule (at most 4): the next n successful requests of method on res (borrowed; no
 * subresource) whose URL contains url_part (NULL: any; e.g. "/sandboxes/pool-" for one
 * pool's members) lose their answer. Returns 0, or -ENOSPC with 4 rules already. */
int it_lose_answers(const char *method, const struct kube_res *res, const char *url_part, int n);
/** As it_lose_answers, but the requests are answered 501 before they are sent: a write
 * the server did not carry out (yet: the controller cannot tell). Counted with them. */
int it_drop_requests(const char *method, const struct kube_res *res, const char *url_part, int n);
/** Called by it_before_request's rule with the URL of the request about to be sent. */
typedef void it_before_fn(const char *url, void *ctx);
/** One rule beside those above: the matching requests (method on res, URL containing
 * url_part) that are sent (not dropped by a rule above) pass, but after skip of them the
 * next one first runs fn(url, ctx), on the sending thread, before it is sent: a write of
 * another client that lands between the controller's decision and its request. Once.
 * Returns 0, or -EBUSY while a rule is armed. */
int it_before_request(const char *method, const struct kube_res *res, const char *url_part,
                      int skip, it_before_fn *fn, void *ctx);
/** Disarms the it_before_request rule (a test's teardown: one that failed before its
 * request must not leave the rule to a later test). */
void it_before_cancel(void);
/** Whether the it_before_request rule has not run yet. */
bool it_before_pending(void);
/** The URL of the last request a rule matched ("" before any), into out (size bytes). */
void it_last_lost_url(char *out, size_t size);
/** How many answers were lost since the rules began; the rules are dropped. */
int it_answers_lost(void);
