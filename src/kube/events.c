/* SPDX-License-Identifier: Apache-2.0 */
/* Events recorder: record() checks the per-object spam bucket and enqueues; one writer
 * thread drains the queue, creating Events or patching the one it made for the same
 * (object, type, reason, message) within the aggregation window. */
#include "kube/events.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/map.h"
#include "common/xalloc.h"
#include "common/yield_gate.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "kube/res.h"

#define TS_LEN          40
#define EVENT_NAME_MAX  253
#define NAME_PREFIX_MAX (EVENT_NAME_MAX - 1 - 16) /* room for ".<16 hex digits>" */
#define KEY_SEP         "\x1f"

/* ---- a bounded LRU over common/map (private) ---- */

struct lru_node {
    struct lru_node *prev, *next;
    char *key;
};

struct lru {
    struct map *map;      /* key -> struct lru_node */
    struct lru_node head; /* sentinel: head.next is the most recently used */
    size_t cap;
    void (*free_node)(struct lru_node *n);
};

static void lru_init(struct lru *l, size_t cap, void (*free_node)(struct lru_node *))
{
    l->map = map_new(NULL);
    l->head.prev = l->head.next = &l->head;
    l->cap = cap;
    l->free_node = free_node;
}

static void lru_unlink(struct lru_node *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
}

static void lru_link_front(struct lru *l, struct lru_node *n)
{
    n->prev = &l->head;
    n->next = l->head.next;
    l->head.next->prev = n;
    l->head.next = n;
}

static void lru_remove(struct lru *l, struct lru_node *n)
{
    (void)map_remove(l->map, n->key);
    lru_unlink(n);
    xfree(n->key);
    l->free_node(n);
}

static void lru_done(struct lru *l)
{
    while (l->head.next != &l->head)
        lru_remove(l, l->head.next);
    map_free(l->map);
}

/** Returns the node of key (borrowed), marked most recently used, or NULL. */
static struct lru_node *lru_get(struct lru *l, const char *key)
{
    struct lru_node *n = map_get(l->map, key);

    if (n) {
        lru_unlink(n);
        lru_link_front(l, n);
    }
    return n;
}

/** Inserts n (taken) under key (taken; absent from l), evicting the least recently used
 * entries beyond the capacity. */
static void lru_insert(struct lru *l, struct lru_node *n, char *key)
{
    n->key = key;
    (void)map_put(l->map, key, n, NULL);
    lru_link_front(l, n);
    while (map_len(l->map) > l->cap)
        lru_remove(l, l->head.prev);
}

/* ---- cache entries ---- */

struct spam_entry {
    struct lru_node node;
    double tokens;
    usec_t last;
};

struct agg_entry {
    struct lru_node node;
    char *name; /* the Event we created */
    char *ns;
    long count;
    usec_t last; /* monotonic time of the last occurrence */
};

static void spam_free(struct lru_node *n)
{
    xfree(container_of(n, struct spam_entry, node));
}

static void agg_free(struct lru_node *n)
{
    struct agg_entry *e = container_of(n, struct agg_entry, node);

    xfree(e->name);
    xfree(e->ns);
    xfree(e);
}

/* ---- recorder ---- */

struct pending {
    struct pending *next;
    json_t *involved; /* involvedObject */
    char *ns;         /* namespace of the Event */
    char *obj_name;
    enum events_type type;
    char *reason, *message;
    usec_t mono, wall;
};

struct events_recorder {
    char *component, *instance;
    struct events_api api;
    struct events_clock clock;
    size_t queue_size;
    usec_t window, refill;
    unsigned burst;

    pthread_mutex_t lock;
    pthread_cond_t work;    /* queued or stopping */
    pthread_cond_t written; /* done advanced */
    struct pending *head, *tail;
    size_t qlen;
    unsigned long enqueued, done; /* for flush */
    bool stopping;
    bool joined;            /* the writer thread is (being) joined */
    bool discarding;        /* events_discard: what is queued or held is not written */
    atomic_bool gate_off;   /* a held write lets go: stopping, or the gate changes */
    struct yield_gate gate; /* under lock */
    unsigned gate_users;    /* holds running with a copy of gate (under lock) */
    pthread_t thread;
    struct lru spam; /* under lock */
    struct events_stats st;

    /* Writer thread only. */
    struct lru agg;
    unsigned long name_seq;
};

static usec_t now_mono(const struct events_recorder *r)
{
    return r->clock.now ? r->clock.now(r->clock.ctx) : clock_now();
}

static usec_t now_wall(const struct events_recorder *r)
{
    return r->clock.wall_now ? r->clock.wall_now(r->clock.ctx) : clock_wall_now();
}

static void count_stat(struct events_recorder *r, unsigned long *counter)
{
    (void)pthread_mutex_lock(&r->lock);
    (*counter)++;
    (void)pthread_mutex_unlock(&r->lock);
}

static void pending_free(struct pending *p)
{
    if (!p)
        return;
    json_decref(p->involved);
    xfree(p->ns);
    xfree(p->obj_name);
    xfree(p->reason);
    xfree(p->message);
    xfree(p);
}

/* ---- text: valid UTF-8, bounded ---- */

/* Length of the valid UTF-8 sequence at s (n bytes available), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    size_t len;
    uint32_t cp;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        len = 3;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4;
    else
        return 0;
    cp = s[0] & (0x7f >> len);
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

/* Returns a new copy of s that is valid UTF-8 (invalid bytes become '?') and at most max
 * bytes long, cut at a character boundary. */
static char *clean_text(const char *s, size_t max)
{
    size_t n = strlen(s), o = 0;
    char *out = xmalloc((n < max ? n : max) + 1);

    for (size_t i = 0; i < n;) {
        size_t len = utf8_seq((const unsigned char *)s + i, n - i);
        if (o + (len ? len : 1) > max)
            break;
        if (len == 0) {
            out[o++] = '?';
            i++;
            continue;
        }
        memcpy(out + o, s + i, len);
        o += len;
        i += len;
    }
    out[o] = '\0';
    return out;
}

/* ---- record ---- */

static void set_if(json_t *o, const char *key, const char *value)
{
    if (value && value[0])
        (void)json_object_set_new(o, key, json_string(value));
}

static json_t *involved_object(const json_t *obj)
{
    json_t *o = json_object();

    set_if(o, "kind", kube_obj_kind(obj));
    set_if(o, "apiVersion", kube_obj_path_str(obj, "apiVersion"));
    set_if(o, "namespace", kube_obj_namespace(obj));
    set_if(o, "name", kube_obj_name(obj));
    set_if(o, "uid", kube_obj_uid(obj));
    set_if(o, "resourceVersion", kube_obj_resource_version(obj));
    return o;
}

static const char *inv(const struct pending *p, const char *key)
{
    const char *s = json_string_value(json_object_get(p->involved, key));
    return s ? s : "";
}

static struct pending *pending_new(struct events_recorder *r, const json_t *obj,
                                   enum events_type type, const char *reason, char *message)
{
    struct pending *p = XNEW(struct pending);
    const char *ns = kube_obj_namespace(obj);
    const char *name = kube_obj_name(obj);

    p->involved = involved_object(obj);
    p->ns = xstrdup(ns && ns[0] ? ns : "default");
    p->obj_name = xstrdup(name && name[0] ? name : "unknown");
    p->type = type;
    p->reason = clean_text(reason, 128);
    p->message = clean_text(message, LIMIT_EVENT_MESSAGE);
    p->mono = now_mono(r);
    p->wall = now_wall(r);
    return p;
}

static char *spam_key(const struct pending *p)
{
    return xasprintf("%s" KEY_SEP "%s" KEY_SEP "%s" KEY_SEP "%s", inv(p, "kind"),
                     inv(p, "namespace"), inv(p, "name"), inv(p, "uid"));
}

/* Takes one token from the object's bucket; false when it is empty. Under lock. */
static bool spam_allow(struct events_recorder *r, const struct pending *p)
{
    char *key = spam_key(p);
    struct lru_node *n = lru_get(&r->spam, key);
    struct spam_entry *e;

    if (n) {
        xfree(key);
        e = container_of(n, struct spam_entry, node);
    } else {
        e = XNEW(struct spam_entry);
        e->tokens = r->burst;
        e->last = p->mono;
        lru_insert(&r->spam, &e->node, key);
    }
    if (p->mono > e->last) {
        e->tokens += (double)(p->mono - e->last) / (double)r->refill;
        if (e->tokens > r->burst)
            e->tokens = r->burst;
        e->last = p->mono;
    }
    if (e->tokens < 1.0)
        return false;
    e->tokens -= 1.0;
    return true;
}

/* Queues p (taken) or drops it, counting either way. */
static void enqueue(struct events_recorder *r, struct pending *p)
{
    (void)pthread_mutex_lock(&r->lock);
    if (r->stopping || r->qlen >= r->queue_size) {
        r->st.dropped_queue++;
    } else if (!spam_allow(r, p)) {
        r->st.dropped_spam++;
    } else {
        if (r->tail)
            r->tail->next = p;
        else
            r->head = p;
        r->tail = p;
        r->qlen++;
        r->enqueued++;
        r->st.recorded++;
        p = NULL;
        (void)pthread_cond_signal(&r->work);
    }
    (void)pthread_mutex_unlock(&r->lock);
    pending_free(p);
}

void events_recordv(struct events_recorder *r, const json_t *obj, enum events_type type,
                    const char *reason, const char *fmt, va_list ap)
{
    char *message;

    if (!r || !obj || !reason || !fmt)
        return;
    message = xvasprintf(fmt, ap);
    enqueue(r, pending_new(r, obj, type, reason, message));
    xfree(message);
}

void events_record(struct events_recorder *r, const json_t *obj, enum events_type type,
                   const char *reason, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    events_recordv(r, obj, type, reason, fmt, ap);
    va_end(ap);
}

/* ---- writer ---- */

static char *agg_key(const struct pending *p)
{
    return xasprintf("%s" KEY_SEP "%s" KEY_SEP "%s" KEY_SEP "%s" KEY_SEP "%s" KEY_SEP "%d" KEY_SEP
                     "%s" KEY_SEP "%s",
                     inv(p, "kind"), inv(p, "apiVersion"), inv(p, "namespace"), inv(p, "name"),
                     inv(p, "uid"), (int)p->type, p->reason, p->message);
}

static char *event_name(struct events_recorder *r, const struct pending *p)
{
    /* client-go uses "<object>.<unix nanoseconds in hex>"; the sequence number keeps two
     * events from one microsecond apart. */
    uint64_t stamp = (uint64_t)p->wall * 1000 + r->name_seq++ % 1000;

    return xasprintf("%.*s.%llx", NAME_PREFIX_MAX, p->obj_name, (unsigned long long)stamp);
}

static json_t *event_object(const struct events_recorder *r, const struct pending *p,
                            const char *name)
{
    char ts[TS_LEN];
    json_t *o;

    clock_format_rfc3339_sec(p->wall, ts, sizeof(ts));
    o = json_pack("{s:s, s:s, s:{s:s, s:s}, s:O, s:s, s:s, s:s, s:{s:s}, s:s, s:s, s:I, s:s, "
                  "s:s}",
                  "apiVersion", "v1", "kind", "Event", "metadata", "name", name, "namespace", p->ns,
                  "involvedObject", p->involved, "reason", p->reason, "message", p->message, "type",
                  p->type == EVENTS_WARNING ? "Warning" : "Normal", "source", "component",
                  r->component, "firstTimestamp", ts, "lastTimestamp", ts, "count", (json_int_t)1,
                  "reportingComponent", r->component, "reportingInstance", r->instance);
    ASSERT(o); /* every string was made valid UTF-8 */
    return o;
}

/* Creates a new Event for p and remembers it under key (taken). */
static void write_create(struct events_recorder *r, const struct pending *p, char *key)
{
    char *name = event_name(r, p);
    json_t *obj = event_object(r, p, name);
    struct kube_err err;
    struct agg_entry *e;
    int rc;

    kube_err_clear(&err);
    rc = r->api.create(r->api.ctx, p->ns, obj, NULL, &err);
    json_decref(obj);
    if (rc < 0) {
        log_debug_errno(rc, "creating event %s/%s failed, dropping\tdetail=\"%s\"", p->ns, name,
                        err.message);
        count_stat(r, &r->st.failed);
        xfree(name);
        xfree(key);
        return;
    }
    count_stat(r, &r->st.created);
    e = XNEW(struct agg_entry);
    e->name = name;
    e->ns = xstrdup(p->ns);
    e->count = 1;
    e->last = p->mono;
    lru_insert(&r->agg, &e->node, key);
}

/* Bumps the count of the Event behind e. Returns 0 or the API error. */
static int write_patch(struct events_recorder *r, struct agg_entry *e, const struct pending *p)
{
    char ts[TS_LEN];
    struct kube_err err;
    json_t *patch;
    int rc;

    clock_format_rfc3339_sec(p->wall, ts, sizeof(ts));
    patch = json_pack("{s:I, s:s}", "count", (json_int_t)(e->count + 1), "lastTimestamp", ts);
    kube_err_clear(&err);
    rc = r->api.patch(r->api.ctx, e->ns, e->name, patch, NULL, &err);
    json_decref(patch);
    if (rc < 0) {
        log_debug_errno(rc, "patching event %s/%s failed\tdetail=\"%s\"", e->ns, e->name,
                        err.message);
        return rc;
    }
    e->count++;
    if (p->mono > e->last)
        e->last = p->mono;
    count_stat(r, &r->st.patched);
    return 0;
}

static void write_pending(struct events_recorder *r, const struct pending *p)
{
    char *key = agg_key(p);
    struct lru_node *n = lru_get(&r->agg, key);
    int rc;

    if (n) {
        struct agg_entry *e = container_of(n, struct agg_entry, node);
        /* Recorded before the last one written (threads stamp their records before they
         * queue them, so the queue's order can differ): inside the window too. */
        if (p->mono < e->last || p->mono - e->last < r->window) {
            rc = write_patch(r, e, p);
            if (rc != -ENOENT) {
                if (rc < 0)
                    count_stat(r, &r->st.failed);
                xfree(key);
                return;
            }
        }
        /* Out of the window, or the Event is gone (TTL): start a new one. */
        lru_remove(&r->agg, n);
    }
    write_create(r, p, key);
}

/* Holds p while the gate says busy, at most the gate's bound after p was recorded; not
 * at all once the queue is half full (holding then would drop Events). */
static void gate_hold(struct events_recorder *r, const struct pending *p)
{
    struct yield_gate g;
    usec_t age = now_mono(r) - p->mono;
    bool full, held = false;
    (void)pthread_mutex_lock(&r->lock);
    g = r->gate;
    full = r->qlen >= r->queue_size / 2;
    r->gate_users++;
    (void)pthread_mutex_unlock(&r->lock);
    if (!full && age < g.max_wait)
        held = yield_gate_wait(&g, g.max_wait - age, &r->gate_off);
    (void)pthread_mutex_lock(&r->lock);
    r->st.held += held;
    r->gate_users--;
    (void)pthread_cond_broadcast(&r->written);
    (void)pthread_mutex_unlock(&r->lock);
}

void events_set_gate(struct events_recorder *r, const struct yield_gate *g)
{
    (void)pthread_mutex_lock(&r->lock);
    r->gate = g ? *g : (struct yield_gate){0};
    /* A hold that copied the old gate lets go within a step; wait for it. */
    atomic_store(&r->gate_off, true);
    while (r->gate_users)
        (void)pthread_cond_wait(&r->written, &r->lock);
    atomic_store(&r->gate_off, r->stopping);
    (void)pthread_mutex_unlock(&r->lock);
}

/* Whether events_discard came (the Event taken, held at the gate through it, counted
 * as dropped then). Writer thread. */
static bool discarded(struct events_recorder *r)
{
    bool d;
    (void)pthread_mutex_lock(&r->lock);
    d = r->discarding;
    r->st.dropped_queue += d;
    (void)pthread_mutex_unlock(&r->lock);
    return d;
}

static void *writer_main(void *arg)
{
    struct events_recorder *r = arg;
    struct pending *p;

    (void)pthread_mutex_lock(&r->lock);
    for (;;) {
        while (!r->head && !r->stopping)
            (void)pthread_cond_wait(&r->work, &r->lock);
        p = r->head;
        if (!p)
            break;
        r->head = p->next;
        if (!r->head)
            r->tail = NULL;
        r->qlen--;
        (void)pthread_mutex_unlock(&r->lock);
        gate_hold(r, p);
        if (!discarded(r))
            write_pending(r, p);
        pending_free(p);
        (void)pthread_mutex_lock(&r->lock);
        r->done++;
        (void)pthread_cond_broadcast(&r->written);
    }
    (void)pthread_mutex_unlock(&r->lock);
    return NULL;
}

/* ---- lifecycle ---- */

void events_flush(struct events_recorder *r)
{
    unsigned long target;

    (void)pthread_mutex_lock(&r->lock);
    target = r->enqueued;
    while (r->done < target)
        (void)pthread_cond_wait(&r->written, &r->lock);
    (void)pthread_mutex_unlock(&r->lock);
}

/* Refuses later records and lets go of a held write. Caller holds r->lock. */
static void begin_stop(struct events_recorder *r)
{
    r->stopping = true;
    atomic_store(&r->gate_off, true);
    (void)pthread_cond_broadcast(&r->work);
}

void events_stop(struct events_recorder *r)
{
    bool join;

    (void)pthread_mutex_lock(&r->lock);
    join = !r->joined;
    r->joined = true;
    begin_stop(r);
    (void)pthread_mutex_unlock(&r->lock);
    if (join)
        (void)pthread_join(r->thread, NULL);
}

bool events_stop_within(struct events_recorder *r, usec_t budget)
{
    struct timespec ts;
    bool all;

    clock_deadline_mono(budget, &ts);
    (void)pthread_mutex_lock(&r->lock);
    begin_stop(r);
    while (r->done < r->enqueued)
        if (pthread_cond_timedwait(&r->written, &r->lock, &ts) == ETIMEDOUT)
            break;
    all = r->done >= r->enqueued;
    (void)pthread_mutex_unlock(&r->lock);
    if (all)
        events_stop(r);
    else
        events_discard(r);
    return all;
}

void events_discard(struct events_recorder *r)
{
    struct pending *p, *next;

    (void)pthread_mutex_lock(&r->lock);
    r->discarding = true;
    for (p = r->head; p; p = next) {
        next = p->next;
        pending_free(p);
        r->st.dropped_queue++;
        r->done++;
    }
    r->head = r->tail = NULL;
    r->qlen = 0;
    (void)pthread_cond_broadcast(&r->written);
    (void)pthread_mutex_unlock(&r->lock);
    events_stop(r);
}

void events_stats(struct events_recorder *r, struct events_stats *ret)
{
    (void)pthread_mutex_lock(&r->lock);
    *ret = r->st;
    (void)pthread_mutex_unlock(&r->lock);
}

static int check_opts(const struct events_opts *o)
{
    json_t *probe;

    if (!o->component || !o->component[0] || !o->api.create || !o->api.patch)
        return -EINVAL;
    /* Both end up in JSON strings: they must be valid UTF-8. */
    probe = json_pack("[s, s?]", o->component, o->instance);
    if (!probe)
        return -EINVAL;
    json_decref(probe);
    return 0;
}

static char *default_instance(void)
{
    char host[256];

    if (gethostname(host, sizeof(host)) < 0)
        return xstrdup("unknown");
    host[sizeof(host) - 1] = '\0';
    return clean_text(host, sizeof(host) - 1);
}

static void init_fields(struct events_recorder *r, const struct events_opts *o)
{
    atomic_init(&r->gate_off, false);
    r->component = xstrdup(o->component);
    r->instance = o->instance ? xstrdup(o->instance) : default_instance();
    r->api = o->api;
    if (o->clock)
        r->clock = *o->clock;
    r->queue_size = o->queue_size ? o->queue_size : EVENTS_DEFAULT_QUEUE;
    r->window = o->window ? o->window : EVENTS_DEFAULT_WINDOW;
    r->burst = o->burst ? o->burst : LIMIT_EVENT_BURST;
    r->refill = o->refill ? o->refill : EVENTS_DEFAULT_REFILL;
    lru_init(&r->spam, o->cache_size ? o->cache_size : LIMIT_EVENT_CACHE, spam_free);
    lru_init(&r->agg, o->cache_size ? o->cache_size : LIMIT_EVENT_CACHE, agg_free);
    pthread_condattr_t ca;
    (void)pthread_mutex_init(&r->lock, NULL);
    (void)pthread_cond_init(&r->work, NULL);
    /* events_stop_within's deadline is on the monotonic clock */
    (void)pthread_condattr_init(&ca);
    (void)pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    (void)pthread_cond_init(&r->written, &ca);
    (void)pthread_condattr_destroy(&ca);
}

static void free_fields(struct events_recorder *r)
{
    while (r->head) {
        struct pending *p = r->head;
        r->head = p->next;
        pending_free(p);
    }
    lru_done(&r->spam);
    lru_done(&r->agg);
    (void)pthread_cond_destroy(&r->work);
    (void)pthread_cond_destroy(&r->written);
    (void)pthread_mutex_destroy(&r->lock);
    xfree(r->component);
    xfree(r->instance);
}

int events_recorder_new(const struct events_opts *opts, struct events_recorder **ret)
{
    struct events_recorder *r;
    int rc = check_opts(opts);

    if (rc < 0)
        return rc;
    r = XNEW(struct events_recorder);
    init_fields(r, opts);
    rc = -pthread_create(&r->thread, NULL, writer_main, r);
    if (rc < 0) {
        free_fields(r);
        xfree(r);
        return rc;
    }
    *ret = r;
    return 0;
}

void events_recorder_free(struct events_recorder *r)
{
    if (!r)
        return;
    events_stop(r);
    free_fields(r);
    xfree(r);
}

/* ---- real API through the kube client ---- */

static int kube_event_create(void *ctx, const char *ns, const json_t *obj, json_t **ret_obj,
                             struct kube_err *reterr)
{
    return kube_create(ctx, &KUBE_RES_EVENTS, ns, obj, ret_obj, reterr);
}

static int kube_event_patch(void *ctx, const char *ns, const char *name, const json_t *patch,
                            json_t **ret_obj, struct kube_err *reterr)
{
    return kube_patch(ctx, &KUBE_RES_EVENTS, ns, name, KUBE_PATCH_MERGE, patch, ret_obj, reterr);
}

void events_api_kube(struct kube_client *c, struct events_api *ret)
{
    *ret = (struct events_api){.ctx = c, .create = kube_event_create, .patch = kube_event_patch};
}
