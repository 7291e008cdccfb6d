/* SPDX-License-Identifier: Apache-2.0 */
/* Every size and time limit in one place, so each bound an outsider can push against is
 * reviewable. Sizes in bytes, times in microseconds (usec_t) unless the name says so. */
#pragma once

#include "common/clock.h"

/* Logging */
#define LIMIT_LOG_LINE (16u * 1024) /* one log line, longer lines are cut */

/* Kubernetes API client */
/* one non-watch response body (a big LIST page) */
#define LIMIT_KUBE_RESPONSE        (64u * 1024 * 1024)
#define LIMIT_KUBE_WATCH_FRAME     (16u * 1024 * 1024)  /* one watch event line */
#define LIMIT_KUBE_ERROR_BODY      (64u * 1024)         /* a Status body kept for errors */
#define LIMIT_KUBECONFIG           (4u * 1024 * 1024)   /* a kubeconfig file */
#define LIMIT_KUBE_TOKEN           (64u * 1024)         /* a bearer token file */
#define LIMIT_KUBE_EXEC_OUTPUT     (1u * 1024 * 1024)   /* an exec credential plugin's stdout */
#define LIMIT_KUBE_URL             (16u * 1024)         /* one request URL */
#define LIMIT_KUBE_LIST_PAGE       500                  /* default LIST page size (limit=) */
#define LIMIT_KUBE_RETRIES         8                    /* retries of one 429/5xx request */
#define LIMIT_KUBE_RETRY_AFTER     (60 * USEC_PER_SEC)  /* longest honoured Retry-After */
#define LIMIT_KUBE_CONNECT         (10 * USEC_PER_SEC)  /* TCP+TLS connect timeout */
#define LIMIT_KUBE_REQUEST         (60 * USEC_PER_SEC)  /* one non-watch request */
#define LIMIT_KUBE_WATCH_TIMEOUT_S 300                  /* server-side watch timeout (seconds) */
#define LIMIT_KUBE_WATCH_IDLE      (120 * USEC_PER_SEC) /* no byte for this long: reconnect */
#define LIMIT_KUBE_BACKOFF_MIN     (100 * USEC_PER_MSEC)
#define LIMIT_KUBE_BACKOFF_MAX     (30 * USEC_PER_SEC)
#define LIMIT_KUBE_EXEC_TIMEOUT    (30 * USEC_PER_SEC) /* exec credential plugin run time */

/* Work queue */
#define LIMIT_WQ_BACKOFF_BASE (5 * USEC_PER_MSEC)
#define LIMIT_WQ_BACKOFF_MAX  (1000 * USEC_PER_SEC)

/* Events recorder */
#define LIMIT_EVENT_MESSAGE 1024 /* longer event messages are cut (API limit is 1 KiB) */
#define LIMIT_EVENT_BURST   25   /* events per object key before rate limiting */
#define LIMIT_EVENT_CACHE   4096 /* distinct (object, reason, message) entries remembered */

/* HTTP server */
#define LIMIT_HTTP_HEADER_BYTES   (64u * 1024)        /* request line plus all header lines */
#define LIMIT_HTTP_HEADERS        100                 /* header fields per request */
#define LIMIT_HTTP_BODY           (16u * 1024 * 1024) /* a buffered request body */
#define LIMIT_HTTP_CHUNK_LINE     256                 /* a chunk-size line */
#define LIMIT_HTTP_HEADER_TIMEOUT (10 * USEC_PER_SEC) /* whole request head must arrive */
#define LIMIT_HTTP_IDLE_TIMEOUT   (60 * USEC_PER_SEC) /* keep-alive idle connection */
#define LIMIT_HTTP_BODY_TIMEOUT   (30 * USEC_PER_SEC) /* no body byte for this long */
#define LIMIT_HTTP_CONNECTIONS    4096                /* open connections per server */
#define LIMIT_HTTP_WRITE_QUEUE    (4u * 1024 * 1024)  /* queued response bytes per connection */

/* Metrics */
#define LIMIT_METRIC_SERIES 10000 /* label combinations per metric family */
