/* SPDX-License-Identifier: Apache-2.0 */
/* An informer source over a set of namespaces: per-namespace LIST and WATCH, merged. */
#include "controller/ns_source.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "kube/obj.h"

struct ctrl_ns_source {
    char **ns;
    size_t n;
    pthread_mutex_t lock; /* rv, and one call of the informer's feed at a time */
    char **rv;            /* each namespace's resume point (new strings) */
    atomic_bool stop_all; /* ends every stream of the current watch call */
    pthread_cond_t ended; /* a stream ended (with lock) */
};

/* ---- the namespace list ---- */

static bool dns_label(struct str s)
{
    if (s.len == 0 || s.len > 63 || s.p[0] == '-' || s.p[s.len - 1] == '-')
        return false;
    for (size_t i = 0; i < s.len; i++)
        if (!((s.p[i] >= 'a' && s.p[i] <= 'z') || (s.p[i] >= '0' && s.p[i] <= '9') ||
              s.p[i] == '-'))
            return false;
    return true;
}

void ctrl_ns_list_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        xfree(v[i]);
    xfree(v);
}

int ctrl_ns_list_parse(const char *spec, char ***ret_v, size_t *ret_n)
{
    struct str rest = str_c(spec ? spec : ""), one;
    char **v = NULL;
    size_t n = 0;
    bool more = rest.len > 0;

    while (more) {
        more = str_cut(rest, ',', &one, &rest);
        one = str_trim(one);
        if (!dns_label(one) || n == LIMIT_CTRL_NAMESPACES)
            goto bad;
        for (size_t i = 0; i < n; i++)
            if (str_eq(str_c(v[i]), one))
                goto bad;
        v = xrealloc(v, (n + 1) * sizeof(*v));
        v[n++] = str_dup(one);
    }
    *ret_v = v;
    *ret_n = n;
    return 0;
bad:
    ctrl_ns_list_free(v, n);
    return -EINVAL;
}

/* ---- LIST: every namespace, merged ---- */

static void set_rv(struct ctrl_ns_source *s, size_t i, const char *rv)
{
    char *copy = xstrdup(rv);

    pthread_mutex_lock(&s->lock);
    xfree(s->rv[i]);
    s->rv[i] = copy;
    pthread_mutex_unlock(&s->lock);
}

/* One pass of a paged LIST over the namespaces: each page is handed on to the informer's
 * fn as it arrives, so one page is held at a time (not every namespace's whole list). */
struct nss_pages {
    size_t i; /* the namespace being listed */
    kube_list_page_fn *fn;
    void *fn_ctx;
    bool fresh; /* the next page handed on starts a new snapshot (fn's restarted) */
    bool again; /* a later namespace's list restarted: list them all again */
    char *rv;   /* namespace i's list's resourceVersion (its last page's) */
};

/* kube_list_page_fn. A restarted list of the first namespace passes through (the informer
 * forgets the keys seen before: all that namespace's); one of a later namespace cannot
 * (the informer would forget the earlier namespaces' keys too), so the whole LIST starts
 * again. */
static int nss_page(void *ctx, const json_t *page, bool restarted)
{
    struct nss_pages *p = ctx;
    if (restarted && p->i > 0) {
        p->again = true;
        return -EAGAIN;
    }
    const char *rv = kube_obj_resource_version(page);
    if (rv && rv[0]) {
        xfree(p->rv);
        p->rv = xstrdup(rv);
    }
    int r = p->fn(p->fn_ctx, page, restarted || p->fresh);
    p->fresh = false;
    return r;
}

/* One pass over every namespace. Returns 0 or a negative errno (p->again: start over). */
static int nss_pages_pass(struct ctrl_ns_source *s, const struct kube_informer_opts *o,
                          struct nss_pages *p, struct kube_err *reterr)
{
    int r = 0;
    for (p->i = 0; r >= 0 && p->i < s->n; p->i++) {
        struct kube_req q;
        kube_req_init(&q, "GET", o->res);
        q.label_selector = o->label_selector;
        q.field_selector = o->field_selector;
        q.cancel = o->cancel;
        if (o->compact_store || o->compact_above)
            q.limit = LIMIT_KUBE_LIST_PAGE_SMALL;
        xfree(p->rv);
        p->rv = NULL;
        r = kube_list_pages(o->client, o->res, s->ns[p->i], &q, nss_page, p, reterr);
        if (r >= 0 && !p->rv) {
            kube_err_set(reterr, -EPROTO, "list of %s in %s has no resourceVersion", o->res->plural,
                         s->ns[p->i]);
            r = -EPROTO;
        }
        if (r >= 0)
            set_rv(s, p->i, p->rv);
    }
    return r;
}

/* The informer's paged LIST: every namespace in turn; twice at most when a later
 * namespace's list restarted (an expired continue token) in the first pass. */
static int nss_list_pages(void *ctx, const struct kube_informer_opts *o, kube_list_page_fn *fn,
                          void *fn_ctx, struct kube_err *reterr)
{
    struct ctrl_ns_source *s = ctx;
    struct nss_pages p = {.fn = fn, .fn_ctx = fn_ctx};
    int r = nss_pages_pass(s, o, &p, reterr);
    if (r < 0 && p.again) {
        p.again = false;
        p.fresh = true;
        kube_err_clear(reterr);
        r = nss_pages_pass(s, o, &p, reterr);
        if (r < 0 && p.again)
            kube_err_set(reterr, -EAGAIN, "list of %s: continue tokens expired twice",
                         o->res->plural);
    }
    xfree(p.rv);
    return r;
}

/* ---- WATCH: one stream per namespace, complete lines handed over one at a time ---- */

struct nss_stream {
    struct ctrl_ns_source *s;
    size_t i;
    const struct kube_informer_opts *o;
    const struct kube_informer_watch_args *a;
    struct buf line; /* the incomplete last line */
    struct kube_err err;
    int result;
    bool done; /* with s->lock */
    pthread_t th;
};

/* Remembers the resourceVersion of an event line (objects and bookmarks carry one). */
static void note_rv(struct nss_stream *st, const char *line, size_t len)
{
    json_t *ev = json_loadb(line, len, 0, NULL);
    const char *rv = kube_obj_resource_version(json_object_get(ev, "object"));

    if (rv && rv[0]) {
        xfree(st->s->rv[st->i]);
        st->s->rv[st->i] = xstrdup(rv);
    }
    json_decref(ev);
}

/* Hands over every complete line in st->line. Returns 0 or the feed's negative value. */
static int hand_over(struct nss_stream *st)
{
    const char *nl;
    int r = 0;

    while (r >= 0 && (nl = memchr(st->line.data, '\n', st->line.len))) {
        size_t n = (size_t)(nl - st->line.data) + 1;
        pthread_mutex_lock(&st->s->lock);
        note_rv(st, st->line.data, n);
        r = st->a->fn(st->a->fn_ctx, st->line.data, n);
        pthread_mutex_unlock(&st->s->lock);
        buf_consume(&st->line, n);
    }
    return r;
}

static int stream_feed(void *ctx, const char *data, size_t len)
{
    struct nss_stream *st = ctx;

    if (buf_append(&st->line, data, len) < 0) {
        kube_err_set(&st->err, -E2BIG, "watch event larger than the frame limit");
        return -E2BIG;
    }
    return hand_over(st);
}

static void *stream_main(void *arg)
{
    struct nss_stream *st = arg;
    struct ctrl_ns_source *s = st->s;
    char *rv;
    struct kube_req q;

    pthread_mutex_lock(&s->lock);
    rv = xstrdup(s->rv[st->i] ? s->rv[st->i] : st->a->resource_version);
    pthread_mutex_unlock(&s->lock);
    kube_req_init(&q, "GET", st->o->res);
    q.ns = s->ns[st->i];
    q.label_selector = st->o->label_selector;
    q.field_selector = st->o->field_selector;
    q.watch = true;
    q.allow_watch_bookmarks = true;
    q.resource_version = rv;
    q.timeout_seconds = st->a->timeout_seconds;
    st->result = kube_request_stream(st->o->client, &q, stream_feed, st, &s->stop_all,
                                     st->o->idle_timeout, &st->err);
    if (st->result < 0 && st->result != -ECANCELED && kube_err_is_gone(&st->err))
        st->result = -ESTALE;
    xfree(rv);
    pthread_mutex_lock(&s->lock);
    st->done = true;
    pthread_cond_broadcast(&s->ended);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Waits until a stream ends or the informer stops; returns the index of the stream
 * that ended first, or n when stopped. */
static size_t wait_first(struct ctrl_ns_source *s, struct nss_stream *st, size_t n,
                         const atomic_bool *stop)
{
    size_t first = n;

    pthread_mutex_lock(&s->lock);
    while (first == n && !atomic_load(stop)) {
        struct timespec ts;
        for (size_t i = 0; i < n && first == n; i++)
            if (st[i].done)
                first = i;
        if (first != n)
            break;
        clock_deadline_mono(50 * USEC_PER_MSEC, &ts);
        (void)pthread_cond_timedwait(&s->ended, &s->lock, &ts);
    }
    pthread_mutex_unlock(&s->lock);
    return first;
}

/* The call's result: -ECANCELED when stopped, -ESTALE when any namespace got 410,
 * else the first stream's. */
static int watch_result(struct nss_stream *st, size_t n, size_t first, const atomic_bool *stop,
                        struct kube_err *reterr)
{
    if (atomic_load(stop) || first == n)
        return -ECANCELED;
    for (size_t i = 0; i < n; i++)
        if (st[i].result == -ESTALE) {
            if (reterr)
                *reterr = st[i].err;
            return -ESTALE;
        }
    if (st[first].result < 0 && reterr)
        *reterr = st[first].err;
    return st[first].result;
}

static int nss_watch(void *ctx, const struct kube_informer_opts *o,
                     const struct kube_informer_watch_args *a, struct kube_err *reterr)
{
    struct ctrl_ns_source *s = ctx;
    struct nss_stream *st = xcalloc(s->n, sizeof(*st));
    size_t started = 0, first;
    int r = 0;

    atomic_store(&s->stop_all, false);
    for (; started < s->n; started++) {
        st[started] = (struct nss_stream){.s = s, .i = started, .o = o, .a = a};
        buf_init(&st[started].line, o->max_frame ? o->max_frame : LIMIT_KUBE_WATCH_FRAME);
        kube_err_clear(&st[started].err);
        r = -pthread_create(&st[started].th, NULL, stream_main, &st[started]);
        if (r < 0) {
            buf_done(&st[started].line);
            kube_err_set(reterr, r, "cannot start a watch thread");
            break;
        }
    }
    first = r < 0 ? s->n : wait_first(s, st, s->n, a->stop);
    atomic_store(&s->stop_all, true);
    for (size_t i = 0; i < started; i++) {
        (void)pthread_join(st[i].th, NULL);
        buf_done(&st[i].line);
    }
    if (r >= 0)
        r = watch_result(st, s->n, first, a->stop, reterr);
    xfree(st);
    return r;
}

/* ---- lifecycle ---- */

int ctrl_ns_source_for(const char *spec, struct ctrl_ns_source **ret,
                       struct kube_informer_source *ret_src)
{
    struct ctrl_ns_source *s;
    char **v;
    size_t n;
    pthread_condattr_t ca;

    *ret = NULL;
    if (ctrl_ns_list_parse(spec, &v, &n) < 0)
        return -EINVAL;
    if (n < 2) {
        ctrl_ns_list_free(v, n);
        return 0;
    }
    s = XNEW(struct ctrl_ns_source);
    s->ns = v;
    s->n = n;
    s->rv = xcalloc(n, sizeof(*s->rv));
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->ended, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&s->stop_all, false);
    *ret_src =
        (struct kube_informer_source){.list_pages = nss_list_pages, .watch = nss_watch, .ctx = s};
    *ret = s;
    log_debug("watching %zu namespaces, each with its own list and watch\tnamespaces=%s", n, spec);
    return 0;
}

void ctrl_ns_source_free(struct ctrl_ns_source *s)
{
    if (!s)
        return;
    ctrl_ns_list_free(s->rv, s->n);
    ctrl_ns_list_free(s->ns, s->n);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->ended);
    xfree(s);
}
