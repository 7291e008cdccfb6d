/* SPDX-License-Identifier: Apache-2.0 */
/* API writes of the controller per object, against the local kube-apiserver, with upper
 * bounds so that a regression fails: per cold Sandbox (created by a user, as upstream's
 * probe does), per warm pool member (fill) and per warm claim (adoption and refill), and
 * what it still writes while its namespace is deleted.
 *
 * The manager runs in-process on a client of its own whose request observer counts
 * every attempt (retries and failures included) by method, resource and subresource:
 * exact, whatever else the shared API server serves. The API server's own
 * apiserver_request_total deltas are printed next to them and must be at least the
 * controller's counts (its writes did reach the server). The simulated kubelet plays a
 * real node's steps: scheduled, running with an IP but not Ready, then Ready. An adopted
 * Sandbox and its Pod have no managedFields left (the adoption's writes clear them) unless
 * the controller runs with keep_managed_fields. The Pod metadata patch after an adoption
 * waits while the gate says claims are being served, and goes once they are. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/res.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/xalloc.h"
#include "common/yield_gate.h"
#include "controller/ext_names.h"
#include "controller/manager.h"
#include "controller/sandbox_memo.h"
#include "controller/sandbox_names.h"
#include "controller/sandbox_status.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "support/apiserver.h"
#include "support/ctrl_fixture.h"
#include "support/kube_fixture.h"

#define WAIT   (60 * USEC_PER_SEC)
#define N      10
#define SETTLE (2 * USEC_PER_SEC) /* trailing writes: Events, pool and claim status */
/* Longer than the kubelet's steps take even on a loaded machine, so that what is measured
 * is the coalescing rule, not the machine's speed: 5 s was not always enough beside the
 * rest of the suite (13 status writes for 10 refill members once, 3 December; 10 in every
 * run alone, also beside three busy loops). The most the controller accepts. */
#define STATUS_WINDOW CTRL_MAX_STATUS_WINDOW

static struct kube_client *c, *mgr_client;
static struct ctrl_manager *mgr;
static struct ctrl_opts mgr_opts; /* as started by group_setup */
static struct it_kubelet *kubelet_sim;
static char ns[96];

/* ---- the controller's writes, counted on its client ---------------------------------- */

#define MAX_KEYS 48

static struct {
    pthread_mutex_t lock;
    char key[MAX_KEYS][64]; /* "PUT sandboxes/status" */
    unsigned n[MAX_KEYS];
    size_t len;
} counts = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Sandbox reads (GET or LIST: the observer cannot tell them apart), counted apart from
 * the writes. */
static atomic_uint sb_reads;

static void count_key(const char *key)
{
    size_t i;
    pthread_mutex_lock(&counts.lock);
    for (i = 0; i < counts.len && strcmp(counts.key[i], key) != 0; i++)
        ;
    if (i == counts.len && counts.len < MAX_KEYS)
        (void)snprintf(counts.key[counts.len++], sizeof(counts.key[0]), "%s", key);
    if (i < counts.len)
        counts.n[i]++;
    pthread_mutex_unlock(&counts.lock);
}

/* Counts each write under "VERB plural[/sub]", and a refused one also under that key with
 * its status ("PUT sandboxes/status 409"), so that a report says why a count is high. */
static void observe(void *ctx, const char *method, const struct kube_res *res,
                    const char *subresource, long status)
{
    char key[64], refused[80];
    (void)ctx;
    if (res && strcmp(method, "GET") == 0 && !subresource && strcmp(res->plural, "sandboxes") == 0)
        atomic_fetch_add(&sb_reads, 1);
    if (!res || strcmp(method, "GET") == 0)
        return;
    (void)snprintf(key, sizeof(key), "%s %s%s%s", method, res->plural, subresource ? "/" : "",
                   subresource ? subresource : "");
    count_key(key);
    if (status < 200 || status >= 300) {
        (void)snprintf(refused, sizeof(refused), "%s %ld", key, status);
        count_key(refused);
    }
}

static unsigned count_of(const char *key)
{
    unsigned n = 0;
    pthread_mutex_lock(&counts.lock);
    for (size_t i = 0; i < counts.len; i++)
        if (strcmp(counts.key[i], key) == 0)
            n = counts.n[i];
    pthread_mutex_unlock(&counts.lock);
    return n;
}

static unsigned count_total(void)
{
    unsigned n = 0;
    pthread_mutex_lock(&counts.lock);
    for (size_t i = 0; i < counts.len; i++)
        if (!strchr(strchr(counts.key[i], ' ') + 1, ' ')) /* not a refused one's second key */
            n += counts.n[i];
    pthread_mutex_unlock(&counts.lock);
    return n;
}

static void counts_reset(void)
{
    atomic_store(&sb_reads, 0);
    pthread_mutex_lock(&counts.lock);
    counts.len = 0;
    memset(counts.n, 0, sizeof(counts.n));
    pthread_mutex_unlock(&counts.lock);
}

/* ---- the API server's counters ------------------------------------------------------- */

/* Sum of apiserver_request_total over the lines with verb, resource and subresource
 * (subresource "" = none), or -1 when /metrics cannot be read. */
static double server_count(const struct buf *m, const char *verb, const char *res, const char *sub)
{
    char v[48], r[64], s[48];
    double sum = 0;
    const char *line = m->data, *stop = m->data + m->len;
    (void)snprintf(v, sizeof(v), "verb=\"%s\"", verb);
    (void)snprintf(r, sizeof(r), "resource=\"%s\"", res);
    (void)snprintf(s, sizeof(s), "subresource=\"%s\"", sub);
    /* memchr over the rest, not strchr: the text is megabytes long */
    while (line && line < stop) {
        const char *end = memchr(line, '\n', (size_t)(stop - line));
        size_t len = end ? (size_t)(end - line) : (size_t)(stop - line);
        char l[1024];
        if (len < sizeof(l) && strncmp(line, "apiserver_request_total{", 24) == 0) {
            memcpy(l, line, len);
            l[len] = '\0';
            if (strstr(l, v) && strstr(l, r) && strstr(l, s)) {
                const char *sp = strrchr(l, ' ');
                sum += sp ? strtod(sp + 1, NULL) : 0;
            }
        }
        line = end ? end + 1 : NULL;
    }
    return sum;
}

struct server_snap {
    struct buf m;
    bool ok;
};

static void server_snap(struct server_snap *s)
{
    buf_init(&s->m, 64u * 1024 * 1024);
    s->ok = it_http_get("/metrics", &s->m) >= 0 && buf_putc(&s->m, '\0') >= 0;
}

/* Prints the controller's writes per object next to the API server's deltas, and checks
 * that the server saw at least what the controller sent. */
static void report(const char *what, unsigned objects, struct server_snap *before)
{
    struct server_snap after;
    bool landed = true;
    server_snap(&after);
    printf("# controller writes per %s (%u objects): total %.2f\n", what, objects,
           (double)count_total() / objects);
    pthread_mutex_lock(&counts.lock);
    for (size_t i = 0; i < counts.len; i++) {
        char verb[16], res[48], *sub;
        double srv = -1;
        if (sscanf(counts.key[i], "%15s %47s", verb, res) != 2)
            continue;
        sub = strchr(res, '/');
        if (sub)
            *sub++ = '\0';
        if (before->ok && after.ok)
            srv = server_count(&after.m, verb, res, sub ? sub : "") -
                  server_count(&before->m, verb, res, sub ? sub : "");
        printf("#   %-34s %6u  %.2f/object  (API server delta, all clients: %.0f)\n", counts.key[i],
               counts.n[i], (double)counts.n[i] / objects, srv);
        if (srv >= 0 && srv < counts.n[i])
            landed = false;
    }
    bool full = counts.len >= MAX_KEYS; /* a key dropped would make its counts read 0 */
    pthread_mutex_unlock(&counts.lock);
    buf_done(&after.m);
    assert_true(before->ok && after.ok); /* else the server's side was never compared */
    buf_done(&before->m);
    assert_false(full);
    assert_true(landed);
}

/* Stops the running manager and starts one with o (its fields borrowed until started),
 * synced. */
static void restart_manager(const struct ctrl_opts *o)
{
    ctrl_manager_free(mgr);
    mgr = NULL;
    assert_int_equal(ctrl_manager_new(o, &mgr), 0);
    assert_int_equal(ctrl_manager_start(mgr), 0);
    assert_int_equal(ctrl_manager_wait_synced(mgr, WAIT), 0);
}

/* ---- the kubelet: a real node's steps ------------------------------------------------- */

static int step(const char *name, json_t *status)
{
    struct kube_err e = {0};
    json_t *p = json_pack("{s:o}", "status", status);
    int r = it_merge_patch(c, &KUBE_RES_PODS, ns, name, "status", p, &e);
    json_decref(p);
    return r < 0 && !kube_err_is_not_found(&e) ? r : 0;
}

/* Pods labelled sandbox.users.io/kubelet=off are left Pending. */
static bool kubelet_skip(void *ctx, const json_t *pod)
{
    const char *off = kube_obj_label(pod, "sandbox.users.io/kubelet");
    (void)ctx;
    return off && strcmp(off, "off") == 0;
}

static int kubelet_run(void *ctx, const char *name, unsigned seq)
{
    char now[64], ip[32];
    json_t *pod = it_obj_get(c, &KUBE_RES_PODS, ns, name);
    struct kube_err e = {0};
    int r;
    (void)ctx;
    if (!pod || kube_obj_path_str(pod, "status.podIP")) {
        json_decref(pod); /* gone, or already run (an event of our own steps) */
        return 0;
    }
    json_decref(pod);
    clock_format_rfc3339_sec(clock_wall_now(), now, sizeof(now));
    (void)snprintf(ip, sizeof(ip), "10.7.%u.%u", (seq / 250) % 250, seq % 250 + 1);
    r = step(name, json_pack("{s:s, s:[{s:s, s:s, s:s}]}", "phase", "Pending", "conditions", "type",
                             "PodScheduled", "status", "True", "lastTransitionTime", now));
    if (r >= 0)
        r = step(name,
                 json_pack("{s:s, s:s, s:[{s:s}], s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}]}", "phase",
                           "Running", "podIP", ip, "podIPs", "ip", ip, "conditions", "type",
                           "PodScheduled", "status", "True", "lastTransitionTime", now, "type",
                           "Ready", "status", "False", "lastTransitionTime", now));
    if (r >= 0 && it_pod_ready(c, ns, name, ip, &e) < 0 && !kube_err_is_not_found(&e))
        r = e.code ? e.code : -EIO;
    return r;
}

/* ---- set-up --------------------------------------------------------------------------- */

static int group_setup(void **state)
{
    struct it_sandbox_ns_opts so = {
        .prefix = "wr", .extensions = true, .default_sa = true, .timeout = WAIT};
    /* A read stalled on a shared HTTP/2 connection (kube_client_opts.read_stall) is cut
     * after about 7 s here, not 20: within the 10 s status window, so a Pod the simulated
     * kubelet was slow to run does not bring a deferred status write into a count. */
    struct kube_client_opts co = {.qps = 0, .max_retries = -1, .read_stall = 2 * USEC_PER_SEC};
    struct kube_client_opts mo = {
        .qps = 0, .max_retries = -1, .observe = observe, .read_stall = 2 * USEC_PER_SEC};
    struct it_kubelet_opts ko = {
        .ns = ns, .workers = 4, .skip = kubelet_skip, .run = kubelet_run, .retry = true};
    struct ctrl_opts o = {.workers = 16,
                          .ns = ns,
                          .leader_elect = false,
                          .metrics_addr = "0",
                          .health_addr = "0",
                          .events = true,
                          .status_window = STATUS_WINDOW,
                          .extensions = true,
                          .ext = {.claim_workers = 50,
                                  .claim_timeout = 120 * USEC_PER_SEC,
                                  .ready_grace = 600 * USEC_PER_SEC}};
    struct kube_err e = {0};
    (void)state;
    log_set_level(getenv("AS_TEST_DEBUG") ? LOG_DEBUG : LOG_WARN);
    if (it_client_new(&co, &c, &e) < 0 || it_client_new(&mo, &mgr_client, &e) < 0)
        return -1;
    if (it_sandbox_ns_setup(c, &so, ns, sizeof(ns), &e) < 0) {
        fprintf(stderr, "setup failed: %s\n", e.message);
        return -1;
    }
    ko.client = c;
    o.client = mgr_client;
    mgr_opts = o;
    if (it_kubelet_start(&ko, &kubelet_sim) < 0 || ctrl_manager_new(&o, &mgr) < 0 ||
        ctrl_manager_start(mgr) < 0 || ctrl_manager_wait_synced(mgr, WAIT) < 0)
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    ctrl_manager_free(mgr);
    it_kubelet_free(kubelet_sim);
    if (c && ns[0])
        (void)it_ns_delete(c, ns, 120 * USEC_PER_SEC);
    kube_client_free(c);
    kube_client_free(mgr_client);
    return 0;
}

/* ---- helpers -------------------------------------------------------------------------- */

static void create(const struct kube_res *res, json_t *obj)
{
    struct kube_err e;
    IT_OK(kube_create(c, res, ns, obj, NULL, &e), &e);
    json_decref(obj);
}

struct ready_want {
    const struct kube_res *res;
    const char *prefix; /* names starting with it */
    size_t n;
};

static bool all_ready(void *ctx)
{
    struct ready_want *w = ctx;
    json_t *list = NULL, *o;
    size_t i, ready = 0;
    if (kube_list_all(c, w->res, ns, NULL, &list, NULL) < 0)
        return false;
    json_array_foreach(json_object_get(list, "items"), i, o)
    {
        if (strncmp(kube_obj_name(o) ?: "", w->prefix, strlen(w->prefix)) == 0 &&
            kube_obj_condition_true(o, SB_COND_READY))
            ready++;
    }
    json_decref(list);
    return ready >= w->n;
}

static void wait_ready(const struct kube_res *res, const char *prefix, size_t n)
{
    struct ready_want w = {res, prefix, n};
    if (it_wait(all_ready, &w, WAIT) < 0)
        fail_msg("%s %s*: fewer than %zu Ready", res->plural, prefix, n);
}

static bool pool_ready(void *ctx)
{
    json_t *p = it_obj_get(c, &API_RES_SANDBOXWARMPOOLS, ns, "pool");
    bool ok = json_integer_value(kube_obj_path(p, "status.readyReplicas")) == (json_int_t)N;
    (void)ctx;
    json_decref(p);
    return ok;
}

/* Entries in metadata.managedFields of the object (-1 when it cannot be read). */
static int managed_fields_of(const struct kube_res *res, const char *name)
{
    json_t *o = it_obj_get(c, res, ns, name);
    int n = o ? (int)json_array_size(kube_obj_path(o, "metadata.managedFields")) : -1;
    json_decref(o);
    return n;
}

/* Entries in metadata.managedFields of a pool member no claim has adopted (-1: none). */
static int member_managed_fields(void)
{
    json_t *list = NULL, *o;
    size_t i;
    int n = -1;
    if (kube_list_all(c, &API_RES_SANDBOXES, ns, NULL, &list, NULL) < 0)
        return -1;
    json_array_foreach(json_object_get(list, "items"), i, o)
    {
        if (n < 0 && kube_obj_label(o, SB_LABEL_WARM_POOL) &&
            !kube_obj_label(o, EXT_LABEL_CLAIM_UID))
            n = (int)json_array_size(kube_obj_path(o, "metadata.managedFields"));
    }
    json_decref(list);
    return n;
}

/* The Sandbox the Ready claim name is bound to (new copy). */
static char *claim_sandbox(const char *name)
{
    json_t *cl = it_obj_get(c, &API_RES_SANDBOXCLAIMS, ns, name);
    const char *sb = kube_obj_path_str(cl, "status.sandbox.name");
    char *v = xstrdup(sb ?: "");
    json_decref(cl);
    return v;
}

/* Every claim claim-0 ... claim-(N-1) is bound to a Sandbox, and that Sandbox and its Pod
 * have no managedFields (the Pod's metadata PATCH follows the adoption by a moment). */
static bool adopted_cleared(void *ctx)
{
    char name[32];
    bool all = true;
    (void)ctx;
    for (int i = 0; i < N && all; i++) {
        (void)snprintf(name, sizeof(name), "claim-%d", i);
        char *sb = claim_sandbox(name);
        all = sb[0] && managed_fields_of(&API_RES_SANDBOXES, sb) == 0 &&
              managed_fields_of(&KUBE_RES_PODS, sb) == 0;
        xfree(sb);
    }
    return all;
}

/* ---- tests ---------------------------------------------------------------------------- */

/* Cold Sandboxes created by a user: the Pod, and one status write when the Pod is
 * Ready (the steps before it ride along); no pod-name patch (the Pod has the Sandbox's
 * name) and no Event. */
static void test_cold_sandboxes(void **state)
{
    struct server_snap before;
    char name[32];
    (void)state;
    counts_reset();
    server_snap(&before);
    for (int i = 0; i < N; i++) {
        (void)snprintf(name, sizeof(name), "cold-%d", i);
        create(&API_RES_SANDBOXES,
               json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:{s:[{s:s, s:s}]}}}}", "apiVersion",
                         SB_API_VERSION, "kind", SB_KIND, "metadata", "name", name, "spec",
                         "podTemplate", "spec", "containers", "name", "runtime", "image",
                         "registry.local/runtime:1"));
    }
    wait_ready(&API_RES_SANDBOXES, "cold-", N);
    clock_sleep(SETTLE);
    report("cold Sandbox", N, &before);
    assert_int_equal(count_of("POST pods"), N);
    assert_true(count_of("PUT sandboxes/status") <= N); /* was 4 per Sandbox on a node */
    assert_int_equal(count_of("PATCH sandboxes"), 0);   /* was 1: pod-name annotation */
    assert_int_equal(count_of("POST events"), 0);
    assert_true(count_total() <= 2 * N);
}

/* A Sandbox with a Service and no container ports: its headless Service has no ports,
 * which the API server leaves out, so each pass found "ports": [] missing and patched it
 * (a PATCH per pass, three or more per Sandbox as its Pod starts). */
static void test_portless_service_not_patched(void **state)
{
    (void)state;
    counts_reset();
    create(&API_RES_SANDBOXES,
           json_pack("{s:s, s:s, s:{s:s}, s:{s:b, s:{s:{s:[{s:s, s:s}]}}}}", "apiVersion",
                     SB_API_VERSION, "kind", SB_KIND, "metadata", "name", "portless-0", "spec",
                     "service", 1, "podTemplate", "spec", "containers", "name", "runtime", "image",
                     "registry.local/runtime:1"));
    wait_ready(&API_RES_SANDBOXES, "portless-", 1);
    clock_sleep(SETTLE);
    print_message("portless Service: %u POST, %u PATCH\n", count_of("POST services"),
                  count_of("PATCH services"));
    assert_int_equal(count_of("POST services"), 1);
    assert_int_equal(count_of("PATCH services"), 0);
}

/* A warm pool of N: per member the Sandbox, its Pod and one status write; the pool's own
 * status is written a bounded number of times for the whole fill. */
static void test_pool_fill(void **state)
{
    struct server_snap before;
    json_t *t;
    (void)state;
    counts_reset();
    server_snap(&before);
    t = json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:{s:[{s:s, s:s}]}}}}", "apiVersion", EXT_API_VERSION,
                  "kind", EXT_KIND_TEMPLATE, "metadata", "name", "tpl", "spec", "podTemplate",
                  "spec", "containers", "name", "runtime", "image", "registry.local/runtime:1");
    create(&API_RES_SANDBOXTEMPLATES, t);
    usec_t start = clock_now();
    create(&API_RES_SANDBOXWARMPOOLS, it_pool_new("pool", "tpl", N));
    assert_int_equal(it_wait(pool_ready, NULL, WAIT), 0);
    unsigned fill_s = (unsigned)((clock_now() - start + USEC_PER_SEC - 1) / USEC_PER_SEC);
    clock_sleep(SETTLE);
    report("warm pool member", N, &before);
    assert_int_equal(count_of("POST sandboxes"), N);
    assert_int_equal(count_of("POST pods"), N);
    assert_true(count_of("PUT sandboxes/status") <= N);
    assert_int_equal(count_of("PATCH sandboxes"), 0);
    assert_int_equal(count_of("PATCH pods"), 0);
    /* Paced: the first status, at most one a second while filling, and the converged one
     * (was one per member change), and one of margin (3 were seen in a fill of under a
     * second). The bound follows the fill's length, which a loaded machine stretches. */
    unsigned pool_writes = fill_s + 3 < N ? fill_s + 3 : N;
    print_message("pool filled in %u s: %u pool status writes (bound %u)\n", fill_s,
                  count_of("PATCH sandboxwarmpools/status"), pool_writes);
    assert_true(count_of("PATCH sandboxwarmpools/status") <= pool_writes);
    assert_true(count_total() <= 3 * N + pool_writes + 3);
}

/* N claims at once on the pool of N: per claim the adoption, the claim status, its
 * observability annotations, the SandboxAdopted Event and the Pod's metadata patch; no
 * rewrite of the adopted Sandbox's status. The refill costs what the fill did. */
static void test_warm_claims(void **state)
{
    struct server_snap before;
    char name[32];
    (void)state;
    counts_reset();
    server_snap(&before);
    for (int i = 0; i < N; i++) {
        (void)snprintf(name, sizeof(name), "claim-%d", i);
        create(&API_RES_SANDBOXCLAIMS, it_claim_new(name, "pool"));
    }
    wait_ready(&API_RES_SANDBOXCLAIMS, "claim-", N);
    assert_int_equal(it_wait(pool_ready, NULL, WAIT), 0);
    clock_sleep(SETTLE);
    report("warm claim (refill included)", N, &before);
    /* A claim reconciled again before the cache shows its adoption uses what the
     * adoption's PATCH returned instead of reading the Sandbox (0.7 reads per claim in
     * a 300-claim burst before). */
    printf("# Sandbox reads during the claims: %u\n", atomic_load(&sb_reads));
    assert_true(atomic_load(&sb_reads) <= N / 2);
    /* the claims' own writes */
    assert_int_equal(count_of("PATCH sandboxes"), N); /* adoption, no retry */
    assert_true(count_of("PATCH sandboxclaims/status") <= N);
    assert_true(count_of("PATCH sandboxclaims") <= N);
    assert_true(count_of("PATCH pods") <= N);
    assert_true(count_of("POST events") + count_of("PATCH events") <= N);
    /* the refill: as the fill; adopted Sandboxes' status is not rewritten. A transient
     * excess of one member (11 creates, 1 delete for 10 claims) was seen in about one run
     * of five before 547f325 (a pass read the members before the expectations) and was
     * not reproduced in 45 runs after it; the bound stays at one until CI has confirmed
     * that. The net count is exact. */
    assert_int_equal(count_of("POST sandboxes") - count_of("DELETE sandboxes"), N);
    assert_in_range(count_of("POST sandboxes"), N, N + 1);
    assert_in_range(count_of("POST pods"), N, count_of("POST sandboxes"));
    /* One member in a run may take a second status write: seen once in five runs beside
     * another test (11 for 10 creates, 2 December); its cause is not established. */
    assert_true(count_of("PUT sandboxes/status") <= count_of("POST sandboxes") + 1);
    assert_true(count_of("PATCH sandboxwarmpools/status") <= N); /* paced (was 1.5 per claim) */
    assert_true(count_total() <= 9 * N);
    /* The adoption's PATCH cleared the Sandbox's managedFields and the Pod's metadata
     * PATCH the Pod's; the kubelet's later status writes did not bring them back. The
     * pool's members (the refill) keep theirs. */
    assert_int_equal(it_wait(adopted_cleared, NULL, WAIT), 0);
    assert_true(member_managed_fields() > 0);
}

/* The manager's pool passes so far (controller_runtime_reconcile_total of the pool
 * controller, every result), or -1. */
static long pool_passes(void)
{
    static const char pre[] = "controller_runtime_reconcile_total{controller=\"sandboxwarmpool\"";
    struct buf b;
    long n = -1;
    buf_init(&b, 16u * 1024 * 1024);
    if (metrics_render(ctrl_manager_metrics(mgr), &b) >= 0 && buf_putc(&b, '\0') >= 0) {
        n = 0;
        for (const char *l = strstr(buf_str(&b), pre); l; l = strstr(l + 1, pre)) {
            const char *sp = strchr(l, ' ');
            if (sp)
                n += strtol(sp + 1, NULL, 10);
        }
    }
    buf_done(&b);
    return n;
}

/* The pool's passes once none has run for half a second (a pass may requeue itself). */
static long pool_passes_settled(void)
{
    long a = pool_passes(), b;
    for (int i = 0; i < 40; i++) {
        clock_sleep(500 * USEC_PER_MSEC);
        if ((b = pool_passes()) == a)
            return b;
        a = b;
    }
    return a;
}

/* Names of the pool's unclaimed members (new array of new strings). */
static json_t *pool_members(void)
{
    json_t *list = NULL, *names = json_array(), *o;
    size_t i;
    if (kube_list_all(c, &API_RES_SANDBOXES, ns, NULL, &list, NULL) < 0)
        return names;
    json_array_foreach(json_object_get(list, "items"), i, o)
    {
        if (kube_obj_label(o, SB_LABEL_WARM_POOL) && !kube_obj_label(o, EXT_LABEL_CLAIM_UID))
            json_array_append_new(names, json_string(kube_obj_name(o)));
    }
    json_decref(list);
    return names;
}

/* Changes of a pool's members that arrive together (a claim burst's adoptions, the
 * refill's creates, the members' status writes) make few passes over the pool, each of
 * which reads every member: --sandbox-warm-pool-coalesce-window (default 100 ms). Each
 * member is relabelled twice in a row; before, every change made a pass of its own. */
static void test_pool_passes_coalesced(void **state)
{
    struct kube_err e = {0};
    json_t *names = pool_members(), *v;
    size_t i, changes = 0;
    long p0, p1;
    (void)state;
    assert_int_equal(json_array_size(names), N);
    p0 = pool_passes_settled();
    assert_true(p0 > 0);
    for (int round = 0; round < 2; round++)
        json_array_foreach(names, i, v)
        {
            json_t *p = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "coalesce-round",
                                  round ? "b" : "a");
            IT_OK(kube_patch(c, &API_RES_SANDBOXES, ns, json_string_value(v), KUBE_PATCH_MERGE, p,
                             NULL, &e),
                  &e);
            json_decref(p);
            changes++;
        }
    p1 = pool_passes_settled();
    printf("# pool passes for %zu member changes: %ld\n", changes, p1 - p0);
    assert_true(p1 - p0 >= 1);                 /* the changes were seen */
    assert_true(p1 - p0 <= (long)changes / 4); /* and coalesced */
    json_decref(names);
}

/* The claim's first-ready annotation (new copy), or NULL. */
static char *first_ready_of(const char *name)
{
    json_t *cl = it_obj_get(c, &API_RES_SANDBOXCLAIMS, ns, name);
    char *v = kube_obj_annotation(cl, EXT_ANN_FIRST_READY)
                  ? xstrdup(kube_obj_annotation(cl, EXT_ANN_FIRST_READY))
                  : NULL;
    json_decref(cl);
    return v;
}

static bool has_first_ready(void *ctx)
{
    char *v = first_ready_of(ctx);
    xfree(v);
    return v != NULL;
}

/* A Ready claim without the first-ready annotation (its writer held it and stopped, or it
 * was removed) gets it back, timed by its Ready condition (whole seconds, where the
 * first one had the moment's microseconds). */
static void test_first_ready_restored(void **state)
{
    struct kube_err e = {0};
    json_t *p = json_pack("{s:{s:{s:n}}}", "metadata", "annotations", EXT_ANN_FIRST_READY);
    char *before, *after;
    (void)state;
    assert_int_equal(it_wait(has_first_ready, "claim-0", WAIT), 0);
    before = first_ready_of("claim-0");
    IT_OK(it_merge_patch(c, &API_RES_SANDBOXCLAIMS, ns, "claim-0", NULL, p, &e), &e);
    json_decref(p);
    assert_int_equal(it_wait(has_first_ready, "claim-0", WAIT), 0);
    after = first_ready_of("claim-0");
    printf("# first-ready %s, restored as %s\n", before, after);
    assert_string_not_equal(before, after);
    xfree(before);
    xfree(after);
}

static bool pod_exists(void *ctx)
{
    json_t *pod = it_obj_get(c, &KUBE_RES_PODS, ns, ctx);
    bool ok = pod != NULL;
    json_decref(pod);
    return ok;
}

/* A detail that no later change takes along (a Pod left unschedulable) is still written,
 * once the window has passed, without any further event. */
static void test_deferred_detail_is_written(void **state)
{
    struct it_cond want = {&API_RES_SANDBOXES, "stuck", SB_COND_POD_SCHEDULED, "False",
                           "Unschedulable"};
    struct kube_err e = {0};
    json_t *p;
    usec_t t0;
    (void)state;
    create(&API_RES_SANDBOXES,
           json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:{s:{s:s}}, s:{s:[{s:s, s:s}]}}}}", "apiVersion",
                     SB_API_VERSION, "kind", SB_KIND, "metadata", "name", "stuck", "spec",
                     "podTemplate", "metadata", "labels", "sandbox.users.io/kubelet", "off", "spec",
                     "containers", "name", "runtime", "image", "registry.local/runtime:1"));
    assert_int_equal(it_wait(pod_exists, "stuck", WAIT), 0);
    p = json_pack("{s:{s:s, s:[{s:s, s:s, s:s, s:s}]}}", "status", "phase", "Pending", "conditions",
                  "type", "PodScheduled", "status", "False", "reason", "Unschedulable", "message",
                  "0/0 nodes are available");
    t0 = clock_now();
    IT_OK(it_merge_patch(c, &KUBE_RES_PODS, ns, "stuck", "status", p, &e), &e);
    json_decref(p);
    assert_int_equal(it_cond_wait(c, ns, &want, 3 * STATUS_WINDOW), 0);
    printf("# unschedulable shown after %.1f s (window %.0f s)\n",
           (double)(clock_now() - t0) / USEC_PER_SEC, (double)STATUS_WINDOW / USEC_PER_SEC);
}

/* Every Sandbox in ns that is not being deleted carries the pod-name annotation. With
 * ctx non-NULL it prints those without it (after a timeout). */
static bool all_pod_named(void *ctx)
{
    json_t *list = NULL, *o;
    size_t i;
    bool all = true;
    if (kube_list_all(c, &API_RES_SANDBOXES, ns, NULL, &list, NULL) < 0)
        return false;
    json_array_foreach(json_object_get(list, "items"), i, o)
    {
        if (!kube_obj_deleting(o) && !kube_obj_annotation(o, SB_ANN_POD_NAME)) {
            all = false;
            if (ctx)
                printf("# no pod-name annotation: %s (Ready %s)\n", kube_obj_name(o),
                       kube_obj_condition_true(o, SB_COND_READY) ? "True" : "not True");
        }
    }
    json_decref(list);
    return all;
}

/* Upstream's behaviour on request: every status change written at once, and the
 * pod-name annotation patched for a Pod named after its Sandbox. */
static void test_write_through_flags(void **state)
{
    struct ctrl_opts o = mgr_opts;
    struct server_snap before;
    char name[32];
    json_t *sb;
    (void)state;
    o.status_window = CTRL_STATUS_WINDOW_OFF;
    o.pod_name_annotation_always = true;
    o.ext.keep_managed_fields = true;
    restart_manager(&o);
    /* It annotates the earlier tests' Sandboxes first: wait until it has, on a loaded
     * machine that can take longer than SETTLE, and those patches are not this test's. */
    if (it_wait(all_pod_named, NULL, WAIT) < 0) {
        (void)all_pod_named("print");
        fail_msg("the earlier tests' Sandboxes were not all annotated");
    }
    clock_sleep(SETTLE);
    counts_reset();
    server_snap(&before);
    for (int i = 0; i < N; i++) {
        (void)snprintf(name, sizeof(name), "wt-%d", i);
        create(&API_RES_SANDBOXES,
               json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:{s:[{s:s, s:s}]}}}}", "apiVersion",
                         SB_API_VERSION, "kind", SB_KIND, "metadata", "name", name, "spec",
                         "podTemplate", "spec", "containers", "name", "runtime", "image",
                         "registry.local/runtime:1"));
    }
    wait_ready(&API_RES_SANDBOXES, "wt-", N);
    clock_sleep(SETTLE);
    report("cold Sandbox, write-through", N, &before);
    assert_int_equal(count_of("PATCH sandboxes"), N);
    sb = it_obj_get(c, &API_RES_SANDBOXES, ns, "wt-0");
    assert_string_equal(kube_obj_annotation(sb, SB_ANN_POD_NAME) ?: "", "wt-0");
    json_decref(sb);
    /* the first status and Ready at least, and some of the kubelet's steps */
    assert_true(count_of("PUT sandboxes/status") > 2 * N);
    /* --keep-managed-fields: an adopted Sandbox and its Pod keep theirs */
    assert_int_equal(it_wait(pool_ready, NULL, WAIT), 0);
    create(&API_RES_SANDBOXCLAIMS, it_claim_new("keep-0", "pool"));
    wait_ready(&API_RES_SANDBOXCLAIMS, "keep-", 1);
    char *kept = claim_sandbox("keep-0");
    assert_true(managed_fields_of(&API_RES_SANDBOXES, kept) > 0);
    assert_true(managed_fields_of(&KUBE_RES_PODS, kept) > 0);
    xfree(kept);
}

#define HIDDEN_LABEL "as-test-hidden"

static void patch_labels(const struct kube_res *res, const char *name, json_t *labels)
{
    struct kube_err e;
    json_t *patch = json_pack("{s:{s:o}}", "metadata", "labels", labels);
    IT_OK(kube_patch(c, res, ns, name, KUBE_PATCH_MERGE, patch, NULL, &e), &e);
    json_decref(patch);
}

/* Creates Sandbox name whose Pod template carries HIDDEN_LABEL. */
static void create_hidden_pod_sandbox(const char *name)
{
    create(&API_RES_SANDBOXES,
           json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:{s:{s:s}}, s:{s:[{s:s, s:s}]}}}}", "apiVersion",
                     SB_API_VERSION, "kind", SB_KIND, "metadata", "name", name, "spec",
                     "podTemplate", "metadata", "labels", HIDDEN_LABEL, "1", "spec", "containers",
                     "name", "runtime", "image", "registry.local/runtime:1"));
}

/* Five passes of Sandbox name in 0.5 s (a label changed each time), then 0.5 s more. */
static void touch_five_times(const char *name)
{
    for (int i = 0; i < 5; i++) {
        char v[8];
        (void)snprintf(v, sizeof(v), "%d", i);
        patch_labels(&API_RES_SANDBOXES, name, json_pack("{s:s}", "touch", v));
        clock_sleep(USEC_PER_SEC / 10);
    }
    clock_sleep(USEC_PER_SEC / 2);
}

static bool two_creates(void *ctx)
{
    return count_of(ctx) >= 2;
}

/* The creates of one child a Sandbox made at or after since may have sent by now: the
 * first, then one (refused, and followed by a read) each time the record of it
 * (SB_MEMO_TTL) expired before the cache showed it. On a quiet machine the tests stay
 * within the first record's life; a loaded one can outlast it. */
static unsigned creates_allowed(usec_t since)
{
    return 1 + (unsigned)((clock_now() - since) / SB_MEMO_TTL);
}

/* A Sandbox reconciled again before its Pod is in the controller's cache (its own
 * status write's event can come first) uses the Pod it created, instead of creating it
 * again to be refused with AlreadyExists and reading it back. The cache is held back for
 * as long as the test likes: the manager's Pod cache leaves out Pods labelled
 * HIDDEN_LABEL, which this Sandbox's template sets, until the label is taken off. */
static void test_created_pod_not_cached(void **state)
{
    struct ctrl_opts o = mgr_opts;
    json_t *sb;
    const char *reason;
    (void)state;
    o.child_cache_selector = "!" HIDDEN_LABEL;
    restart_manager(&o);
    clock_sleep(SETTLE);
    counts_reset();
    usec_t start = clock_now();
    create_hidden_pod_sandbox("hidden-0");
    assert_int_equal(it_wait(pod_exists, "hidden-0", WAIT), 0);
    /* Five more passes while the cache has no Pod, within the record's life (the memo's
     * TTL, 3 s) on a quiet machine: each would have been a refused create and a read. */
    touch_five_times("hidden-0");
    printf("# Pod creates for a Sandbox reconciled 5 times before its Pod was cached: %u "
           "(at most %u after %.1f s)\n",
           count_of("POST pods"), creates_allowed(start),
           (double)(clock_now() - start) / USEC_PER_SEC);
    assert_true(count_of("POST pods") <= creates_allowed(start));
    sb = it_obj_get(c, &API_RES_SANDBOXES, ns, "hidden-0");
    reason = sb_cond_reason(json_object_get(sb, "status"), SB_COND_READY);
    assert_string_not_equal(reason ?: "", SB_R_RECONCILER_ERROR);
    json_decref(sb);
    /* With no event to bring it back, the pass returns when the record expires and asks
     * the API server (a refused create and a read), then relies on that answer for
     * another TTL. */
    assert_int_equal(it_wait(two_creates, "POST pods", WAIT), 0);
    clock_sleep(USEC_PER_SEC);
    assert_true(count_of("POST pods") <= creates_allowed(start));
    /* the cache shows it: the Sandbox goes Ready on it, with no other Pod */
    patch_labels(&KUBE_RES_PODS, "hidden-0", json_pack("{s:n}", HIDDEN_LABEL));
    wait_ready(&API_RES_SANDBOXES, "hidden-", 1);
    assert_true(count_of("POST pods") <= 3);
    assert_int_equal(count_of("DELETE pods"), 0);
}

static const struct kube_res ROLES = {"rbac.authorization.k8s.io", "v1", "Role", "roles", true};
static const struct kube_res ROLEBINDINGS = {"rbac.authorization.k8s.io", "v1", "RoleBinding",
                                             "rolebindings", true};

/* The test user alice may do everything the controller does in ns but read one Pod. */
static void grant_all_but_pod_get(void)
{
    struct kube_err e;
    json_t *role = json_pack(
        "{s:s,s:s,s:{s:s},s:[{s:[s],s:[s],s:[s,s,s,s,s,s]},{s:[s],s:[s,s,s,s,s,s],s:[s]},"
        "{s:[s,s,s,s,s],s:[s],s:[s]}]}",
        "apiVersion", "rbac.authorization.k8s.io/v1", "kind", "Role", "metadata", "name",
        "all-but-pod-get", "rules", "apiGroups", "", "resources", "pods", "verbs", "list", "watch",
        "create", "update", "patch", "delete", "apiGroups", "", "resources", "services",
        "persistentvolumeclaims", "events", "configmaps", "secrets", "serviceaccounts", "verbs",
        "*", "apiGroups", "agents.x-k8s.io", "extensions.agents.x-k8s.io", "networking.k8s.io",
        "events.k8s.io", "coordination.k8s.io", "resources", "*", "verbs", "*");
    json_t *binding =
        json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s,s:s},s:[{s:s,s:s,s:s}]}", "apiVersion",
                  "rbac.authorization.k8s.io/v1", "kind", "RoleBinding", "metadata", "name",
                  "all-but-pod-get", "roleRef", "apiGroup", "rbac.authorization.k8s.io", "kind",
                  "Role", "name", "all-but-pod-get", "subjects", "kind", "User", "apiGroup",
                  "rbac.authorization.k8s.io", "name", "alice");
    IT_OK(kube_create(c, &ROLES, ns, role, NULL, &e), &e);
    IT_OK(kube_create(c, &ROLEBINDINGS, ns, binding, NULL, &e), &e);
    json_decref(role);
    json_decref(binding);
}

/* The Ready condition's message of Sandbox ctx says its Pod exists and why it could not
 * be read. */
static bool says_unreadable(void *ctx)
{
    json_t *sb = it_obj_get(c, &API_RES_SANDBOXES, ns, ctx);
    const json_t *cond = sb_cond_get(json_object_get(sb, "status"), SB_COND_READY);
    const char *msg = json_string_value(json_object_get(cond, "message"));
    bool ok = msg && strstr(msg, "pods \"unread-0\" already exists and could not be read: ") &&
              strstr(msg, "forbidden");
    json_decref(sb);
    return ok;
}

/* A create refused with AlreadyExists, then a read of the object refused too: the error
 * says both (the object exists; why it could not be read), not "create failed" with the
 * read's error alone. The controller runs as alice, who may not get Pods, and its Pod
 * cache leaves this Sandbox's Pod out: once the record of the Pod it created expires,
 * the pass creates it again (AlreadyExists) and reads it (Forbidden). */
static void test_existing_child_unreadable(void **state)
{
    struct ctrl_opts o = mgr_opts;
    struct kube_client_opts ao = {.qps = 0, .max_retries = -1};
    struct kube_client *alice = NULL;
    struct kube_err e = {0};
    (void)state;
    grant_all_but_pod_get();
    IT_OK(it_client_new_user("alice", &ao, &alice, &e), &e);
    o.client = alice;
    o.child_cache_selector = "!" HIDDEN_LABEL;
    restart_manager(&o);
    create_hidden_pod_sandbox("unread-0");
    assert_int_equal(it_wait(pod_exists, "unread-0", WAIT), 0);
    assert_int_equal(it_wait(says_unreadable, "unread-0", WAIT), 0);
    restart_manager(&mgr_opts);
    kube_client_free(alice);
    IT_OK(kube_delete(c, &API_RES_SANDBOXES, ns, "unread-0", &e), &e);
}

static bool svc_labelled(void *ctx)
{
    json_t *svc = it_obj_get(c, &KUBE_RES_SERVICES, ns, ctx);
    bool ok = svc && kube_obj_label(svc, SB_LABEL_NAME_HASH);
    json_decref(svc);
    return ok;
}

/* With a child cache that selects on the tracking label (as --cache-label-selectors), a
 * Service of ours that lost the label leaves the cache: each pass's create is refused and
 * the read finds it ours. The label is now put back (before: never, and the create, its
 * refusal and the read came back every few seconds for good). */
static void test_unlabelled_service_repaired(void **state)
{
    struct ctrl_opts o = mgr_opts;
    struct kube_err e = {0};
    (void)state;
    o.child_cache_selector = SB_LABEL_NAME_HASH;
    restart_manager(&o);
    create(&API_RES_SANDBOXES,
           json_pack("{s:s, s:s, s:{s:s}, s:{s:b, s:{s:{s:[{s:s, s:s}]}}}}", "apiVersion",
                     SB_API_VERSION, "kind", SB_KIND, "metadata", "name", "relabel-0", "spec",
                     "service", 1, "podTemplate", "spec", "containers", "name", "runtime", "image",
                     "registry.local/runtime:1"));
    wait_ready(&API_RES_SANDBOXES, "relabel-", 1);
    assert_true(svc_labelled("relabel-0"));
    json_t *unlabel = json_pack("{s:{s:{s:n}}}", "metadata", "labels", SB_LABEL_NAME_HASH);
    json_t *touch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "touch", "1");
    IT_OK(it_merge_patch(c, &KUBE_RES_SERVICES, ns, "relabel-0", NULL, unlabel, &e), &e);
    assert_false(svc_labelled("relabel-0"));
    /* a pass comes with the Sandbox's next change */
    IT_OK(it_merge_patch(c, &API_RES_SANDBOXES, ns, "relabel-0", NULL, touch, &e), &e);
    json_decref(unlabel);
    json_decref(touch);
    assert_int_equal(it_wait(svc_labelled, "relabel-0", 15 * USEC_PER_SEC), 0);
    IT_OK(kube_delete(c, &API_RES_SANDBOXES, ns, "relabel-0", &e), &e);
    assert_int_equal(it_wait_gone(c, &API_RES_SANDBOXES, ns, "relabel-0", WAIT), 0);
    restart_manager(&mgr_opts);
}

static void restart_hiding_children_of(const char *name, char *sel, size_t size)
{
    char hash[SB_HASH_LEN + 1];
    struct ctrl_opts o = mgr_opts;
    sb_name_hash(name, hash);
    (void)snprintf(sel, size, "%s!=%s", SB_LABEL_NAME_HASH, hash);
    o.child_cache_selector = sel;
    restart_manager(&o);
}

static void set_mode(const char *name, const char *mode)
{
    struct kube_err e = {0};
    json_t *patch = json_pack("{s:{s:s}}", "spec", "operatingMode", mode);
    IT_OK(kube_patch(c, &API_RES_SANDBOXES, ns, name, KUBE_PATCH_MERGE, patch, NULL, &e), &e);
    json_decref(patch);
}

/* Prints and bounds (creates_allowed) the creates of kids-0's three children. */
static void check_child_creates(const char *when, usec_t start)
{
    unsigned svc = count_of("POST services"), pvc = count_of("POST persistentvolumeclaims"),
             pod = count_of("POST pods"), most = creates_allowed(start);
    printf("# creates for a Sandbox %s: %u Service, %u PVC, %u Pod (at most %u each after "
           "%.1f s)\n",
           when, svc, pvc, pod, most, (double)(clock_now() - start) / USEC_PER_SEC);
    assert_true(svc <= most);
    assert_true(pvc <= most);
    assert_true(pod <= most);
}

/* The same for a Sandbox's Service and PVC (and Pod): the caches leave out every child of
 * Sandbox kids-0 (their tracking label's value is its name's hash). Its passes use the
 * children they created instead of creating them again, to be refused with AlreadyExists
 * and show the refusal in the Sandbox's status until the cache caught up. */
static void test_created_children_not_cached(void **state)
{
    char sel[128];
    struct kube_err e = {0};
    json_t *sb;
    const char *reason;
    (void)state;
    restart_hiding_children_of("kids-0", sel, sizeof(sel));
    clock_sleep(SETTLE);
    counts_reset();
    usec_t start = clock_now();
    create(&API_RES_SANDBOXES,
           json_pack("{s:s, s:s, s:{s:s}, s:{s:b, s:[{s:{s:s}, s:{s:[s], s:{s:{s:s}}}}], "
                     "s:{s:{s:[{s:s, s:s}]}}}}",
                     "apiVersion", SB_API_VERSION, "kind", SB_KIND, "metadata", "name", "kids-0",
                     "spec", "service", 1, "volumeClaimTemplates", "metadata", "name", "data",
                     "spec", "accessModes", "ReadWriteOnce", "resources", "requests", "storage",
                     "1Gi", "podTemplate", "spec", "containers", "name", "runtime", "image",
                     "registry.local/runtime:1"));
    assert_int_equal(it_wait(pod_exists, "kids-0", WAIT), 0);
    touch_five_times("kids-0");
    check_child_creates("reconciled 5 times before its children were cached", start);
    /* Once the records expire, each child costs a refused create and a read per record's
     * life (it was a create retried with back-off for the Service and the PVC: a dozen in
     * half a second), and the refusal is not shown as an error. */
    assert_int_equal(it_wait(two_creates, "POST services", WAIT), 0);
    assert_int_equal(it_wait(two_creates, "POST persistentvolumeclaims", WAIT), 0);
    clock_sleep(USEC_PER_SEC);
    check_child_creates("past the first records' life", start);
    sb = it_obj_get(c, &API_RES_SANDBOXES, ns, "kids-0");
    reason = sb_cond_reason(json_object_get(sb, "status"), SB_COND_READY);
    assert_string_not_equal(reason ?: "", SB_R_RECONCILER_ERROR);
    json_decref(sb);
    IT_OK(kube_delete(c, &API_RES_SANDBOXES, ns, "kids-0", &e), &e);
}

static bool one_pod_delete(void *ctx)
{
    (void)ctx;
    return count_of("DELETE pods") >= 1;
}

/* Suspending deletes the Pod the record stands for, and marks the record deleted (it
 * counts while suspended only): resumed at once, the Sandbox creates its Pod again
 * straight away, not once the record has expired (SB_MEMO_TTL after the first create).
 * The cache never shows nap-0's Pod. */
static void test_created_pod_suspended(void **state)
{
    char sel[128];
    struct kube_err e = {0};
    usec_t t0, resumed, second;
    (void)state;
    restart_hiding_children_of("nap-0", sel, sizeof(sel));
    clock_sleep(SETTLE);
    counts_reset();
    t0 = clock_now();
    create(&API_RES_SANDBOXES,
           json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:{s:[{s:s, s:s}]}}}}", "apiVersion",
                     SB_API_VERSION, "kind", SB_KIND, "metadata", "name", "nap-0", "spec",
                     "podTemplate", "spec", "containers", "name", "runtime", "image",
                     "registry.local/runtime:1"));
    assert_int_equal(it_wait(pod_exists, "nap-0", WAIT), 0);
    set_mode("nap-0", "Suspended");
    assert_int_equal(it_wait_gone(c, &KUBE_RES_PODS, ns, "nap-0", WAIT), 0);
    /* the Pod can be seen gone before the DELETE's answer is counted */
    assert_int_equal(it_wait(one_pod_delete, NULL, WAIT), 0);
    assert_int_equal(count_of("DELETE pods"), 1);
    set_mode("nap-0", "Running");
    resumed = clock_now();
    assert_int_equal(it_wait(two_creates, "POST pods", WAIT), 0);
    second = clock_now();
    printf("# resumed %.2f s after the create; Pod created again %.2f s later (record's "
           "life %.0f s)\n",
           (double)(resumed - t0) / USEC_PER_SEC, (double)(second - resumed) / USEC_PER_SEC,
           (double)SB_MEMO_TTL / USEC_PER_SEC);
    /* Had the record counted after the resume, not before it expires (t0 + SB_MEMO_TTL;
     * checked: 3.04 s after the resume). A slow machine that resumed late cannot tell; it gets 2 s.
     */
    if (resumed - t0 < SB_MEMO_TTL - 2 * USEC_PER_SEC)
        assert_true(second < t0 + SB_MEMO_TTL);
    assert_int_equal(count_of("POST pods"), 2);
    IT_OK(kube_delete(c, &API_RES_SANDBOXES, ns, "nap-0", &e), &e);
}

static atomic_bool side_busy; /* the side writes' gate of test_side_write_claim_gone */

static bool side_gate_busy(void *ctx)
{
    (void)ctx;
    return atomic_load(&side_busy);
}

static bool claim_gone(void *ctx)
{
    json_t *cl = it_obj_get(c, &API_RES_SANDBOXCLAIMS, ns, ctx);
    json_decref(cl);
    return cl == NULL;
}

static void delete_claim(const char *name)
{
    struct kube_err e = {0};
    IT_OK(kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, name, &e), &e);
    if (it_wait(claim_gone, (void *)name, WAIT) < 0)
        fail_msg("claim %s still there", name);
}

/* A claim deleted while its first-ready annotations wait (they wait while claims are
 * served) gets no PATCH: nothing is left to annotate, and the server would refuse it with
 * NotFound, as it did for a third of the claims of a steady 30 a second with a 5 s
 * dwell. Nor does a claim made again under the same name get the first one's moment: the
 * held patch names the first claim's UID. A claim that stays gets its annotations once
 * the gate opens: 2 PATCHes, stays-0 and the second again-0 (3 when the UID is not
 * checked, 4 when nothing is). The gate is shut once the pool is ready (it holds the
 * Events too, and under ASan a pool filled behind it was not ready within WAIT). */
static void test_side_write_claim_gone(void **state)
{
    struct yield_gate g = {.busy = side_gate_busy, .max_wait = 10 * WAIT};
    struct ctrl_opts o = mgr_opts;
    struct kube_err e = {0};
    json_t *bad;
    (void)state;
    o.ext.side_gate = &g;
    atomic_store(&side_busy, false);
    restart_manager(&o);
    assert_int_equal(it_wait(pool_ready, NULL, WAIT), 0);
    clock_sleep(SETTLE);
    atomic_store(&side_busy, true);
    counts_reset();
    create(&API_RES_SANDBOXCLAIMS, it_claim_new("gone-0", "pool"));
    create(&API_RES_SANDBOXCLAIMS, it_claim_new("stays-0", "pool"));
    create(&API_RES_SANDBOXCLAIMS, it_claim_new("again-0", "pool"));
    wait_ready(&API_RES_SANDBOXCLAIMS, "gone-", 1);
    wait_ready(&API_RES_SANDBOXCLAIMS, "stays-", 1);
    wait_ready(&API_RES_SANDBOXCLAIMS, "again-", 1);
    delete_claim("gone-0");
    delete_claim("again-0");
    create(&API_RES_SANDBOXCLAIMS, it_claim_new("again-0", "pool"));
    wait_ready(&API_RES_SANDBOXCLAIMS, "again-", 1);
    clock_sleep(USEC_PER_SEC); /* the controller's cache sees the deletion */
    assert_int_equal(count_of("PATCH sandboxclaims"), 0);
    atomic_store(&side_busy, false);
    assert_int_equal(it_wait(has_first_ready, "stays-0", WAIT), 0);
    assert_int_equal(it_wait(has_first_ready, "again-0", WAIT), 0);
    clock_sleep(SETTLE);
    assert_int_equal(count_of("PATCH sandboxclaims"), 2);
    /* and the server keeps the UID: a patch naming another is refused */
    bad = json_pack("{s:{s:s}}", "metadata", "uid", "00000000-0000-0000-0000-000000000000");
    assert_true(it_merge_patch(c, &API_RES_SANDBOXCLAIMS, ns, "stays-0", NULL, bad, &e) < 0);
    printf("# a patch with another UID: %ld %s\n", e.http_status, e.reason);
    assert_int_equal(e.http_status, 422);
    json_decref(bad);
}

static bool mgr_leads(void *ctx)
{
    (void)ctx;
    return ctrl_manager_leading(mgr);
}

static bool mgr_follows(void *ctx)
{
    return !mgr_leads(ctx);
}

/* Lease ns/name taken by another holder for a minute, as a successor's takeover would. */
static void steal_lease(const char *name)
{
    char now[40];
    struct kube_err e = {0};
    clock_format_rfc3339(clock_wall_now(), now, sizeof(now));
    json_t *p = json_pack("{s:{s:s, s:s, s:s, s:i}}", "spec", "holderIdentity", "thief",
                          "acquireTime", now, "renewTime", now, "leaseDurationSeconds", 60);
    IT_OK(it_merge_patch(c, &KUBE_RES_LEASES, ns, name, NULL, p, &e), &e);
    json_decref(p);
}

/* A leader whose Lease another instance took while a claim's first-ready annotation
 * and its Event wait (they wait while claims are served) writes neither when it stops:
 * the successor may lead by then, and it writes the annotation itself (restored from
 * the Ready condition). A stop while leading writes what waits (the other tests'
 * restarts). Before, the stop wrote them after leadership was gone: 1 PATCH, 1 POST. */
static void test_side_writes_dropped_on_lost_lease(void **state)
{
    struct yield_gate g = {.busy = side_gate_busy, .max_wait = 10 * WAIT};
    struct ctrl_opts o = mgr_opts;
    (void)state;
    o.ext.side_gate = &g;
    o.leader_elect = true;
    o.lease_ns = ns;
    o.lease_name = "wr-lost";
    o.lease_duration = 4 * USEC_PER_SEC;
    o.renew_deadline = 3 * USEC_PER_SEC;
    o.retry_period = USEC_PER_SEC / 2;
    atomic_store(&side_busy, false);
    restart_manager(&o);
    assert_int_equal(it_wait(mgr_leads, NULL, WAIT), 0);
    assert_int_equal(it_wait(pool_ready, NULL, WAIT), 0);
    clock_sleep(SETTLE);
    atomic_store(&side_busy, true);
    counts_reset();
    create(&API_RES_SANDBOXCLAIMS, it_claim_new("lost-0", "pool"));
    wait_ready(&API_RES_SANDBOXCLAIMS, "lost-", 1);
    clock_sleep(SETTLE);
    assert_int_equal(count_of("PATCH sandboxclaims"), 0); /* held */
    steal_lease("wr-lost");
    assert_int_equal(it_wait(mgr_follows, NULL, WAIT), 0);
    ctrl_manager_stop(mgr);
    assert_int_equal(count_of("PATCH sandboxclaims"), 0);
    assert_false(has_first_ready("lost-0"));
    /* nor the Events held with it (the claim's SandboxAdopted) */
    assert_int_equal(count_of("POST events") + count_of("PATCH events"), 0);
    /* the next leader (no election from here on) restores it */
    atomic_store(&side_busy, false);
    restart_manager(&mgr_opts);
    assert_int_equal(it_wait(has_first_ready, "lost-0", WAIT), 0);
}

static atomic_bool claims_served; /* the gate of test_pod_meta_held */

static bool gate_busy(void *ctx)
{
    (void)ctx;
    return atomic_load(&claims_served);
}

/* The Pod of Sandbox ctx no longer carries the pool's label (its metadata patch went). */
static bool pod_left_pool(void *ctx)
{
    json_t *pod = it_obj_get(c, &KUBE_RES_PODS, ns, ctx);
    bool ok = pod && !kube_obj_label(pod, SB_LABEL_WARM_POOL);
    json_decref(pod);
    return ok;
}

/* The controller's answer to a Pod PATCH was counted. */
static bool one_pod_patch(void *ctx)
{
    (void)ctx;
    return count_of("PATCH pods") >= 1;
}

/* While the gate says claims are being served, the adopted Sandbox's Pod keeps the pool's
 * label: its metadata patch is held (the Sandbox comes back every 250 ms and is held
 * again); once the gate opens it is written, once. */
/* The manager started again with the Pod metadata patches' gate of the tests (open),
 * once the pool is ready. */
static void restart_meta_gated(void)
{
    static const struct yield_gate g = {.busy = gate_busy, .max_wait = 10 * WAIT};
    struct ctrl_opts o = mgr_opts;
    o.pod_meta_gate = &g;
    atomic_store(&claims_served, false);
    restart_manager(&o);
    assert_int_equal(it_wait(pool_ready, NULL, WAIT), 0);
}

static void test_pod_meta_held(void **state)
{
    json_t *pod;
    char *sb;
    (void)state;
    restart_meta_gated();
    /* the last test's claim: its patch may have been held when that manager stopped */
    sb = claim_sandbox("keep-0");
    assert_int_equal(it_wait(pod_left_pool, sb, WAIT), 0);
    xfree(sb);
    clock_sleep(SETTLE);
    atomic_store(&claims_served, true);
    counts_reset();
    create(&API_RES_SANDBOXCLAIMS, it_claim_new("held-0", "pool"));
    wait_ready(&API_RES_SANDBOXCLAIMS, "held-", 1);
    sb = claim_sandbox("held-0");
    clock_sleep(SETTLE);
    pod = it_obj_get(c, &KUBE_RES_PODS, ns, sb);
    assert_non_null(kube_obj_label(pod, SB_LABEL_WARM_POOL));
    json_decref(pod);
    assert_int_equal(count_of("PATCH pods"), 0);
    atomic_store(&claims_served, false);
    assert_int_equal(it_wait(pod_left_pool, sb, WAIT), 0);
    assert_int_equal(it_wait(one_pod_patch, NULL, WAIT), 0); /* its answer counted */
    assert_int_equal(count_of("PATCH pods"), 1);
    xfree(sb);
}

/* The Sandbox ctx has no owner references left (the orphaning deletion's rewrite). */
static bool sandbox_orphaned(void *ctx)
{
    json_t *sb = it_obj_get(c, &API_RES_SANDBOXES, ns, ctx);
    bool ok = sb && json_array_size(kube_obj_path(sb, "metadata.ownerReferences")) == 0;
    json_decref(sb);
    return ok;
}

/* claim ctx is gone from the API server. */
static bool claim_absent(void *ctx)
{
    json_t *cl = it_obj_get(c, &API_RES_SANDBOXCLAIMS, ns, ctx);
    json_decref(cl);
    return cl == NULL;
}

/* A claim deleted while its adoption's Pod metadata patch is held gets no patch: its
 * Sandbox and Pod are on their way out. The claim is held in deletion by a finalizer of
 * the test's, so that nothing deletes the Sandbox while the gate opens: without the check
 * the patch is written then. A claim deleted with propagationPolicy=Orphan leaves its
 * Sandbox, whose Pod then does get the patch (the owner references' rewrite brings the
 * Sandbox back with no owner). */
static void test_pod_meta_owner_gone(void **state)
{
    struct kube_err e = {0};
    json_t *cl, *pod;
    char *sb;
    (void)state;
    restart_meta_gated();
    clock_sleep(SETTLE);
    atomic_store(&claims_served, true);
    cl = it_claim_new("short-0", "pool");
    json_object_set_new(json_object_get(cl, "metadata"), "finalizers",
                        json_pack("[s]", "test.agents.x-k8s.io/hold"));
    create(&API_RES_SANDBOXCLAIMS, cl);
    wait_ready(&API_RES_SANDBOXCLAIMS, "short-", 1);
    sb = claim_sandbox("short-0");
    IT_OK(kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, "short-0", &e), &e);
    clock_sleep(SETTLE);
    counts_reset();
    atomic_store(&claims_served, false);
    clock_sleep(SETTLE); /* the held pass came back every 250 ms; none writes */
    assert_int_equal(count_of("PATCH pods"), 0);
    pod = it_obj_get(c, &KUBE_RES_PODS, ns, sb);
    assert_non_null(kube_obj_label(pod, SB_LABEL_WARM_POOL));
    json_decref(pod);
    cl = json_pack("{s:{s:n}}", "metadata", "finalizers");
    IT_OK(it_merge_patch(c, &API_RES_SANDBOXCLAIMS, ns, "short-0", NULL, cl, &e), &e);
    json_decref(cl);
    assert_int_equal(it_wait(claim_absent, "short-0", WAIT), 0);
    xfree(sb);

    atomic_store(&claims_served, true);
    create(&API_RES_SANDBOXCLAIMS, it_claim_new("orphan-0", "pool"));
    wait_ready(&API_RES_SANDBOXCLAIMS, "orphan-", 1);
    sb = claim_sandbox("orphan-0");
    cl = it_obj_get(c, &API_RES_SANDBOXCLAIMS, ns, "orphan-0");
    IT_OK(kube_delete_obj(c, &API_RES_SANDBOXCLAIMS, cl, false, "Orphan", &e), &e);
    json_decref(cl);
    assert_int_equal(it_wait(sandbox_orphaned, sb, WAIT), 0);
    counts_reset();
    atomic_store(&claims_served, false);
    assert_int_equal(it_wait(pod_left_pool, sb, WAIT), 0);
    /* the Pod can be seen patched before the PATCH's answer is counted */
    assert_int_equal(it_wait(one_pod_patch, NULL, WAIT), 0);
    assert_int_equal(count_of("PATCH pods"), 1);
    IT_OK(kube_delete(c, &API_RES_SANDBOXES, ns, sb, &e), &e);
    xfree(sb);
}

/* Deleting the namespace (the namespace controller of hack/apiserver.sh removes the Pods
 * first, then the rest): the Sandboxes try to put their Pods back and are refused, and
 * from then on the controller writes nothing more there. Before, each refusal changed
 * the Sandboxes' and claims' status text, and every status write brought its object back
 * through its own event: thousands of writes for a 300-claim namespace. */
static void test_namespace_deletion(void **state)
{
    struct server_snap before;
    unsigned sandboxes, writes, creates;
    struct kube_err e = {0};
    json_t *list = NULL;
    usec_t t0;
    (void)state;
    IT_OK(kube_list_all(c, &API_RES_SANDBOXES, ns, NULL, &list, &e), &e);
    sandboxes = (unsigned)json_array_size(json_object_get(list, "items"));
    json_decref(list);
    clock_sleep(SETTLE);
    counts_reset();
    server_snap(&before);
    t0 = clock_now();
    assert_int_equal(it_ns_delete(c, ns, 120 * USEC_PER_SEC), 0);
    printf("# namespace with %u Sandboxes and %d claims gone after %.1f s\n", sandboxes, N,
           (double)(clock_now() - t0) / USEC_PER_SEC);
    ns[0] = '\0'; /* nothing left for the teardown */
    report("Sandbox, namespace deleted", sandboxes, &before);
    writes = count_of("PUT sandboxes/status") + count_of("PATCH sandboxes") +
             count_of("PATCH sandboxclaims/status") + count_of("PATCH sandboxclaims") +
             count_of("PATCH sandboxwarmpools/status");
    creates = count_of("POST pods") + count_of("POST sandboxes");
    /* the Pods went while the Sandboxes were there: their reconciles saw it */
    assert_true(count_of("POST pods") >= 1);
    /* A write can precede the first refusal (a Sandbox reconciled before any create was
     * refused); far fewer than one per object. */
    assert_true(writes <= (sandboxes + N) / 8);
    /* refused creates: the ones in flight when the first refusal came, then about one
     * per 2 s (the rest are answered without the server) */
    assert_true(creates <= 40 + (unsigned)((clock_now() - t0) / USEC_PER_SEC));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cold_sandboxes),
        cmocka_unit_test(test_portless_service_not_patched),
        cmocka_unit_test(test_pool_fill),
        cmocka_unit_test(test_warm_claims),
        cmocka_unit_test(test_pool_passes_coalesced),
        cmocka_unit_test(test_first_ready_restored),
        cmocka_unit_test(test_deferred_detail_is_written),
        cmocka_unit_test(test_write_through_flags),
        cmocka_unit_test(test_created_pod_not_cached),
        cmocka_unit_test(test_created_children_not_cached),
        cmocka_unit_test(test_existing_child_unreadable),
        cmocka_unit_test(test_created_pod_suspended),
        cmocka_unit_test(test_side_write_claim_gone),
        cmocka_unit_test(test_side_writes_dropped_on_lost_lease),
        cmocka_unit_test(test_pod_meta_held),
        cmocka_unit_test(test_pod_meta_owner_gone),
        cmocka_unit_test(test_unlabelled_service_repaired),
        cmocka_unit_test(test_namespace_deletion),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
