/* SPDX-License-Identifier: Apache-2.0 */
/* The resource table and URL path building with escaped segments. */
#include "kube/res.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/pct.h"
#include "kube/client_int.h"

#define RES(g, v, k, p, n)                                                \
    {                                                                     \
        .group = g, .version = v, .kind = k, .plural = p, .namespaced = n \
    }

const struct kube_res KUBE_RES_NAMESPACES = RES("", "v1", "Namespace", "namespaces", false);
const struct kube_res KUBE_RES_CONFIGMAPS = RES("", "v1", "ConfigMap", "configmaps", true);
const struct kube_res KUBE_RES_SECRETS = RES("", "v1", "Secret", "secrets", true);
const struct kube_res KUBE_RES_PODS = RES("", "v1", "Pod", "pods", true);
const struct kube_res KUBE_RES_SERVICES = RES("", "v1", "Service", "services", true);
const struct kube_res KUBE_RES_EVENTS = RES("", "v1", "Event", "events", true);
const struct kube_res KUBE_RES_PVCS =
    RES("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true);
const struct kube_res KUBE_RES_SERVICEACCOUNTS =
    RES("", "v1", "ServiceAccount", "serviceaccounts", true);
const struct kube_res KUBE_RES_LEASES = RES("coordination.k8s.io", "v1", "Lease", "leases", true);
const struct kube_res KUBE_RES_CRDS = RES("apiextensions.k8s.io", "v1", "CustomResourceDefinition",
                                          "customresourcedefinitions", false);
const struct kube_res KUBE_RES_NETWORKPOLICIES =
    RES("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", true);
const struct kube_res KUBE_RES_DEPLOYMENTS = RES("apps", "v1", "Deployment", "deployments", true);
const struct kube_res KUBE_RES_TOKENREVIEWS =
    RES("authentication.k8s.io", "v1", "TokenReview", "tokenreviews", false);
const struct kube_res KUBE_RES_SUBJECTACCESSREVIEWS =
    RES("authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews", false);

int kube_res_api_version(const struct kube_res *r, char *out, unsigned size)
{
    int n;
    if (!r->group || r->group[0] == '\0')
        n = snprintf(out, size, "%s", r->version);
    else
        n = snprintf(out, size, "%s/%s", r->group, r->version);
    if (n < 0 || (unsigned)n >= size)
        return -E2BIG;
    return 0;
}

/* A segment the server would route differently ("", ".", "..", or one with a slash)
 * is refused instead of escaped: %2F in a name is not a valid Kubernetes name. */
static bool segment_ok(const char *s)
{
    return s[0] != '\0' && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 && !strchr(s, '/');
}

static int put_segment(struct buf *out, const char *s)
{
    if (!segment_ok(s))
        return -EINVAL;
    int r = buf_putc(out, '/');
    if (r < 0)
        return r;
    return pct_encode(out, s, NULL);
}

static int put_prefix(const struct kube_res *res, struct buf *out)
{
    int r;
    if (!res->group || res->group[0] == '\0') {
        r = buf_puts(out, "/api");
    } else {
        r = buf_puts(out, "/apis");
        if (r >= 0)
            r = put_segment(out, res->group);
    }
    if (r >= 0)
        r = put_segment(out, res->version);
    return r;
}

int kube_res_path(const struct kube_res *res, const char *ns, const char *name,
                  const char *subresource, struct buf *out)
{
    if (!res || !res->plural || !res->version || (subresource && !name))
        return -EINVAL;
    size_t start = out->len;
    int r = put_prefix(res, out);
    if (r >= 0 && ns && res->namespaced) {
        r = buf_puts(out, "/namespaces");
        if (r >= 0)
            r = put_segment(out, ns);
    }
    if (r >= 0)
        r = put_segment(out, res->plural);
    if (r >= 0 && name)
        r = put_segment(out, name);
    if (r >= 0 && subresource)
        r = put_segment(out, subresource);
    if (r < 0) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
    }
    return r;
}
