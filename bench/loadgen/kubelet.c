/* SPDX-License-Identifier: Apache-2.0 */
/* A simulated kubelet for an API server without nodes: every new Pod of the namespace
 * is patched Running and Ready with a fake IP (one status write per Pod). */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "common/xalloc.h"
#include "kube/obj.h"
#include "kube/workqueue.h"
#include "lg.h"

#define LG_KUBELETS_MAX 32

struct lg_kubelet {
    struct kube_client *c;
    char *ns;
    struct kube_informer *inf;
    struct wq *q;
    pthread_t th[LG_KUBELETS_MAX];
    int n;
    atomic_uint next_ip;
};

static void mark_ready(struct lg_kubelet *k, const char *name)
{
    char now[64], ip[32];
    unsigned n = atomic_fetch_add(&k->next_ip, 1);
    struct kube_req r;
    json_t *p;
    clock_format_rfc3339_sec(clock_wall_now(), now, sizeof(now));
    (void)snprintf(ip, sizeof(ip), "10.%u.%u.%u", 100 + n / 62500 % 100, n / 250 % 250,
                   n % 250 + 1);
    p = json_pack("{s:{s:s, s:s, s:[{s:s}], s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}]}}", "status",
                  "phase", "Running", "podIP", ip, "podIPs", "ip", ip, "conditions", "type",
                  "PodScheduled", "status", "True", "lastTransitionTime", now, "type", "Ready",
                  "status", "True", "lastTransitionTime", now);
    kube_req_init(&r, "PATCH", &KUBE_RES_PODS);
    r.ns = k->ns;
    r.name = name;
    r.subresource = "status";
    r.body = p;
    r.patch_type = KUBE_PATCH_MERGE;
    (void)kube_request(k->c, &r, NULL, NULL);
    json_decref(p);
}

static void *worker(void *arg)
{
    struct lg_kubelet *k = arg;
    const char *key;
    while (wq_get(k->q, &key) == 0) {
        const char *slash = strchr(key, '/');
        mark_ready(k, slash ? slash + 1 : key);
        wq_done(k->q, key);
    }
    return NULL;
}

static void pod_seen(void *ctx, const json_t *pod)
{
    struct lg_kubelet *k = ctx;
    char key[512];
    if (kube_obj_path_str(pod, "status.podIP") || kube_obj_deleting(pod))
        return;
    if (kube_store_key(pod, key, sizeof(key)) == 0)
        wq_add(k->q, key);
}

static void pod_updated(void *ctx, const json_t *o, const json_t *n)
{
    (void)o;
    pod_seen(ctx, n);
}

int lg_kubelet_start(struct kube_client *c, const char *ns, int workers, struct lg_kubelet **ret)
{
    struct lg_kubelet *k = xcalloc(1, sizeof(*k));
    struct kube_informer_opts o = {
        .client = c, .res = &KUBE_RES_PODS, .ns = ns, .transform = kube_store_strip_transform};
    struct kube_informer_handlers h = {.on_add = pod_seen, .on_update = pod_updated, .ctx = k};
    struct wq_opts qo = {.name = "kubelet", .qps = -1};
    int r;
    k->c = c;
    k->ns = xstrdup(ns);
    k->n = workers < 1 ? 1 : workers > LG_KUBELETS_MAX ? LG_KUBELETS_MAX : workers;
    if ((r = wq_new(&qo, &k->q)) < 0 || (r = kube_informer_new(&o, &k->inf)) < 0 ||
        (r = kube_informer_add_handlers(k->inf, &h)) < 0 || (r = kube_informer_start(k->inf)) < 0)
        goto fail;
    for (int i = 0; i < k->n; i++)
        if (pthread_create(&k->th[i], NULL, worker, k) != 0) {
            k->n = i;
            r = -EAGAIN;
            goto fail;
        }
    *ret = k;
    return 0;
fail:
    lg_kubelet_stop(k);
    return r;
}

void lg_kubelet_stop(struct lg_kubelet *k)
{
    if (!k)
        return;
    kube_informer_free(k->inf);
    if (k->q)
        wq_shutdown(k->q);
    for (int i = 0; i < k->n; i++)
        pthread_join(k->th[i], NULL);
    wq_free(k->q);
    xfree(k->ns);
    xfree(k);
}
