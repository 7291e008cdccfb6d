/* SPDX-License-Identifier: Apache-2.0 */
/* Informer logic against a scripted list/watch source (no HTTP): initial list, event
 * dispatch, bookmarks, relist with tombstones on 410 (event or HTTP), reconnects after
 * errors, resync, transform and indexes, sync waits and prompt stop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/xalloc.h"
#include "kube/informer.h"
#include "kube/obj.h"

/* ---- wire fixtures ---- */

#define OBJ(ns, n, rv)                                                             \
    "{\"kind\":\"ConfigMap\",\"metadata\":{\"namespace\":\"" ns "\",\"name\":\"" n \
    "\",\"resourceVersion\":\"" rv "\"}}"
#define EV(type, obj) "{\"type\":\"" type "\",\"object\":" obj "}\n"
#define LIST(rv, items)                                                                           \
    "{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":\"" rv "\"},\"items\":[" items \
    "]}"
#define BOOKMARK(rv) \
    EV("BOOKMARK", "{\"kind\":\"ConfigMap\",\"metadata\":{\"resourceVersion\":\"" rv "\"}}")
#define GONE                                                                                       \
    EV("ERROR", "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Expired\",\"code\":410," \
                "\"message\":\"too old resource version\"}")

/* ---- scripted source ---- */

enum step_kind { S_LIST, S_WATCH };

struct step {
    enum step_kind kind;
    const char *body; /* S_LIST: the List JSON; S_WATCH: the stream bytes */
    int ret;          /* S_LIST: error instead of the list; S_WATCH: result after the bytes */
    long status;      /* HTTP status put in reterr when ret < 0 */
};

struct fake {
    const struct step *steps;
    size_t n, pos;
    size_t chunk; /* bytes per fn call: frames get split everywhere */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool idle;        /* script used up: the informer waits in the source */
    bool released;    /* a list past the script may return */
    struct buf calls; /* "L;W@100;..." */
    int mismatches;
    long last_timeout;
};

static void fake_init(struct fake *f, const struct step *steps, size_t n)
{
    memset(f, 0, sizeof(*f));
    f->steps = steps;
    f->n = n;
    f->chunk = 7;
    assert_int_equal(pthread_mutex_init(&f->mu, NULL), 0);
    assert_int_equal(pthread_cond_init(&f->cond, NULL), 0);
    buf_init(&f->calls, 1u << 16);
}

static void fake_done(struct fake *f)
{
    buf_done(&f->calls);
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->mu);
}

/* Takes the next step (locked); NULL when the script is used up. */
static const struct step *fake_next(struct fake *f, enum step_kind kind)
{
    if (f->pos == f->n) {
        f->idle = true;
        pthread_cond_broadcast(&f->cond);
        return NULL;
    }
    const struct step *s = &f->steps[f->pos++];
    pthread_cond_broadcast(&f->cond);
    if (s->kind != kind)
        f->mismatches++;
    return s;
}

static void fail_with(struct kube_err *reterr, int ret, long status)
{
    kube_err_clear(reterr);
    reterr->code = ret;
    reterr->http_status = status;
    (void)snprintf(reterr->message, sizeof(reterr->message), "scripted failure");
}

static int fake_list(void *ctx, const struct kube_informer_opts *o, json_t **ret_list,
                     struct kube_err *reterr)
{
    struct fake *f = ctx;
    (void)o;
    pthread_mutex_lock(&f->mu);
    assert_int_equal(buf_puts(&f->calls, "L;"), 0);
    const struct step *s = fake_next(f, S_LIST);
    while (!s && !f->released)
        pthread_cond_wait(&f->cond, &f->mu);
    pthread_mutex_unlock(&f->mu);
    if (!s)
        return -ECANCELED;
    if (s->ret < 0) {
        fail_with(reterr, s->ret, s->status);
        return s->ret;
    }
    json_t *list = json_loads(s->body, 0, NULL);
    assert_non_null(list);
    *ret_list = list;
    return 0;
}

/* Past the script: waits for stop (polling, as curl's progress callback does) or for
 * the requested server-side timeout. */
static int fake_block(struct fake *f, const struct kube_informer_watch_args *a)
{
    usec_t end = clock_now() + (usec_t)a->timeout_seconds * USEC_PER_SEC;
    while (!atomic_load(a->stop)) {
        if (clock_now() >= end)
            return 0;
        struct timespec ts;
        clock_deadline_realtime(2 * USEC_PER_MSEC, &ts);
        pthread_mutex_lock(&f->mu);
        pthread_cond_timedwait(&f->cond, &f->mu, &ts);
        pthread_mutex_unlock(&f->mu);
    }
    return -ECANCELED;
}

static int fake_watch(void *ctx, const struct kube_informer_opts *o,
                      const struct kube_informer_watch_args *a, struct kube_err *reterr)
{
    struct fake *f = ctx;
    (void)o;
    pthread_mutex_lock(&f->mu);
    assert_int_equal(
        buf_printf(&f->calls, "W@%s;", a->resource_version ? a->resource_version : "-"), 0);
    f->last_timeout = a->timeout_seconds;
    const struct step *s = fake_next(f, S_WATCH);
    pthread_mutex_unlock(&f->mu);
    if (!s)
        return fake_block(f, a);
    size_t len = s->body ? strlen(s->body) : 0;
    for (size_t off = 0; off < len; off += f->chunk) {
        size_t n = len - off < f->chunk ? len - off : f->chunk;
        int r = a->fn(a->fn_ctx, s->body + off, n);
        if (r < 0)
            return r;
    }
    if (s->ret < 0)
        fail_with(reterr, s->ret, s->status);
    return s->ret;
}

static void fake_wait_idle(struct fake *f)
{
    struct timespec ts;
    clock_deadline_realtime(10 * USEC_PER_SEC, &ts);
    pthread_mutex_lock(&f->mu);
    while (!f->idle)
        if (pthread_cond_timedwait(&f->cond, &f->mu, &ts) != 0)
            break;
    bool idle = f->idle;
    pthread_mutex_unlock(&f->mu);
    assert_true(idle);
}

/* Waits until the source has handed out the first pos steps. */
static void fake_wait_pos(struct fake *f, size_t pos)
{
    struct timespec ts;
    clock_deadline_realtime(10 * USEC_PER_SEC, &ts);
    pthread_mutex_lock(&f->mu);
    while (f->pos < pos)
        if (pthread_cond_timedwait(&f->cond, &f->mu, &ts) != 0)
            break;
    size_t got = f->pos;
    pthread_mutex_unlock(&f->mu);
    assert_true(got >= pos);
}

static void fake_release(struct fake *f)
{
    pthread_mutex_lock(&f->mu);
    f->released = true;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
}

/* ---- handler recorder ---- */

struct rec {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct buf log;
    int calls;
    pthread_t tid;
    bool tid_set;
    int wrong_thread;
};

static void rec_init(struct rec *r)
{
    memset(r, 0, sizeof(*r));
    assert_int_equal(pthread_mutex_init(&r->mu, NULL), 0);
    assert_int_equal(pthread_cond_init(&r->cond, NULL), 0);
    buf_init(&r->log, 1u << 16);
}

static void rec_done(struct rec *r)
{
    buf_done(&r->log);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->mu);
}

static void rec_printf(struct rec *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rec_printf(struct rec *r, const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&r->mu);
    if (!r->tid_set) {
        r->tid = pthread_self();
        r->tid_set = true;
    } else if (!pthread_equal(r->tid, pthread_self())) {
        r->wrong_thread++;
    }
    va_start(ap, fmt);
    (void)buf_vprintf(&r->log, fmt, ap);
    va_end(ap);
    r->calls++;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->mu);
}

static const char *key_of(const json_t *o, char *out, size_t size)
{
    const char *ns = kube_obj_namespace(o);
    (void)snprintf(out, size, "%s/%s", ns ? ns : "", kube_obj_name(o));
    return out;
}

static void on_add(void *ctx, const json_t *obj)
{
    char k[128];
    rec_printf(ctx, "+%s@%s;", key_of(obj, k, sizeof(k)), kube_obj_resource_version(obj));
}

static void on_update(void *ctx, const json_t *old_obj, const json_t *new_obj)
{
    char k[128];
    rec_printf(ctx, "~%s@%s>%s;", key_of(new_obj, k, sizeof(k)), kube_obj_resource_version(old_obj),
               kube_obj_resource_version(new_obj));
}

static void on_delete(void *ctx, const json_t *obj, bool unknown)
{
    char k[128];
    rec_printf(ctx, "-%s@%s%s;", key_of(obj, k, sizeof(k)), kube_obj_resource_version(obj),
               unknown ? "!" : "");
}

static void rec_wait_calls(struct rec *r, int calls)
{
    struct timespec ts;
    clock_deadline_realtime(10 * USEC_PER_SEC, &ts);
    pthread_mutex_lock(&r->mu);
    while (r->calls < calls)
        if (pthread_cond_timedwait(&r->cond, &r->mu, &ts) != 0)
            break;
    int n = r->calls;
    pthread_mutex_unlock(&r->mu);
    assert_true(n >= calls);
}

/* ---- fixture ---- */

struct t {
    struct fake fake;
    struct rec rec;
    struct kube_informer_source src;
    struct kube_informer_opts opts;
    struct kube_informer *inf;
};

static const struct kube_res res_cm = {"", "v1", "ConfigMap", "configmaps", true};

/* Loads a script and default options (fake and recorder are initialised by setup). */
static void t_init(struct t *t, const struct step *steps, size_t n)
{
    t->fake.steps = steps;
    t->fake.n = n;
    t->src = (struct kube_informer_source){.list = fake_list, .watch = fake_watch, .ctx = &t->fake};
    t->opts = (struct kube_informer_opts){.res = &res_cm,
                                          .source = &t->src,
                                          .watch_timeout_s = 3600,
                                          .backoff_min = USEC_PER_MSEC,
                                          .backoff_max = 2 * USEC_PER_MSEC};
}

static void t_start(struct t *t)
{
    assert_int_equal(kube_informer_new(&t->opts, &t->inf), 0);
    struct kube_informer_handlers h = {
        .on_add = on_add, .on_update = on_update, .on_delete = on_delete, .ctx = &t->rec};
    assert_int_equal(kube_informer_add_handlers(t->inf, &h), 0);
    assert_int_equal(kube_informer_start(t->inf), 0);
}

/* Stops and frees the informer first, so that even after a failed assertion no thread
 * is left using the fixture; then checks what the whole run saw. */
static int t_finish(struct t *t)
{
    fake_release(&t->fake);
    kube_informer_free(t->inf);
    t->inf = NULL;
    bool ok = t->fake.mismatches == 0 && t->rec.wrong_thread == 0 &&
              !(t->rec.tid_set && pthread_equal(t->rec.tid, pthread_self()));
    fake_done(&t->fake);
    rec_done(&t->rec);
    return ok ? 0 : -1;
}

static int setup(void **state)
{
    struct t *t = XNEW(struct t);
    fake_init(&t->fake, NULL, 0);
    rec_init(&t->rec);
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    struct t *t = *state;
    int r = t_finish(t);
    xfree(t);
    return r;
}

/* Ends the current informer mid-test and gets the fixture ready for another. */
static void t_restart(struct t *t)
{
    assert_int_equal(t_finish(t), 0);
    fake_init(&t->fake, NULL, 0);
    rec_init(&t->rec);
}

static void assert_rv(struct kube_informer *inf, const char *want)
{
    char rv[64];
    assert_int_equal(kube_informer_last_rv(inf, rv, sizeof(rv)), 0);
    assert_string_equal(rv, want);
}

/* ---- tests ---- */

static void test_list_then_watch(void **state)
{
    static const struct step steps[] = {
        {S_LIST, LIST("100", OBJ("ns", "a", "1") "," OBJ("ns", "b", "2")), 0, 0},
        {S_WATCH,
         EV("ADDED", OBJ("ns", "c", "101")) EV("MODIFIED", OBJ("ns", "a", "102"))
             EV("DELETED", OBJ("ns", "b", "103")) BOOKMARK("150"),
         0, 0},
        {S_WATCH, "\r\n" EV("MODIFIED", OBJ("ns", "c", "151")) "\n", 0, 0},
    };
    struct t *t = *state;
    t_init(t, steps, ARRAY_SIZE(steps));
    t_start(t);
    assert_int_equal(kube_informer_wait_for_sync(t->inf, 10 * USEC_PER_SEC), 0);
    assert_true(kube_informer_has_synced(t->inf));
    fake_wait_idle(&t->fake);

    assert_string_equal(buf_str(&t->rec.log),
                        "+ns/a@1;+ns/b@2;+ns/c@101;~ns/a@1>102;-ns/b@103;~ns/c@101>151;");
    assert_string_equal(buf_str(&t->fake.calls), "L;W@100;W@150;W@151;");
    assert_int_equal(t->fake.last_timeout, 3600);
    assert_rv(t->inf, "151");

    struct kube_informer_stats st;
    kube_informer_stats(t->inf, &st);
    assert_int_equal(st.lists, 1);
    assert_int_equal(st.relists, 0);
    assert_int_equal(st.events, 5);
    assert_int_equal(st.bookmarks, 1);
    assert_int_equal(st.watch_starts, 3);
    assert_int_equal(st.watch_restarts, 2);
    assert_int_equal(st.watch_errors, 0);
    assert_int_equal(st.gone, 0);
    assert_int_equal(st.adds, 3);
    assert_int_equal(st.updates, 2);
    assert_int_equal(st.deletes, 1);

    struct kube_store *s = kube_informer_store(t->inf);
    assert_int_equal(kube_store_len(s), 2);
    json_t *c = kube_store_get(s, "ns/c");
    assert_string_equal(kube_obj_resource_version(c), "151");
    json_decref(c);
    assert_null(kube_store_get(s, "ns/b"));
}

/* A bookmark moves the resume point without any handler call. */
static void test_bookmark_only(void **state)
{
    static const struct step steps[] = {
        {S_LIST, LIST("100", OBJ("ns", "a", "1")), 0, 0},
        {S_WATCH, BOOKMARK("120") BOOKMARK("130"), 0, 0},
    };
    struct t *t = *state;
    t_init(t, steps, ARRAY_SIZE(steps));
    t_start(t);
    fake_wait_idle(&t->fake);
    assert_string_equal(buf_str(&t->rec.log), "+ns/a@1;");
    assert_string_equal(buf_str(&t->fake.calls), "L;W@100;W@130;");
    assert_rv(t->inf, "130");
    struct kube_informer_stats st;
    kube_informer_stats(t->inf, &st);
    assert_int_equal(st.bookmarks, 2);
    assert_int_equal(st.events, 2);
    assert_int_equal(st.updates, 0);
}

/* ERROR 410 in the stream: relist; changed objects get on_update, new ones on_add,
 * vanished ones a tombstone on_delete, unchanged ones nothing; nothing after the ERROR
 * is applied; the next watch starts from the new list. */
static void test_relist_on_410_event(void **state)
{
    static const struct step steps[] = {
        {S_LIST, LIST("100", OBJ("ns", "a", "1") "," OBJ("ns", "b", "2") "," OBJ("ns", "c", "3")),
         0, 0},
        {S_WATCH, EV("MODIFIED", OBJ("ns", "a", "101")) GONE EV("ADDED", OBJ("ns", "x", "102")), 0,
         0},
        {S_LIST,
         LIST("200", OBJ("ns", "a", "150") "," OBJ("ns", "c", "3") "," OBJ("ns", "d", "180")), 0,
         0},
    };
    struct t *t = *state;
    t_init(t, steps, ARRAY_SIZE(steps));
    t_start(t);
    fake_wait_idle(&t->fake);
    assert_string_equal(buf_str(&t->rec.log), "+ns/a@1;+ns/b@2;+ns/c@3;~ns/a@1>101;"
                                              "~ns/a@101>150;+ns/d@180;-ns/b@2!;");
    assert_string_equal(buf_str(&t->fake.calls), "L;W@100;L;W@200;");
    assert_rv(t->inf, "200");
    struct kube_informer_stats st;
    kube_informer_stats(t->inf, &st);
    assert_int_equal(st.lists, 2);
    assert_int_equal(st.relists, 1);
    assert_int_equal(st.gone, 1);
    assert_int_equal(st.watch_errors, 0);
    assert_int_equal(st.watch_restarts, 0);
    assert_int_equal(kube_store_len(kube_informer_store(t->inf)), 3);
}

static void test_relist_on_http_410(void **state)
{
    static const struct step steps[] = {
        {S_LIST, LIST("100", OBJ("ns", "a", "1")), 0, 0},
        {S_WATCH, NULL, -ESTALE, 410},
        {S_LIST, LIST("300", OBJ("ns", "a", "1")), 0, 0},
    };
    struct t *t = *state;
    t_init(t, steps, ARRAY_SIZE(steps));
    t_start(t);
    fake_wait_idle(&t->fake);
    assert_string_equal(buf_str(&t->rec.log), "+ns/a@1;");
    assert_string_equal(buf_str(&t->fake.calls), "L;W@100;L;W@300;");
    struct kube_informer_stats st;
    kube_informer_stats(t->inf, &st);
    assert_int_equal(st.gone, 1);
    assert_int_equal(st.relists, 1);
}

static char oversized[700];

/* Malformed lines, transport errors, a partial frame at a drop, and an oversized frame
 * each end the connection; the watch resumes from the last applied resourceVersion. */
static void test_reconnect_after_errors(void **state)
{
    int n = snprintf(oversized, sizeof(oversized), "{\"type\":\"ADDED\",\"object\":{\"pad\":\"");
    memset(oversized + n, 'x', sizeof(oversized) - (size_t)n - 1);
    oversized[sizeof(oversized) - 1] = '\0';
    static const struct step steps[] = {
        {S_LIST, LIST("100", OBJ("ns", "a", "1")), 0, 0},
        {S_WATCH, EV("ADDED", OBJ("ns", "b", "101")) "{not json\n" EV("ADDED", OBJ("ns", "z", "9")),
         0, 0},
        {S_WATCH, "{\"type\":\"ADDED\",\"object\":{\"meta", -EIO, 0},
        {S_WATCH, oversized, 0, 0},
        {S_WATCH, EV("ADDED", OBJ("ns", "c", "105")), -ECONNRESET, 0},
        {S_WATCH, EV("ERROR", "{\"kind\":\"Status\",\"code\":500,\"reason\":\"InternalError\"}"), 0,
         0},
    };
    struct t *t = *state;
    t_init(t, steps, ARRAY_SIZE(steps));
    t->opts.max_frame = 512;
    t_start(t);
    fake_wait_idle(&t->fake);
    assert_string_equal(buf_str(&t->rec.log), "+ns/a@1;+ns/b@101;+ns/c@105;");
    assert_string_equal(buf_str(&t->fake.calls), "L;W@100;W@101;W@101;W@101;W@105;W@105;");
    struct kube_informer_stats st;
    kube_informer_stats(t->inf, &st);
    assert_int_equal(st.watch_errors, 5);
    assert_int_equal(st.relists, 0);
    assert_int_equal(st.gone, 0);
    assert_int_equal(st.watch_restarts, 5);
    assert_null(kube_store_get(kube_informer_store(t->inf), "ns/z"));
}

static void test_list_errors_retry(void **state)
{
    static const struct step steps[] = {
        {S_LIST, NULL, -EIO, 500},
        {S_LIST, "{\"items\":5,\"metadata\":{\"resourceVersion\":\"1\"}}", 0, 0},
        {S_LIST, "{\"items\":[]}", 0, 0},
        {S_LIST, LIST("100", OBJ("ns", "a", "1") ",7," OBJ("ns", "", "2")), 0, 0},
    };
    struct t *t = *state;
    t_init(t, steps, ARRAY_SIZE(steps));
    t_start(t);
    assert_int_equal(kube_informer_wait_for_sync(t->inf, 10 * USEC_PER_SEC), 0);
    fake_wait_idle(&t->fake);
    assert_string_equal(buf_str(&t->rec.log), "+ns/a@1;");
    assert_string_equal(buf_str(&t->fake.calls), "L;L;L;L;W@100;");
    struct kube_informer_stats st;
    kube_informer_stats(t->inf, &st);
    assert_int_equal(st.list_errors, 3);
    assert_int_equal(st.lists, 1);
}

static void test_sync_timeout_and_cancel(void **state)
{
    static const struct step steps[] = {
        {S_LIST, NULL, -EIO, 500},
    };
    struct t *t = *state;
    t_init(t, steps, ARRAY_SIZE(steps));
    t_start(t);
    assert_int_equal(kube_informer_wait_for_sync(t->inf, 50 * USEC_PER_MSEC), -ETIMEDOUT);
    assert_false(kube_informer_has_synced(t->inf));
    fake_release(&t->fake);
    kube_informer_stop(t->inf);
    assert_int_equal(kube_informer_wait_for_sync(t->inf, USEC_INFINITY), -ECANCELED);
    kube_informer_stop(t->inf); /* idempotent */
}

/* A stop cuts a watch that would last an hour, and a back-off of a minute: each stop
 * returns far sooner (30 s is only passed by a hang; waiting them out takes a minute or
 * an hour). */
static void test_stop_is_prompt(void **state)
{
    static const struct step steps[] = {
        {S_LIST, LIST("100", OBJ("ns", "a", "1")), 0, 0},
    };
    struct t *t = *state;
    t_init(t, steps, ARRAY_SIZE(steps));
    t_start(t);
    fake_wait_idle(&t->fake);
    pthread_mutex_lock(&t->fake.mu);
    long watch_timeout = t->fake.last_timeout;
    pthread_mutex_unlock(&t->fake.mu);
    assert_int_equal(watch_timeout, 3600); /* the watch under way lasts an hour */
    usec_t t0 = clock_now();
    kube_informer_stop(t->inf);
    assert_true(clock_now() - t0 < 30 * USEC_PER_SEC);
    assert_string_equal(buf_str(&t->fake.calls), "L;W@100;");

    /* also while waiting out a long back-off */
    t_restart(t);
    static const struct step fail[] = {
        {S_LIST, NULL, -EIO, 500},
    };
    t_init(t, fail, ARRAY_SIZE(fail));
    t->opts.backoff_min = t->opts.backoff_max = 60 * USEC_PER_SEC;
    t_start(t);
    fake_wait_pos(&t->fake, 1);
    t0 = clock_now();
    kube_informer_stop(t->inf);
    assert_true(clock_now() - t0 < 30 * USEC_PER_SEC);
    assert_string_equal(buf_str(&t->fake.calls), "L;");
}

static void test_resync(void **state)
{
    static const struct step steps[] = {
        {S_LIST, LIST("100", OBJ("ns", "a", "1") "," OBJ("ns", "b", "2")), 0, 0},
    };
    struct t *t = *state;
    t_init(t, steps, ARRAY_SIZE(steps));
    t->opts.resync_period = 300 * USEC_PER_MSEC;
    t_start(t);
    rec_wait_calls(&t->rec, 4);
    pthread_mutex_lock(&t->rec.mu);
    char *log = xstrdup(buf_str(&t->rec.log));
    pthread_mutex_unlock(&t->rec.mu);
    pthread_mutex_lock(&t->fake.mu);
    long timeout = t->fake.last_timeout;
    pthread_mutex_unlock(&t->fake.mu);
    struct kube_informer_stats st;
    kube_informer_stats(t->inf, &st);
    bool a_seen = strstr(log, "~ns/a@1>1;") != NULL, b_seen = strstr(log, "~ns/b@2>2;") != NULL;
    xfree(log);
    assert_true(a_seen && b_seen);
    /* the watch was asked to end in time for the resync */
    assert_int_equal(timeout, 1);
    assert_true(st.resyncs >= 1);
    assert_int_equal(st.lists, 1);
}

static void test_transform_and_index(void **state)
{
    static const struct step steps[] = {
        {S_LIST,
         LIST("100", "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"a\",\"resourceVersion\":\"1\","
                     "\"labels\":{\"pool\":\"p1\"},\"managedFields\":[{\"manager\":\"x\"}]}}"),
         0, 0},
        {S_WATCH,
         EV("ADDED", "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"b\",\"resourceVersion\":\"2\","
                     "\"labels\":{\"pool\":\"p1\"},\"managedFields\":[]}}")
             EV("DELETED",
                "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"a\",\"resourceVersion\":\"3\","
                "\"labels\":{\"pool\":\"p1\"},\"managedFields\":[]}}"),
         0, 0},
    };
    struct t *t = *state;
    t_init(t, steps, ARRAY_SIZE(steps));
    t->opts.transform = kube_store_strip_transform;
    t_start(t);
    fake_wait_idle(&t->fake);
    assert_int_equal(kube_informer_add_index(t->inf, "pool", kube_index_label, "pool"), 0);
    struct kube_objv ov = {0};
    assert_int_equal(kube_store_by_index(kube_informer_store(t->inf), "pool", "p1", &ov), 1);
    assert_string_equal(kube_obj_name(ov.v[0]), "b");
    assert_null(kube_obj_path(ov.v[0], "metadata.managedFields"));
    kube_objv_done(&ov);
    assert_string_equal(buf_str(&t->rec.log), "+ns/a@1;+ns/b@2;-ns/a@3;");
}

static int adds2;
static void on_add2(void *ctx, const json_t *obj)
{
    (void)ctx;
    (void)obj;
    adds2++;
}

static void test_api_errors_and_handler_sets(void **state)
{
    struct kube_informer *inf;
    struct kube_informer_opts bad = {.res = NULL};
    assert_int_equal(kube_informer_new(&bad, &inf), -EINVAL);
    bad.res = &res_cm;
    assert_int_equal(kube_informer_new(&bad, &inf), -EINVAL);
    assert_int_equal(kube_informer_new(NULL, &inf), -EINVAL);

    static const struct step steps[] = {
        {S_LIST, LIST("100", OBJ("ns", "a", "1") "," OBJ("", "cluster1", "2")), 0, 0},
    };
    struct t *t = *state;
    t_init(t, steps, ARRAY_SIZE(steps));
    assert_int_equal(kube_informer_new(&t->opts, &t->inf), 0);
    struct kube_informer_handlers only_add = {.on_add = on_add2};
    struct kube_informer_handlers none = {0};
    assert_int_equal(kube_informer_add_handlers(t->inf, &only_add), 0);
    assert_int_equal(kube_informer_add_handlers(t->inf, &none), 0);
    for (int i = 2; i < LIMIT_KUBE_INFORMER_HANDLERS; i++)
        assert_int_equal(kube_informer_add_handlers(t->inf, &none), 0);
    assert_int_equal(kube_informer_add_handlers(t->inf, &none), -ENOSPC);
    assert_int_equal(kube_informer_start(t->inf), 0);
    assert_int_equal(kube_informer_start(t->inf), -EALREADY);
    assert_int_equal(kube_informer_add_handlers(t->inf, &none), -EBUSY);
    assert_int_equal(kube_informer_wait_for_sync(t->inf, 10 * USEC_PER_SEC), 0);
    assert_int_equal(adds2, 2);
    json_t *c = kube_store_get(kube_informer_store(t->inf), "cluster1");
    assert_non_null(c);
    json_decref(c);
    kube_informer_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_list_then_watch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bookmark_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_relist_on_410_event, setup, teardown),
        cmocka_unit_test_setup_teardown(test_relist_on_http_410, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconnect_after_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_errors_retry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sync_timeout_and_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_is_prompt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resync, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transform_and_index, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_errors_and_handler_sets, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
