/* SPDX-License-Identifier: Apache-2.0 */
/* Resource table and escaped URL paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>

#include "api/res.h"
#include "kube/res.h"

static void expect_path(const struct kube_res *res, const char *ns, const char *name,
                        const char *sub, const char *want)
{
    struct buf b;
    buf_init(&b, 4096);
    assert_int_equal(kube_res_path(res, ns, name, sub, &b), 0);
    assert_string_equal(buf_str(&b), want);
    buf_done(&b);
}

static void test_paths(void **state)
{
    (void)state;
    expect_path(&KUBE_RES_PODS, "default", "p", NULL, "/api/v1/namespaces/default/pods/p");
    expect_path(&KUBE_RES_PODS, NULL, NULL, NULL, "/api/v1/pods");
    expect_path(&KUBE_RES_NAMESPACES, "ignored", "ns1", NULL, "/api/v1/namespaces/ns1");
    expect_path(&KUBE_RES_LEASES, "kube-system", "l", NULL,
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l");
    expect_path(&API_RES_SANDBOXES, "a", "s", "status",
                "/apis/agents.x-k8s.io/v1beta1/namespaces/a/sandboxes/s/status");
    expect_path(&API_RES_SANDBOXWARMPOOLS, "a", "w", "scale",
                "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/a/sandboxwarmpools/w/scale");
    expect_path(&KUBE_RES_CRDS, NULL, "sandboxes.agents.x-k8s.io", NULL,
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                "sandboxes.agents.x-k8s.io");
    expect_path(&KUBE_RES_TOKENREVIEWS, NULL, NULL, NULL,
                "/apis/authentication.k8s.io/v1/tokenreviews");
}

static void test_hostile_segments(void **state)
{
    (void)state;
    expect_path(&KUBE_RES_CONFIGMAPS, "n s", "a?b#c&d=e%f", NULL,
                "/api/v1/namespaces/n%20s/configmaps/a%3Fb%23c%26d%3De%25f");
    expect_path(&KUBE_RES_CONFIGMAPS, "ns", "\xc3\xbc~._-", NULL,
                "/api/v1/namespaces/ns/configmaps/%C3%BC~._-");
    const char *bad[] = {"", ".", "..", "a/b", "../x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct buf b;
        buf_init(&b, 4096);
        assert_int_equal(buf_puts(&b, "keep"), 0);
        assert_int_equal(kube_res_path(&KUBE_RES_PODS, "ns", bad[i], NULL, &b), -EINVAL);
        assert_int_equal(kube_res_path(&KUBE_RES_PODS, bad[i], "x", NULL, &b), -EINVAL);
        assert_string_equal(buf_str(&b), "keep"); /* nothing half-written */
        buf_done(&b);
    }
    struct buf small;
    buf_init(&small, 10);
    assert_int_equal(kube_res_path(&KUBE_RES_PODS, "ns", "x", NULL, &small), -E2BIG);
    assert_int_equal(small.len, 0);
    buf_done(&small);
    /* a subresource without a name makes no sense */
    struct buf b;
    buf_init(&b, 100);
    assert_int_equal(kube_res_path(&KUBE_RES_PODS, "ns", NULL, "status", &b), -EINVAL);
    buf_done(&b);
}

static void test_api_version(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(kube_res_api_version(&KUBE_RES_PODS, out, sizeof(out)), 0);
    assert_string_equal(out, "v1");
    assert_int_equal(kube_res_api_version(&API_RES_SANDBOXCLAIMS, out, sizeof(out)), 0);
    assert_string_equal(out, "extensions.agents.x-k8s.io/v1beta1");
    assert_int_equal(kube_res_api_version(&API_RES_SANDBOXCLAIMS, out, 8), -E2BIG);
    assert_string_equal(API_RES_SANDBOXES.kind, "Sandbox");
    assert_true(KUBE_RES_EVENTS.namespaced);
    assert_false(KUBE_RES_SUBJECTACCESSREVIEWS.namespaced);
    assert_string_equal(KUBE_RES_DEPLOYMENTS.group, "apps");
    assert_string_equal(KUBE_RES_NETWORKPOLICIES.plural, "networkpolicies");
    assert_string_equal(KUBE_RES_PVCS.kind, "PersistentVolumeClaim");
    assert_string_equal(KUBE_RES_SERVICEACCOUNTS.plural, "serviceaccounts");
    assert_string_equal(API_RES_SANDBOXTEMPLATES.plural, "sandboxtemplates");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_hostile_segments),
        cmocka_unit_test(test_api_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
