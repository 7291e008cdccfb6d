/* SPDX-License-Identifier: Apache-2.0 */
/* Review orchestration: cache lookups on the loop thread, reviews on worker threads,
 * results handed back through a uv_async_t. Checks of one cache key in flight at once share
 * one review (the first is the leader, the rest its followers). Reviews wait in one queue
 * per client (the peer's address) and the workers take them from the clients in turn.
 * When the bound on pending reviews is reached, the client with the most queued loses its
 * newest review without followers (else its newest) to a newcomer whose client would
 * still have fewer queued than it has, counting the newcomer (see make_room). So one
 * client's flood of distinct tokens delays and sheds its own reviews, not everyone's. */
#include "router/authz.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <sys/random.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/map.h"
#include "common/xalloc.h"
#include "router/authz_cache.h"

struct client;

struct job {
    struct job *next, *prev; /* in its client's queue (doubly) or the done list (next) */
    struct job *followers;   /* checks of the same akey answered with this one (loop side) */
    struct client *cl;       /* while queued; NULL once a worker took it */
    char tkey[40];           /* hash of the token */
    char *akey;              /* tkey + "|" + ns + "/" + name */
    char *token, *ns, *name;
    json_t *user; /* known identity (token review cached) or the review's result */
    bool review_token;
    int token_rc, access_rc; /* review results (negative errno on failure) */
    usec_t asked;            /* when its reviews were queued: a verdict's TTL counts from it */
    bool allowed, access_done;
    authz_done_fn *fn;
    void *ctx;
};

/* A client with reviews queued (and only while it has some). Under the authz's lock. */
struct client {
    char *key;
    struct job *head, *tail;
    size_t queued;
    struct client *rr_next, *rr_prev; /* the ring of clients the workers serve in turn */
};

struct authz {
    uv_async_t async;
    struct authz_opts o;
    char *verb, *subresource;
    uint8_t k1[16], k2[16];
    struct authz_cache *tokens, *access;
    pthread_t *threads;
    unsigned nthreads;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct map *clients; /* key -> struct client with queued jobs; under lock */
    struct client *rr;   /* the client the next worker serves; under lock */
    struct job *done;    /* under lock */
    struct map *leaders; /* akey -> the job in flight for it; loop thread only */
    size_t pending;      /* leader jobs queued or running or done-not-delivered */
    bool stop;
    struct authz_stats st;
};

static void job_free(struct job *j)
{
    while (j->followers) {
        struct job *f = j->followers;
        j->followers = f->next;
        f->followers = NULL;
        job_free(f);
    }
    xfree(j->akey);
    xfree(j->token);
    xfree(j->ns);
    xfree(j->name);
    if (j->user)
        json_decref(j->user);
    xfree(j);
}

/* The cache key of a token (32 hex digits) or, with prefix "c", of an identity: the two
 * never collide, and neither is the secret itself. */
static void hash_key(const struct authz *a, const char *prefix, const void *p, size_t n,
                     char out[40])
{
    uint64_t h1 = map_siphash24(a->k1, p, n), h2 = map_siphash24(a->k2, p, n);
    (void)snprintf(out, 40, "%s%016llx%016llx", prefix, (unsigned long long)h1,
                   (unsigned long long)h2);
}

static void token_key(const struct authz *a, const char *token, char out[40])
{
    hash_key(a, "", token, strlen(token), out);
}

/* ---- The clients' queues (under the lock) ----------------------------------------------- */

static struct client *client_get(struct authz *a, const char *key)
{
    struct client *c = map_get(a->clients, key);
    if (c)
        return c;
    c = XNEW(struct client);
    c->key = xstrdup(key);
    (void)map_put(a->clients, key, c, NULL);
    if (!a->rr) {
        c->rr_next = c->rr_prev = c;
        a->rr = c;
    } else { /* last in the round */
        c->rr_next = a->rr;
        c->rr_prev = a->rr->rr_prev;
        c->rr_prev->rr_next = c;
        a->rr->rr_prev = c;
    }
    return c;
}

static void client_drop(struct authz *a, struct client *c)
{
    if (c->rr_next == c) {
        a->rr = NULL;
    } else {
        c->rr_prev->rr_next = c->rr_next;
        c->rr_next->rr_prev = c->rr_prev;
        if (a->rr == c)
            a->rr = c->rr_next;
    }
    (void)map_remove(a->clients, c->key);
    xfree(c->key);
    xfree(c);
}

static void queue_append(struct authz *a, const char *key, struct job *j)
{
    struct client *c = client_get(a, key);
    j->cl = c;
    j->next = NULL;
    j->prev = c->tail;
    if (c->tail)
        c->tail->next = j;
    else
        c->head = j;
    c->tail = j;
    c->queued++;
}

/* Takes j out of its client's queue; the client goes with its last job. */
static void queue_unlink(struct authz *a, struct job *j)
{
    struct client *c = j->cl;
    if (j->prev)
        j->prev->next = j->next;
    else
        c->head = j->next;
    if (j->next)
        j->next->prev = j->prev;
    else
        c->tail = j->prev;
    j->next = j->prev = NULL;
    j->cl = NULL;
    if (--c->queued == 0)
        client_drop(a, c);
}

/* The client with the most queued jobs, or NULL when none is queued. */
static struct client *heaviest(const struct authz *a)
{
    struct client *best = a->rr;
    if (!best)
        return NULL;
    for (struct client *c = a->rr->rr_next; c != a->rr; c = c->rr_next)
        if (c->queued > best->queued)
            best = c;
    return best;
}

/* ---- Worker side --------------------------------------------------------------------- */

static void run_job(struct authz *a, struct job *j)
{
    const struct authz_reviewer *rv = a->o.reviewer;
    if (j->review_token) {
        json_t *user = NULL;
        j->token_rc = rv->review_token(rv->ctx, j->token, &user);
        if (j->token_rc >= 0)
            j->user = user;
        if (j->token_rc < 0 || !j->user)
            return;
    }
    struct authz_attrs at = {
        .ns = j->ns, .name = j->name, .verb = a->verb, .subresource = a->subresource};
    j->access_rc = rv->review_access(rv->ctx, j->user, &at, &j->allowed);
    j->access_done = true;
}

static void *worker_main(void *arg)
{
    struct authz *a = arg;
    (void)pthread_mutex_lock(&a->lock);
    for (;;) {
        while (!a->stop && !a->rr)
            (void)pthread_cond_wait(&a->cond, &a->lock);
        if (a->stop)
            break;
        struct job *j = a->rr->head;
        a->rr = a->rr->rr_next; /* the next review is the next client's */
        queue_unlink(a, j);
        (void)pthread_mutex_unlock(&a->lock);
        run_job(a, j);
        (void)pthread_mutex_lock(&a->lock);
        j->next = a->done;
        a->done = j;
        (void)uv_async_send(&a->async);
    }
    (void)pthread_mutex_unlock(&a->lock);
    return NULL;
}

/* ---- Loop side ----------------------------------------------------------------------- */

static const char *user_name(const json_t *user)
{
    const char *s = json_string_value(json_object_get(user, "username"));
    return s ? s : "";
}

/* Answers j and its followers (with j's user), each exactly once. */
static void deliver(struct job *j, enum authz_verdict v, bool cached)
{
    struct authz_result res = {
        .verdict = v, .user = j->user ? user_name(j->user) : "", .cached = cached};
    j->fn(j->ctx, &res);
    for (struct job *f = j->followers; f; f = f->next)
        f->fn(f->ctx, &res);
}

/* A leader's answer is on its way: later checks of its key start a review of their own. */
static void leader_done(struct authz *a, struct job *j)
{
    if (j->akey && map_get(a->leaders, j->akey) == j)
        (void)map_remove(a->leaders, j->akey);
}

/* When a review's result stops being used. A verdict lives the TTL from when the review
 * was asked for, not answered: the API server may have evaluated it at any point between,
 * so a slow review does not lengthen a revoked token's life. A failure is held the error
 * TTL from its answer, to keep a slow, failing API server from a review per request. */
static usec_t expiry(const struct authz *a, const struct job *j, int rc, usec_t now)
{
    return rc < 0 ? now + a->o.error_ttl : j->asked + a->o.ttl;
}

/* Stores the job's review results and answers it. */
static void finish_job(struct authz *a, struct job *j)
{
    usec_t now = a->o.now();
    if (j->review_token) {
        a->st.token_reviews++;
        a->st.evictions += (uint64_t)authz_cache_put(a->tokens, j->tkey, j->token_rc, j->user,
                                                     expiry(a, j, j->token_rc, now));
    }
    enum authz_verdict v;
    if (j->review_token && j->token_rc < 0)
        v = AUTHZ_ERROR;
    else if (!j->user)
        v = AUTHZ_UNAUTHENTICATED;
    else if (j->access_rc < 0)
        v = AUTHZ_ERROR;
    else
        v = j->allowed ? AUTHZ_ALLOW : AUTHZ_FORBIDDEN;
    if (j->access_done) {
        a->st.access_reviews++;
        a->st.evictions += (uint64_t)authz_cache_put(a->access, j->akey, (int)v, NULL,
                                                     expiry(a, j, j->access_rc, now));
    }
    leader_done(a, j);
    deliver(j, v, false);
}

static void on_async(uv_async_t *h)
{
    struct authz *a = h->data;
    (void)pthread_mutex_lock(&a->lock);
    struct job *list = a->done;
    a->done = NULL;
    (void)pthread_mutex_unlock(&a->lock);
    while (list) {
        struct job *j = list;
        list = j->next;
        a->pending--;
        finish_job(a, j);
        job_free(j);
    }
}

static void fill_defaults(struct authz_opts *o)
{
    if (!o->ttl)
        o->ttl = LIMIT_ROUTER_AUTH_TTL;
    if (!o->error_ttl)
        o->error_ttl = LIMIT_ROUTER_AUTH_ERROR_TTL;
    if (!o->cache_size)
        o->cache_size = LIMIT_ROUTER_AUTH_CACHE;
    if (!o->workers)
        o->workers = LIMIT_ROUTER_AUTH_WORKERS;
    if (!o->max_pending)
        o->max_pending = LIMIT_ROUTER_AUTH_QUEUE;
    if (!o->now)
        o->now = clock_now;
}

int authz_new(uv_loop_t *loop, const struct authz_opts *opts, struct authz **ret)
{
    if (!opts->reviewer || !opts->reviewer->review_token || !opts->reviewer->review_access)
        return -EINVAL;
    struct authz *a = XNEW(struct authz);
    a->o = *opts;
    fill_defaults(&a->o);
    a->verb = xstrdup(opts->verb ? opts->verb : "get");
    a->subresource = opts->subresource ? xstrdup(opts->subresource) : NULL;
    if (getrandom(a->k1, sizeof(a->k1), 0) != sizeof(a->k1) ||
        getrandom(a->k2, sizeof(a->k2), 0) != sizeof(a->k2))
        log_debug("getrandom failed, cache keys are weaker");
    a->tokens = authz_cache_new(a->o.cache_size);
    a->access = authz_cache_new(a->o.cache_size);
    a->clients = map_new(NULL);
    a->leaders = map_new(NULL);
    (void)pthread_mutex_init(&a->lock, NULL);
    (void)pthread_cond_init(&a->cond, NULL);
    (void)uv_async_init(loop, &a->async, on_async);
    a->async.data = a;
    a->threads = xcalloc(a->o.workers, sizeof(pthread_t));
    for (unsigned i = 0; i < a->o.workers; i++) {
        int r = -pthread_create(&a->threads[i], NULL, worker_main, a);
        if (r < 0) {
            authz_free(a);
            return r;
        }
        a->nthreads++;
    }
    *ret = a;
    return 0;
}

static void on_closed(uv_handle_t *h)
{
    struct authz *a = h->data;
    authz_cache_free(a->tokens);
    authz_cache_free(a->access);
    map_free(a->clients);
    map_free(a->leaders);
    (void)pthread_mutex_destroy(&a->lock);
    (void)pthread_cond_destroy(&a->cond);
    xfree(a->threads);
    xfree(a->verb);
    xfree(a->subresource);
    xfree(a);
}

static void fail_list(struct authz *a, struct job *list)
{
    while (list) {
        struct job *j = list;
        list = j->next;
        leader_done(a, j);
        deliver(j, AUTHZ_ERROR, false);
        job_free(j);
    }
}

void authz_free(struct authz *a)
{
    if (!a)
        return;
    (void)pthread_mutex_lock(&a->lock);
    a->stop = true;
    (void)pthread_cond_broadcast(&a->cond);
    (void)pthread_mutex_unlock(&a->lock);
    for (unsigned i = 0; i < a->nthreads; i++)
        (void)pthread_join(a->threads[i], NULL);
    fail_list(a, a->done);
    a->done = NULL;
    while (a->rr) {
        struct job *j = a->rr->head;
        queue_unlink(a, j);
        j->next = NULL;
        fail_list(a, j);
    }
    uv_close((uv_handle_t *)&a->async, on_closed);
}

/* Answers from the caches when possible. Returns true when answered. */
static bool try_cached(struct authz *a, struct job *j, usec_t now)
{
    const struct authz_entry *t = authz_cache_get(a->tokens, j->tkey, now);
    if (!t)
        return false;
    a->st.token_hits++;
    if (t->code < 0 || !t->user) {
        deliver(j, t->code < 0 ? AUTHZ_ERROR : AUTHZ_UNAUTHENTICATED, true);
        return true;
    }
    const struct authz_entry *e = authz_cache_get(a->access, j->akey, now);
    if (!e) {
        j->user = json_deep_copy(t->user); /* the worker needs its own copy */
        return false;
    }
    a->st.access_hits++;
    /* The hot path: no copy of the user, only a reference for the callback's time. */
    json_t *user = json_incref(t->user);
    struct authz_result res = {
        .verdict = (enum authz_verdict)e->code, .user = user_name(user), .cached = true};
    j->fn(j->ctx, &res);
    json_decref(user);
    return true;
}

/* A non-empty user name first, and NUL-terminated throughout. */
static bool identity_ok(struct str ident)
{
    return ident.len > 0 && ident.p[0] != '\0' && ident.p[ident.len - 1] == '\0';
}

/* {"username": ..., "groups": [...]} of a well-formed ident. */
static json_t *identity_user(struct str ident)
{
    json_t *groups = json_array();
    size_t off = strlen(ident.p) + 1;
    while (off < ident.len) {
        const char *g = ident.p + off;
        (void)json_array_append_new(groups, json_string(g));
        off += strlen(g) + 1;
    }
    return json_pack("{s:s,s:o}", "username", ident.p, "groups", groups);
}

/* At the bound: takes out of its queue the job to shed for a newcomer of client key, or
 * returns NULL (then the newcomer is refused). The victim is the newest queued job
 * without followers (else the newest) of the client with the most queued, when that client
 * has more than key's would have with the newcomer (so two clients cannot shed each
 * other's in turn). Followers are read here on the loop thread, where they change. */
static struct job *make_room(struct authz *a, const char *key)
{
    (void)pthread_mutex_lock(&a->lock);
    struct client *h = heaviest(a);
    struct client *mine = map_get(a->clients, key);
    size_t have = mine ? mine->queued : 0;
    struct job *victim = NULL;
    if (h && h != mine && h->queued > have + 1) {
        victim = h->tail;
        while (victim->prev && victim->followers)
            victim = victim->prev;
        if (victim->followers)
            victim = h->tail;
        queue_unlink(a, victim);
    }
    (void)pthread_mutex_unlock(&a->lock);
    return victim;
}

/* Answers a job shed by make_room, and its followers. */
static void shed(struct authz *a, struct job *victim)
{
    a->pending--;
    a->st.shed++;
    a->st.busy++;
    for (struct job *f = victim->followers; f; f = f->next)
        a->st.busy++;
    leader_done(a, victim);
    deliver(victim, AUTHZ_BUSY, false);
    job_free(victim);
}

/* Answers j with the review in flight for its key, when there is one. Takes j then. A check
 * that knows its user already (from the token cache) does not wait on a review of the
 * token: that review's failure is not its own. */
static bool follow(struct authz *a, struct job *j)
{
    struct job *leader = map_get(a->leaders, j->akey);
    if (!leader || (j->user && leader->review_token))
        return false;
    a->st.coalesced++;
    j->next = leader->followers;
    leader->followers = j;
    return true;
}

/* Queues j's reviews (or answers 503 when the bound leaves no room for client's). Takes j.
 * Returns like authz_check. */
static int submit(struct authz *a, struct job *j, const char *ns, const char *name,
                  const char *client)
{
    if (follow(a, j))
        return 0;
    const char *key = client ? client : "";
    struct job *victim = NULL;
    if (a->pending >= a->o.max_pending && !(victim = make_room(a, key))) {
        a->st.busy++;
        deliver(j, AUTHZ_BUSY, false);
        job_free(j);
        return 1;
    }
    j->ns = xstrdup(ns);
    j->name = xstrdup(name);
    j->asked = a->o.now();
    (void)map_put(a->leaders, j->akey, j, NULL);
    a->pending++;
    (void)pthread_mutex_lock(&a->lock);
    queue_append(a, key, j);
    (void)pthread_cond_signal(&a->cond);
    (void)pthread_mutex_unlock(&a->lock);
    if (victim) /* answered once the newcomer holds its place: a callback may check again */
        shed(a, victim);
    return 0;
}

int authz_check(struct authz *a, const char *token, const char *ns, const char *name,
                const char *client, authz_done_fn *fn, void *ctx)
{
    struct job *j = XNEW(struct job);
    j->fn = fn;
    j->ctx = ctx;
    if (!token || !*token) {
        deliver(j, AUTHZ_UNAUTHENTICATED, true);
        job_free(j);
        return 1;
    }
    token_key(a, token, j->tkey);
    j->akey = xasprintf("%s|%s/%s", j->tkey, ns, name);
    if (try_cached(a, j, a->o.now())) {
        job_free(j);
        return 1;
    }
    j->review_token = j->user == NULL;
    j->token = xstrdup(token);
    return submit(a, j, ns, name, client);
}

int authz_check_identity(struct authz *a, struct str ident, const char *ns, const char *name,
                         const char *client, authz_done_fn *fn, void *ctx)
{
    struct job *j = XNEW(struct job);
    j->fn = fn;
    j->ctx = ctx;
    if (!identity_ok(ident)) {
        deliver(j, AUTHZ_UNAUTHENTICATED, true);
        job_free(j);
        return 1;
    }
    hash_key(a, "c", ident.p, ident.len, j->tkey);
    j->akey = xasprintf("%s|%s/%s", j->tkey, ns, name);
    const struct authz_entry *e = authz_cache_get(a->access, j->akey, a->o.now());
    if (e) { /* the hot path: no JSON */
        a->st.access_hits++;
        struct authz_result res = {
            .verdict = (enum authz_verdict)e->code, .user = ident.p, .cached = true};
        fn(ctx, &res);
        job_free(j);
        return 1;
    }
    j->user = identity_user(ident);
    return submit(a, j, ns, name, client);
}

void authz_stats(const struct authz *a, struct authz_stats *ret)
{
    *ret = a->st;
    ret->token_entries = authz_cache_len(a->tokens);
    ret->access_entries = authz_cache_len(a->access);
}
