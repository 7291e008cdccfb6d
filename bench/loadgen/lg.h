/* SPDX-License-Identifier: Apache-2.0 */
/* as-loadgen: a load generator for agents.x-k8s.io v1beta1 that talks only to the
 * Kubernetes API. Shared declarations of its units. */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <sys/types.h>

#include "common/clock.h"
#include "kube/client.h"
#include "kube/informer.h"

/* ---- options -------------------------------------------------------------------------- */

#define LG_MAX_API_PIDS 4 /* kube-apiserver, etcd (and whatever else serves the API) */

struct lg_opts {
    const char *kubeconfig;
    const char *ns;       /* our namespace (created, deleted at the end unless keep) */
    const char *scenario; /* warm-burst, claim-probe, sustained, cold, probe, scale */
    const char *image;
    const char *prefix;   /* object name prefix */
    long count;           /* claims or sandboxes */
    long pool_size;       /* warm pool replicas; 0 = count */
    long pools;           /* pools (sustained) */
    double rate;          /* sustained arrivals per second */
    double seconds;       /* sustained duration */
    double dwell;         /* sustained: seconds a claim is held after Ready */
    double timeout;       /* seconds to wait for readiness */
    int threads;          /* concurrent creators */
    int connections;      /* API clients the creators are spread over */
    bool kubelet;         /* simulate the kubelet (API server without nodes) */
    bool kwok;            /* schedule pods on kwok nodes */
    bool keep;            /* keep the namespace */
    pid_t controller_pid; /* sample its RSS and CPU from /proc (0: none) */
    double settle;        /* seconds to let background writes finish before the last scrape */
    double ns_wait;       /* seconds to wait for the namespace to be gone at the end */
    long max_backlog;     /* sustained: stop arrivals past this many unready (0: rate*5) */
    pid_t api_pids[LG_MAX_API_PIDS]; /* API server processes whose CPU is measured */
    int n_api_pids;
    const char *records; /* --records: per-object times as TSV (NULL: none) */
};

/* ---- per-object records ----------------------------------------------------------------- */

struct lg_rec {
    usec_t create;  /* just before the POST */
    usec_t ack;     /* POST returned */
    usec_t ready;   /* first watch event with Ready=True */
    usec_t deleted; /* DELETE sent */
    bool failed;    /* POST failed */
    bool warm;      /* bound Sandbox was adopted from a pool (claims) */
};

struct lg_track {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct lg_rec *recs;
    size_t n;
    size_t ready; /* records with ready set */
    char prefix[64];
};

void lg_track_init(struct lg_track *t, const char *prefix, size_t n);
void lg_track_done(struct lg_track *t);
/** The record of an object name "<prefix>-<index>", or NULL. */
struct lg_rec *lg_track_rec(struct lg_track *t, const char *name);
/** Waits until ready >= want or the timeout; returns 0 or -ETIMEDOUT. */
int lg_track_wait(struct lg_track *t, size_t want, usec_t timeout);
/** Starts an informer on res in ns that stamps Ready on t's records. Returns new. */
int lg_track_watch(struct lg_track *t, struct kube_client *c, const struct kube_res *res,
                   const char *ns, struct kube_informer **ret);

/* ---- statistics ------------------------------------------------------------------------- */

/** Latency and throughput of the records in [from, to) that were created: a JSON object
 * (returns new) with count (created), ready, failed, min/mean/p50/p90/p95/p99/max (ms),
 * all_ready_ms, throughput (overall, steady, best_10s per second), samples_ms and ready_per_s
 * (timeline). */
json_t *lg_stats(const struct lg_track *t, size_t from, size_t to);
/** Appends the records in [from, to) to o->records (nothing when unset) as TSV: index,
 * then create, ack and ready in ms from the first create (-1 when unset). 0 or -errno. */
int lg_records_write(const struct lg_opts *o, const struct lg_track *t, size_t from, size_t to);

/* ---- objects and setup ---------------------------------------------------------------- */

int lg_ns_ensure(struct kube_client *c, const char *ns);
/** Deletes ns and waits up to wait for it to be gone (0: no wait). Returns the seconds it
 * took, 0 without a wait, -1 when it was still there. */
double lg_ns_delete(struct kube_client *c, const char *ns, usec_t wait);
int lg_template_create(struct kube_client *c, const struct lg_opts *o, const char *name);
int lg_pool_create(struct kube_client *c, const struct lg_opts *o, const char *name,
                   const char *tpl, long replicas);
/** Waits until pool name reports readyReplicas >= n; returns 0 or -ETIMEDOUT. */
int lg_pool_wait(struct kube_client *c, const char *ns, const char *name, long n, usec_t timeout);
/** A SandboxClaim on pool (returns new). */
json_t *lg_claim_obj(const char *name, const char *pool);
/** A Sandbox with a pod template (returns new). */
json_t *lg_sandbox_obj(const struct lg_opts *o, const char *name);

/* ---- simulated kubelet ---------------------------------------------------------------- */

struct lg_kubelet;
/** Marks every new Pod in ns Running and Ready (status patch). */
int lg_kubelet_start(struct kube_client *c, const char *ns, int workers, struct lg_kubelet **ret);
void lg_kubelet_stop(struct lg_kubelet *k);

/* ---- API server metrics --------------------------------------------------------------- */

/* Writes the load generator itself makes (claims, pools, the simulated kubelet's status
 * patches): not the controller's. The cold scenarios create the Sandboxes too. */
#define LG_OWN_WRITES         "POST sandboxclaims,PATCH pods/status,POST namespaces,POST sandboxwarmpools"
#define LG_OWN_SANDBOX_WRITES LG_OWN_WRITES ",POST sandboxes"
/* Writes of the API server's own controllers (leases, endpoints, namespace finalizers),
 * which a short scenario would otherwise count. */
#define LG_SYSTEM_WRITES \
    "PUT leases,PUT namespaces/finalize,PUT namespaces/status,POST endpoints,PUT endpoints"
#define LG_WRITE_VERBS "POST,PUT,PATCH,DELETE"

/** Scrapes apiserver_request_total into {"VERB resource[/sub]": count} (returns new). */
int lg_api_scrape(struct kube_client *c, json_t **ret);
/** after - before per key, dropping zeros (returns new). */
json_t *lg_api_delta(const json_t *before, const json_t *after);
/** Sum of a delta over keys whose verb is in verbs ("POST,PUT,..."; NULL = all) and whose
 * resource is not in skip (comma-separated "VERB res" keys). */
double lg_api_sum(const json_t *delta, const char *verbs, const char *skip);

/* ---- controller process --------------------------------------------------------------- */

/** RSS (MiB) and CPU seconds (user+system) of pid. */
int lg_proc_sample(pid_t pid, double *ret_rss_mib, double *ret_cpu_s);

/** CPU seconds (user+system) of o's API server processes, summed; -1 when none is set or
 * one cannot be read. A window's reads go inside its lg_api_scrape calls: one scrape of
 * /metrics costs the API server 20-40 ms of CPU, which is the load generator's, not the
 * scenario's. */
double lg_api_cpu(const struct lg_opts *o);
/** Sets out[key] to {"s": now - before, "per_<unit>_ms": (now - before) / n * 1000} of the
 * API server processes; nothing when before < 0 or a sample fails. */
void lg_api_cpu_put(const struct lg_opts *o, json_t *out, const char *key, double before, long n,
                    const char *unit);
/** Parses "PID[,PID...]" into o->api_pids. */
int lg_api_pids_parse(struct lg_opts *o, const char *s);

/* ---- creators --------------------------------------------------------------------------- */

/** Clients the creators use (opts->connections of them, each with its own connection
 * pool, so a burst is not serialised behind one HTTP/2 connection's stream limit). */
struct lg_clients {
    struct kube_client **v;
    int n;
};
int lg_clients_new(const struct lg_opts *o, struct lg_clients *ret);
void lg_clients_free(struct lg_clients *cl);

/* ---- scenarios -------------------------------------------------------------------------- */

int lg_run_warm_burst(struct kube_client *c, const struct lg_opts *o, json_t *out);
int lg_run_sustained(struct kube_client *c, const struct lg_opts *o, json_t *out);
int lg_run_cold(struct kube_client *c, const struct lg_opts *o, json_t *out);
int lg_run_scale(struct kube_client *c, const struct lg_opts *o, json_t *out);
/** Sandboxes created one at a time, each after the previous one is Ready (upstream's
 * `probe` phase): the cold path's latency without queueing. */
int lg_run_probe(struct kube_client *c, const struct lg_opts *o, json_t *out);
/** Warm claims one at a time on an idle pool (--pool-size, default 2): each is created once
 * the previous one's refill is Ready and LG_PROBE_GAP has passed, then waited for: the
 * hand-out latency one agent sees on an idle cluster. */
int lg_run_claim_probe(struct kube_client *c, const struct lg_opts *o, json_t *out);
#define LG_PROBE_GAP (200 * USEC_PER_MSEC)
/** A pool of --pool-size ("pool", template "tpl") for an outside client (bench/sdk_probe.py):
 * fills it, prints "ready" on stdout, then keeps the simulated kubelet running until SIGTERM
 * or SIGINT (or --seconds); the namespace is deleted afterwards as for every scenario. */
int lg_run_serve_pool(struct kube_client *c, const struct lg_opts *o, json_t *out);

/* ---- shared scenario helpers -------------------------------------------------------------- */

/** Creates objects [from, to) of t with obj_fn(name, ctx) on threads; stamps create/ack. */
typedef json_t *lg_obj_fn(const char *name, void *ctx);
void lg_create_all(struct lg_clients *cl, const struct kube_res *res, const char *ns,
                   struct lg_track *t, size_t from, size_t to, int threads, lg_obj_fn *fn,
                   void *ctx);
