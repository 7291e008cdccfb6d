/* SPDX-License-Identifier: Apache-2.0 */
/* The controller manager: informers for Sandboxes, Pods, Services and PVCs feeding one
 * work loop (controller/workloop.h: queue, N reconcile workers that wait for those
 * caches, gated by leader election); Events; Prometheus metrics
 * on /metrics and probes on /healthz and /readyz. Start/stop is usable in-process (the
 * binary and the integration tests both drive it through this API). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/clock.h"
#include "controller/ext_ctrl.h"
#include "controller/idle_ctrl.h"
#include "kube/err.h"

/* --compact-cache=auto (the default): a Sandbox, Pod, Service or PVC cache switches to
 * compact JSON text once it holds more than this many objects. Below it a cache costs
 * ~10 KB per object at most (~10 MiB a cache), and reads stay free of parsing. */
#define CTRL_COMPACT_ABOVE 1000

struct kube_client;
struct metrics_registry;
struct ctrl_manager;
struct yield_gate;

#define CTRL_DEFAULT_LEASE_ID      "a3317529.agent-sandbox.x-k8s.io"
#define CTRL_DEFAULT_STATUS_WINDOW (1 * USEC_PER_SEC)
#define CTRL_STATUS_WINDOW_OFF     USEC_INFINITY
#define CTRL_MAX_STATUS_WINDOW     (10 * USEC_PER_SEC)
#define CTRL_MAX_WORKER_IDLE       (24 * 3600 * USEC_PER_SEC) /* --worker-idle-exit */
#define CTRL_MAX_SIDE_HOLD         (10 * 60 * USEC_PER_SEC)   /* --side-write-hold */
#define CTRL_DEFAULT_POD_META_HOLD (5 * USEC_PER_SEC)         /* --pod-metadata-hold */
#define CTRL_POD_META_HOLD_OFF     USEC_INFINITY
#define CTRL_MAX_POD_META_HOLD     (30 * USEC_PER_SEC)

struct ctrl_opts {
    struct kube_client *client; /* borrowed; required */
    int workers;                /* Sandbox reconcile workers; 0 = 100 */
    usec_t worker_idle;         /* elastic workers end after this long without work (0:
                                   WORKLOOP_IDLE_EXIT); USEC_INFINITY: all start, all stay */
    const char *ns;             /* namespaces to watch: NULL or "" = all, "a" or "a,b,c"
                                   (controller/ns_source.h) (copied) */
    bool cache_label_selectors; /* Pods/Services: only objects with the tracking label */
    bool compact_cache;         /* Sandbox/Pod/Service/PVC caches hold compact JSON text,
                                   parsed on each read (about a ninth of the memory) */
    size_t compact_above;       /* or each of those caches switches to compact text once it
                                   holds more than this many objects (0: never) */
    const char *cluster_domain; /* NULL = "cluster.local" (copied) */
    /* A status change of details only of a Sandbox that is not Ready (PodScheduled, an IP,
     * messages) waits up to this long for the next write that matters, normally Ready:
     * 0 = CTRL_DEFAULT_STATUS_WINDOW, CTRL_STATUS_WINDOW_OFF = write every change. */
    usec_t status_window;
    bool pod_name_annotation_always; /* also for a Pod named after its Sandbox (upstream) */
    /* While claims are being served, a Pod's metadata-only patch (after a warm adoption)
     * waits up to this long: 0 = CTRL_DEFAULT_POD_META_HOLD, CTRL_POD_META_HOLD_OFF = at
     * once. Without extensions there are no claims and nothing waits. */
    usec_t pod_meta_hold;
    /* After a SandboxClaim, SandboxWarmPool or Sandbox is deleted, how long its dependents
     * are left to the garbage collector before the controller deletes those still there
     * (controller/cascade.h): 0 = CASCADE_DEFAULT_DELAY, CASCADE_NOW = at once,
     * CASCADE_OFF = never. */
    usec_t dependent_delay;
    const struct yield_gate *pod_meta_gate; /* tests only: this gate (copied) instead of the
                                               claim loop's and pod_meta_hold */
    /* Tests only: the label selector of the Pod, Service and PVC caches (copied at start)
     * instead of their defaults, e.g. one the controller's children lack until the test
     * labels them, to hold back when the cache shows a child. */
    const char *child_cache_selector;
    bool leader_elect;      /* gate the workers on a Lease */
    const char *lease_ns;   /* Lease namespace (copied); NULL = the client's */
    const char *lease_name; /* NULL = CTRL_DEFAULT_LEASE_ID (copied) */
    const char *identity;   /* NULL = "<$POD_NAME or hostname>_<random UUID>" (copied) */
    usec_t lease_duration, renew_deadline, retry_period; /* 0 = lease.h defaults */
    const char *metrics_addr; /* "host:port"; NULL or "0" = no metrics server */
    /* HTTPS on metrics_addr with TokenReview + SubjectAccessReview (metrics_auth.h);
     * certificate <dir>/<name> and key <dir>/<key name> (NULL: tls.crt, tls.key), or a
     * self-signed pair when dir is NULL. Strings borrowed until the manager is freed. */
    bool metrics_secure;
    const char *metrics_cert_dir, *metrics_cert_name, *metrics_key_name;
    const char *health_addr; /* "host:port"; NULL or "0" = no probe server */
    bool events;             /* record Events (off in some tests) */
    bool extensions;         /* run the SandboxTemplate/WarmPool/Claim controllers */
    struct ext_opts ext;     /* their options (copied; strings borrowed until start) */
    /* Idle auto-suspend: sandboxd's port (0: 8080) and the activity probe (NULL: GET
     * /v1/activity over HTTP; tests inject one). */
    uint16_t idle_probe_port;
    idle_probe_fn *idle_probe;
    void *idle_probe_ctx;
};

/** Creates a stopped manager (copies opts; the client is borrowed). Returns 0 and
 * *ret (free with ctrl_manager_free) or -EINVAL. */
int ctrl_manager_new(const struct ctrl_opts *opts, struct ctrl_manager **ret);
/** Starts informers, the probe/metrics servers, the Events recorder and leader election
 * (or the workers directly without it). Returns 0 or a negative errno (logged). */
int ctrl_manager_start(struct ctrl_manager *m);
/** Waits until every informer has listed once. Returns 0 or -ETIMEDOUT/-ECANCELED. */
int ctrl_manager_wait_synced(struct ctrl_manager *m, usec_t timeout);
/** Blocks until ctrl_manager_request_stop is called or leadership is lost. Returns 0
 * for a requested stop, -ENOLCK when leadership was lost. */
int ctrl_manager_wait(struct ctrl_manager *m);
/** Asks ctrl_manager_wait to return. Async-signal-safe. */
void ctrl_manager_request_stop(struct ctrl_manager *m);
/** Stops the workers (letting running reconciles finish), the informers, the servers
 * and releases the Lease. Idempotent, from one thread: a call while another thread's is
 * under way returns at once, before that one has stopped anything. */
void ctrl_manager_stop(struct ctrl_manager *m);
/** Stops and frees. NULL is fine. */
void ctrl_manager_free(struct ctrl_manager *m);

/** True while this instance leads (always true once started without election). */
bool ctrl_manager_leading(struct ctrl_manager *m);
/** Bound ports (0 when the server is off). */
uint16_t ctrl_manager_metrics_port(struct ctrl_manager *m);
uint16_t ctrl_manager_health_port(struct ctrl_manager *m);
/** The metrics registry (borrowed). */
struct metrics_registry *ctrl_manager_metrics(struct ctrl_manager *m);
/** Total reconciles finished so far (for tests). */
unsigned long ctrl_manager_reconciles(struct ctrl_manager *m);
