/* SPDX-License-Identifier: Apache-2.0 */
/* Open-addressing hash map with SipHash-2-4 under a per-process random key. */
#include "common/map.h"

#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/random.h>

#include "common/xalloc.h"

/* The first table of a map: small, because most sets of a cache index hold one key (the
 * objects of one owner UID); 2 slots keep one key at the 3/4 load bound. */
#define MAP_MIN_CAP 2

struct map_slot {
    char *key; /* NULL: empty slot */
    size_t len;
    uint64_t hash;
    void *value;
};

struct map {
    struct map_slot *slots;
    size_t cap; /* 0 or a power of two */
    size_t len;
    unsigned long gen; /* bumped by every modification, checked by iterators */
    map_free_fn *free_value;
};

/* ---- SipHash-2-4 ---- */

static uint64_t rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

static uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void sip_round(uint64_t v[4])
{
    v[0] += v[1];
    v[1] = rotl(v[1], 13) ^ v[0];
    v[0] = rotl(v[0], 32);
    v[2] += v[3];
    v[3] = rotl(v[3], 16) ^ v[2];
    v[0] += v[3];
    v[3] = rotl(v[3], 21) ^ v[0];
    v[2] += v[1];
    v[1] = rotl(v[1], 17) ^ v[2];
    v[2] = rotl(v[2], 32);
}

static void sip_absorb(uint64_t v[4], uint64_t m)
{
    v[3] ^= m;
    sip_round(v);
    sip_round(v);
    v[0] ^= m;
}

uint64_t map_siphash24(const uint8_t k[16], const void *p, size_t len)
{
    const uint8_t *in = p;
    uint64_t k0 = load_le64(k), k1 = load_le64(k + 8);
    uint64_t v[4] = {0x736f6d6570736575ULL ^ k0, 0x646f72616e646f6dULL ^ k1,
                     0x6c7967656e657261ULL ^ k0, 0x7465646279746573ULL ^ k1};
    size_t i = 0;
    for (; i + 8 <= len; i += 8)
        sip_absorb(v, load_le64(in + i));
    uint64_t last = (uint64_t)(len & 0xff) << 56;
    for (size_t j = 0; i + j < len; j++)
        last |= (uint64_t)in[i + j] << (8 * j);
    sip_absorb(v, last);
    v[2] ^= 0xff;
    for (int r = 0; r < 4; r++)
        sip_round(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* ---- per-process key ---- */

static uint8_t seed[16];
static pthread_once_t seed_once = PTHREAD_ONCE_INIT;

static void seed_init(void)
{
    if (getrandom(seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t)sizeof(seed))
        return;
    /* No entropy yet (early boot) or no getrandom: a weaker key is better than none. */
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t a = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    uint64_t b = (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&ts;
    memcpy(seed, &a, 8);
    memcpy(seed + 8, &b, 8);
}

static uint64_t hash_key(const char *key, size_t len)
{
    (void)pthread_once(&seed_once, seed_init);
    return map_siphash24(seed, key, len);
}

/* ---- table ---- */

struct map *map_new(map_free_fn *free_value)
{
    struct map *m = XNEW(struct map);
    m->free_value = free_value;
    return m;
}

static void release(struct map *m, struct map_slot *s)
{
    XFREE(s->key);
    if (m->free_value)
        m->free_value(s->value);
    s->value = NULL;
}

void map_clear(struct map *m)
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key)
            release(m, &m->slots[i]);
    m->len = 0;
    m->gen++;
}

void map_free(struct map *m)
{
    if (!m)
        return;
    map_clear(m);
    xfree(m->slots);
    xfree(m);
}

size_t map_len(const struct map *m)
{
    return m->len;
}

/* Returns the slot holding key, or (when absent) the empty slot where it would go;
 * NULL only for a table with no slots. */
static struct map_slot *probe(const struct map *m, const char *key, size_t len, uint64_t h)
{
    if (m->cap == 0)
        return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        struct map_slot *s = &m->slots[i];
        if (!s->key)
            return s;
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)
            return s;
    }
}

bool map_find(const struct map *m, const char *key, size_t len, void **ret_value)
{
    struct map_slot *s = probe(m, key, len, hash_key(key, len));
    if (!s || !s->key)
        return false;
    if (ret_value)
        *ret_value = s->value;
    return true;
}

void *map_getn(const struct map *m, const char *key, size_t len)
{
    void *v = NULL;
    return map_find(m, key, len, &v) ? v : NULL;
}

void *map_get(const struct map *m, const char *key)
{
    return map_getn(m, key, strlen(key));
}

static void grow(struct map *m)
{
    size_t old_cap = m->cap;
    struct map_slot *old = m->slots;
    m->cap = old_cap ? old_cap * 2 : MAP_MIN_CAP;
    m->slots = xcalloc(m->cap, sizeof(*m->slots));
    for (size_t i = 0; i < old_cap; i++) {
        if (!old[i].key)
            continue;
        struct map_slot *s = probe(m, old[i].key, old[i].len, old[i].hash);
        *s = old[i];
    }
    xfree(old);
}

int map_putn(struct map *m, const char *key, size_t len, void *value, void **ret_old)
{
    uint64_t h = hash_key(key, len);
    struct map_slot *s = probe(m, key, len, h);
    if (s && s->key) {
        void *old = s->value;
        s->value = value;
        if (ret_old)
            *ret_old = old;
        else if (m->free_value)
            m->free_value(old);
        return 0;
    }
    /* Keep the load factor at or below 3/4 so probe sequences stay short. */
    if ((m->len + 1) * 4 > m->cap * 3) {
        grow(m);
        s = probe(m, key, len, h);
    }
    *s = (struct map_slot){.key = xstrndup(key, len), .len = len, .hash = h, .value = value};
    m->len++;
    m->gen++;
    if (ret_old)
        *ret_old = NULL;
    return 1;
}

int map_put(struct map *m, const char *key, void *value, void **ret_old)
{
    return map_putn(m, key, strlen(key), value, ret_old);
}

/* Backward-shift deletion: pull later members of the probe run into the hole so that
 * no tombstones are needed and lookups stay correct. */
static void delete_slot(struct map *m, size_t hole)
{
    size_t mask = m->cap - 1;
    for (size_t i = (hole + 1) & mask; m->slots[i].key; i = (i + 1) & mask) {
        size_t home = (size_t)m->slots[i].hash & mask;
        /* The entry may move to the hole only if its home is not cyclically in
         * (hole, i]. */
        bool stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (stays)
            continue;
        m->slots[hole] = m->slots[i];
        hole = i;
    }
    m->slots[hole] = (struct map_slot){0};
}

void *map_removen(struct map *m, const char *key, size_t len)
{
    struct map_slot *s = probe(m, key, len, hash_key(key, len));
    if (!s || !s->key)
        return NULL;
    void *value = s->value;
    xfree(s->key);
    delete_slot(m, (size_t)(s - m->slots));
    m->len--;
    m->gen++;
    return value;
}

void *map_remove(struct map *m, const char *key)
{
    return map_removen(m, key, strlen(key));
}

void map_iter_init(struct map_iter *it, const struct map *m)
{
    *it = (struct map_iter){.m = m, .pos = 0, .gen = m->gen};
}

bool map_iter_next(struct map_iter *it, const char **ret_key, size_t *ret_len, void **ret_value)
{
    const struct map *m = it->m;
    ASSERT(it->gen == m->gen); /* modified during iteration */
    while (it->pos < m->cap) {
        const struct map_slot *s = &m->slots[it->pos++];
        if (!s->key)
            continue;
        if (ret_key)
            *ret_key = s->key;
        if (ret_len)
            *ret_len = s->len;
        if (ret_value)
            *ret_value = s->value;
        return true;
    }
    return false;
}
