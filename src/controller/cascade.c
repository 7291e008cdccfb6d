/* SPDX-License-Identifier: Apache-2.0 */
#include "controller/cascade.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/map.h"
#include "common/metrics.h"
#include "common/xalloc.h"
#include "kube/client.h"
#include "kube/err.h"
#include "kube/nsterm.h"
#include "kube/obj.h"
#include "kube/res.h"
#include "kube/store.h"

#define CASCADE_NS_MAX      63                    /* a namespace is a DNS label */
#define CASCADE_UID_MAX     63                    /* a UID is 36 characters; room for other forms */
#define CASCADE_NAME_MAX    253                   /* an object's name is a DNS subdomain */
#define CASCADE_OWNER_KINDS 2                     /* owner kinds per class: a claim and a pool */
#define SWEEP_POLL          (200 * USEC_PER_MSEC) /* a requested sweep waits for sync */

struct cascade_owner {
    struct cascade_owner *next;
    usec_t due; /* monotonic */
    enum cascade_class cls;
    int attempt; /* 0 on the first look */
    char ns[CASCADE_NS_MAX + 1];
    char uid[CASCADE_UID_MAX + 1];
    /* Chained (an owner the controller deleted itself) or swept (found gone by the
     * sweep): its cache (borrowed) and name, looked at before its dependents are; NULL
     * for an owner an informer saw go. */
    struct kube_store *owner_store;
    char owner_name[CASCADE_NAME_MAX + 1];
    const struct kube_res *owner_res; /* swept: its kind, read again before any DELETE */
};

/* The waiting owners, three first-in first-out lists, each in order of due because each
 * adds one fixed wait to the time of its append: owners seen deleted (the delay), owners
 * looked at again after a refusal (retry) and chained owners (chain_delay). */
enum { Q_OWNER, Q_RETRY, Q_CHAIN, Q_COUNT };

struct cascade_fifo {
    struct cascade_owner *head, *tail;
};

struct cascade_target {
    const struct kube_res *res;
    struct kube_store *store;
    char *index;
};

/* An owner kind (for the sweep): what a dependent's controller reference may name. */
struct cascade_owner_kind {
    const struct kube_res *res;
    struct kube_store *store;
};

struct cascade {
    struct cascade_opts o;
    struct cascade_target t[CASCADE_CLASSES][CASCADE_MAX_TARGETS];
    size_t nt[CASCADE_CLASSES];
    struct cascade_owner_kind k[CASCADE_CLASSES][CASCADE_OWNER_KINDS];
    size_t nk[CASCADE_CLASSES];
    bool sweep_pending; /* requested, not begun */
    usec_t sweep_next;  /* when a pending sweep is tried (again) */
    pthread_mutex_t lock;
    pthread_cond_t work; /* queued, or stopping (monotonic clock) */
    pthread_cond_t idle; /* len and running fell */
    struct cascade_fifo q[Q_COUNT];
    size_t len, running;
    bool stopping, joined, stopped; /* stopped: the threads are joined, the queue empty */
    atomic_bool halt;               /* stopping, for reads without the lock */
    struct cascade_stats st;
    pthread_t *threads;
    int nthreads;
};

/* What one DELETE came to. */
enum outcome { OUT_DELETED, OUT_GONE, OUT_CONFLICT, OUT_FAILED };

static const char *const outcome_name[] = {"deleted", "gone", "conflict", "failed"};

/* ---- the queue ---------------------------------------------------------------------- */

/* Appends o (taken) to list q, due after wait. Called with the lock. */
static void append(struct cascade *c, int q, struct cascade_owner *o, usec_t wait)
{
    struct cascade_fifo *f = &c->q[q];
    o->due = clock_now() + wait;
    o->next = NULL;
    if (f->tail)
        f->tail->next = o;
    else
        f->head = o;
    f->tail = o;
    c->len++;
    pthread_cond_signal(&c->work);
}

/* The list whose first owner is due first, or -1 when all are empty. */
static int first_due(const struct cascade *c)
{
    int best = -1;
    for (int q = 0; q < Q_COUNT; q++)
        if (c->q[q].head && (best < 0 || c->q[q].head->due < c->q[best].head->due))
            best = q;
    return best;
}

/* A new owner of class cls (caller owns it), or NULL when ns or uid is missing or too
 * long for it. */
static struct cascade_owner *owner_new(enum cascade_class cls, const char *ns, const char *uid)
{
    struct cascade_owner *o;
    if (!ns || !uid || !*uid || strlen(ns) > CASCADE_NS_MAX || strlen(uid) > CASCADE_UID_MAX)
        return NULL;
    o = XNEW(struct cascade_owner);
    o->cls = cls;
    (void)snprintf(o->ns, sizeof(o->ns), "%s", ns);
    (void)snprintf(o->uid, sizeof(o->uid), "%s", uid);
    return o;
}

bool cascade_owner_deleted(struct cascade *c, enum cascade_class cls, const char *ns,
                           const char *uid)
{
    struct cascade_owner *o;
    if (!c || c->o.delay == CASCADE_OFF || (unsigned)cls >= CASCADE_CLASSES ||
        !(o = owner_new(cls, ns, uid)))
        return false;
    pthread_mutex_lock(&c->lock);
    if (c->stopping || c->len >= c->o.max_queue) {
        c->st.dropped += !c->stopping;
        pthread_mutex_unlock(&c->lock);
        xfree(o);
        return false;
    }
    append(c, Q_OWNER, o, c->o.delay);
    c->st.queued++;
    pthread_mutex_unlock(&c->lock);
    return true;
}

/* Takes the first owner once it is due (NULL once stopping, or with *ret_sweep set when
 * a requested sweep is to be tried: the pending request is then the caller's). Called
 * with the lock. */
static struct cascade_owner *take(struct cascade *c, bool *ret_sweep)
{
    struct cascade_owner *o;
    for (;;) {
        usec_t now = clock_now(), due;
        struct timespec ts;
        int q = first_due(c);
        if (c->stopping)
            return NULL;
        if (c->sweep_pending && c->sweep_next <= now) {
            c->sweep_pending = false;
            c->running++; /* until try_sweep ends: cascade_idle_wait waits for it */
            *ret_sweep = true;
            return NULL;
        }
        due = q < 0 ? USEC_INFINITY : c->q[q].head->due;
        if (c->sweep_pending && c->sweep_next < due)
            due = c->sweep_next;
        if (due == USEC_INFINITY) {
            pthread_cond_wait(&c->work, &c->lock);
            continue;
        }
        if (due > now) {
            clock_deadline_mono(due - now, &ts);
            (void)pthread_cond_timedwait(&c->work, &c->lock, &ts);
            continue;
        }
        o = c->q[q].head;
        c->q[q].head = o->next;
        if (!c->q[q].head)
            c->q[q].tail = NULL;
        c->len--;
        c->running++;
        return o;
    }
}

/* ---- one owner ---------------------------------------------------------------------- */

/* True when obj is in ns, not being deleted, and its one owner reference is the
 * controller reference to uid: what the garbage collector deletes once uid is gone. */
static bool sole_dependent(const json_t *obj, const char *ns, const char *uid)
{
    const json_t *refs = kube_obj_path(obj, "metadata.ownerReferences");
    const json_t *ref = json_array_get(refs, 0);
    const char *ons = kube_obj_namespace(obj);
    return json_array_size(refs) == 1 && json_is_true(json_object_get(ref, "controller")) &&
           json_string_value(json_object_get(ref, "uid")) &&
           strcmp(json_string_value(json_object_get(ref, "uid")), uid) == 0 && ons &&
           strcmp(ons, ns) == 0 && !kube_obj_deleting(obj);
}

static int delete_guarded(void *ctx, const struct kube_res *res, const json_t *obj,
                          struct kube_err *reterr)
{
    return kube_delete_obj(ctx, res, obj, true, NULL, reterr);
}

static enum outcome delete_one(struct cascade *c, const struct kube_res *res, const json_t *obj)
{
    const char *name = kube_obj_name(obj);
    struct kube_err e;
    int r;
    kube_err_clear(&e);
    r = c->o.delete(c->o.delete_ctx, res, obj, &e);
    if (r >= 0) {
        log_debug("dependent of a deleted owner deleted\tkind=%s object=%s/%s", res->kind,
                  kube_obj_namespace(obj), name);
        return OUT_DELETED;
    }
    if (kube_err_is_not_found(&e))
        return OUT_GONE;
    if (kube_err_is_conflict(&e))
        return OUT_CONFLICT;
    log_debug("cannot delete a dependent of a deleted owner\tkind=%s object=%s/%s error=%d",
              res->kind, kube_obj_namespace(obj), name, r);
    return OUT_FAILED;
}

static void count(struct cascade *c, const struct kube_res *res, enum outcome out)
{
    pthread_mutex_lock(&c->lock);
    switch (out) {
    case OUT_DELETED:
        c->st.deleted++;
        break;
    case OUT_GONE:
        c->st.gone++;
        break;
    case OUT_CONFLICT:
        c->st.conflict++;
        break;
    case OUT_FAILED:
        c->st.failed++;
        break;
    }
    pthread_mutex_unlock(&c->lock);
    if (c->o.deletions)
        metric_inc(c->o.deletions, (const char *const[]){res->kind, outcome_name[out]});
}

/* The class of owner that a dependent of class cls is in turn: a claim's or pool's
 * Sandbox owns its Pod and Service. -1: none (a Pod or Service owns nothing here). */
static int dependents_class(enum cascade_class cls)
{
    return cls == CASCADE_OF_EXT ? CASCADE_OF_SANDBOX : -1;
}

/* Queues obj, just deleted by the controller, as an owner of class cls whose dependents
 * are looked at once store (obj's cache) no longer holds it (chain_delay), not the delay
 * after the informer sees it go. Not when obj had finalizers: its DELETE only marked it
 * then, and the garbage collector waits for it to go. Without the lock. */
static void queue_chained(struct cascade *c, int cls, const json_t *obj, struct kube_store *store)
{
    const char *name = kube_obj_name(obj);
    struct cascade_owner *n;
    if (cls < 0 || !c->nt[cls] || !store ||
        json_array_size(kube_obj_path(obj, "metadata.finalizers")) || !name ||
        strlen(name) > CASCADE_NAME_MAX ||
        !(n = owner_new((enum cascade_class)cls, kube_obj_namespace(obj), kube_obj_uid(obj))))
        return;
    (void)snprintf(n->owner_name, sizeof(n->owner_name), "%s", name);
    n->owner_store = store;
    pthread_mutex_lock(&c->lock);
    if (!c->stopping && c->len < c->o.max_queue && c->o.delay != CASCADE_OFF) {
        append(c, Q_CHAIN, n, c->o.chain_delay);
        c->st.chained++;
        n = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    xfree(n); /* left to the informer's look, the delay after it sees obj go */
}

void cascade_sandbox_deleted(struct cascade *c, const json_t *sb)
{
    if (c && sb && c->nt[CASCADE_OF_EXT])
        queue_chained(c, CASCADE_OF_SANDBOX, sb, c->t[CASCADE_OF_EXT][0].store);
}

/* True when store holds name in ns with uid. */
static bool cache_holds(struct kube_store *store, const char *ns, const char *name, const char *uid)
{
    json_t *obj = kube_store_get_ns(store, ns, name);
    bool same = obj && kube_obj_uid(obj) && strcmp(kube_obj_uid(obj), uid) == 0;
    json_decref(obj);
    return same;
}

/* True when o is chained or swept and its owner is in the cache: a chained owner's
 * deletion not seen yet (the Sandbox controller could still act on it); a swept owner
 * that exists after all. */
static bool owner_cached(const struct cascade_owner *o)
{
    return o->owner_store && cache_holds(o->owner_store, o->ns, o->owner_name, o->uid);
}

static int get_plain(void *ctx, const struct kube_res *res, const char *ns, const char *name,
                     json_t **ret_obj, struct kube_err *reterr)
{
    return kube_get(ctx, res, ns, name, ret_obj, reterr);
}

/* A swept owner, absent from its cache, read from the API server: true unless the read
 * says it is gone (404, or the name now holds another UID). Any other failure, or no way
 * to read, counts as present: what cannot be confirmed gone is the garbage collector's. */
static bool owner_read_present(struct cascade *c, const struct cascade_owner *o)
{
    json_t *obj = NULL;
    struct kube_err e;
    bool present;
    int r;
    if (!c->o.get)
        return true;
    kube_err_clear(&e);
    r = c->o.get(c->o.get_ctx, o->owner_res, o->ns, o->owner_name, &obj, &e);
    if (r < 0)
        present = !kube_err_is_not_found(&e);
    else
        present = !kube_obj_uid(obj) || strcmp(kube_obj_uid(obj), o->uid) == 0;
    json_decref(obj);
    return present;
}

/* Whether this process may delete: it leads (always, without an active callback). */
static bool leading(const struct cascade *c)
{
    return !c->o.active || c->o.active(c->o.active_ctx);
}

/* Deletes the dependents of o's owner in one target. Returns true when a DELETE was
 * refused by its preconditions (look again later). */
static bool delete_in(struct cascade *c, const struct cascade_target *t,
                      const struct cascade_owner *o)
{
    struct kube_objv v = {0};
    bool conflict = false;
    (void)kube_store_by_index(t->store, t->index, o->uid, &v);
    /* leadership is asked before every DELETE: an owner of hundreds of dependents takes
     * long enough for it to be lost meanwhile, and a successor deletes from then on */
    for (size_t i = 0; i < v.n && !atomic_load(&c->halt) && leading(c); i++) {
        enum outcome out;
        if (!sole_dependent(v.v[i], o->ns, o->uid))
            continue;
        out = delete_one(c, t->res, v.v[i]);
        conflict |= out == OUT_CONFLICT;
        count(c, t->res, out);
        /* Just deleted as the cache showed it: the garbage collector, behind already,
         * would come to its own dependents only after it. */
        if (out == OUT_DELETED)
            queue_chained(c, dependents_class(o->cls), v.v[i], t->store);
    }
    kube_objv_done(&v);
    return conflict;
}

/* True when the owner is to be dropped unseen: not leading, or its namespace is being
 * deleted (everything there goes anyway; DELETEs would only race the namespace
 * controller's). */
static bool skip_owner(struct cascade *c, const struct cascade_owner *o)
{
    if (!leading(c))
        return true;
    return c->o.client && kube_client_ns_terminated_within(c->o.client, o->ns, KUBE_NSTERM_MEMORY);
}

/* Looks at one owner; requeues it after a conflict, else frees it. A swept owner that
 * exists after all (in the cache now, or by a read) is dropped. */
static void run_owner(struct cascade *c, struct cascade_owner *o)
{
    bool conflict = false, skip = skip_owner(c, o), cached = !skip && owner_cached(o);
    bool early = cached && !o->owner_res;
    bool present = !skip && o->owner_res && (cached || owner_read_present(c, o));
    for (size_t i = 0; !skip && !early && !present && i < c->nt[o->cls]; i++)
        conflict |= delete_in(c, &c->t[o->cls][i], o);
    pthread_mutex_lock(&c->lock);
    c->running--;
    c->st.dropped += skip;
    c->st.swept_present += present;
    if ((conflict || early) && ++o->attempt < CASCADE_ATTEMPTS && !c->stopping) {
        c->st.retries += conflict;
        append(c, early ? Q_CHAIN : Q_RETRY, o, early ? c->o.chain_delay : c->o.retry);
        o = NULL;
    } else if ((conflict || early) && !c->stopping) {
        c->st.given_up++;
    }
    pthread_cond_broadcast(&c->idle);
    pthread_mutex_unlock(&c->lock);
    xfree(o);
}

/* ---- the sweep ---------------------------------------------------------------------- */

/* The owner kind of class cls that ref (a controller reference) names by group and kind,
 * whatever its version, or NULL. */
static const struct cascade_owner_kind *owner_kind(const struct cascade *c, int cls,
                                                   const json_t *ref)
{
    const char *av = json_string_value(json_object_get(ref, "apiVersion"));
    const char *kind = json_string_value(json_object_get(ref, "kind"));
    const char *slash = av ? strchr(av, '/') : NULL;
    size_t glen = slash ? (size_t)(slash - av) : 0; /* "v1": the core group */
    for (size_t i = 0; av && kind && i < c->nk[cls]; i++) {
        const struct kube_res *r = c->k[cls][i].res;
        if (strcmp(r->kind, kind) == 0 && strlen(r->group) == glen &&
            strncmp(r->group, av, glen) == 0)
            return &c->k[cls][i];
    }
    return NULL;
}

/* Queues the controller owner of obj (a dependent of class cls) as swept when it is of a
 * registered kind, obj is its sole dependent as the garbage collector sees it, its cache
 * holds nothing under its name (a lookup that unpacks nothing; one of another UID there
 * is left to the garbage collector) and it was not queued yet in this sweep (seen).
 * Returns whether it was queued. */
static bool sweep_one(struct cascade *c, int cls, const json_t *obj, struct map *seen)
{
    const json_t *ref = kube_obj_controller_ref(obj);
    const char *uid = json_string_value(json_object_get(ref, "uid"));
    const char *name = json_string_value(json_object_get(ref, "name"));
    const char *ns = kube_obj_namespace(obj);
    const struct cascade_owner_kind *k = ref ? owner_kind(c, cls, ref) : NULL;
    struct cascade_owner *o;
    if (!k || !uid || !name || !ns || strlen(name) > CASCADE_NAME_MAX ||
        !sole_dependent(obj, ns, uid) || kube_store_has_ns(k->store, ns, name) ||
        map_get(seen, uid) || !(o = owner_new((enum cascade_class)cls, ns, uid)))
        return false;
    (void)map_put(seen, uid, (void *)1, NULL);
    (void)snprintf(o->owner_name, sizeof(o->owner_name), "%s", name);
    o->owner_store = k->store;
    o->owner_res = k->res;
    pthread_mutex_lock(&c->lock);
    if (!c->stopping && c->len < c->o.max_queue) {
        append(c, Q_OWNER, o, c->o.delay);
        c->st.swept++;
        o = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    if (!o)
        return true;
    xfree(o);
    return false;
}

/* Sweeps every registered dependent kind, one cached object at a time (a compact cache
 * is not unpacked whole). Returns the owners queued. */
static size_t sweep_all(struct cascade *c)
{
    struct map *seen = map_new(NULL);
    size_t queued = 0;
    for (int cls = 0; cls < CASCADE_CLASSES; cls++) {
        for (size_t i = 0; c->nk[cls] && i < c->nt[cls]; i++) {
            struct kube_strv keys = {0};
            kube_store_keys(c->t[cls][i].store, &keys);
            for (size_t j = 0; j < keys.n && !atomic_load(&c->halt); j++) {
                json_t *obj = kube_store_get(c->t[cls][i].store, keys.v[j]);
                queued += obj && sweep_one(c, cls, obj, seen);
                json_decref(obj);
            }
            kube_strv_done(&keys);
        }
    }
    map_free(seen);
    return queued;
}

/* Tries the requested sweep: once leading and synced it runs, else it is tried again
 * SWEEP_POLL later. Ends what take() began (the sweep counted as running). */
static void try_sweep(struct cascade *c)
{
    bool ready = leading(c) && (!c->o.synced || c->o.synced(c->o.active_ctx));
    size_t queued = ready ? sweep_all(c) : 0;
    pthread_mutex_lock(&c->lock);
    if (ready) {
        c->st.sweeps++;
    } else {
        c->sweep_pending = true;
        c->sweep_next = clock_now() + SWEEP_POLL;
    }
    c->running--;
    pthread_cond_broadcast(&c->idle);
    pthread_mutex_unlock(&c->lock);
    if (queued)
        log_info("owners gone while not watched: their dependents are looked at after the "
                 "delay\towners=%zu",
                 queued);
}

static void *worker_main(void *arg)
{
    struct cascade *c = arg;
    struct cascade_owner *o;
    for (;;) {
        bool sweep = false;
        pthread_mutex_lock(&c->lock);
        o = take(c, &sweep);
        pthread_mutex_unlock(&c->lock);
        if (sweep) {
            try_sweep(c);
            continue;
        }
        if (!o)
            return NULL;
        run_owner(c, o);
    }
}

/* ---- life --------------------------------------------------------------------------- */

static void cascade_destroy(struct cascade *c)
{
    for (int cls = 0; cls < CASCADE_CLASSES; cls++)
        for (size_t i = 0; i < c->nt[cls]; i++)
            xfree(c->t[cls][i].index);
    pthread_cond_destroy(&c->idle);
    pthread_cond_destroy(&c->work);
    pthread_mutex_destroy(&c->lock);
    xfree(c->threads);
    xfree(c);
}

static int start_workers(struct cascade *c)
{
    int n = c->o.delay == CASCADE_OFF ? 0 : c->o.workers;
    c->threads = xcalloc((size_t)(n ? n : 1), sizeof(*c->threads));
    for (int i = 0; i < n; i++) {
        int r = -pthread_create(&c->threads[i], NULL, worker_main, c);
        if (r < 0)
            return r;
        c->nthreads++;
    }
    return 0;
}

int cascade_new(const struct cascade_opts *opts, struct cascade **ret)
{
    struct cascade *c;
    pthread_condattr_t ca;
    int r;
    if (!opts || (!opts->client && !opts->delete))
        return -EINVAL;
    c = XNEW(struct cascade);
    c->o = *opts;
    if (!c->o.delete) {
        c->o.delete = delete_guarded;
        c->o.delete_ctx = c->o.client;
    }
    if (!c->o.get && c->o.client) {
        c->o.get = get_plain;
        c->o.get_ctx = c->o.client;
    }
    c->o.delay = c->o.delay ? c->o.delay : CASCADE_DEFAULT_DELAY;
    c->o.max_queue = c->o.max_queue ? c->o.max_queue : CASCADE_DEFAULT_QUEUE;
    c->o.workers = c->o.workers > 0 ? c->o.workers : CASCADE_WORKERS;
    c->o.retry = c->o.retry ? c->o.retry : CASCADE_RETRY;
    c->o.chain_delay = c->o.chain_delay ? c->o.chain_delay : CASCADE_CHAIN_DELAY;
    atomic_init(&c->halt, false);
    pthread_mutex_init(&c->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->work, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&c->idle, NULL);
    r = start_workers(c);
    if (r < 0) {
        cascade_free(c);
        return r;
    }
    *ret = c;
    return 0;
}

int cascade_add_dependent(struct cascade *c, enum cascade_class cls, const struct kube_res *res,
                          struct kube_store *store, const char *index)
{
    struct cascade_target *t;
    if (!c || (unsigned)cls >= CASCADE_CLASSES || !res || !store || !index)
        return -EINVAL;
    if (c->nt[cls] == CASCADE_MAX_TARGETS)
        return -ENOSPC;
    pthread_mutex_lock(&c->lock);
    t = &c->t[cls][c->nt[cls]];
    t->res = res;
    t->store = store;
    t->index = xstrdup(index);
    c->nt[cls]++;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

int cascade_add_owner(struct cascade *c, enum cascade_class cls, const struct kube_res *res,
                      struct kube_store *store)
{
    if (!c || (unsigned)cls >= CASCADE_CLASSES || !res || !store)
        return -EINVAL;
    pthread_mutex_lock(&c->lock);
    if (c->nk[cls] == CASCADE_OWNER_KINDS) {
        pthread_mutex_unlock(&c->lock);
        return -ENOSPC;
    }
    c->k[cls][c->nk[cls]++] = (struct cascade_owner_kind){res, store};
    pthread_mutex_unlock(&c->lock);
    return 0;
}

void cascade_request_sweep(struct cascade *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    if (c->nthreads && !c->stopping) {
        c->sweep_pending = true;
        c->sweep_next = 0;
        pthread_cond_signal(&c->work);
    }
    pthread_mutex_unlock(&c->lock);
}

void cascade_stop(struct cascade *c)
{
    struct cascade_owner *o;
    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    c->stopping = true;
    atomic_store(&c->halt, true);
    pthread_cond_broadcast(&c->work);
    if (c->joined) { /* another stop joins: wait for it, so both return stopped */
        while (!c->stopped)
            pthread_cond_wait(&c->idle, &c->lock);
        pthread_mutex_unlock(&c->lock);
        return;
    }
    c->joined = true;
    pthread_mutex_unlock(&c->lock);
    for (int i = 0; i < c->nthreads; i++)
        pthread_join(c->threads[i], NULL);
    pthread_mutex_lock(&c->lock);
    for (int q = 0; q < Q_COUNT; q++) {
        while ((o = c->q[q].head)) {
            c->q[q].head = o->next;
            xfree(o);
        }
        c->q[q].tail = NULL;
    }
    c->len = 0;
    c->stopped = true;
    pthread_cond_broadcast(&c->idle);
    pthread_mutex_unlock(&c->lock);
}

void cascade_free(struct cascade *c)
{
    if (!c)
        return;
    cascade_stop(c);
    cascade_destroy(c);
}

void cascade_stats(struct cascade *c, struct cascade_stats *ret)
{
    pthread_mutex_lock(&c->lock);
    *ret = c->st;
    pthread_mutex_unlock(&c->lock);
}

/* Whether anything is queued, running or a sweep due now (one waiting for leadership or
 * for the caches is not). Called with the lock. */
static bool busy(const struct cascade *c)
{
    return c->len || c->running || (c->sweep_pending && c->sweep_next <= clock_now());
}

int cascade_idle_wait(struct cascade *c, usec_t timeout)
{
    struct timespec ts;
    int r = 0;
    clock_deadline_realtime(timeout, &ts);
    pthread_mutex_lock(&c->lock);
    while (busy(c) && r != ETIMEDOUT)
        r = pthread_cond_timedwait(&c->idle, &c->lock, &ts);
    r = busy(c) ? -ETIMEDOUT : 0;
    pthread_mutex_unlock(&c->lock);
    return r;
}
