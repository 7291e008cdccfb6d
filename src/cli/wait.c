/* SPDX-License-Identifier: Apache-2.0 */
/* Waiting for a condition on one object: GET, then watch it (field selector on its name)
 * from that resourceVersion until the predicate is satisfied or the time is up. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/buf.h"
#include "common/log.h"
#include "kube/obj.h"
#include "kube/watch.h"

#define WAIT_DONE 1000 /* private "stop, satisfied" code returned through the stream */

struct waiter {
    cli_wait_fn *fn;
    void *ctx;
    json_t *last; /* latest object, owned; NULL after DELETED */
    int result;   /* predicate error when < 0 */
    char *why;
    size_t why_size;
};

static int eval(struct waiter *w, const json_t *obj)
{
    int r = w->fn(w->ctx, obj, w->why, w->why_size);
    if (r < 0)
        w->result = r;
    return r;
}

static int on_event(void *ctx, const struct kube_event *ev)
{
    struct waiter *w = ctx;
    if (ev->type == KUBE_EVENT_BOOKMARK)
        return 0;
    json_decref(w->last);
    w->last = ev->type == KUBE_EVENT_DELETED ? NULL : json_incref(ev->object);
    int r = eval(w, w->last);
    return r > 0 ? -WAIT_DONE : r;
}

/* GETs the object; a 404 counts as "deleted". Returns 1 done, 0 go on, < 0 error. */
static int initial(struct kube_client *c, const struct kube_res *res, const char *ns,
                   const char *name, struct waiter *w, struct buf *rv, struct kube_err *e)
{
    json_t *obj = NULL;
    int r = kube_get(c, res, ns, name, &obj, e);
    if (r < 0 && !kube_err_is_not_found(e))
        return r;
    json_decref(w->last);
    w->last = obj;
    buf_reset(rv);
    if (obj && buf_puts(rv, kube_obj_resource_version(obj)) < 0)
        return -E2BIG;
    return eval(w, obj);
}

static int watch_once(struct kube_client *c, const struct kube_res *res, const char *ns,
                      const char *sel, struct kube_watch *kw, const struct buf *rv, usec_t left,
                      const atomic_bool *stop, struct kube_err *e)
{
    struct kube_req q;
    kube_req_init(&q, "GET", res);
    q.ns = ns;
    q.watch = true;
    q.allow_watch_bookmarks = true;
    q.field_selector = sel;
    q.resource_version = rv->len ? buf_str(rv) : "0";
    q.timeout_seconds = (long)(left / USEC_PER_SEC) + 1;
    kube_watch_reset(kw);
    return kube_request_stream(c, &q, kube_watch_feed, kw, stop, left + USEC_PER_SEC, e);
}

static bool stopped(const atomic_bool *stop)
{
    return stop && atomic_load(stop);
}

int cli_wait(struct kube_client *c, const struct kube_res *res, const char *ns, const char *name,
             usec_t timeout, cli_wait_fn *fn, void *ctx, json_t **ret_obj, char *why,
             size_t why_size, struct kube_err *e)
{
    return cli_wait_stop(c, res, ns, name, timeout, fn, ctx, ret_obj, why, why_size, NULL, e);
}

int cli_wait_stop(struct kube_client *c, const struct kube_res *res, const char *ns,
                  const char *name, usec_t timeout, cli_wait_fn *fn, void *ctx, json_t **ret_obj,
                  char *why, size_t why_size, const atomic_bool *stop, struct kube_err *e)
{
    struct waiter w = {.fn = fn, .ctx = ctx, .why = why, .why_size = why_size};
    struct kube_watch *kw = kube_watch_new(0, on_event, &w);
    struct buf rv, sel;
    buf_init(&rv, 256);
    buf_init(&sel, 512);
    usec_t deadline = clock_now() + timeout;
    int r = buf_printf(&sel, "metadata.name=%s", name);
    if (r == 0)
        r = stopped(stop) ? -ECANCELED : initial(c, res, ns, name, &w, &rv, e);
    while (r == 0) {
        usec_t now = clock_now();
        if (stopped(stop)) {
            r = -ECANCELED;
            break;
        }
        if (now >= deadline) {
            r = -ETIMEDOUT;
            break;
        }
        r = watch_once(c, res, ns, buf_str(&sel), kw, &rv, deadline - now, stop, e);
        if (r == -WAIT_DONE) {
            r = 1;
        } else if (r < 0 && w.result < 0) {
            r = w.result;
        } else if (r == -ESTALE || r == 0 || r == -ETIMEDOUT) {
            /* expired resourceVersion or the server ended the watch: start over */
            const char *last_rv = kube_watch_rv(kw);
            buf_reset(&rv);
            if (r != -ESTALE && last_rv)
                (void)buf_puts(&rv, last_rv);
            r = r == -ESTALE && !stopped(stop) ? initial(c, res, ns, name, &w, &rv, e) : 0;
        }
    }
    if (r > 0) {
        r = 0;
        if (ret_obj)
            *ret_obj = json_incref(w.last);
    }
    json_decref(w.last);
    kube_watch_free(kw);
    buf_done(&rv);
    buf_done(&sel);
    return r;
}

/* An integer field at dotted path of o, or dflt when absent. */
static long long int_at(const json_t *o, const char *path, long long dflt)
{
    const json_t *v = kube_obj_path(o, path);
    return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

static bool progress_deadline_exceeded(const json_t *o)
{
    const json_t *c;
    size_t i;
    json_array_foreach(kube_obj_path(o, "status.conditions"), i, c)
    {
        const char *t = json_string_value(json_object_get(c, "type"));
        const char *r = json_string_value(json_object_get(c, "reason"));
        if (t && r && !strcmp(t, "Progressing") && !strcmp(r, "ProgressDeadlineExceeded"))
            return true;
    }
    return false;
}

int cli_rollout_done(void *ctx, const json_t *o, char *why, size_t n)
{
    (void)ctx;
    if (!o) {
        (void)snprintf(why, n, "not found");
        return 0;
    }
    long long gen = kube_obj_generation(o), seen = int_at(o, "status.observedGeneration", 0);
    if (seen < gen) {
        (void)snprintf(why, n, "generation %lld not yet observed by the deployment controller",
                       gen);
        return 0;
    }
    if (progress_deadline_exceeded(o)) {
        (void)snprintf(why, n, "rollout exceeded its progress deadline (ProgressDeadlineExceeded)");
        return -ETIME;
    }
    long long want = int_at(o, "spec.replicas", 1), upd = int_at(o, "status.updatedReplicas", 0);
    long long all = int_at(o, "status.replicas", 0), ok = int_at(o, "status.availableReplicas", 0);
    if (upd < want)
        (void)snprintf(why, n, "%lld of %lld new replicas updated", upd, want);
    else if (all > upd)
        (void)snprintf(why, n, "%lld old replicas pending termination", all - upd);
    else if (ok < upd)
        (void)snprintf(why, n, "%lld of %lld updated replicas available", ok, upd);
    else
        return 1;
    return 0;
}
