/* SPDX-License-Identifier: Apache-2.0 */
/* Watch stream decoding, resourceVersion tracking and reconnect back-off. */
#include "kube/watch.h"

#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "kube/linebuf.h"

struct kube_watch {
    struct linebuf lb;
    kube_watch_event_fn *fn;
    void *ctx;
    char *rv;            /* owned; NULL until known */
    struct kube_err err; /* why the last feed stopped */
    uint64_t events;
};

static const char *const type_names[] = {
    [KUBE_EVENT_ADDED] = "ADDED",     [KUBE_EVENT_MODIFIED] = "MODIFIED",
    [KUBE_EVENT_DELETED] = "DELETED", [KUBE_EVENT_BOOKMARK] = "BOOKMARK",
    [KUBE_EVENT_ERROR] = "ERROR",
};

const char *kube_event_type_name(enum kube_event_type type)
{
    if ((size_t)type >= ARRAY_SIZE(type_names))
        return "UNKNOWN";
    return type_names[type];
}

static int parse_type(const char *s, enum kube_event_type *ret)
{
    for (size_t i = 0; s && i < ARRAY_SIZE(type_names); i++) {
        if (strcmp(s, type_names[i]) == 0) {
            *ret = (enum kube_event_type)i;
            return 0;
        }
    }
    return -EPROTO;
}

/* A new reference to obj's metadata.resourceVersion string, or NULL. */
static json_t *object_rv(const json_t *obj)
{
    json_t *rv = json_object_get(json_object_get(obj, "metadata"), "resourceVersion");
    return json_is_string(rv) ? json_incref(rv) : NULL;
}

int kube_event_decode(const char *frame, size_t len, struct kube_event *ret,
                      struct kube_err *reterr)
{
    json_error_t jerr;
    enum kube_event_type type;
    int r = -EPROTO;

    json_t *root = json_loadb(frame, len, 0, &jerr);
    if (!root) {
        kube_err_set(reterr, r, "watch event is not JSON: %s at byte %d", jerr.text, jerr.position);
        return r;
    }
    json_t *obj = json_object_get(root, "object");
    const char *tname = json_string_value(json_object_get(root, "type"));
    if (!json_is_object(root) || parse_type(tname, &type) < 0) {
        kube_err_set(reterr, r, "watch event has no known type");
        goto out;
    }
    if (!json_is_object(obj)) {
        kube_err_set(reterr, r, "watch %s event has no object", tname);
        goto out;
    }
    ret->type = type;
    ret->object = json_incref(obj);
    ret->rv_ref = object_rv(obj);
    ret->resource_version = json_string_value(ret->rv_ref);
    r = 0;
out:
    json_decref(root);
    return r;
}

void kube_event_done(struct kube_event *ev)
{
    if (!ev)
        return;
    json_decref(ev->object);
    json_decref(ev->rv_ref);
    ev->object = NULL;
    ev->rv_ref = NULL;
    ev->resource_version = NULL;
}

int kube_event_status(const struct kube_event *ev, struct kube_err *ret)
{
    if (ev->type != KUBE_EVENT_ERROR)
        return -EINVAL;
    const json_t *st = ev->object;
    const char *reason = json_string_value(json_object_get(st, "reason"));
    const char *message = json_string_value(json_object_get(st, "message"));
    json_int_t code = json_integer_value(json_object_get(st, "code"));

    kube_err_clear(ret);
    ret->http_status = code > 0 && code < 1000 ? (long)code : 0;
    if (reason)
        (void)str_copy(ret->reason, sizeof(ret->reason), reason);
    (void)str_copy(ret->message, sizeof(ret->message), message ? message : "watch ERROR event");
    ret->code = kube_err_code_for_status(ret->http_status, ret->reason);
    if (ret->code == 0 || ret->http_status == 0)
        ret->code = -EPROTO;
    if (kube_event_is_gone(ev))
        ret->code = -ESTALE;
    return 0;
}

bool kube_event_is_gone(const struct kube_event *ev)
{
    if (ev->type != KUBE_EVENT_ERROR)
        return false;
    const char *reason = json_string_value(json_object_get(ev->object, "reason"));
    json_int_t code = json_integer_value(json_object_get(ev->object, "code"));
    return code == 410 ||
           (reason && (strcmp(reason, "Expired") == 0 || strcmp(reason, "Gone") == 0));
}

struct kube_watch *kube_watch_new(size_t max_frame, kube_watch_event_fn *fn, void *ctx)
{
    struct kube_watch *w = XNEW(struct kube_watch);
    linebuf_init(&w->lb, max_frame);
    w->fn = fn;
    w->ctx = ctx;
    return w;
}

void kube_watch_free(struct kube_watch *w)
{
    if (!w)
        return;
    linebuf_done(&w->lb);
    xfree(w->rv);
    xfree(w);
}

/* Handles one decoded event: ERROR ends the stream, anything else goes to the callback
 * and then advances the resourceVersion. */
static int dispatch(struct kube_watch *w, const struct kube_event *ev)
{
    if (ev->type == KUBE_EVENT_ERROR) {
        (void)kube_event_status(ev, &w->err);
        return w->err.code == -ESTALE ? -ESTALE : -EPROTO;
    }
    int r = w->fn(w->ctx, ev);
    if (r < 0) {
        kube_err_set(&w->err, r, "watch event handler failed");
        return r;
    }
    w->events++;
    if (ev->resource_version && ev->resource_version[0])
        kube_watch_set_rv(w, ev->resource_version);
    return 0;
}

static int on_frame(void *ctx, const char *frame, size_t len)
{
    struct kube_watch *w = ctx;
    struct kube_event ev;
    int r = kube_event_decode(frame, len, &ev, &w->err);
    if (r < 0)
        return r;
    r = dispatch(w, &ev);
    kube_event_done(&ev);
    return r;
}

int kube_watch_feed(void *watch, const char *data, size_t len)
{
    struct kube_watch *w = watch;
    int r = linebuf_feed(&w->lb, data, len, on_frame, w);
    if (r == -E2BIG)
        kube_err_set(&w->err, r, "watch frame longer than %zu bytes", w->lb.max_frame);
    return r;
}

void kube_watch_reset(struct kube_watch *w)
{
    linebuf_reset(&w->lb);
    kube_err_clear(&w->err);
}

const char *kube_watch_rv(const struct kube_watch *w)
{
    return w->rv;
}

void kube_watch_set_rv(struct kube_watch *w, const char *rv)
{
    char *copy = xstrdup(rv);
    xfree(w->rv);
    w->rv = copy;
}

const struct kube_err *kube_watch_error(const struct kube_watch *w)
{
    return &w->err;
}

uint64_t kube_watch_events(const struct kube_watch *w)
{
    return w->events;
}

void kube_backoff_init(struct kube_backoff *b, usec_t min, usec_t max)
{
    b->min = min ? min : LIMIT_KUBE_BACKOFF_MIN;
    b->max = max ? max : LIMIT_KUBE_BACKOFF_MAX;
    if (b->max < b->min)
        b->max = b->min;
    b->cur = b->min;
    b->rng = (clock_now() ^ (uint64_t)(uintptr_t)b) | 1;
}

static uint64_t next_rand(struct kube_backoff *b)
{
    /* xorshift64*: plenty for jitter, never for anything secret. */
    b->rng ^= b->rng >> 12;
    b->rng ^= b->rng << 25;
    b->rng ^= b->rng >> 27;
    return b->rng * 0x2545F4914F6CDD1DULL;
}

uint64_t kube_backoff_rand(struct kube_backoff *b, uint64_t lo, uint64_t hi)
{
    if (hi <= lo)
        return lo;
    uint64_t span = hi - lo;
    if (span == UINT64_MAX)
        return next_rand(b);
    return lo + next_rand(b) % (span + 1);
}

usec_t kube_backoff_next(struct kube_backoff *b)
{
    usec_t d = b->cur + kube_backoff_rand(b, 0, b->cur / 2);
    if (d > b->max)
        d = b->max;
    b->cur = b->cur > b->max / 2 ? b->max : b->cur * 2;
    return d;
}

void kube_backoff_reset(struct kube_backoff *b)
{
    b->cur = b->min;
}
