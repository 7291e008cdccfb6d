/* SPDX-License-Identifier: Apache-2.0 */
/* Idle auto-suspend decisions (see idle_policy.h). */
#include "controller/idle_policy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/str.h"
#include "controller/sandbox_names.h"
#include "kube/obj.h"

int idle_policy_get(const json_t *sb, struct idle_policy *ret)
{
    const json_t *p = kube_obj_path(sb, "spec.idlePolicy");
    const json_t *t = json_object_get(p, "timeoutSeconds");
    const json_t *r = json_object_get(p, "resumeOnTraffic");
    if (!p || json_is_null(p)) {
        *ret = (struct idle_policy){.set = false, .resume_on_traffic = true};
        return 0;
    }
    if (!json_is_object(p) || !json_is_integer(t) || json_integer_value(t) < 1 ||
        json_integer_value(t) > 31536000 || (r && !json_is_boolean(r) && !json_is_null(r)))
        return -EINVAL;
    *ret = (struct idle_policy){
        .set = true,
        .timeout = (usec_t)json_integer_value(t) * USEC_PER_SEC,
        .resume_on_traffic = !json_is_false(r),
    };
    return 0;
}

static usec_t parse_time(const char *s)
{
    usec_t t;
    return s && clock_parse_rfc3339(s, &t) == 0 ? t : 0;
}

static usec_t max_u(usec_t a, usec_t b)
{
    return a > b ? a : b;
}

static const json_t *cond_of(const json_t *status, const char *type)
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

static bool ready_true(const json_t *status)
{
    const char *s = json_string_value(json_object_get(cond_of(status, SB_COND_READY), "status"));
    return s && strcmp(s, "True") == 0;
}

usec_t idle_last_activity(const json_t *sb, const json_t *status, usec_t extra)
{
    const json_t *st = status ? status : json_object_get(sb, "status");
    const json_t *ready = cond_of(st, SB_COND_READY);
    usec_t t = parse_time(kube_obj_path_str(sb, "metadata.creationTimestamp"));
    t = max_u(t, parse_time(kube_obj_annotation(sb, SB_ANN_LAST_ACTIVITY)));
    if (ready_true(st))
        t = max_u(t, parse_time(json_string_value(json_object_get(ready, "lastTransitionTime"))));
    return max_u(t, extra);
}

static bool eligible(const json_t *sb, const json_t *status)
{
    const char *mode = kube_obj_path_str(sb, "spec.operatingMode");
    if (mode && strcmp(mode, SB_MODE_RUNNING) != 0)
        return false;
    /* An unclaimed warm-pool member is idle by design. */
    if (kube_obj_label(sb, SB_LABEL_WARM_POOL) || kube_obj_deleting(sb))
        return false;
    return ready_true(status ? status : json_object_get(sb, "status"));
}

enum idle_action idle_decide(const json_t *sb, const json_t *status, usec_t extra, usec_t now_wall,
                             usec_t *ret_wait)
{
    struct idle_policy pol;
    if (idle_policy_get(sb, &pol) < 0 || !pol.set || !eligible(sb, status))
        return IDLE_SKIP;
    usec_t due = idle_last_activity(sb, status, extra) + pol.timeout;
    if (now_wall < due) {
        *ret_wait = due - now_wall;
        return IDLE_WAIT;
    }
    return IDLE_PROBE;
}

int idle_probe_parse(const char *body, size_t len, usec_t now_wall, struct idle_probe *ret)
{
    json_t *j = json_loadb(body, len, 0, NULL);
    const json_t *n = json_object_get(j, "running_processes");
    const json_t *idle = json_object_get(j, "idle_seconds");
    usec_t last = parse_time(json_string_value(json_object_get(j, "last_activity")));
    int r = -EINVAL;
    /* idle_seconds is measured on sandboxd's monotonic clock: the node's wall clock (the
     * last_activity stamp) may be off from ours by more than a short timeout */
    if (json_is_number(idle) && json_number_value(idle) >= 0 && json_number_value(idle) < 1e9) {
        usec_t ago = (usec_t)(json_number_value(idle) * (double)USEC_PER_SEC);
        last = now_wall > ago ? now_wall - ago : 1;
    }
    if (json_is_integer(n) && json_integer_value(n) >= 0 && last) {
        *ret = (struct idle_probe){.running_processes = (size_t)json_integer_value(n),
                                   .last_activity = last};
        r = 0;
    }
    json_decref(j);
    return r;
}

enum idle_action idle_after_probe(const struct idle_policy *pol, usec_t since,
                                  const struct idle_probe *pr, usec_t now_wall, usec_t *ret_wait)
{
    if (pr->running_processes > 0) {
        usec_t half = pol->timeout / 2;
        *ret_wait = half > USEC_PER_SEC ? half : USEC_PER_SEC;
        return IDLE_WAIT;
    }
    usec_t due = max_u(since, pr->last_activity) + pol->timeout;
    if (now_wall < due) {
        *ret_wait = due - now_wall;
        return IDLE_WAIT;
    }
    return IDLE_SUSPEND;
}

json_t *idle_suspend_patch(const json_t *sb)
{
    char gen[32];
    const char *rv = kube_obj_resource_version(sb);
    /* The spec change bumps metadata.generation by exactly one. */
    (void)snprintf(gen, sizeof(gen), "%lld", (long long)kube_obj_generation(sb) + 1);
    return json_pack("{s:{s:s, s:{s:s}}, s:{s:s}}", "metadata", "resourceVersion", rv ? rv : "",
                     "annotations", SB_ANN_IDLE_SUSPENDED_GEN, gen, "spec", "operatingMode",
                     SB_MODE_SUSPENDED);
}

static bool idle_suspended(const json_t *sb)
{
    const char *mode = kube_obj_path_str(sb, "spec.operatingMode");
    const char *g = kube_obj_annotation(sb, SB_ANN_IDLE_SUSPENDED_GEN);
    int64_t gen;
    return mode && strcmp(mode, SB_MODE_SUSPENDED) == 0 && g && cstr_to_i64(g, &gen) == 0 &&
           gen == kube_obj_generation(sb);
}

void idle_status_adjust(const json_t *sb, json_t *status)
{
    json_t *c = (json_t *)cond_of(status, SB_COND_SUSPENDED);
    const char *s = json_string_value(json_object_get(c, "status"));
    struct idle_policy pol;
    char msg[256];
    if (!s || strcmp(s, "True") != 0 || !idle_suspended(sb) || idle_policy_get(sb, &pol) < 0)
        return;
    (void)snprintf(
        msg, sizeof(msg), "Sandbox was idle for %llus and was suspended by its idle policy%s",
        (unsigned long long)(pol.timeout / USEC_PER_SEC),
        pol.set && pol.resume_on_traffic ? "; traffic through the router resumes it" : "");
    json_object_set_new(c, "reason", json_string(SB_R_IDLE_TIMEOUT));
    json_object_set_new(c, "message", json_string(msg));
}
