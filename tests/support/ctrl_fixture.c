/* SPDX-License-Identifier: Apache-2.0 */
/* Objects, conditions and the simulated kubelet of the controller suites. */
#include "support/ctrl_fixture.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/xalloc.h"
#include "kube/informer.h"
#include "kube/obj.h"
#include "kube/store.h"
#include "kube/workqueue.h"
#include "support/apiserver.h"

#define IT_EXT_API_VERSION "extensions.agents.x-k8s.io/v1beta1"

json_t *it_obj_get(struct kube_client *c, const struct kube_res *res, const char *ns,
                   const char *name)
{
    json_t *o = NULL;
    if (kube_get(c, res, ns, name, &o, NULL) < 0)
        return NULL;
    return o;
}

int it_merge_patch(struct kube_client *c, const struct kube_res *res, const char *ns,
                   const char *name, const char *sub, json_t *patch, struct kube_err *reterr)
{
    struct kube_req r;
    kube_req_init(&r, "PATCH", res);
    r.ns = ns;
    r.name = name;
    r.subresource = sub;
    r.body = patch;
    r.patch_type = KUBE_PATCH_MERGE;
    return kube_request(c, &r, NULL, reterr);
}

int it_pod_ready(struct kube_client *c, const char *ns, const char *name, const char *ip,
                 struct kube_err *reterr)
{
    char now[64];
    json_t *p;
    int r;
    clock_format_rfc3339_sec(clock_wall_now(), now, sizeof(now));
    p = json_pack("{s:{s:s, s:s, s:[{s:s}], s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}]}}", "status",
                  "phase", "Running", "podIP", ip, "podIPs", "ip", ip, "conditions", "type",
                  "PodScheduled", "status", "True", "lastTransitionTime", now, "type", "Ready",
                  "status", "True", "lastTransitionTime", now);
    r = it_merge_patch(c, &KUBE_RES_PODS, ns, name, "status", p, reterr);
    json_decref(p);
    return r;
}

json_t *it_pool_new(const char *name, const char *tpl, int replicas)
{
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:i, s:{s:s}}}", "apiVersion", IT_EXT_API_VERSION,
                     "kind", "SandboxWarmPool", "metadata", "name", name, "spec", "replicas",
                     replicas, "sandboxTemplateRef", "name", tpl);
}

json_t *it_claim_new(const char *name, const char *pool)
{
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:s}}}", "apiVersion", IT_EXT_API_VERSION, "kind",
                     "SandboxClaim", "metadata", "name", name, "spec", "warmPoolRef", "name", pool);
}

/* ---- conditions --------------------------------------------------------------------- */

static bool str_is(const char *got, const char *want)
{
    return !want || (got && strcmp(got, want) == 0);
}

bool it_cond_match(const json_t *obj, const struct it_cond *want)
{
    const json_t *cd = obj ? kube_obj_condition(obj, want->type) : NULL;
    return cd && str_is(json_string_value(json_object_get(cd, "status")), want->status) &&
           str_is(json_string_value(json_object_get(cd, "reason")), want->reason);
}

struct cond_poll {
    struct kube_client *c;
    const char *ns;
    const struct it_cond *want;
};

static bool cond_met(void *ctx)
{
    struct cond_poll *p = ctx;
    json_t *o = it_obj_get(p->c, p->want->res, p->ns, p->want->name);
    bool ok = it_cond_match(o, p->want);
    json_decref(o);
    return ok;
}

int it_cond_wait(struct kube_client *c, const char *ns, const struct it_cond *want, usec_t timeout)
{
    struct cond_poll p = {c, ns, want};
    return it_wait(cond_met, &p, timeout);
}

/* ---- the simulated kubelet ---------------------------------------------------------- */

struct it_kubelet {
    struct it_kubelet_opts o;
    struct kube_informer *inf;
    struct wq *q;
    pthread_t threads[IT_KUBELET_MAX_WORKERS];
    unsigned nthreads;
    atomic_uint seq;
};

static int default_run(struct it_kubelet *k, const char *name, unsigned seq)
{
    char ip[64];
    struct kube_err e = {0};
    int r;
    (void)snprintf(ip, sizeof(ip), "%s.%u.%u", k->o.ip_prefix ? k->o.ip_prefix : "10.1",
                   (seq / 250) % 250, seq % 250 + 1);
    r = it_pod_ready(k->o.client, k->o.ns, name, ip, &e);
    return r < 0 && !kube_err_is_not_found(&e) ? r : 0;
}

static void *worker_main(void *arg)
{
    struct it_kubelet *k = arg;
    const char *key;
    while (wq_get(k->q, &key) == 0) {
        const char *slash = strchr(key, '/');
        const char *name = slash ? slash + 1 : key;
        unsigned seq = atomic_fetch_add(&k->seq, 1);
        int r = k->o.run ? k->o.run(k->o.ctx, name, seq) : default_run(k, name, seq);
        if (k->o.retry && r < 0)
            wq_add_rate_limited(k->q, key); /* the API server is away: try again */
        else if (k->o.retry)
            wq_forget(k->q, key);
        wq_done(k->q, key);
    }
    return NULL;
}

static void pod_seen(void *ctx, const json_t *pod)
{
    struct it_kubelet *k = ctx;
    char key[512];
    if (kube_obj_path_str(pod, "status.podIP") || (k->o.skip && k->o.skip(k->o.ctx, pod)))
        return;
    if (kube_store_key(pod, key, sizeof(key)) == 0)
        wq_add(k->q, key);
}

static void pod_updated(void *ctx, const json_t *old_obj, const json_t *new_obj)
{
    (void)old_obj;
    pod_seen(ctx, new_obj);
}

int it_kubelet_start(const struct it_kubelet_opts *o, struct it_kubelet **ret)
{
    struct kube_informer_opts io = {.client = o->client, .res = &KUBE_RES_PODS, .ns = o->ns};
    struct wq_opts qo = {.name = "kubelet", .qps = -1};
    struct it_kubelet *k;
    int r;

    if (o->workers < 1 || o->workers > IT_KUBELET_MAX_WORKERS)
        return -EINVAL;
    k = XNEW(struct it_kubelet);
    k->o = *o;
    struct kube_informer_handlers h = {.on_add = pod_seen, .on_update = pod_updated, .ctx = k};
    r = wq_new(&qo, &k->q);
    if (r >= 0)
        r = kube_informer_new(&io, &k->inf);
    if (r >= 0)
        r = kube_informer_add_handlers(k->inf, &h);
    if (r >= 0)
        r = kube_informer_start(k->inf);
    while (r >= 0 && k->nthreads < o->workers) {
        r = -pthread_create(&k->threads[k->nthreads], NULL, worker_main, k);
        if (r == 0)
            k->nthreads++;
    }
    if (r < 0)
        goto fail;
    *ret = k;
    return 0;
fail:
    it_kubelet_free(k);
    return r;
}

void it_kubelet_free(struct it_kubelet *k)
{
    if (!k)
        return;
    if (k->inf)
        kube_informer_stop(k->inf);
    if (k->q)
        wq_shutdown(k->q);
    for (unsigned i = 0; i < k->nthreads; i++)
        pthread_join(k->threads[i], NULL);
    kube_informer_free(k->inf);
    wq_free(k->q);
    xfree(k);
}

/* ---- lost answers ------------------------------------------------------------------- */

#define LOST_RULES 4

static struct {
    pthread_mutex_t lock;
    struct {
        char method[8], plural[64], url_part[256];
        int left;
        bool unsent; /* it_drop_requests: answered before sending */
    } rule[LOST_RULES];
    int n, done;
    char last_url[512]; /* of the last request a rule matched */
} lost = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* it_before_request's one rule. */
static struct {
    pthread_mutex_t lock;
    char method[8], plural[64], url_part[256];
    int skip;
    it_before_fn *fn; /* NULL: none armed */
    void *ctx;
} before = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Runs the armed it_before_request rule if the request about to be sent matches it. */
static void run_before(const char *method, const struct kube_res *res, const char *url)
{
    it_before_fn *fn = NULL;
    void *ctx = NULL;
    pthread_mutex_lock(&before.lock);
    if (before.fn && strcmp(method, before.method) == 0 &&
        strcmp(res->plural, before.plural) == 0 && url && strstr(url, before.url_part) &&
        before.skip-- == 0) {
        fn = before.fn;
        ctx = before.ctx;
        before.fn = NULL;
    }
    pthread_mutex_unlock(&before.lock);
    if (fn)
        fn(url, ctx);
}

int it_before_request(const char *method, const struct kube_res *res, const char *url_part,
                      int skip, it_before_fn *fn, void *ctx)
{
    int r = -EBUSY;
    pthread_mutex_lock(&before.lock);
    if (!before.fn) {
        (void)snprintf(before.method, sizeof(before.method), "%s", method);
        (void)snprintf(before.plural, sizeof(before.plural), "%s", res->plural);
        (void)snprintf(before.url_part, sizeof(before.url_part), "%s", url_part ? url_part : "");
        before.skip = skip;
        before.fn = fn;
        before.ctx = ctx;
        r = 0;
    }
    pthread_mutex_unlock(&before.lock);
    return r;
}

void it_before_cancel(void)
{
    pthread_mutex_lock(&before.lock);
    before.fn = NULL;
    pthread_mutex_unlock(&before.lock);
}

bool it_before_pending(void)
{
    pthread_mutex_lock(&before.lock);
    bool armed = before.fn != NULL;
    pthread_mutex_unlock(&before.lock);
    return armed;
}

long it_lose_answer(void *ctx, const char *method, const struct kube_res *res, const char *sub,
                    const char *url, long status)
{
    long r = 0;
    (void)ctx;
    if (!res || sub || (status != 0 && status / 100 != 2))
        return 0;
    pthread_mutex_lock(&lost.lock);
    for (int i = 0; i < lost.n && !r; i++) {
        if (lost.rule[i].left > 0 && lost.rule[i].unsent == (status == 0) &&
            strcmp(method, lost.rule[i].method) == 0 &&
            strcmp(res->plural, lost.rule[i].plural) == 0 && url &&
            strstr(url, lost.rule[i].url_part)) {
            lost.rule[i].left--;
            lost.done++;
            (void)snprintf(lost.last_url, sizeof(lost.last_url), "%s", url);
            r = 501;
        }
    }
    pthread_mutex_unlock(&lost.lock);
    if (r == 0 && status == 0)
        run_before(method, res, url); /* a request that is sent */
    return r;
}

static int add_rule(const char *method, const struct kube_res *res, const char *url_part, int n,
                    bool unsent)
{
    int r = -ENOSPC;
    pthread_mutex_lock(&lost.lock);
    if (lost.n < LOST_RULES) {
        (void)snprintf(lost.rule[lost.n].method, sizeof(lost.rule[0].method), "%s", method);
        (void)snprintf(lost.rule[lost.n].plural, sizeof(lost.rule[0].plural), "%s", res->plural);
        (void)snprintf(lost.rule[lost.n].url_part, sizeof(lost.rule[0].url_part), "%s",
                       url_part ? url_part : "");
        lost.rule[lost.n].unsent = unsent;
        lost.rule[lost.n++].left = n;
        r = 0;
    }
    pthread_mutex_unlock(&lost.lock);
    return r;
}

int it_drop_requests(const char *method, const struct kube_res *res, const char *url_part, int n)
{
    return add_rule(method, res, url_part, n, true);
}

void it_last_lost_url(char *out, size_t size)
{
    pthread_mutex_lock(&lost.lock);
    (void)snprintf(out, size, "%s", lost.last_url);
    pthread_mutex_unlock(&lost.lock);
}

int it_lose_answers(const char *method, const struct kube_res *res, const char *url_part, int n)
{
    return add_rule(method, res, url_part, n, false);
}

int it_answers_lost(void)
{
    int n;
    pthread_mutex_lock(&lost.lock);
    n = lost.done;
    lost.done = 0;
    lost.n = 0;
    pthread_mutex_unlock(&lost.lock);
    return n;
}
