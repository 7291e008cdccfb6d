/* SPDX-License-Identifier: Apache-2.0 */
/* Per-object milestone records stamped from client-side watch events, and the
 * latency/throughput statistics computed from them. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/str.h"
#include "common/xalloc.h"
#include "kube/obj.h"
#include "lg.h"

void lg_track_init(struct lg_track *t, const char *prefix, size_t n)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cond, NULL);
    t->recs = xcalloc(n ? n : 1, sizeof(*t->recs));
    t->n = n;
    (void)snprintf(t->prefix, sizeof(t->prefix), "%s", prefix);
}

void lg_track_done(struct lg_track *t)
{
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->cond);
    xfree(t->recs);
    t->recs = NULL;
}

struct lg_rec *lg_track_rec(struct lg_track *t, const char *name)
{
    size_t pl = strlen(t->prefix);
    uint64_t i;
    if (!name || strncmp(name, t->prefix, pl) != 0 || name[pl] != '-')
        return NULL;
    if (cstr_to_u64(name + pl + 1, &i) < 0 || i >= t->n)
        return NULL;
    return &t->recs[i];
}

int lg_track_wait(struct lg_track *t, size_t want, usec_t timeout)
{
    struct timespec ts;
    int r = 0;
    clock_deadline_realtime(timeout, &ts);
    pthread_mutex_lock(&t->lock);
    while (t->ready < want && r == 0)
        r = pthread_cond_timedwait(&t->cond, &t->lock, &ts);
    r = t->ready >= want ? 0 : -ETIMEDOUT;
    pthread_mutex_unlock(&t->lock);
    return r;
}

static void seen(void *ctx, const json_t *obj)
{
    struct lg_track *t = ctx;
    usec_t now = clock_now();
    struct lg_rec *rec;
    if (!kube_obj_condition_true(obj, "Ready"))
        return;
    pthread_mutex_lock(&t->lock);
    rec = lg_track_rec(t, kube_obj_name(obj));
    if (rec && !rec->ready && rec->create) {
        rec->ready = now;
        t->ready++;
        pthread_cond_broadcast(&t->cond);
    }
    pthread_mutex_unlock(&t->lock);
}

static void on_update(void *ctx, const json_t *o, const json_t *n)
{
    (void)o;
    seen(ctx, n);
}

int lg_track_watch(struct lg_track *t, struct kube_client *c, const struct kube_res *res,
                   const char *ns, struct kube_informer **ret)
{
    struct kube_informer_opts o = {
        .client = c, .res = res, .ns = ns, .transform = kube_store_strip_transform};
    struct kube_informer_handlers h = {.on_add = seen, .on_update = on_update, .ctx = t};
    struct kube_informer *inf = NULL;
    int r;
    if ((r = kube_informer_new(&o, &inf)) < 0)
        return r;
    if ((r = kube_informer_add_handlers(inf, &h)) < 0 || (r = kube_informer_start(inf)) < 0 ||
        (r = kube_informer_wait_for_sync(inf, 60 * USEC_PER_SEC)) < 0)
        goto fail;
    *ret = inf;
    return 0;
fail:
    kube_informer_free(inf);
    return r;
}

/* ---- statistics ----------------------------------------------------------------------- */

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b)
{
    usec_t x = *(const usec_t *)a, y = *(const usec_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v[n]. */
static double pct(const double *v, size_t n, double p)
{
    size_t k = (size_t)ceil(p / 100.0 * (double)n);
    if (n == 0)
        return 0;
    return v[k ? k - 1 : 0];
}

static double round3(double x)
{
    return round(x * 1000) / 1000;
}

/* Best count of events in any window of w usec over sorted times[n]. */
static size_t best_window(const usec_t *times, size_t n, usec_t w)
{
    size_t best = 0, j = 0;
    for (size_t i = 0; i < n; i++) {
        while (times[i] - times[j] > w)
            j++;
        if (i - j + 1 > best)
            best = i - j + 1;
    }
    return best;
}

static json_t *throughput(const usec_t *ready, size_t n, usec_t first_create)
{
    json_t *o = json_object();
    double overall = 0, steady = 0, best10 = 0;
    usec_t span10 = 10 * USEC_PER_SEC;
    if (n > 0 && ready[n - 1] > first_create)
        overall = (double)n / ((double)(ready[n - 1] - first_create) / 1e6);
    if (n >= 10) {
        size_t lo = n / 10, hi = n - 1 - n / 10;
        if (ready[hi] > ready[lo])
            steady = (double)(hi - lo) / ((double)(ready[hi] - ready[lo]) / 1e6);
    }
    if (n > 0) {
        usec_t span = ready[n - 1] - ready[0];
        best10 = (double)best_window(ready, n, span10) / (span < span10 ? (double)span / 1e6 : 10);
        if (span == 0)
            best10 = (double)n;
    }
    json_object_set_new(o, "overall_per_s", json_real(round3(overall)));
    json_object_set_new(o, "steady_per_s", json_real(round3(steady)));
    json_object_set_new(o, "best_10s_per_s", json_real(round3(best10)));
    return o;
}

static json_t *timeline(const usec_t *ready, size_t n, usec_t first_create)
{
    json_t *a = json_array();
    size_t sec = 0, cnt = 0;
    for (size_t i = 0; i < n; i++) {
        size_t s = (size_t)((ready[i] - first_create) / USEC_PER_SEC);
        while (sec < s) {
            json_array_append_new(a, json_integer((json_int_t)cnt));
            cnt = 0;
            sec++;
        }
        cnt++;
    }
    if (n)
        json_array_append_new(a, json_integer((json_int_t)cnt));
    return a;
}

static void put_pcts(json_t *o, const double *lat, size_t n)
{
    static const struct {
        const char *k;
        double p;
    } ps[] = {{"p50_ms", 50}, {"p90_ms", 90}, {"p95_ms", 95}, {"p99_ms", 99}, {"max_ms", 100}};
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += lat[i];
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++)
        json_object_set_new(o, ps[i].k, json_real(round3(pct(lat, n, ps[i].p))));
    json_object_set_new(o, "min_ms", json_real(round3(n ? lat[0] : 0)));
    json_object_set_new(o, "mean_ms", json_real(round3(n ? sum / (double)n : 0)));
}

/* The POSTs' own round trips (create to ack): the part of each latency the controller
 * has no hand in. */
static void put_post_pcts(json_t *o, const struct lg_track *t, size_t from, size_t to)
{
    double *post = xcalloc(to > from ? to - from : 1, sizeof(*post));
    size_t n = 0;
    for (size_t i = from; i < to; i++)
        if (t->recs[i].create && t->recs[i].ack >= t->recs[i].create)
            post[n++] = (double)(t->recs[i].ack - t->recs[i].create) / 1000.0;
    qsort(post, n, sizeof(*post), cmp_dbl);
    json_object_set_new(o, "post_p50_ms", json_real(round3(pct(post, n, 50))));
    json_object_set_new(o, "post_p99_ms", json_real(round3(pct(post, n, 99))));
    xfree(post);
}

json_t *lg_stats(const struct lg_track *t, size_t from, size_t to)
{
    size_t n = 0, failed = 0, warm = 0, total = 0;
    double *lat = xcalloc(to > from ? to - from : 1, sizeof(*lat));
    usec_t *rd = xcalloc(to > from ? to - from : 1, sizeof(*rd)), first = 0, last = 0,
           last_create = 0;
    json_t *o = json_object(), *samples = json_array();
    for (size_t i = from; i < to; i++) {
        const struct lg_rec *r = &t->recs[i];
        if (!r->create)
            continue; /* never created (sustained: stopped by the backlog guard) */
        total++;
        failed += r->failed;
        if (r->create && (!first || r->create < first))
            first = r->create;
        if (r->create > last_create)
            last_create = r->create;
        if (!r->ready || !r->create)
            continue;
        warm += r->warm;
        lat[n] = (double)(r->ready - r->create) / 1000.0;
        rd[n++] = r->ready;
        if (r->ready > last)
            last = r->ready;
    }
    qsort(lat, n, sizeof(*lat), cmp_dbl);
    qsort(rd, n, sizeof(*rd), cmp_u64);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(samples, json_real(round3(lat[i])));
    json_object_set_new(o, "count", json_integer((json_int_t)total));
    json_object_set_new(o, "ready", json_integer((json_int_t)n));
    json_object_set_new(o, "failed", json_integer((json_int_t)failed));
    json_object_set_new(o, "warm", json_integer((json_int_t)warm));
    put_pcts(o, lat, n);
    put_post_pcts(o, t, from, to);
    json_object_set_new(o, "all_ready_ms",
                        json_real(n == total && n ? round3((double)(last - first) / 1000) : -1));
    /* how "at once" the creates were: first to last POST sent */
    json_object_set_new(o, "create_span_ms",
                        json_real(round3((double)(last_create - first) / 1000)));
    json_object_set_new(o, "throughput", throughput(rd, n, first));
    json_object_set_new(o, "ready_per_s", timeline(rd, n, first));
    json_object_set_new(o, "samples_ms", samples);
    xfree(lat);
    xfree(rd);
    return o;
}

static double rel_ms(usec_t t, usec_t first)
{
    return t ? (double)(t - first) / 1000.0 : -1;
}

int lg_records_write(const struct lg_opts *o, const struct lg_track *t, size_t from, size_t to)
{
    usec_t first = 0;
    FILE *f;
    if (!o->records)
        return 0;
    for (size_t i = from; i < to; i++)
        if (t->recs[i].create && (!first || t->recs[i].create < first))
            first = t->recs[i].create;
    f = fopen(o->records, "ae");
    if (!f)
        return -errno;
    for (size_t i = from; i < to; i++) {
        const struct lg_rec *r = &t->recs[i];
        (void)fprintf(f, "%zu\t%.3f\t%.3f\t%.3f\n", i, rel_ms(r->create, first),
                      rel_ms(r->ack, first), rel_ms(r->ready, first));
    }
    return fclose(f) == 0 ? 0 : -errno;
}
