/* SPDX-License-Identifier: Apache-2.0 */
/* Namespaces the API server said are being terminated. A create in such a namespace is
 * refused (403, cause NamespaceTerminating) and a namespace never stops terminating, so
 * the client answers further creates there itself for a short while instead of sending
 * them: deleting a namespace with a warm pool in it no longer costs the API server a
 * refused create per retry of every Sandbox and pool. The memory is short
 * (KUBE_NSTERM_TTL after the server last said so), so a namespace of the same name
 * created again is served within that long. A longer memory (KUBE_NSTERM_MEMORY) answers
 * whether the server said so recently, for writes that are not refused but pointless
 * while a namespace empties (kube_nsterm_seen). Bounded (KUBE_NSTERM_SLOTS namespaces;
 * the one refused longest ago makes room). Thread-safe. */
#pragma once

#include <pthread.h>
#include <stdbool.h>

#include "common/clock.h"

#define KUBE_NSTERM_TTL    (2 * USEC_PER_SEC)
#define KUBE_NSTERM_MEMORY (30 * USEC_PER_SEC)
#define KUBE_NSTERM_SLOTS  32
#define KUBE_NSTERM_NAME   63 /* a namespace name is a DNS label */

struct kube_nsterm {
    pthread_mutex_t lock;
    struct {
        char ns[KUBE_NSTERM_NAME + 1]; /* "" = free */
        usec_t last;                   /* when the server last refused a create there */
    } slot[KUBE_NSTERM_SLOTS];
};

void kube_nsterm_init(struct kube_nsterm *t);
void kube_nsterm_done(struct kube_nsterm *t);
/** Records at time now that creates in ns are refused. A name longer than
 * KUBE_NSTERM_NAME (not a namespace name) is not recorded. */
void kube_nsterm_mark(struct kube_nsterm *t, const char *ns, usec_t now);
/** How long ago (>= 0) the server last refused a create in ns, if that is less than
 * KUBE_NSTERM_TTL before now; -1 otherwise. */
long long kube_nsterm_check(struct kube_nsterm *t, const char *ns, usec_t now);
/** How long ago (>= 0) the server last refused a create in ns, if that is less than
 * window (at most KUBE_NSTERM_MEMORY) before now; -1 otherwise. */
long long kube_nsterm_seen(struct kube_nsterm *t, const char *ns, usec_t now, usec_t window);
