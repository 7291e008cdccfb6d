/* SPDX-License-Identifier: Apache-2.0 */
/* The warm-claim burst: a pool of N Ready members, N claims created at once, create ->
 * claim Ready from watch timestamps, and the API cost per claim from the API server's
 * request counters. The claim probe: warm claims one at a time on an idle pool. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "api/res.h"
#include "common/log.h"
#include "kube/obj.h"
#include "lg.h"

static json_t *claim_fn(const char *name, void *ctx)
{
    return lg_claim_obj(name, ctx);
}

static long count_warm(struct kube_client *c, const char *ns)
{
    struct kube_req r;
    json_t *list = NULL;
    long n;
    kube_req_init(&r, "GET", &API_RES_SANDBOXES);
    r.label_selector = "agents.x-k8s.io/launch-type=warm,agents.x-k8s.io/claim-uid";
    if (kube_list_all(c, &API_RES_SANDBOXES, ns, &r, &list, NULL) < 0)
        return -1;
    n = (long)json_array_size(json_object_get(list, "items"));
    json_decref(list);
    return n;
}

/* Waits until the namespace holds at least n Sandboxes: the claims' and the refill's. */
static void wait_sandboxes(struct kube_client *c, const char *ns, long n, usec_t timeout)
{
    usec_t end = clock_now() + timeout;
    while (clock_now() < end) {
        json_t *list = NULL;
        long have = -1;
        if (kube_list_all(c, &API_RES_SANDBOXES, ns, NULL, &list, NULL) >= 0)
            have = (long)json_array_size(json_object_get(list, "items"));
        json_decref(list);
        if (have >= n)
            return;
        clock_sleep(500 * USEC_PER_MSEC);
    }
}

static double scrape_delta(struct kube_client *c, json_t *before, json_t **ret_delta)
{
    json_t *after = NULL;
    if (lg_api_scrape(c, &after) < 0) {
        *ret_delta = json_object();
        return -1;
    }
    *ret_delta = lg_api_delta(before, after);
    json_decref(after);
    return 0;
}

/* Pool fill: writes per new member, to subtract the refill from the claim's cost. */
static int fill_pool(struct kube_client *c, const struct lg_opts *o, long n, json_t *api)
{
    json_t *before = NULL, *d = NULL;
    double cpu0;
    usec_t t0;
    int r;
    (void)lg_api_scrape(c, &before); /* before the CPU: the scrape is ours, not the fill's */
    cpu0 = lg_api_cpu(o);
    t0 = clock_now();
    if ((r = lg_template_create(c, o, "tpl")) < 0 ||
        (r = lg_pool_create(c, o, "pool", "tpl", n)) < 0)
        goto out;
    if ((r = lg_pool_wait(c, o->ns, "pool", n, (usec_t)(o->timeout * 1e6))) < 0) {
        log_error("pool did not become Ready (%ld members)", n);
        goto out;
    }
    json_object_set_new(api, "fill_s", json_real((double)(clock_now() - t0) / 1e6));
    lg_api_cpu_put(o, api, "fill_cpu", cpu0, n, "member");
    if (before && scrape_delta(c, before, &d) == 0) {
        double w = lg_api_sum(d, LG_WRITE_VERBS, LG_OWN_WRITES);
        double q = lg_api_sum(d, NULL, LG_OWN_WRITES ",GET sandboxwarmpools");
        json_object_set_new(api, "fill_writes_per_member", json_real(w / (double)n));
        json_object_set_new(api, "fill_requests_per_member", json_real(q / (double)n));
        json_object_set_new(api, "fill_delta", d);
    }
out:
    json_decref(before);
    return r;
}

/* Writes and requests per claim of delta (the refill included, then without one member's
 * fill), with the delta itself under key. */
static void api_cost(json_t *api, const char *key, json_t *delta, long n)
{
    double fw = json_real_value(json_object_get(api, "fill_writes_per_member"));
    double fq = json_real_value(json_object_get(api, "fill_requests_per_member"));
    double w = lg_api_sum(delta, LG_WRITE_VERBS, LG_OWN_WRITES);
    double q = lg_api_sum(delta, NULL, LG_OWN_WRITES ",GET sandboxwarmpools");
    json_object_set_new(api, key, delta);
    json_object_set_new(api, "writes_per_claim_incl_refill", json_real(w / (double)n));
    json_object_set_new(api, "requests_per_claim_incl_refill", json_real(q / (double)n));
    json_object_set_new(api, "writes_per_warm_claim",
                        json_real(round((w / (double)n - fw) * 100) / 100));
    json_object_set_new(api, "requests_per_warm_claim",
                        json_real(round((q / (double)n - fq) * 100) / 100));
}

/* The API server's CPU per warm claim: the burst's (which includes the refill) less one
 * pool member's fill, as for the writes. */
static void warm_cpu(json_t *api)
{
    json_t *b = json_object_get(api, "burst_cpu"), *f = json_object_get(api, "fill_cpu");
    double per;
    if (!b || !f)
        return;
    per = json_real_value(json_object_get(b, "per_claim_incl_refill_ms")) -
          json_real_value(json_object_get(f, "per_member_ms"));
    json_object_set_new(api, "cpu_ms_per_warm_claim", json_real(round(per * 100) / 100));
}

static void proc_put(json_t *out, const char *key, pid_t pid)
{
    double rss, cpu;
    if (pid > 0 && lg_proc_sample(pid, &rss, &cpu) == 0)
        json_object_set_new(out, key, json_pack("{s:f, s:f}", "rss_mib", rss, "cpu_s", cpu));
}

/* What both claim scenarios start with: a filled pool of pool members, the claim
 * creators' clients and the load generator's own watch of the claims. */
static int claims_setup(struct kube_client *c, const struct lg_opts *o, long pool, json_t *api,
                        struct lg_clients *cl, struct lg_track *t, struct kube_informer **inf)
{
    int r = fill_pool(c, o, pool, api);
    if (r >= 0)
        r = lg_clients_new(o, cl);
    if (r >= 0)
        r = lg_track_watch(t, c, &API_RES_SANDBOXCLAIMS, o->ns, inf);
    return r;
}

/* What both claim scenarios end with: the claims served warm and the API figures in out,
 * then the set-up's pieces freed (out NULL, when the set-up failed: only that). */
static void claims_done(struct kube_client *c, const struct lg_opts *o, json_t *out, json_t *api,
                        struct lg_clients *cl, struct lg_track *t, struct kube_informer *inf)
{
    if (out) {
        json_object_set_new(out, "warm", json_integer(count_warm(c, o->ns)));
        json_object_set_new(out, "api", json_incref(api));
    }
    kube_informer_free(inf);
    lg_clients_free(cl);
    lg_track_done(t);
}

int lg_run_warm_burst(struct kube_client *c, const struct lg_opts *o, json_t *out)
{
    long n = o->count, pool = o->pool_size ? o->pool_size : o->count;
    struct lg_clients cl = {0};
    struct lg_track t;
    struct kube_informer *inf = NULL;
    json_t *api = json_object(), *before = NULL, *delta = NULL, *stats;
    double cpu0;
    bool ran = false;
    int r;
    lg_track_init(&t, o->prefix, (size_t)n);
    if ((r = claims_setup(c, o, pool, api, &cl, &t, &inf)) < 0)
        goto out;
    ran = true;
    proc_put(out, "controller_before", o->controller_pid);
    (void)lg_api_scrape(c, &before);
    cpu0 = lg_api_cpu(o);
    lg_create_all(&cl, &API_RES_SANDBOXCLAIMS, o->ns, &t, 0, (size_t)n, o->threads, claim_fn,
                  "pool");
    r = lg_track_wait(&t, (size_t)n, (usec_t)(o->timeout * 1e6));
    kube_informer_stop(inf);
    stats = lg_stats(&t, 0, (size_t)n);
    (void)lg_records_write(o, &t, 0, (size_t)n);
    json_object_update(out, stats);
    json_decref(stats);
    proc_put(out, "controller_after", o->controller_pid);
    /* refill and the post-Ready annotation write belong to the claim's cost: wait until the
     * refill exists (the pool's status may not have seen the adoptions yet), then is Ready */
    wait_sandboxes(c, o->ns, n + pool, (usec_t)(o->timeout * 1e6));
    (void)lg_pool_wait(c, o->ns, "pool", pool, (usec_t)(o->timeout * 1e6));
    clock_sleep((usec_t)(o->settle * 1e6));
    lg_api_cpu_put(o, api, "burst_cpu", cpu0, n, "claim_incl_refill");
    if (before && scrape_delta(c, before, &delta) == 0)
        api_cost(api, "burst_delta", delta, n);
    warm_cpu(api);
out:
    claims_done(c, o, ran ? out : NULL, api, &cl, &t, inf);
    json_decref(before);
    json_decref(api);
    return r;
}

/* Waits until the previous claim's refill exists and the pool is back to its size, then
 * lets the refill's last writes pass, so the next claim meets an idle cluster. */
static void claim_probe_idle(struct kube_client *c, const struct lg_opts *o, long pool, size_t done)
{
    usec_t timeout = (usec_t)(o->timeout * 1e6);
    if (done > 0)
        wait_sandboxes(c, o->ns, pool + (long)done, timeout);
    (void)lg_pool_wait(c, o->ns, "pool", pool, timeout);
    clock_sleep(LG_PROBE_GAP);
}

int lg_run_claim_probe(struct kube_client *c, const struct lg_opts *o, json_t *out)
{
    long n = o->count, pool = o->pool_size ? o->pool_size : 2;
    struct lg_clients cl = {0};
    struct lg_track t;
    struct kube_informer *inf = NULL;
    json_t *api = json_object(), *stats, *before = NULL, *delta = NULL;
    double cpu0;
    bool ran = false;
    int r;
    lg_track_init(&t, o->prefix, (size_t)n);
    if ((r = claims_setup(c, o, pool, api, &cl, &t, &inf)) < 0)
        goto out;
    ran = true;
    (void)lg_api_scrape(c, &before);
    cpu0 = lg_api_cpu(o);
    for (size_t i = 0; i < (size_t)n && r == 0; i++) {
        claim_probe_idle(c, o, pool, i);
        lg_create_all(&cl, &API_RES_SANDBOXCLAIMS, o->ns, &t, i, i + 1, 1, claim_fn, "pool");
        r = lg_track_wait(&t, i + 1, (usec_t)(o->timeout * 1e6));
    }
    kube_informer_stop(inf);
    stats = lg_stats(&t, 0, (size_t)n);
    (void)lg_records_write(o, &t, 0, (size_t)n);
    json_object_update(out, stats);
    json_decref(stats);
    claim_probe_idle(c, o, pool, (size_t)n);
    lg_api_cpu_put(o, api, "probe_cpu", cpu0, n, "claim_incl_refill");
    if (before && scrape_delta(c, before, &delta) == 0)
        api_cost(api, "probe_delta", delta, n);
out:
    claims_done(c, o, ran ? out : NULL, api, &cl, &t, inf);
    json_decref(before);
    json_decref(api);
    return r;
}

static volatile sig_atomic_t serve_stop;

static void serve_signal(int sig)
{
    (void)sig;
    serve_stop = 1;
}

int lg_run_serve_pool(struct kube_client *c, const struct lg_opts *o, json_t *out)
{
    long pool = o->pool_size ? o->pool_size : 2;
    struct sigaction sa = {.sa_handler = serve_signal};
    json_t *api = json_object();
    usec_t end;
    int r;
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGTERM, &sa, NULL);
    (void)sigaction(SIGINT, &sa, NULL);
    r = fill_pool(c, o, pool, api);
    json_object_set_new(out, "api", api);
    if (r < 0)
        return r;
    (void)printf("ready\n");
    (void)fflush(stdout);
    end = clock_now() + (usec_t)(o->seconds * 1e6);
    while (!serve_stop && clock_now() < end)
        clock_sleep(50 * USEC_PER_MSEC);
    json_object_set_new(out, "warm", json_integer(count_warm(c, o->ns)));
    return 0;
}
