/* SPDX-License-Identifier: Apache-2.0 */
/* The objects the load generator creates (namespace, template, pool, claims, Sandboxes)
 * and the waits of its untimed setup. */
#include <errno.h>
#include <string.h>

#include "api/res.h"
#include "common/log.h"
#include "kube/obj.h"
#include "lg.h"

#define EXT_API "extensions.agents.x-k8s.io/v1beta1"

int lg_ns_ensure(struct kube_client *c, const char *ns)
{
    json_t *o = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}}", "apiVersion", "v1", "kind", "Namespace",
                          "metadata", "name", ns, "labels", "agent-sandbox.bench/run", "true");
    struct kube_err e;
    int r = kube_create(c, &KUBE_RES_NAMESPACES, NULL, o, NULL, &e);
    json_decref(o);
    if (r == -EEXIST || (r < 0 && e.http_status == 409))
        r = 0;
    if (r < 0) {
        log_error("creating namespace %s: %s", ns, e.message);
        return r;
    }
    /* An API server without the service-account controller has no "default" one, and
     * pods need it. */
    o = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "ServiceAccount", "metadata",
                  "name", "default");
    r = kube_create(c, &KUBE_RES_SERVICEACCOUNTS, ns, o, NULL, &e);
    json_decref(o);
    return r == -EEXIST || (r < 0 && e.http_status == 409) ? 0 : r;
}

double lg_ns_delete(struct kube_client *c, const char *ns, usec_t wait)
{
    usec_t t0 = clock_now(), end = t0 + wait;
    (void)kube_delete(c, &KUBE_RES_NAMESPACES, NULL, ns, NULL);
    while (wait && clock_now() < end) {
        struct kube_err e;
        json_t *o = NULL;
        int r = kube_get(c, &KUBE_RES_NAMESPACES, NULL, ns, &o, &e);
        json_decref(o);
        if (r < 0 && kube_err_is_not_found(&e))
            return (double)(clock_now() - t0) / 1e6;
        clock_sleep(500 * USEC_PER_MSEC);
    }
    return wait ? -1 : 0;
}

/* The pod template: one container, kwok placement when asked. */
static json_t *pod_template(const struct lg_opts *o)
{
    json_t *spec = json_pack("{s:[{s:s, s:s, s:[{s:i}]}], s:b, s:i}", "containers", "name",
                             "runtime", "image", o->image, "ports", "containerPort", 8888,
                             "automountServiceAccountToken", 0, "terminationGracePeriodSeconds", 1);
    if (o->kwok) {
        json_object_set_new(spec, "nodeSelector", json_pack("{s:s}", "type", "kwok"));
        json_object_set_new(spec, "tolerations",
                            json_pack("[{s:s, s:s, s:s, s:s}]", "key", "kwok.x-k8s.io/node",
                                      "operator", "Equal", "value", "fake", "effect",
                                      "NoSchedule"));
    }
    return json_pack("{s:{s:{s:s}}, s:o}", "metadata", "labels", "agent-sandbox.bench/app",
                     "loadgen", "spec", spec);
}

static int create_obj(struct kube_client *c, const struct kube_res *res, const char *ns,
                      json_t *obj)
{
    struct kube_err e;
    int r = kube_create(c, res, ns, obj, NULL, &e);
    if (r < 0)
        log_error("creating %s %s: %s", res->plural, kube_obj_name(obj), e.message);
    json_decref(obj);
    return r;
}

int lg_template_create(struct kube_client *c, const struct lg_opts *o, const char *name)
{
    json_t *t = json_pack("{s:s, s:s, s:{s:s}, s:{s:o, s:s}}", "apiVersion", EXT_API, "kind",
                          "SandboxTemplate", "metadata", "name", name, "spec", "podTemplate",
                          pod_template(o), "networkPolicyManagement", "Unmanaged");
    return create_obj(c, &API_RES_SANDBOXTEMPLATES, o->ns, t);
}

int lg_pool_create(struct kube_client *c, const struct lg_opts *o, const char *name,
                   const char *tpl, long replicas)
{
    json_t *p = json_pack("{s:s, s:s, s:{s:s}, s:{s:I, s:{s:s}}}", "apiVersion", EXT_API, "kind",
                          "SandboxWarmPool", "metadata", "name", name, "spec", "replicas",
                          (json_int_t)replicas, "sandboxTemplateRef", "name", tpl);
    return create_obj(c, &API_RES_SANDBOXWARMPOOLS, o->ns, p);
}

int lg_pool_wait(struct kube_client *c, const char *ns, const char *name, long n, usec_t timeout)
{
    usec_t end = clock_now() + timeout;
    while (clock_now() < end) {
        json_t *p = NULL;
        if (kube_get(c, &API_RES_SANDBOXWARMPOOLS, ns, name, &p, NULL) == 0) {
            const json_t *rr = kube_obj_path(p, "status.readyReplicas");
            long ready = json_is_integer(rr) ? (long)json_integer_value(rr) : 0;
            json_decref(p);
            if (ready >= n)
                return 0;
        }
        clock_sleep(200 * USEC_PER_MSEC);
    }
    return -ETIMEDOUT;
}

json_t *lg_claim_obj(const char *name, const char *pool)
{
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:s}}}", "apiVersion", EXT_API, "kind",
                     "SandboxClaim", "metadata", "name", name, "spec", "warmPoolRef", "name", pool);
}

json_t *lg_sandbox_obj(const struct lg_opts *o, const char *name)
{
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:o}}", "apiVersion", "agents.x-k8s.io/v1beta1",
                     "kind", "Sandbox", "metadata", "name", name, "spec", "podTemplate",
                     pod_template(o));
}
