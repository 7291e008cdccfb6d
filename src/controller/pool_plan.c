/* SPDX-License-Identifier: Apache-2.0 */
/* Warm-pool create/delete planning and the refill bucket. */
#include "controller/pool_plan.h"

#include <math.h>
#include <stdlib.h>

#include "common/limits.h"
#include "common/xalloc.h"

static void add_del(struct pool_plan *p, size_t i, size_t cap)
{
    if (!p->del)
        p->del = xcalloc(cap ? cap : 1, sizeof(*p->del));
    p->del[p->ndel++] = i;
}

/* Plans member i's deletion within the pass's max_batch; returns false when the batch is
 * full: the member stays (counted as it is) for a later pass. */
static bool plan_delete(const struct pool_plan_in *in, size_t i, struct pool_plan *p)
{
    if (p->ndel >= (size_t)in->max_batch)
        return false;
    add_del(p, i, in->n);
    p->terminating++;
    return true;
}

/* Classifies member i; returns true when it counts as active. */
static bool classify(const struct pool_plan_in *in, size_t i, struct pool_plan *p)
{
    const struct pool_member *m = &in->m[i];
    if (m->terminating) {
        p->terminating++;
        return false;
    }
    if (((m->stale && in->recreate) || m->other_template) && plan_delete(in, i, p))
        return false;
    if (!m->ready && m->created && in->now >= m->created) {
        usec_t age = in->now - m->created;
        if (age <= in->grace) {
            usec_t left = in->grace - age + 2 * USEC_PER_SEC;
            if (!p->requeue || left < p->requeue)
                p->requeue = left;
        } else if (m->unschedulable) {
            p->held++; /* a replacement would be just as unschedulable */
        } else if (plan_delete(in, i, p)) {
            return false;
        }
    }
    return true;
}

struct excess_ctx {
    const struct pool_member *m;
};

/* Not-Ready first, then newest first. */
static int excess_cmp(const void *a, const void *b, void *ctx)
{
    const struct pool_member *m = ((struct excess_ctx *)ctx)->m;
    const struct pool_member *x = &m[*(const size_t *)a], *y = &m[*(const size_t *)b];
    if (x->ready != y->ready)
        return x->ready ? 1 : -1;
    if (x->created != y->created)
        return x->created > y->created ? -1 : 1;
    return 0;
}

static void plan_excess(const struct pool_plan_in *in, const size_t *active, struct pool_plan *p)
{
    size_t n = (size_t)p->active;
    size_t *order = xcalloc(n ? n : 1, sizeof(*order));
    struct excess_ctx ctx = {in->m};
    int excess = p->active - in->desired, left = in->max_batch - (int)p->ndel;
    for (size_t i = 0; i < n; i++)
        order[i] = active[i];
    qsort_r(order, n, sizeof(*order), excess_cmp, &ctx);
    if (excess > left)
        excess = left;
    for (int i = 0; i < excess; i++)
        add_del(p, order[i], in->n);
    xfree(order);
}

void pool_plan_compute(const struct pool_plan_in *in, struct pool_plan *ret)
{
    struct pool_plan p = {0};
    size_t *active = xcalloc(in->n ? in->n : 1, sizeof(*active));
    int total;
    for (size_t i = 0; i < in->n; i++) {
        if (!classify(in, i, &p))
            continue;
        active[p.active++] = i;
        if (in->m[i].ready)
            p.ready++;
    }
    total = p.active + p.terminating;
    if (total < in->desired) {
        p.create = in->desired - total;
        if (p.create > in->max_batch)
            p.create = in->max_batch;
    } else if (p.active > in->desired) {
        plan_excess(in, active, &p);
    }
    xfree(active);
    *ret = p;
}

void pool_plan_done(struct pool_plan *p)
{
    XFREE(p->del);
    p->ndel = 0;
}

int pool_bucket_take(struct pool_bucket *b, double rate, int want, usec_t now, usec_t *ret_wait)
{
    double cap = rate > 1 ? rate : 1;
    int granted;
    if (rate <= 0 || want <= 0)
        return want > 0 ? want : 0;
    if (!b->init) {
        b->tokens = cap;
        b->last = now;
        b->init = true;
    }
    if (now > b->last)
        b->tokens = fmin(cap, b->tokens + rate * (double)(now - b->last) / USEC_PER_SEC);
    b->last = now;
    granted = (int)fmin((double)want, floor(b->tokens));
    b->tokens -= granted;
    if (granted == 0 && ret_wait) {
        /* bounded before the cast: a tiny rate (an annotation of 1e-300) would overflow it */
        double w = ceil((1.0 - b->tokens) / rate * USEC_PER_SEC);
        *ret_wait = w < (double)LIMIT_EXT_REFILL_WAIT ? (usec_t)w : LIMIT_EXT_REFILL_WAIT;
    }
    return granted;
}

void pool_bucket_refund(struct pool_bucket *b, double rate, int n)
{
    double cap = rate > 1 ? rate : 1;
    if (rate > 0 && n > 0)
        b->tokens = fmin(cap, b->tokens + n);
}

usec_t pool_defer_check(struct pool_defer *d, bool waiting, usec_t now, usec_t max, usec_t recheck)
{
    usec_t left;
    if (!waiting || max == 0) {
        d->active = false;
        return 0;
    }
    if (!d->active || now < d->since) {
        d->active = true;
        d->since = now;
    }
    if (now - d->since >= max) {
        d->active = false; /* this pass creates; a later one may wait again */
        return 0;
    }
    left = max - (now - d->since);
    return recheck && recheck < left ? recheck : left;
}

usec_t pool_status_wait(usec_t last, usec_t now, usec_t interval, bool urgent)
{
    if (urgent || !last || now < last || now - last >= interval)
        return 0;
    return interval - (now - last);
}
