/* SPDX-License-Identifier: Apache-2.0 */
/* Resources are described once in a table entry; paths are built from it. */
#pragma once

#include <stdbool.h>

#include "common/buf.h"

struct kube_res {
    const char *group;   /* "" for the core group */
    const char *version; /* "v1" */
    const char *kind;    /* "ConfigMap" */
    const char *plural;  /* "configmaps" */
    bool namespaced;
};

extern const struct kube_res KUBE_RES_NAMESPACES;
extern const struct kube_res KUBE_RES_CONFIGMAPS;
extern const struct kube_res KUBE_RES_SECRETS;
extern const struct kube_res KUBE_RES_PODS;
extern const struct kube_res KUBE_RES_SERVICES;
extern const struct kube_res KUBE_RES_EVENTS;
extern const struct kube_res KUBE_RES_PVCS;
extern const struct kube_res KUBE_RES_SERVICEACCOUNTS;
extern const struct kube_res KUBE_RES_LEASES;
extern const struct kube_res KUBE_RES_CRDS;
extern const struct kube_res KUBE_RES_NETWORKPOLICIES;
extern const struct kube_res KUBE_RES_DEPLOYMENTS;
extern const struct kube_res KUBE_RES_TOKENREVIEWS;
extern const struct kube_res KUBE_RES_SUBJECTACCESSREVIEWS;

/** "v1" or "group/version" into out (borrowed static storage is not used). */
int kube_res_api_version(const struct kube_res *r, char *out, unsigned size);
/** Appends the URL path for res (ns may be NULL for all namespaces or cluster scope;
 * name and subresource may be NULL), escaping every segment:
 * /api/v1/namespaces/NS/pods/NAME/status or /apis/G/V/... Returns 0 or -E2BIG/-EINVAL
 * (an empty or "."/".." segment, or a slash in a name, is -EINVAL). */
int kube_res_path(const struct kube_res *res, const char *ns, const char *name,
                  const char *subresource, struct buf *out);
