/* SPDX-License-Identifier: Apache-2.0 */
#include "controller/ext_metrics.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/extensions.h"
#include "as_version.h"
#include "common/buf.h"
#include "common/metrics.h"
#include "common/xalloc.h"
#include "controller/ext_int.h"
#include "controller/ext_names.h"
#include "controller/sandbox_names.h"
#include "kube/obj.h"
#include "kube/store.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Upstream's buckets: claim latencies 100 ms .. 4 min, Sandbox creation 50 ms .. 10 min. */
static const double claim_ms[] = {100,  250,  500,   750,   1000,  1250,   1500,  2000,
                                  2500, 5000, 10000, 30000, 60000, 120000, 240000};
static const double creation_ms[] = {50,    100,   250,   500,    1000,   2500,   5000,
                                     10000, 30000, 60000, 120000, 240000, 300000, 600000};

/* Ours, finer: warm claims are Ready in milliseconds, below upstream's first bucket. */
static const double fine_ms[] = {1,    2,    3,    5,     7.5,   10,    15,     20,    30,   40,
                                 50,   75,   100,  150,   200,   300,   500,    750,   1000, 1500,
                                 2000, 3000, 5000, 10000, 30000, 60000, 120000, 240000};

#ifndef AS_BUILD_DATE
#define AS_BUILD_DATE "unknown"
#endif
#if defined(__x86_64__)
#define AS_PLATFORM "linux/amd64"
#elif defined(__aarch64__)
#define AS_PLATFORM "linux/arm64"
#else
#define AS_PLATFORM "linux/unknown"
#endif

int ext_metrics_render_build_info(struct buf *out)
{
    static const char *const names[] = {"git_version", "git_commit", "build_date", "go_version",
                                        "compiler",    "platform",   NULL};
    /* A C binary: go_version names no Go release; compiler is the C compiler. */
    static const char *const values[] = {"v" AS_VERSION, AS_GIT_COMMIT,      AS_BUILD_DATE,
                                         "none",         "gcc " __VERSION__, AS_PLATFORM};
    int r = metrics_write_header(
        out, "agent_sandbox_build_info",
        "Agent sandbox controller build metadata exposed as labels with a constant value of 1.",
        METRIC_GAUGE);
    return r < 0 ? r : metrics_write_sample(out, "agent_sandbox_build_info", names, values, 1);
}

void ext_metrics_register(struct metrics_registry *reg, struct ext_metrics *m)
{
    static const char *const l_lat[] = {"launch_type", "sandbox_template", NULL};
    static const char *const l_sb[] = {"namespace", "launch_type", "sandbox_template", NULL};
    static const char *const l_create[] = {
        "namespace",     "sandbox_template", "launch_type", "warmpool_name",
        "pod_condition", "created_by",       NULL};
    static const char *const l_pool[] = {"namespace", "pool", NULL};
    memset(m, 0, sizeof(*m));
    if (!reg)
        return;
    m->webhook_latency = metrics_histogram(
        reg, "agent_sandbox_claim_startup_latency_ms",
        "Webhook first observation of a claim (" EXT_ANN_WEBHOOK_OBSERVED
        ") to claim Ready, in milliseconds; only claims carrying that annotation.",
        l_lat, claim_ms, ARRAY_LEN(claim_ms));
    m->ctrl_latency = metrics_histogram(
        reg, "agent_sandbox_claim_controller_startup_latency_ms",
        "Controller first observation of a claim to claim Ready, in milliseconds.", l_lat, claim_ms,
        ARRAY_LEN(claim_ms));
    m->ctrl_latency_fine = metrics_histogram(
        reg, "agent_sandbox_claim_controller_startup_latency_fine_ms",
        "As agent_sandbox_claim_controller_startup_latency_ms, with buckets from 1 ms.", l_lat,
        fine_ms, ARRAY_LEN(fine_ms));
    m->client_latency = metrics_histogram(
        reg, "agent_sandbox_client_claim_startup_latency_ms",
        "Client request annotation of a claim to claim Ready, in milliseconds (may include "
        "clock skew).",
        l_lat, claim_ms, ARRAY_LEN(claim_ms));
    m->creation_latency = metrics_histogram(
        reg, "agent_sandbox_creation_latency_ms",
        "Sandbox creation to its Ready condition, in milliseconds (for warm launches: the "
        "pool's provisioning time).",
        l_sb, creation_ms, ARRAY_LEN(creation_ms));
    m->creation_total =
        metrics_counter(reg, "agent_sandbox_claim_creation_total",
                        "Sandboxes created or adopted for a SandboxClaim.", l_create);
    m->pool_replicas = metrics_gauge(reg, "agent_sandbox_warm_pool_replicas",
                                     "Active members of a warm pool.", l_pool);
    m->pool_ready = metrics_gauge(reg, "agent_sandbox_warm_pool_ready_replicas",
                                  "Ready members of a warm pool.", l_pool);
    m->pool_creates = metrics_counter(reg, "agent_sandbox_warm_pool_creates_total",
                                      "Sandboxes created by a warm pool.", l_pool);
    m->adopt_waits = metrics_counter(reg, "agent_sandbox_claim_adoption_waits_total",
                                     "Warm adoptions that waited for a place among those in flight "
                                     "(--claim-adoption-concurrency).",
                                     NULL);
}

static const char *template_of(const json_t *sb, const char *none)
{
    const char *t = kube_obj_annotation(sb, SB_ANN_TEMPLATE_REF);
    return t && *t ? t : none;
}

static const char *created_by(const json_t *obj)
{
    const char *v = sb_created_by_normalize(kube_obj_label(obj, SB_LABEL_CREATED_BY));
    return v ? v : "unknown";
}

static const char *launch_of(const json_t *sb)
{
    const char *lt = kube_obj_label(sb, SB_LABEL_LAUNCH_TYPE);
    return lt && strcmp(lt, "warm") == 0 ? "warm" : "cold";
}

void ext_metrics_creation(const struct ext_metrics *m, const json_t *claim, const json_t *sb,
                          const char *launch, const char *pool)
{
    const char *ns = kube_obj_namespace(claim);
    if (!m->creation_total)
        return;
    metric_inc(m->creation_total,
               (const char *const[]){
                   ns ? ns : "", template_of(sb, EXT_METRICS_NO_TEMPLATE), launch, pool ? pool : "",
                   kube_obj_condition_true(sb, SB_COND_READY) ? "ready" : "not_ready",
                   created_by(claim)});
}

/* Observes now - the RFC 3339 time in text (NULL or unparseable: nothing). */
static void observe_since(struct metric *m, const char *const *lv, const char *text, usec_t now)
{
    usec_t t;
    if (m && text && clock_parse_rfc3339(text, &t) >= 0 && now >= t)
        metric_observe(m, lv, (double)(now - t) / (double)USEC_PER_MSEC);
}

static void observe_creation(const struct ext_metrics *m, const json_t *sb)
{
    const json_t *ready = kube_obj_condition(sb, SB_COND_READY);
    const char *at = json_string_value(json_object_get(ready, "lastTransitionTime"));
    const char *ns = kube_obj_namespace(sb);
    usec_t t;
    if (!m->creation_latency || !kube_obj_condition_true(sb, SB_COND_READY) || !at ||
        clock_parse_rfc3339(at, &t) < 0)
        return;
    observe_since(m->creation_latency,
                  (const char *const[]){ns ? ns : "", launch_of(sb),
                                        template_of(sb, EXT_METRICS_NO_TEMPLATE)},
                  kube_obj_path_str(sb, "metadata.creationTimestamp"), t);
}

void ext_metrics_first_ready(const struct ext_metrics *m, const json_t *claim, const json_t *sb,
                             usec_t seen, usec_t now)
{
    const char *lv[] = {launch_of(sb), template_of(sb, EXT_METRICS_NO_TEMPLATE), NULL};
    if (seen && now >= seen && m->ctrl_latency) {
        metric_observe(m->ctrl_latency, lv, (double)(now - seen) / (double)USEC_PER_MSEC);
        metric_observe(m->ctrl_latency_fine, lv, (double)(now - seen) / (double)USEC_PER_MSEC);
    }
    observe_since(m->client_latency, lv, kube_obj_annotation(claim, EXT_ANN_CLIENT_REQ), now);
    observe_since(m->webhook_latency, lv, kube_obj_annotation(claim, EXT_ANN_WEBHOOK_OBSERVED),
                  now);
    observe_creation(m, sb);
}

/* ---- agent_sandboxes: counted from the cache at scrape time ---------------------------- */

#define SB_LABELS 7
#define SEP       '\x1f' /* cannot occur in label values taken from names and labels */

static const char *owned_by(const json_t *sb)
{
    const json_t *ref = kube_obj_controller_ref(sb);
    const char *api = json_string_value(json_object_get(ref, "apiVersion"));
    const char *kind = json_string_value(json_object_get(ref, "kind"));
    size_t glen = strlen(SB_EXT_GROUP);
    if (!api || !kind || strncmp(api, SB_EXT_GROUP, glen) != 0 || api[glen] != '/')
        return "None";
    if (strcmp(kind, EXT_KIND_CLAIM) == 0 || strcmp(kind, EXT_KIND_POOL) == 0)
        return kind;
    return "None";
}

static char *tuple_of(const json_t *sb)
{
    const json_t *ready = kube_obj_condition(sb, SB_COND_READY);
    const char *reason = json_string_value(json_object_get(ready, "reason"));
    const char *ns = kube_obj_namespace(sb);
    const char *v[SB_LABELS] = {
        ns ? ns : "",
        kube_obj_condition_true(sb, SB_COND_READY) ? "true" : "false",
        reason && strcmp(reason, SB_R_EXPIRED) == 0 ? "true" : "false",
        launch_of(sb),
        template_of(sb, "unknown"),
        owned_by(sb),
        created_by(sb),
    };
    struct buf b;
    buf_init(&b, METRICS_MAX_LABEL_BYTES); /* longer: cut, still one tuple */
    for (size_t i = 0; i < SB_LABELS; i++) {
        for (const char *p = v[i]; *p; p++)
            buf_putc(&b, *p == SEP ? '_' : *p);
        buf_putc(&b, i + 1 < SB_LABELS ? SEP : '\0');
    }
    return buf_steal(&b);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int write_tuple(struct buf *out, char *tuple, size_t count)
{
    static const char *const names[] = {
        "namespace",        "ready_condition", "expired",    "launch_type",
        "sandbox_template", "owned_by",        "created_by", NULL};
    const char *v[SB_LABELS];
    char *p = tuple;
    for (size_t i = 0; i < SB_LABELS; i++) {
        char *end = strchr(p, SEP);
        v[i] = p;
        if (end) {
            *end = '\0';
            p = end + 1;
        }
    }
    return metrics_write_sample(out, "agent_sandboxes", names, v, (double)count);
}

int ext_metrics_render_sandboxes(struct kube_store *store, struct buf *out)
{
    struct kube_objv all = {0};
    char **t;
    size_t n;
    int r;
    if (store)
        kube_store_list(store, &all);
    n = all.n;
    t = xcalloc(n ? n : 1, sizeof(*t));
    for (size_t i = 0; i < n; i++)
        t[i] = tuple_of(all.v[i]);
    kube_objv_done(&all);
    qsort(t, n, sizeof(*t), cmp_str);
    r = metrics_write_header(out, "agent_sandboxes",
                             "Monitor the point-in-time number of sandboxes in the cluster.",
                             METRIC_GAUGE);
    for (size_t i = 0, j; i < n && r >= 0; i = j) {
        for (j = i + 1; j < n && strcmp(t[i], t[j]) == 0; j++)
            ;
        r = write_tuple(out, t[i], j - i);
    }
    for (size_t i = 0; i < n; i++)
        xfree(t[i]);
    xfree(t);
    return r;
}
