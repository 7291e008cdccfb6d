/* SPDX-License-Identifier: Apache-2.0 */
/* Resume on traffic on a real libuv loop with a store and a fake patch: which Sandboxes
 * are held, 20 concurrent requests cause one resume and are all released when the
 * Sandbox is Ready, resumeOnTraffic=false answers 409, the per-sandbox bound answers
 * 503, the hold times out with 504, a failed patch answers 503 with its reason, a
 * cancelled hold is never called back, a starting Sandbox's requests wait for its Ready
 * (without a patch) and get 503 with its reason at the start hold, and the activity
 * tracker writes one batched annotation per interval only for Sandboxes with a policy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "common/limits.h"
#include "common/xalloc.h"
#include "kube/store.h"
#include "router/activity_track.h"
#include "router/resume_gate.h"
#include "router/resume_worker.h"

/* A Sandbox in ns "ns"; policy_json NULL for none. */
static json_t *sandbox(const char *name, const char *mode, bool ready, const char *policy_json)
{
    json_t *sb = json_pack("{s:{s:s, s:s}, s:{s:s}, s:{s:[{s:s, s:s, s:s}]}}", "metadata", "name",
                           name, "namespace", "ns", "spec", "operatingMode", mode, "status",
                           "conditions", "type", "Ready", "status", ready ? "True" : "False",
                           "reason", ready ? "DependenciesReady" : "SandboxSuspended");
    if (ready)
        json_object_set_new(json_object_get(sb, "status"), "podIPs", json_pack("[s]", "10.1.0.9"));
    if (policy_json)
        json_object_set_new(json_object_get(sb, "spec"), "idlePolicy",
                            json_loads(policy_json, 0, NULL));
    return sb;
}

/* A Sandbox "a" without a policy, Running, not Ready for reason (NULL: no condition). */
static json_t *starting_sandbox(const char *reason)
{
    json_t *sb = sandbox("a", "Running", false, NULL);
    json_t *conds = json_object_get(json_object_get(sb, "status"), "conditions");
    if (reason)
        json_object_set_new(json_array_get(conds, 0), "reason", json_string(reason));
    else
        json_array_clear(conds);
    return sb;
}

#define POLICY    "{\"timeoutSeconds\":10}"
#define NO_RESUME "{\"timeoutSeconds\":10,\"resumeOnTraffic\":false}"

static void test_classify(void **state)
{
    (void)state;
    struct {
        const char *mode;
        bool ready;
        const char *policy;
        enum resume_class want;
    } cases[] = {
        {"Suspended", false, NULL, RESUME_PASS},
        {"Suspended", false, POLICY, RESUME_WAKE},
        {"Suspended", false, NO_RESUME, RESUME_REJECT},
        {"Running", false, POLICY, RESUME_WAIT},
        {"Running", true, POLICY, RESUME_PASS},
        {"Running", false, NO_RESUME, RESUME_START},
        /* Running while its status still says suspended: coming up, held for a start
         * (the policy forbids resumes on traffic, not waiting for one under way). */
        {"Running", false, NULL, RESUME_START},
        {"Running", true, NULL, RESUME_PASS},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *sb = sandbox("a", cases[i].mode, cases[i].ready, cases[i].policy);
        assert_int_equal(resume_classify(sb), cases[i].want);
        json_decref(sb);
    }
    assert_int_equal(resume_classify(NULL), RESUME_PASS);
    /* A broken sandbox is not held for minutes: it answers at once. */
    json_t *sb = sandbox("a", "Running", false, POLICY);
    json_object_set_new(
        json_array_get(json_object_get(json_object_get(sb, "status"), "conditions"), 0), "reason",
        json_string("PodFailed"));
    assert_int_equal(resume_classify(sb), RESUME_PASS);
    json_decref(sb);
    /* Without a policy: a new Sandbox (no Ready condition) or one whose pod is not Ready
     * yet is starting; a failed, expired or deleting one is not. */
    static const struct {
        const char *reason; /* NULL: no Ready condition */
        enum resume_class want;
    } starts[] = {
        {NULL, RESUME_START},
        {"DependenciesNotReady", RESUME_START},
        {"PodFailed", RESUME_PASS},
        {"SandboxExpired", RESUME_PASS},
        {"ReconcilerError", RESUME_PASS},
        {"PodSucceeded", RESUME_PASS},
    };
    for (size_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
        sb = starting_sandbox(starts[i].reason);
        assert_int_equal(resume_classify(sb), starts[i].want);
        json_decref(sb);
    }
    sb = starting_sandbox("DependenciesNotReady");
    json_object_set_new(json_object_get(sb, "metadata"), "deletionTimestamp",
                        json_string("2026-12-05T00:00:00Z"));
    assert_int_equal(resume_classify(sb), RESUME_PASS);
    json_decref(sb);
    /* Ready without a pod IP yet: still coming up. */
    sb = sandbox("a", "Running", true, NULL);
    json_object_del(json_object_get(sb, "status"), "podIPs");
    assert_int_equal(resume_classify(sb), RESUME_START);
    json_decref(sb);
}

/* ---- The gate on a loop ------------------------------------------------------------- */

struct fx {
    uv_loop_t loop;
    struct kube_store *store;
    struct resume_worker *worker;
    struct resume_gate *gate;
    atomic_int patches;
    atomic_bool block; /* patches wait while true */
    int patch_rc;
    int woken, statuses[64];
    usec_t woken_at[64]; /* clock_now() at each callback */
    char last_detail[512];
};

static int fake_patch(void *ctx, const char *ns, const char *name, char *err, size_t size)
{
    struct fx *f = ctx;
    (void)ns;
    (void)name;
    atomic_fetch_add(&f->patches, 1);
    while (atomic_load(&f->block))
        clock_sleep(USEC_PER_MSEC);
    if (f->patch_rc < 0)
        (void)snprintf(err, size, "sandboxes is forbidden");
    return f->patch_rc;
}

static void on_wake(void *ctx, int status, const char *detail)
{
    struct fx *f = ctx;
    f->woken_at[f->woken] = clock_now();
    f->statuses[f->woken++] = status;
    (void)snprintf(f->last_detail, sizeof(f->last_detail), "%s", detail ? detail : "");
}

static struct fx *fx_new_all(usec_t hold, size_t per_sandbox, usec_t start_hold, size_t total)
{
    struct fx *f = XNEW(struct fx);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    f->store = kube_store_new();
    assert_int_equal(resume_worker_new(&f->loop, &f->worker), 0);
    struct resume_gate_opts o = {.store = f->store,
                                 .worker = f->worker,
                                 .hold_timeout = hold,
                                 .max_per_sandbox = per_sandbox,
                                 .start_hold = start_hold,
                                 .max_total = total,
                                 .patch = fake_patch,
                                 .patch_ctx = f};
    f->gate = resume_gate_new(&f->loop, &o);
    return f;
}

static struct fx *fx_new_start(usec_t hold, size_t per_sandbox, usec_t start_hold)
{
    return fx_new_all(hold, per_sandbox, start_hold, 0);
}

static struct fx *fx_new(usec_t hold, size_t per_sandbox)
{
    return fx_new_start(hold, per_sandbox, 0);
}

static void fx_free(struct fx *f)
{
    resume_gate_free(f->gate);
    resume_worker_free(f->worker);
    (void)uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    kube_store_free(f->store);
    xfree(f);
}

/* Runs the loop until cond or 5 s. */
static bool run_until(struct fx *f, bool (*cond)(struct fx *f))
{
    usec_t end = clock_now() + 5 * USEC_PER_SEC;
    while (!cond(f) && clock_now() < end)
        (void)uv_run(&f->loop, UV_RUN_ONCE);
    return cond(f);
}

static bool patched(struct fx *f)
{
    return atomic_load(&f->patches) > 0;
}

static bool all_woken(struct fx *f)
{
    return f->woken == 20;
}

static int hold(struct fx *f, const json_t *sb, struct resume_waiter **w, int *status, char *detail,
                size_t size)
{
    return resume_gate_hold(f->gate, sb, "ns", "a", on_wake, f, w, status, detail, size);
}

static void test_burst_one_resume(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0);
    json_t *sb = sandbox("a", "Suspended", false, POLICY);
    kube_store_put(f->store, json_incref(sb), NULL);
    struct resume_waiter *w;
    char d[512];
    for (int i = 0; i < 20; i++) {
        int st = 503;
        assert_int_equal(hold(f, sb, &w, &st, d, sizeof(d)), 1);
    }
    assert_true(run_until(f, patched));
    /* The store still says Suspended for a while (the watch lags): no second patch. */
    for (int i = 0; i < 10; i++)
        (void)uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(f->woken, 0);
    kube_store_put(f->store, sandbox("a", "Running", true, POLICY), NULL);
    assert_true(run_until(f, all_woken));
    for (int i = 0; i < 20; i++)
        assert_int_equal(f->statuses[i], 0);
    assert_int_equal(atomic_load(&f->patches), 1);
    struct resume_gate_stats st;
    resume_gate_stats(f->gate, &st);
    assert_int_equal(st.resumes, 1);
    assert_int_equal(st.forwarded, 20);
    assert_int_equal(st.holding, 0);
    json_decref(sb);
    fx_free(f);
}

static void test_reject_and_pass(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0);
    struct resume_waiter *w;
    char d[512] = "unchanged";
    int st = 503;
    json_t *sb = sandbox("a", "Suspended", false, NO_RESUME);
    assert_int_equal(hold(f, sb, &w, &st, d, sizeof(d)), 0);
    assert_int_equal(st, 409);
    assert_non_null(strstr(d, "resumeOnTraffic is false"));
    json_decref(sb);
    /* No policy: left to the caller's 503. */
    sb = sandbox("a", "Suspended", false, NULL);
    st = 503;
    (void)snprintf(d, sizeof(d), "unchanged");
    assert_int_equal(hold(f, sb, &w, &st, d, sizeof(d)), 0);
    assert_int_equal(st, 503);
    assert_string_equal(d, "unchanged");
    json_decref(sb);
    assert_int_equal(atomic_load(&f->patches), 0);
    fx_free(f);
}

static bool one_woken(struct fx *f)
{
    return f->woken >= 1;
}

static bool two_woken(struct fx *f)
{
    return f->woken >= 2;
}

static void test_bound_and_timeout(void **state)
{
    (void)state;
    const usec_t timeout = 100 * USEC_PER_MSEC;
    struct fx *f = fx_new(timeout, 2);
    json_t *sb = sandbox("a", "Suspended", false, POLICY);
    kube_store_put(f->store, json_incref(sb), NULL);
    struct resume_waiter *w;
    char d[512];
    int st = 503;
    usec_t t0 = clock_now();
    assert_int_equal(hold(f, sb, &w, &st, d, sizeof(d)), 1);
    assert_int_equal(hold(f, sb, &w, &st, d, sizeof(d)), 1);
    assert_int_equal(hold(f, sb, &w, &st, d, sizeof(d)), 0); /* the third is refused */
    assert_int_equal(st, 503);
    assert_non_null(strstr(d, "too many requests"));
    /* Never Ready: both held requests time out with 504, neither before its hold
     * timeout. Each hold's clock starts when it is held, so on a slow machine (valgrind)
     * the two may expire on different ticks: wait for both, bound only from below. */
    assert_true(run_until(f, two_woken));
    assert_int_equal(f->woken, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(f->statuses[i], 504);
        assert_true(f->woken_at[i] - t0 >= timeout);
    }
    assert_non_null(strstr(f->last_detail, "did not become ready"));
    struct resume_gate_stats gs;
    resume_gate_stats(f->gate, &gs);
    assert_int_equal(gs.timeouts, 2);
    assert_int_equal(gs.overflow, 1);
    assert_int_equal(gs.holding, 0);
    json_decref(sb);
    fx_free(f);
}

static void test_patch_error_and_cancel(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0);
    f->patch_rc = -EACCES;
    json_t *sb = sandbox("a", "Suspended", false, POLICY);
    kube_store_put(f->store, json_incref(sb), NULL);
    struct resume_waiter *w1, *w2;
    char d[512];
    int st = 503;
    assert_int_equal(hold(f, sb, &w1, &st, d, sizeof(d)), 1);
    assert_int_equal(hold(f, sb, &w2, &st, d, sizeof(d)), 1);
    resume_gate_cancel(f->gate, w1); /* the client went away */
    assert_true(run_until(f, one_woken));
    assert_int_equal(f->woken, 1);
    assert_int_equal(f->statuses[0], 503);
    assert_non_null(strstr(f->last_detail, "could not be resumed: sandboxes is forbidden"));
    json_decref(sb);
    fx_free(f);
}

/* Clients that give up while the resume patch is under way, and retry: one patch, not
 * one per retry (the entry went with its last waiter, and the next request, finding
 * none, sent another: one a tick for as long as the cache said Suspended). A Sandbox
 * suspended again since (a later generation) gets another. */
static void test_retries_during_patch_one_resume(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0);
    json_t *sb = sandbox("a", "Suspended", false, POLICY);
    kube_store_put(f->store, json_incref(sb), NULL);
    struct resume_waiter *w;
    char d[512];
    int st = 503;
    atomic_store(&f->block, true);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(hold(f, sb, &w, &st, d, sizeof(d)), 1);
        for (int t = 0; t < 3; t++) /* a tick, with the patch still under way */
            (void)uv_run(&f->loop, UV_RUN_ONCE);
        resume_gate_cancel(f->gate, w); /* the client gave up */
        for (int t = 0; t < 3; t++)
            (void)uv_run(&f->loop, UV_RUN_ONCE);
    }
    atomic_store(&f->block, false);
    assert_true(run_until(f, patched));
    for (int t = 0; t < 5; t++)
        (void)uv_run(&f->loop, UV_RUN_ONCE);
    /* after it: the cache does not show the resume yet; a request sends no other patch */
    assert_int_equal(hold(f, sb, &w, &st, d, sizeof(d)), 1);
    for (int t = 0; t < 5; t++)
        (void)uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(atomic_load(&f->patches), 1);
    resume_gate_cancel(f->gate, w);
    /* suspended again (two generations on: the resume's and the suspend's): resumed again */
    json_object_set_new(json_object_get(sb, "metadata"), "generation", json_integer(3));
    kube_store_put(f->store, json_incref(sb), NULL);
    assert_int_equal(hold(f, sb, &w, &st, d, sizeof(d)), 1);
    usec_t end = clock_now() + 5 * USEC_PER_SEC;
    while (atomic_load(&f->patches) < 2 && clock_now() < end)
        (void)uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(atomic_load(&f->patches), 2);
    resume_gate_cancel(f->gate, w);
    json_decref(sb);
    fx_free(f);
}

/* A request to a Sandbox that is coming up waits for its Ready, with no patch; one to a
 * Sandbox that turns out broken is released to be answered as such. */
static void test_start_hold_forwards(void **state)
{
    (void)state;
    struct fx *f = fx_new_start(0, 0, 10 * USEC_PER_SEC);
    json_t *sb = starting_sandbox("DependenciesNotReady");
    kube_store_put(f->store, json_incref(sb), NULL);
    struct resume_waiter *w;
    char d[512] = "unchanged";
    int st = 503;
    assert_int_equal(hold(f, sb, &w, &st, d, sizeof(d)), 1);
    assert_int_equal(hold(f, sb, &w, &st, d, sizeof(d)), 1);
    for (int i = 0; i < 10; i++)
        (void)uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(f->woken, 0); /* not Ready yet: still held */
    kube_store_put(f->store, sandbox("a", "Running", true, NULL), NULL);
    assert_true(run_until(f, two_woken));
    assert_int_equal(f->statuses[0], 0);
    assert_int_equal(f->statuses[1], 0);
    struct resume_gate_stats gs;
    resume_gate_stats(f->gate, &gs);
    assert_int_equal(gs.start_held, 2);
    assert_int_equal(gs.forwarded, 2);
    assert_int_equal(gs.resumes, 0);
    assert_int_equal(atomic_load(&f->patches), 0);
    /* Held again, then the pod fails: released at once (resolving answers PodFailed). */
    f->woken = 0;
    kube_store_put(f->store, json_incref(sb), NULL);
    assert_int_equal(hold(f, sb, &w, &st, d, sizeof(d)), 1);
    kube_store_put(f->store, starting_sandbox("PodFailed"), NULL);
    assert_true(run_until(f, one_woken));
    assert_int_equal(f->statuses[0], 0);
    resume_gate_stats(f->gate, &gs);
    assert_int_equal(gs.timeouts, 0);
    assert_int_equal(gs.holding, 0);
    json_decref(sb);
    fx_free(f);
}

/* Never Ready: 503 with the reason, not before the start hold and not after the (much
 * longer) resume hold; with the start hold off, nothing is held. */
static void test_start_hold_expires(void **state)
{
    (void)state;
    const usec_t start_hold = 100 * USEC_PER_MSEC;
    struct fx *f = fx_new_start(60 * USEC_PER_SEC, 0, start_hold);
    json_t *sb = starting_sandbox("DependenciesNotReady");
    kube_store_put(f->store, json_incref(sb), NULL);
    struct resume_waiter *w;
    char d[512];
    int st = 503;
    usec_t t0 = clock_now();
    assert_int_equal(hold(f, sb, &w, &st, d, sizeof(d)), 1);
    assert_true(run_until(f, one_woken));
    assert_int_equal(f->statuses[0], 503);
    assert_true(f->woken_at[0] - t0 >= start_hold);
    assert_non_null(strstr(f->last_detail, "Sandbox ns/a is not ready: DependenciesNotReady"));
    assert_non_null(strstr(f->last_detail, "waited 0.1s"));
    fx_free(f);

    f = fx_new_start(0, 0, RESUME_START_OFF);
    kube_store_put(f->store, json_incref(sb), NULL);
    (void)snprintf(d, sizeof(d), "unchanged");
    st = 503;
    assert_int_equal(hold(f, sb, &w, &st, d, sizeof(d)), 0);
    assert_int_equal(st, 503);
    assert_string_equal(d, "unchanged");
    json_decref(sb);
    fx_free(f);
}

/* A Sandbox not Ready for longer than the start hold (a crash loop, an image that cannot
 * be pulled) waits only LIMIT_ROUTER_START_LAG, for a cache behind the client's view. */
static void test_start_hold_stale(void **state)
{
    (void)state;
    struct fx *f = fx_new_start(0, 0, 60 * USEC_PER_SEC);
    json_t *sb = starting_sandbox("DependenciesNotReady");
    json_object_set_new(
        json_array_get(json_object_get(json_object_get(sb, "status"), "conditions"), 0),
        "lastTransitionTime", json_string("2020-01-01T00:00:00Z"));
    kube_store_put(f->store, json_incref(sb), NULL);
    struct resume_waiter *w;
    char d[512];
    int st = 503;
    usec_t t0 = clock_now();
    assert_int_equal(hold(f, sb, &w, &st, d, sizeof(d)), 1);
    assert_true(run_until(f, one_woken)); /* within run_until's 5 s, not the 60 s hold */
    assert_int_equal(f->statuses[0], 503);
    assert_true(f->woken_at[0] - t0 >= LIMIT_ROUTER_START_LAG);
    assert_non_null(strstr(f->last_detail, "is not ready: DependenciesNotReady (waited 2.0s"));
    json_decref(sb);
    fx_free(f);
}

/* An idle-policy Sandbox not Ready: "resume" of Suspended's lastTransitionTime (text, or
 * NULL: no Suspended condition), the Sandbox made long before, Ready False since long. */
static json_t *idle_sandbox(const char *resumed_at)
{
    json_t *sb = sandbox("a", "Running", false, POLICY);
    json_t *conds = json_object_get(json_object_get(sb, "status"), "conditions");
    json_t *ready = json_array_get(conds, 0);
    json_object_set_new(ready, "reason", json_string("DependenciesNotReady"));
    json_object_set_new(ready, "lastTransitionTime", json_string("2020-01-01T00:00:00Z"));
    json_object_set_new(json_object_get(sb, "metadata"), "creationTimestamp",
                        json_string("2019-01-01T00:00:00Z"));
    if (resumed_at)
        json_array_append_new(conds, json_pack("{s:s, s:s, s:s, s:s}", "type", "Suspended",
                                               "status", "False", "reason", "NotSuspended",
                                               "lastTransitionTime", resumed_at));
    return sb;
}

/* One request to sb held by f; the status it gets and after how long, into *ret_waited. */
static int held_answer(struct fx *f, json_t *sb, usec_t *ret_waited)
{
    struct resume_waiter *w;
    char d[512];
    int st = 503;
    kube_store_put(f->store, json_incref(sb), NULL);
    usec_t t0 = clock_now();
    assert_int_equal(hold(f, sb, &w, &st, d, sizeof(d)), 1);
    assert_true(run_until(f, one_woken));
    *ret_waited = f->woken_at[0] - t0;
    return f->statuses[0];
}

/* An idle-policy Sandbox not Ready long after any resume (a crash loop, an image that
 * cannot be pulled) is held as any starting Sandbox: LIMIT_ROUTER_START_LAG, then 503
 * with its Ready reason. Before, every such request waited the whole resume hold (120 s
 * by default) for a 504 about a resume that never happened. A resume of a moment ago
 * still waits the resume hold. */
static void test_idle_policy_broken_is_a_start(void **state)
{
    (void)state;
    const usec_t resume_hold = 3 * USEC_PER_SEC; /* well past the time text's 1 s grain */
    usec_t waited;
    char now[64];
    struct fx *f = fx_new_start(resume_hold, 0, 60 * USEC_PER_SEC);
    json_t *sb = idle_sandbox("2020-01-02T00:00:00Z");
    assert_int_equal(held_answer(f, sb, &waited), 503);
    assert_true(waited >= LIMIT_ROUTER_START_LAG);
    assert_non_null(strstr(f->last_detail, "is not ready: DependenciesNotReady"));
    json_decref(sb);
    fx_free(f);

    f = fx_new_start(resume_hold, 0, 60 * USEC_PER_SEC);
    clock_format_rfc3339_sec(clock_wall_now(), now, sizeof(now));
    sb = idle_sandbox(now); /* resumed just now: the resume hold */
    (void)held_answer(f, sb, &waited);
    /* (the loop's timers run on its cached clock: a few ms early by clock_now) */
    assert_true(waited >= resume_hold - 50 * USEC_PER_MSEC);
    assert_non_null(strstr(f->last_detail, "of its resume"));
    json_decref(sb);
    fx_free(f);
}

/* Start holds take at most a quarter of the holds in all: the rest stays for resumes. */
static void test_start_holds_capped(void **state)
{
    (void)state;
    struct fx *f = fx_new_all(0, 0, 10 * USEC_PER_SEC, 8);
    json_t *sb = starting_sandbox("DependenciesNotReady");
    json_t *sus = sandbox("b", "Suspended", false, POLICY);
    kube_store_put(f->store, json_incref(sb), NULL);
    kube_store_put(f->store, json_incref(sus), NULL);
    struct resume_waiter *w[4];
    char d[512];
    int st = 503;
    assert_int_equal(hold(f, sb, &w[0], &st, d, sizeof(d)), 1);
    assert_int_equal(hold(f, sb, &w[1], &st, d, sizeof(d)), 1);
    assert_int_equal(hold(f, sb, &w[2], &st, d, sizeof(d)), 0);
    assert_int_equal(st, 503);
    assert_non_null(strstr(d, "is starting and too many requests"));
    assert_int_equal(
        resume_gate_hold(f->gate, sus, "ns", "b", on_wake, f, &w[3], &st, d, sizeof(d)),
        1);                            /* a resume still gets a place */
    resume_gate_cancel(f->gate, w[0]); /* one start leaves: another fits */
    assert_int_equal(hold(f, sb, &w[2], &st, d, sizeof(d)), 1);
    struct resume_gate_stats gs;
    resume_gate_stats(f->gate, &gs);
    assert_int_equal(gs.overflow, 1);
    assert_int_equal(gs.holding, 3);
    json_decref(sus);
    json_decref(sb);
    fx_free(f);
}

/* ---- Activity ------------------------------------------------------------------------ */

struct writes {
    atomic_int n;
    int rc; /* what each write returns */
    char last[64];
};

static int fake_write(void *ctx, const char *ns, const char *name, const char *value)
{
    struct writes *w = ctx;
    assert_string_equal(ns, "ns");
    assert_string_equal(name, "a");
    (void)snprintf(w->last, sizeof(w->last), "%s", value);
    atomic_fetch_add(&w->n, 1);
    return w->rc;
}

/* Runs loop until w has n writes, or for wait. */
static void run_writes(uv_loop_t *loop, struct writes *w, int n, usec_t wait)
{
    usec_t end = clock_now() + wait;
    while (atomic_load(&w->n) < n && clock_now() < end) {
        (void)uv_run(loop, UV_RUN_NOWAIT);
        clock_sleep(5 * USEC_PER_MSEC);
    }
    (void)uv_run(loop, UV_RUN_NOWAIT);
}

/* A refused annotation write (a webhook, RBAC, a 429) is tried again after a back-off,
 * not at every flush (a second): before, 5 flushes gave 5 writes, with or without
 * traffic, for good. */
static void test_activity_failed_write_backs_off(void **state)
{
    (void)state;
    uv_loop_t loop;
    struct resume_worker *worker;
    struct writes w = {.rc = -EACCES};
    struct activity_stats st;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(resume_worker_new(&loop, &worker), 0);
    struct kube_store *store = kube_store_new();
    kube_store_put(store, sandbox("a", "Running", true, "{\"timeoutSeconds\":4}"), NULL);
    struct activity_track_opts o = {.store = store,
                                    .worker = worker,
                                    .tick = 3600 * USEC_PER_SEC,
                                    .write = fake_write,
                                    .write_ctx = &w};
    struct activity_track *t = activity_track_new(&loop, &o);
    activity_begin(t, "ns/a");
    activity_end(t, "ns/a");
    activity_flush(t);
    run_writes(&loop, &w, 1, 5 * USEC_PER_SEC);
    assert_int_equal(atomic_load(&w.n), 1);
    for (int i = 0; i < 5; i++) {
        activity_begin(t, "ns/a"); /* traffic goes on */
        activity_end(t, "ns/a");
        clock_sleep(250 * USEC_PER_MSEC); /* past the 1 s interval of a 4 s timeout */
        activity_flush(t);
        run_writes(&loop, &w, 2, 100 * USEC_PER_MSEC); /* a write would be done by then */
    }
    assert_int_equal(atomic_load(&w.n), 1); /* held back */
    activity_track_stats(t, &st);
    assert_int_equal(st.write_errors, 1);
    assert_int_equal(st.entries, 1); /* not forgotten: written once the back-off ends */
    activity_track_free(t);
    resume_worker_free(worker);
    (void)uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    kube_store_free(store);
}

static void test_activity_batched(void **state)
{
    (void)state;
    uv_loop_t loop;
    struct resume_worker *worker;
    struct writes w = {0};
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(resume_worker_new(&loop, &worker), 0);
    struct kube_store *store = kube_store_new();
    kube_store_put(store, sandbox("a", "Running", true, "{\"timeoutSeconds\":600}"), NULL);
    kube_store_put(store, sandbox("b", "Running", true, NULL), NULL);
    struct activity_track_opts o = {.store = store,
                                    .worker = worker,
                                    .tick = 3600 * USEC_PER_SEC,
                                    .write = fake_write,
                                    .write_ctx = &w};
    struct activity_track *t = activity_track_new(&loop, &o);
    for (int i = 0; i < 1000; i++) {
        activity_begin(t, "ns/a");
        activity_end(t, "ns/a");
        activity_begin(t, "ns/b");
        activity_end(t, "ns/b");
    }
    activity_flush(t);
    usec_t end = clock_now() + 5 * USEC_PER_SEC;
    while (atomic_load(&w.n) < 1 && clock_now() < end)
        (void)uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(atomic_load(&w.n), 1); /* 1000 requests, one write; none for b */
    assert_true(strlen(w.last) > 20 && w.last[4] == '-');
    activity_begin(t, "ns/a"); /* more activity within the interval: no write yet */
    activity_flush(t);
    for (int i = 0; i < 10; i++)
        (void)uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(atomic_load(&w.n), 1);
    assert_int_equal(activity_interval(10 * USEC_PER_SEC), 2500 * USEC_PER_MSEC);
    assert_int_equal(activity_interval(2 * USEC_PER_SEC), USEC_PER_SEC);
    assert_int_equal(activity_interval(3600 * USEC_PER_SEC), 60 * USEC_PER_SEC);
    activity_track_free(t);
    resume_worker_free(worker);
    (void)uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    kube_store_free(store);
}

/* A stop writes what moved since the last write at once (activity_flush_final), the
 * interval and a failed write's back-off notwithstanding: before, the last interval's
 * activity (up to a minute) was lost with the router. */
static void test_activity_final_flush(void **state)
{
    (void)state;
    uv_loop_t loop;
    struct resume_worker *worker;
    struct writes w = {.rc = -EACCES};
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(resume_worker_new(&loop, &worker), 0);
    struct kube_store *store = kube_store_new();
    kube_store_put(store, sandbox("a", "Running", true, "{\"timeoutSeconds\":600}"), NULL);
    struct activity_track_opts o = {.store = store,
                                    .worker = worker,
                                    .tick = 3600 * USEC_PER_SEC,
                                    .write = fake_write,
                                    .write_ctx = &w};
    struct activity_track *t = activity_track_new(&loop, &o);
    activity_begin(t, "ns/a");
    activity_end(t, "ns/a");
    activity_flush(t);
    run_writes(&loop, &w, 1, 5 * USEC_PER_SEC); /* refused: backs off */
    assert_int_equal(activity_writes_pending(t), 0);
    w.rc = 0;
    activity_begin(t, "ns/a"); /* a tunnel still open at the stop counts as now */
    activity_flush(t);
    run_writes(&loop, &w, 2, 100 * USEC_PER_MSEC);
    assert_int_equal(atomic_load(&w.n), 1); /* held: back-off, and the 60 s interval */
    char before[64];
    (void)snprintf(before, sizeof(before), "%s", w.last);
    clock_sleep(1100 * USEC_PER_MSEC); /* the annotation has a second's resolution */
    assert_int_equal(activity_flush_final(t), 1);
    run_writes(&loop, &w, 2, 5 * USEC_PER_SEC);
    assert_int_equal(atomic_load(&w.n), 2);
    assert_int_equal(activity_writes_pending(t), 0);
    if (strcmp(w.last, before) <= 0) /* RFC 3339 UTC sorts by time */
        fail_msg("final write %s, not after %s", w.last, before);
    assert_int_equal(activity_flush_final(NULL), 0);
    activity_track_free(t);
    resume_worker_free(worker);
    (void)uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    kube_store_free(store);
}

/* A begin the full table refuses says so, so that its end is not counted against an
 * entry the key gets later (that entry's open count dropped while its requests ran). */
static void test_activity_begin_counted(void **state)
{
    (void)state;
    uv_loop_t loop;
    struct resume_worker *worker;
    struct writes w = {0};
    struct activity_stats st;
    char key[32];
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(resume_worker_new(&loop, &worker), 0);
    struct kube_store *store = kube_store_new();
    struct activity_track_opts o = {.store = store,
                                    .worker = worker,
                                    .tick = 3600 * USEC_PER_SEC,
                                    .write = fake_write,
                                    .write_ctx = &w};
    struct activity_track *t = activity_track_new(&loop, &o);
    assert_false(activity_begin(NULL, "ns/a"));
    for (int i = 0; i < LIMIT_ROUTER_ACTIVITY_ENTRIES; i++) {
        (void)snprintf(key, sizeof(key), "ns/k%d", i);
        assert_true(activity_begin(t, key));
    }
    assert_false(activity_begin(t, "ns/late")); /* full */
    activity_end(t, "ns/late");                 /* nothing to end */
    assert_true(activity_begin(t, "ns/k0"));    /* a known key is counted */
    activity_track_stats(t, &st);
    assert_int_equal(st.entries, LIMIT_ROUTER_ACTIVITY_ENTRIES);
    activity_track_free(t);
    resume_worker_free(worker);
    (void)uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    kube_store_free(store);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_burst_one_resume),
        cmocka_unit_test(test_reject_and_pass),
        cmocka_unit_test(test_bound_and_timeout),
        cmocka_unit_test(test_patch_error_and_cancel),
        cmocka_unit_test(test_retries_during_patch_one_resume),
        cmocka_unit_test(test_start_hold_forwards),
        cmocka_unit_test(test_start_hold_expires),
        cmocka_unit_test(test_start_hold_stale),
        cmocka_unit_test(test_idle_policy_broken_is_a_start),
        cmocka_unit_test(test_start_holds_capped),
        cmocka_unit_test(test_activity_batched),
        cmocka_unit_test(test_activity_failed_write_backs_off),
        cmocka_unit_test(test_activity_final_flush),
        cmocka_unit_test(test_activity_begin_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
