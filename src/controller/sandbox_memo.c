/* SPDX-License-Identifier: Apache-2.0 */
/* A bounded, lossy table of the Sandbox versions our status writes replaced. */
#include "controller/sandbox_memo.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "api/sandbox.h"
#include "common/hash.h"
#include "common/limits.h"
#include "common/xalloc.h"
#include "controller/sandbox_names.h"
#include "kube/obj.h"

#define SB_MEMO_UID 40
#define SB_MEMO_RV  24
/* Slots per bucket of the two UID tables: with one, two Sandboxes starting at once shared
 * a slot about once in 400 pairs (4,096 slots), and the second's status was written at
 * every step (a cold burst of 300 wrote about 11 extra); with eight, a bucket overflows
 * only when nine of its UIDs are held at once. */
#define SB_MEMO_WAYS 8
_Static_assert(LIMIT_SB_MEMO_SLOTS % SB_MEMO_WAYS == 0 && LIMIT_SB_DEFER_SLOTS % SB_MEMO_WAYS == 0,
               "whole buckets");

struct memo_slot {
    char uid[SB_MEMO_UID];
    char rv[SB_MEMO_RV];
    usec_t at; /* CLOCK_MONOTONIC time of the write */
};

struct defer_slot {
    char uid[SB_MEMO_UID];
    usec_t since; /* CLOCK_MONOTONIC time the pending detail change was first seen */
};

/* The reply to one of our creates, as compact JSON text in one allocation: a parse tree
 * is hundreds of small allocations, and a burst's worth of them, freed between the
 * long-lived cache entries allocated meanwhile, left the heap fragmented (20 MiB of
 * resident size after 10,000 creates). */
struct created_rec {
    char uid[SB_MEMO_UID]; /* the child's */
    size_t len;            /* of the text */
    char *name;            /* the child's, in data after the text */
    char data[];           /* the text, NUL, the name, NUL */
};

struct created_slot {
    char owner[SB_MEMO_UID];
    const struct kube_res *res;
    struct created_rec *rec; /* owned; NULL: a free slot */
    usec_t at;               /* CLOCK_MONOTONIC time of the create */
};

struct sb_memo {
    pthread_mutex_t lock; /* guards the three tables */
    struct memo_slot slots[LIMIT_SB_MEMO_SLOTS];
    struct defer_slot defer_slots[LIMIT_SB_DEFER_SLOTS];
    struct created_slot created[LIMIT_SB_CREATED_SLOTS];
};

struct sb_memo *sb_memo_new(void)
{
    struct sb_memo *m = XNEW(struct sb_memo);
    pthread_mutex_init(&m->lock, NULL);
    return m;
}

void sb_memo_free(struct sb_memo *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < LIMIT_SB_CREATED_SLOTS; i++)
        xfree(m->created[i].rec);
    pthread_mutex_destroy(&m->lock);
    xfree(m);
}

static uint32_t uid_hash(const char *uid)
{
    return hash_fnv1a32(HASH_FNV1A32_INIT, uid, strlen(uid));
}

/* The first of uid's SB_MEMO_WAYS slots in a table of n. */
static size_t bucket_of(const char *uid, size_t n)
{
    return (uid_hash(uid) & (n / SB_MEMO_WAYS - 1)) * SB_MEMO_WAYS;
}

/* uid's entry in the status memo, or NULL. Called with m->lock held. */
static struct memo_slot *memo_find(struct sb_memo *m, const char *uid)
{
    struct memo_slot *b = &m->slots[bucket_of(uid, LIMIT_SB_MEMO_SLOTS)];
    for (size_t i = 0; i < SB_MEMO_WAYS; i++)
        if (strcmp(b[i].uid, uid) == 0)
            return &b[i];
    return NULL;
}

/* The slot for a new entry of uid: its own, else a free or expired one of its bucket,
 * else the bucket's oldest (an entry lost costs a conflict). Called with m->lock held. */
static struct memo_slot *memo_take(struct sb_memo *m, const char *uid, usec_t now)
{
    struct memo_slot *b = &m->slots[bucket_of(uid, LIMIT_SB_MEMO_SLOTS)], *s = memo_find(m, uid);
    for (size_t i = 0; !s && i < SB_MEMO_WAYS; i++)
        if (!b[i].uid[0] || now < b[i].at || now - b[i].at >= SB_MEMO_TTL)
            s = &b[i];
    if (s)
        return s;
    s = &b[0];
    for (size_t i = 1; i < SB_MEMO_WAYS; i++) /* the bucket's oldest */
        if (b[i].at < s->at)
            s = &b[i];
    return s;
}

/* uid's pending wait, or NULL. Called with m->lock held. */
static struct defer_slot *defer_find(struct sb_memo *m, const char *uid)
{
    struct defer_slot *b = &m->defer_slots[bucket_of(uid, LIMIT_SB_DEFER_SLOTS)];
    for (size_t i = 0; i < SB_MEMO_WAYS; i++)
        if (strcmp(b[i].uid, uid) == 0)
            return &b[i];
    return NULL;
}

/* A slot of uid's bucket that is free, or left behind by an object deleted while it
 * waited (older than twice the window); NULL when every one holds a pending wait. Called
 * with m->lock held. */
static struct defer_slot *defer_free(struct sb_memo *m, const char *uid, usec_t window, usec_t now)
{
    struct defer_slot *b = &m->defer_slots[bucket_of(uid, LIMIT_SB_DEFER_SLOTS)];
    for (size_t i = 0; i < SB_MEMO_WAYS; i++)
        if (!b[i].uid[0] || now < b[i].since || now - b[i].since >= 2 * window)
            return &b[i];
    return NULL;
}

static bool fits(const char *uid, const char *rv)
{
    return uid && *uid && rv && strlen(uid) < SB_MEMO_UID && strlen(rv) < SB_MEMO_RV;
}

/* rv is the recorded version, or (when the server orders them) an older one. */
static bool not_newer(const char *rv, const char *recorded)
{
    int c = 1;
    if (strcmp(rv, recorded) == 0)
        return true;
    return kube_rv_compare(rv, recorded, &c) == 0 && c < 0;
}

bool sb_memo_stale_at(struct sb_memo *m, const json_t *sb, usec_t now)
{
    const char *uid = kube_obj_uid(sb), *rv = kube_obj_resource_version(sb);
    struct memo_slot *s;
    bool stale;

    if (!m || !fits(uid, rv))
        return false;
    pthread_mutex_lock(&m->lock);
    s = memo_find(m, uid);
    stale = s && not_newer(rv, s->rv) && now >= s->at && now - s->at < SB_MEMO_TTL;
    pthread_mutex_unlock(&m->lock);
    return stale;
}

void sb_memo_wrote_at(struct sb_memo *m, const json_t *sb, usec_t now)
{
    const char *uid = kube_obj_uid(sb), *rv = kube_obj_resource_version(sb);
    struct memo_slot *s;

    if (!m || !fits(uid, rv))
        return;
    pthread_mutex_lock(&m->lock);
    s = memo_take(m, uid, now);
    memcpy(s->uid, uid, strlen(uid) + 1);
    memcpy(s->rv, rv, strlen(rv) + 1);
    s->at = now;
    pthread_mutex_unlock(&m->lock);
}

bool sb_memo_stale(struct sb_memo *m, const json_t *sb)
{
    return sb_memo_stale_at(m, sb, clock_now());
}

void sb_memo_wrote(struct sb_memo *m, const json_t *sb)
{
    sb_memo_wrote_at(m, sb, clock_now());
}

usec_t sb_defer_wait_at(struct sb_memo *m, const char *uid, usec_t window, usec_t now)
{
    struct defer_slot *s;
    usec_t wait = 0;

    if (!m || !window || !uid || !*uid || strlen(uid) >= SB_MEMO_UID)
        return 0;
    pthread_mutex_lock(&m->lock);
    s = defer_find(m, uid);
    if (s) {
        if (now >= s->since && now - s->since < window)
            wait = window - (now - s->since);
    } else if ((s = defer_free(m, uid, window, now))) {
        memcpy(s->uid, uid, strlen(uid) + 1);
        s->since = now;
        wait = window;
    }
    pthread_mutex_unlock(&m->lock);
    return wait;
}

usec_t sb_defer_wait(struct sb_memo *m, const char *uid, usec_t window)
{
    return sb_defer_wait_at(m, uid, window, clock_now());
}

void sb_defer_clear(struct sb_memo *m, const char *uid)
{
    struct defer_slot *s;

    if (!m || !uid || !*uid || strlen(uid) >= SB_MEMO_UID)
        return;
    pthread_mutex_lock(&m->lock);
    s = defer_find(m, uid);
    if (s)
        s->uid[0] = '\0';
    pthread_mutex_unlock(&m->lock);
}

usec_t sb_pod_meta_wait_at(struct sb_memo *m, const struct yield_gate *g, const char *pod_uid,
                           const json_t *patch, usec_t now)
{
    const json_t *labels = kube_obj_path(patch, "metadata.labels");
    if (!g || !g->busy || !g->max_wait || json_object_get(labels, SB_LABEL_NAME_HASH))
        return 0;
    if (!g->busy(g->ctx))
        return 0;
    return sb_defer_wait_at(m, pod_uid, g->max_wait, now);
}

usec_t sb_pod_meta_wait(struct sb_memo *m, const struct yield_gate *g, const char *pod_uid,
                        const json_t *patch)
{
    return sb_pod_meta_wait_at(m, g, pod_uid, patch, clock_now());
}

/* ---- children created, not yet cached ------------------------------------------------ */

/* The slot of owner_uid's child of kind res named name: a group of four slots chosen by
 * the owner and the name, one slot in it per kind (Pod, Service, PVC, other). A Sandbox's
 * Pod and Service share its name, so they share a group and never evict each other: with
 * one slot chosen by a hash of all three, one Sandbox in about a thousand had them
 * collide, and every pass created both again (each refused and read back) until the cache
 * showed them. */
static struct created_slot *created_slot_of(struct sb_memo *m, const struct kube_res *res,
                                            const char *owner_uid, const char *name)
{
    uint32_t h = hash_fnv1a32(HASH_FNV1A32_INIT, owner_uid, strlen(owner_uid));
    size_t kind = res == &KUBE_RES_PODS       ? 0
                  : res == &KUBE_RES_SERVICES ? 1
                  : res == &KUBE_RES_PVCS     ? 2
                                              : 3;
    h = hash_fnv1a32(h, name, strlen(name));
    return &m->created[(h & (LIMIT_SB_CREATED_SLOTS / 4 - 1)) * 4 + kind];
}

static bool created_usable(const struct kube_res *res, const char *owner_uid, const char *name)
{
    return res && res->plural && owner_uid && strlen(owner_uid) < SB_MEMO_UID && name;
}

/* True when slot s holds owner_uid's child of kind res named name. */
static bool created_match(const struct created_slot *s, const struct kube_res *res,
                          const char *owner_uid, const char *name)
{
    return s->rec && s->res == res && strcmp(s->owner, owner_uid) == 0 &&
           strcmp(s->rec->name, name) == 0;
}

/* Empties slot s; returns the record it held, for the caller to free outside the lock. */
static struct created_rec *created_take(struct created_slot *s)
{
    struct created_rec *rec = s->rec;
    s->rec = NULL;
    s->owner[0] = '\0';
    s->res = NULL;
    return rec;
}

/* obj (named name, with uid) as a record, or NULL when its UID does not fit or it cannot
 * be written out. */
static struct created_rec *created_rec_new(const json_t *obj, const char *name, const char *uid)
{
    size_t len = json_dumpb(obj, NULL, 0, JSON_COMPACT), nlen = strlen(name);
    struct created_rec *rec;
    if (!len || strlen(uid) >= SB_MEMO_UID)
        return NULL;
    rec = xmalloc(sizeof(*rec) + len + 1 + nlen + 1);
    if (json_dumpb(obj, rec->data, len, JSON_COMPACT) != len) {
        xfree(rec);
        return NULL;
    }
    memcpy(rec->uid, uid, strlen(uid) + 1);
    rec->len = len;
    rec->data[len] = '\0';
    rec->name = rec->data + len + 1;
    memcpy(rec->name, name, nlen + 1);
    return rec;
}

void sb_memo_created_at(struct sb_memo *m, const struct kube_res *res, const char *owner_uid,
                        const json_t *obj, usec_t now)
{
    const char *name = kube_obj_name(obj), *uid = kube_obj_uid(obj);
    struct created_slot *s;
    struct created_rec *rec, *old;

    if (!m || !created_usable(res, owner_uid, name) || !uid ||
        !(rec = created_rec_new(obj, name, uid)))
        return;
    s = created_slot_of(m, res, owner_uid, name);
    pthread_mutex_lock(&m->lock);
    old = s->rec;
    memcpy(s->owner, owner_uid, strlen(owner_uid) + 1);
    s->res = res;
    s->rec = rec;
    s->at = now;
    pthread_mutex_unlock(&m->lock);
    xfree(old);
}

json_t *sb_memo_created_get_at(struct sb_memo *m, const struct kube_res *res, const char *owner_uid,
                               const char *name, usec_t *ret_left, usec_t now)
{
    struct created_slot *s;
    struct created_rec *expired = NULL;
    char *text = NULL;
    size_t len = 0;
    usec_t left = 0;
    json_t *obj;

    if (!m || !created_usable(res, owner_uid, name))
        return NULL;
    s = created_slot_of(m, res, owner_uid, name);
    pthread_mutex_lock(&m->lock);
    if (created_match(s, res, owner_uid, name)) {
        if (now >= s->at && now - s->at < SB_MEMO_TTL) {
            /* copied under the lock (the record may be replaced once it is let go) and
             * parsed after it, so that other passes do not wait for the parse */
            len = s->rec->len;
            text = xstrndup(s->rec->data, len);
            left = SB_MEMO_TTL - (now - s->at);
        } else {
            expired = created_take(s);
        }
    }
    pthread_mutex_unlock(&m->lock);
    xfree(expired);
    obj = text ? json_loadb(text, len, 0, NULL) : NULL;
    xfree(text);
    if (obj && ret_left)
        *ret_left = left;
    return obj;
}

json_t *sb_memo_created_get(struct sb_memo *m, const struct kube_res *res, const char *owner_uid,
                            const char *name, usec_t *ret_left)
{
    return sb_memo_created_get_at(m, res, owner_uid, name, ret_left, clock_now());
}

void sb_memo_created(struct sb_memo *m, const struct kube_res *res, const char *owner_uid,
                     const json_t *obj)
{
    sb_memo_created_at(m, res, owner_uid, obj, clock_now());
}

void sb_memo_created_forget(struct sb_memo *m, const struct kube_res *res, const char *owner_uid,
                            const char *name, const char *child_uid)
{
    struct created_slot *s;
    struct created_rec *gone = NULL;

    if (!m || !created_usable(res, owner_uid, name))
        return;
    s = created_slot_of(m, res, owner_uid, name);
    pthread_mutex_lock(&m->lock);
    if (created_match(s, res, owner_uid, name) &&
        (!child_uid || strcmp(s->rec->uid, child_uid) == 0))
        gone = created_take(s);
    pthread_mutex_unlock(&m->lock);
    xfree(gone);
}

void sb_memo_created_gone(struct sb_memo *m, const json_t *obj)
{
    static const struct kube_res *const kinds[] = {&KUBE_RES_PODS, &KUBE_RES_SERVICES,
                                                   &KUBE_RES_PVCS};
    const char *owner = json_string_value(json_object_get(kube_obj_controller_ref(obj), "uid"));
    if (!m || !owner || !sb_controller_is(obj, SB_GROUP, SB_KIND) || !kube_obj_uid(obj))
        return;
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
        sb_memo_created_forget(m, kinds[i], owner, kube_obj_name(obj), kube_obj_uid(obj));
}
