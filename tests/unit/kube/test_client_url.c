/* SPDX-License-Identifier: Apache-2.0 */
/* Request URL building: paths, query parameters and their escaping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/res.h"
#include "kube/client.h"

static struct kube_client *client_for(const char *context)
{
    char path[2048];
    const char *d = getenv("AS_TEST_DATA");
    assert_non_null(d);
    (void)snprintf(path, sizeof(path), "%s/kube/kc-a.yaml:%s/kube/kc-b.yaml", d, d);
    setenv("KUBECONFIG", path, 1);
    struct kube_config *cfg = NULL;
    struct kube_client *c = NULL;
    assert_int_equal(kube_config_load(&(struct kube_config_opts){.context = context}, &cfg, NULL),
                     0);
    assert_int_equal(kube_client_new(cfg, NULL, &c), 0);
    return c;
}

static void expect_url(struct kube_client *c, const struct kube_req *r, const char *want)
{
    struct buf b;
    buf_init(&b, 16384);
    assert_int_equal(kube_req_url(c, r, &b), 0);
    assert_string_equal(buf_str(&b), want);
    buf_done(&b);
}

static void test_list_query(void **state)
{
    (void)state;
    struct kube_client *c = client_for(NULL);
    assert_string_equal(kube_client_namespace(c), "ns-a");
    struct kube_req r;
    kube_req_init(&r, "GET", &KUBE_RES_PODS);
    r.ns = "team a";
    r.label_selector = "app in (a,b),tier!=x&y=z#frag";
    r.field_selector = "status.phase=Running";
    r.limit = 500;
    r.continue_token = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTJ9+/=";
    expect_url(c, &r,
               "https://a.example:6443/api/v1/namespaces/team%20a/pods"
               "?labelSelector=app%20in%20%28a%2Cb%29%2Ctier%21%3Dx%26y%3Dz%23frag"
               "&fieldSelector=status.phase%3DRunning"
               "&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTJ9%2B%2F%3D&limit=500");
    kube_req_init(&r, "GET", &API_RES_SANDBOXES);
    r.watch = true;
    r.allow_watch_bookmarks = true;
    r.resource_version = "12345";
    r.resource_version_match = "NotOlderThan";
    r.timeout_seconds = 300;
    expect_url(c, &r,
               "https://a.example:6443/apis/agents.x-k8s.io/v1beta1/sandboxes"
               "?resourceVersion=12345&resourceVersionMatch=NotOlderThan&watch=true"
               "&allowWatchBookmarks=true&timeoutSeconds=300");
    kube_client_free(c);
}

static void test_write_query(void **state)
{
    (void)state;
    struct kube_client *c = client_for(NULL);
    struct kube_req r;
    kube_req_init(&r, "PATCH", &API_RES_SANDBOXCLAIMS);
    r.ns = "n";
    r.name = "c";
    r.subresource = "status";
    r.patch_type = KUBE_PATCH_APPLY;
    r.field_manager = "agent-sandbox/controller";
    r.force = true;
    r.dry_run = true;
    expect_url(c, &r,
               "https://a.example:6443/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/n/"
               "sandboxclaims/c/status?dryRun=All&fieldManager=agent-sandbox%2Fcontroller"
               "&force=true");
    r.patch_type = KUBE_PATCH_MERGE; /* force only means something to apply */
    r.dry_run = false;
    expect_url(c, &r,
               "https://a.example:6443/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/n/"
               "sandboxclaims/c/status?fieldManager=agent-sandbox%2Fcontroller");
    kube_client_free(c);
}

static void test_invalid(void **state)
{
    (void)state;
    struct kube_client *c = client_for(NULL);
    struct kube_req r;
    struct buf b;
    buf_init(&b, 16384);
    kube_req_init(&r, "GET", &KUBE_RES_PODS);
    r.name = "p"; /* a namespaced object needs a namespace */
    assert_int_equal(kube_req_url(c, &r, &b), -EINVAL);
    r.ns = "ns";
    r.name = "../../secrets";
    assert_int_equal(kube_req_url(c, &r, &b), -EINVAL);
    assert_int_equal(b.len, 0);
    kube_req_init(&r, "GET", &KUBE_RES_NAMESPACES);
    r.name = "kube-system"; /* cluster scope needs none */
    assert_int_equal(kube_req_url(c, &r, &b), 0);
    assert_string_equal(buf_str(&b), "https://a.example:6443/api/v1/namespaces/kube-system");
    buf_done(&b);
    /* kube_request refuses the same requests without sending anything */
    struct kube_err e;
    kube_req_init(&r, "GET", &KUBE_RES_PODS);
    r.ns = "ns";
    r.name = "";
    assert_int_equal(kube_request(c, &r, NULL, &e), -EINVAL);
    assert_non_null(e.message[0] ? e.message : NULL);
    kube_req_init(&r, "BREW", &KUBE_RES_PODS);
    assert_int_equal(kube_request(c, &r, NULL, &e), -EINVAL);
    struct kube_client_stats st;
    kube_client_stats(c, &st);
    assert_int_equal(st.requests, 0);
    kube_client_free(c);
}

static void test_raw_path(void **state)
{
    (void)state;
    struct kube_client *c = client_for(NULL);
    struct kube_req r;
    kube_req_init(&r, "GET", NULL);
    r.raw_path = "/version";
    expect_url(c, &r, "https://a.example:6443/version");
    r.raw_path = "/api/v1/namespaces/n/pods/p:8080/proxy/v1/health";
    r.timeout_seconds = 5;
    expect_url(c, &r,
               "https://a.example:6443/api/v1/namespaces/n/pods/p:8080/proxy/v1/health"
               "?timeoutSeconds=5");
    struct buf b;
    buf_init(&b, 16384);
    r.raw_path = "version"; /* must be absolute */
    assert_int_equal(kube_req_url(c, &r, &b), -EINVAL);
    buf_done(&b);
    kube_client_free(c);
}

static void test_tls_server_name(void **state)
{
    (void)state;
    struct kube_client *c = client_for("ctx-shared");
    struct kube_req r;
    kube_req_init(&r, "GET", &KUBE_RES_NAMESPACES);
    /* the URL names the TLS server name; curl is told to connect to the real host */
    expect_url(c, &r, "https://api.internal/api/v1/namespaces");
    kube_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_query), cmocka_unit_test(test_write_query),
        cmocka_unit_test(test_invalid),    cmocka_unit_test(test_tls_server_name),
        cmocka_unit_test(test_raw_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
