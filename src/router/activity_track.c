/* SPDX-License-Identifier: Apache-2.0 */
/* Per-Sandbox activity and its batched annotation writes (see activity_track.h). */
#include "router/activity_track.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "api/res.h"
#include "api/sandbox.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/map.h"
#include "common/xalloc.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "kube/res.h"
#include "kube/store.h"
#include "router/resume_worker.h"
#include "router/route.h"

struct act {
    struct activity_track *t;
    char key[2 * ROUTE_NAME_MAX + 2];
    size_t open;
    usec_t last;       /* monotonic */
    usec_t written;    /* the activity time last written (monotonic) */
    usec_t written_at; /* when it was written */
    usec_t prev;       /* written before the write under way (restored if it fails) */
    usec_t retry_at;   /* after failed writes: not before (monotonic) */
    unsigned fails;    /* failed writes in a row */
    bool writing, orphan;
    char value[40];
};

struct activity_track {
    struct activity_track_opts o;
    uv_timer_t timer;
    struct map *acts; /* key -> struct act * */
    struct activity_stats st;
    size_t pending; /* writes submitted, not done */
    bool final;     /* activity_flush_final came: write what moved at once */
};

usec_t activity_interval(usec_t timeout)
{
    usec_t i = timeout / 4;
    if (i < LIMIT_ROUTER_ACTIVITY_MIN)
        return LIMIT_ROUTER_ACTIVITY_MIN;
    return i > LIMIT_ROUTER_ACTIVITY_MAX ? LIMIT_ROUTER_ACTIVITY_MAX : i;
}

int activity_write_kube(void *ctx, const char *ns, const char *name, const char *value)
{
    struct kube_err e;
    json_t *patch =
        json_pack("{s:{s:{s:s}}}", "metadata", "annotations", SB_ANN_LAST_ACTIVITY, value);
    int r = kube_patch(ctx, &API_RES_SANDBOXES, ns, name, KUBE_PATCH_MERGE, patch, NULL, &e);
    json_decref(patch);
    return r;
}

static int write_run(void *arg)
{
    struct act *a = arg;
    char ns[ROUTE_NAME_MAX + 1];
    struct str n, rest;
    (void)str_cut(str_c(a->key), '/', &n, &rest);
    (void)snprintf(ns, sizeof(ns), "%.*s", (int)n.len, n.p);
    char *name = str_dup(rest);
    int r = a->t->o.write(a->t->o.write_ctx, ns, name, a->value);
    xfree(name);
    return r;
}

static bool flush_one(struct activity_track *t, struct act *a, usec_t now);

static void write_done(void *arg, int rc)
{
    struct act *a = arg;
    a->writing = false;
    if (a->orphan) {
        xfree(a);
        return;
    }
    a->t->pending--;
    if (rc < 0) {
        /* Again after a back-off: the interval at least, doubling to 10 minutes. Before,
         * every tick (a second) wrote again, for good, with or without traffic: a webhook
         * refusing the annotation, or an API server answering 429, got a write a second
         * per active Sandbox. */
        usec_t b = LIMIT_ROUTER_ACTIVITY_MAX << (a->fails < 4 ? a->fails : 4);
        a->t->st.write_errors++;
        a->written = a->prev;
        a->fails++;
        a->retry_at =
            clock_now() + (b < LIMIT_ROUTER_ACTIVITY_FORGET ? b : LIMIT_ROUTER_ACTIVITY_FORGET);
        log_debug_errno(rc, "activity annotation not written\tsandbox=%s", a->key);
    } else {
        a->fails = 0;
        a->t->st.writes++;
        /* A write under way at the final flush carried an older time: one more (not
         * for an entry still open, which would count as moved at every write). */
        if (a->t->final && a->last > a->written)
            (void)flush_one(a->t, a, clock_now());
    }
}

/* Write interval of the Sandbox key, or 0 when it has no idle policy. */
static usec_t interval_of(struct activity_track *t, const char *key)
{
    json_t *sb = kube_store_get(t->o.store, key);
    const json_t *to = kube_obj_path(sb, "spec.idlePolicy.timeoutSeconds");
    usec_t i = json_is_integer(to) && json_integer_value(to) > 0
                   ? activity_interval((usec_t)json_integer_value(to) * USEC_PER_SEC)
                   : 0;
    json_decref(sb);
    return i;
}

/* Returns true when the entry may be forgotten. At the final flush (t->final), what
 * moved is written whatever its interval or back-off. */
static bool flush_one(struct activity_track *t, struct act *a, usec_t now)
{
    if (a->open)
        a->last = now;
    if (a->writing)
        return false;
    if (a->fails && now < a->retry_at && !t->final) /* given up once idle while kept */
        return !a->open && now - a->last >= LIMIT_ROUTER_ACTIVITY_FORGET;
    if (a->last <= a->written)
        return !a->open && now - a->last >= LIMIT_ROUTER_ACTIVITY_FORGET;
    usec_t iv = interval_of(t, a->key);
    if (!iv)
        return !a->open && now - a->last >= LIMIT_ROUTER_ACTIVITY_FORGET;
    if (a->written && now - a->written_at < iv && !t->final)
        return false;
    clock_format_rfc3339(clock_wall_now() - (now - a->last), a->value, sizeof(a->value));
    if (resume_worker_submit(t->o.worker, write_run, write_done, a) < 0)
        return false;
    t->pending++;
    a->writing = true;
    a->prev = a->written;
    a->written = a->last;
    a->written_at = now;
    return false;
}

void activity_flush(struct activity_track *t)
{
    usec_t now = clock_now();
    struct map_iter it;
    const char *key;
    size_t klen;
    void *v;
    struct kube_strv gone = {0};
    map_iter_init(&it, t->acts);
    while (map_iter_next(&it, &key, &klen, &v))
        if (flush_one(t, v, now))
            kube_strv_add(&gone, key);
    for (size_t i = 0; i < gone.n; i++)
        xfree(map_remove(t->acts, gone.v[i]));
    kube_strv_done(&gone);
}

size_t activity_flush_final(struct activity_track *t)
{
    if (!t)
        return 0;
    t->final = true;
    activity_flush(t);
    return t->pending;
}

size_t activity_writes_pending(const struct activity_track *t)
{
    return t ? t->pending : 0;
}

static void on_tick(uv_timer_t *timer)
{
    activity_flush(timer->data);
}

struct activity_track *activity_track_new(uv_loop_t *loop, const struct activity_track_opts *o)
{
    struct activity_track *t = XNEW(struct activity_track);
    t->o = *o;
    if (!t->o.tick)
        t->o.tick = LIMIT_ROUTER_ACTIVITY_TICK;
    if (!t->o.write) {
        t->o.write = activity_write_kube;
        t->o.write_ctx = o->client;
    }
    t->acts = map_new(NULL);
    (void)uv_timer_init(loop, &t->timer);
    t->timer.data = t;
    uint64_t ms = t->o.tick / USEC_PER_MSEC;
    (void)uv_timer_start(&t->timer, on_tick, ms, ms);
    uv_unref((uv_handle_t *)&t->timer); /* never keeps the loop alive on its own */
    return t;
}

static void on_closed(uv_handle_t *h)
{
    struct activity_track *t = h->data;
    map_free(t->acts);
    xfree(t);
}

void activity_track_free(struct activity_track *t)
{
    if (!t)
        return;
    struct map_iter it;
    const char *key;
    size_t klen;
    void *v;
    map_iter_init(&it, t->acts);
    while (map_iter_next(&it, &key, &klen, &v)) {
        struct act *a = v;
        if (a->writing)
            a->orphan = true;
        else
            xfree(a);
    }
    map_clear(t->acts);
    uv_close((uv_handle_t *)&t->timer, on_closed);
}

static struct act *act_get(struct activity_track *t, const char *key)
{
    struct act *a = map_get(t->acts, key);
    if (a || map_len(t->acts) >= LIMIT_ROUTER_ACTIVITY_ENTRIES)
        return a;
    a = XNEW(struct act);
    a->t = t;
    if (str_copy(a->key, sizeof(a->key), key) < 0) {
        xfree(a);
        return NULL;
    }
    (void)map_put(t->acts, key, a, NULL);
    return a;
}

bool activity_begin(struct activity_track *t, const char *key)
{
    struct act *a = t ? act_get(t, key) : NULL;
    if (!a)
        return false;
    a->open++;
    a->last = clock_now();
    return true;
}

void activity_end(struct activity_track *t, const char *key)
{
    struct act *a = t ? map_get(t->acts, key) : NULL;
    if (!a)
        return;
    if (a->open)
        a->open--;
    a->last = clock_now();
}

void activity_track_stats(const struct activity_track *t, struct activity_stats *ret)
{
    *ret = t->st;
    ret->entries = map_len(t->acts);
}
