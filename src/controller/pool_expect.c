/* SPDX-License-Identifier: Apache-2.0 */
/* Warm-pool expectations (pending creates and deletes per pool). */
#include "controller/pool_expect.h"

#include <pthread.h>
#include <string.h>

#include "common/limits.h"
#include "common/map.h"
#include "common/xalloc.h"

struct expect_rec {
    int creates;
    char *uid;        /* the pool (its UID) the creates are of; NULL: not known */
    struct map *dels; /* uid -> (void *)1 */
    usec_t raised;
};

struct pool_expect {
    pthread_mutex_t lock;
    struct map *pools; /* pool key -> struct expect_rec */
    usec_t timeout;
};

static void rec_free(void *p)
{
    struct expect_rec *r = p;
    if (!r)
        return;
    map_free(r->dels);
    xfree(r->uid);
    xfree(r);
}

struct pool_expect *pool_expect_new(usec_t timeout)
{
    struct pool_expect *x = XNEW(struct pool_expect);
    pthread_mutex_init(&x->lock, NULL);
    x->pools = map_new(rec_free);
    x->timeout = timeout ? timeout : LIMIT_EXT_EXPECT_TIMEOUT;
    return x;
}

void pool_expect_free(struct pool_expect *x)
{
    if (!x)
        return;
    map_free(x->pools);
    pthread_mutex_destroy(&x->lock);
    xfree(x);
}

static struct expect_rec *rec_get(struct pool_expect *x, const char *pool, bool create)
{
    struct expect_rec *r = map_get(x->pools, pool);
    if (!r && create) {
        r = XNEW(struct expect_rec);
        r->dels = map_new(NULL);
        map_put(x->pools, pool, r, NULL);
    }
    return r;
}

/* True when r's creates are of another pool than uid (one deleted and made again under
 * the same name): they are never this one's to see. */
static bool other_pool(const struct expect_rec *r, const char *uid)
{
    return uid && r->uid && strcmp(r->uid, uid) != 0;
}

/* Drops an empty record; returns true when pool (uid) is satisfied. Lock held. */
static bool satisfied_locked(struct pool_expect *x, const char *pool, const char *uid, usec_t now)
{
    struct expect_rec *r = rec_get(x, pool, false);
    if (!r)
        return true;
    if (other_pool(r, uid)) {
        r->creates = 0;
        XFREE(r->uid);
    }
    if ((r->creates <= 0 && map_len(r->dels) == 0) || now - r->raised > x->timeout) {
        rec_free(map_remove(x->pools, pool));
        return true;
    }
    return false;
}

bool pool_expect_try_creations(struct pool_expect *x, const char *pool, const char *uid, int n,
                               usec_t now)
{
    bool ok;
    pthread_mutex_lock(&x->lock);
    ok = satisfied_locked(x, pool, uid, now);
    if (ok && n > 0) {
        struct expect_rec *r = rec_get(x, pool, true);
        r->creates = n;
        r->raised = now;
        xfree(r->uid);
        r->uid = uid ? xstrdup(uid) : NULL;
    }
    pthread_mutex_unlock(&x->lock);
    return ok;
}

void pool_expect_lower_creations(struct pool_expect *x, const char *pool, const char *uid, int n)
{
    struct expect_rec *r;
    pthread_mutex_lock(&x->lock);
    r = rec_get(x, pool, false);
    if (r && !other_pool(r, uid)) {
        r->creates = r->creates > n ? r->creates - n : 0;
        if (r->creates == 0 && map_len(r->dels) == 0)
            rec_free(map_remove(x->pools, pool));
    }
    pthread_mutex_unlock(&x->lock);
}

void pool_expect_deletion(struct pool_expect *x, const char *pool, const char *uid, usec_t now)
{
    struct expect_rec *r;
    if (!uid || !*uid)
        return;
    pthread_mutex_lock(&x->lock);
    r = rec_get(x, pool, true);
    map_put(r->dels, uid, (void *)1, NULL);
    r->raised = now;
    pthread_mutex_unlock(&x->lock);
}

void pool_expect_deletion_observed(struct pool_expect *x, const char *pool, const char *uid)
{
    struct expect_rec *r;
    if (!uid)
        return;
    pthread_mutex_lock(&x->lock);
    r = rec_get(x, pool, false);
    if (r) {
        (void)map_remove(r->dels, uid);
        if (r->creates <= 0 && map_len(r->dels) == 0)
            rec_free(map_remove(x->pools, pool));
    }
    pthread_mutex_unlock(&x->lock);
}

bool pool_expect_deleting(struct pool_expect *x, const char *pool, const char *uid, usec_t now)
{
    struct expect_rec *r;
    bool yes;
    if (!uid)
        return false;
    pthread_mutex_lock(&x->lock);
    r = rec_get(x, pool, false);
    yes = r && now - r->raised <= x->timeout && map_get(r->dels, uid) != NULL;
    pthread_mutex_unlock(&x->lock);
    return yes;
}

bool pool_expect_satisfied(struct pool_expect *x, const char *pool, const char *uid, usec_t now)
{
    bool ok;
    pthread_mutex_lock(&x->lock);
    ok = satisfied_locked(x, pool, uid, now);
    pthread_mutex_unlock(&x->lock);
    return ok;
}

int pool_expect_pending_creations(struct pool_expect *x, const char *pool)
{
    struct expect_rec *r;
    int n;
    pthread_mutex_lock(&x->lock);
    r = rec_get(x, pool, false);
    n = r ? r->creates : 0;
    pthread_mutex_unlock(&x->lock);
    return n;
}

void pool_expect_forget(struct pool_expect *x, const char *pool)
{
    pthread_mutex_lock(&x->lock);
    rec_free(map_remove(x->pools, pool));
    pthread_mutex_unlock(&x->lock);
}
