/* SPDX-License-Identifier: Apache-2.0 */
/* Integration test of --metrics-secure against the local API server: /metrics is HTTPS
 * only (with the self-signed certificate), answers 401 without or with a bad bearer
 * token, 403 to a user the SubjectAccessReview denies, 200 with the metrics to one a
 * ClusterRole grants get on the non-resource URL /metrics, and the plain listener it
 * sits behind asks for the token too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "controller/manager.h"
#include "kube/client.h"
#include "kube/res.h"
#include "support/apiserver.h"
#include "support/kube_fixture.h"

#define WAIT (60 * USEC_PER_SEC)

static const struct kube_res ROLES = {"rbac.authorization.k8s.io", "v1", "ClusterRole",
                                      "clusterroles", false};
static const struct kube_res BINDINGS = {"rbac.authorization.k8s.io", "v1", "ClusterRoleBinding",
                                         "clusterrolebindings", false};

static struct kube_client *c;
static struct ctrl_manager *mgr;
static char ns[64], role[80];

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    return buf_append(ctx, p, size * n) < 0 ? 0 : size * n;
}

/* GET https://127.0.0.1:<port>/metrics with token (NULL: none); returns the status. */
static long scrape(const char *token, struct buf *body)
{
    char url[64], auth[512];
    struct curl_slist *h = NULL;
    CURL *e = curl_easy_init();
    long status = 0;
    CURLcode rc;
    (void)snprintf(url, sizeof(url), "https://127.0.0.1:%u/metrics",
                   (unsigned)ctrl_manager_metrics_port(mgr));
    if (token) {
        (void)snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        h = curl_slist_append(h, auth);
    }
    buf_reset(body);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L); /* self-signed */
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, 30L);
    rc = curl_easy_perform(e);
    if (rc == CURLE_OK)
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    else
        print_message("curl: %s\n", curl_easy_strerror(rc));
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    return status;
}

static int group_setup(void **state)
{
    struct it_sandbox_ns_opts so = {.prefix = "secmet", .timeout = WAIT};
    struct kube_client_opts co = {.qps = 0};
    struct kube_err e = {0};
    (void)state;
    log_set_level(LOG_WARN);
    if (it_client_new(&co, &c, &e) < 0 || it_sandbox_ns_setup(c, &so, ns, sizeof(ns), &e) < 0) {
        fprintf(stderr, "setup failed: %s\n", e.message);
        return -1;
    }
    struct ctrl_opts o = {.client = c,
                          .workers = 1,
                          .ns = ns,
                          .metrics_addr = "127.0.0.1:0",
                          .metrics_secure = true,
                          .health_addr = "0"};
    if (ctrl_manager_new(&o, &mgr) < 0 || ctrl_manager_start(mgr) < 0 ||
        ctrl_manager_wait_synced(mgr, WAIT) < 0)
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    struct kube_err e;
    (void)state;
    ctrl_manager_free(mgr);
    if (role[0]) {
        (void)kube_delete(c, &BINDINGS, NULL, role, &e);
        (void)kube_delete(c, &ROLES, NULL, role, &e);
    }
    if (ns[0])
        (void)it_ns_delete(c, ns, 120 * USEC_PER_SEC);
    kube_client_free(c);
    return 0;
}

static void test_no_or_bad_token(void **state)
{
    struct buf b;
    (void)state;
    buf_init(&b, 1 << 20);
    assert_int_equal(scrape(NULL, &b), 401);
    assert_int_equal(scrape("not-a-token", &b), 401);
    buf_done(&b);
}

static void test_denied_then_granted(void **state)
{
    char token[256];
    struct buf b;
    struct kube_err e;
    json_t *obj;
    (void)state;
    buf_init(&b, 8 << 20);
    assert_int_equal(it_user_token("alice", token, sizeof(token)), 0);
    assert_int_equal(scrape(token, &b), 403);
    assert_int_equal(it_user_token("bob", token, sizeof(token)), 0);
    (void)snprintf(role, sizeof(role), "%s-metrics-reader", ns);
    obj = json_pack("{s:s, s:s, s:{s:s}, s:[{s:[s], s:[s]}]}", "apiVersion",
                    "rbac.authorization.k8s.io/v1", "kind", "ClusterRole", "metadata", "name", role,
                    "rules", "nonResourceURLs", "/metrics", "verbs", "get");
    IT_OK(kube_create(c, &ROLES, NULL, obj, NULL, &e), &e);
    json_decref(obj);
    obj = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:s}, s:[{s:s, s:s, s:s}]}", "apiVersion",
                    "rbac.authorization.k8s.io/v1", "kind", "ClusterRoleBinding", "metadata",
                    "name", role, "roleRef", "apiGroup", "rbac.authorization.k8s.io", "kind",
                    "ClusterRole", "name", role, "subjects", "kind", "User", "apiGroup",
                    "rbac.authorization.k8s.io", "name", "bob");
    IT_OK(kube_create(c, &BINDINGS, NULL, obj, NULL, &e), &e);
    json_decref(obj);
    /* RBAC reaches the authorizer's cache within a moment; bob was never cached. */
    long st = 0;
    for (usec_t end = clock_now() + WAIT; clock_now() < end; clock_sleep(200 * USEC_PER_MSEC))
        if ((st = scrape(token, &b)) == 200)
            break;
    assert_int_equal(st, 200);
    assert_non_null(strstr(buf_str(&b), "# TYPE controller_runtime_reconcile_total counter"));
    assert_non_null(strstr(buf_str(&b), "agent_sandbox_build_info{"));
    buf_done(&b);
}

static void test_admin_allowed(void **state)
{
    char token[256];
    struct buf b;
    (void)state;
    buf_init(&b, 8 << 20);
    assert_int_equal(it_user_token("admin", token, sizeof(token)), 0);
    assert_int_equal(scrape(token, &b), 200);
    assert_non_null(strstr(buf_str(&b), "workqueue_depth"));
    buf_done(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_or_bad_token),
        cmocka_unit_test(test_denied_then_granted),
        cmocka_unit_test(test_admin_allowed),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
