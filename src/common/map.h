/* SPDX-License-Identifier: Apache-2.0 */
/* Hash map from byte-string keys (copied and owned by the map) to void * values:
 * open addressing with linear probing and backward-shift deletion, hashed with
 * SipHash-2-4 under a per-process random key so that outsiders cannot flood a bucket.
 *
 * Not thread-safe: callers serialise all access to one map (readers included, since
 * nothing here is atomic). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct map;

/** Destructor for values, called by map_free, map_clear and map_put (see there). */
typedef void map_free_fn(void *value);

/** Returns a new empty map (caller frees with map_free). free_value may be NULL: the
 * map then never frees values. Never fails (aborts on OOM). */
struct map *map_new(map_free_fn *free_value);
/** Frees the keys, every value through the destructor (if any), and the map. NULL is
 * fine. */
void map_free(struct map *m);
/** Removes every entry (values through the destructor, if any); keeps the memory. */
void map_clear(struct map *m);
/** Number of entries. */
size_t map_len(const struct map *m);

/** Looks key up (key borrowed). Returns the value (borrowed), or NULL when absent;
 * use map_find when NULL is a legitimate value. */
void *map_get(const struct map *m, const char *key);
void *map_getn(const struct map *m, const char *key, size_t len);
/** Returns whether key[0..len) is present; on true, *ret_value (if not NULL) gets the
 * value (borrowed). */
bool map_find(const struct map *m, const char *key, size_t len, void **ret_value);

/** Inserts or replaces. The key is borrowed (the map keeps its own copy); the value is
 * taken. When the key was present, the old value is returned in *ret_old if ret_old is
 * not NULL (the caller then owns it), otherwise it is freed with the destructor (if
 * any). *ret_old is NULL when the key was new. Returns 1 when a new key was inserted, 0
 * when a value was replaced. Never fails (aborts on OOM). */
int map_put(struct map *m, const char *key, void *value, void **ret_old);
int map_putn(struct map *m, const char *key, size_t len, void *value, void **ret_old);

/** Removes key and returns its value (the caller owns it; the destructor is NOT
 * called), or NULL when absent. */
void *map_remove(struct map *m, const char *key);
void *map_removen(struct map *m, const char *key, size_t len);

/** Iterator over all entries in unspecified order. No key may be added or removed
 * while an iterator is in use (checked: map_iter_next asserts); replacing the value of
 * an existing key with map_put is allowed. */
struct map_iter {
    const struct map *m;
    size_t pos;
    unsigned long gen;
};

void map_iter_init(struct map_iter *it, const struct map *m);
/** Advances to the next entry. Returns false at the end. On true, the out-parameters
 * that are not NULL get the key (borrowed, NUL-terminated, valid until the entry is
 * removed), its length, and the value (borrowed). */
bool map_iter_next(struct map_iter *it, const char **ret_key, size_t *ret_len, void **ret_value);

/** for-each over (const char *key, void *value); `it` is a struct map_iter variable. */
#define map_foreach(m, it, key, value) \
    for (map_iter_init(&(it), (m)); map_iter_next(&(it), &(key), NULL, &(value));)

/** SipHash-2-4 of p[0..len) under the 16-byte key k (little-endian words), for callers
 * that need a keyed hash that is stable across processes (e.g. sharding). */
uint64_t map_siphash24(const uint8_t k[16], const void *p, size_t len);
