/* SPDX-License-Identifier: Apache-2.0 */
/* Sustained Poisson claims with dwell and delete, cold Sandboxes, and the scale run
 * (many Sandboxes; controller RSS and CPU sampled while they converge). */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/res.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "kube/obj.h"
#include "lg.h"

#define LG_DELETERS 8
#define LG_ARRIVERS 256 /* arrival threads at most: each blocks in its POST */

struct sustained {
    const struct lg_opts *o;
    struct lg_clients *cl;
    struct lg_track t;
    usec_t *at; /* arrival offsets */
    usec_t start;
    atomic_size_t next;
    atomic_bool done;
    atomic_bool saturated; /* the backlog guard stopped the arrivals */
    usec_t saturated_at;
    usec_t max_lag; /* latest a POST went out after its arrival time (creators all busy) */
    size_t max_backlog;
    char (*pool)[32];
};

/* The open-loop arrivals stop once more than max_backlog claims are created but not
 * Ready: the offered rate is then past what the system serves, and going on only grows
 * the backlog (and the cleanup). */
static bool backlog_full(struct sustained *s, size_t i)
{
    size_t ready;
    pthread_mutex_lock(&s->t.lock);
    ready = s->t.ready;
    if (i > ready + s->max_backlog && !atomic_load(&s->saturated)) {
        s->saturated_at = clock_now();
        atomic_store(&s->saturated, true);
    }
    pthread_mutex_unlock(&s->t.lock);
    return atomic_load(&s->saturated);
}

static void *arrivals(void *arg)
{
    struct sustained *s = arg;
    char name[96];
    size_t i;
    while (!atomic_load(&s->saturated) && (i = atomic_fetch_add(&s->next, 1)) < s->t.n) {
        usec_t due = s->start + s->at[i], now = clock_now();
        json_t *cl;
        int r;
        if (due > now)
            clock_sleep(due - now);
        if (backlog_full(s, i))
            break; /* i is not created: lg_stats counts created records only */
        (void)snprintf(name, sizeof(name), "%s-%06zu", s->t.prefix, i);
        cl = lg_claim_obj(name, s->pool[i % (size_t)s->o->pools]);
        pthread_mutex_lock(&s->t.lock);
        s->t.recs[i].create = clock_now();
        if (s->t.recs[i].create > due && s->t.recs[i].create - due > s->max_lag)
            s->max_lag = s->t.recs[i].create - due;
        pthread_mutex_unlock(&s->t.lock);
        r = kube_create(s->cl->v[i % (size_t)s->cl->n], &API_RES_SANDBOXCLAIMS, s->o->ns, cl, NULL,
                        NULL);
        pthread_mutex_lock(&s->t.lock);
        s->t.recs[i].ack = clock_now();
        s->t.recs[i].failed = r < 0;
        pthread_mutex_unlock(&s->t.lock);
        json_decref(cl);
    }
    return NULL;
}

struct deleter {
    struct sustained *s;
    size_t id;
};

/* Deletes claims [id, id + LG_DELETERS, ...) once they were Ready for the dwell. */
static void *deleter(void *arg)
{
    struct deleter *d = arg;
    struct sustained *s = d->s;
    usec_t dwell = (usec_t)(s->o->dwell * 1e6);
    char name[96];
    while (!atomic_load(&s->done)) {
        for (size_t i = d->id; i < s->t.n; i += LG_DELETERS) {
            struct lg_rec *r = &s->t.recs[i];
            bool due;
            pthread_mutex_lock(&s->t.lock);
            due = r->ready && !r->deleted && clock_now() >= r->ready + dwell;
            if (due)
                r->deleted = clock_now();
            pthread_mutex_unlock(&s->t.lock);
            if (!due)
                continue;
            (void)snprintf(name, sizeof(name), "%s-%06zu", s->t.prefix, i);
            (void)kube_delete(s->cl->v[i % (size_t)s->cl->n], &API_RES_SANDBOXCLAIMS, s->o->ns,
                              name, NULL);
        }
        clock_sleep(50 * USEC_PER_MSEC);
    }
    return NULL;
}

static size_t schedule(struct sustained *s)
{
    size_t cap = (size_t)(s->o->rate * s->o->seconds * 1.5) + 16, n = 0;
    double t = 0;
    s->at = xcalloc(cap, sizeof(*s->at));
    srand48(42);
    for (;;) {
        t += -log(1.0 - drand48()) / s->o->rate;
        if (t >= s->o->seconds || n == cap)
            break;
        s->at[n++] = (usec_t)(t * 1e6);
    }
    return n;
}

static int sustained_fill(struct kube_client *c, struct sustained *s, long per_pool)
{
    int r = lg_template_create(c, s->o, "tpl");
    for (long i = 0; i < s->o->pools && r >= 0; i++) {
        (void)snprintf(s->pool[i], sizeof(s->pool[i]), "pool-%ld", i);
        r = lg_pool_create(c, s->o, s->pool[i], "tpl", per_pool);
    }
    for (long i = 0; i < s->o->pools && r >= 0; i++)
        r = lg_pool_wait(c, s->o->ns, s->pool[i], per_pool, (usec_t)(s->o->timeout * 1e6));
    if (r < 0)
        log_error("sustained: pools did not fill");
    return r;
}

/* Claims created (a thread that found the backlog full left its index unused). */
static size_t issued(struct sustained *s)
{
    size_t n = 0;
    pthread_mutex_lock(&s->t.lock);
    for (size_t i = 0; i < s->t.n; i++)
        n += s->t.recs[i].create != 0;
    pthread_mutex_unlock(&s->t.lock);
    return n;
}

static void sustained_drive(struct sustained *s)
{
    pthread_t ath[LG_ARRIVERS], dth[LG_DELETERS];
    struct deleter d[LG_DELETERS];
    int na = s->o->threads > LG_ARRIVERS ? LG_ARRIVERS : s->o->threads < 1 ? 1 : s->o->threads;
    s->start = clock_now() + 100 * USEC_PER_MSEC;
    for (int i = 0; i < LG_DELETERS; i++) {
        d[i] = (struct deleter){s, (size_t)i};
        (void)pthread_create(&dth[i], NULL, deleter, &d[i]);
    }
    for (int i = 0; i < na; i++)
        if (pthread_create(&ath[i], NULL, arrivals, s) != 0) {
            na = i;
            break;
        }
    if (na == 0)
        (void)arrivals(s);
    for (int i = 0; i < na; i++)
        pthread_join(ath[i], NULL);
    (void)lg_track_wait(&s->t, issued(s), (usec_t)(s->o->timeout * 1e6));
    atomic_store(&s->done, true);
    for (int i = 0; i < LG_DELETERS; i++)
        pthread_join(dth[i], NULL);
}

/* The record of the claim a Sandbox's controller reference names ("<prefix>-<index>"), or
 * NULL. */
static const struct lg_rec *claim_rec(struct sustained *s, const json_t *sb)
{
    const json_t *ref = kube_obj_controller_ref(sb);
    const char *name = json_string_value(json_object_get(ref, "name"));
    const char *kind = json_string_value(json_object_get(ref, "kind"));
    size_t plen = strlen(s->t.prefix);
    char *end;
    unsigned long i;
    if (!name || !kind || strcmp(kind, "SandboxClaim") != 0 ||
        strncmp(name, s->t.prefix, plen) != 0 || name[plen] != '-')
        return NULL;
    i = strtoul(name + plen + 1, &end, 10);
    return *end || i >= s->t.n ? NULL : &s->t.recs[i];
}

/* What the deleted claims left at the window's end: their Sandboxes not yet being deleted
 * (all, and those whose claim went 10 s or more before), and Pods whose Sandbox is gone.
 * A controller that leaves the deletion to a garbage collector that lags leaves them. */
static void sustained_left(struct kube_client *c, struct sustained *s, json_t *out)
{
    json_t *sbs = NULL, *pods = NULL, *uids = json_object(), *o;
    size_t i, deleted = 0, left = 0, left10 = 0, orphans = 0;
    usec_t now = clock_now();
    for (i = 0; i < s->t.n; i++)
        deleted += s->t.recs[i].deleted != 0;
    if (kube_list_all(c, &API_RES_SANDBOXES, s->o->ns, NULL, &sbs, NULL) < 0 ||
        kube_list_all(c, &KUBE_RES_PODS, s->o->ns, NULL, &pods, NULL) < 0)
        goto out;
    json_array_foreach(json_object_get(sbs, "items"), i, o)
    {
        const struct lg_rec *r = claim_rec(s, o);
        if (kube_obj_uid(o))
            json_object_set_new(uids, kube_obj_uid(o), json_true());
        if (!r || !r->deleted || kube_obj_deleting(o))
            continue;
        left++;
        left10 += now - r->deleted >= 10 * USEC_PER_SEC;
    }
    json_array_foreach(json_object_get(pods, "items"), i, o)
    {
        const char *owner = json_string_value(json_object_get(kube_obj_controller_ref(o), "uid"));
        orphans += owner && !kube_obj_deleting(o) && !json_object_get(uids, owner);
    }
    json_object_set_new(out, "released",
                        json_pack("{s:I,s:I,s:I,s:I}", "deleted_claims", (json_int_t)deleted,
                                  "sandboxes_left", (json_int_t)left, "sandboxes_left_10s",
                                  (json_int_t)left10, "pods_left", (json_int_t)orphans));
out:
    json_decref(sbs);
    json_decref(pods);
    json_decref(uids);
}

/* Requests per claim over the whole run (claims that were not deleted by its end leave
 * part of their deletion out): every client's, from the API server's counters. */
static void sustained_api(struct kube_client *c, json_t *before, json_int_t ready, json_t *out)
{
    json_t *after = NULL, *d;
    if (!before || ready <= 0 || lg_api_scrape(c, &after) < 0) {
        json_decref(before);
        return;
    }
    d = lg_api_delta(before, after);
    json_object_set_new(out, "writes_per_claim",
                        json_real(lg_api_sum(d, LG_WRITE_VERBS, NULL) / (double)ready));
    json_object_set_new(out, "requests_per_claim",
                        json_real(lg_api_sum(d, NULL, NULL) / (double)ready));
    json_object_set_new(out, "api_delta", d);
    json_decref(after);
    json_decref(before);
}

int lg_run_sustained(struct kube_client *c, const struct lg_opts *o, json_t *out)
{
    long per_pool =
        o->pool_size ? o->pool_size : (long)ceil(o->rate * 10 / (double)(o->pools ? o->pools : 1));
    struct sustained s = {.o = o};
    struct lg_clients cl = {0};
    struct kube_informer *inf = NULL;
    json_t *st, *before = NULL;
    double api_cpu0;
    size_t n;
    int r;
    s.pool = xcalloc((size_t)o->pools, sizeof(*s.pool));
    n = schedule(&s);
    s.max_backlog = o->max_backlog ? (size_t)o->max_backlog : (size_t)(o->rate * 5);
    if (s.max_backlog < 100)
        s.max_backlog = 100;
    lg_track_init(&s.t, o->prefix, n);
    s.cl = &cl;
    if ((r = sustained_fill(c, &s, per_pool)) < 0 || (r = lg_clients_new(o, &cl)) < 0 ||
        (r = lg_track_watch(&s.t, c, &API_RES_SANDBOXCLAIMS, o->ns, &inf)) < 0)
        goto out;
    (void)lg_api_scrape(c, &before);
    api_cpu0 = lg_api_cpu(o);
    sustained_drive(&s);
    st = lg_stats(&s.t, 0, n);
    (void)lg_records_write(o, &s.t, 0, n);
    lg_api_cpu_put(o, out, "api_cpu", api_cpu0,
                   (long)json_integer_value(json_object_get(st, "ready")), "claim");
    sustained_api(c, before, json_integer_value(json_object_get(st, "ready")), out);
    sustained_left(c, &s, out); /* after the API figures: its LISTs are not the run's */
    json_object_update(out, st);
    json_decref(st);
    json_object_set_new(out, "rate_per_s", json_real(o->rate));
    json_object_set_new(out, "offered_per_s", json_real((double)n / o->seconds));
    json_object_set_new(out, "planned", json_integer((json_int_t)n));
    json_object_set_new(out, "max_backlog", json_integer((json_int_t)s.max_backlog));
    json_object_set_new(out, "saturated", json_boolean(atomic_load(&s.saturated)));
    json_object_set_new(out, "arrival_lag_max_ms", json_real((double)s.max_lag / 1000));
    if (atomic_load(&s.saturated))
        json_object_set_new(out, "saturated_after_s",
                            json_real((double)(s.saturated_at - s.start) / 1e6));
    json_object_set_new(out, "pool_size", json_integer(per_pool));
    json_object_set_new(out, "pools", json_integer(o->pools));
out:
    kube_informer_free(inf);
    lg_clients_free(&cl);
    lg_track_done(&s.t);
    xfree(s.at);
    xfree(s.pool);
    return r;
}

/* ---- cold and scale ------------------------------------------------------------------ */

static json_t *sandbox_fn(const char *name, void *ctx)
{
    return lg_sandbox_obj(ctx, name);
}

struct sampler {
    const struct lg_opts *o;
    struct lg_track *t;
    json_t *series;
    atomic_bool stop;
};

static void *sample(void *arg)
{
    struct sampler *s = arg;
    usec_t t0 = clock_now();
    while (!atomic_load(&s->stop)) {
        double rss, cpu;
        size_t ready;
        pthread_mutex_lock(&s->t->lock);
        ready = s->t->ready;
        pthread_mutex_unlock(&s->t->lock);
        if (lg_proc_sample(s->o->controller_pid, &rss, &cpu) == 0)
            json_array_append_new(s->series,
                                  json_pack("{s:f, s:I, s:f, s:f}", "t_s",
                                            (double)(clock_now() - t0) / 1e6, "ready",
                                            (json_int_t)ready, "rss_mib", rss, "cpu_s", cpu));
        clock_sleep(USEC_PER_SEC);
    }
    return NULL;
}

enum sb_mode { SB_COLD, SB_SCALE, SB_PROBE };

/* Creates the Sandboxes: all at once on o->threads, or (probe) one at a time, each after
 * the previous one is Ready. Returns the last wait's result. */
static int create_sandboxes(struct lg_clients *cl, const struct lg_opts *o, struct lg_track *t,
                            enum sb_mode mode)
{
    usec_t timeout = (usec_t)(o->timeout * 1e6);
    int r = 0;
    if (mode != SB_PROBE) {
        lg_create_all(cl, &API_RES_SANDBOXES, o->ns, t, 0, (size_t)o->count, o->threads, sandbox_fn,
                      (void *)o);
        return lg_track_wait(t, (size_t)o->count, timeout);
    }
    for (size_t i = 0; i < (size_t)o->count && r == 0; i++) {
        lg_create_all(cl, &API_RES_SANDBOXES, o->ns, t, i, i + 1, 1, sandbox_fn, (void *)o);
        r = lg_track_wait(t, i + 1, timeout);
    }
    return r;
}

/* The API cost of the Sandboxes: the controller's writes per Sandbox (the load
 * generator's own and the simulated kubelet's left out) and the API server's CPU. */
static void sandbox_api_cost(struct kube_client *c, const struct lg_opts *o, json_t *out,
                             json_t *before, double cpu0)
{
    json_t *after = NULL, *delta, *api = json_object();
    /* the CPU first: the scrape of /metrics (tens of ms) is the load generator's own */
    lg_api_cpu_put(o, api, "cpu", cpu0, o->count, "sandbox");
    if (before && lg_api_scrape(c, &after) == 0) {
        /* DELETEs left out: an earlier scenario's namespace may still be going away */
        delta = lg_api_delta(before, after);
        json_object_set_new(api, "writes_per_sandbox",
                            json_real(lg_api_sum(delta, "POST,PUT,PATCH",
                                                 LG_OWN_SANDBOX_WRITES "," LG_SYSTEM_WRITES) /
                                      (double)o->count));
        json_object_set_new(api, "delta", delta);
    }
    json_decref(after);
    json_object_set_new(out, "api", api);
}

static int sandboxes(struct kube_client *c, const struct lg_opts *o, json_t *out, enum sb_mode mode)
{
    struct sampler sm = {.o = o, .series = json_array()};
    struct lg_clients cl = {0};
    struct lg_track t;
    struct kube_informer *inf = NULL;
    pthread_t th;
    bool sampling = false;
    double rss0 = 0, cpu0 = 0, rss1 = 0, cpu1 = 0, api_cpu0;
    json_t *st, *before = NULL;
    int r;
    lg_track_init(&t, o->prefix, (size_t)o->count);
    sm.t = &t;
    if ((r = lg_clients_new(o, &cl)) < 0 ||
        (r = lg_track_watch(&t, c, &API_RES_SANDBOXES, o->ns, &inf)) < 0)
        goto out;
    if (o->controller_pid > 0 && lg_proc_sample(o->controller_pid, &rss0, &cpu0) == 0)
        sampling = pthread_create(&th, NULL, sample, &sm) == 0;
    (void)lg_api_scrape(c, &before);
    api_cpu0 = lg_api_cpu(o);
    r = create_sandboxes(&cl, o, &t, mode);
    st = lg_stats(&t, 0, (size_t)o->count);
    (void)lg_records_write(o, &t, 0, (size_t)o->count);
    json_object_update(out, st);
    json_decref(st);
    clock_sleep((usec_t)(o->settle * 1e6)); /* late status writes count too */
    sandbox_api_cost(c, o, out, before, api_cpu0);
    if (sampling) {
        atomic_store(&sm.stop, true);
        pthread_join(th, NULL);
        (void)lg_proc_sample(o->controller_pid, &rss1, &cpu1);
        json_object_set_new(out, "controller_rss_mib", json_real(rss1));
        json_object_set_new(out, "controller_cpu_s", json_real(cpu1 - cpu0));
        json_object_set_new(out, "controller_rss_before_mib", json_real(rss0));
    }
    if (mode == SB_SCALE)
        json_object_set_new(
            out, "converge_s",
            json_real(json_real_value(json_object_get(out, "all_ready_ms")) / 1000));
    json_object_set(out, "rss_series", sm.series);
out:
    kube_informer_free(inf);
    lg_clients_free(&cl);
    lg_track_done(&t);
    json_decref(sm.series);
    json_decref(before);
    return r;
}

int lg_run_cold(struct kube_client *c, const struct lg_opts *o, json_t *out)
{
    return sandboxes(c, o, out, SB_COLD);
}

int lg_run_scale(struct kube_client *c, const struct lg_opts *o, json_t *out)
{
    return sandboxes(c, o, out, SB_SCALE);
}

int lg_run_probe(struct kube_client *c, const struct lg_opts *o, json_t *out)
{
    return sandboxes(c, o, out, SB_PROBE);
}
