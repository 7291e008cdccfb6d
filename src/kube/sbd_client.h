/* SPDX-License-Identifier: Apache-2.0 */
/* Plain HTTP calls to sandboxd over libcurl, for kubectl-sandbox (through the API
 * server's pod proxy, the router, or directly) and the controller (a pod IP): one place
 * for URL building (IPv6 literals in brackets), the proxy policy, the TLS material of a
 * kubeconfig, timeouts, the bearer token header and a bounded response body. Streaming
 * callers prepare their own handle with sbd_client_setup.
 *
 * Thread-safety: a client is immutable after sbd_client_new; any thread may use it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "common/buf.h"
#include "common/clock.h"

struct kube_config;
struct sbd_client;

struct sbd_client_opts {
    const char *base;              /* prefix of every URL (copied; trailing '/' dropped) */
    const char *token;             /* bearer token (copied, wiped at free); NULL or "" = none */
    const char *const *headers;    /* more "Name: value" lines, NULL-terminated (copied) */
    const struct kube_config *tls; /* its CA, client certificate, insecure flag and
                                      tls-server-name (base is then that server's URL);
                                      borrowed for the client's life; NULL = system CAs */
    bool no_proxy;                 /* never through a proxy (pod IPs), whatever the
                                      environment says; else libcurl's *_proxy variables */
    bool http_only;                /* plain http only (a pod IP); else http and https */
    bool verbose;                  /* libcurl's debug output on stderr */
    usec_t connect_timeout;        /* 0 = libcurl's default */
    usec_t timeout;                /* the whole transfer; 0 = none (streams) */
    const char *user_agent;        /* NULL = none (copied) */
};

/** One buffered request (strings borrowed for the call). */
struct sbd_client_req {
    const char *method;       /* NULL = GET; HEAD asks for no body */
    const char *path;         /* appended to base; NULL = "" */
    const void *body;         /* NULL = no body */
    size_t len;               /* of body */
    const char *content_type; /* of body; NULL = application/json */
    usec_t timeout;           /* the whole call (connect included); 0 = none but the
                                 stall limit (LIMIT_SBD_CALL_STALL) */
    /* When set, asked about once a second (and at each transfer step): true ends the call
     * with -ECANCELED (a caller the user interrupts). */
    bool (*cancel)(void *ctx);
    void *cancel_ctx;
};

/** Writes "scheme://host:port" into out, an IPv6 literal host in brackets (a host already
 * in brackets is kept). Returns 0, -EINVAL (no host or scheme, port 0) or -E2BIG. */
int sbd_client_base_url(const char *scheme, const char *host, uint16_t port, char *out,
                        size_t size);

/** Creates a client (copies opts). Returns 0 and *ret (new, free with sbd_client_free),
 * -EINVAL without a base, or -E2BIG for a token longer than LIMIT_KUBE_TOKEN (never cut
 * short). */
int sbd_client_new(const struct sbd_client_opts *opts, struct sbd_client **ret);
/** Wipes the token and frees; NULL is fine. */
void sbd_client_free(struct sbd_client *c);

/** Prepares h for method on path (below base; both borrowed): URL, headers (the token,
 * the client's, then extra, NULL-terminated, may be NULL; *ret_headers (new) must be
 * freed with curl_slist_free_all after the transfer), proxy policy, TLS, timeouts, and
 * errbuf (CURL_ERROR_SIZE bytes, borrowed for the transfer; may be NULL) for the error
 * text. The body and the write callback are the caller's. Returns 0. */
int sbd_client_setup(const struct sbd_client *c, CURL *h, const char *method, const char *path,
                     const char *const *extra, struct curl_slist **ret_headers, char *errbuf);

/** Performs req. The response body is appended to resp (bounded by its limit; NULL
 * discards it) and the HTTP status stored in *ret_status. A transfer silent for
 * LIMIT_SBD_CALL_STALL fails (-ETIMEDOUT), as does one past req->timeout. Returns 0 when a
 * response arrived (any status), or -ETIMEDOUT, -ECANCELED (req->cancel said so), -E2BIG
 * (the body passed resp's limit), -ENOMEM or -EIO with libcurl's text in err (size bytes;
 * may be NULL). */
int sbd_client_call(const struct sbd_client *c, const struct sbd_client_req *req, struct buf *resp,
                    long *ret_status, char *err, size_t size);
