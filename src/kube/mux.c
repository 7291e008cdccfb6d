/* SPDX-License-Identifier: Apache-2.0 */
/* The request multiplexer (mux.h): lanes, each a curl multi handle driven by one of the
 * threads waiting on it at a time (the driver). A thread that submits a transfer to a lane
 * nobody drives becomes its driver: it adds the transfer, runs the multi handle until its
 * own transfer is done and then hands the role to a thread whose transfer is still in
 * flight (or queued), or leaves the lane undriven when there is none. So a request on an
 * idle lane runs on its caller's thread with no thread switch either way, and under load
 * each finished transfer costs one wake-up, as with a dedicated I/O thread. Transfers go
 * to the lanes in turn. */
#include "kube/mux.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "common/dlist.h"
#include "common/xalloc.h"

/* One submitted transfer; lives on the stack of the thread waiting for it. */
struct waiter {
    CURL *h;
    CURLcode cc;
    bool done;  /* finished: cc holds the result */
    bool drive; /* handed the driver's role: run the lane */
    pthread_cond_t cv;
    struct waiter *next, *prev; /* in the lane's queue or its in-flight list */
};

struct lane {
    CURLM *multi;            /* used by the driver only */
    pthread_mutex_t lock;    /* the lists, driven, and the waiters' done and drive flags */
    struct waiter *queue;    /* submitted, not yet added to multi (singly linked, LIFO) */
    struct waiter *inflight; /* added to multi (doubly linked) */
    bool driven;             /* a thread holds the driver's role */
};

struct kube__mux {
    struct lane *lanes;
    size_t n;
    atomic_uint next; /* the lane of the next transfer, modulo n */
    pid_t pid;        /* of the process that made it: a fork child must not use it */
};

static void lane_init(struct lane *l, long max_conns)
{
    l->multi = curl_multi_init();
    ASSERT(l->multi); /* only fails when out of memory */
    curl_multi_setopt(l->multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    curl_multi_setopt(l->multi, CURLMOPT_MAX_HOST_CONNECTIONS, max_conns);
    /* The server's SETTINGS_MAX_CONCURRENT_STREAMS still applies (Go servers: 250 unless
     * set); past it, curl opens another connection. */
    curl_multi_setopt(l->multi, CURLMOPT_MAX_CONCURRENT_STREAMS, 1000L);
    pthread_mutex_init(&l->lock, NULL);
}

struct kube__mux *kube__mux_new(int lanes, long max_conns)
{
    struct kube__mux *m = XNEW(struct kube__mux);
    m->n = lanes > 0 ? (size_t)lanes : 1;
    m->lanes = xcalloc(m->n, sizeof(*m->lanes));
    for (size_t i = 0; i < m->n; i++)
        lane_init(&m->lanes[i], max_conns);
    m->pid = getpid();
    return m;
}

/* Marks w finished with cc and wakes its thread (none to wake when w is the driver's own).
 * Called with the lane's lock. */
static void finish_locked(struct waiter *w, CURLcode cc)
{
    w->cc = cc;
    w->done = true;
    pthread_cond_signal(&w->cv);
}

/* Adds the queued transfers to the multi handle. Called by the driver. */
static void take_queue(struct lane *l)
{
    pthread_mutex_lock(&l->lock);
    struct waiter *q = l->queue;
    l->queue = NULL;
    while (q) {
        struct waiter *next = q->next;
        if (curl_multi_add_handle(l->multi, q->h) != CURLM_OK) {
            finish_locked(q, CURLE_FAILED_INIT);
        } else {
            DLIST_PUSH(l->inflight, q);
        }
        q = next;
    }
    pthread_mutex_unlock(&l->lock);
}

/* Hands finished transfers back to their waiters. Called by the driver. */
static void reap(struct lane *l)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(l->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURL *h = msg->easy_handle;
        CURLcode cc = msg->data.result;
        struct waiter *w = NULL;
        curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&w);
        curl_multi_remove_handle(l->multi, h);
        pthread_mutex_lock(&l->lock);
        DLIST_REMOVE(l->inflight, w);
        finish_locked(w, cc);
        pthread_mutex_unlock(&l->lock);
    }
}

/* The driver leaves: the role goes to a waiter whose transfer is in flight, else to one
 * still queued, else the lane is left undriven. Called with the lane's lock. */
static void hand_off_locked(struct lane *l)
{
    struct waiter *next = l->inflight ? l->inflight : l->queue;
    if (!next) {
        l->driven = false;
        return;
    }
    next->drive = true;
    pthread_cond_signal(&next->cv);
}

/* Runs the lane as its driver until self's transfer is done, then hands the role on. */
static void drive(struct lane *l, struct waiter *self)
{
    for (;;) {
        take_queue(l);
        int running = 0;
        curl_multi_perform(l->multi, &running);
        reap(l);
        pthread_mutex_lock(&l->lock);
        if (self->done) {
            hand_off_locked(l);
            pthread_mutex_unlock(&l->lock);
            return;
        }
        pthread_mutex_unlock(&l->lock);
        /* A submission's wake-up ends the wait early; curl shortens it to its own timers.
         * A poll that fails at once (out of descriptors) must not spin the driver. */
        if (curl_multi_poll(l->multi, NULL, 0, 1000, NULL) != CURLM_OK)
            (void)usleep(1000);
    }
}

bool kube__mux_usable(const struct kube__mux *m)
{
    return m && m->pid == getpid();
}

CURLcode kube__mux_perform(struct kube__mux *m, CURL *h)
{
    struct lane *l = &m->lanes[atomic_fetch_add(&m->next, 1) % m->n];
    struct waiter w = {.h = h, .cc = CURLE_OK};
    /* Wait for a connection that can take one more stream rather than open another. */
    curl_easy_setopt(h, CURLOPT_PIPEWAIT, 1L);
    curl_easy_setopt(h, CURLOPT_PRIVATE, (char *)&w);
    pthread_cond_init(&w.cv, NULL);
    pthread_mutex_lock(&l->lock);
    w.next = l->queue;
    l->queue = &w;
    bool lead = !l->driven;
    l->driven = true;
    pthread_mutex_unlock(&l->lock);
    if (!lead) {
        curl_multi_wakeup(l->multi); /* the driver takes the queue */
        pthread_mutex_lock(&l->lock);
        while (!w.done && !w.drive)
            pthread_cond_wait(&w.cv, &l->lock);
        lead = w.drive; /* a driver hands the role only to a waiter not done */
        pthread_mutex_unlock(&l->lock);
    }
    if (lead)
        drive(l, &w);
    pthread_cond_destroy(&w.cv);
    curl_easy_setopt(h, CURLOPT_PRIVATE, NULL);
    return w.cc;
}

void kube__mux_free(struct kube__mux *m)
{
    if (!m)
        return;
    if (!kube__mux_usable(m))
        return; /* a fork child: the connections are the parent's; leave them alone */
    for (size_t i = 0; i < m->n; i++) {
        curl_multi_cleanup(m->lanes[i].multi);
        pthread_mutex_destroy(&m->lanes[i].lock);
    }
    xfree(m->lanes);
    xfree(m);
}
