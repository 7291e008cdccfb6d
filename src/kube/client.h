/* SPDX-License-Identifier: Apache-2.0 */
/* A Kubernetes API client over libcurl: HTTPS with HTTP/2 and connection reuse, a
 * separate connection for each watch stream, client-side QPS/burst limiting, retry of
 * 429/5xx honouring Retry-After. Objects stay JSON (jansson json_t): unknown fields
 * survive read-modify-write, and "absent" differs from false/0.
 *
 * Thread-safety: one struct kube_client may be used from any number of threads at once
 * (curl handles are pooled per call). Nothing per-call is stored in the client. */
#pragma once

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/clock.h"
#include "kube/config.h"
#include "kube/err.h"
#include "kube/res.h"

struct kube_client;

struct kube_client_opts {
    double qps;             /* client-side steady rate; 0 = unlimited */
    int burst;              /* bucket size; 0 = max(1, qps) */
    const char *user_agent; /* NULL = "agent-sandbox/<version>" */
    usec_t timeout;         /* per non-watch request; 0 = LIMIT_KUBE_REQUEST */
    /* A GET (not a watch) whose response makes no progress this long is cut and retried
     * like a transport error (whole seconds; 0 = LIMIT_KUBE_READ_STALL; curl averages
     * the speed over its last 5 s or so, so the cut comes about that much later): a LIST
     * on a shared HTTP/2 connection was seen to stall mid-body (95 KB in) until the
     * request's 60 s timeout, with the rest of the connection working, under libcurl
     * 7.88. Writes keep the timeout only: a write cut while slow may still have been
     * carried out. */
    usec_t read_stall;
    /* A watch (a stream with timeoutSeconds) still open this long after its timeoutSeconds
     * is cut client-side, for a proxy that ignores it or a server that trickles bytes
     * without ending a frame; 0 = LIMIT_KUBE_WATCH_SLACK (60 s). The clock runs while
     * the stream's callback blocks too. */
    usec_t watch_slack;
    int max_retries; /* retries of 429/5xx/transport errors; -1 = LIMIT_KUBE_RETRIES, 0 = none */
    /* false (default): requests to an https server from every thread share HTTP/2
     * connections (streams of one connection, each driven in turn by one of the threads
     * waiting on it: mux.h);
     * true: each concurrent request has a connection of its own, as before. */
    bool no_mux;
    int mux_lanes; /* shared connections (lanes of mux.h); 0 = LIMIT_KUBE_MUX_LANES */
    /* Called after every attempt of kube_request (retries included; not for watch
     * streams), from the calling thread: the method, the resource (NULL for a raw path),
     * the subresource (NULL: none) and the HTTP status (0: no response). All borrowed for
     * the call. For request accounting in tests and benchmarks; NULL: none. */
    void (*observe)(void *ctx, const char *method, const struct kube_res *res,
                    const char *subresource, long status);
    void *observe_ctx;
    /* Fault injection for tests: called like observe, with the request's URL too, after
     * every attempt that got an answer (before observe). A return of 500 to 599 replaces
     * the answer's status and drops its body: "the request was carried out, the answer
     * was lost in a 5xx", as a real server or proxy can do. Anything else keeps the
     * answer. It is also called before each attempt, with status 0: a return of 500 to
     * 599 then answers the attempt with that status without sending it, as a server that
     * took the request and answered 5xx before carrying it out (it may still carry it out
     * later: the caller cannot tell). NULL: none. */
    long (*fault)(void *ctx, const char *method, const struct kube_res *res,
                  const char *subresource, const char *url, long status);
    void *fault_ctx;
};

/** Creates a client. Takes cfg (freed by kube_client_free, also on failure). */
int kube_client_new(struct kube_config *cfg, const struct kube_client_opts *opts,
                    struct kube_client **ret);
/** NULL is fine. */
void kube_client_free(struct kube_client *c);
/** The namespace of the current context ("default" when unset). Borrowed. */
const char *kube_client_namespace(const struct kube_client *c);
/** The config the client was made from. Borrowed. */
const struct kube_config *kube_client_config(const struct kube_client *c);

struct kube_req;

/** A gate on writes: may(ctx, r) is asked before each attempt (retries too) of a request
 * whose method is not GET; false ends it with -ENOLCK before it is sent. For a leader: a
 * write begun while leading and retried past the renew deadline must not reach the API
 * server after another replica took the Lease. Borrowed: it must outlive its use. */
struct kube_write_gate {
    bool (*may)(void *ctx, const struct kube_req *r);
    void *ctx;
};
/** Sets (NULL: clears) c's write gate; safe while other threads use c. */
void kube_client_set_write_gate(struct kube_client *c, const struct kube_write_gate *g);

/** Counters for tests and metrics (monotonic since creation). */
struct kube_client_stats {
    unsigned long requests;     /* HTTP requests sent, retries included */
    unsigned long retries;      /* of which retries */
    unsigned long throttled_us; /* total time spent waiting in the QPS limiter */
    unsigned long connections;  /* new TCP connections opened (curl's num_connects) */
};
void kube_client_stats(const struct kube_client *c, struct kube_client_stats *ret);

enum kube_patch_type {
    KUBE_PATCH_MERGE,     /* application/merge-patch+json */
    KUBE_PATCH_JSON,      /* application/json-patch+json */
    KUBE_PATCH_STRATEGIC, /* application/strategic-merge-patch+json (built-in kinds only) */
    KUBE_PATCH_APPLY,     /* application/apply-patch+yaml with a JSON body (server-side apply) */
};

/** A request, described by value. Unset (NULL/0) fields are not sent. */
struct kube_req {
    const char *method; /* "GET", "POST", "PUT", "PATCH", "DELETE" */
    const struct kube_res *res;
    const char *ns; /* NULL: cluster scope or all namespaces */
    const char *name;
    const char *subresource; /* "status", "scale", ... */
    const char *raw_path;    /* instead of res/ns/name/subresource: an absolute API
                                path such as "/version" or a pod proxy path
                                "/api/v1/namespaces/N/pods/P:8080/proxy/x" (sent
                                as given: the caller escapes it) */
    /* query */
    const char *label_selector;
    const char *field_selector;
    long limit;
    const char *continue_token;
    const char *resource_version;
    const char *resource_version_match; /* "NotOlderThan", "Exact" */
    bool watch;
    bool allow_watch_bookmarks;
    long timeout_seconds; /* server-side timeoutSeconds (watch) */
    bool dry_run;         /* dryRun=All */
    const char *field_manager;
    bool force;                     /* server-side apply force=true */
    const char *propagation_policy; /* DELETE body: Foreground, Background, Orphan */
    const char *precondition_uid;   /* DELETE body preconditions */
    const char *precondition_rv;
    long grace_period_seconds; /* DELETE body; -1 = unset (use 0 to mean immediate) */
    /* body */
    const json_t *body; /* borrowed; serialised compactly */
    enum kube_patch_type patch_type;
    /* this call only (kube_request) */
    usec_t timeout; /* bounds the whole call: rate-limiter wait (a token that would come
                       later fails the call at once, not taken), every attempt (each also
                       at most the client's timeout) and the back-off between them; 0 =
                       the client's per-attempt timeout only */
    bool no_retry;  /* one attempt (plus a 401 token refresh): the caller retries */
    /* When not NULL and it turns true, the call ends with -ECANCELED: before its next
     * attempt, within 50 ms of a rate-limiter wait (its token given back), within 20 ms
     * of a back-off, and within about a second of a transfer (the transfer's progress
     * callback). Borrowed; for a caller that stops (an informer's
     * LIST), so a stop does not wait out the retries of a server that fails. */
    atomic_bool *cancel;
};

/** Initialises r for method on res (all optional fields unset). */
void kube_req_init(struct kube_req *r, const char *method, const struct kube_res *res);
/** Builds the full URL (server + path + escaped query) into out. */
int kube_req_url(const struct kube_client *c, const struct kube_req *r, struct buf *out);

/** Sends one request and parses the JSON response. On success *ret_obj (may be NULL if
 * the caller does not want it) gets a new reference. On failure returns a negative
 * errno and fills reterr (may be NULL); *ret_obj is untouched. */
int kube_request(struct kube_client *c, const struct kube_req *r, json_t **ret_obj,
                 struct kube_err *reterr);
/** True when the API server refused a create in ns because the namespace is being
 * deleted, less than KUBE_NSTERM_TTL ago (creates there are answered locally meanwhile):
 * a caller may skip work that only makes sense in a namespace that stays. */
bool kube_client_ns_terminating(struct kube_client *c, const char *ns);
/** True when the API server refused a create in ns as NamespaceTerminating less than
 * window ago (at most KUBE_NSTERM_MEMORY, 30 s): for writes that are allowed there but
 * pointless while the namespace empties. */
bool kube_client_ns_terminated_within(struct kube_client *c, const char *ns, usec_t window);

/* Convenience wrappers; each returns as kube_request. */
int kube_get(struct kube_client *c, const struct kube_res *res, const char *ns, const char *name,
             json_t **ret_obj, struct kube_err *reterr);
int kube_create(struct kube_client *c, const struct kube_res *res, const char *ns,
                const json_t *obj, json_t **ret_obj, struct kube_err *reterr);
/** PUT of obj (its metadata.resourceVersion is the optimistic-concurrency guard). */
int kube_update(struct kube_client *c, const struct kube_res *res, const char *ns,
                const json_t *obj, json_t **ret_obj, struct kube_err *reterr);
/** PUT on the /status subresource. */
int kube_update_status(struct kube_client *c, const struct kube_res *res, const char *ns,
                       const json_t *obj, json_t **ret_obj, struct kube_err *reterr);
int kube_patch(struct kube_client *c, const struct kube_res *res, const char *ns, const char *name,
               enum kube_patch_type type, const json_t *patch, json_t **ret_obj,
               struct kube_err *reterr);
/** Server-side apply of obj with field_manager (required); force overrides conflicts. */
int kube_apply(struct kube_client *c, const struct kube_res *res, const char *ns, const json_t *obj,
               const char *field_manager, bool force, json_t **ret_obj, struct kube_err *reterr);
int kube_delete(struct kube_client *c, const struct kube_res *res, const char *ns, const char *name,
                struct kube_err *reterr);
/** DELETE of obj (by its namespace and name) guarded by its metadata.uid, so an object
 * made again under the same name is never the one deleted; with same_version also by its
 * metadata.resourceVersion, so one changed since obj was read is not either (both refusals
 * are 409 Conflict, -EBUSY). propagation is the DeleteOptions' propagationPolicy
 * ("Foreground", "Background", "Orphan"; NULL: the server's default for res). obj is
 * borrowed. Returns as kube_request, or -EINVAL (no request sent; reterr filled) when obj
 * lacks a name, a uid, or the resourceVersion same_version asks for. */
int kube_delete_obj(struct kube_client *c, const struct kube_res *res, const json_t *obj,
                    bool same_version, const char *propagation, struct kube_err *reterr);

/** Lists every page (limit + continue) of res matching r's selectors into one List-shaped
 * object {"items":[...],"metadata":{"resourceVersion":...}} (new reference; ret_list is
 * required). r->method,
 * r->limit and r->continue_token are managed by the call; r may be NULL for a plain
 * list of res in ns. A 410 on a continue token restarts the list from scratch once. */
int kube_list_all(struct kube_client *c, const struct kube_res *res, const char *ns,
                  const struct kube_req *r, json_t **ret_list, struct kube_err *reterr);

/** Called by kube_list_pages with each page as it arrives: page is borrowed (valid during
 * the call; json_incref what must outlive it) and holds that page's items and
 * metadata.resourceVersion (the same snapshot on every page of one list). restarted is
 * true on the first page of a list restarted after its continue token expired: the
 * pages before belong to an abandoned snapshot. Return 0 to go on; a negative value
 * stops the list and is returned. */
typedef int kube_list_page_fn(void *ctx, const json_t *page, bool restarted);
/** As kube_list_all, but hands every page to fn(ctx, ...) instead of accumulating
 * them, so only one page's text and objects are held at a time (r->limit, default
 * LIMIT_KUBE_LIST_PAGE, sets the page size; a page whose text would pass
 * LIMIT_KUBE_RESPONSE is asked again with half the limit, down to 1, and the rest of the
 * list keeps the smaller size). An expired continue token restarts the list (fn's
 * restarted); a second expiry in one call lists once more without limit (one page, which
 * no compaction can cut; -E2BIG past LIMIT_KUBE_RESPONSE). Returns 0 after the last page, fn's
 * negative value, or a negative errno (pages already handed over stay handed over). */
int kube_list_pages(struct kube_client *c, const struct kube_res *res, const char *ns,
                    const struct kube_req *r, kube_list_page_fn *fn, void *ctx,
                    struct kube_err *reterr);

/** Called with each piece of a streamed response body as curl delivers it. Return 0 to
 * continue, negative to stop (the value is returned by kube_request_stream). */
typedef int kube_stream_fn(void *ctx, const char *data, size_t len);

/** Streams a long-running response (watch) on its own connection, never shared with
 * other requests. Returns 0 when the server ends the response normally, -ECANCELED when
 * *stop became true (also during the rate-limiter wait), -ETIMEDOUT when no byte arrived
 * for idle_timeout (0 = LIMIT_KUBE_WATCH_IDLE) or, with r->timeout_seconds set, the
 * stream is still open the client's watch_slack after it (the time fn takes is left out),
 * the callback's negative value,
 * or an error (reterr filled; a non-2xx status has its Status body parsed). No retry:
 * the caller reconnects. */
int kube_request_stream(struct kube_client *c, const struct kube_req *r, kube_stream_fn *fn,
                        void *ctx, const atomic_bool *stop, usec_t idle_timeout,
                        struct kube_err *reterr);
