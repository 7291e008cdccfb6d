/* SPDX-License-Identifier: Apache-2.0 */
/* Group setup and teardown of the integration suites. */
#include "support/kube_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>

#include "kube/res.h"
#include "support/apiserver.h"

#define IT_FIXTURE_WAIT (60 * USEC_PER_SEC)

const struct kube_res IT_RES_WIDGETS = {
    .group = "testing.agents.x-k8s.io",
    .version = "v1",
    .kind = "Widget",
    .plural = "widgets",
    .namespaced = true,
};

void it_fixture_setup(const char *prefix, const char *crd, struct kube_client **ret_client,
                      char *ns, size_t size)
{
    struct kube_err err = {0};
    char path[1024];
    IT_OK(it_client_new(NULL, ret_client, &err), &err);
    IT_OK(it_ns_create(*ret_client, prefix, ns, size, &err), &err);
    if (!crd)
        return;
    IT_OK(it_data_path(crd, path, sizeof(path)), &err);
    IT_OK(it_crd_apply(*ret_client, path, IT_FIXTURE_WAIT, &err), &err);
}

void it_fixture_teardown(struct kube_client *client, const char *ns, const char *crd_name)
{
    assert_int_equal(it_ns_delete(client, ns, IT_FIXTURE_WAIT), 0);
    if (crd_name) {
        assert_int_equal(kube_delete(client, &KUBE_RES_CRDS, NULL, crd_name, NULL), 0);
        assert_int_equal(it_wait_gone(client, &KUBE_RES_CRDS, NULL, crd_name, IT_FIXTURE_WAIT), 0);
    }
    kube_client_free(client);
}

int it_sandbox_crds_apply(struct kube_client *c, bool extensions, usec_t timeout,
                          struct kube_err *reterr)
{
    static const char *const files[] = {"agents.x-k8s.io_sandboxes.yaml",
                                        "extensions.agents.x-k8s.io_sandboxtemplates.yaml",
                                        "extensions.agents.x-k8s.io_sandboxwarmpools.yaml",
                                        "extensions.agents.x-k8s.io_sandboxclaims.yaml"};
    size_t n = extensions ? sizeof(files) / sizeof(files[0]) : 1;
    char rel[256], path[1024];
    int r;

    for (size_t i = 0; i < n; i++) {
        (void)snprintf(rel, sizeof(rel), "../../api/crds/%s", files[i]);
        r = it_data_path(rel, path, sizeof(path));
        if (r < 0)
            return r;
        r = it_crd_apply(c, path, timeout, reterr);
        if (r < 0)
            return r;
    }
    return 0;
}

int it_default_sa_create(struct kube_client *c, const char *ns, struct kube_err *reterr)
{
    struct kube_err e = {0};
    json_t *sa = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "ServiceAccount",
                           "metadata", "name", "default");
    int r = kube_create(c, &KUBE_RES_SERVICEACCOUNTS, ns, sa, NULL, &e);
    json_decref(sa);
    if (r < 0 && kube_err_is_already_exists(&e))
        r = 0;
    if (r < 0 && reterr)
        *reterr = e;
    return r;
}

int it_sandbox_ns_setup(struct kube_client *c, const struct it_sandbox_ns_opts *o, char *ns,
                        size_t size, struct kube_err *reterr)
{
    int r = it_sandbox_crds_apply(c, o->extensions, o->timeout, reterr);
    if (r < 0)
        return r;
    r = it_ns_create(c, o->prefix, ns, size, reterr);
    if (r < 0 || !o->default_sa)
        return r;
    return it_default_sa_create(c, ns, reterr);
}
