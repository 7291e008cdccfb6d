/* SPDX-License-Identifier: Apache-2.0 */
/* Indexed, read-mostly object cache behind a pthread rwlock. */
#include "kube/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/map.h"
#include "common/xalloc.h"
#include "kube/obj.h"
#include "kube/store_codec.h"

/* One secondary index: value -> set of keys (a map whose values are all NULL). */
struct store_index {
    char *name;
    kube_index_fn *fn;
    void *ctx;
    struct map *values;
};

struct kube_store {
    pthread_rwlock_t lock;
    struct map *objs; /* key -> json_t * (one reference each), or a packed blob */
    bool compact;
    bool codec_tried;          /* compact mode: the dictionary was made (or failed) */
    struct store_codec *codec; /* compact mode: NULL until the first object, or failed */
    size_t compact_above;      /* switch to compact mode past this many objects (0: never) */
    struct store_index *idx;
    size_t nidx;
    kube_store_transform_fn *transform;
    void *transform_ctx;
};

void kube_strv_add(struct kube_strv *sv, const char *s)
{
    if (sv->n == sv->cap) {
        sv->cap = sv->cap ? sv->cap * 2 : 4;
        sv->v = xreallocarray(sv->v, sv->cap, sizeof(*sv->v));
    }
    sv->v[sv->n++] = xstrdup(s);
}

void kube_strv_done(struct kube_strv *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        xfree(sv->v[i]);
    XFREE(sv->v);
    sv->n = sv->cap = 0;
}

/* Appends obj, taking the reference. */
static void objv_take(struct kube_objv *ov, json_t *obj)
{
    if (!obj)
        return;
    if (ov->n == ov->cap) {
        ov->cap = ov->cap ? ov->cap * 2 : 8;
        ov->v = xreallocarray(ov->v, ov->cap, sizeof(*ov->v));
    }
    ov->v[ov->n++] = obj;
}

void kube_objv_done(struct kube_objv *ov)
{
    for (size_t i = 0; i < ov->n; i++)
        json_decref(ov->v[i]);
    XFREE(ov->v);
    ov->n = ov->cap = 0;
}

void kube_index_namespace(void *ctx, const json_t *obj, struct kube_strv *out)
{
    (void)ctx;
    const char *ns = kube_obj_namespace(obj);
    if (ns && ns[0])
        kube_strv_add(out, ns);
}

void kube_index_owner_uid(void *ctx, const json_t *obj, struct kube_strv *out)
{
    (void)ctx;
    const json_t *refs = json_object_get(json_object_get(obj, "metadata"), "ownerReferences");
    size_t i;
    const json_t *ref;
    json_array_foreach(refs, i, ref)
    {
        const char *uid = json_string_value(json_object_get(ref, "uid"));
        if (uid && uid[0])
            kube_strv_add(out, uid);
    }
}

void kube_index_controller_uid(void *ctx, const json_t *obj, struct kube_strv *out)
{
    (void)ctx;
    const char *uid = kube_obj_controller_uid(obj);
    if (uid && uid[0])
        kube_strv_add(out, uid);
}

void kube_index_label(void *ctx, const json_t *obj, struct kube_strv *out)
{
    const char *v = kube_obj_label(obj, ctx);
    if (v)
        kube_strv_add(out, v);
}

void kube_store_strip_transform(void *ctx, json_t *obj)
{
    (void)ctx;
    json_t *md = json_object_get(obj, "metadata");
    (void)json_object_del(md, "managedFields");
    json_t *ann = json_object_get(md, "annotations");
    if (json_object_del(ann, "kubectl.kubernetes.io/last-applied-configuration") == 0 &&
        json_object_size(ann) == 0)
        (void)json_object_del(md, "annotations");
}

/* Writes the key of ns/name ("ns/name", or "name" without a namespace) into out (size
 * bytes). Returns 0, -EINVAL without a name, or -E2BIG when it does not fit or is over
 * LIMIT_KUBE_STORE_KEY. */
static int key_of(char *out, size_t size, const char *ns, const char *name)
{
    if (!name || !name[0])
        return -EINVAL;
    int n = ns && ns[0] ? snprintf(out, size, "%s/%s", ns, name) : snprintf(out, size, "%s", name);
    if (n < 0 || (size_t)n >= size || (size_t)n > LIMIT_KUBE_STORE_KEY)
        return -E2BIG;
    return 0;
}

int kube_store_key(const json_t *obj, char *out, size_t size)
{
    return key_of(out, size, kube_obj_namespace(obj), kube_obj_name(obj));
}

static void free_obj(void *p)
{
    json_decref(p);
}

/* ---- stored values: a json_t reference, or in compact mode a blob (store_codec.h):
 * the object's compact text, compressed against the text of the first object packed,
 * parsed again on every read ---- */

/* Makes the store's dictionary from obj, the first object it packs (write lock held). */
static void codec_start(struct kube_store *s, const json_t *obj)
{
    s->codec_tried = true;
    char *text = json_dumps(obj, JSON_COMPACT);
    int r = text ? store_codec_new(text, strlen(text), &s->codec) : -ENOMEM;
    if (r < 0)
        log_warn_errno(r, "store: no compression dictionary, keeping plain text");
    xfree(text);
}

/* The stored value for obj (borrowed): a new reference or a new blob (write lock held). */
static void *pack(struct kube_store *s, json_t *obj)
{
    if (!s->compact)
        return json_incref(obj);
    if (!s->codec_tried)
        codec_start(s, obj);
    return store_codec_pack(s->codec, obj);
}

/* A new reference to the object behind stored value v (NULL: none). */
static json_t *unpack(const struct kube_store *s, void *v)
{
    if (!v || !s->compact)
        return json_incref(v);
    return store_codec_unpack(s->codec, v);
}

static void free_keyset(void *p)
{
    map_free(p);
}

struct kube_store *kube_store_new(void)
{
    struct kube_store *s = XNEW(struct kube_store);
    ASSERT(pthread_rwlock_init(&s->lock, NULL) == 0);
    s->objs = map_new(free_obj);
    return s;
}

int kube_store_set_compact(struct kube_store *s, bool compact)
{
    int r = 0;
    ASSERT(pthread_rwlock_wrlock(&s->lock) == 0);
    if (map_len(s->objs) > 0) {
        r = -EBUSY;
    } else {
        map_free(s->objs);
        s->objs = map_new(compact ? xfree : free_obj);
        s->compact = compact;
    }
    (void)pthread_rwlock_unlock(&s->lock);
    return r;
}

void kube_store_set_compact_above(struct kube_store *s, size_t n)
{
    ASSERT(pthread_rwlock_wrlock(&s->lock) == 0);
    s->compact_above = n;
    (void)pthread_rwlock_unlock(&s->lock);
}

bool kube_store_is_compact(struct kube_store *s)
{
    bool c;
    ASSERT(pthread_rwlock_rdlock(&s->lock) == 0);
    c = s->compact;
    (void)pthread_rwlock_unlock(&s->lock);
    return c;
}

/* Converts every stored tree to its blob (write lock held). An object that cannot be
 * encoded (out of memory) leaves the store as it was. */
static void compact_now(struct kube_store *s)
{
    struct map *text = map_new(xfree);
    struct map_iter it;
    const char *key;
    void *obj;
    map_foreach (s->objs, it, key, obj) {
        if (!s->codec_tried)
            codec_start(s, obj);
        void *t = store_codec_pack(s->codec, obj);
        if (!t) {
            map_free(text);
            log_warn("store: could not switch to compact mode (out of memory)");
            return;
        }
        (void)map_put(text, key, t, NULL);
    }
    map_free(s->objs); /* drops the trees' references */
    s->objs = text;
    s->compact = true;
}

void kube_store_free(struct kube_store *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nidx; i++) {
        map_free(s->idx[i].values);
        xfree(s->idx[i].name);
    }
    xfree(s->idx);
    map_free(s->objs);
    store_codec_free(s->codec);
    (void)pthread_rwlock_destroy(&s->lock);
    xfree(s);
}

void kube_store_set_transform(struct kube_store *s, kube_store_transform_fn *fn, void *ctx)
{
    ASSERT(pthread_rwlock_wrlock(&s->lock) == 0);
    s->transform = fn;
    s->transform_ctx = ctx;
    (void)pthread_rwlock_unlock(&s->lock);
}

/* Adds (add = true) or removes key under each of obj's values in index ix. */
static void index_update(struct store_index *ix, const char *key, const json_t *obj, bool add)
{
    struct kube_strv vals = {0};
    ix->fn(ix->ctx, obj, &vals);
    for (size_t i = 0; i < vals.n; i++) {
        struct map *keys = map_get(ix->values, vals.v[i]);
        if (add) {
            if (!keys) {
                keys = map_new(NULL);
                (void)map_put(ix->values, vals.v[i], keys, NULL);
            }
            (void)map_put(keys, key, NULL, NULL);
        } else if (keys) {
            (void)map_remove(keys, key);
            if (map_len(keys) == 0)
                map_free(map_remove(ix->values, vals.v[i]));
        }
    }
    kube_strv_done(&vals);
}

static void index_all(struct kube_store *s, const char *key, const json_t *obj, bool add)
{
    for (size_t i = 0; i < s->nidx; i++)
        index_update(&s->idx[i], key, obj, add);
}

/* Removes key from every value of every index: for an object that cannot be unpacked (a
 * damaged blob, or no memory for a decompressor), whose values are not known. Walks the
 * indexes whole, so only on that path. */
static void index_drop_key(struct kube_store *s, const char *key)
{
    for (size_t i = 0; i < s->nidx; i++) {
        struct kube_strv empty = {0};
        struct map_iter it;
        const char *val;
        void *keys;
        map_foreach (s->idx[i].values, it, val, keys) {
            (void)map_remove(keys, key); /* the inner set: the walk's map is not changed */
            if (map_len(keys) == 0)
                kube_strv_add(&empty, val);
        }
        for (size_t j = 0; j < empty.n; j++)
            map_free(map_remove(s->idx[i].values, empty.v[j]));
        kube_strv_done(&empty);
    }
}

/* Takes key's old value (old, packed in the store's mode) out of the indexes. */
static json_t *unindex_old(struct kube_store *s, const char *key, void *old)
{
    json_t *old_obj = unpack(s, old);
    if (old_obj)
        index_all(s, key, old_obj, false);
    else if (old)
        index_drop_key(s, key);
    return old_obj;
}

static struct store_index *find_index(struct kube_store *s, const char *name)
{
    for (size_t i = 0; i < s->nidx; i++)
        if (strcmp(s->idx[i].name, name) == 0)
            return &s->idx[i];
    return NULL;
}

int kube_store_add_index(struct kube_store *s, const char *name, kube_index_fn *fn, void *ctx)
{
    int r = 0;
    ASSERT(pthread_rwlock_wrlock(&s->lock) == 0);
    if (find_index(s, name)) {
        r = -EEXIST;
        goto out;
    }
    s->idx = xreallocarray(s->idx, s->nidx + 1, sizeof(*s->idx));
    struct store_index *ix = &s->idx[s->nidx++];
    *ix = (struct store_index){
        .name = xstrdup(name), .fn = fn, .ctx = ctx, .values = map_new(free_keyset)};
    struct map_iter it;
    const char *key;
    void *obj;
    map_foreach (s->objs, it, key, obj) {
        json_t *o = unpack(s, obj);
        if (o)
            index_update(ix, key, o, true);
        json_decref(o);
    }
out:
    (void)pthread_rwlock_unlock(&s->lock);
    return r;
}

int kube_store_put(struct kube_store *s, json_t *obj, json_t **ret_old)
{
    char key[LIMIT_KUBE_STORE_KEY + 1];
    void *old = NULL;

    ASSERT(pthread_rwlock_wrlock(&s->lock) == 0);
    if (s->transform)
        s->transform(s->transform_ctx, obj);
    int r = kube_store_key(obj, key, sizeof(key));
    if (r < 0) {
        (void)pthread_rwlock_unlock(&s->lock);
        json_decref(obj);
        return r;
    }
    void *packed = pack(s, obj); /* never NULL: store_codec_pack aborts instead */
    (void)map_put(s->objs, key, packed, &old);
    json_t *old_obj = unindex_old(s, key, old);
    index_all(s, key, obj, true);
    bool was_compact = s->compact; /* old was packed in this mode */
    if (!s->compact && s->compact_above && map_len(s->objs) > s->compact_above)
        compact_now(s);
    (void)pthread_rwlock_unlock(&s->lock);
    if (was_compact)
        xfree(old); /* old_obj holds the reference in either mode */
    else
        json_decref(old);
    json_decref(obj);
    if (ret_old)
        *ret_old = old_obj;
    else
        json_decref(old_obj);
    return 0;
}

int kube_store_remove(struct kube_store *s, const char *key, json_t **ret_old)
{
    ASSERT(pthread_rwlock_wrlock(&s->lock) == 0);
    void *v = map_remove(s->objs, key);
    json_t *old = unindex_old(s, key, v);
    bool was_compact = s->compact; /* v was packed in this mode; another put may change it */
    (void)pthread_rwlock_unlock(&s->lock);
    if (was_compact)
        xfree(v);
    else
        json_decref(v);
    if (!old)
        return v ? -EIO : -ENOENT;
    if (ret_old)
        *ret_old = old;
    else
        json_decref(old);
    return 0;
}

json_t *kube_store_get(struct kube_store *s, const char *key)
{
    ASSERT(pthread_rwlock_rdlock(&s->lock) == 0);
    json_t *obj = unpack(s, map_get(s->objs, key));
    (void)pthread_rwlock_unlock(&s->lock);
    return obj;
}

json_t *kube_store_get_ns(struct kube_store *s, const char *ns, const char *name)
{
    char key[LIMIT_KUBE_STORE_KEY + 1];
    return key_of(key, sizeof(key), ns, name) == 0 ? kube_store_get(s, key) : NULL;
}

bool kube_store_has_ns(struct kube_store *s, const char *ns, const char *name)
{
    char key[LIMIT_KUBE_STORE_KEY + 1];
    bool has;
    if (key_of(key, sizeof(key), ns, name) < 0)
        return false;
    ASSERT(pthread_rwlock_rdlock(&s->lock) == 0);
    has = map_get(s->objs, key) != NULL;
    (void)pthread_rwlock_unlock(&s->lock);
    return has;
}

size_t kube_store_len(struct kube_store *s)
{
    ASSERT(pthread_rwlock_rdlock(&s->lock) == 0);
    size_t n = map_len(s->objs);
    (void)pthread_rwlock_unlock(&s->lock);
    return n;
}

void kube_store_list(struct kube_store *s, struct kube_objv *ret)
{
    struct map_iter it;
    const char *key;
    void *obj;
    ASSERT(pthread_rwlock_rdlock(&s->lock) == 0);
    map_foreach (s->objs, it, key, obj)
        objv_take(ret, unpack(s, obj));
    (void)pthread_rwlock_unlock(&s->lock);
}

void kube_store_keys(struct kube_store *s, struct kube_strv *ret)
{
    struct map_iter it;
    const char *key;
    void *obj;
    ASSERT(pthread_rwlock_rdlock(&s->lock) == 0);
    map_foreach (s->objs, it, key, obj)
        kube_strv_add(ret, key);
    (void)pthread_rwlock_unlock(&s->lock);
}

/* Appends the objects (objs) or keys (keys) filed under index/value. Caller holds the
 * read lock. */
static int index_walk(struct kube_store *s, const char *index, const char *value,
                      struct kube_objv *objs, struct kube_strv *keys)
{
    struct store_index *ix = find_index(s, index);
    if (!ix)
        return -ENOENT;
    struct map *set = map_get(ix->values, value);
    if (!set)
        return 0;
    struct map_iter it;
    const char *key;
    void *unused;
    int n = 0;
    map_foreach (set, it, key, unused) {
        if (objs) {
            size_t had = objs->n;
            objv_take(objs, unpack(s, map_get(s->objs, key)));
            n += objs->n > had; /* a compact blob that did not unpack is not appended */
        } else {
            kube_strv_add(keys, key);
            n++;
        }
    }
    return n;
}

int kube_store_by_index(struct kube_store *s, const char *index, const char *value,
                        struct kube_objv *ret)
{
    ASSERT(pthread_rwlock_rdlock(&s->lock) == 0);
    int r = index_walk(s, index, value, ret, NULL);
    (void)pthread_rwlock_unlock(&s->lock);
    return r;
}

int kube_store_index_keys(struct kube_store *s, const char *index, const char *value,
                          struct kube_strv *ret)
{
    ASSERT(pthread_rwlock_rdlock(&s->lock) == 0);
    int r = index_walk(s, index, value, NULL, ret);
    (void)pthread_rwlock_unlock(&s->lock);
    return r;
}

size_t kube_store_packed_bytes(struct kube_store *s)
{
    struct map_iter it;
    const char *key;
    void *v;
    size_t n = 0;
    ASSERT(pthread_rwlock_rdlock(&s->lock) == 0);
    if (s->compact)
        map_foreach (s->objs, it, key, v)
            n += store_codec_blob_size(v);
    (void)pthread_rwlock_unlock(&s->lock);
    return n;
}
