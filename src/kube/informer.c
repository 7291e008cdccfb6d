/* SPDX-License-Identifier: Apache-2.0 */
/* List+watch informer: one thread keeps a store in step and calls handlers in order. */
#include "kube/informer.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/map.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "kube/obj.h"
#include "kube/watch.h"

struct kube_informer {
    struct kube_informer_opts o; /* strings point at the copies below */
    char *ns, *label_selector, *field_selector, *name;
    struct kube_informer_source src;
    struct kube_store *store;
    struct kube_informer_handlers h[LIMIT_KUBE_INFORMER_HANDLERS];
    size_t nh;

    /* used by the informer thread only */
    struct kube_watch *w;
    struct kube_backoff bo;
    usec_t next_resync;

    pthread_t thread;
    bool started, joined;
    atomic_bool stop;
    atomic_bool synced;

    pthread_mutex_t mu;  /* guards the fields below and the waits */
    pthread_cond_t cond; /* CLOCK_MONOTONIC: stop, sync and thread end */
    bool done;           /* the thread has finished */
    char rv[128];        /* last resourceVersion, for kube_informer_last_rv */
    struct kube_informer_stats st;
};

static void lock(struct kube_informer *inf)
{
    ASSERT(pthread_mutex_lock(&inf->mu) == 0);
}

static void unlock(struct kube_informer *inf)
{
    ASSERT(pthread_mutex_unlock(&inf->mu) == 0);
}

static void stat_inc(struct kube_informer *inf, uint64_t *counter)
{
    lock(inf);
    (*counter)++;
    unlock(inf);
}

static bool stopping(struct kube_informer *inf)
{
    return atomic_load(&inf->stop);
}

static void set_rv(struct kube_informer *inf, const char *rv)
{
    lock(inf);
    (void)str_copy(inf->rv, sizeof(inf->rv), rv);
    unlock(inf);
}

/* ---- handler dispatch (informer thread) ---- */

static void notify_add(struct kube_informer *inf, const json_t *obj)
{
    for (size_t i = 0; i < inf->nh; i++)
        if (inf->h[i].on_add)
            inf->h[i].on_add(inf->h[i].ctx, obj);
    stat_inc(inf, &inf->st.adds);
}

static void notify_update(struct kube_informer *inf, const json_t *old_obj, const json_t *new_obj)
{
    for (size_t i = 0; i < inf->nh; i++)
        if (inf->h[i].on_update)
            inf->h[i].on_update(inf->h[i].ctx, old_obj, new_obj);
    stat_inc(inf, &inf->st.updates);
}

static void notify_delete(struct kube_informer *inf, const json_t *obj, bool unknown)
{
    for (size_t i = 0; i < inf->nh; i++)
        if (inf->h[i].on_delete)
            inf->h[i].on_delete(inf->h[i].ctx, obj, unknown);
    stat_inc(inf, &inf->st.deletes);
}

static void transform(struct kube_informer *inf, json_t *obj)
{
    if (inf->o.transform)
        inf->o.transform(inf->o.transform_ctx, obj);
}

/* Stores obj (taken) and tells the handlers whether it is new or changed. */
static void apply_upsert(struct kube_informer *inf, json_t *obj)
{
    json_t *old = NULL;
    int r = kube_store_put(inf->store, json_incref(obj), &old);
    if (r < 0)
        log_debug_errno(r, "informer %s: object without a usable key, ignoring", inf->name);
    else if (old)
        notify_update(inf, old, obj);
    else
        notify_add(inf, obj);
    json_decref(old);
    json_decref(obj);
}

static void apply_delete(struct kube_informer *inf, const json_t *obj)
{
    char key[LIMIT_KUBE_STORE_KEY + 1];
    int r = kube_store_key(obj, key, sizeof(key));
    if (r < 0) {
        log_debug_errno(r, "informer %s: deleted object without a usable key, ignoring", inf->name);
        return;
    }
    (void)kube_store_remove(inf->store, key, NULL);
    notify_delete(inf, obj, false);
}

/* kube_watch_event_fn: applies one watch event in stream order. */
static int on_event(void *ctx, const struct kube_event *ev)
{
    struct kube_informer *inf = ctx;
    if (stopping(inf))
        return -ECANCELED;
    if (ev->type == KUBE_EVENT_BOOKMARK) {
        stat_inc(inf, &inf->st.bookmarks);
    } else {
        transform(inf, ev->object);
        if (ev->type == KUBE_EVENT_DELETED)
            apply_delete(inf, ev->object);
        else
            apply_upsert(inf, json_incref(ev->object));
    }
    stat_inc(inf, &inf->st.events);
    if (ev->resource_version && ev->resource_version[0])
        set_rv(inf, ev->resource_version);
    return 0;
}

/* ---- LIST ---- */

/* Applies one listed item unless the cache already has that version; records its key. */
static void relist_item(struct kube_informer *inf, json_t *item, struct map *seen)
{
    char key[LIMIT_KUBE_STORE_KEY + 1];
    transform(inf, item);
    if (kube_store_key(item, key, sizeof(key)) < 0) {
        log_debug("informer %s: listed object without a usable key, ignoring", inf->name);
        return;
    }
    (void)map_put(seen, key, NULL, NULL);
    json_t *old = kube_store_get(inf->store, key);
    bool unchanged = old && kube_obj_same_version(old, item);
    json_decref(old);
    if (!unchanged)
        apply_upsert(inf, json_incref(item));
}

/* An object that names only what its store key says: metadata.namespace and .name. */
static json_t *key_tombstone(const char *key)
{
    const char *slash = strchr(key, '/');
    if (!slash)
        return json_pack("{s:{s:s}}", "metadata", "name", key);
    return json_pack("{s:{s:s%, s:s}}", "metadata", "namespace", key, (size_t)(slash - key), "name",
                     slash + 1);
}

/* Deletes what the cache holds but the list no longer returned: tombstones. */
static void drop_missing(struct kube_informer *inf, struct map *seen)
{
    struct kube_strv keys = {0};
    kube_store_keys(inf->store, &keys);
    for (size_t i = 0; i < keys.n; i++) {
        json_t *old = NULL;
        if (map_find(seen, keys.v[i], strlen(keys.v[i]), NULL))
            continue;
        int r = kube_store_remove(inf->store, keys.v[i], &old);
        if (r == -EIO)
            old = key_tombstone(keys.v[i]); /* held but unreadable: its key still says who */
        if (r == 0 || old)
            notify_delete(inf, old, true);
        json_decref(old);
    }
    kube_strv_done(&keys);
}

/* One LIST being applied page by page: the keys seen so far (for the tombstones at the
 * end) and the list's resourceVersion. */
struct relist {
    struct kube_informer *inf;
    struct map *seen;
    char *rv; /* the last page's */
};

/* kube_list_page_fn: stores one page's items as they arrive, so that no more than one
 * page of the response is held besides the store. */
static int apply_page(void *ctx, const json_t *page, bool restarted)
{
    struct relist *l = ctx;
    json_t *items = json_object_get(page, "items");
    const char *rv = kube_obj_resource_version(page);
    size_t i;
    json_t *item;

    if (stopping(l->inf))
        return -ECANCELED;
    if ((items && !json_is_array(items)) || !rv || !rv[0])
        return -EPROTO;
    xfree(l->rv);
    l->rv = xstrdup(rv);
    if (restarted)
        map_clear(l->seen); /* a new snapshot: only its keys count */
    json_array_foreach(items, i, item)
    {
        if (json_is_object(item))
            relist_item(l->inf, item, l->seen);
    }
    return 0;
}

/* Lists through the source, page by page when it can, and then drops what the list no
 * longer returned and resumes from the list's resourceVersion. */
static int relist(struct kube_informer *inf, struct kube_err *err)
{
    struct relist l = {.inf = inf, .seen = map_new(NULL)};
    json_t *list = NULL;
    int r;

    if (inf->src.list_pages) {
        r = inf->src.list_pages(inf->src.ctx, &inf->o, apply_page, &l, err);
    } else {
        r = inf->src.list(inf->src.ctx, &inf->o, &list, err);
        if (r >= 0)
            r = apply_page(&l, list, false);
        json_decref(list);
    }
    if (r >= 0 && !l.rv)
        r = -EPROTO;
    if (r >= 0) {
        drop_missing(inf, l.seen);
        kube_watch_set_rv(inf->w, l.rv);
        set_rv(inf, l.rv);
    }
    map_free(l.seen);
    xfree(l.rv);
    return r;
}

static int list_once(struct kube_informer *inf)
{
    struct kube_err err;

    kube_err_clear(&err);
    int r = relist(inf, &err);
    if (r == -ECANCELED && stopping(inf))
        return r;
    if (r < 0) {
        stat_inc(inf, &inf->st.list_errors);
        return log_debug_errno(r, "informer %s: list failed, will retry\tdetail=\"%s\"", inf->name,
                               err.message);
    }
    lock(inf);
    inf->st.lists++;
    if (atomic_load(&inf->synced))
        inf->st.relists++;
    atomic_store(&inf->synced, true);
    ASSERT(pthread_cond_broadcast(&inf->cond) == 0);
    unlock(inf);
    return 0;
}

/* ---- WATCH ---- */

static void backoff_wait(struct kube_informer *inf)
{
    struct timespec ts;
    clock_deadline_mono(kube_backoff_next(&inf->bo), &ts);
    lock(inf);
    while (!stopping(inf))
        if (pthread_cond_timedwait(&inf->cond, &inf->mu, &ts) == ETIMEDOUT)
            break;
    unlock(inf);
}

static void maybe_resync(struct kube_informer *inf)
{
    if (!inf->o.resync_period || clock_now() < inf->next_resync)
        return;
    struct kube_objv all = {0};
    stat_inc(inf, &inf->st.resyncs);
    kube_store_list(inf->store, &all);
    for (size_t i = 0; i < all.n && !stopping(inf); i++)
        notify_update(inf, all.v[i], all.v[i]);
    kube_objv_done(&all);
    inf->next_resync = clock_now() + inf->o.resync_period;
}

/* The server-side timeout: random in client-go's range, but never past the next resync,
 * so the stream ends in time for it. */
static long watch_timeout(struct kube_informer *inf)
{
    long t = inf->o.watch_timeout_s;
    if (t <= 0)
        t = (long)kube_backoff_rand(&inf->bo, LIMIT_KUBE_WATCH_TIMEOUT_S,
                                    2 * LIMIT_KUBE_WATCH_TIMEOUT_S);
    if (inf->o.resync_period) {
        usec_t now = clock_now();
        usec_t left = inf->next_resync > now ? inf->next_resync - now : 0;
        long s = (long)((left + USEC_PER_SEC - 1) / USEC_PER_SEC);
        if (s < 1)
            s = 1;
        if (s < t)
            t = s;
    }
    return t;
}

static int watch_once(struct kube_informer *inf, bool resumed)
{
    struct kube_err err;
    char *rv = xstrdup(kube_watch_rv(inf->w)); /* the decoder replaces its copy */
    struct kube_informer_watch_args a = {
        .resource_version = rv,
        .timeout_seconds = watch_timeout(inf),
        .fn = kube_watch_feed,
        .fn_ctx = inf->w,
        .stop = &inf->stop,
    };

    kube_err_clear(&err);
    kube_watch_reset(inf->w);
    lock(inf);
    inf->st.watch_starts++;
    if (resumed)
        inf->st.watch_restarts++;
    unlock(inf);
    int r = inf->src.watch(inf->src.ctx, &inf->o, &a, &err);
    if (r < 0 && r != -ECANCELED && r != -ESTALE && kube_watch_error(inf->w)->code == 0)
        log_debug_errno(r, "informer %s: watch from %s failed\tdetail=\"%s\"", inf->name,
                        rv ? rv : "", err.message);
    else if (r < 0 && r != -ECANCELED)
        log_debug_errno(r, "informer %s: watch from %s ended\tdetail=\"%s\"", inf->name,
                        rv ? rv : "", kube_watch_error(inf->w)->message);
    xfree(rv);
    return r;
}

#define WATCH_BAD_RESUMES 3

/* Watches until a relist is needed (410, or an event that breaks every watch) or the
 * informer stops. Returns true when the re-list is to wait first: the 410 came before any
 * watch since the LIST made progress (the LIST's version was already too old: a re-list
 * at once could loop, a full read of etcd each time), or events could not be taken. */
static bool watch_loop(struct kube_informer *inf)
{
    bool resumed = false, any = false;
    int bad = 0; /* watches in a row that broke on an event without applying one */
    while (!stopping(inf)) {
        maybe_resync(inf);
        uint64_t ev0 = kube_watch_events(inf->w);
        usec_t t0 = clock_now();
        int r = watch_once(inf, resumed);
        resumed = true;
        if (stopping(inf))
            return false;
        /* Progress: an event, or a watch that lived and ended cleanly (its timeout). A
         * failure is never progress by its duration: a slow API server answering each
         * watch with an error (or a 410) after a second would reset the back-off every
         * time (about one retry, or one full LIST, a second for good). */
        bool progressed = kube_watch_events(inf->w) > ev0 ||
                          (r == 0 && clock_now() - t0 >= LIMIT_KUBE_WATCH_MIN_LIFE);
        any = any || progressed;
        if (r == -ESTALE) {
            stat_inc(inf, &inf->st.gone);
            return !any;
        }
        if ((r == -E2BIG || r == -EPROTO) && kube_watch_events(inf->w) == ev0) {
            /* An event that cannot be taken (over the frame limit, or malformed) comes
             * again at every resume from the same version: after a few, re-list (the
             * LIST reads the objects as they are now), after a back-off. */
            if (++bad >= WATCH_BAD_RESUMES) {
                stat_inc(inf, &inf->st.watch_errors);
                log_warn_errno(r, "informer %s: an event breaks every watch, re-listing",
                               inf->name);
                return true;
            }
        } else {
            bad = 0;
        }
        if (progressed)
            kube_backoff_reset(&inf->bo);
        if (r == 0 && progressed)
            continue;
        if (r < 0)
            stat_inc(inf, &inf->st.watch_errors);
        backoff_wait(inf);
    }
    return false;
}

static void *run(void *arg)
{
    struct kube_informer *inf = arg;
    bool churn = false; /* the last watch met 410 before any progress */
    while (!stopping(inf)) {
        if (churn)
            backoff_wait(inf); /* growing: the back-off is reset on progress only */
        if (list_once(inf) < 0) {
            backoff_wait(inf);
            continue;
        }
        if (!churn)
            kube_backoff_reset(&inf->bo);
        if (inf->o.resync_period && !inf->next_resync)
            inf->next_resync = clock_now() + inf->o.resync_period;
        churn = watch_loop(inf);
    }
    lock(inf);
    inf->done = true;
    ASSERT(pthread_cond_broadcast(&inf->cond) == 0);
    unlock(inf);
    return NULL;
}

/* ---- the API server as source ---- */

static void client_req(const struct kube_informer_opts *o, struct kube_req *r)
{
    kube_req_init(r, "GET", o->res);
    r->cancel = o->cancel;
    r->ns = o->ns;
    r->label_selector = o->label_selector;
    r->field_selector = o->field_selector;
}

static int client_list(void *ctx, const struct kube_informer_opts *o, json_t **ret_list,
                       struct kube_err *reterr)
{
    struct kube_req r;
    (void)ctx;
    client_req(o, &r);
    return kube_list_all(o->client, o->res, o->ns, &r, ret_list, reterr);
}

static int client_list_pages(void *ctx, const struct kube_informer_opts *o, kube_list_page_fn *fn,
                             void *fn_ctx, struct kube_err *reterr)
{
    struct kube_req r;
    (void)ctx;
    client_req(o, &r);
    if (o->compact_store || o->compact_above)
        r.limit = LIMIT_KUBE_LIST_PAGE_SMALL;
    return kube_list_pages(o->client, o->res, o->ns, &r, fn, fn_ctx, reterr);
}

static int client_watch(void *ctx, const struct kube_informer_opts *o,
                        const struct kube_informer_watch_args *a, struct kube_err *reterr)
{
    struct kube_req r;
    (void)ctx;
    client_req(o, &r);
    r.watch = true;
    r.allow_watch_bookmarks = true;
    r.resource_version = a->resource_version;
    r.timeout_seconds = a->timeout_seconds;
    int ret =
        kube_request_stream(o->client, &r, a->fn, a->fn_ctx, a->stop, o->idle_timeout, reterr);
    if (ret < 0 && ret != -ECANCELED && ret != -ESTALE && kube_err_is_gone(reterr))
        ret = -ESTALE;
    return ret;
}

static const struct kube_informer_source client_source = {
    .list = client_list,
    .list_pages = client_list_pages,
    .watch = client_watch,
};

/* ---- lifecycle ---- */

static void init_sync(struct kube_informer *inf)
{
    pthread_condattr_t ca;
    ASSERT(pthread_mutex_init(&inf->mu, NULL) == 0);
    ASSERT(pthread_condattr_init(&ca) == 0);
    ASSERT(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0);
    ASSERT(pthread_cond_init(&inf->cond, &ca) == 0);
    (void)pthread_condattr_destroy(&ca);
    atomic_init(&inf->stop, false);
    atomic_init(&inf->synced, false);
}

int kube_informer_new(const struct kube_informer_opts *opts, struct kube_informer **ret)
{
    if (!opts || !opts->res || (!opts->source && !opts->client))
        return -EINVAL;
    struct kube_informer *inf = XNEW(struct kube_informer);
    inf->o = *opts;
    inf->ns = xstrdup(opts->ns);
    inf->label_selector = xstrdup(opts->label_selector);
    inf->field_selector = xstrdup(opts->field_selector);
    inf->name = xstrdup(opts->name ? opts->name : opts->res->plural);
    inf->o.ns = inf->ns;
    inf->o.label_selector = inf->label_selector;
    inf->o.field_selector = inf->field_selector;
    inf->o.name = inf->name;
    inf->src = opts->source ? *opts->source : client_source;
    inf->o.cancel = &inf->stop;
    inf->o.source = &inf->src;
    inf->store = kube_store_new();
    if (opts->compact_store)
        ASSERT(kube_store_set_compact(inf->store, true) == 0);
    kube_store_set_compact_above(inf->store, opts->compact_above);
    inf->w = kube_watch_new(opts->max_frame, on_event, inf);
    kube_backoff_init(&inf->bo, opts->backoff_min, opts->backoff_max);
    init_sync(inf);
    *ret = inf;
    return 0;
}

void kube_informer_free(struct kube_informer *inf)
{
    if (!inf)
        return;
    kube_informer_stop(inf);
    kube_watch_free(inf->w);
    kube_store_free(inf->store);
    (void)pthread_cond_destroy(&inf->cond);
    (void)pthread_mutex_destroy(&inf->mu);
    xfree(inf->ns);
    xfree(inf->label_selector);
    xfree(inf->field_selector);
    xfree(inf->name);
    xfree(inf);
}

int kube_informer_add_handlers(struct kube_informer *inf, const struct kube_informer_handlers *h)
{
    if (inf->started)
        return -EBUSY;
    if (inf->nh == LIMIT_KUBE_INFORMER_HANDLERS)
        return -ENOSPC;
    inf->h[inf->nh++] = *h;
    return 0;
}

int kube_informer_add_index(struct kube_informer *inf, const char *name, kube_index_fn *fn,
                            void *ctx)
{
    return kube_store_add_index(inf->store, name, fn, ctx);
}

struct kube_store *kube_informer_store(struct kube_informer *inf)
{
    return inf->store;
}

int kube_informer_start(struct kube_informer *inf)
{
    if (inf->started)
        return -EALREADY;
    int r = pthread_create(&inf->thread, NULL, run, inf);
    if (r != 0)
        return -r;
    inf->started = true;
    return 0;
}

void kube_informer_request_stop(struct kube_informer *inf)
{
    if (!inf)
        return;
    atomic_store(&inf->stop, true);
    lock(inf);
    ASSERT(pthread_cond_broadcast(&inf->cond) == 0);
    unlock(inf);
}

void kube_informer_stop(struct kube_informer *inf)
{
    kube_informer_request_stop(inf);
    if (inf->started && !inf->joined) {
        ASSERT(pthread_join(inf->thread, NULL) == 0);
        inf->joined = true;
    }
}

bool kube_informer_has_synced(struct kube_informer *inf)
{
    return atomic_load(&inf->synced);
}

int kube_informer_wait_for_sync(struct kube_informer *inf, usec_t timeout)
{
    struct timespec ts;
    int r = 0;
    if (timeout != USEC_INFINITY)
        clock_deadline_mono(timeout, &ts);
    lock(inf);
    while (!atomic_load(&inf->synced)) {
        if (inf->done || stopping(inf)) {
            r = -ECANCELED;
            break;
        }
        int e = timeout == USEC_INFINITY ? pthread_cond_wait(&inf->cond, &inf->mu)
                                         : pthread_cond_timedwait(&inf->cond, &inf->mu, &ts);
        if (e == ETIMEDOUT) {
            r = atomic_load(&inf->synced) ? 0 : -ETIMEDOUT;
            break;
        }
    }
    unlock(inf);
    return r;
}

void kube_informer_stats(struct kube_informer *inf, struct kube_informer_stats *ret)
{
    lock(inf);
    *ret = inf->st;
    unlock(inf);
}

int kube_informer_last_rv(struct kube_informer *inf, char *out, size_t size)
{
    lock(inf);
    int r = str_copy(out, size, inf->rv);
    unlock(inf);
    return r;
}
