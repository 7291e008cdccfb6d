/* SPDX-License-Identifier: Apache-2.0 */
/* Typed accessors over Kubernetes objects kept as jansson values. */
#include "kube/obj.h"

#include <errno.h>
#include <string.h>

static const json_t *meta(const json_t *obj)
{
    return json_object_get(obj, "metadata");
}

static const char *meta_str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(meta(obj), key));
}

const char *kube_obj_name(const json_t *obj)
{
    return meta_str(obj, "name");
}

const char *kube_obj_namespace(const json_t *obj)
{
    return meta_str(obj, "namespace");
}

const char *kube_obj_uid(const json_t *obj)
{
    return meta_str(obj, "uid");
}

bool kube_obj_uid_changed(const json_t *o, const json_t *n)
{
    const char *a = kube_obj_uid(o), *b = kube_obj_uid(n);
    return a && b && strcmp(a, b) != 0;
}

const char *kube_obj_resource_version(const json_t *obj)
{
    return meta_str(obj, "resourceVersion");
}

static bool rv_wellformed(const char *rv)
{
    size_t n = rv ? strlen(rv) : 0;
    if (n == 0 || n > 32 || rv[0] == '0')
        return false;
    for (size_t i = 0; i < n; i++)
        if (rv[i] < '0' || rv[i] > '9')
            return false;
    return true;
}

int kube_rv_compare(const char *a, const char *b, int *ret)
{
    size_t la, lb;
    int c;
    if (!rv_wellformed(a) || !rv_wellformed(b))
        return -EINVAL;
    la = strlen(a);
    lb = strlen(b);
    c = la != lb ? (la < lb ? -1 : 1) : strcmp(a, b);
    *ret = c < 0 ? -1 : c > 0;
    return 0;
}

bool kube_obj_same_version(const json_t *a, const json_t *b)
{
    const char *ra = kube_obj_resource_version(a), *rb = kube_obj_resource_version(b);
    return ra && rb && *ra && strcmp(ra, rb) == 0;
}

const char *kube_obj_kind(const json_t *obj)
{
    return json_string_value(json_object_get(obj, "kind"));
}

int64_t kube_obj_generation(const json_t *obj)
{
    return (int64_t)json_integer_value(json_object_get(meta(obj), "generation"));
}

bool kube_obj_deleting(const json_t *obj)
{
    const json_t *ts = json_object_get(meta(obj), "deletionTimestamp");
    return ts && !json_is_null(ts);
}

const char *kube_obj_label(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(json_object_get(meta(obj), "labels"), key));
}

const char *kube_obj_annotation(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(json_object_get(meta(obj), "annotations"), key));
}

const json_t *kube_obj_controller_ref(const json_t *obj)
{
    const json_t *refs = json_object_get(meta(obj), "ownerReferences");
    size_t i;
    const json_t *ref;
    json_array_foreach(refs, i, ref)
    {
        if (json_is_true(json_object_get(ref, "controller")))
            return ref;
    }
    return NULL;
}

const char *kube_obj_controller_uid(const json_t *obj)
{
    return json_string_value(json_object_get(kube_obj_controller_ref(obj), "uid"));
}

bool kube_obj_has_finalizer(const json_t *obj, const char *finalizer)
{
    const json_t *fins = json_object_get(meta(obj), "finalizers");
    size_t i;
    const json_t *f;
    json_array_foreach(fins, i, f)
    {
        const char *s = json_string_value(f);
        if (s && strcmp(s, finalizer) == 0)
            return true;
    }
    return false;
}

const json_t *kube_obj_path(const json_t *obj, const char *dotted)
{
    const json_t *cur = obj;
    const char *p = dotted;
    while (cur && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (!json_is_object(cur))
            return NULL;
        cur = json_object_getn(cur, p, n);
        p += n;
        if (*p == '.')
            p++;
    }
    return cur;
}

const char *kube_obj_path_str(const json_t *obj, const char *dotted)
{
    return json_string_value(kube_obj_path(obj, dotted));
}

int kube_obj_key(const json_t *obj, struct buf *out)
{
    const char *name = kube_obj_name(obj);
    const char *ns = kube_obj_namespace(obj);
    if (!name || name[0] == '\0')
        return -EINVAL;
    if (ns && ns[0] != '\0')
        return buf_printf(out, "%s/%s", ns, name);
    return buf_puts(out, name);
}

const json_t *kube_obj_condition(const json_t *obj, const char *type)
{
    const json_t *conds = json_object_get(json_object_get(obj, "status"), "conditions");
    size_t i;
    const json_t *c;
    json_array_foreach(conds, i, c)
    {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && strcmp(t, type) == 0)
            return c;
    }
    return NULL;
}

bool kube_obj_condition_true(const json_t *obj, const char *type)
{
    const char *s = json_string_value(json_object_get(kube_obj_condition(obj, type), "status"));
    return s && strcmp(s, "True") == 0;
}

/* obj's metadata object, created when absent (borrowed). */
static json_t *meta_ensure(json_t *obj)
{
    json_t *m = json_object_get(obj, "metadata");
    if (!json_is_object(m)) {
        m = json_object();
        (void)json_object_set_new(obj, "metadata", m);
    }
    return m;
}

void kube_obj_set_meta_str(json_t *obj, const char *key, const char *value)
{
    (void)json_object_set_new(meta_ensure(obj), key, json_string(value));
}

void kube_obj_reset_managed_fields(json_t *patch)
{
    (void)json_object_set_new(meta_ensure(patch), "managedFields", json_pack("[{}]"));
}

json_t *kube_merge_patch_diff(const json_t *from, const json_t *to)
{
    json_t *patch = json_object(), *tv;
    const json_t *fv;
    const char *k;
    if (!json_is_object(from))
        from = NULL;
    json_object_foreach((json_t *)to, k, tv)
    {
        fv = from ? json_object_get(from, k) : NULL;
        if (json_is_object(fv) && json_is_object(tv)) {
            json_t *sub = kube_merge_patch_diff(fv, tv);
            if (json_object_size(sub))
                (void)json_object_set_new(patch, k, sub);
            else
                json_decref(sub);
        } else if (!fv || !json_equal(fv, tv)) {
            (void)json_object_set_new(patch, k, json_deep_copy(tv));
        }
    }
    if (from)
        json_object_foreach((json_t *)from, k, fv) if (!json_object_get(to, k))(void)
            json_object_set_new(patch, k, json_null());
    return patch;
}
