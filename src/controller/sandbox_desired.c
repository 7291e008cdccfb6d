/* SPDX-License-Identifier: Apache-2.0 */
/* Desired Pod, Service and PVCs of a Sandbox, and the Pod metadata patch. */
#include "controller/sandbox_desired.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/extensions.h"
#include "common/buf.h"
#include "common/limits.h"
#include "common/xalloc.h"
#include "controller/sandbox_names.h"
#include "kube/obj.h"

json_t *sb_owner_ref(const json_t *sb)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:b, s:b}", "apiVersion", SB_API_VERSION, "kind",
                     SB_KIND, "name", kube_obj_name(sb) ? kube_obj_name(sb) : "", "uid",
                     kube_obj_uid(sb) ? kube_obj_uid(sb) : "", "controller", 1,
                     "blockOwnerDeletion", 1);
}

static json_t *child_meta(const json_t *sb, const char *name)
{
    char hash[SB_HASH_LEN + 1];
    sb_name_hash(kube_obj_name(sb), hash);
    return json_pack("{s:s, s:s, s:{s:s}, s:[o]}", "name", name, "namespace",
                     kube_obj_namespace(sb) ? kube_obj_namespace(sb) : "", "labels",
                     SB_LABEL_NAME_HASH, hash, "ownerReferences", sb_owner_ref(sb));
}

int sb_pvc_name(const json_t *sb, const json_t *vct, char *out, size_t size)
{
    const char *t = kube_obj_name(vct);
    const char *n = kube_obj_name(sb);
    int r;
    if (!t || !*t || !n)
        return -EINVAL;
    r = snprintf(out, size, "%s-%s", t, n);
    if (r < 0 || (size_t)r >= size)
        return -E2BIG;
    return 0;
}

json_t *sb_desired_pvc(const json_t *sb, const json_t *vct)
{
    char name[512];
    json_t *meta, *labels, *tl, *ann;
    const json_t *spec = json_object_get(vct, "spec");
    if (sb_pvc_name(sb, vct, name, sizeof(name)) < 0)
        return NULL;
    meta = child_meta(sb, name);
    labels = json_object_get(meta, "labels");
    /* Template labels first, then the tracking label, which cannot be overridden. */
    tl = kube_obj_path(vct, "metadata.labels")
             ? json_deep_copy(kube_obj_path(vct, "metadata.labels"))
             : NULL;
    if (json_is_object(tl)) {
        json_object_update(tl, labels);
        json_object_set(meta, "labels", tl);
    }
    json_decref(tl);
    ann = json_deep_copy(kube_obj_path(vct, "metadata.annotations"));
    if (json_is_object(ann) && json_object_size(ann) > 0)
        json_object_set(meta, "annotations", ann);
    json_decref(ann);
    return json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "v1", "kind", "PersistentVolumeClaim",
                     "metadata", meta, "spec", spec ? json_deep_copy(spec) : json_object());
}

/* Copies the entries of src whose key passes keep() into dst; records kept keys. */
static void copy_filtered(json_t *dst, const json_t *src, bool (*drop)(const char *),
                          json_t *ret_keys)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)src, k, v)
    {
        if (!json_is_string(v) || drop(k))
            continue;
        json_object_set(dst, k, v);
        if (ret_keys)
            json_array_append_new(ret_keys, json_string(k));
    }
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorted, comma-joined list of the strings in keys; returns new. */
static char *join_sorted(const json_t *keys)
{
    size_t n = json_array_size(keys);
    const char **v = xcalloc(n ? n : 1, sizeof(*v));
    struct buf b;
    buf_init(&b, LIMIT_CTRL_PROP_LIST);
    for (size_t i = 0; i < n; i++)
        v[i] = json_string_value(json_array_get(keys, i));
    qsort(v, n, sizeof(*v), cmp_cstr);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && strcmp(v[i], v[i - 1]) == 0)
            continue;
        if ((b.len && buf_putc(&b, ',') < 0) || buf_puts(&b, v[i]) < 0)
            break; /* bounded: an over-long list is cut */
    }
    xfree(v);
    return buf_steal(&b);
}

/* Extension labels a Pod of sb carries (§ owner-gated propagation); returns new. */
static json_t *extension_labels(const json_t *sb)
{
    json_t *out = json_object();
    bool pool = sb_controller_is(sb, SB_EXT_GROUP, EXT_KIND_POOL);
    bool claim = sb_controller_is(sb, SB_EXT_GROUP, EXT_KIND_CLAIM);
    const char *wp = kube_obj_label(sb, SB_LABEL_WARM_POOL);
    const char *tr = kube_obj_label(sb, SB_LABEL_TEMPLATE_REF);
    if (pool && wp && *wp)
        json_object_set_new(out, SB_LABEL_WARM_POOL, json_string(wp));
    if ((pool || claim) && tr)
        json_object_set_new(out, SB_LABEL_TEMPLATE_REF, json_string(tr));
    return out;
}

static json_t *jstr_take(char *s)
{
    json_t *j = json_string(s);
    xfree(s);
    return j;
}

static bool drop_label(const char *k)
{
    return sb_key_reserved(k);
}

/* The template's annotations as the Pod gets them (returns new): a warm-adopted Sandbox
 * marked SB_ANN_POD_OMIT_EVICT keeps the pool's safe-to-evict "true" off its Pod. */
static json_t *tmpl_annotations(const json_t *sb)
{
    const json_t *t = kube_obj_path(sb, "spec.podTemplate.metadata.annotations");
    json_t *out = json_is_object(t) ? json_deep_copy(t) : json_object();
    const char *omit = kube_obj_annotation(sb, SB_ANN_POD_OMIT_EVICT);
    const char *ev = json_string_value(json_object_get(out, SB_ANN_SAFE_TO_EVICT));
    if (omit && strcmp(omit, "true") == 0 && ev && strcmp(ev, "true") == 0)
        json_object_del(out, SB_ANN_SAFE_TO_EVICT);
    return out;
}

/* Labels and annotations of a new Pod; returns new metadata pieces. */
static void pod_new_meta(const json_t *sb, json_t *labels, json_t *ann)
{
    char hash[SB_HASH_LEN + 1];
    json_t *lkeys = json_array(), *akeys = json_array(), *tann = tmpl_annotations(sb);
    const char *cb = sb_created_by_normalize(kube_obj_label(sb, SB_LABEL_CREATED_BY));
    copy_filtered(labels, kube_obj_path(sb, "spec.podTemplate.metadata.labels"), drop_label, lkeys);
    sb_name_hash(kube_obj_name(sb), hash);
    json_object_set_new(labels, SB_LABEL_NAME_HASH, json_string(hash));
    json_object_update_new(labels, extension_labels(sb));
    if (cb)
        json_object_set_new(labels, SB_LABEL_CREATED_BY, json_string(cb));
    copy_filtered(ann, tann, sb_annotation_system, akeys);
    json_decref(tann);
    if (json_array_size(lkeys) > 0)
        json_object_set_new(ann, SB_ANN_PROP_LABELS, jstr_take(join_sorted(lkeys)));
    if (json_array_size(akeys) > 0)
        json_object_set_new(ann, SB_ANN_PROP_ANNOTATION, jstr_take(join_sorted(akeys)));
    json_decref(lkeys);
    json_decref(akeys);
}

/* Replaces template volumes named like a volumeClaimTemplate and appends one PVC
 * volume per template (StatefulSet-like precedence). */
static void merge_pvc_volumes(const json_t *sb, json_t *spec)
{
    const json_t *vcts = kube_obj_path(sb, "spec.volumeClaimTemplates");
    json_t *vols = json_object_get(spec, "volumes");
    json_t *out = json_array();
    size_t i, j;
    const json_t *v, *t;
    json_array_foreach(vols, i, v)
    {
        bool shadowed = false;
        const char *vn = json_string_value(json_object_get(v, "name"));
        json_array_foreach(vcts, j, t)
        {
            const char *tn = kube_obj_name(t);
            if (vn && tn && strcmp(vn, tn) == 0)
                shadowed = true;
        }
        if (!shadowed)
            json_array_append(out, (json_t *)v);
    }
    json_array_foreach(vcts, j, t)
    {
        char claim[512];
        if (sb_pvc_name(sb, t, claim, sizeof(claim)) < 0)
            continue;
        json_array_append_new(out, json_pack("{s:s, s:{s:s}}", "name", kube_obj_name(t),
                                             "persistentVolumeClaim", "claimName", claim));
    }
    if (json_array_size(out) > 0)
        json_object_set(spec, "volumes", out);
    json_decref(out);
}

json_t *sb_desired_pod(const json_t *sb)
{
    const json_t *tspec = kube_obj_path(sb, "spec.podTemplate.spec");
    json_t *meta = child_meta(sb, kube_obj_name(sb));
    json_t *labels = json_object_get(meta, "labels");
    json_t *ann = json_object();
    json_t *spec = json_is_object(tspec) ? json_deep_copy(tspec) : json_object();
    pod_new_meta(sb, labels, ann);
    if (json_object_size(ann) > 0)
        json_object_set(meta, "annotations", ann);
    json_decref(ann);
    merge_pvc_volumes(sb, spec);
    return json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "v1", "kind", "Pod", "metadata", meta,
                     "spec", spec);
}

/* ---- Service ports ------------------------------------------------------------------ */

struct port_key {
    json_int_t port;
    const char *proto; /* borrowed */
    const char *name;  /* borrowed or NULL */
    char gen[64];      /* generated name */
};

struct port_set {
    struct port_key *v;
    size_t n, cap;
};

static struct port_key *port_find(struct port_set *ps, json_int_t port, const char *proto)
{
    for (size_t i = 0; i < ps->n; i++)
        if (ps->v[i].port == port && strcmp(ps->v[i].proto, proto) == 0)
            return &ps->v[i];
    return NULL;
}

static bool port_name_used(const struct port_set *ps, const char *name)
{
    for (size_t i = 0; i < ps->n; i++) {
        const char *n = ps->v[i].name ? ps->v[i].name : ps->v[i].gen;
        if (*n && strcmp(n, name) == 0)
            return true;
    }
    return false;
}

static void port_add(struct port_set *ps, const json_t *cp)
{
    json_int_t port = json_integer_value(json_object_get(cp, "containerPort"));
    const char *proto = json_string_value(json_object_get(cp, "protocol"));
    const char *name = json_string_value(json_object_get(cp, "name"));
    struct port_key *k;
    if (port <= 0)
        return;
    if (!proto || !*proto)
        proto = "TCP";
    k = port_find(ps, port, proto);
    if (!k) {
        if (ps->n == ps->cap) {
            ps->cap = ps->cap ? ps->cap * 2 : 8;
            ps->v = xreallocarray(ps->v, ps->cap, sizeof(*ps->v));
        }
        k = &ps->v[ps->n++];
        *k = (struct port_key){.port = port, .proto = proto};
    }
    if (!k->name && name && *name && !port_name_used(ps, name))
        k->name = name;
}

static void ports_from(struct port_set *ps, const json_t *containers, bool sidecars_only)
{
    size_t i, j;
    const json_t *c, *p;
    json_array_foreach(containers, i, c)
    {
        const char *rp = json_string_value(json_object_get(c, "restartPolicy"));
        if (sidecars_only && !(rp && strcmp(rp, "Always") == 0))
            continue;
        json_array_foreach(json_object_get(c, "ports"), j, p) port_add(ps, p);
    }
}

static int port_cmp(const void *a, const void *b)
{
    const struct port_key *x = a, *y = b;
    if (x->port != y->port)
        return x->port < y->port ? -1 : 1;
    return strcmp(x->proto, y->proto);
}

static void port_gen_name(struct port_set *ps, struct port_key *k)
{
    char base[48], cand[64];
    size_t i;
    (void)snprintf(base, sizeof(base), "p-%lld-%s", (long long)k->port, k->proto);
    for (i = 0; base[i]; i++)
        if (base[i] >= 'A' && base[i] <= 'Z')
            base[i] = (char)(base[i] - 'A' + 'a');
    (void)snprintf(cand, sizeof(cand), "%s", base);
    for (int n = 2; port_name_used(ps, cand); n++)
        (void)snprintf(cand, sizeof(cand), "%s-%d", base, n);
    (void)snprintf(k->gen, sizeof(k->gen), "%s", cand);
}

json_t *sb_service_ports(const json_t *sb)
{
    const json_t *spec = kube_obj_path(sb, "spec.podTemplate.spec");
    struct port_set ps = {0};
    json_t *out = json_array();
    ports_from(&ps, json_object_get(spec, "containers"), false);
    ports_from(&ps, json_object_get(spec, "initContainers"), true);
    if (ps.n > 1)
        qsort(ps.v, ps.n, sizeof(*ps.v), port_cmp);
    for (size_t i = 0; i < ps.n; i++)
        if (!ps.v[i].name)
            port_gen_name(&ps, &ps.v[i]);
    for (size_t i = 0; i < ps.n; i++) {
        struct port_key *k = &ps.v[i];
        json_array_append_new(out, json_pack("{s:s, s:s, s:I, s:I}", "name",
                                             k->name ? k->name : k->gen, "protocol", k->proto,
                                             "port", k->port, "targetPort", k->port));
    }
    xfree(ps.v);
    return out;
}

json_t *sb_desired_service(const json_t *sb)
{
    char hash[SB_HASH_LEN + 1];
    sb_name_hash(kube_obj_name(sb), hash);
    return json_pack("{s:s, s:s, s:o, s:{s:s, s:{s:s}, s:o}}", "apiVersion", "v1", "kind",
                     "Service", "metadata", child_meta(sb, kube_obj_name(sb)), "spec", "clusterIP",
                     "None", "selector", SB_LABEL_NAME_HASH, hash, "ports", sb_service_ports(sb));
}

/* ---- Pod metadata patch --------------------------------------------------------------- */

/* Records in patch that key of the Pod's map cur should become want (NULL: absent),
 * when that differs from what the Pod has. */
static void want(json_t *patch, const json_t *cur, const char *key, const char *value)
{
    const char *have = json_string_value(json_object_get(cur, key));
    if (value && (!have || strcmp(have, value) != 0))
        json_object_set_new(patch, key, json_string(value));
    else if (!value && json_object_get(cur, key))
        json_object_set_new(patch, key, json_null());
}

/* Calls fn for each entry of the comma-separated list s. */
static void foreach_listed(const char *s, void (*fn)(void *ctx, const char *key), void *ctx)
{
    char key[512];
    while (s && *s) {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        if (n > 0 && n < sizeof(key)) {
            memcpy(key, s, n);
            key[n] = '\0';
            fn(ctx, key);
        }
        s = comma ? comma + 1 : NULL;
    }
}

struct meta_ctx {
    json_t *patch;        /* labels or annotations patch */
    const json_t *cur;    /* the Pod's current map */
    const json_t *tmpl;   /* the template's map */
    const json_t *wanted; /* keys set by this pass (skip them) */
};

static void stale_label(void *ctx, const char *key)
{
    struct meta_ctx *m = ctx;
    if (json_object_get(m->wanted, key) || strcmp(key, SB_LABEL_NAME_HASH) == 0)
        return;
    /* A reserved key listed as propagated is a leftover of an older, unsafe version. */
    if (sb_key_reserved(key) || !json_object_get(m->tmpl, key))
        want(m->patch, m->cur, key, NULL);
}

static void stale_annotation(void *ctx, const char *key)
{
    struct meta_ctx *m = ctx;
    if (json_object_get(m->wanted, key) || strcmp(key, SB_ANN_PROP_LABELS) == 0 ||
        strcmp(key, SB_ANN_PROP_ANNOTATION) == 0)
        return;
    if (sb_annotation_system(key) || !json_object_get(m->tmpl, key))
        want(m->patch, m->cur, key, NULL);
}

static void label_patch(const json_t *sb, const json_t *pod, json_t *lp, json_t *lkeys)
{
    const json_t *cur = kube_obj_path(pod, "metadata.labels");
    const json_t *tmpl = kube_obj_path(sb, "spec.podTemplate.metadata.labels");
    json_t *wanted = json_object(), *ext = extension_labels(sb);
    char hash[SB_HASH_LEN + 1];
    const char *k;
    json_t *v;
    copy_filtered(wanted, tmpl, drop_label, lkeys);
    sb_name_hash(kube_obj_name(sb), hash);
    json_object_set_new(wanted, SB_LABEL_NAME_HASH, json_string(hash));
    json_object_foreach(wanted, k, v) want(lp, cur, k, json_string_value(v));
    want(lp, cur, SB_LABEL_WARM_POOL, json_string_value(json_object_get(ext, SB_LABEL_WARM_POOL)));
    want(lp, cur, SB_LABEL_TEMPLATE_REF,
         json_string_value(json_object_get(ext, SB_LABEL_TEMPLATE_REF)));
    want(lp, cur, SB_LABEL_CREATED_BY,
         sb_created_by_normalize(kube_obj_label(sb, SB_LABEL_CREATED_BY)));
    struct meta_ctx m = {.patch = lp, .cur = cur, .tmpl = tmpl, .wanted = wanted};
    foreach_listed(kube_obj_annotation(pod, SB_ANN_PROP_LABELS), stale_label, &m);
    json_decref(wanted);
    json_decref(ext);
}

static void annotation_patch(const json_t *sb, const json_t *pod, json_t *ap, json_t *lkeys)
{
    const json_t *cur = kube_obj_path(pod, "metadata.annotations");
    json_t *tmpl = tmpl_annotations(sb);
    json_t *wanted = json_object(), *akeys = json_array();
    const char *k;
    json_t *v;
    copy_filtered(wanted, tmpl, sb_annotation_system, akeys);
    json_object_foreach(wanted, k, v) want(ap, cur, k, json_string_value(v));
    struct meta_ctx m = {.patch = ap, .cur = cur, .tmpl = tmpl, .wanted = wanted};
    foreach_listed(kube_obj_annotation(pod, SB_ANN_PROP_ANNOTATION), stale_annotation, &m);
    char *ls = join_sorted(lkeys), *as = join_sorted(akeys);
    /* An absent list means the same as an empty one: no write just to add "". */
    if (*ls || json_object_get(cur, SB_ANN_PROP_LABELS))
        want(ap, cur, SB_ANN_PROP_LABELS, ls);
    if (*as || json_object_get(cur, SB_ANN_PROP_ANNOTATION))
        want(ap, cur, SB_ANN_PROP_ANNOTATION, as);
    xfree(ls);
    xfree(as);
    json_decref(wanted);
    json_decref(akeys);
    json_decref(tmpl);
}

json_t *sb_pod_meta_patch(const json_t *sb, const json_t *pod)
{
    json_t *lp = json_object(), *ap = json_object(), *lkeys = json_array();
    json_t *meta = json_object();
    label_patch(sb, pod, lp, lkeys);
    annotation_patch(sb, pod, ap, lkeys);
    if (json_object_size(lp) > 0)
        json_object_set(meta, "labels", lp);
    if (json_object_size(ap) > 0)
        json_object_set(meta, "annotations", ap);
    json_decref(lp);
    json_decref(ap);
    json_decref(lkeys);
    if (json_object_size(meta) == 0) {
        json_decref(meta);
        return NULL;
    }
    return json_pack("{s:o}", "metadata", meta);
}
