/* SPDX-License-Identifier: Apache-2.0 */
/* API clients for the creators and the parallel creation of a range of objects. */
#include <stdatomic.h>
#include <stdio.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "kube/config.h"
#include "lg.h"

#define LG_THREADS_MAX 256

int lg_clients_new(const struct lg_opts *o, struct lg_clients *ret)
{
    struct lg_clients cl = {.n = o->connections < 1 ? 1 : o->connections};
    struct kube_config_opts co = {.kubeconfig = o->kubeconfig};
    struct kube_client_opts ko = {.qps = 0, .max_retries = 3};
    struct kube_err e;
    int r = 0;
    cl.v = xcalloc((size_t)cl.n, sizeof(*cl.v));
    for (int i = 0; i < cl.n && r == 0; i++) {
        struct kube_config *cfg = NULL;
        if ((r = kube_config_load(&co, &cfg, &e)) == 0)
            r = kube_client_new(cfg, &ko, &cl.v[i]);
        if (r < 0)
            log_error("API client: %s", e.message);
    }
    if (r < 0) {
        lg_clients_free(&cl);
        return r;
    }
    *ret = cl;
    return 0;
}

void lg_clients_free(struct lg_clients *cl)
{
    for (int i = 0; cl->v && i < cl->n; i++)
        kube_client_free(cl->v[i]);
    xfree(cl->v);
    cl->v = NULL;
}

struct job {
    struct lg_clients *cl;
    const struct kube_res *res;
    const char *ns;
    struct lg_track *t;
    atomic_size_t next;
    size_t to;
    lg_obj_fn *fn;
    void *ctx;
};

static void *creator(void *arg)
{
    struct job *j = arg;
    size_t i;
    char name[96];
    while ((i = atomic_fetch_add(&j->next, 1)) < j->to) {
        struct kube_client *c = j->cl->v[i % (size_t)j->cl->n];
        struct lg_rec *rec = &j->t->recs[i];
        json_t *obj;
        int r;
        (void)snprintf(name, sizeof(name), "%s-%06zu", j->t->prefix, i);
        obj = j->fn(name, j->ctx);
        pthread_mutex_lock(&j->t->lock);
        rec->create = clock_now();
        pthread_mutex_unlock(&j->t->lock);
        r = kube_create(c, j->res, j->ns, obj, NULL, NULL);
        pthread_mutex_lock(&j->t->lock);
        rec->ack = clock_now();
        rec->failed = r < 0;
        pthread_mutex_unlock(&j->t->lock);
        json_decref(obj);
    }
    return NULL;
}

void lg_create_all(struct lg_clients *cl, const struct kube_res *res, const char *ns,
                   struct lg_track *t, size_t from, size_t to, int threads, lg_obj_fn *fn,
                   void *ctx)
{
    struct job j = {.cl = cl, .res = res, .ns = ns, .t = t, .to = to, .fn = fn, .ctx = ctx};
    pthread_t th[LG_THREADS_MAX];
    int n = threads < 1 ? 1 : threads > LG_THREADS_MAX ? LG_THREADS_MAX : threads, started = 0;
    atomic_init(&j.next, from);
    for (int i = 0; i < n; i++)
        started += pthread_create(&th[started], NULL, creator, &j) == 0;
    if (started == 0)
        (void)creator(&j);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
}
