/* SPDX-License-Identifier: Apache-2.0 */
/* Leader election on a Lease. The record we last saw and the monotonic time it last
 * changed decide expiry; the remote timestamps are written for humans and other
 * candidates but never trusted here. */
#include "kube/lease.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "kube/client.h"
#include "kube/res.h"

#define RFC3339_LEN 40

struct lease_elector {
    char *ns, *name, *identity;
    usec_t lease_duration, renew_deadline, retry_period, request_timeout;
    struct lease_api api;
    struct lease_callbacks cb;
    struct lease_clock clock;

    /* Touched by the ticking thread only. */
    json_t *observed;   /* spec of the record last seen (new reference) or NULL */
    usec_t observed_at; /* monotonic time the record last changed */
    usec_t last_renew;  /* monotonic time of our last successful write (sent after it) */
    json_t *held;       /* the server's copy of our last write (new reference) or NULL */
    unsigned jitter_seed;

    /* Shared with other threads. */
    atomic_bool leader;
    atomic_ullong valid_until; /* last_renew + renew_deadline while leading */
    pthread_mutex_t lock;      /* guards holder, thread state */
    pthread_cond_t wake;       /* stop requested (CLOCK_MONOTONIC) */
    char *holder;              /* last observed holder, "" if none */
    bool running, stopping;
    pthread_t thread;
};

/* ---- real API through the kube client ---- */

/* One attempt, bounded by timeout: the elector retries every period itself. */
static int kube_lease_call(void *ctx, const char *method, const char *ns, const char *name,
                           const json_t *obj, usec_t timeout, json_t **ret_obj,
                           struct kube_err *reterr)
{
    struct kube_req r;

    kube_req_init(&r, method, &KUBE_RES_LEASES);
    r.ns = ns;
    r.name = name;
    r.body = obj;
    r.timeout = timeout;
    r.no_retry = true;
    return kube_request(ctx, &r, ret_obj, reterr);
}

static int kube_lease_get(void *ctx, const char *ns, const char *name, usec_t timeout,
                          json_t **ret_obj, struct kube_err *reterr)
{
    return kube_lease_call(ctx, "GET", ns, name, NULL, timeout, ret_obj, reterr);
}

static int kube_lease_create(void *ctx, const char *ns, const json_t *obj, usec_t timeout,
                             json_t **ret_obj, struct kube_err *reterr)
{
    return kube_lease_call(ctx, "POST", ns, NULL, obj, timeout, ret_obj, reterr);
}

static int kube_lease_update(void *ctx, const char *ns, const json_t *obj, usec_t timeout,
                             json_t **ret_obj, struct kube_err *reterr)
{
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));

    return kube_lease_call(ctx, "PUT", ns, name, obj, timeout, ret_obj, reterr);
}

void lease_api_kube(struct kube_client *c, struct lease_api *ret)
{
    *ret = (struct lease_api){
        .ctx = c,
        .get = kube_lease_get,
        .create = kube_lease_create,
        .update = kube_lease_update,
    };
}

/* ---- helpers ---- */

static usec_t now_mono(const struct lease_elector *le)
{
    return le->clock.now ? le->clock.now(le->clock.ctx) : clock_now();
}

static usec_t now_wall(const struct lease_elector *le)
{
    return le->clock.wall_now ? le->clock.wall_now(le->clock.ctx) : clock_wall_now();
}

/* The timeout of the next API call: request_timeout, and while we lead never past the
 * renew deadline. 0 when no time is left. */
static usec_t call_timeout(const struct lease_elector *le)
{
    usec_t now, end;

    if (!atomic_load(&le->leader))
        return le->request_timeout;
    now = now_mono(le);
    end = le->last_renew + le->renew_deadline;
    if (now >= end)
        return 0;
    return end - now < le->request_timeout ? end - now : le->request_timeout;
}

static const char *spec_str(const json_t *spec, const char *key)
{
    const char *s = json_string_value(json_object_get(spec, key));
    return s ? s : "";
}

static json_int_t spec_int(const json_t *spec, const char *key)
{
    return json_integer_value(json_object_get(spec, key));
}

static bool holder_is(const json_t *spec, const char *identity)
{
    return strcmp(spec_str(spec, "holderIdentity"), identity) == 0;
}

static void set_holder(struct lease_elector *le, const char *holder)
{
    char *copy = xstrdup(holder);

    (void)pthread_mutex_lock(&le->lock);
    xfree(le->holder);
    le->holder = copy;
    (void)pthread_mutex_unlock(&le->lock);
}

/* Records spec (borrowed) as seen at now: the expiry clock restarts only when the
 * record changed, and new_leader fires when the holder changed. */
static void observe(struct lease_elector *le, const json_t *spec, usec_t now)
{
    const char *holder = spec_str(spec, "holderIdentity");
    bool holder_changed = !le->observed || !holder_is(le->observed, holder);

    if (le->observed && spec && json_equal(le->observed, spec))
        return;
    json_decref(le->observed);
    le->observed = spec ? json_deep_copy(spec) : json_object();
    le->observed_at = now;
    if (!holder_changed)
        return;
    set_holder(le, holder);
    if (holder[0] && le->cb.new_leader)
        le->cb.new_leader(le->cb.ctx, holder);
}

/* Whether the observed record has gone unchanged for its lease duration. */
static bool observed_expired(const struct lease_elector *le, usec_t now)
{
    json_int_t secs = spec_int(le->observed, "leaseDurationSeconds");
    /* the field is an int32: a larger value from another writer is read as the largest
     * (the product would wrap, and the record look expired at once) */
    usec_t d = secs > INT32_MAX ? (usec_t)INT32_MAX * USEC_PER_SEC
               : secs > 0       ? (usec_t)secs * USEC_PER_SEC
                                : le->lease_duration;

    return now >= le->observed_at + d;
}

/* Someone else holds the observed record and it has not expired. */
static bool held_by_other(const struct lease_elector *le, usec_t now)
{
    const char *holder;

    if (!le->observed)
        return false;
    holder = spec_str(le->observed, "holderIdentity");
    return holder[0] && strcmp(holder, le->identity) != 0 && !observed_expired(le, now);
}

/* Writes our record into spec (borrowed, modified): a new acquisition when we were not
 * the holder, a renewal otherwise. */
static void fill_spec(const struct lease_elector *le, json_t *spec, usec_t wall)
{
    char ts[RFC3339_LEN];
    bool ours = holder_is(spec, le->identity);
    json_int_t transitions = spec_int(spec, "leaseTransitions");

    clock_format_rfc3339(wall, ts, sizeof(ts));
    if (!ours) {
        (void)json_object_set_new(spec, "acquireTime", json_string(ts));
        (void)json_object_set_new(spec, "leaseTransitions", json_integer(transitions + 1));
    }
    (void)json_object_set_new(spec, "holderIdentity", json_string(le->identity));
    (void)json_object_set_new(spec, "leaseDurationSeconds",
                              json_integer((json_int_t)(le->lease_duration / USEC_PER_SEC)));
    (void)json_object_set_new(spec, "renewTime", json_string(ts));
}

static void log_api_error(const struct lease_elector *le, const char *what, int r,
                          const struct kube_err *err)
{
    log_debug_errno(r, "lease %s/%s: %s failed\tdetail=\"%s\"", le->ns, le->name, what,
                    err->message);
}

/* ---- API calls, each with the current call timeout (-ETIMEDOUT without a call once
 * the renew deadline has passed) ---- */

static int api_get(struct lease_elector *le, json_t **ret_obj, struct kube_err *err)
{
    usec_t to = call_timeout(le);

    return to ? le->api.get(le->api.ctx, le->ns, le->name, to, ret_obj, err) : -ETIMEDOUT;
}

static int api_create(struct lease_elector *le, const json_t *obj, json_t **ret_obj,
                      struct kube_err *err)
{
    usec_t to = call_timeout(le);

    return to ? le->api.create(le->api.ctx, le->ns, obj, to, ret_obj, err) : -ETIMEDOUT;
}

static int api_update(struct lease_elector *le, const json_t *obj, json_t **ret_obj,
                      struct kube_err *err)
{
    usec_t to = call_timeout(le);

    return to ? le->api.update(le->api.ctx, le->ns, obj, to, ret_obj, err) : -ETIMEDOUT;
}

/* ---- acquire / renew ---- */

/* Keeps the server's copy of our write (ret_obj, taken) for the next optimistic renew. */
static void hold(struct lease_elector *le, json_t *ret_obj)
{
    json_decref(le->held);
    le->held = json_is_object(ret_obj) ? ret_obj : NULL;
    if (!le->held)
        json_decref(ret_obj);
}

static int try_create(struct lease_elector *le, usec_t now, usec_t wall)
{
    json_t *obj, *spec = json_object(), *ret_obj = NULL;
    struct kube_err err;
    int r;

    kube_err_clear(&err);
    fill_spec(le, spec, wall);
    (void)json_object_set_new(spec, "leaseTransitions", json_integer(0));
    obj = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o}", "apiVersion", "coordination.k8s.io/v1", "kind",
                    "Lease", "metadata", "name", le->name, "namespace", le->ns, "spec", spec);
    ASSERT(obj);
    r = api_create(le, obj, &ret_obj, &err);
    if (r < 0) {
        /* -EEXIST: another candidate created it first; the next get shows whom. */
        log_api_error(le, "create", r, &err);
        goto out;
    }
    observe(le, json_object_get(obj, "spec"), now);
    hold(le, ret_obj);
    ret_obj = NULL;
    r = 1;
out:
    json_decref(ret_obj);
    json_decref(obj);
    return r;
}

/* After a conflict: look again so that the winner is observed right away (as seen once
 * the read returned: try_acquire_or_renew). */
static void refresh(struct lease_elector *le)
{
    json_t *cur = NULL;

    if (api_get(le, &cur, NULL) < 0)
        return;
    observe(le, json_object_get(cur, "spec"), now_mono(le));
    json_decref(cur);
}

/* Writes our record over cur (borrowed). refresh_on_conflict: read the winner after a
 * 409. Returns 1 or a negative errno. */
static int try_update(struct lease_elector *le, const json_t *cur, usec_t now,
                      bool refresh_on_conflict)
{
    json_t *obj = json_deep_copy(cur), *spec, *ret_obj = NULL;
    struct kube_err err;
    int r;

    kube_err_clear(&err);
    spec = json_object_get(obj, "spec");
    if (!json_is_object(spec)) {
        spec = json_object();
        (void)json_object_set_new(obj, "spec", spec);
    }
    fill_spec(le, spec, now_wall(le));
    r = api_update(le, obj, &ret_obj, &err);
    if (r < 0) {
        log_api_error(le, "update", r, &err);
        if (r == -EBUSY && refresh_on_conflict)
            refresh(le);
        goto out;
    }
    observe(le, spec, now);
    hold(le, ret_obj);
    ret_obj = NULL;
    r = 1;
out:
    json_decref(ret_obj);
    json_decref(obj);
    return r;
}

/* The leader's renew: update the object we last wrote without reading it first (as
 * client-go does). Returns 1, or a negative errno; -EBUSY/-ENOENT mean it changed under
 * us and the caller reads it. */
static int try_renew_held(struct lease_elector *le, usec_t now)
{
    json_t *held = le->held;
    int r;

    le->held = NULL;
    r = try_update(le, held, now, false);
    json_decref(held);
    return r;
}

/* Returns 1 when we hold the lease now, 0 when someone else does, or a negative errno. */
static int try_acquire_or_renew(struct lease_elector *le, usec_t now)
{
    json_t *cur = NULL;
    struct kube_err err;
    int r;

    if (atomic_load(&le->leader) && le->held) {
        r = try_renew_held(le, now);
        if (r != -EBUSY && r != -ENOENT)
            return r;
    }
    kube_err_clear(&err);
    r = api_get(le, &cur, &err);
    if (r == -ENOENT)
        return try_create(le, now, now_wall(le));
    if (r < 0) {
        log_api_error(le, "get", r, &err);
        return r;
    }
    /* Another holder's record is timed from when the read returned, not from before it
     * was sent: a renewal that landed while the read was under way must not count as
     * older than it is (its holder leads until renew_deadline after it, which only
     * lease_duration after the read's return is sure to be past). */
    now = now_mono(le);
    observe(le, json_object_get(cur, "spec"), now);
    if (held_by_other(le, now))
        r = 0;
    else
        r = try_update(le, cur, now, true);
    json_decref(cur);
    return r;
}

/* ---- leadership state ---- */

static void become_leader(struct lease_elector *le)
{
    atomic_store(&le->leader, true);
    log_debug("lease %s/%s: started leading\tidentity=%s", le->ns, le->name, le->identity);
    if (le->cb.started_leading)
        le->cb.started_leading(le->cb.ctx);
}

static void become_follower(struct lease_elector *le, const char *why)
{
    atomic_store(&le->leader, false);
    atomic_store(&le->valid_until, 0);
    hold(le, NULL);
    log_debug("lease %s/%s: stopped leading\tidentity=%s why=\"%s\"", le->ns, le->name,
              le->identity, why);
    if (le->cb.stopped_leading)
        le->cb.stopped_leading(le->cb.ctx);
}

/* After a failed attempt while leading: whether we still lead (on the clock as it is
 * now, after the attempt). */
static bool still_leading(struct lease_elector *le)
{
    usec_t now = now_mono(le);

    if (held_by_other(le, now)) {
        become_follower(le, "another holder");
        return false;
    }
    if (now - le->last_renew >= le->renew_deadline) {
        become_follower(le, "renew deadline passed");
        return false;
    }
    return true;
}

int lease_elector_tick(struct lease_elector *le)
{
    usec_t now = now_mono(le);
    bool leading = atomic_load(&le->leader);
    int r;

    if (leading && now - le->last_renew >= le->renew_deadline) {
        become_follower(le, "renew deadline passed");
        leading = false;
    }
    r = try_acquire_or_renew(le, now);
    if (r == 1) {
        /* now was taken before the write was sent: others saw it change later. */
        le->last_renew = now;
        atomic_store(&le->valid_until, now + le->renew_deadline);
        if (!leading)
            become_leader(le);
        return 1;
    }
    /* Keep trying every period until the renew deadline, which ends before others
     * consider our lease expired; another valid holder means we lost already. */
    return leading && still_leading(le) ? 1 : 0;
}

int lease_elector_release(struct lease_elector *le)
{
    json_t *cur = NULL, *obj = NULL, *spec;
    char ts[RFC3339_LEN];
    int r;

    if (!atomic_load(&le->leader))
        return 0;
    r = le->api.get(le->api.ctx, le->ns, le->name, le->request_timeout, &cur, NULL);
    if (r < 0)
        goto out;
    spec = json_object_get(cur, "spec");
    if (!json_is_object(spec) || !holder_is(spec, le->identity))
        goto out; /* not ours any more: nothing to give back */
    obj = json_deep_copy(cur);
    spec = json_object_get(obj, "spec");
    clock_format_rfc3339(now_wall(le), ts, sizeof(ts));
    (void)json_object_set_new(spec, "holderIdentity", json_string(""));
    (void)json_object_set_new(spec, "leaseDurationSeconds", json_integer(1));
    (void)json_object_set_new(spec, "acquireTime", json_string(ts));
    (void)json_object_set_new(spec, "renewTime", json_string(ts));
    r = le->api.update(le->api.ctx, le->ns, obj, le->request_timeout, NULL, NULL);
    if (r >= 0)
        observe(le, spec, now_mono(le));
out:
    json_decref(obj);
    json_decref(cur);
    become_follower(le, "released");
    return r < 0 ? r : 0;
}

bool lease_elector_is_leader(struct lease_elector *le)
{
    return atomic_load(&le->leader) && now_mono(le) < atomic_load(&le->valid_until);
}

int lease_elector_leader(struct lease_elector *le, char *out, size_t size)
{
    int r;

    (void)pthread_mutex_lock(&le->lock);
    r = str_copy(out, size, le->holder);
    (void)pthread_mutex_unlock(&le->lock);
    return r;
}

/* ---- thread ---- */

/* How long to wait after a tick that took elapsed. The leader keeps a cadence of one
 * attempt per retry period, counted from each attempt's start: after an attempt that
 * hung until its timeout, the next one starts at once instead of a period later, so an
 * outage costs no more of the renew deadline than it lasts. */
static usec_t next_wait(struct lease_elector *le, usec_t elapsed)
{
    usec_t jitter;

    if (atomic_load(&le->leader))
        return elapsed < le->retry_period ? le->retry_period - elapsed : 0;
    /* Followers spread their attempts a little (client-go uses a jitter factor). */
    jitter = le->retry_period / 5 * (usec_t)(rand_r(&le->jitter_seed) % 1000) / 1000;
    return le->retry_period + jitter;
}

static void *elector_main(void *arg)
{
    struct lease_elector *le = arg;
    struct timespec ts;

    (void)pthread_mutex_lock(&le->lock);
    while (!le->stopping) {
        usec_t t0 = clock_now();
        (void)pthread_mutex_unlock(&le->lock);
        (void)lease_elector_tick(le);
        clock_deadline_mono(next_wait(le, clock_now() - t0), &ts);
        (void)pthread_mutex_lock(&le->lock);
        while (!le->stopping) {
            if (pthread_cond_timedwait(&le->wake, &le->lock, &ts) == ETIMEDOUT)
                break;
        }
    }
    (void)pthread_mutex_unlock(&le->lock);
    return NULL;
}

int lease_elector_start(struct lease_elector *le)
{
    int r = 0;

    (void)pthread_mutex_lock(&le->lock);
    if (le->running) {
        r = -EALREADY;
        goto out;
    }
    le->stopping = false;
    r = -pthread_create(&le->thread, NULL, elector_main, le);
    if (r == 0)
        le->running = true;
out:
    (void)pthread_mutex_unlock(&le->lock);
    return r;
}

void lease_elector_stop(struct lease_elector *le)
{
    bool joined = false;

    (void)pthread_mutex_lock(&le->lock);
    if (le->running) {
        le->stopping = true;
        (void)pthread_cond_broadcast(&le->wake);
        joined = true;
    }
    (void)pthread_mutex_unlock(&le->lock);
    if (joined) {
        (void)pthread_join(le->thread, NULL);
        (void)pthread_mutex_lock(&le->lock);
        le->running = false;
        (void)pthread_mutex_unlock(&le->lock);
    }
    (void)lease_elector_release(le);
}

/* ---- lifecycle ---- */

int lease_check_timings(usec_t lease_duration, usec_t renew_deadline, usec_t retry_period,
                        const char **ret_why)
{
    usec_t dur = lease_duration ? lease_duration : LEASE_DEFAULT_DURATION;
    usec_t renew = renew_deadline ? renew_deadline : LEASE_DEFAULT_RENEW;
    usec_t retry = retry_period ? retry_period : LEASE_DEFAULT_RETRY;
    const char *why = NULL;

    if (dur < USEC_PER_SEC || dur % USEC_PER_SEC != 0)
        why = "the lease duration must be a whole number of seconds, at least 1s";
    else if (renew >= dur)
        why = "the renew deadline must be shorter than the lease duration";
    else if (retry >= renew)
        why = "the retry period must be shorter than the renew deadline";
    if (ret_why)
        *ret_why = why;
    return why ? -EINVAL : 0;
}

static int check_opts(const struct lease_opts *o)
{
    if (!o->ns || !o->ns[0] || !o->name || !o->name[0] || !o->identity || !o->identity[0])
        return -EINVAL;
    if (!o->api.get || !o->api.create || !o->api.update)
        return -EINVAL;
    return lease_check_timings(o->lease_duration, o->renew_deadline, o->retry_period, NULL);
}

static int init_sync(struct lease_elector *le)
{
    pthread_condattr_t ca;
    int r = -pthread_condattr_init(&ca);

    if (r < 0)
        return r;
    r = -pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (r == 0)
        r = -pthread_cond_init(&le->wake, &ca);
    (void)pthread_condattr_destroy(&ca);
    if (r == 0)
        (void)pthread_mutex_init(&le->lock, NULL);
    return r;
}

int lease_elector_new(const struct lease_opts *opts, struct lease_elector **ret)
{
    usec_t dur = opts->lease_duration ? opts->lease_duration : LEASE_DEFAULT_DURATION;
    usec_t renew = opts->renew_deadline ? opts->renew_deadline : LEASE_DEFAULT_RENEW;
    usec_t retry = opts->retry_period ? opts->retry_period : LEASE_DEFAULT_RETRY;
    struct lease_elector *le;
    int r = check_opts(opts);

    if (r < 0)
        return r;
    le = XNEW(struct lease_elector);
    r = init_sync(le);
    if (r < 0) {
        xfree(le);
        return r;
    }
    le->ns = xstrdup(opts->ns);
    le->name = xstrdup(opts->name);
    le->identity = xstrdup(opts->identity);
    le->holder = xstrdup("");
    le->lease_duration = dur;
    le->renew_deadline = renew;
    le->retry_period = retry;
    le->request_timeout = opts->request_timeout ? opts->request_timeout : renew / 2;
    if (!opts->request_timeout && le->request_timeout < LEASE_MIN_REQUEST)
        le->request_timeout = LEASE_MIN_REQUEST;
    le->api = opts->api;
    le->cb = opts->cb;
    if (opts->clock)
        le->clock = *opts->clock;
    le->jitter_seed = (unsigned)clock_now() ^ (unsigned)(uintptr_t)le;
    atomic_init(&le->leader, false);
    atomic_init(&le->valid_until, 0);
    *ret = le;
    return 0;
}

void lease_elector_free(struct lease_elector *le)
{
    if (!le)
        return;
    lease_elector_stop(le);
    json_decref(le->observed);
    json_decref(le->held);
    xfree(le->holder);
    xfree(le->ns);
    xfree(le->name);
    xfree(le->identity);
    (void)pthread_cond_destroy(&le->wake);
    (void)pthread_mutex_destroy(&le->lock);
    xfree(le);
}
