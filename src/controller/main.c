/* SPDX-License-Identifier: Apache-2.0 */
/* agent-sandbox-controller: flags, signals, and the manager's lifecycle. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/extensions.h"
#include "api/sandbox.h"
#include "as_version.h"
#include "common/flag.h"
#include "common/limits.h"
#include "common/log.h"
#include "controller/cascade.h"
#include "controller/manager.h"
#include "controller/ns_source.h"
#include "controller/workloop.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/lease.h"

struct flags {
    const char *kubeconfig;
    bool leader_elect;
    const char *lease_ns, *lease_id;
    usec_t lease_duration, renew_deadline, retry_period; /* 0 = kube/lease.h defaults */
    usec_t shutdown_timeout; /* --graceful-shutdown-timeout; 0 = wait for ever */
    const char *metrics_addr, *health_addr;
    bool metrics_secure; /* --metrics-secure: HTTPS + TokenReview/SubjectAccessReview */
    const char *metrics_cert_dir, *metrics_cert_name, *metrics_key_name;
    double qps;
    int64_t burst, workers;
    const char *ns, *cluster_domain;
    bool cache_label_selectors;
    int64_t api_conns;  /* --kube-api-connections; 0 = one per request in flight */
    usec_t worker_idle; /* --worker-idle-exit; USEC_INFINITY: workers stay */
    bool compact_cache;
    bool compact_auto;    /* --compact-cache=auto: compact past CTRL_COMPACT_ABOVE objects */
    usec_t status_window; /* CTRL_STATUS_WINDOW_OFF for 0 */
    bool pod_name_always;
    usec_t pod_meta_hold;   /* CTRL_POD_META_HOLD_OFF for 0 */
    usec_t dependent_delay; /* --dependent-deletion-delay: CASCADE_NOW for 0, CASCADE_OFF */
    bool extensions, eviction;
    struct ext_opts ext;
    int64_t claim_workers, pool_workers, template_workers, max_replicas, max_batch;
    int64_t create_parallel, adopt_inflight;
};

/* The signal handler's view: the manager while it runs (cleared before it stops and is
 * freed), and whether a stop was asked for before there was one to tell. */
static _Atomic(struct ctrl_manager *) g_manager;
static volatile sig_atomic_t g_stop_asked;

static const char usage_text[] =
    "Usage: agent-sandbox-controller [flags]\n"
    "Reconciles " SB_API_VERSION " Sandboxes into a Pod, an optional headless\n"
    "Service and PersistentVolumeClaims, and (with --extensions) SandboxTemplates,\n"
    "SandboxWarmPools and SandboxClaims.\n\n"
    "Flags (--name=value or --name value; a bare boolean flag means true):\n"
    "  --kubeconfig PATH                   kubeconfig file (default: $KUBECONFIG,\n"
    "                                      ~/.kube/config, else in-cluster config)\n"
    "  --leader-elect[=BOOL]               leader election on a Lease (default true)\n"
    "  --leader-election-namespace NS      Lease namespace (default: the client's)\n"
    "  --leader-election-id NAME           Lease name (default " CTRL_DEFAULT_LEASE_ID ")\n"
    "  --leader-elect-lease-duration D     how long candidates wait before taking over a\n"
    "                                      Lease that is not renewed; whole seconds (default 15s)\n"
    "  --leader-elect-renew-deadline D     the leader stops (and exits) when it could not\n"
    "                                      renew for this long; < lease duration (default 10s)\n"
    "  --leader-elect-retry-period D       between attempts to acquire or renew;\n"
    "                                      < renew deadline (default 2s)\n"
    "  --graceful-shutdown-timeout D       after SIGTERM, how long running reconciles and\n"
    "                                      requests may take before the process exits\n"
    "                                      anyway; 0 waits for ever (default 30s)\n"
    "  --metrics-bind-address ADDR         /metrics address, \"0\" disables\n"
    "                                      (default 127.0.0.1:8080)\n"
    "  --metrics-secure[=BOOL]             serve /metrics over HTTPS to bearer tokens that pass\n"
    "                                      a TokenReview and a SubjectAccessReview (get on\n"
    "                                      the non-resource URL /metrics); default false\n"
    "  --metrics-cert-path DIR             its certificate directory (default: self-signed)\n"
    "  --metrics-cert-name NAME            certificate file in DIR (default tls.crt)\n"
    "  --metrics-cert-key NAME             key file in DIR (default tls.key)\n"
    "  --health-probe-bind-address ADDR    /healthz and /readyz address, \"0\" disables\n"
    "                                      (default 127.0.0.1:8081)\n"
    "  --kube-api-qps QPS                  client-side rate limit; <= 0 disables (default -1)\n"
    "  --kube-api-burst N                  client-side burst, > 0 (default 10)\n"
    "  --kube-api-connections N            HTTP/2 connections that every worker's\n"
    "                                      requests share as streams,\n"
    "                                      0-16; watches keep their own; 0: a connection\n"
    "                                      per request in flight (default 2)\n"
    "  --sandbox-concurrent-workers N      Sandbox reconcile workers, > 0 (default 100)\n"
    "  --worker-idle-exit D                workers beyond 4 per controller start when keys\n"
    "                                      wait and end after D without work; 0: every\n"
    "                                      worker starts at once and stays (default 30s)\n"
    "  --namespace NS[,NS...]              watch only these namespaces, each with its own\n"
    "                                      list and watch (default: all)\n"
    "  --cluster-domain DOMAIN             for status.serviceFQDN (default cluster.local)\n"
    "  --cache-label-selectors[=BOOL]      cache only Pods/Services carrying the\n"
    "                                      sandbox-name-hash label (default false)\n"
    "  --compact-cache[=BOOL|auto]         keep cached Sandboxes, Pods, Services and PVCs\n"
    "                                      as compressed JSON text, parsed on each read:\n"
    "                                      a hundredth of the memory for more CPU; auto: a cache\n"
    "                                      switches once it holds more than 1000 objects\n"
    "                                      (default auto)\n"
    "  --sandbox-status-coalesce-window D  a status change of details only (PodScheduled,\n"
    "                                      an IP, messages) of a Sandbox that is not Ready\n"
    "                                      waits up to D for the next change a user sees,\n"
    "                                      normally Ready; 0 writes every change, max 10s\n"
    "                                      (default 1s)\n"
    "  --always-annotate-pod-name[=BOOL]   set " SB_ANN_POD_NAME " also when the Pod\n"
    "                                      is named after the Sandbox, with a patch after\n"
    "                                      the create (upstream; default false)\n"
    "  --keep-managed-fields[=BOOL]        the warm adoption's PATCH of a Sandbox and the\n"
    "                                      metadata PATCH of a Pod leave its managedFields\n"
    "                                      (upstream); default false: they clear them, and\n"
    "                                      later writes of the object skip field tracking\n"
    "  --pod-metadata-hold D               while claims are queued or reconciled, the Pod\n"
    "                                      metadata PATCH after a warm adoption (the pool's\n"
    "                                      label and safe-to-evict go) waits, at most D;\n"
    "                                      0 patches at once, max 30s (default 5s)\n"
    "  --dependent-deletion-delay D|off    after a SandboxClaim, SandboxWarmPool or Sandbox\n"
    "                                      is deleted, its Sandboxes (or its Pod and Service)\n"
    "                                      are left to the garbage collector for D; then the\n"
    "                                      controller deletes those still there, each only if\n"
    "                                      the deleted owner was its one owner and it has not\n"
    "                                      changed since (UID and resourceVersion\n"
    "                                      preconditions); owners deleted while no leader\n"
    "                                      ran are found at the start and confirmed gone by\n"
    "                                      a read; 0 at once, max 1h, off: never\n"
    "                                      (default 5s)\n"
    "  --extensions[=BOOL]                 run the SandboxTemplate, SandboxWarmPool and\n"
    "                                      SandboxClaim controllers (default true)\n"
    "  --sandbox-claim-concurrent-workers N        claim workers (default 300)\n"
    "  --claim-adoption-concurrency N      warm adoptions in flight at once, admitted in\n"
    "                                      the order the claims came; 0 = no limit\n"
    "                                      (default 16)\n"
    "  --sandbox-warm-pool-concurrent-workers N    warm pool workers (default 1)\n"
    "  --sandbox-template-concurrent-workers N     template workers (default 1)\n"
    "  --max-pool-replicas N               upper bound on a pool's replicas (default 1000)\n"
    "  --sandbox-warm-pool-max-batch-size N  creates/deletes per pool pass (default 300)\n"
    "  --sandbox-warm-pool-create-parallelism N  pool member creates and deletes in flight\n"
    "                                      per pool pass, 1-32 (default 1: during a claim\n"
    "                                      burst the refill competes with the claims for the\n"
    "                                      API server)\n"
    "  --sandbox-warm-pool-max-refill-rate R  creates per second per pool, 0 = unpaced\n"
    "                                      (default 0; annotation\n"
    "                                      " EXT_ANN_REFILL_RATE " overrides)\n"
    "  --sandbox-warm-pool-readiness-grace-period D  non-Ready member grace (default 5m)\n"
    "  --sandbox-warm-pool-coalesce-window D  a pool's pass for its members' changes waits\n"
    "                                      up to D, so that changes arriving together make\n"
    "                                      one pass over the members; 0: a pass per change\n"
    "                                      (default 100ms, max 10s)\n"
    "  --claim-timeout D                   a claim not Ready by then fails with ClaimTimeout;\n"
    "                                      0 disables (default 10m; annotation\n"
    "                                      " EXT_ANN_CLAIM_TIMEOUT ")\n"
    "  --enable-warm-pool-eviction[=BOOL]  safe-to-evict on warm pods (default true)\n"
    "  --disable-claim-events[=BOOL]       no Events from the claim controller\n"
    "  --disable-claim-observability-annotations[=BOOL]  no first-observed/first-ready\n"
    "                                      annotation write per claim\n"
    "  --side-write-hold D                 Events and first-ready annotations wait while claims\n"
    "                                      are queued or reconciled, each at most D after it\n"
    "                                      was decided; 0 writes them at once (default 5s)\n"
    "  --warm-adoption-edits-pod-template[=BOOL]  adoption removes the pool's safe-to-evict\n"
    "                                      from the Sandbox's pod template (upstream); default\n"
    "                                      false: it stays there and is kept off the Pod\n"
    "  --allowed-label-domains LIST        label domains claims may add, comma-separated\n"
    "                                      (default: /etc/sandbox-config/allowed-label-domains,\n"
    "                                      else sandbox.users.io)\n"
    "  --late-binding-timeout D            one late-bound env delivery to sandboxd (default 3s)\n"
    "  --late-binding-allow-loopback[=BOOL]  TESTS ONLY: deliver to loopback pod IPs\n"
    "  Durations: Go syntax, numbers with ns, us, ms, s, m or h (e.g. 500ms, 5m, 1m30s).\n"
    "  --log-level LEVEL                   error, warn, info, debug, trace (default info)\n"
    "  --log-format FORMAT                 text (logfmt, default) or json (JSON lines)\n"
    "  --version                           print the version and exit\n"
    "  --help                              print this help and exit\n";

enum {
    F_KUBECONFIG = FLAG_OWN,
    F_LEADER_ELECT,
    F_LEASE_NS,
    F_LEASE_ID,
    F_LEASE_DURATION,
    F_SHUTDOWN_TIMEOUT,
    F_RENEW_DEADLINE,
    F_RETRY_PERIOD,
    F_METRICS,
    F_METRICS_SECURE,
    F_METRICS_CERT_PATH,
    F_METRICS_CERT_NAME,
    F_METRICS_CERT_KEY,
    F_HEALTH,
    F_QPS,
    F_BURST,
    F_WORKERS,
    F_NAMESPACE,
    F_DOMAIN,
    F_CACHE_SEL,
    F_COMPACT_CACHE,
    F_STATUS_WINDOW,
    F_POD_NAME_ALWAYS,
    F_KEEP_MANAGED_FIELDS,
    F_POD_META_HOLD,
    F_DEPENDENT_DELAY,
    F_EXTENSIONS,
    F_CLAIM_WORKERS,
    F_POOL_WORKERS,
    F_TPL_WORKERS,
    F_MAX_REPLICAS,
    F_MAX_BATCH,
    F_REFILL_RATE,
    F_GRACE,
    F_POOL_COALESCE,
    F_CLAIM_TIMEOUT,
    F_SIDE_HOLD,
    F_ADOPT_INFLIGHT,
    F_EVICTION,
    F_NO_CLAIM_EVENTS,
    F_NO_CLAIM_ANN,
    F_ADOPT_EDIT_TEMPLATE,
    F_CREATE_PARALLEL,
    F_LABEL_DOMAINS,
    F_LB_LOOPBACK,
    F_LB_TIMEOUT,
    F_API_CONNS,
    F_WORKER_IDLE,
};

static const struct option long_opts[] = {
    {"kubeconfig", required_argument, NULL, F_KUBECONFIG},
    {"leader-elect", optional_argument, NULL, F_LEADER_ELECT},
    {"metrics-secure", optional_argument, NULL, F_METRICS_SECURE},
    {"metrics-cert-path", required_argument, NULL, F_METRICS_CERT_PATH},
    {"metrics-cert-name", required_argument, NULL, F_METRICS_CERT_NAME},
    {"metrics-cert-key", required_argument, NULL, F_METRICS_CERT_KEY},
    {"leader-election-namespace", required_argument, NULL, F_LEASE_NS},
    {"leader-election-id", required_argument, NULL, F_LEASE_ID},
    {"leader-elect-lease-duration", required_argument, NULL, F_LEASE_DURATION},
    {"graceful-shutdown-timeout", required_argument, NULL, F_SHUTDOWN_TIMEOUT},
    {"leader-elect-renew-deadline", required_argument, NULL, F_RENEW_DEADLINE},
    {"leader-elect-retry-period", required_argument, NULL, F_RETRY_PERIOD},
    {"metrics-bind-address", required_argument, NULL, F_METRICS},
    {"health-probe-bind-address", required_argument, NULL, F_HEALTH},
    {"kube-api-qps", required_argument, NULL, F_QPS},
    {"kube-api-burst", required_argument, NULL, F_BURST},
    {"kube-api-connections", required_argument, NULL, F_API_CONNS},
    {"worker-idle-exit", required_argument, NULL, F_WORKER_IDLE},
    {"sandbox-concurrent-workers", required_argument, NULL, F_WORKERS},
    {"namespace", required_argument, NULL, F_NAMESPACE},
    {"cluster-domain", required_argument, NULL, F_DOMAIN},
    {"cache-label-selectors", optional_argument, NULL, F_CACHE_SEL},
    {"compact-cache", optional_argument, NULL, F_COMPACT_CACHE},
    {"sandbox-status-coalesce-window", required_argument, NULL, F_STATUS_WINDOW},
    {"always-annotate-pod-name", optional_argument, NULL, F_POD_NAME_ALWAYS},
    {"keep-managed-fields", optional_argument, NULL, F_KEEP_MANAGED_FIELDS},
    {"pod-metadata-hold", required_argument, NULL, F_POD_META_HOLD},
    {"dependent-deletion-delay", required_argument, NULL, F_DEPENDENT_DELAY},
    {"extensions", optional_argument, NULL, F_EXTENSIONS},
    {"sandbox-claim-concurrent-workers", required_argument, NULL, F_CLAIM_WORKERS},
    {"sandbox-warm-pool-concurrent-workers", required_argument, NULL, F_POOL_WORKERS},
    {"sandbox-template-concurrent-workers", required_argument, NULL, F_TPL_WORKERS},
    {"max-pool-replicas", required_argument, NULL, F_MAX_REPLICAS},
    {"sandbox-warm-pool-max-batch-size", required_argument, NULL, F_MAX_BATCH},
    {"sandbox-warm-pool-max-refill-rate", required_argument, NULL, F_REFILL_RATE},
    {"sandbox-warm-pool-readiness-grace-period", required_argument, NULL, F_GRACE},
    {"sandbox-warm-pool-coalesce-window", required_argument, NULL, F_POOL_COALESCE},
    {"claim-timeout", required_argument, NULL, F_CLAIM_TIMEOUT},
    {"side-write-hold", required_argument, NULL, F_SIDE_HOLD},
    {"claim-adoption-concurrency", required_argument, NULL, F_ADOPT_INFLIGHT},
    {"enable-warm-pool-eviction", optional_argument, NULL, F_EVICTION},
    {"disable-claim-events", optional_argument, NULL, F_NO_CLAIM_EVENTS},
    {"disable-claim-observability-annotations", optional_argument, NULL, F_NO_CLAIM_ANN},
    {"warm-adoption-edits-pod-template", optional_argument, NULL, F_ADOPT_EDIT_TEMPLATE},
    {"sandbox-warm-pool-create-parallelism", required_argument, NULL, F_CREATE_PARALLEL},
    {"allowed-label-domains", required_argument, NULL, F_LABEL_DOMAINS},
    {"late-binding-allow-loopback", optional_argument, NULL, F_LB_LOOPBACK},
    {"late-binding-timeout", required_argument, NULL, F_LB_TIMEOUT},
    FLAG_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

static int parse_double(const char *v, double *ret)
{
    char *end;
    double d;
    errno = 0;
    d = strtod(v, &end);
    if (errno || end == v || *end)
        return -EINVAL;
    *ret = d;
    return 0;
}

/* A count of workers, replicas or objects: 1..100000. */
static int parse_positive(const char *v, int64_t *ret)
{
    return flag_int(v, 1, 100000, ret);
}

/* A duration in Go syntax (common/duration.h), 0 included. */
static int parse_duration(const char *v, usec_t *ret)
{
    return flag_duration(v, 0, LIMIT_CTRL_DURATION, ret);
}

/* A duration > 0: leader-election timings, grace periods, timeouts. */
static int parse_nonzero_duration(const char *v, usec_t *ret)
{
    return flag_duration(v, 1, LIMIT_CTRL_DURATION, ret);
}

/* Extension flags. Returns 0, a negative errno, or 1 when c is not one of them. */
static int apply_ext_flag(struct flags *f, int c, const char *v)
{
    bool b = false;
    int r;
    switch (c) {
    case F_EXTENSIONS:
        return flag_bool(v, &f->extensions);
    case F_CLAIM_WORKERS:
        return parse_positive(v, &f->claim_workers);
    case F_ADOPT_INFLIGHT:
        return flag_int(v, 0, 100000, &f->adopt_inflight);
    case F_POOL_WORKERS:
        return parse_positive(v, &f->pool_workers);
    case F_TPL_WORKERS:
        return parse_positive(v, &f->template_workers);
    case F_MAX_REPLICAS:
        return parse_positive(v, &f->max_replicas);
    case F_MAX_BATCH:
        return parse_positive(v, &f->max_batch);
    case F_REFILL_RATE:
        r = parse_double(v, &f->ext.refill_rate);
        return r < 0 || !(f->ext.refill_rate >= 0 && f->ext.refill_rate < 1e6) ? -EINVAL : 0;
    case F_GRACE:
        return parse_nonzero_duration(v, &f->ext.ready_grace);
    case F_POOL_COALESCE:
        r = flag_duration(v, 0, EXT_MAX_POOL_COALESCE, &f->ext.pool_coalesce);
        if (r >= 0 && f->ext.pool_coalesce == 0)
            f->ext.pool_coalesce = USEC_INFINITY;
        return r;
    case F_CLAIM_TIMEOUT:
        r = parse_duration(v, &f->ext.claim_timeout);
        if (r >= 0 && f->ext.claim_timeout == 0)
            f->ext.claim_timeout = USEC_INFINITY;
        return r;
    case F_SIDE_HOLD:
        r = flag_duration(v, 0, CTRL_MAX_SIDE_HOLD, &f->ext.side_hold);
        if (r >= 0 && f->ext.side_hold == 0)
            f->ext.side_hold = USEC_INFINITY;
        return r;
    case F_EVICTION:
        return flag_bool(v, &f->eviction);
    case F_NO_CLAIM_EVENTS:
        r = flag_bool(v, &b);
        f->ext.no_claim_events = b;
        return r;
    case F_NO_CLAIM_ANN:
        r = flag_bool(v, &b);
        f->ext.no_claim_annotations = b;
        return r;
    case F_CREATE_PARALLEL:
        return flag_int(v, 1, LIMIT_EXT_CREATE_PARALLEL, &f->create_parallel);
    case F_ADOPT_EDIT_TEMPLATE:
        r = flag_bool(v, &b);
        f->ext.adopt_edit_template = b;
        return r;
    case F_LABEL_DOMAINS:
        f->ext.label_domains = v;
        return 0;
    case F_LB_LOOPBACK:
        r = flag_bool(v, &b);
        f->ext.latebind_loopback = b;
        return r;
    case F_LB_TIMEOUT:
        return parse_nonzero_duration(v, &f->ext.latebind_timeout);
    default:
        return 1;
    }
}

/* --sandbox-status-coalesce-window: a duration up to CTRL_MAX_STATUS_WINDOW; 0 = off. */
static int parse_status_window(const char *v, usec_t *ret)
{
    usec_t d;
    int r = flag_duration(v, 0, CTRL_MAX_STATUS_WINDOW, &d);
    if (r < 0)
        return r;
    *ret = d ? d : CTRL_STATUS_WINDOW_OFF;
    return 0;
}

/* --dependent-deletion-delay: "off", or a duration up to CASCADE_MAX_DELAY (0: at once). */
static int parse_dependent_delay(const char *v, usec_t *ret)
{
    usec_t d;
    int r;
    if (v && strcmp(v, "off") == 0) {
        *ret = CASCADE_OFF;
        return 0;
    }
    r = flag_duration(v, 0, CASCADE_MAX_DELAY, &d);
    if (r < 0)
        return r;
    *ret = d ? d : CASCADE_NOW;
    return 0;
}

/* A --namespace list: DNS labels, no duplicates (controller/ns_source.h). */
static int check_namespaces(const char *v)
{
    char **nsv;
    size_t n;
    int r = ctrl_ns_list_parse(v, &nsv, &n);
    if (r >= 0)
        ctrl_ns_list_free(nsv, n);
    return r;
}

/* Applies one flag (flag_apply_fn; ctx is the struct flags). Returns 0 or -errno. */
static int apply_flag(void *ctx, int c, const char *v)
{
    struct flags *f = ctx;
    int r = apply_ext_flag(f, c, v);
    if (r <= 0)
        return r;
    switch (c) {
    case F_KUBECONFIG:
        f->kubeconfig = v;
        return 0;
    case F_LEADER_ELECT:
        return flag_bool(v, &f->leader_elect);
    case F_LEASE_NS:
        f->lease_ns = v;
        return 0;
    case F_LEASE_ID:
        f->lease_id = v;
        return 0;
    case F_LEASE_DURATION:
        return parse_nonzero_duration(v, &f->lease_duration);
    case F_SHUTDOWN_TIMEOUT:
        return parse_duration(v, &f->shutdown_timeout);
    case F_RENEW_DEADLINE:
        return parse_nonzero_duration(v, &f->renew_deadline);
    case F_RETRY_PERIOD:
        return parse_nonzero_duration(v, &f->retry_period);
    case F_METRICS:
        f->metrics_addr = v;
        return 0;
    case F_METRICS_SECURE:
        return flag_bool(v, &f->metrics_secure);
    case F_METRICS_CERT_PATH:
        f->metrics_cert_dir = v;
        return 0;
    case F_METRICS_CERT_NAME:
        f->metrics_cert_name = v;
        return 0;
    case F_METRICS_CERT_KEY:
        f->metrics_key_name = v;
        return 0;
    case F_HEALTH:
        f->health_addr = v;
        return 0;
    case F_QPS:
        return parse_double(v, &f->qps);
    case F_BURST:
        return parse_positive(v, &f->burst);
    case F_WORKERS:
        return parse_positive(v, &f->workers);
    case F_NAMESPACE:
        f->ns = v;
        return check_namespaces(v);
    case F_DOMAIN:
        f->cluster_domain = v;
        return 0;
    case F_CACHE_SEL:
        return flag_bool(v, &f->cache_label_selectors);
    case F_API_CONNS:
        return flag_int(v, 0, LIMIT_KUBE_MUX_LANES_MAX, &f->api_conns);
    case F_WORKER_IDLE:
        r = flag_duration(v, 0, CTRL_MAX_WORKER_IDLE, &f->worker_idle);
        if (r >= 0 && f->worker_idle == 0)
            f->worker_idle = USEC_INFINITY;
        return r;
    case F_COMPACT_CACHE:
        f->compact_auto = v && strcmp(v, "auto") == 0;
        f->compact_cache = false;
        return f->compact_auto ? 0 : flag_bool(v, &f->compact_cache);
    case F_STATUS_WINDOW:
        return parse_status_window(v, &f->status_window);
    case F_POD_NAME_ALWAYS:
        return flag_bool(v, &f->pod_name_always);
    case F_KEEP_MANAGED_FIELDS:
        return flag_bool(v, &f->ext.keep_managed_fields);
    case F_POD_META_HOLD:
        r = flag_duration(v, 0, CTRL_MAX_POD_META_HOLD, &f->pod_meta_hold);
        if (r >= 0 && f->pod_meta_hold == 0)
            f->pod_meta_hold = CTRL_POD_META_HOLD_OFF;
        return r;
    case F_DEPENDENT_DELAY:
        return parse_dependent_delay(v, &f->dependent_delay);
    default:
        return -EINVAL;
    }
}

static double secs(usec_t v, usec_t dflt)
{
    return (double)(v ? v : dflt) / (double)USEC_PER_SEC;
}

/* The three leader-election timings together (as controller-runtime requires). */
static int check_lease_flags(const struct flags *f)
{
    const char *why = NULL;
    if (lease_check_timings(f->lease_duration, f->renew_deadline, f->retry_period, &why) == 0)
        return 0;
    fprintf(stderr,
            "agent-sandbox-controller: bad leader election timings: %s "
            "(--leader-elect-lease-duration=%gs --leader-elect-renew-deadline=%gs "
            "--leader-elect-retry-period=%gs)\n",
            why, secs(f->lease_duration, LEASE_DEFAULT_DURATION),
            secs(f->renew_deadline, LEASE_DEFAULT_RENEW),
            secs(f->retry_period, LEASE_DEFAULT_RETRY));
    return -EINVAL;
}

/* Returns 0 to run, 1 when --help or --version printed, or -EINVAL (reported). */
static int parse_flags(int argc, char **argv, struct flags *f)
{
    const struct flag_spec spec = {.prog = "agent-sandbox-controller",
                                   .version = AS_VERSION,
                                   .usage = usage_text,
                                   .opts = long_opts,
                                   .apply = apply_flag,
                                   .ctx = f};
    int r = flag_parse(&spec, argc, argv);
    return r != 0 ? r : check_lease_flags(f);
}

static void on_signal(int sig)
{
    struct ctrl_manager *m = atomic_load(&g_manager);
    (void)sig;
    g_stop_asked = 1;
    if (m)
        ctrl_manager_request_stop(m);
}

static int install_signals(void)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    signal(SIGPIPE, SIG_IGN);
    if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGINT, &sa, NULL) < 0)
        return -errno;
    return 0;
}

/* The stop watchdog: a stop that outlives the graceful shutdown timeout (requests stuck
 * behind an overloaded API server) ends the process, as controller-runtime does. */
static void *stop_watchdog(void *arg)
{
    usec_t t = *(const usec_t *)arg;
    struct timespec ts = {.tv_sec = (time_t)(t / USEC_PER_SEC),
                          .tv_nsec = (long)(t % USEC_PER_SEC) * 1000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    log_error("graceful shutdown timed out, exiting\ttimeout_ms=%llu",
              (unsigned long long)(t / USEC_PER_MSEC));
    log_flush();
    _exit(1);
    return NULL;
}

/* Starts the watchdog for timeout *t (borrowed; must outlive the process) unless 0. */
static void arm_stop_watchdog(const usec_t *t)
{
    pthread_t th;
    pthread_attr_t a;
    if (*t == 0 || pthread_attr_init(&a) != 0)
        return;
    (void)pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &a, stop_watchdog, (void *)t) != 0)
        log_warn("cannot start the shutdown watchdog; the stop is unbounded");
    (void)pthread_attr_destroy(&a);
}

static int make_client(const struct flags *f, struct kube_client **ret)
{
    struct kube_config_opts co = {.kubeconfig = f->kubeconfig};
    struct kube_client_opts o = {.qps = f->qps > 0 ? f->qps : 0,
                                 .burst = (int)f->burst,
                                 .no_mux = f->api_conns == 0,
                                 .mux_lanes = (int)f->api_conns,
                                 .user_agent = "agent-sandbox-controller/" AS_VERSION};
    struct kube_config *cfg;
    struct kube_err e;
    int r = kube_config_load(&co, &cfg, &e);
    if (r < 0)
        return log_error_errno(r, "cannot load the client configuration\tdetail=\"%s\"", e.message);
    r = kube_client_new(cfg, &o, ret);
    if (r < 0)
        return log_error_errno(r, "cannot create the API client");
    return 0;
}

static int run(const struct flags *f, struct kube_client *client)
{
    struct ctrl_manager *m = NULL;
    struct ctrl_opts o = {
        .client = client,
        .workers = (int)f->workers,
        .worker_idle = f->worker_idle,
        .ns = f->ns,
        .cache_label_selectors = f->cache_label_selectors,
        .compact_cache = f->compact_cache,
        .compact_above = f->compact_auto ? CTRL_COMPACT_ABOVE : 0,
        .status_window = f->status_window,
        .pod_name_annotation_always = f->pod_name_always,
        .pod_meta_hold = f->pod_meta_hold,
        .dependent_delay = f->dependent_delay,
        .cluster_domain = f->cluster_domain,
        .leader_elect = f->leader_elect,
        .lease_ns = f->lease_ns,
        .lease_name = f->lease_id,
        .lease_duration = f->lease_duration,
        .renew_deadline = f->renew_deadline,
        .retry_period = f->retry_period,
        .metrics_addr = f->metrics_addr,
        .metrics_secure = f->metrics_secure,
        .metrics_cert_dir = f->metrics_cert_dir,
        .metrics_cert_name = f->metrics_cert_name,
        .metrics_key_name = f->metrics_key_name,
        .health_addr = f->health_addr,
        .events = true,
        .extensions = f->extensions,
        .ext = f->ext,
    };
    int r;
    o.ext.claim_workers = (int)f->claim_workers;
    o.ext.adopt_inflight = (int)f->adopt_inflight;
    o.ext.worker_idle = f->worker_idle;
    o.ext.create_parallel = (int)f->create_parallel;
    o.ext.pool_workers = (int)f->pool_workers;
    o.ext.template_workers = (int)f->template_workers;
    o.ext.max_pool_replicas = (int)f->max_replicas;
    o.ext.max_batch = (int)f->max_batch;
    o.ext.no_eviction = !f->eviction;
    r = ctrl_manager_new(&o, &m);
    if (r < 0)
        return log_error_errno(r, "cannot create the manager");
    atomic_store(&g_manager, m);
    /* A SIGTERM while the client was being made (an exec plugin) stops it before it
     * starts: it neither takes the Lease nor begins work. */
    r = g_stop_asked ? 0 : ctrl_manager_start(m);
    if (r >= 0 && !g_stop_asked) {
        log_info("started\tversion=%s leader_elect=%s workers=%d", AS_VERSION,
                 f->leader_elect ? "true" : "false", o.workers);
        r = ctrl_manager_wait(m);
    }
    atomic_store(&g_manager, NULL); /* a signal from here on finds no manager to touch */
    arm_stop_watchdog(&f->shutdown_timeout);
    ctrl_manager_stop(m);
    ctrl_manager_free(m);
    return r;
}

int main(int argc, char **argv)
{
    struct flags f = {
        .leader_elect = true,
        .api_conns = LIMIT_KUBE_MUX_LANES,
        .worker_idle = WORKLOOP_IDLE_EXIT,
        .metrics_addr = "127.0.0.1:8080",
        .health_addr = "127.0.0.1:8081",
        .qps = -1,
        .burst = 10,
        .shutdown_timeout = 30 * USEC_PER_SEC,
        .workers = 100,
        .extensions = true,
        .eviction = true,
        .claim_workers = 300,
        .adopt_inflight = EXT_ADOPT_INFLIGHT,
        .create_parallel = 1,
        .pool_workers = 1,
        .template_workers = 1,
        .max_replicas = 1000,
        .max_batch = 300,
        .compact_auto = true,
    };
    struct kube_client *client = NULL;
    int r;
    log_set_component("controller");
    /* Hundreds of worker threads would each get a glibc arena (up to 8 per core), each
     * keeping its own free pages of the objects reconciles parse: with compact stores,
     * two arenas cut the resident size at 10,000 Sandboxes from 99 to 77 MiB
     * (docs/controller.md, Memory). MALLOC_ARENA_MAX in the environment overrides it. */
    if (!getenv("MALLOC_ARENA_MAX"))
        (void)mallopt(M_ARENA_MAX, 2);
    r = parse_flags(argc, argv, &f);
    if (r != 0)
        return r > 0 ? 0 : 2;
    if (install_signals() < 0 || make_client(&f, &client) < 0)
        return 1;
    r = run(&f, client);
    kube_client_free(client);
    log_info("stopped");
    return r < 0 ? 1 : 0;
}
