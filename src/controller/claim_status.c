/* SPDX-License-Identifier: Apache-2.0 */
/* Claim Ready/Finished conditions, status.sandbox and lifecycle deadlines. */
#include "controller/claim_status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/str.h"
#include "controller/ext_names.h"
#include "controller/sandbox_status.h"
#include "kube/obj.h"

struct ready {
    const char *status, *reason, *message;
};

static bool sb_ready_true(const json_t *sb)
{
    return sb && kube_obj_condition_true(sb, SB_COND_READY);
}

/* Copies the Sandbox's Ready condition, or says why there is none. */
static void ready_from_sandbox(const struct claim_observed *o, struct ready *r)
{
    const json_t *c = kube_obj_condition(o->sb, SB_COND_READY);
    const char *reason = json_string_value(json_object_get(c, "reason"));
    if (reason && strcmp(reason, SB_R_EXPIRED) == 0) {
        *r = (struct ready){"False", SB_R_EXPIRED,
                            "Underlying Sandbox resource has expired independently of the Claim."};
    } else if (c) {
        const char *s = json_string_value(json_object_get(c, "status"));
        const char *m = json_string_value(json_object_get(c, "message"));
        *r = (struct ready){s ? s : "Unknown", reason ? reason : SB_R_DEPS_NOT_READY, m ? m : ""};
    } else {
        *r = (struct ready){"False", EXT_R_SANDBOX_NOT_READY, "Sandbox is not ready"};
    }
}

static void ready_of(const struct claim_observed *o, struct ready *r, char *msg, size_t size)
{
    if (o->err_reason) {
        *r = (struct ready){"False", o->err_reason, o->err_message ? o->err_message : ""};
        if (!o->timed_out)
            return;
    } else if (o->expired) {
        *r = (struct ready){"False", EXT_R_CLAIM_EXPIRED,
                            "Claim expired. Sandbox cleanup initiated."};
        return;
    } else if (o->sb && kube_obj_deleting(o->sb)) {
        /* Ready=True may stay on a Sandbox being deleted (its finalizers, a foreground
         * deletion): the claim does not mirror it. */
        *r = (struct ready){"False", EXT_R_SANDBOX_NOT_READY, "Sandbox is being deleted"};
    } else if (sb_ready_true(o->sb)) {
        ready_from_sandbox(o, r);
        return;
    } else if (o->sb) {
        ready_from_sandbox(o, r);
    } else {
        *r = (struct ready){"False", EXT_R_SANDBOX_MISSING, "Sandbox does not exist"};
    }
    if (o->timed_out) {
        (void)snprintf(msg, size, "Claim was not Ready in time; last state: %s: %s", r->reason,
                       r->message);
        *r = (struct ready){"False", EXT_R_CLAIM_TIMEOUT, msg};
    }
}

static int cond_cmp(const void *a, const void *b)
{
    const char *x = json_string_value(json_object_get(*(json_t *const *)a, "type"));
    const char *y = json_string_value(json_object_get(*(json_t *const *)b, "type"));
    return strcmp(x ? x : "", y ? y : "");
}

static void sort_conditions(json_t *status)
{
    json_t *conds = json_object_get(status, "conditions");
    size_t n = json_array_size(conds);
    json_t *v[16], *out;
    if (n < 2 || n > 16)
        return;
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(conds, i);
    qsort(v, n, sizeof(v[0]), cond_cmp);
    out = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append(out, v[i]);
    json_object_set_new(status, "conditions", out);
}

/* The claim's own Ready: its lastTransitionTime is when the claim's status flipped (now,
 * the time of this status write), never the Sandbox's; unchanged status keeps it. */
static void set_ready(json_t *st, const struct claim_observed *o, const char *now)
{
    char msg[LIMIT_CTRL_COND_MESSAGE];
    struct ready r;
    ready_of(o, &r, msg, sizeof(msg));
    sb_cond_set(st, SB_COND_READY, r.status, r.reason, r.message, kube_obj_generation(o->claim),
                now);
}

/* Finished mirrors the Sandbox's status, reason, message and transition time (as
 * upstream: ttlSecondsAfterFinished counts from when the Sandbox finished, not from when
 * this controller saw it), with the claim's own generation; a Sandbox condition without a
 * time gets now on a flip. */
static void set_finished(json_t *st, const struct claim_observed *o, const char *now)
{
    const json_t *f =
        o->sb ? sb_cond_get(json_object_get(o->sb, "status"), SB_COND_FINISHED) : NULL;
    const char *fs = json_string_value(json_object_get(f, "status"));
    const json_t *at = json_object_get(f, "lastTransitionTime");
    if (!o->sb && o->expired)
        return; /* a retained expired claim keeps it */
    if (!f || !fs) {
        sb_cond_remove(st, SB_COND_FINISHED);
        return;
    }
    sb_cond_set(st, SB_COND_FINISHED, fs, json_string_value(json_object_get(f, "reason")) ?: "",
                json_string_value(json_object_get(f, "message")), kube_obj_generation(o->claim),
                now);
    if (json_is_string(at))
        json_object_set((json_t *)sb_cond_get(st, SB_COND_FINISHED), "lastTransitionTime",
                        (json_t *)at);
}

json_t *claim_status_build(const struct claim_observed *o, const char *now)
{
    const json_t *cur = json_object_get(o->claim, "status");
    json_t *st = json_is_object(cur) ? json_deep_copy(cur) : json_object();
    set_ready(st, o, now);
    set_finished(st, o, now);
    if (o->sb) {
        const json_t *ips = kube_obj_path(o->sb, "status.podIPs");
        json_t *sbs = json_pack("{s:s}", "name", kube_obj_name(o->sb) ?: "");
        if (json_array_size(ips))
            json_object_set_new(sbs, "podIPs", json_deep_copy(ips));
        json_object_set_new(st, "sandbox", sbs);
    } else if (!o->sb_keep) {
        json_object_del(st, "sandbox");
    }
    sort_conditions(st);
    return st;
}

bool claim_status_changed(const json_t *old_status, const json_t *new_status)
{
    json_t *a = old_status ? json_deep_copy(old_status) : json_object();
    bool changed;
    sort_conditions(a);
    changed = !json_equal(a, new_status ? new_status : json_object());
    json_decref(a);
    return changed;
}

bool claim_ready(const json_t *claim)
{
    return kube_obj_condition_true(claim, SB_COND_READY);
}

bool claim_ready_before(const json_t *claim, usec_t slack)
{
    const json_t *c = kube_obj_condition(claim, SB_COND_READY);
    const char *s = json_string_value(json_object_get(c, "status"));
    const char *t = json_string_value(json_object_get(c, "lastTransitionTime"));
    const char *ct = kube_obj_path_str(claim, "metadata.creationTimestamp");
    usec_t at, created;
    if (!s || strcmp(s, "True") == 0 || !t || !ct || clock_parse_rfc3339(t, &at) < 0 ||
        clock_parse_rfc3339(ct, &created) < 0)
        return false;
    return at > created && at - created > slack;
}

static int finished_at(const json_t *claim, usec_t *ret)
{
    const json_t *f = kube_obj_condition(claim, SB_COND_FINISHED);
    const char *s = json_string_value(json_object_get(f, "status"));
    const char *t = json_string_value(json_object_get(f, "lastTransitionTime"));
    if (!s || strcmp(s, "True") != 0 || !t || clock_parse_rfc3339(t, ret) < 0)
        return -ENOENT;
    return 0;
}

int claim_expire_at(const json_t *claim, usec_t *ret)
{
    const json_t *lc = kube_obj_path(claim, "spec.lifecycle");
    const char *st = json_string_value(json_object_get(lc, "shutdownTime"));
    const json_t *ttl = json_object_get(lc, "ttlSecondsAfterFinished");
    usec_t best = 0, t;
    if (st && clock_parse_rfc3339(st, &t) >= 0)
        best = t;
    if (json_is_integer(ttl) && json_integer_value(ttl) >= 0 && finished_at(claim, &t) >= 0) {
        /* capped (at about 292,000 years) so that a huge value cannot wrap to the past */
        json_int_t secs = json_integer_value(ttl);
        usec_t d = (uint64_t)secs > (USEC_INFINITY - t) / USEC_PER_SEC
                       ? USEC_INFINITY - t
                       : (usec_t)secs * USEC_PER_SEC;
        t += d;
        if (!best || t < best)
            best = t;
    }
    if (!best)
        return -ENOENT;
    *ret = best;
    return 0;
}

int claim_deadline(const json_t *claim, usec_t dflt, usec_t *ret)
{
    const char *a = kube_obj_annotation(claim, EXT_ANN_CLAIM_TIMEOUT);
    const char *ct = kube_obj_path_str(claim, "metadata.creationTimestamp");
    uint64_t secs;
    usec_t created, timeout = dflt;
    if (a && cstr_to_u64(a, &secs) >= 0 && secs > 0 && secs < 10ull * 365 * 86400)
        timeout = secs * USEC_PER_SEC;
    if (!timeout || !ct || clock_parse_rfc3339(ct, &created) < 0)
        return -ENOENT;
    *ret = created + timeout;
    return 0;
}
