/* SPDX-License-Identifier: Apache-2.0 */
/* Idle auto-suspend at run time: schedule, probe sandboxd, suspend (see idle_ctrl.h). */
#include "controller/idle_ctrl.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "api/res.h"
#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/map.h"
#include "common/metrics.h"
#include "common/xalloc.h"
#include "controller/sandbox_names.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/obj.h"
#include "kube/res.h"
#include "kube/sbd_client.h"

struct idle_ctrl {
    struct idle_ctrl_opts o;
    pthread_mutex_t lock;
    struct map *busy; /* Sandbox UID -> usec_t *: wall time sandboxd last said busy */
    struct idle_ctrl_stats st;
    struct metric *suspends, *probes;
};

struct idle_ctrl *idle_ctrl_new(const struct idle_ctrl_opts *opts)
{
    static const char *const result_label[] = {"result", NULL};
    struct idle_ctrl *c = XNEW(struct idle_ctrl);
    c->o = *opts;
    if (!c->o.probe_port)
        c->o.probe_port = LIMIT_IDLE_PROBE_PORT;
    if (!c->o.probe_timeout)
        c->o.probe_timeout = LIMIT_IDLE_PROBE_TIMEOUT;
    if (!c->o.probe)
        c->o.probe = idle_probe_http;
    (void)pthread_mutex_init(&c->lock, NULL);
    c->busy = map_new(xfree);
    if (opts->metrics) {
        c->suspends = metrics_counter(opts->metrics, "agent_sandbox_idle_suspends_total",
                                      "Sandboxes suspended by their idle policy.", NULL);
        c->probes = metrics_counter(opts->metrics, "agent_sandbox_idle_probes_total",
                                    "sandboxd activity probes before an idle suspension, by "
                                    "result (idle, busy, recent, error).",
                                    result_label);
    }
    return c;
}

void idle_ctrl_free(struct idle_ctrl *c)
{
    if (!c)
        return;
    map_free(c->busy);
    (void)pthread_mutex_destroy(&c->lock);
    xfree(c);
}

void idle_ctrl_stats(struct idle_ctrl *c, struct idle_ctrl_stats *ret)
{
    (void)pthread_mutex_lock(&c->lock);
    *ret = c->st;
    (void)pthread_mutex_unlock(&c->lock);
}

static void count(struct idle_ctrl *c, uint64_t *field, const char *probe_result)
{
    (void)pthread_mutex_lock(&c->lock);
    (*field)++;
    (void)pthread_mutex_unlock(&c->lock);
    if (probe_result && c->probes)
        metric_inc(c->probes, (const char *const[]){probe_result});
}

static usec_t busy_get(struct idle_ctrl *c, const char *uid)
{
    (void)pthread_mutex_lock(&c->lock);
    usec_t *t = uid ? map_get(c->busy, uid) : NULL;
    usec_t v = t ? *t : 0;
    (void)pthread_mutex_unlock(&c->lock);
    return v;
}

/* Remembers (when > 0) or forgets (0) the last busy time of uid. */
static void busy_set(struct idle_ctrl *c, const char *uid, usec_t when)
{
    if (!uid)
        return;
    (void)pthread_mutex_lock(&c->lock);
    if (!when) {
        xfree(map_remove(c->busy, uid));
    } else {
        /* Bounded: past the limit start over; at worst a sandbox whose process just
         * ended is judged by its other activity. */
        if (map_len(c->busy) >= LIMIT_IDLE_BUSY_ENTRIES)
            map_clear(c->busy);
        usec_t *v = xmalloc(sizeof(*v));
        *v = when;
        (void)map_put(c->busy, uid, v, NULL);
    }
    (void)pthread_mutex_unlock(&c->lock);
}

void idle_ctrl_forget(struct idle_ctrl *c, const char *uid)
{
    busy_set(c, uid, 0);
}

static void lower(usec_t *requeue_after, usec_t wait)
{
    if (!wait)
        wait = 1;
    if (!*requeue_after || wait < *requeue_after)
        *requeue_after = wait;
}

/* The wait after a suspend PATCH that failed with e: a conflict (a concurrent change:
 * a resume, fresh activity) is decided again soon; anything else (a refusal by RBAC or
 * an admission policy, a server error) as a failed probe is, not every second with a
 * probe each time. */
static usec_t suspend_retry(const struct idle_policy *pol, const struct kube_err *e)
{
    if (kube_err_is_conflict(e))
        return LIMIT_IDLE_RETRY;
    return pol->timeout < LIMIT_IDLE_PROBE_RETRY ? pol->timeout : LIMIT_IDLE_PROBE_RETRY;
}

/* Returns 1 when suspended, else 0 with *wait set (suspend_retry). */
static int suspend(struct idle_ctrl *c, const json_t *sb, const struct idle_policy *pol,
                   usec_t *wait)
{
    json_t *patch = idle_suspend_patch(sb);
    struct kube_err e;
    int r = kube_patch(c->o.client, &API_RES_SANDBOXES, kube_obj_namespace(sb), kube_obj_name(sb),
                       KUBE_PATCH_MERGE, patch, NULL, &e);
    json_decref(patch);
    if (r < 0) {
        bool conflict = kube_err_is_conflict(&e);
        count(c, conflict ? &c->st.conflicts : &c->st.suspend_errors, NULL);
        if (conflict)
            log_debug("idle suspend conflicted, deciding again\tkey=%s/%s", kube_obj_namespace(sb),
                      kube_obj_name(sb));
        else
            log_warn("idle suspend refused, will retry\tkey=%s/%s status=%ld detail=\"%s\"",
                     kube_obj_namespace(sb), kube_obj_name(sb), e.http_status, e.message);
        *wait = suspend_retry(pol, &e);
        return 0;
    }
    count(c, &c->st.suspends, NULL);
    if (c->suspends)
        metric_inc(c->suspends, NULL);
    busy_set(c, kube_obj_uid(sb), 0);
    log_info("suspended idle sandbox\tkey=%s/%s timeout_s=%llu", kube_obj_namespace(sb),
             kube_obj_name(sb), (unsigned long long)(pol->timeout / USEC_PER_SEC));
    if (c->o.events)
        events_record(c->o.events, sb, EVENTS_NORMAL, SB_R_IDLE_TIMEOUT,
                      "No activity for %llus: suspended by the idle policy",
                      (unsigned long long)(pol->timeout / USEC_PER_SEC));
    return 1;
}

/* The probe step. Returns the action and sets *wait for IDLE_WAIT. */
static enum idle_action probe(struct idle_ctrl *c, const json_t *sb, const json_t *status,
                              const struct idle_policy *pol, usec_t since, usec_t *wait)
{
    const char *ip = json_string_value(json_array_get(json_object_get(status, "podIPs"), 0));
    struct idle_probe pr;
    int r = ip ? c->o.probe(c->o.probe_ctx, ip, c->o.probe_port, c->o.probe_timeout, &pr)
               : -EADDRNOTAVAIL;
    count(c, &c->st.probes, NULL);
    if (r < 0) {
        /* Busy or not cannot be told: never suspend on a guess. */
        count(c, &c->st.probe_errors, "error");
        log_debug_errno(r, "idle probe failed\tkey=%s/%s ip=%s", kube_obj_namespace(sb),
                        kube_obj_name(sb), ip ? ip : "");
        *wait = pol->timeout < LIMIT_IDLE_PROBE_RETRY ? pol->timeout : LIMIT_IDLE_PROBE_RETRY;
        return IDLE_WAIT;
    }
    usec_t now = clock_wall_now();
    enum idle_action a = idle_after_probe(pol, since, &pr, now, wait);
    if (pr.running_processes > 0) {
        count(c, &c->st.probe_busy, "busy");
        busy_set(c, kube_obj_uid(sb), now);
    } else if (c->probes) {
        metric_inc(c->probes, (const char *const[]){a == IDLE_SUSPEND ? "idle" : "recent"});
    }
    return a;
}

int idle_ctrl_check(struct idle_ctrl *c, const json_t *sb, const json_t *status, usec_t stale,
                    usec_t *requeue_after)
{
    struct idle_policy pol;
    usec_t wait = 0, extra = busy_get(c, kube_obj_uid(sb));
    enum idle_action a = idle_decide(sb, status, extra, clock_wall_now(), &wait);
    if (a == IDLE_SKIP)
        return 0;
    if (idle_policy_get(sb, &pol) < 0)
        return 0;
    if (a == IDLE_PROBE && stale) {
        /* the suspend PATCH would name an old resourceVersion: a 409 for sure */
        lower(requeue_after, stale);
        return 0;
    }
    if (a == IDLE_PROBE)
        a = probe(c, sb, status, &pol, idle_last_activity(sb, status, extra), &wait);
    if (a == IDLE_SUSPEND && suspend(c, sb, &pol, &wait) > 0)
        return 1;
    lower(requeue_after, wait);
    return 0;
}

/* ---- The HTTP probe -------------------------------------------------------------------- */

int idle_probe_http(void *ctx, const char *ip, uint16_t port, usec_t timeout,
                    struct idle_probe *ret)
{
    char base[128];
    struct sbd_client_opts o = {
        .base = base, .no_proxy = true, .http_only = true, .timeout = timeout};
    struct sbd_client_req req = {.path = "/v1/activity"};
    struct sbd_client *c = NULL;
    struct buf body;
    long code = 0;
    int r = sbd_client_base_url("http", ip, port, base, sizeof(base));
    (void)ctx;
    if (r < 0)
        return -EINVAL;
    r = sbd_client_new(&o, &c);
    if (r < 0)
        return r;
    buf_init(&body, LIMIT_IDLE_PROBE_BODY);
    r = sbd_client_call(c, &req, &body, &code, NULL, 0);
    if (r >= 0)
        r = code == 200
                ? idle_probe_parse(body.data ? body.data : "", body.len, clock_wall_now(), ret)
                : -EIO;
    buf_done(&body);
    sbd_client_free(c);
    return r;
}
