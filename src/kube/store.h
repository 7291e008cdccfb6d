/* SPDX-License-Identifier: Apache-2.0 */
/* A thread-safe indexed object cache: "namespace/name" (or "name" for cluster-scoped
 * objects) -> json_t, plus named secondary indexes (owner UID, label value, namespace,
 * ...). Objects are IMMUTABLE once stored: readers get their own reference and must
 * never modify it (json_deep_copy first); writers replace whole objects.
 *
 * Thread-safety: every function may be called from any thread at the same time
 * (pthread_rwlock: lookups share, writes exclude). Index and transform functions run
 * under the write lock and must not call back into the store. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/** A growable vector of owned strings (index values, keys). Zero-initialise it. */
struct kube_strv {
    char **v;
    size_t n, cap;
};
/** Appends a copy of s. */
void kube_strv_add(struct kube_strv *sv, const char *s);
/** Frees every string and the vector; it is empty and reusable afterwards. */
void kube_strv_done(struct kube_strv *sv);

/** A vector of object references, each a new reference owned by the vector. */
struct kube_objv {
    json_t **v;
    size_t n, cap;
};
/** Drops every reference and frees the vector; it is empty and reusable afterwards. */
void kube_objv_done(struct kube_objv *ov);

/** Computes the index values of obj (borrowed, immutable) by appending them to out; none
 * means obj is not in the index. Must be a pure function of obj. */
typedef void kube_index_fn(void *ctx, const json_t *obj, struct kube_strv *out);

/** Ready-made index functions (ctx as noted). */
void kube_index_namespace(void *ctx, const json_t *obj, struct kube_strv *out); /* ctx unused */
/** UID of every metadata.ownerReferences entry; ctx unused. */
void kube_index_owner_uid(void *ctx, const json_t *obj, struct kube_strv *out);
/** UID of the controller ownerReference only; ctx unused. */
void kube_index_controller_uid(void *ctx, const json_t *obj, struct kube_strv *out);
/** The value of the label whose key is ctx (a const char *, borrowed for the store's
 * life), when present. */
void kube_index_label(void *ctx, const json_t *obj, struct kube_strv *out);

/** Rewrites obj in place before it is stored (it is not yet shared), e.g. to drop fields
 * the cache does not need. */
typedef void kube_store_transform_fn(void *ctx, json_t *obj);

/** Ready-made transform: removes metadata.managedFields and the
 * kubectl.kubernetes.io/last-applied-configuration annotation (ctx unused). */
void kube_store_strip_transform(void *ctx, json_t *obj);

struct kube_store;

/** Returns a new empty store (free with kube_store_free). Never fails. */
struct kube_store *kube_store_new(void);
/** Drops every object reference and frees the store. NULL is fine. */
void kube_store_free(struct kube_store *s);

/** Compact mode (off by default): each object is kept as its compact JSON text,
 * compressed with zstd against a dictionary, the text of the first object the store packed
 * (kube/store_codec.h): a Pod of 1.7 KB of text takes about 140 bytes, against ~15 KB as a
 * parsed tree (jansson spends ~9 heap bytes per byte of text). Every read decompresses
 * and parses again: get, list and by_index return a fresh object
 * each time (still a new reference the caller owns; two reads are equal, not the same
 * pointer). Suits a large cache that is read per reconcile rather than per request.
 * Only on an empty store: returns 0 or -EBUSY. */
int kube_store_set_compact(struct kube_store *s, bool compact);

/** Switches the store to compact mode once it holds more than n objects (0: never, the
 * default): a small cache keeps parsed trees (reads cost nothing), a large one shrinks to
 * about a ninth. The switch converts every stored object at once, under the write lock;
 * a store never switches back. References handed out before stay valid. */
void kube_store_set_compact_above(struct kube_store *s, size_t n);
/** Whether the store is in compact mode now. */
bool kube_store_is_compact(struct kube_store *s);
/** The bytes a compact store's objects take (0 when not compact), for tests and metrics. */
size_t kube_store_packed_bytes(struct kube_store *s);

/** Sets the transform applied to every object put from now on (fn NULL: none). ctx is
 * borrowed for the store's life. */
void kube_store_set_transform(struct kube_store *s, kube_store_transform_fn *fn, void *ctx);

/** Registers index name (copied) computed by fn(ctx, obj); objects already stored are
 * indexed at once. ctx is borrowed for the store's life. Returns 0 or -EEXIST. */
int kube_store_add_index(struct kube_store *s, const char *name, kube_index_fn *fn, void *ctx);

/** Inserts or replaces obj under its key. Takes obj (also on failure), runs the
 * transform on it, and from then on never modifies it. When ret_old is not NULL it gets
 * the replaced object (a reference the caller now owns) or NULL. Returns 0, or -EINVAL
 * (or another error of kube_store_key) when obj has no usable key. */
int kube_store_put(struct kube_store *s, json_t *obj, json_t **ret_old);
/** Removes key (borrowed). When ret_old is not NULL it gets the removed object (a
 * reference the caller now owns). Returns 0, -ENOENT when nothing was held, or -EIO when
 * the object was removed but its compressed form could not be unpacked (it is then out of
 * every index as well, and *ret_old is not set). */
int kube_store_remove(struct kube_store *s, const char *key, json_t **ret_old);

/** Returns a new reference to the object under key (borrowed), or NULL. */
json_t *kube_store_get(struct kube_store *s, const char *key);
/** Same by namespace (NULL or "" for cluster-scoped) and name. */
json_t *kube_store_get_ns(struct kube_store *s, const char *ns, const char *name);
/** Whether an object of that namespace and name is held: a lookup only, nothing is
 * unpacked (a compact store's objects stay compressed). */
bool kube_store_has_ns(struct kube_store *s, const char *ns, const char *name);
/** Number of objects. */
size_t kube_store_len(struct kube_store *s);

/** Appends a new reference to every object, in unspecified order, to *ret. */
void kube_store_list(struct kube_store *s, struct kube_objv *ret);
/** Appends every key, in unspecified order, to *ret. */
void kube_store_keys(struct kube_store *s, struct kube_strv *ret);
/** Appends a new reference to each object whose index name has value (both borrowed)
 * to *ret. Returns the number appended, or -ENOENT when there is no such index. */
int kube_store_by_index(struct kube_store *s, const char *index, const char *value,
                        struct kube_objv *ret);
/** Same, appending the objects' keys instead (e.g. to enqueue them). */
int kube_store_index_keys(struct kube_store *s, const char *index, const char *value,
                          struct kube_strv *ret);

/** Writes obj's store key ("namespace/name" or "name") into out (at least
 * LIMIT_KUBE_STORE_KEY + 1 bytes). Returns 0, -EINVAL without a name, -E2BIG. */
int kube_store_key(const json_t *obj, char *out, size_t size);
