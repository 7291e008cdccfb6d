/* SPDX-License-Identifier: Apache-2.0 */
/* Resume on traffic: hold, patch once, forward when Ready (see resume_gate.h). */
#include "router/resume_gate.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/res.h"
#include "api/sandbox.h"
#include "common/dlist.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/map.h"
#include "common/metrics.h"
#include "common/xalloc.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "kube/res.h"
#include "kube/store.h"
#include "router/resume_worker.h"
#include "router/route.h"

struct resume_waiter {
    struct resume_waiter *prev, *next;
    struct entry *e;
    resume_wake_fn *fn;
    void *ctx;
    usec_t start, limit; /* held at start, for at most limit */
    bool starting;       /* a RESUME_START hold: answered 503, not 504, at its limit */
};

struct entry {
    struct resume_gate *g;
    char ns[ROUTE_NAME_MAX + 1], name[ROUTE_NAME_MAX + 1];
    struct resume_waiter *head;
    size_t n;
    usec_t first;           /* when the first request of this episode was held */
    bool resume;            /* a request of this episode was held for a resume */
    bool patching, patched; /* our patch is running / succeeded */
    bool orphan;            /* removed from the map while patching: done frees it */
    usec_t patched_at;      /* when it succeeded (the entry stays RESUME_GRACE after) */
    int64_t base_gen;       /* the Sandbox's generation when the patch was sent */
    char uid[64];           /* and its UID */
    int patch_rc;
    char err[256];
};

struct resume_gate {
    struct resume_gate_opts o;
    uv_timer_t timer;
    struct map *entries; /* "ns/name" -> struct entry * */
    size_t holding;
    size_t start_holding; /* of holding: RESUME_START holds, at most max_total / 4 */
    struct resume_gate_stats st;
    struct metric *resumes, *resume_time, *held_now, *held_total;
};

/* ---- Classification -------------------------------------------------------------------- */

static bool cond_is(const json_t *sb, const char *type, const char *status)
{
    const char *s = json_string_value(json_object_get(kube_obj_condition(sb, type), "status"));
    return s && strcmp(s, status) == 0;
}

/* Ready=False reasons that mean "coming up" rather than "broken". */
static bool starting(const json_t *sb)
{
    const json_t *c = kube_obj_condition(sb, SB_COND_READY);
    const char *r = json_string_value(json_object_get(c, "reason"));
    return !c || !r || strcmp(r, SB_R_DEPS_NOT_READY) == 0 || strcmp(r, SB_R_SUSPENDED) == 0 ||
           strcmp(r, SB_R_DEPS_READY) == 0;
}

static bool ready(const json_t *sb)
{
    return cond_is(sb, SB_COND_READY, "True") &&
           json_array_size(kube_obj_path(sb, "status.podIPs")) > 0;
}

enum resume_class resume_classify(const json_t *sb)
{
    const json_t *pol = kube_obj_path(sb, "spec.idlePolicy");
    const char *mode = kube_obj_path_str(sb, "spec.operatingMode");
    bool suspended = mode && strcmp(mode, SB_MODE_SUSPENDED) == 0;
    if (!sb || kube_obj_deleting(sb))
        return RESUME_PASS;
    if (json_is_object(pol) && !json_is_false(json_object_get(pol, "resumeOnTraffic"))) {
        if (suspended)
            return RESUME_WAKE;
        return !ready(sb) && starting(sb) ? RESUME_WAIT : RESUME_PASS;
    }
    if (suspended) /* nobody resumes it on traffic */
        return json_is_object(pol) ? RESUME_REJECT : RESUME_PASS;
    return !ready(sb) && starting(sb) ? RESUME_START : RESUME_PASS;
}

/* ---- Patch ----------------------------------------------------------------------------- */

int resume_patch_kube(void *ctx, const char *ns, const char *name, char *err, size_t size)
{
    char now[40];
    struct kube_err e;
    clock_format_rfc3339_sec(clock_wall_now(), now, sizeof(now));
    json_t *patch = json_pack("{s:{s:{s:n, s:s}}, s:{s:s}}", "metadata", "annotations",
                              SB_ANN_IDLE_SUSPENDED_GEN, SB_ANN_LAST_ACTIVITY, now, "spec",
                              "operatingMode", SB_MODE_RUNNING);
    int r = kube_patch(ctx, &API_RES_SANDBOXES, ns, name, KUBE_PATCH_MERGE, patch, NULL, &e);
    json_decref(patch);
    if (r < 0)
        (void)snprintf(err, size, "%s", e.message[0] ? e.message : "the resume patch failed");
    return r;
}

static int patch_run(void *arg)
{
    struct entry *e = arg;
    struct resume_gate *g = e->g;
    return g->o.patch(g->o.patch_ctx, e->ns, e->name, e->err, sizeof(e->err));
}

static void entry_free(struct entry *e)
{
    xfree(e);
}

static void patch_done(void *arg, int rc)
{
    struct entry *e = arg;
    e->patching = false;
    if (e->orphan) {
        entry_free(e);
        return;
    }
    e->patch_rc = rc;
    e->patched = rc >= 0;
    e->patched_at = clock_now();
    struct resume_gate *g = e->g;
    if (rc < 0) {
        g->st.resume_errors++;
        log_warn_errno(rc, "resume failed\tsandbox=%s/%s detail=\"%s\"", e->ns, e->name, e->err);
    } else {
        log_info("resuming sandbox on traffic\tsandbox=%s/%s held=%zu", e->ns, e->name, e->n);
    }
    if (g->resumes)
        metric_inc(g->resumes, (const char *const[]){rc < 0 ? "error" : "ok"});
}

/* A patched entry whose Sandbox (sb, as the cache has it) was suspended again since the
 * resume (a later generation), or made again under its name (another UID), needs another
 * patch; the same generation is the cache not showing the resume yet: it does not. */
static void patched_still_holds(struct entry *e, const json_t *sb)
{
    const char *uid = kube_obj_uid(sb);
    if (e->patched && (kube_obj_generation(sb) > e->base_gen || (uid && strcmp(uid, e->uid) != 0)))
        e->patched = false;
}

static void start_patch(struct resume_gate *g, struct entry *e, const json_t *sb)
{
    patched_still_holds(e, sb);
    if (e->patching || e->patched)
        return;
    e->base_gen = kube_obj_generation(sb);
    (void)snprintf(e->uid, sizeof(e->uid), "%s", kube_obj_uid(sb) ?: "");
    if (resume_worker_submit(g->o.worker, patch_run, patch_done, e) < 0) {
        e->patch_rc = -EAGAIN;
        (void)snprintf(e->err, sizeof(e->err), "too many API writes pending");
        return;
    }
    e->patching = true;
    g->st.resumes++;
}

/* ---- Waiters ---------------------------------------------------------------------------- */

static void unlink_waiter(struct resume_waiter *w)
{
    DLIST_REMOVE(w->e->head, w);
}

/* Bookkeeping of waiter w leaving (already unlinked). */
static void left(const struct resume_waiter *w, const char *outcome)
{
    struct entry *e = w->e;
    struct resume_gate *g = e->g;
    e->n--;
    g->holding--;
    g->start_holding -= w->starting;
    if (g->held_now)
        metric_dec(g->held_now, NULL);
    if (g->held_total)
        metric_inc(g->held_total, (const char *const[]){outcome});
}

static void call(struct resume_waiter *w, int status, const char *detail)
{
    resume_wake_fn *fn = w->fn;
    void *ctx = w->ctx;
    xfree(w);
    fn(ctx, status, detail);
}

/* Wakes every waiter of e. The list is detached first: a callback may hold again. */
static void wake_all(struct entry *e, int status, const char *detail, const char *outcome)
{
    struct resume_waiter *list = e->head;
    e->head = NULL;
    while (list) {
        struct resume_waiter *w = list;
        list = w->next;
        left(w, outcome);
        call(w, status, detail);
    }
}

/* The answer to a hold that reached its limit: 504 for a resume, 503 with the reason the
 * Sandbox (sb, borrowed; may be NULL) is not Ready for a start. */
static int expired_answer(const struct resume_waiter *w, const json_t *sb, char *d, size_t size)
{
    const struct entry *e = w->e;
    const char *reason =
        json_string_value(json_object_get(kube_obj_condition(sb, SB_COND_READY), "reason"));
    if (!w->starting) {
        (void)snprintf(d, size, "Sandbox %s/%s did not become ready within %llus of its resume.",
                       e->ns, e->name, (unsigned long long)(w->limit / USEC_PER_SEC));
        return 504;
    }
    (void)snprintf(d, size, "Sandbox %s/%s is not ready: %s (waited %.1fs for it).", e->ns, e->name,
                   reason ? reason : "no Ready condition", (double)w->limit / (double)USEC_PER_SEC);
    return 503;
}

static void wake_expired(struct entry *e, const json_t *sb, usec_t now)
{
    char d[512];
    struct resume_waiter *w = e->head;
    while (w) {
        struct resume_waiter *next = w->next;
        if (now - w->start >= w->limit) {
            int status = expired_answer(w, sb, d, sizeof(d));
            unlink_waiter(w);
            e->g->st.timeouts++;
            left(w, "timeout");
            call(w, status, d);
        }
        w = next;
    }
}

/* ---- The poll ------------------------------------------------------------------------- */

/* One entry: forward when Ready (or no longer ours), fail on a failed patch, expire. */
static void check_entry(struct resume_gate *g, struct entry *e, usec_t now)
{
    json_t *sb = kube_store_get_ns(g->o.store, e->ns, e->name);
    enum resume_class c = sb ? resume_classify(sb) : RESUME_PASS;
    char d[512];
    if (sb && ready(sb)) {
        if (g->resume_time && e->resume)
            metric_observe(g->resume_time, NULL, (double)(now - e->first) / (double)USEC_PER_SEC);
        g->st.forwarded += e->n;
        wake_all(e, 0, NULL, "forwarded");
    } else if (c == RESUME_PASS || c == RESUME_REJECT) {
        wake_all(e, 0, NULL, "released"); /* resolving again gives the right answer */
    } else if (e->patch_rc < 0) {
        (void)snprintf(d, sizeof(d), "Sandbox %s/%s is suspended and could not be resumed: %s",
                       e->ns, e->name, e->err);
        wake_all(e, 503, d, "error");
    } else {
        if (c == RESUME_WAKE)
            start_patch(g, e, sb);
        wake_expired(e, sb, now);
    }
    json_decref(sb);
}

static void on_tick(uv_timer_t *t)
{
    struct resume_gate *g = t->data;
    usec_t now = clock_now();
    struct map_iter it;
    const char *key;
    size_t klen;
    void *v;
    struct kube_strv keys = {0};
    /* The keys first, then the entries: a request woken below may be held again at once
     * (its answer lets one pipelined behind it run), adding an entry to the map. */
    map_iter_init(&it, g->entries);
    while (map_iter_next(&it, &key, &klen, &v))
        kube_strv_add(&keys, key);
    for (size_t i = 0; i < keys.n; i++) {
        struct entry *e = map_get(g->entries, keys.v[i]);
        if (e && e->head)
            check_entry(g, e, now);
    }
    for (size_t i = 0; i < keys.n; i++) {
        struct entry *e = map_get(g->entries, keys.v[i]);
        /* Held again since, its patch under way, or patched a moment ago (the cache may
         * not show the resume yet): it stays, so that the next request does not send
         * another patch (one per tick with clients that give up and retry). */
        if (!e || e->head || e->patching ||
            (e->patched && now - e->patched_at < LIMIT_ROUTER_RESUME_GRACE))
            continue;
        (void)map_remove(g->entries, keys.v[i]);
        entry_free(e);
    }
    kube_strv_done(&keys);
    if (map_len(g->entries) == 0)
        (void)uv_timer_stop(&g->timer);
}

/* ---- Public ---------------------------------------------------------------------------- */

struct resume_gate *resume_gate_new(uv_loop_t *loop, const struct resume_gate_opts *opts)
{
    static const char *const result[] = {"result", NULL}, *const outcome[] = {"outcome", NULL};
    struct resume_gate *g = XNEW(struct resume_gate);
    double b[14];
    g->o = *opts;
    if (!g->o.hold_timeout)
        g->o.hold_timeout = LIMIT_ROUTER_RESUME_HOLD;
    if (!g->o.start_hold)
        g->o.start_hold = LIMIT_ROUTER_START_HOLD;
    if (!g->o.max_per_sandbox)
        g->o.max_per_sandbox = LIMIT_ROUTER_RESUME_PER_SANDBOX;
    if (!g->o.max_total)
        g->o.max_total = LIMIT_ROUTER_RESUME_TOTAL;
    if (!g->o.patch) {
        g->o.patch = resume_patch_kube;
        g->o.patch_ctx = opts->client;
    }
    g->entries = map_new(NULL);
    (void)uv_timer_init(loop, &g->timer);
    g->timer.data = g;
    if (opts->metrics) {
        metrics_exp_buckets(0.05, 2, ARRAY_SIZE(b), b); /* 50 ms .. 410 s */
        g->resumes = metrics_counter(opts->metrics, "sandbox_router_resumes_total",
                                     "Resumes triggered by traffic, by result.", result);
        g->resume_time =
            metrics_histogram(opts->metrics, "sandbox_router_resume_seconds",
                              "From the first held request to the resumed Sandbox being Ready.",
                              NULL, b, ARRAY_SIZE(b));
        g->held_now = metrics_gauge(opts->metrics, "sandbox_router_held_requests",
                                    "Requests held while their Sandbox resumes or starts.", NULL);
        g->held_total = metrics_counter(opts->metrics, "sandbox_router_held_requests_total",
                                        "Held requests by outcome.", outcome);
    }
    return g;
}

static void on_timer_closed(uv_handle_t *h)
{
    struct resume_gate *g = h->data;
    map_free(g->entries);
    xfree(g);
}

void resume_gate_free(struct resume_gate *g)
{
    if (!g)
        return;
    struct map_iter it;
    const char *key;
    size_t klen;
    void *v;
    map_iter_init(&it, g->entries);
    while (map_iter_next(&it, &key, &klen, &v)) {
        struct entry *e = v;
        wake_all(e, 503, "The router is shutting down.", "error");
        if (e->patching)
            e->orphan = true; /* the worker is freed after us: its done frees e */
        else
            entry_free(e);
    }
    map_clear(g->entries);
    uv_close((uv_handle_t *)&g->timer, on_timer_closed);
}

static int refuse(struct resume_gate *g, enum resume_class c, int *status, char *detail,
                  size_t size, const char *ns, const char *name)
{
    g->st.overflow++;
    if (g->held_total)
        metric_inc(g->held_total, (const char *const[]){"overflow"});
    *status = 503;
    (void)snprintf(detail, size,
                   "Sandbox %s/%s is %s and too many requests are already waiting; "
                   "retry shortly.",
                   ns, name, c == RESUME_START ? "starting" : "resuming");
    return 0;
}

static struct entry *entry_get(struct resume_gate *g, const char *ns, const char *name)
{
    char key[2 * ROUTE_NAME_MAX + 2];
    (void)snprintf(key, sizeof(key), "%s/%s", ns, name);
    struct entry *e = map_get(g->entries, key);
    if (e)
        return e;
    e = XNEW(struct entry);
    e->g = g;
    (void)snprintf(e->ns, sizeof(e->ns), "%s", ns);
    (void)snprintf(e->name, sizeof(e->name), "%s", name);
    e->first = clock_now();
    (void)map_put(g->entries, key, e, NULL);
    return e;
}

/* Whether sb went into its present state (its Ready condition's lastTransitionTime, or
 * its creation without one) less than window ago. Unknown times count as recent. */
static bool changed_within(const json_t *sb, usec_t window)
{
    const json_t *c = kube_obj_condition(sb, SB_COND_READY);
    const char *t = c ? json_string_value(json_object_get(c, "lastTransitionTime"))
                      : kube_obj_path_str(sb, "metadata.creationTimestamp");
    usec_t at, now = clock_wall_now();
    if (!t || clock_parse_rfc3339(t, &at) < 0)
        return true;
    return at >= now || now - at < window;
}

/* Whether an idle-policy Sandbox not Ready (RESUME_WAIT) is being resumed, or was lately:
 * this router's resume patch went out (its entry), the controller has yet to act on a
 * resume (Suspended still True, or PodTerminating: the suspend's Pod still going), or
 * the Suspended condition went False (a resume) less than the hold timeout ago, not at
 * the Sandbox's creation (its first status says False at once). Anything else not Ready
 * is a start (a crash loop, an image that cannot be pulled): held as any Sandbox's. */
static bool resume_recent(struct resume_gate *g, const json_t *sb, const char *ns, const char *name)
{
    char key[2 * ROUTE_NAME_MAX + 2];
    (void)snprintf(key, sizeof(key), "%s/%s", ns, name);
    const struct entry *e = map_get(g->entries, key);
    if (e && (e->patching || (e->patched && clock_now() - e->patched_at < g->o.hold_timeout)))
        return true;
    const json_t *c = kube_obj_condition(sb, SB_COND_SUSPENDED);
    const char *st = json_string_value(json_object_get(c, "status"));
    const char *r = json_string_value(json_object_get(c, "reason"));
    const char *t = json_string_value(json_object_get(c, "lastTransitionTime"));
    const char *born = kube_obj_path_str(sb, "metadata.creationTimestamp");
    usec_t at, made, now = clock_wall_now();
    if (!c)
        return false;
    if ((st && strcmp(st, "True") == 0) || (r && strcmp(r, SB_R_POD_TERMINATING) == 0))
        return true;
    if (!t || clock_parse_rfc3339(t, &at) < 0)
        return false;
    if (born && clock_parse_rfc3339(born, &made) == 0 && at <= made + USEC_PER_SEC)
        return false; /* False since its first status */
    return at >= now || now - at < g->o.hold_timeout;
}

/* How long a request to sb (held as c) may wait: a resume hold_timeout; a start
 * start_hold while the Sandbox's state is that recent, else LIMIT_ROUTER_START_LAG (a
 * Sandbox not Ready for longer, as in a crash loop or with an image that cannot be
 * pulled, is more likely broken than starting: its requests wait only for a cache
 * behind the client's view). */
static usec_t hold_limit(const struct resume_gate *g, const json_t *sb, enum resume_class c)
{
    if (c != RESUME_START)
        return g->o.hold_timeout;
    if (changed_within(sb, g->o.start_hold) || g->o.start_hold < LIMIT_ROUTER_START_LAG)
        return g->o.start_hold;
    return LIMIT_ROUTER_START_LAG;
}

int resume_gate_hold(struct resume_gate *g, const json_t *sb, const char *ns, const char *name,
                     resume_wake_fn *fn, void *ctx, struct resume_waiter **ret_w, int *status,
                     char *detail, size_t size)
{
    enum resume_class c = resume_classify(sb);
    if (c == RESUME_WAIT && !resume_recent(g, sb, ns, name))
        c = RESUME_START; /* not Ready long after any resume: the start hold's bounds */
    if (c == RESUME_PASS)
        return 0;
    if (c == RESUME_REJECT) {
        g->st.rejected++;
        *status = 409;
        (void)snprintf(detail, size,
                       "Sandbox %s/%s is suspended and its idle policy does not resume it on "
                       "traffic (spec.idlePolicy.resumeOnTraffic is false); set "
                       "spec.operatingMode to Running to resume it.",
                       ns, name);
        return 0;
    }
    bool start = c == RESUME_START;
    if (start && g->o.start_hold == RESUME_START_OFF)
        return 0;
    if (g->holding >= g->o.max_total || (start && g->start_holding >= g->o.max_total / 4))
        return refuse(g, c, status, detail, size, ns, name); /* starts never fill it all */
    struct entry *e = entry_get(g, ns, name);
    if (e->n >= g->o.max_per_sandbox)
        return refuse(g, c, status, detail, size, ns, name);
    if (!e->head) {
        e->first = clock_now();
        e->patch_rc = 0; /* a new episode: a failure of an old one is forgotten */
        e->resume = false;
    }
    struct resume_waiter *w = XNEW(struct resume_waiter);
    *w = (struct resume_waiter){.e = e,
                                .fn = fn,
                                .ctx = ctx,
                                .start = clock_now(),
                                .limit = hold_limit(g, sb, c),
                                .starting = start};
    DLIST_PUSH(e->head, w);
    e->n++;
    e->resume |= !start;
    g->holding++;
    g->st.held++;
    g->st.start_held += start;
    g->start_holding += start;
    if (g->held_now)
        metric_inc(g->held_now, NULL);
    if (c == RESUME_WAKE)
        start_patch(g, e, sb);
    if (!uv_is_active((uv_handle_t *)&g->timer))
        (void)uv_timer_start(&g->timer, on_tick, LIMIT_ROUTER_RESUME_POLL / USEC_PER_MSEC,
                             LIMIT_ROUTER_RESUME_POLL / USEC_PER_MSEC);
    *ret_w = w;
    return 1;
}

void resume_gate_cancel(struct resume_gate *g, struct resume_waiter *w)
{
    (void)g;
    unlink_waiter(w);
    left(w, "cancelled");
    xfree(w);
}

void resume_gate_stats(const struct resume_gate *g, struct resume_gate_stats *ret)
{
    *ret = g->st;
    ret->holding = g->holding;
}
