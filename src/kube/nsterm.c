/* SPDX-License-Identifier: Apache-2.0 */
/* Namespaces seen terminating: a small table of names and when the server last refused
 * a create there, which says whether creates are answered without the server. */
#include "kube/nsterm.h"

#include <string.h>

void kube_nsterm_init(struct kube_nsterm *t)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
}

void kube_nsterm_done(struct kube_nsterm *t)
{
    pthread_mutex_destroy(&t->lock);
}

/* The slot of ns, or -1. Call with the lock held. */
static int find(const struct kube_nsterm *t, const char *ns)
{
    for (int i = 0; i < KUBE_NSTERM_SLOTS; i++)
        if (t->slot[i].ns[0] && strcmp(t->slot[i].ns, ns) == 0)
            return i;
    return -1;
}

/* A free slot, else the one refused longest ago. Call with the lock held. */
static int victim(const struct kube_nsterm *t)
{
    int v = 0;
    for (int i = 0; i < KUBE_NSTERM_SLOTS; i++) {
        if (!t->slot[i].ns[0])
            return i;
        if (t->slot[i].last < t->slot[v].last)
            v = i;
    }
    return v;
}

void kube_nsterm_mark(struct kube_nsterm *t, const char *ns, usec_t now)
{
    size_t n = ns ? strlen(ns) : 0;
    if (n == 0 || n > KUBE_NSTERM_NAME)
        return;
    pthread_mutex_lock(&t->lock);
    int i = find(t, ns);
    if (i < 0) {
        i = victim(t);
        memcpy(t->slot[i].ns, ns, n + 1);
    }
    t->slot[i].last = now;
    pthread_mutex_unlock(&t->lock);
}

long long kube_nsterm_seen(struct kube_nsterm *t, const char *ns, usec_t now, usec_t window)
{
    long long ago = -1;
    if (!ns || !ns[0])
        return -1;
    if (window > KUBE_NSTERM_MEMORY)
        window = KUBE_NSTERM_MEMORY;
    pthread_mutex_lock(&t->lock);
    int i = find(t, ns);
    usec_t since = i >= 0 && now >= t->slot[i].last ? now - t->slot[i].last : 0;
    if (i >= 0 && since < window)
        ago = (long long)since;
    else if (i >= 0 && since >= KUBE_NSTERM_MEMORY)
        t->slot[i].ns[0] = '\0'; /* forgotten: free the slot */
    pthread_mutex_unlock(&t->lock);
    return ago;
}

long long kube_nsterm_check(struct kube_nsterm *t, const char *ns, usec_t now)
{
    return kube_nsterm_seen(t, ns, now, KUBE_NSTERM_TTL);
}
