/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded LRU with expiry: a hash map to nodes of a doubly linked recency list. */
#include "router/authz_cache.h"

#include "common/map.h"
#include "common/xalloc.h"

struct node {
    struct authz_entry e;
    usec_t expires;
    char *key;
    struct node *prev, *next; /* prev: more recent */
};

struct authz_cache {
    struct map *map;
    struct node *head, *tail;
    size_t max;
};

struct authz_cache *authz_cache_new(size_t max)
{
    struct authz_cache *c = XNEW(struct authz_cache);
    c->map = map_new(NULL);
    c->max = max ? max : 1;
    return c;
}

static void unlink_node(struct authz_cache *c, struct node *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        c->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        c->tail = n->prev;
    n->prev = n->next = NULL;
}

static void push_front(struct authz_cache *c, struct node *n)
{
    n->next = c->head;
    if (c->head)
        c->head->prev = n;
    c->head = n;
    if (!c->tail)
        c->tail = n;
}

static void drop(struct authz_cache *c, struct node *n)
{
    unlink_node(c, n);
    (void)map_remove(c->map, n->key);
    if (n->e.user)
        json_decref(n->e.user);
    xfree(n->key);
    xfree(n);
}

void authz_cache_free(struct authz_cache *c)
{
    if (!c)
        return;
    while (c->head)
        drop(c, c->head);
    map_free(c->map);
    xfree(c);
}

const struct authz_entry *authz_cache_get(struct authz_cache *c, const char *key, usec_t now)
{
    struct node *n = map_get(c->map, key);
    if (!n)
        return NULL;
    if (now >= n->expires) {
        drop(c, n);
        return NULL;
    }
    unlink_node(c, n);
    push_front(c, n);
    return &n->e;
}

int authz_cache_put(struct authz_cache *c, const char *key, int code, const json_t *user,
                    usec_t expires)
{
    struct node *n = map_get(c->map, key);
    if (n)
        drop(c, n);
    n = XNEW(struct node);
    n->key = xstrdup(key);
    n->e.code = code;
    n->e.user = user ? json_incref((json_t *)user) : NULL;
    n->expires = expires;
    (void)map_put(c->map, key, n, NULL);
    push_front(c, n);
    if (map_len(c->map) <= c->max)
        return 0;
    drop(c, c->tail);
    return 1;
}

size_t authz_cache_len(const struct authz_cache *c)
{
    return map_len(c->map);
}
