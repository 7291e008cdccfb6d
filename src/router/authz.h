/* SPDX-License-Identifier: Apache-2.0 */
/* Authentication and authorization of proxied requests: a bearer token is reviewed
 * (TokenReview) and the user's access to the addressed Sandbox checked
 * (SubjectAccessReview for a configurable verb and subresource). Reviews run on worker
 * threads; results come back on the loop thread through a uv_async_t. Both decisions are
 * cached (bounded LRU with TTL; API errors cached briefly) under a keyed 128-bit hash of
 * the token, so the raw token is never stored and the hot path makes no API call.
 * A caller identified otherwise (a verified client certificate) skips the TokenReview:
 * its SubjectAccessReview is cached in the same way under a hash of the identity.
 *
 * Threading: authz_new, authz_check, authz_check_identity, authz_free and every
 * callback run on the loop thread; the reviewer's functions run on the worker threads. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/clock.h"
#include "common/str.h"

struct kube_client;

enum authz_verdict {
    AUTHZ_ALLOW = 0,
    AUTHZ_UNAUTHENTICATED, /* 401: no token, or TokenReview said not authenticated */
    AUTHZ_FORBIDDEN,       /* 403: SubjectAccessReview denied */
    AUTHZ_ERROR,           /* 500: a review failed */
    AUTHZ_BUSY,            /* 503: too many reviews pending */
};

/** The outcome given to authz_done_fn. user is borrowed for the call ("" unknown). */
struct authz_result {
    enum authz_verdict verdict;
    const char *user;
    bool cached; /* answered from the caches without a review */
};

typedef void authz_done_fn(void *ctx, const struct authz_result *res);

/** What a SubjectAccessReview asks (borrowed strings). */
struct authz_attrs {
    const char *ns, *name, *verb, *subresource; /* subresource may be NULL */
};

/** The reviews, called on worker threads (concurrently when workers > 1). */
struct authz_reviewer {
    /** Reviews token. Returns 0 with *ret_user: a new reference to TokenReview's
     * status.user ({"username","uid","groups","extra"}) when authenticated, or NULL when
     * not; a negative errno when the review itself failed. */
    int (*review_token)(void *ctx, const char *token, json_t **ret_user);
    /** Asks whether user (borrowed, as returned above) may do attrs. Returns 0 with
     * *ret_allowed, or a negative errno. */
    int (*review_access)(void *ctx, const json_t *user, const struct authz_attrs *attrs,
                         bool *ret_allowed);
    void *ctx;
};

struct authz_opts {
    const struct authz_reviewer *reviewer; /* borrowed; must outlive the authz */
    const char *verb;                      /* NULL: "get" (copied) */
    const char *subresource;               /* NULL: none (copied) */
    usec_t ttl;                            /* 0: LIMIT_ROUTER_AUTH_TTL */
    usec_t error_ttl;                      /* 0: LIMIT_ROUTER_AUTH_ERROR_TTL */
    size_t cache_size;                     /* entries per cache; 0: LIMIT_ROUTER_AUTH_CACHE */
    unsigned workers;                      /* 0: LIMIT_ROUTER_AUTH_WORKERS */
    size_t max_pending;                    /* 0: LIMIT_ROUTER_AUTH_QUEUE */
    usec_t (*now)(void);                   /* NULL: clock_now (tests inject a fake) */
};

struct authz;

/** Creates the checker and starts its workers on loop (borrowed). Returns 0 and *ret
 * (free with authz_free) or a negative errno. */
int authz_new(uv_loop_t *loop, const struct authz_opts *opts, struct authz **ret);
/** Stops the workers (a review in progress finishes first), answers every pending check
 * with AUTHZ_ERROR, and frees the checker once its handle closed (the loop must run
 * once more). NULL is fine. */
void authz_free(struct authz *a);

/** Checks token (borrowed; NULL or "" for none) for access to ns/name, for client (the
 * peer's address, borrowed; NULL when unknown): the reviews wait in one queue per client,
 * served in turn. At the bound on pending reviews, the client with the most queued sheds
 * its newest (AUTHZ_BUSY to it) for a newcomer whose client would still have fewer with
 * it; otherwise the newcomer gets AUTHZ_BUSY. A check whose cache key (token, ns, name)
 * is already under review gets that review's answer (unless it knows its user from the
 * cache and the review in flight is of the token).
 * fn(ctx, ...) runs exactly once: now (from the caches, for a missing token, or
 * AUTHZ_BUSY) and then this returns 1, or later on the loop thread and this returns 0. */
int authz_check(struct authz *a, const char *token, const char *ns, const char *name,
                const char *client, authz_done_fn *fn, void *ctx);

/** Checks the caller identified by ident (borrowed: the user name, then each group, each
 * NUL-terminated, as tls/tls_identity.h encodes a client certificate's identity) for
 * access to ns/name: no TokenReview, the SubjectAccessReview of authz_check for that user
 * and those groups, cached under a keyed hash of ident. An empty or malformed ident is
 * AUTHZ_UNAUTHENTICATED. fn runs exactly once, as with authz_check (same return). */
int authz_check_identity(struct authz *a, struct str ident, const char *ns, const char *name,
                         const char *client, authz_done_fn *fn, void *ctx);

/** Counters for metrics and tests. */
struct authz_stats {
    uint64_t token_reviews, access_reviews, token_hits, access_hits, evictions, busy;
    uint64_t coalesced; /* checks answered with another check's review */
    uint64_t shed;      /* queued reviews dropped (AUTHZ_BUSY) for another client's */
    size_t token_entries, access_entries;
};
void authz_stats(const struct authz *a, struct authz_stats *ret);

/** The user of a TokenReview's status (borrowed): a copy of status.user when
 * status.authenticated is true and, with audiences (NULL-terminated; NULL or empty for the
 * API server's own), status.audiences names at least one of them (as Kubernetes asks of
 * clients that set spec.audiences); NULL otherwise. */
json_t *authz_token_review_user(const json_t *status, const char *const *audiences);

/** The state of one reviewer backed by the API server: a value the caller embeds (one
 * per reviewer, never shared between instances). */
struct authz_kube {
    struct kube_client *client;   /* borrowed, thread-safe */
    const char *const *audiences; /* borrowed; NULL-terminated or NULL */
};

/** Fills *k (borrowed for the reviewer's life: ret->ctx points to it) and *ret with the
 * reviewer backed by the API server through c (borrowed, thread-safe). audiences is a
 * NULL-terminated list or NULL (borrowed for the reviewer's life). */
void authz_kube_reviewer(struct authz_kube *k, struct kube_client *c, const char *const *audiences,
                         struct authz_reviewer *ret);
