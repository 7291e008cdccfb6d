/* SPDX-License-Identifier: Apache-2.0 */
/* Claim metadata validation, env and volume customisation, cold Sandboxes. */
#include "controller/claim_meta.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/limits.h"
#include "controller/ext_names.h"
#include "controller/template_build.h"
#include "kube/obj.h"

static int fail(struct claim_err *e, int code, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct claim_err *e, int code, const char *reason, const char *fmt, ...)
{
    va_list ap;
    if (e) {
        e->reason = reason;
        va_start(ap, fmt);
        (void)vsnprintf(e->message, sizeof(e->message), fmt, ap);
        va_end(ap);
    }
    return code;
}

static bool name_part(const char *s, size_t n)
{
    if (n == 0 || n > LIMIT_EXT_NAME_PART || !isalnum((unsigned char)s[0]) ||
        !isalnum((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

static bool dns_subdomain(const char *s, size_t n)
{
    if (n == 0 || n > LIMIT_EXT_PREFIX || !isalnum((unsigned char)s[0]) ||
        !isalnum((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-' ||
              s[i] == '.'))
            return false;
    return true;
}

bool claim_qualified_name(const char *key)
{
    const char *slash = strchr(key, '/');
    if (!slash)
        return name_part(key, strlen(key));
    return dns_subdomain(key, (size_t)(slash - key)) && name_part(slash + 1, strlen(slash + 1));
}

bool claim_label_value(const char *v)
{
    size_t n = strlen(v);
    return n == 0 || (n <= LIMIT_EXT_LABEL_VALUE && name_part(v, n));
}

/* True when domain d (length n) equals base or is a subdomain of it. */
static bool in_domain(const char *d, size_t n, const char *base)
{
    size_t bl = strlen(base);
    if (n == bl)
        return strncasecmp(d, base, n) == 0;
    return n > bl && d[n - bl - 1] == '.' && strncasecmp(d + n - bl, base, bl) == 0;
}

static int check_label(const char *k, const char *v, const struct claim_domains *d,
                       struct claim_err *e)
{
    const char *slash = strchr(k, '/');
    bool ok = false;
    if (!claim_qualified_name(k))
        return fail(e, -EINVAL, EXT_R_INVALID_METADATA, "label key %s is not a qualified name", k);
    if (strcasecmp(k, "app") == 0 && strcasecmp(v, EXT_ROUTER_APP) == 0)
        return fail(e, -EINVAL, EXT_R_INVALID_METADATA, "label app=%s is reserved", v);
    if (!slash)
        return fail(e, -EINVAL, EXT_R_INVALID_METADATA, "label %s needs a domain/ prefix", k);
    for (size_t i = 0; i < d->n && !ok; i++)
        ok = in_domain(k, (size_t)(slash - k), d->v[i]);
    if (!ok)
        return fail(e, -EINVAL, EXT_R_INVALID_METADATA, "label %s is outside the allowed domains",
                    k);
    if (!claim_label_value(v))
        return fail(e, -EINVAL, EXT_R_INVALID_METADATA, "label %s has an invalid value", k);
    return 0;
}

static int check_annotation(const char *k, struct claim_err *e)
{
    static const char *const blocked[] = {"kubernetes.io", "k8s.io", SB_GROUP};
    const char *slash = strchr(k, '/');
    if (!claim_qualified_name(k))
        return fail(e, -EINVAL, EXT_R_INVALID_METADATA, "annotation key %s is not a qualified name",
                    k);
    if (!slash || strcmp(k, SB_ANN_SAFE_TO_EVICT) == 0)
        return 0;
    for (size_t i = 0; i < sizeof(blocked) / sizeof(blocked[0]); i++)
        if (in_domain(k, (size_t)(slash - k), blocked[i]))
            return fail(e, -EINVAL, EXT_R_INVALID_METADATA, "annotation %s has a reserved prefix",
                        k);
    return 0;
}

int claim_meta_validate(const json_t *claim, const struct claim_domains *d,
                        struct claim_err *reterr)
{
    const json_t *apm = kube_obj_path(claim, "spec.additionalPodMetadata");
    const char *k;
    const json_t *v;
    int r;
    json_object_foreach((json_t *)json_object_get(apm, "labels"), k, v)
    {
        if (!json_is_string(v))
            return fail(reterr, -EINVAL, EXT_R_INVALID_METADATA, "label %s is not a string", k);
        if ((r = check_label(k, json_string_value(v), d, reterr)) < 0)
            return r;
    }
    json_object_foreach((json_t *)json_object_get(apm, "annotations"), k, v)
    {
        if ((r = check_annotation(k, reterr)) < 0)
            return r;
    }
    return 0;
}

static int merge_map(json_t *dst, const json_t *src, const char *what, struct claim_err *e)
{
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)src, k, v)
    {
        const json_t *old = json_object_get(dst, k);
        if (old && !json_equal(old, v))
            return fail(e, -EEXIST, SB_R_RECONCILER_ERROR,
                        "metadata override conflict: %s %s is set by the template", what, k);
        json_object_set(dst, k, (json_t *)v);
    }
    return 0;
}

int claim_meta_merge(json_t *meta, const json_t *add, struct claim_err *reterr)
{
    const json_t *l = json_object_get(add, "labels"), *a = json_object_get(add, "annotations");
    int r = 0;
    if (json_object_size(l))
        r = merge_map(ext_obj_ensure(meta, "labels"), l, "label", reterr);
    if (r >= 0 && json_object_size(a))
        r = merge_map(ext_obj_ensure(meta, "annotations"), a, "annotation", reterr);
    return r;
}

/* The container named name among containers and initContainers, or NULL. */
static json_t *find_container(json_t *spec, const char *name)
{
    static const char *const lists[] = {"containers", "initContainers"};
    size_t i;
    json_t *c;
    for (size_t l = 0; l < 2; l++)
        json_array_foreach(json_object_get(spec, lists[l]), i, c)
        {
            const char *n = json_string_value(json_object_get(c, "name"));
            if (n && strcmp(n, name) == 0)
                return c;
        }
    return NULL;
}

static int inject_one(json_t *c, const json_t *ev, bool overrides, struct claim_err *e)
{
    const char *name = json_string_value(json_object_get(ev, "name"));
    json_t *env = json_object_get(c, "env"), *x;
    /* valueFrom (a Secret or ConfigMap key) stays a reference: the kubelet reads it. */
    json_t *plain =
        json_pack("{s:s, s:O*, s:O*}", "name", name ? name : "", "value",
                  json_object_get(ev, "value"), "valueFrom", json_object_get(ev, "valueFrom"));
    size_t i;
    if (!overrides && json_array_size(json_object_get(c, "envFrom")) > 0) {
        json_decref(plain);
        return fail(e, -EPERM, EXT_R_ENV_REJECTED,
                    "container uses envFrom: overriding its values cannot be prevented");
    }
    if (!json_is_array(env)) {
        env = json_array();
        json_object_set_new(c, "env", env);
    }
    json_array_foreach(env, i, x)
    {
        const char *n = json_string_value(json_object_get(x, "name"));
        if (!n || !name || strcmp(n, name) != 0)
            continue;
        if (!overrides) {
            json_decref(plain);
            return fail(e, -EPERM, EXT_R_ENV_REJECTED,
                        "env %s is set by the template: override is not allowed", name);
        }
        json_array_set_new(env, i, plain);
        return 0;
    }
    json_array_append_new(env, plain);
    return 0;
}

int claim_env_inject(json_t *pod_spec, const json_t *env, const char *policy,
                     struct claim_err *reterr)
{
    bool allowed = policy && strcmp(policy, "Allowed") == 0;
    bool overrides = policy && strcmp(policy, "Overrides") == 0;
    size_t i;
    const json_t *ev;
    if (json_array_size(env) == 0)
        return 0;
    if (!allowed && !overrides)
        return fail(reterr, -EPERM, EXT_R_ENV_REJECTED,
                    "the template's envVarsInjectionPolicy does not allow env");
    json_array_foreach(env, i, ev)
    {
        const char *cn = json_string_value(json_object_get(ev, "containerName"));
        json_t *c = cn && *cn ? find_container(pod_spec, cn)
                              : json_array_get(json_object_get(pod_spec, "containers"), 0);
        int r;
        if (!c)
            return fail(reterr, -EINVAL, SB_R_RECONCILER_ERROR, "container %s not found",
                        cn && *cn ? cn : "(first)");
        if ((r = inject_one(c, ev, overrides, reterr)) < 0)
            return r;
    }
    return 0;
}

static int vct_check(const json_t *v, const char *who, struct claim_err *e)
{
    size_t i, j;
    const json_t *x, *y;
    json_array_foreach(v, i, x)
    {
        const char *n = kube_obj_name(x);
        if (!n || !*n)
            return fail(e, -EINVAL, EXT_R_VCT_ERROR,
                        "%s volumeClaimTemplates: an entry has no name", who);
        json_array_foreach(
            v, j, y) if (j < i && strcmp(kube_obj_name(y) ?: "", n) ==
                                      0) return fail(e, -EINVAL, EXT_R_VCT_ERROR,
                                                     "%s volumeClaimTemplates: duplicate name %s",
                                                     who, n);
    }
    return 0;
}

static json_t *vct_by_name(const json_t *v, const char *name)
{
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) if (strcmp(kube_obj_name(x) ?: "", name) == 0) return x;
    return NULL;
}

int claim_vct_merge(const json_t *tvcts, const json_t *cvcts, const char *policy, json_t **ret,
                    struct claim_err *reterr)
{
    bool allowed = policy && strcmp(policy, "Allowed") == 0;
    bool overrides = policy && strcmp(policy, "Overrides") == 0;
    json_t *out;
    size_t i;
    const json_t *x;
    int r;
    if ((r = vct_check(tvcts, "template", reterr)) < 0 ||
        (r = vct_check(cvcts, "claim", reterr)) < 0)
        return r;
    if (json_array_size(cvcts) && !allowed && !overrides)
        return fail(reterr, -EINVAL, EXT_R_VCT_ERROR,
                    "the template's volumeClaimTemplatesPolicy does not allow volumes");
    out = json_array();
    json_array_foreach(tvcts, i, x)
    {
        json_t *c = vct_by_name(cvcts, kube_obj_name(x));
        if (c && !overrides) {
            json_decref(out);
            return fail(reterr, -EINVAL, EXT_R_VCT_ERROR,
                        "volumeClaimTemplate %s is set by the template: override is not allowed",
                        kube_obj_name(x));
        }
        json_array_append_new(out, json_deep_copy(c ? c : x));
    }
    json_array_foreach(cvcts, i, x) if (!vct_by_name(tvcts, kube_obj_name(x)))
        json_array_append_new(out, json_deep_copy(x));
    *ret = out;
    return 0;
}

bool claim_needs_cold(const json_t *claim)
{
    return json_array_size(kube_obj_path(claim, "spec.env")) > 0 ||
           json_array_size(kube_obj_path(claim, "spec.volumeClaimTemplates")) > 0;
}

/* Claim identity labels on a label object. */
static void identity_labels(json_t *labels, const json_t *claim, const char *tpl_hash)
{
    const char *cb = kube_obj_label(claim, SB_LABEL_CREATED_BY);
    json_object_set_new(labels, EXT_LABEL_CLAIM_UID, json_string(kube_obj_uid(claim) ?: ""));
    json_object_set_new(labels, SB_LABEL_TEMPLATE_REF, json_string(tpl_hash));
    if (cb)
        json_object_set_new(labels, SB_LABEL_CREATED_BY, json_string(cb));
    else
        json_object_del(labels, SB_LABEL_CREATED_BY);
}

json_t *claim_pod_meta(const json_t *claim, const json_t *tpl, const json_t *base,
                       struct claim_err *reterr)
{
    const json_t *src = tpl ? kube_obj_path(tpl, "spec.podTemplate.metadata") : base;
    json_t *meta = json_is_object(src) ? json_deep_copy(src) : json_object();
    json_t *ann = json_object_get(meta, "annotations");
    const char *ev = json_string_value(json_object_get(ann, SB_ANN_SAFE_TO_EVICT));
    /* The pool's own safe-to-evict goes; a template's explicit value stays. */
    if (!tpl && ev && strcmp(ev, "true") == 0)
        json_object_del(ann, SB_ANN_SAFE_TO_EVICT);
    if (claim_meta_merge(meta, kube_obj_path(claim, "spec.additionalPodMetadata"), reterr) < 0) {
        json_decref(meta);
        return NULL;
    }
    return meta;
}

json_t *claim_sandbox_pod_meta(const json_t *claim, const json_t *tpl, bool identity,
                               struct claim_err *reterr)
{
    json_t *meta = claim_pod_meta(claim, tpl, NULL, reterr);
    char th[SB_HASH_LEN + 1];
    if (!meta || !identity)
        return meta;
    sb_name_hash(kube_obj_name(tpl) ?: "", th);
    identity_labels(ext_obj_ensure(meta, "labels"), claim, th);
    return meta;
}

static int cold_spec(const json_t *claim, const json_t *tpl, json_t *bp, struct claim_err *e)
{
    json_t *pt = json_object_get(bp, "podTemplate"), *vcts = NULL;
    const json_t *cv = kube_obj_path(claim, "spec.volumeClaimTemplates");
    json_t *meta = claim_sandbox_pod_meta(claim, tpl, true, e);
    int r;
    if (!meta)
        return -EEXIST;
    json_object_set_new(pt, "metadata", meta);
    r = claim_env_inject(json_object_get(pt, "spec"), kube_obj_path(claim, "spec.env"),
                         kube_obj_path_str(tpl, "spec.envVarsInjectionPolicy"), e);
    if (r >= 0)
        r = claim_vct_merge(json_object_get(bp, "volumeClaimTemplates"), cv,
                            kube_obj_path_str(tpl, "spec.volumeClaimTemplatesPolicy"), &vcts, e);
    if (r >= 0 && json_array_size(vcts))
        json_object_set_new(bp, "volumeClaimTemplates", vcts);
    else
        json_decref(vcts);
    return r;
}

int claim_cold_sandbox(const json_t *claim, const json_t *tpl, json_t **ret,
                       struct claim_err *reterr)
{
    json_t *bp = tpl_blueprint(tpl), *sb, *labels;
    char th[SB_HASH_LEN + 1];
    const char *trace = kube_obj_annotation(claim, SB_ANN_TRACE_CONTEXT);
    int r = cold_spec(claim, tpl, bp, reterr);
    if (r < 0) {
        json_decref(bp);
        return r;
    }
    sb_name_hash(kube_obj_name(tpl), th);
    sb = json_pack("{s:s, s:s, s:{s:s, s:s, s:{}, s:{s:s}, s:[o]}, s:o}", "apiVersion",
                   SB_API_VERSION, "kind", SB_KIND, "metadata", "name", kube_obj_name(claim) ?: "",
                   "namespace", kube_obj_namespace(claim) ?: "", "labels", "annotations",
                   SB_ANN_TEMPLATE_REF, kube_obj_name(tpl) ?: "", "ownerReferences",
                   ext_owner_ref(claim, EXT_KIND_CLAIM), "spec", bp);
    labels = json_object_get(json_object_get(sb, "metadata"), "labels");
    identity_labels(labels, claim, th);
    /* The Pod takes the Sandbox's name: say so now rather than in a patch later. */
    json_object_set_new(json_object_get(json_object_get(sb, "metadata"), "annotations"),
                        SB_ANN_POD_NAME, json_string(kube_obj_name(claim) ?: ""));
    json_object_set_new(labels, SB_LABEL_LAUNCH_TYPE, json_string("cold"));
    if (trace)
        json_object_set_new(json_object_get(json_object_get(sb, "metadata"), "annotations"),
                            SB_ANN_TRACE_CONTEXT, json_string(trace));
    *ret = sb;
    return 0;
}
