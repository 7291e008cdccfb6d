/* SPDX-License-Identifier: Apache-2.0 */
/* Lean Pod cache transform. */
#include "controller/pod_transform.h"

#include <stdbool.h>
#include <string.h>

#include "kube/store.h"

static void keep_only(json_t *obj, const char *const *keys)
{
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(obj, tmp, k, v)
    {
        bool keep = false;
        for (const char *const *p = keys; *p && !keep; p++)
            keep = strcmp(*p, k) == 0;
        if (!keep)
            json_object_del(obj, k);
    }
}

void ctrl_pod_transform(void *ctx, json_t *obj)
{
    static const char *const spec_keys[] = {"nodeName", NULL};
    static const char *const status_keys[] = {"phase", "conditions", "podIP", "podIPs", NULL};
    json_t *spec = json_object_get(obj, "spec");
    json_t *status = json_object_get(obj, "status");
    json_t *meta = json_object_get(obj, "metadata");
    kube_store_strip_transform(ctx, obj);
    json_object_del(meta, "finalizers");
    if (json_is_object(spec))
        keep_only(spec, spec_keys);
    if (json_is_object(status))
        keep_only(status, status_keys);
}
