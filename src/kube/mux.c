/* SPDX-License-Identifier: Apache-2.0 */
/* The request multiplexer (mux.h): lanes, each a queue of submitted transfers and one I/O
 * thread that adds them to its curl multi handle, drives it and hands each result back to
 * the thread that waits for it. Transfers go to the lanes in turn. */
#include "kube/mux.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "common/xalloc.h"

/* One submitted transfer; lives on the stack of the thread waiting for it. */
struct waiter {
    CURL *h;
    CURLcode cc;
    bool done;
    pthread_cond_t cv;
    struct waiter *next; /* submission queue */
};

struct lane {
    CURLM *multi;
    pthread_mutex_t lock; /* queue, started, stop, the waiters' done flags */
    struct waiter *queue; /* submitted, not yet added to multi (LIFO: order is free) */
    bool started, stop;
    pthread_t thread;
};

struct kube__mux {
    struct lane *lanes;
    size_t n;
    atomic_uint next; /* the lane of the next transfer, modulo n */
    pid_t pid;        /* of the process that made it: a fork child has no I/O thread */
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

static void finish(struct lane *l, struct waiter *w, CURLcode cc)
{
    pthread_mutex_lock(&l->lock);
    w->cc = cc;
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&l->lock);
}

/* Adds the queued transfers to the multi handle. Called on the I/O thread. Returns
 * whether the lane is to stop. */
static bool take_queue(struct lane *l)
{
    pthread_mutex_lock(&l->lock);
    struct waiter *q = l->queue;
    bool stop = l->stop;
    l->queue = NULL;
    pthread_mutex_unlock(&l->lock);
    while (q) {
        struct waiter *next = q->next;
        if (curl_multi_add_handle(l->multi, q->h) != CURLM_OK)
            finish(l, q, CURLE_FAILED_INIT);
        q = next;
    }
    return stop;
}

/* Hands finished transfers back to their waiters. Called on the I/O thread. */
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
        finish(l, w, cc);
    }
}

static void *io_main(void *arg)
{
    struct lane *l = arg;
    while (!take_queue(l)) {
        int running = 0;
        curl_multi_perform(l->multi, &running);
        reap(l);
        /* A submission's or kube__mux_free's wake-up ends the wait early. */
        curl_multi_poll(l->multi, NULL, 0, 1000, NULL);
    }
    return NULL;
}

/* Starts the lane's I/O thread once; false when it could not start now (out of threads
 * for a moment: the next request tries again, so one failure does not fail the lane for
 * good). Called with the lane's lock. */
static bool ensure_started(struct lane *l)
{
    if (!l->started && pthread_create(&l->thread, NULL, io_main, l) == 0)
        l->started = true;
    return l->started;
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
    if (!ensure_started(l)) {
        pthread_mutex_unlock(&l->lock);
        pthread_cond_destroy(&w.cv);
        return CURLE_FAILED_INIT;
    }
    w.next = l->queue;
    l->queue = &w;
    pthread_mutex_unlock(&l->lock);
    curl_multi_wakeup(l->multi);
    pthread_mutex_lock(&l->lock);
    while (!w.done)
        pthread_cond_wait(&w.cv, &l->lock);
    pthread_mutex_unlock(&l->lock);
    pthread_cond_destroy(&w.cv);
    curl_easy_setopt(h, CURLOPT_PRIVATE, NULL);
    return w.cc;
}

static void lane_done(struct lane *l)
{
    pthread_mutex_lock(&l->lock);
    l->stop = true;
    bool started = l->started;
    pthread_mutex_unlock(&l->lock);
    if (started) {
        curl_multi_wakeup(l->multi);
        pthread_join(l->thread, NULL);
    }
    curl_multi_cleanup(l->multi);
    pthread_mutex_destroy(&l->lock);
}

void kube__mux_free(struct kube__mux *m)
{
    if (!m)
        return;
    if (!kube__mux_usable(m))
        return; /* a fork child: the connections are the parent's; leave them alone */
    for (size_t i = 0; i < m->n; i++)
        lane_done(&m->lanes[i]);
    xfree(m->lanes);
    xfree(m);
}
