/* SPDX-License-Identifier: Apache-2.0 */
/* Warm candidate queue: per pool a FIFO list with an index for O(1) removal. */
#include "controller/claim_queue.h"

#include <pthread.h>
#include <string.h>

#include "common/map.h"
#include "common/str.h"
#include "common/xalloc.h"

struct cq_node {
    struct cq_node *prev, *next;
    char *name;
};

struct cq_pool {
    struct cq_node *head, *tail;
    struct map *index; /* name -> struct cq_node (not owned by the map) */
};

struct claim_queue {
    pthread_mutex_t lock;
    struct map *pools; /* pool -> struct cq_pool */
};

static void pool_free(void *p)
{
    struct cq_pool *cp = p;
    struct cq_node *n, *next;
    if (!cp)
        return;
    for (n = cp->head; n; n = next) {
        next = n->next;
        xfree(n->name);
        xfree(n);
    }
    map_free(cp->index);
    xfree(cp);
}

struct claim_queue *claim_queue_new(void)
{
    struct claim_queue *q = XNEW(struct claim_queue);
    pthread_mutex_init(&q->lock, NULL);
    q->pools = map_new(pool_free);
    return q;
}

void claim_queue_free(struct claim_queue *q)
{
    if (!q)
        return;
    map_free(q->pools);
    pthread_mutex_destroy(&q->lock);
    xfree(q);
}

static void unlink_node(struct cq_pool *cp, struct cq_node *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        cp->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        cp->tail = n->prev;
    (void)map_remove(cp->index, n->name);
    xfree(n->name);
    xfree(n);
}

void claim_queue_push(struct claim_queue *q, const char *pool, const char *name)
{
    struct cq_pool *cp;
    struct cq_node *n;
    pthread_mutex_lock(&q->lock);
    cp = map_get(q->pools, pool);
    if (!cp) {
        cp = XNEW(struct cq_pool);
        cp->index = map_new(NULL);
        map_put(q->pools, pool, cp, NULL);
    }
    if (!map_get(cp->index, name)) {
        n = XNEW(struct cq_node);
        n->name = xstrdup(name);
        n->prev = cp->tail;
        if (cp->tail)
            cp->tail->next = n;
        else
            cp->head = n;
        cp->tail = n;
        map_put(cp->index, name, n, NULL);
    }
    pthread_mutex_unlock(&q->lock);
}

bool claim_queue_pop(struct claim_queue *q, const char *pool, char *out, size_t size)
{
    struct cq_pool *cp;
    bool ok = false;
    pthread_mutex_lock(&q->lock);
    cp = map_get(q->pools, pool);
    if (cp && cp->head) {
        ok = str_copy(out, size, cp->head->name) == 0;
        unlink_node(cp, cp->head);
    }
    pthread_mutex_unlock(&q->lock);
    return ok;
}

void claim_queue_remove(struct claim_queue *q, const char *pool, const char *name)
{
    struct cq_pool *cp;
    struct cq_node *n;
    pthread_mutex_lock(&q->lock);
    cp = map_get(q->pools, pool);
    n = cp ? map_get(cp->index, name) : NULL;
    if (n)
        unlink_node(cp, n);
    /* An emptied record goes: a deleted pool's members, updated after its drop (before
     * the garbage collector deletes them), make it again, and their deletions end here. */
    if (cp && !cp->head)
        pool_free(map_remove(q->pools, pool));
    pthread_mutex_unlock(&q->lock);
}

size_t claim_queue_pools(struct claim_queue *q)
{
    pthread_mutex_lock(&q->lock);
    size_t n = map_len(q->pools);
    pthread_mutex_unlock(&q->lock);
    return n;
}

void claim_queue_drop(struct claim_queue *q, const char *pool)
{
    pthread_mutex_lock(&q->lock);
    pool_free(map_remove(q->pools, pool));
    pthread_mutex_unlock(&q->lock);
}

size_t claim_queue_len(struct claim_queue *q, const char *pool)
{
    struct cq_pool *cp;
    size_t n;
    pthread_mutex_lock(&q->lock);
    cp = map_get(q->pools, pool);
    n = cp ? map_len(cp->index) : 0;
    pthread_mutex_unlock(&q->lock);
    return n;
}
