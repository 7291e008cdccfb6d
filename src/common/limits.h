/* SPDX-License-Identifier: Apache-2.0 */
/* Every size and time limit in one place, so each bound an outsider can push against is
 * reviewable: the shared libraries' first, then one section per component. Sizes in
 * bytes, times in microseconds (usec_t) unless the name says so. */
#pragma once

#include "common/clock.h"

/* Logging */
#define LIMIT_LOG_LINE (16u * 1024) /* one log line, longer lines are cut */

/* Kubernetes API client */
/* one non-watch response body (a big LIST page) */
#define LIMIT_KUBE_RESPONSE        (64u * 1024 * 1024)
#define LIMIT_KUBE_WATCH_FRAME     (16u * 1024 * 1024) /* one watch event line */
#define LIMIT_KUBE_ERROR_BODY      (64u * 1024)        /* a Status body kept for errors */
#define LIMIT_KUBECONFIG           (4u * 1024 * 1024)  /* a kubeconfig file */
#define LIMIT_KUBE_TOKEN           (64u * 1024)        /* a bearer token file */
#define LIMIT_KUBE_EXEC_OUTPUT     (1u * 1024 * 1024)  /* an exec credential plugin's stdout */
#define LIMIT_KUBE_URL             (16u * 1024)        /* one request URL */
#define LIMIT_KUBE_LIST_PAGE       500                 /* default LIST page size (limit=) */
#define LIMIT_KUBE_LIST_PAGE_SMALL 100                 /* a compact cache's: less parsed at once */
#define LIMIT_KUBE_LIST_PAGES      100000  /* pages of one LIST (a server that never ends one) */
#define LIMIT_KUBE_LIST_ALL_ITEMS  1000000 /* items kube_list_all gathers in memory */
#define LIMIT_KUBE_RETRIES         8       /* retries of one 429/5xx request */
#define LIMIT_KUBE_RETRY_AFTER     (60 * USEC_PER_SEC)  /* longest honoured Retry-After */
#define LIMIT_KUBE_CONNECT         (10 * USEC_PER_SEC)  /* TCP+TLS connect timeout */
#define LIMIT_KUBE_REQUEST         (60 * USEC_PER_SEC)  /* one non-watch request */
#define LIMIT_KUBE_READ_STALL      (15 * USEC_PER_SEC)  /* a GET receiving nothing: cut, retried */
#define LIMIT_KUBE_WATCH_TIMEOUT_S 300                  /* server-side watch timeout (seconds) */
#define LIMIT_KUBE_WATCH_IDLE      (120 * USEC_PER_SEC) /* no byte for this long: reconnect */
#define LIMIT_KUBE_WATCH_SLACK     (60 * USEC_PER_SEC)  /* past timeoutSeconds: cut here */
#define LIMIT_KUBE_BACKOFF_MIN     (100 * USEC_PER_MSEC)
#define LIMIT_KUBE_BACKOFF_MAX     (30 * USEC_PER_SEC)
#define LIMIT_KUBE_EXEC_TIMEOUT    (30 * USEC_PER_SEC) /* exec credential plugin run time */
#define LIMIT_KUBE_RETIRED_CERTS   8 /* an exec plugin's replaced certificates kept (lent out) */

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
#define LIMIT_FDS_WANTED          65536               /* soft open-file limit servers ask for */
#define LIMIT_HTTP_WRITE_QUEUE    (4u * 1024 * 1024)  /* queued response bytes per connection */

/* Metrics */
#define LIMIT_METRIC_SERIES 10000 /* label combinations per metric family */

/* Kubernetes API client, private to src/kube */
#define LIMIT_KUBE_EXEC_STDERR     (4u * 1024)         /* exec plugin stderr kept for errors */
#define LIMIT_KUBE_REQUEST_BODY    (16u * 1024 * 1024) /* one serialised request body */
#define LIMIT_KUBE_HEADER          (80u * 1024)        /* one request header (bearer token) */
#define LIMIT_KUBE_POOL_IDLE_SLOTS 32                  /* idle easy handles kept for reuse */
#define LIMIT_KUBE_MUX_CONNECTIONS 16           /* per lane to an https server; HTTP/2 needs 1 */
#define LIMIT_KUBE_MUX_LANES       2            /* default shared connections (lanes) */
#define LIMIT_KUBE_MUX_LANES_MAX   16           /* at most */
#define LIMIT_KUBE_UPLOAD_BUFFER   (16u * 1024) /* curl's per-handle upload buffer */
#define LIMIT_KUBE_TOKEN_RECHECK   (60 * USEC_PER_SEC) /* token file re-read at least this often */
#define LIMIT_KUBE_CERT            (1u * 1024 * 1024)  /* one CA / certificate / key file */
#define LIMIT_KUBECONFIG_FILES     16                  /* files in $KUBECONFIG */
#define LIMIT_KUBE_YAML_DEPTH      64                  /* nesting depth of a kubeconfig */
#define LIMIT_KUBE_LOG_BURST       10                  /* retry/throttle log lines per window */
#define LIMIT_KUBE_LOG_WINDOW      (1 * USEC_PER_SEC)  /* the window */
#define LIMIT_KUBE_LOG_THROTTLE    (1 * USEC_PER_SEC)  /* rate-limiter waits this long are logged */
#define LIMIT_KUBE_THROTTLE_SLICE  (50 * USEC_PER_MSEC) /* a limiter wait looks at cancel */
#define LIMIT_KUBE_THROTTLE_MAX    (365 * 24 * 3600 * USEC_PER_SEC) /* longest limiter wait */

/* Connections: a peer gone without a reset is found by the kernel */
#define LIMIT_KUBE_TCP_UNACKED     (60 * USEC_PER_SEC) /* sent bytes unacknowledged: closed */
#define LIMIT_KUBE_TCP_KEEPIDLE_S  30                  /* an idle connection probed after (s) */
#define LIMIT_KUBE_TCP_KEEPINTVL_S 10                  /* then every (s) */
#define LIMIT_KUBE_TLS_RETRIES     2                   /* retries of a failed TLS handshake */
/* the kernel ends an idle connection at the user timeout once a probe is out: leave room
 * for three of them, so one lost probe does not cut a healthy connection */
_Static_assert(LIMIT_KUBE_TCP_UNACKED >=
                   (LIMIT_KUBE_TCP_KEEPIDLE_S + 3 * LIMIT_KUBE_TCP_KEEPINTVL_S) * USEC_PER_SEC,
               "TCP_USER_TIMEOUT shorter than keepalive's three probes");

/* Watch cache (store and informer) */
#define LIMIT_KUBE_STORE_KEY         1024               /* "namespace/name" of one object */
#define LIMIT_KUBE_INFORMER_HANDLERS 16                 /* handler sets per informer */
#define LIMIT_KUBE_WATCH_MIN_LIFE    (1 * USEC_PER_SEC) /* a shorter event-less watch backs off */

/* HTTP server, beside the server-wide LIMIT_HTTP_* above */
#define LIMIT_HTTP_REQUEST_LINE    (16u * 1024)          /* request line; longer gets 414 */
#define LIMIT_HTTP_READ_CHUNK      (64u * 1024)          /* one socket read (shared buffer) */
#define LIMIT_HTTP_LINGER          (2 * USEC_PER_SEC)    /* drain input after an error reply */
#define LIMIT_HTTP_SHUTDOWN_LINGER (100 * USEC_PER_MSEC) /* after a whole request, at shutdown */
#define LIMIT_HTTP_WRITE_STALL     (30 * USEC_PER_SEC)   /* queued response bytes not taken */
/* TCP keepalive of accepted connections (http_sock_keepalive): a peer gone without a FIN
 * or RST is found after IDLE + INTVL * CNT seconds of silence. */
#define LIMIT_HTTP_KEEPALIVE_IDLE  60 /* seconds of silence before the first probe */
#define LIMIT_HTTP_KEEPALIVE_INTVL 10 /* seconds between probes */
#define LIMIT_HTTP_KEEPALIVE_CNT   6  /* probes unanswered */
#define LIMIT_HTTP_STREAM_STALL    (5 * 60 * USEC_PER_SEC) /* a full queue of a running response */
#define LIMIT_HTTP_RESP_HEADERS    (16u * 1024)            /* headers a handler adds to a reply */
#define LIMIT_HTTP_ERROR_BODY      (4u * 1024)             /* one generated error body */
#define LIMIT_HTTP_READY_REASON    1024u                   /* a /readyz failure reason */
#define LIMIT_HTTP_ROUTES          256                     /* routes in one router */
#define LIMIT_HTTP_PEER_INFO       (8u * 1024) /* a front's info on an adopted connection */

/* Controller */
#define LIMIT_CTRL_ERRORS_TEXT    4096u /* joined errors in one Ready message */
#define LIMIT_CTRL_COND_MESSAGE   (LIMIT_CTRL_ERRORS_TEXT + 256) /* one condition message */
#define LIMIT_CTRL_PROP_LIST      (256u * 1024)       /* a propagated-labels/annotations value */
#define LIMIT_CTRL_METRICS_PAGE   (32u * 1024 * 1024) /* one rendered /metrics page */
#define LIMIT_CTRL_DURATION       ((usec_t)366 * 24 * 3600 * USEC_PER_SEC) /* longest duration flag */
#define LIMIT_LB_DELIVERY_TIMEOUT (3 * USEC_PER_SEC) /* one PUT to sandboxd, connect included */
#define LIMIT_LB_TOKEN_CACHE      100000             /* tokens kept in memory (else re-read) */
#define LIMIT_LB_BODY             (1u * 1024 * 1024) /* one delivery body (sandboxd's limit) */
#define LIMIT_CTRL_NAMESPACES     64                 /* namespaces in one --namespace list */
#define LIMIT_SB_MEMO_SLOTS       8192u              /* status memo table; power of two */
#define LIMIT_SB_DEFER_SLOTS      4096u              /* deferred detail changes; power of two */
#define LIMIT_SB_CREATED_SLOTS    1024u              /* children created, not yet cached; ditto */

/* Extensions controllers (templates, warm pools, claims) */
#define LIMIT_EXT_MAX_POOL_REPLICAS 1000                    /* --max-pool-replicas default */
#define LIMIT_EXT_MAX_BATCH         300                     /* creates/deletes per pool pass */
#define LIMIT_EXT_EXPECT_TIMEOUT    (5 * 60 * USEC_PER_SEC) /* lost watch event fallback */
#define LIMIT_EXT_EXPECT_RECHECK    (30 * USEC_PER_SEC)     /* re-check of unmet expectations */
#define LIMIT_EXT_READY_GRACE       (5 * 60 * USEC_PER_SEC) /* non-Ready pool member grace */
#define LIMIT_EXT_UNSCHED_RECHECK   (60 * USEC_PER_SEC)
#define LIMIT_EXT_MISSING_REQUEUE   (60 * USEC_PER_SEC)      /* missing pool or template */
#define LIMIT_EXT_CACHE_LAG_REQUEUE (200 * USEC_PER_MSEC)    /* AlreadyExists on a cold create */
#define LIMIT_EXT_CLAIM_TIMEOUT     (10 * 60 * USEC_PER_SEC) /* --claim-timeout default */
#define LIMIT_EXT_READY_FLIP_AFTER  (60 * USEC_PER_SEC)      /* claim_ready_before's slack */
#define LIMIT_EXT_SIDE_RETRY        (1 * USEC_PER_SEC)       /* a failed first-ready write */
#define LIMIT_EXT_ADOPT_ATTEMPTS    8                        /* warm candidates tried per pass */
#define LIMIT_EXT_ADOPT_SENDS       3                        /* of one PATCH, while unsure */
#define LIMIT_EXT_REFILL_WAIT       (60 * 60 * USEC_PER_SEC) /* longest wait for a refill token */
#define LIMIT_EXT_CREATE_PARALLEL   32 /* bound on --sandbox-warm-pool-create-parallelism */
#define LIMIT_EXT_DOMAINS_FILE      (64u * 1024) /* allowed-label-domains file */
#define LIMIT_EXT_LABEL_VALUE       63
#define LIMIT_EXT_NAME_PART         63  /* qualified-name name part */
#define LIMIT_EXT_PREFIX            253 /* qualified-name DNS prefix */
/* A claim that lost its Sandbox, pool or template writes no status this long after a
 * create in its namespace was refused as NamespaceTerminating (kube_nsterm: 30 s at most). */
#define LIMIT_EXT_NS_GONE_MEMORY (30 * USEC_PER_SEC)

/* Idle auto-suspend (controller) */
#define LIMIT_IDLE_PROBE_PORT    8080                /* sandboxd's REST port */
#define LIMIT_IDLE_PROBE_TIMEOUT (2 * USEC_PER_SEC)  /* one GET /v1/activity */
#define LIMIT_IDLE_PROBE_BODY    (4u * 1024)         /* its response body */
#define LIMIT_IDLE_BUSY_ENTRIES  65536               /* remembered busy sandboxes */
#define LIMIT_IDLE_RETRY         (1 * USEC_PER_SEC)  /* after a conflicting suspend */
#define LIMIT_IDLE_PROBE_RETRY   (30 * USEC_PER_SEC) /* longest wait after a failed probe */

/* sandbox-router */
#define LIMIT_ROUTER_CONNECT_TIMEOUT (5 * USEC_PER_SEC)    /* upstream TCP connect */
#define LIMIT_ROUTER_IDLE_TIMEOUT    (60 * USEC_PER_SEC)   /* no byte either way (HTTP) */
#define LIMIT_ROUTER_PROXY_TIMEOUT   (180 * USEC_PER_SEC)  /* one request, head to end */
#define LIMIT_ROUTER_TUNNEL_IDLE     (3600 * USEC_PER_SEC) /* upgraded tunnel, no byte */
#define LIMIT_ROUTER_SHUTDOWN_GRACE  (30 * USEC_PER_SEC)   /* drain budget */
#define LIMIT_ROUTER_POOL_IDLE       (30 * USEC_PER_SEC)   /* idle pooled upstream conn */
#define LIMIT_ROUTER_POOL_PER_HOST   128                   /* idle conns per ip:port */
#define LIMIT_ROUTER_POOL_TOTAL      1024                  /* idle conns in all */
#define LIMIT_ROUTER_UPSTREAM_HEAD   (64u * 1024)          /* an upstream response head */
#define LIMIT_ROUTER_UPSTREAM_QUEUE  (1u * 1024 * 1024)    /* bytes queued to one upstream */
#define LIMIT_ROUTER_TUNNEL_QUEUE    (1u * 1024 * 1024)    /* bytes queued per tunnel side */
#define LIMIT_ROUTER_CLIENT_QUEUE    (1u * 1024 * 1024)    /* response bytes queued per client */
#define LIMIT_ROUTER_QUEUED          (64u * 1024 * 1024)   /* ... to all clients: downloads pause */
#define LIMIT_ROUTER_QUEUED_SHARE    (64u * 1024) /* ... each past that holds at most this */
#define LIMIT_ROUTER_QUEUED_CHECK    (20 * USEC_PER_MSEC) /* paused downloads look again */
#define LIMIT_ROUTER_TUNNELS         4096         /* open upgraded tunnels (2 descriptors each) */
#define LIMIT_ROUTER_REQ_HEAD        (80u * 1024) /* a request head sent upstream */
#define LIMIT_ROUTER_AUTH_TTL        (30 * USEC_PER_SEC) /* cached review decisions */
#define LIMIT_ROUTER_AUTH_ERROR_TTL  (1 * USEC_PER_SEC)  /* cached review API errors */
#define LIMIT_ROUTER_AUTH_CACHE      4096                /* entries per review cache */
#define LIMIT_ROUTER_AUTH_QUEUE      1024                /* pending review jobs */
#define LIMIT_ROUTER_AUTH_WORKERS    4                   /* review threads */
#define LIMIT_ROUTER_TOKEN           (16u * 1024)        /* a bearer token */
#define LIMIT_ROUTER_AUTH_GROUPS     64                  /* groups kept per user */
#define LIMIT_ROUTER_USER            512                 /* a username */

/* sandbox-router: resume-on-traffic and activity reporting */
#define LIMIT_ROUTER_RESUME_HOLD        (120 * USEC_PER_SEC) /* a held request waits at most */
#define LIMIT_ROUTER_RESUME_PER_SANDBOX 256                  /* held requests per sandbox */
#define LIMIT_ROUTER_RESUME_TOTAL       4096                 /* held requests in all */
#define LIMIT_ROUTER_RESUME_POLL        (20 * USEC_PER_MSEC) /* cache check while holding */
#define LIMIT_ROUTER_RESUME_GRACE       (10 * USEC_PER_SEC)  /* a resume remembered after it */
#define LIMIT_ROUTER_START_HOLD         (30 * USEC_PER_SEC)  /* a starting Sandbox's hold */
#define LIMIT_ROUTER_START_LAG          (2 * USEC_PER_SEC)   /* ... not Ready for longer */
#define LIMIT_ROUTER_WORKER_QUEUE       4096                 /* queued API writes */
#define LIMIT_ROUTER_ACTIVITY_TICK      (1 * USEC_PER_SEC)   /* activity flush period */
#define LIMIT_ROUTER_ACTIVITY_MIN       (1 * USEC_PER_SEC)   /* annotation write interval, min */
#define LIMIT_ROUTER_ACTIVITY_MAX       (60 * USEC_PER_SEC)  /* and max (timeout / 4 between) */
#define LIMIT_ROUTER_ACTIVITY_ENTRIES   65536                /* sandboxes tracked */
#define LIMIT_ROUTER_ACTIVITY_FORGET    (600 * USEC_PER_SEC) /* drop an entry idle this long */
#define LIMIT_ROUTER_ACTIVITY_FINAL     (5 * USEC_PER_SEC)   /* the stop's last writes, at most */

/* sandboxd (most are defaults a flag can change) */
#define LIMIT_SBD_PATH           4096                    /* one decoded path (PATH_MAX) */
#define LIMIT_SBD_UPLOAD         (1024ull * 1024 * 1024) /* one uploaded file (--max-upload) */
#define LIMIT_SBD_REQUEST_JSON   (1u * 1024 * 1024)      /* a JSON request body (run, start) */
#define LIMIT_SBD_STDIN          (8u * 1024 * 1024)      /* stdin bytes given inline to run */
#define LIMIT_SBD_OUTPUT         (16u * 1024 * 1024)     /* buffered stdout (and stderr) of run */
#define LIMIT_SBD_PROCS          64                      /* concurrent processes (--max-procs) */
#define LIMIT_SBD_CHILDREN_LIST  (256u * 1024)           /* a task's /proc children file read */
#define LIMIT_SBD_ORPHANS_SEEN   1024                    /* children counted per /v1/activity */
#define LIMIT_SBD_ARGS           4096                    /* argv entries + env entries */
#define LIMIT_SBD_TIMEOUT_S      300                     /* default run timeout (seconds) */
#define LIMIT_SBD_MAX_TIMEOUT_S  (24 * 3600)             /* largest accepted timeout */
#define LIMIT_SBD_DRAIN          (2 * USEC_PER_SEC)      /* output drain after the exit (REST) */
#define LIMIT_SBD_KILL_GRACE     (2 * USEC_PER_SEC)      /* SIGTERM -> SIGKILL at shutdown */
#define LIMIT_SBD_CHUNK          (64u * 1024)            /* one output read / stream event */
#define LIMIT_SBD_NDJSON_QUEUE   (1u * 1024 * 1024)      /* NDJSON lines waiting for a drain */
#define LIMIT_SBD_INLINE_FILE    (1u * 1024 * 1024)      /* files sent with Content-Length */
#define LIMIT_SBD_LISTING        10000                   /* entries in one directory listing */
#define LIMIT_SBD_MULTIPART_HEAD (16u * 1024)            /* headers of one multipart part */
#define LIMIT_SBD_WS_MESSAGE     (1u * 1024 * 1024)      /* one WebSocket message */
#define LIMIT_SBD_WS_STDIN_STALL (30 * USEC_PER_SEC)     /* held stdin, the process not reading */
#define LIMIT_SBD_WEBSOCKETS     128                     /* open process WebSockets */
#define LIMIT_SBD_WS_FIRST       (30 * USEC_PER_SEC)     /* the process request's arrival */
#define LIMIT_SBD_TOKEN          4096                    /* bearer token file */
#define LIMIT_SBD_OPEN_RETRIES   16                      /* openat2 EAGAIN retries */

/* code contexts (kernel.c) */
#define LIMIT_SBD_CONTEXTS     8                   /* contexts at once (--max-contexts) */
#define LIMIT_SBD_CODE_OUTPUT  (16u * 1024 * 1024) /* one execution (--max-code-output) */
#define LIMIT_SBD_KERNEL_LINE  (32u * 1024 * 1024) /* one driver event line */
#define LIMIT_SBD_KERNEL_GRACE (3 * USEC_PER_SEC)  /* timeout interrupt -> restart */
#define LIMIT_SBD_KERNEL_KEEPALIVE \
    (15 * USEC_PER_SEC) /* silence before a keepalive (--code-keepalive) */
/* a run's answer or a process stream: silence before a keepalive (--process-keepalive) */
#define LIMIT_SBD_PROC_KEEPALIVE (15 * USEC_PER_SEC)

/* gRPC front (grpc.c) */
#define LIMIT_SBD_GRPC_MESSAGE     (4u * 1024 * 1024) /* one message, either way (grpc's default) */
#define LIMIT_SBD_GRPC_EXEC_OUT    (16u * 1024 * 1024) /* Execute's stdout + stderr, one answer */
#define LIMIT_SBD_GRPC_REPLY       (LIMIT_SBD_GRPC_EXEC_OUT + 64) /* a unary answer */
#define LIMIT_SBD_GRPC_START_DRAIN (5 * USEC_PER_SEC)   /* Start's output drain (upstream's) */
#define LIMIT_SBD_GRPC_EXEC_DRAIN  (10 * USEC_PER_SEC)  /* Execute's (upstream's WaitDelay) */
#define LIMIT_SBD_GRPC_STREAMS     128                  /* concurrent calls per connection */
#define LIMIT_SBD_GRPC_CONNS       256                  /* open connections */
#define LIMIT_SBD_GRPC_CONN_REQ    (16u * 1024 * 1024)  /* request bodies per connection */
#define LIMIT_SBD_GRPC_CONN_OUT    (32u * 1024 * 1024)  /* unsent responses: new calls refused */
#define LIMIT_SBD_GRPC_ALL_OUT     (128u * 1024 * 1024) /* ... of all ($SANDBOXD_GRPC_MAX_UNSENT) */
#define LIMIT_SBD_GRPC_QUEUE       (128u * 1024)      /* a call's queue; its process pauses above */
#define LIMIT_SBD_GRPC_BACKLOG     (256u * 1024)      /* unwritten socket bytes per connection */
#define LIMIT_SBD_GRPC_WINDOW      (1u * 1024 * 1024) /* HTTP/2 receive window per stream */
#define LIMIT_SBD_GRPC_HEADERS     (16u * 1024)       /* request header list */
#define LIMIT_SBD_GRPC_ACKS        64                 /* queued PING/SETTINGS acknowledgements */
#define LIMIT_SBD_GRPC_RESETS      1000               /* started calls reset, at once (grpc.c) */
#define LIMIT_SBD_GRPC_RESET_HZ    33                 /* then a second */

/* background processes (api_bg.c) */
#define LIMIT_SBD_BG_PROCS  32 /* table entries, running + exited (--max-bg-procs) */
#define LIMIT_SBD_BG_OUTPUT (1u * 1024 * 1024) /* output ring of one (--bg-output-buffer) */

/* late-bound configuration (config_env.c) */
#define LIMIT_SBD_CONFIG_ENV_VARS  1024           /* variables in one delivery */
#define LIMIT_SBD_CONFIG_ENV_BYTES (1024u * 1024) /* body of one delivery */
#define LIMIT_SBD_CONFIG_ENV_NAME  256            /* one variable name */

/* batch writes and file watches (fsreq.c, watch.c) */
#define LIMIT_SBD_BATCH_FILES       1000  /* files in one batch write */
#define LIMIT_SBD_WATCH_STREAMS     16    /* concurrent watch streams (per process) */
#define LIMIT_SBD_WATCH_QUEUE       65536 /* queued events of one watch stream (default) */
#define LIMIT_SBD_WATCH_QUEUE_MIN   16    /* smallest queue a client may ask for */
#define LIMIT_SBD_WATCHES           8192  /* inotify watches (directories) of one stream */
#define LIMIT_SBD_WATCH_DEPTH       64    /* directory depth of a recursive watch */
#define LIMIT_SBD_WATCH_FDS         32768 /* held directory fds, all streams (<= NOFILE/2) */
#define LIMIT_SBD_WATCH_QUEUE_BYTES (16u * 1024 * 1024) /* queued event bytes of a stream */

/* kubectl-sandbox */
#define LIMIT_CLI_MANIFEST  (8u * 1024 * 1024)  /* a -f file */
#define LIMIT_CLI_SBD_JSON  (16u * 1024 * 1024) /* a buffered sandboxd JSON response */
#define LIMIT_CLI_SBD_LINE  (4u * 1024 * 1024)  /* one NDJSON line of a process stream */
#define LIMIT_CLI_SBD_ERROR (64u * 1024)        /* an error body kept for the message */
#define LIMIT_SBD_CALL_STALL \
    (60 * USEC_PER_SEC) /* a buffered sandboxd call silent this long fails */
#define LIMIT_CLI_SBD_CONNECT (10 * USEC_PER_SEC)     /* TCP+TLS connect to sandboxd */
#define LIMIT_CLI_SBD_CONTROL (5 * USEC_PER_SEC)      /* exec's signal, resize, stdin close */
#define LIMIT_CLI_STDIN_CHUNK (64u * 1024)            /* one stdin POST of exec -i */
#define LIMIT_CLI_CP_DEPTH    64                      /* directory nesting copied by cp */
#define LIMIT_CLI_CP_ENTRIES  100000                  /* files copied by one cp */
#define LIMIT_CLI_WAIT        (5 * 60 * USEC_PER_SEC) /* default --timeout of waits */
#define LIMIT_CLI_CODE        (8u * 1024 * 1024)      /* the code sent */
#define LIMIT_CLI_CODE_LINE   (40u * 1024 * 1024)     /* one event (an image is one line) */
#define LIMIT_CLI_FS_PATH     (16u * 1024)            /* a request path of stat/mkdir/watch */

/* TLS front and secure metrics (src/tls) */
#define LIMIT_METRICS_AUTH_TTL_S      30
#define LIMIT_METRICS_AUTH_INFLIGHT   8    /* reviews at once; more scrapes get 503 */
#define LIMIT_METRICS_AUTH_CACHE      256  /* cached verdicts; the cache is emptied when full */
#define LIMIT_TLS_CONNECTIONS         4096 /* bridged connections at once; more are closed */
#define LIMIT_TLS_METRICS_CONNECTIONS 1024 /* the same, of the HTTPS metrics listener (its own) */
#define LIMIT_TLS_HANDSHAKE_S         10   /* seconds for a client to finish its handshake (all) */
#define LIMIT_TLS_WRITE_STALL         (60 * USEC_PER_SEC) /* bytes for a client it does not read */
#define LIMIT_TLS_PEER_NAME           256 /* bytes of a client certificate's CN and of each O */
#define LIMIT_TLS_PEER_GROUPS         16  /* O values (groups) of a client certificate */
