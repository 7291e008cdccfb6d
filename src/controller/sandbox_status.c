/* SPDX-License-Identifier: Apache-2.0 */
/* Sandbox status and condition computation. */
#include "controller/sandbox_status.h"

#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/limits.h"
#include "controller/sandbox_names.h"
#include "kube/obj.h"

static json_t *conds_of(json_t *status)
{
    json_t *c = json_object_get(status, "conditions");
    if (!json_is_array(c)) {
        c = json_array();
        json_object_set_new(status, "conditions", c);
    }
    return c;
}

const json_t *sb_cond_get(const json_t *status, const char *type)
{
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(status, "conditions"), i, c)
    {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && strcmp(t, type) == 0)
            return c;
    }
    return NULL;
}

const char *sb_cond_reason(const json_t *status, const char *type)
{
    return json_string_value(json_object_get(sb_cond_get(status, type), "reason"));
}

void sb_cond_set(json_t *status, const char *type, const char *cstatus, const char *reason,
                 const char *message, int64_t generation, const char *now)
{
    json_t *conds = conds_of(status);
    json_t *c = (json_t *)sb_cond_get(status, type);
    if (!c) {
        c = json_pack("{s:s}", "type", type);
        json_array_append_new(conds, c);
    }
    const char *old = json_string_value(json_object_get(c, "status"));
    if (!old || strcmp(old, cstatus) != 0 || !json_object_get(c, "lastTransitionTime"))
        json_object_set_new(c, "lastTransitionTime", json_string(now));
    json_object_set_new(c, "status", json_string(cstatus));
    json_object_set_new(c, "reason", json_string(reason));
    json_object_set_new(c, "message", json_string(message ? message : ""));
    json_object_set_new(c, "observedGeneration", json_integer(generation));
}

void sb_cond_remove(json_t *status, const char *type)
{
    json_t *conds = json_object_get(status, "conditions");
    for (size_t i = 0; i < json_array_size(conds); i++) {
        const char *t = json_string_value(json_object_get(json_array_get(conds, i), "type"));
        if (t && strcmp(t, type) == 0) {
            json_array_remove(conds, i);
            return;
        }
    }
}

json_t *sb_pod_ips(const json_t *pod)
{
    json_t *out = json_array();
    size_t i;
    const json_t *ip;
    json_array_foreach(kube_obj_path(pod, "status.podIPs"), i, ip)
    {
        const char *s = json_string_value(json_object_get(ip, "ip"));
        if (s && *s)
            json_array_append_new(out, json_string(s));
    }
    const char *one = kube_obj_path_str(pod, "status.podIP");
    if (json_array_size(out) == 0 && one && *one)
        json_array_append_new(out, json_string(one));
    return out;
}

static const char *mode_of(const json_t *sb)
{
    const char *m = kube_obj_path_str(sb, "spec.operatingMode");
    return m ? m : SB_MODE_RUNNING;
}

static bool suspended(const json_t *sb)
{
    return strcmp(mode_of(sb), SB_MODE_SUSPENDED) == 0;
}

static const char *phase_of(const json_t *pod)
{
    const char *p = kube_obj_path_str(pod, "status.phase");
    return p && *p ? p : "Pending";
}

/* field ("status", "reason") of the Sandbox's Suspended condition as last written, or
 * NULL. */
static const char *last_suspended(const json_t *sb, const char *field)
{
    const json_t *c = sb_cond_get(json_object_get(sb, "status"), SB_COND_SUSPENDED);
    return json_string_value(json_object_get(c, field));
}

/* After a resume, the Pod that the suspend deleted is still on its way out: the last
 * Suspended was written by a pass of the suspend (any reason but NotSuspended). */
static bool resume_waits(const struct sb_observed *o)
{
    const char *r = last_suspended(o->sb, "reason");
    return o->pod && o->pod_going && r && strcmp(r, SB_R_NOT_SUSPENDED) != 0;
}

static void cond_suspended(const struct sb_observed *o, json_t *st, int64_t g, const char *now)
{
    const char *s = "False", *r = SB_R_NOT_SUSPENDED, *m = "Sandbox is not suspended";
    if (!suspended(o->sb)) {
        /* stays present and False after a resume: never a stale True. Its reason stays
         * PodTerminating while the suspended Pod goes, so that the Pod step does not take
         * its going for a lost Pod (sandbox_pod.c, pod_was_lost). */
        if (resume_waits(o)) {
            r = SB_R_POD_TERMINATING;
            m = "Sandbox is resuming; the Pod of its suspend is still terminating";
        }
    } else if (o->pod_unowned) {
        r = SB_R_POD_NOT_OWNED;
        m = "Refused to delete pod because it is not owned by this sandbox";
    } else if (!o->pod && o->pod_error) {
        s = "Unknown";
        r = SB_R_POD_STATE_UNKNOWN;
        m = "Pod state is unknown. Sandbox suspension cannot be confirmed";
    } else if (!o->pod) {
        s = "True";
        r = SB_R_POD_TERMINATED;
        m = "Pod has been terminated. Sandbox is suspended";
    } else if (o->pod_delete_failed) {
        r = SB_R_POD_DELETE_FAILED;
        m = "Pod could not be deleted. Sandbox suspension will be retried";
    } else {
        r = SB_R_POD_TERMINATING;
        m = "Pod is terminating. Sandbox is suspending";
    }
    sb_cond_set(st, SB_COND_SUSPENDED, s, r, m, g, now);
}

static void cond_finished(const struct sb_observed *o, json_t *st, int64_t g, const char *now)
{
    const char *p = o->pod ? phase_of(o->pod) : "";
    if (strcmp(p, "Succeeded") == 0)
        sb_cond_set(st, SB_COND_FINISHED, "True", SB_R_POD_SUCCEEDED, "Pod completed successfully",
                    g, now);
    else if (strcmp(p, "Failed") == 0)
        sb_cond_set(st, SB_COND_FINISHED, "True", SB_R_POD_FAILED, "Pod failed", g, now);
    else
        sb_cond_remove(st, SB_COND_FINISHED);
}

static void cond_scheduled(const struct sb_observed *o, json_t *st, int64_t g, const char *now)
{
    const json_t *pc;
    if (!o->pod && o->pod_error) {
        sb_cond_set(st, SB_COND_POD_SCHEDULED, "Unknown", SB_R_SCHED_UNKNOWN,
                    "Pod state is unknown. Pod scheduling cannot be determined", g, now);
        return;
    }
    if (!o->pod) {
        sb_cond_remove(st, SB_COND_POD_SCHEDULED);
        return;
    }
    pc = kube_obj_condition(o->pod, SB_COND_POD_SCHEDULED);
    if (!pc) {
        sb_cond_set(st, SB_COND_POD_SCHEDULED, "Unknown", SB_R_SCHED_UNKNOWN,
                    "Pod has not reported a PodScheduled condition yet", g, now);
        return;
    }
    const char *s = json_string_value(json_object_get(pc, "status"));
    const char *r = json_string_value(json_object_get(pc, "reason"));
    if (!s || (strcmp(s, "True") != 0 && strcmp(s, "False") != 0))
        s = "Unknown";
    if (!r || !*r)
        r = strcmp(s, "True") == 0 ? SB_R_POD_SCHEDULED : SB_R_SCHED_UNKNOWN;
    sb_cond_set(st, SB_COND_POD_SCHEDULED, s, r, json_string_value(json_object_get(pc, "message")),
                g, now);
}

/* Row 6 of the Ready table: dependencies. Writes the message into msg. */
static bool deps_ready(const struct sb_observed *o, const json_t *ips, char *msg, size_t size)
{
    const json_t *svc_flag = kube_obj_path(o->sb, "spec.service");
    bool pod_ready = false, svc_required, svc_ready = o->svc_exists;
    char pod_msg[160];
    if (!o->pod) {
        (void)snprintf(pod_msg, sizeof(pod_msg), "Pod does not exist");
    } else if (kube_obj_deleting(o->pod) || resume_waits(o)) {
        /* A Pod on its way out is never Ready, whatever its last status says: also the
         * suspend's Pod that a resume's pass sees in a cache yet to show its deletion. */
        (void)snprintf(pod_msg, sizeof(pod_msg), "Pod is terminating");
    } else if (kube_obj_condition_true(o->pod, SB_COND_READY)) {
        pod_ready = json_array_size(ips) > 0;
        (void)snprintf(pod_msg, sizeof(pod_msg), "%s",
                       pod_ready ? "Pod is Ready" : "Pod is Ready but has no podIPs yet");
    } else if (strcmp(phase_of(o->pod), "Running") == 0) {
        (void)snprintf(pod_msg, sizeof(pod_msg), "Pod is Running but not Ready");
    } else {
        (void)snprintf(pod_msg, sizeof(pod_msg), "Pod exists with phase: %.64s", phase_of(o->pod));
    }
    svc_required = json_is_boolean(svc_flag) ? json_is_true(svc_flag) : o->svc_exists;
    (void)snprintf(msg, size, "%s%s%s",
                   o->pod_recreated ? "Pod was lost and has been recreated; " : "", pod_msg,
                   !svc_required   ? ""
                   : o->svc_exists ? "; Service Exists"
                                   : "; Service does not exist");
    return pod_ready && (!svc_required || svc_ready);
}

static void cond_ready(const struct sb_observed *o, json_t *st, int64_t g, const char *now)
{
    char msg[LIMIT_CTRL_COND_MESSAGE];
    const char *p = o->pod ? phase_of(o->pod) : "";
    json_t *ips = json_object_get(st, "podIPs");
    if (o->multiple_pods) {
        sb_cond_set(st, SB_COND_READY, "False", SB_R_MULTIPLE_PODS, o->multiple_pods, g, now);
    } else if (o->errors) {
        (void)snprintf(msg, sizeof(msg), "Error seen: %s", o->errors);
        sb_cond_set(st, SB_COND_READY, "False", SB_R_RECONCILER_ERROR, msg, g, now);
    } else if (suspended(o->sb)) {
        sb_cond_set(st, SB_COND_READY, "False", SB_R_SUSPENDED,
                    o->pod ? "Sandbox is suspending" : "Sandbox is suspended", g, now);
    } else if (strcmp(p, "Succeeded") == 0) {
        sb_cond_set(st, SB_COND_READY, "False", SB_R_POD_SUCCEEDED, "Pod completed successfully", g,
                    now);
    } else if (strcmp(p, "Failed") == 0) {
        sb_cond_set(st, SB_COND_READY, "False", SB_R_POD_FAILED, "Pod failed", g, now);
    } else {
        bool ok = deps_ready(o, ips, msg, sizeof(msg));
        sb_cond_set(st, SB_COND_READY, ok ? "True" : "False",
                    ok ? SB_R_DEPS_READY : SB_R_DEPS_NOT_READY, msg, g, now);
    }
}

static void status_fields(const struct sb_observed *o, json_t *st)
{
    char hash[SB_HASH_LEN + 1], sel[64], fqdn[512];
    const char *node = o->pod ? kube_obj_path_str(o->pod, "spec.nodeName") : NULL;
    json_t *ips = o->pod ? sb_pod_ips(o->pod) : NULL;
    if (json_array_size(ips) > 0)
        json_object_set(st, "podIPs", ips);
    else
        json_object_del(st, "podIPs");
    json_decref(ips);
    if (node && *node)
        json_object_set_new(st, "nodeName", json_string(node));
    else
        json_object_del(st, "nodeName");
    if (o->pod || o->pod_unowned) {
        sb_name_hash(kube_obj_name(o->sb), hash);
        (void)snprintf(sel, sizeof(sel), "%s=%s", SB_LABEL_NAME_HASH, hash);
        json_object_set_new(st, "selector", json_string(sel));
    }
    if (o->multiple_pods) {
        /* the Service step did not run (sandbox_reconcile.c): while the conflict lasts,
         * the Service and its fields stay as they were */
    } else if (o->svc_name) {
        (void)snprintf(fqdn, sizeof(fqdn), "%s.%s.svc.%s", o->svc_name, kube_obj_namespace(o->sb),
                       o->cluster_domain ? o->cluster_domain : "cluster.local");
        json_object_set_new(st, "service", json_string(o->svc_name));
        json_object_set_new(st, "serviceFQDN", json_string(fqdn));
    } else {
        json_object_del(st, "service");
        json_object_del(st, "serviceFQDN");
    }
}

/* True when the suspend was confirmed (Suspended=True written) and the Pod step still
 * found an owned Pod, made before that (nothing makes one in Suspended mode), whose
 * delete was not refused: the Pod the suspend deleted, seen late by the cache (its watch
 * event after the pass that no longer saw it). */
static bool stale_pod(const struct sb_observed *o)
{
    const char *s = last_suspended(o->sb, "status");
    const char *at = last_suspended(o->sb, "lastTransitionTime");
    const char *born = kube_obj_path_str(o->pod, "metadata.creationTimestamp");
    usec_t t_at, t_born;
    if (!suspended(o->sb) || !o->pod || o->pod_unowned || o->pod_error || o->pod_delete_failed ||
        !s || strcmp(s, "True") != 0)
        return false;
    return !at || !born || clock_parse_rfc3339(at, &t_at) < 0 ||
           clock_parse_rfc3339(born, &t_born) < 0 || t_born <= t_at;
}

json_t *sb_status_build(const struct sb_observed *obs, const char *now)
{
    const json_t *old = json_object_get(obs->sb, "status");
    json_t *st = json_is_object(old) ? json_deep_copy(old) : json_object();
    int64_t g = kube_obj_generation(obs->sb);
    struct sb_observed o = *obs;
    if (stale_pod(&o))
        o.pod = NULL; /* Suspended stays True: never True, False, True for one suspend */
    status_fields(&o, st);
    cond_suspended(&o, st, g, now);
    cond_finished(&o, st, g, now);
    cond_scheduled(&o, st, g, now);
    cond_ready(&o, st, g, now);
    return st;
}

void sb_status_expire(json_t *status, bool reset, int64_t generation, const char *now)
{
    if (reset) {
        json_t *conds = json_incref(json_object_get(status, "conditions"));
        json_object_clear(status);
        if (conds)
            json_object_set_new(status, "conditions", conds);
    }
    sb_cond_remove(status, SB_COND_POD_SCHEDULED);
    sb_cond_set(status, SB_COND_READY, "False", SB_R_EXPIRED, "Sandbox has expired", generation,
                now);
}

bool sb_status_changed(const json_t *old_status, const json_t *new_status)
{
    json_t *a = old_status ? json_deep_copy(old_status) : json_object();
    json_t *b = new_status ? json_deep_copy(new_status) : json_object();
    bool changed = !json_equal(a, b);
    if (changed) {
        const json_t *ready = sb_cond_get(b, SB_COND_READY);
        const char *rs = json_string_value(json_object_get(ready, "status"));
        json_object_del(a, "nodeName");
        json_object_del(b, "nodeName");
        if (json_equal(a, b) && !(rs && strcmp(rs, "True") == 0))
            changed = false;
    }
    json_decref(a);
    json_decref(b);
    return changed;
}

/* "status/reason" of condition type, with dflt for an absent condition. */
static void headline_of(const json_t *status, const char *type, const char *dflt, char *out,
                        size_t size)
{
    const json_t *c = sb_cond_get(status, type);
    const char *s = json_string_value(json_object_get(c, "status"));
    const char *r = json_string_value(json_object_get(c, "reason"));
    if (!c)
        (void)snprintf(out, size, "%s", dflt);
    else
        (void)snprintf(out, size, "%.32s/%.96s", s ? s : "", r ? r : "");
}

/* True when the user-visible state (Ready, Suspended, Finished) of a and b differs. No
 * status yet reads as "not Ready, dependencies not ready, not suspended". */
static bool headline_differs(const json_t *a, const json_t *b)
{
    static const struct {
        const char *type, *dflt;
    } keys[] = {
        {SB_COND_READY, "False/" SB_R_DEPS_NOT_READY},
        {SB_COND_SUSPENDED, "False/" SB_R_NOT_SUSPENDED},
        {SB_COND_FINISHED, "-"},
    };
    char x[160], y[160];
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        headline_of(a, keys[i].type, keys[i].dflt, x, sizeof(x));
        headline_of(b, keys[i].type, keys[i].dflt, y, sizeof(y));
        if (strcmp(x, y) != 0)
            return true;
    }
    return false;
}

enum sb_status_change sb_status_diff(const json_t *old_status, const json_t *new_status)
{
    const char *rs;
    if (!sb_status_changed(old_status, new_status))
        return SB_STATUS_SAME;
    rs = json_string_value(json_object_get(sb_cond_get(new_status, SB_COND_READY), "status"));
    if ((rs && strcmp(rs, "True") == 0) || headline_differs(old_status, new_status))
        return SB_STATUS_HEADLINE;
    return SB_STATUS_DETAIL;
}

json_t *sb_status_body(const json_t *sb, json_t *st)
{
    json_t *body = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)sb, k, v)
    {
        if (strcmp(k, "spec") != 0 && strcmp(k, "status") != 0)
            (void)json_object_set(body, k, v);
    }
    (void)json_object_set(body, "status", st);
    return body;
}

bool sb_expired(const json_t *sb, usec_t deadline, usec_t now)
{
    const json_t *c = sb_cond_get(json_object_get(sb, "status"), SB_COND_READY);
    const char *reason = json_string_value(json_object_get(c, "reason"));
    if (!deadline)
        return false;
    if (now >= deadline)
        return true;
    return reason && strcmp(reason, SB_R_EXPIRED) == 0 &&
           json_integer_value(json_object_get(c, "observedGeneration")) == kube_obj_generation(sb);
}
