/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the files of the Kubernetes client (not for other modules). */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

#include "common/buf.h"
#include "common/limits.h"
#include "kube/client.h"
#include "kube/nsterm.h"
#include "kube/ratelimit.h"

/** Sets the TLS material of cfg (borrowed) on h: CA, client certificate and key (PEM,
 * data copied into h), and the insecure flag. Shared with sbd_client.c. */
void kube__curl_tls(CURL *h, const struct kube_config *cfg);
/** For a server reached under a TLS name of its own (kubeconfig tls-server-name): the URL
 * with its host replaced by server_name (*ret_url, new, no trailing '/') and the
 * CURLOPT_CONNECT_TO entry that maps that name back to the URL's host and port
 * (*ret_connect_to, new: curl_slist_free_all). Returns 0 or -EINVAL (a URL or name curl
 * refuses). */
int kube__server_name_target(const char *url, const char *server_name, char **ret_url,
                             struct curl_slist **ret_connect_to);

/* At most LIMIT_KUBE_LOG_BURST lines per LIMIT_KUBE_LOG_WINDOW; the rest are counted
 * and the count is reported on the next line let through. */
struct kube__loglimit {
    pthread_mutex_t lock;
    usec_t window_start;
    unsigned in_window;
    unsigned long suppressed;
};

void kube__loglimit_init(struct kube__loglimit *l);
void kube__loglimit_done(struct kube__loglimit *l);
/** Whether a line may be logged at monotonic time now. When it may, *ret_suppressed
 * (may be NULL) gets the number of lines dropped since the last one allowed. */
bool kube__loglimit_allow(struct kube__loglimit *l, usec_t now, unsigned long *ret_suppressed);

/** One failed attempt as the retry log shows it. Every pointer is borrowed. */
struct kube__retry_note {
    const char *method;
    const char *url;          /* full URL: only its path is logged (no query, no host) */
    long status;              /* HTTP status, 0 when no response arrived */
    const char *reason;       /* Status.reason, or the transport error text; NULL = none */
    long retry_after_s;       /* the server's Retry-After, 0 = none */
    int attempt;              /* 1 = the first attempt failed */
    usec_t delay;             /* back-off before the next attempt; 0 when giving up */
    unsigned long suppressed; /* lines dropped by the limiter before this one */
};

/** Formats n as logfmt fields (method=... path="..." status=... reason="..."
 * retry_after_s=... attempt=... delay_ms=... [suppressed=...]) into out: no token, no
 * body, no query string; path and reason (cut at 256 bytes) quoted by log_quote. Returns the
 * length written (truncated to size - 1). */
size_t kube__retry_note_format(const struct kube__retry_note *n, char *out, size_t size);
/** Copies the path of url (after scheme://host[:port], before '?') into out, cut to
 * fit. */
void kube__url_path(const char *url, char *out, size_t size);

struct kube_client {
    struct kube_config *cfg;
    double qps;
    int max_retries;
    usec_t timeout;
    usec_t read_stall;  /* kube_client_opts.read_stall, defaulted */
    usec_t watch_slack; /* kube_client_opts.watch_slack, defaulted */
    char *user_agent;
    char *base_url;                /* server, host replaced by tls-server-name if set */
    struct curl_slist *connect_to; /* maps tls-server-name back to the real host */
    CURLSH *share;
    pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
    pthread_mutex_t pool_lock;
    CURL *pool[LIMIT_KUBE_POOL_IDLE_SLOTS];
    size_t pool_len;
    struct kube__mux *mux; /* unary requests over shared connections; NULL for http:// */
    struct kube_ratelimit rl;
    struct kube_nsterm nsterm;      /* namespaces whose creates the server refused */
    struct kube__loglimit loglimit; /* retry and throttle log lines */
    atomic_ulong requests, retries, throttled_us, connections;
    void (*observe)(void *ctx, const char *method, const struct kube_res *res,
                    const char *subresource, long status);
    void *observe_ctx;
    long (*fault)(void *ctx, const char *method, const struct kube_res *res,
                  const char *subresource, const char *url, long status);
    void *fault_ctx;
    _Atomic(const struct kube_write_gate *) gate; /* kube_client_set_write_gate; NULL: none */
};

/** A request turned into wire pieces. */
struct kube__prep {
    const char *method;
    struct buf url;
    struct buf body; /* empty when there is no body */
    bool has_body;
    const char *content_type;   /* static */
    bool idempotent;            /* GET, PUT, DELETE: retried after any transport error */
    bool no_retry;              /* kube_req.no_retry */
    bool generated;             /* a POST whose object gets its name from generateName: a
                                   5xx may hide a create, and a retry would make another */
    atomic_bool *cancel;        /* kube_req.cancel (borrowed), or NULL */
    usec_t deadline;            /* monotonic end of the whole call (kube_req.timeout), or 0 */
    const struct kube_res *res; /* of the request (borrowed), for the observer */
    const char *subresource;    /* likewise */
};

/** Builds URL and body of r. Returns 0 or a negative errno (reterr filled). p is
 * initialised in both cases; release it with kube__prep_done. */
int kube__prepare(struct kube_client *c, const struct kube_req *r, struct kube__prep *p,
                  struct kube_err *reterr);
void kube__prep_done(struct kube__prep *p);
/** Resets h and sets every option of one transfer of p: URL, method, body, headers with
 * the bearer token, TLS, HTTP/2, timeouts. *ret_headers is to be freed with
 * curl_slist_free_all after the transfer. */
/** Whether an attempt that failed with cc sent nothing (sent: request bytes went out,
 * CURLINFO_REQUEST_SIZE, which counts libcurl's own resend on a new connection too): no
 * address, no connection, or a TLS handshake that failed (an API server restarting
 * behind a load balancer resets it). Such an attempt is retried for any method. */
bool kube__nothing_sent(CURLcode cc, bool sent);
/** CURLOPT_SOCKOPTFUNCTION of every connection: TCP_USER_TIMEOUT of
 * LIMIT_KUBE_TCP_UNACKED, so a connection whose peer went without a reset (a load
 * balancer's state dropped, a node gone) is closed by the kernel once sent bytes stay
 * unacknowledged that long, instead of holding a lane's requests until the kernel's
 * retransmissions give up (about 15 minutes). Keepalive probes count as sent bytes. */
int kube__sockopt(void *ctx, curl_socket_t fd, curlsocktype purpose);
/** Sets up h for p; *ret_gen gets the generation of the credential the headers carry
 *  (kube_config_token_gen). */
int kube__setup(struct kube_client *c, CURL *h, const struct kube__prep *p,
                struct curl_slist **ret_headers, uint64_t *ret_gen, struct kube_err *reterr);
/** Waits for a rate-limiter token, counting the time in the stats (a wait of a second
 * or more is logged, rate-limited, with p's verb and path). The wait ends with p's call
 * deadline and at p->cancel, else at *stop (either may be NULL). Returns 0, or
 * -ETIMEDOUT (the token would come after the deadline: none taken) or -ECANCELED, e
 * filled. */
int kube__throttle(struct kube_client *c, const struct kube__prep *p, const atomic_bool *stop,
                   struct kube_err *e);
/** Maps a curl error to a negative errno. */
int kube__curl_errno(CURLcode cc);
/** Fills reterr for a failed transfer (curl error) with the error buffer text. */
void kube__transport_err(struct kube_err *reterr, CURLcode cc, const char *errbuf);
/** Parses a Retry-After header line (seconds form) into *ret_s; ignores other lines. */
void kube__parse_retry_after(const char *line, size_t len, long *ret_s);
