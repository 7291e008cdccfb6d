/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the files of the Kubernetes client (not for other modules). */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

#include "common/buf.h"
#include "kube/client.h"
#include "kube/kube_limits.h"
#include "kube/ratelimit.h"

/** Appends s percent-encoded: every byte except RFC 3986 unreserved characters
 * (ALPHA DIGIT - . _ ~) becomes %XX, as curl_easy_escape does. Returns 0 or -E2BIG. */
int kube__escape(struct buf *out, const char *s);

struct kube_client {
    struct kube_config *cfg;
    double qps;
    int max_retries;
    usec_t timeout;
    char *user_agent;
    char *base_url;                /* server, host replaced by tls-server-name if set */
    struct curl_slist *connect_to; /* maps tls-server-name back to the real host */
    CURLSH *share;
    pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
    pthread_mutex_t pool_lock;
    CURL *pool[LIMIT_KUBE_POOL_IDLE_SLOTS];
    size_t pool_len;
    struct kube_ratelimit rl;
    atomic_ulong requests, retries, throttled_us, connections;
};

/** A request turned into wire pieces. */
struct kube__prep {
    const char *method;
    struct buf url;
    struct buf body; /* empty when there is no body */
    bool has_body;
    const char *content_type; /* static */
    bool idempotent;          /* GET, PUT, DELETE: retried after any transport error */
};

/** Builds URL and body of r. Returns 0 or a negative errno (reterr filled). p is
 * initialised in both cases; release it with kube__prep_done. */
int kube__prepare(struct kube_client *c, const struct kube_req *r, struct kube__prep *p,
                  struct kube_err *reterr);
void kube__prep_done(struct kube__prep *p);
/** Resets h and sets every option of one transfer of p: URL, method, body, headers with
 * the bearer token, TLS, HTTP/2, timeouts. *ret_headers is to be freed with
 * curl_slist_free_all after the transfer. */
int kube__setup(struct kube_client *c, CURL *h, const struct kube__prep *p,
                struct curl_slist **ret_headers, struct kube_err *reterr);
/** Waits for a rate-limiter token, counting the time in the stats. */
void kube__throttle(struct kube_client *c);
/** Maps a curl error to a negative errno. */
int kube__curl_errno(CURLcode cc);
/** Fills reterr for a failed transfer (curl error) with the error buffer text. */
void kube__transport_err(struct kube_err *reterr, CURLcode cc, const char *errbuf);
/** Parses a Retry-After header line (seconds form) into *ret_s; ignores other lines. */
void kube__parse_retry_after(const char *line, size_t len, long *ret_s);
