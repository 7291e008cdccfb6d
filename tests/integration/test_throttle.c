/* SPDX-License-Identifier: Apache-2.0 */
/* 429 handling against the real kube-apiserver, made deterministic with API Priority and
 * Fairness: a FlowSchema routes the static-token user "as-throttled" into a priority
 * level with no nominal seats and no queuing, where exactly one request runs at a time
 * and every other one is rejected with 429 and Retry-After. One request holds that seat:
 * a ConfigMap create that a validating webhook keeps waiting (the webhook URL is a local
 * socket that never answers; failurePolicy Ignore lets the create succeed after the
 * webhook's 5 s timeout). While it waits, the test's requests get 429 at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "kube/client.h"
#include "kube/obj.h"
#include "kube/res.h"
#include "support/apiserver.h"

#define WAIT            (60 * USEC_PER_SEC)
#define WEBHOOK_TIMEOUT 5 /* seconds a held request keeps the seat */
#define USER            "as-throttled"

static const struct kube_res FLOWSCHEMAS = {"flowcontrol.apiserver.k8s.io", "v1", "FlowSchema",
                                            "flowschemas", false};
static const struct kube_res PRIORITYLEVELS = {"flowcontrol.apiserver.k8s.io", "v1",
                                               "PriorityLevelConfiguration",
                                               "prioritylevelconfigurations", false};
static const struct kube_res WEBHOOKS = {"admissionregistration.k8s.io", "v1",
                                         "ValidatingWebhookConfiguration",
                                         "validatingwebhookconfigurations", false};
static const struct kube_res ROLES = {"rbac.authorization.k8s.io", "v1", "Role", "roles", true};
static const struct kube_res ROLEBINDINGS = {"rbac.authorization.k8s.io", "v1", "RoleBinding",
                                             "rolebindings", true};

static struct kube_client *admin;
static char ns[64];
static int sink = -1; /* the webhook "server": listens, never accepts */

static void create(const struct kube_res *res, const char *in_ns, json_t *obj)
{
    struct kube_err err;
    IT_OK(kube_create(admin, res, in_ns, obj, NULL, &err), &err);
    json_decref(obj);
}

static void grant_configmaps(void)
{
    create(&ROLES, ns,
           json_pack("{s:s, s:s, s:{s:s}, s:[{s:[s], s:[s], s:[s, s, s]}]}", "apiVersion",
                     "rbac.authorization.k8s.io/v1", "kind", "Role", "metadata", "name", "cm",
                     "rules", "apiGroups", "", "resources", "configmaps", "verbs", "get", "list",
                     "create"));
    create(&ROLEBINDINGS, ns,
           json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:s}, s:[{s:s, s:s, s:s}]}", "apiVersion",
                     "rbac.authorization.k8s.io/v1", "kind", "RoleBinding", "metadata", "name",
                     "cm", "roleRef", "apiGroup", "rbac.authorization.k8s.io", "kind", "Role",
                     "name", "cm", "subjects", "kind", "User", "apiGroup",
                     "rbac.authorization.k8s.io", "name", USER));
}

/* Priority level without seats or queues, and the FlowSchema that sends USER there. */
static void create_flow_control(void)
{
    create(&PRIORITYLEVELS, NULL,
           json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:{s:i, s:i, s:i, s:{s:s}}}}", "apiVersion",
                     "flowcontrol.apiserver.k8s.io/v1", "kind", "PriorityLevelConfiguration",
                     "metadata", "name", ns, "spec", "type", "Limited", "limited",
                     "nominalConcurrencyShares", 0, "lendablePercent", 0, "borrowingLimitPercent",
                     0, "limitResponse", "type", "Reject"));
    json_t *rules = json_pack(
        "[{s:[{s:s, s:{s:s}}], s:[{s:[s], s:[s], s:[s], s:[s], s:b}], s:[{s:[s], s:[s]}]}]",
        "subjects", "kind", "User", "user", "name", USER, "resourceRules", "verbs", "*",
        "apiGroups", "*", "resources", "*", "namespaces", "*", "clusterScope", 1,
        "nonResourceRules", "verbs", "*", "nonResourceURLs", "*");
    create(&FLOWSCHEMAS, NULL,
           json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:s}, s:i, s:{s:s}, s:o}}", "apiVersion",
                     "flowcontrol.apiserver.k8s.io/v1", "kind", "FlowSchema", "metadata", "name",
                     ns, "spec", "priorityLevelConfiguration", "name", ns, "matchingPrecedence", 50,
                     "distinguisherMethod", "type", "ByUser", "rules", rules));
}

static int open_sink(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    sink = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(sink >= 0);
    assert_int_equal(bind(sink, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(sink, 64), 0);
    assert_int_equal(getsockname(sink, (struct sockaddr *)&sa, &len), 0);
    return ntohs(sa.sin_port);
}

static void create_webhook(int port)
{
    char url[64];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/hold", port);
    create(&WEBHOOKS, NULL,
           json_pack("{s:s, s:s, s:{s:s}, s:[{s:s, s:{s:s}, s:[{s:[s], s:[s], s:[s], s:[s], "
                     "s:s}], s:{s:{s:s}}, s:{s:{s:s}}, s:s, s:s, s:[s], s:i}]}",
                     "apiVersion", "admissionregistration.k8s.io/v1", "kind",
                     "ValidatingWebhookConfiguration", "metadata", "name", ns, "webhooks", "name",
                     "hold.integration.agent-sandbox.test", "clientConfig", "url", url, "rules",
                     "operations", "CREATE", "apiGroups", "", "apiVersions", "v1", "resources",
                     "configmaps", "scope", "Namespaced", "namespaceSelector", "matchLabels",
                     "kubernetes.io/metadata.name", ns, "objectSelector", "matchLabels",
                     "as-test/hold", "true", "failurePolicy", "Ignore", "sideEffects", "None",
                     "admissionReviewVersions", "v1", "timeoutSeconds", WEBHOOK_TIMEOUT));
}

static int setup(void **state)
{
    struct kube_err err;
    (void)state;
    IT_OK(it_client_new(NULL, &admin, &err), &err);
    IT_OK(it_ns_create(admin, "it-throttle", ns, sizeof(ns), &err), &err);
    grant_configmaps();
    create_flow_control();
    create_webhook(open_sink());
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    assert_int_equal(kube_delete(admin, &WEBHOOKS, NULL, ns, NULL), 0);
    assert_int_equal(kube_delete(admin, &FLOWSCHEMAS, NULL, ns, NULL), 0);
    assert_int_equal(kube_delete(admin, &PRIORITYLEVELS, NULL, ns, NULL), 0);
    assert_int_equal(it_ns_delete(admin, ns, WAIT), 0);
    close(sink);
    kube_client_free(admin);
    return 0;
}

/* The seat holder: creates labelled ConfigMaps as USER until one of them is held by the
 * webhook (the webhook configuration takes effect a moment after it is created). */
struct holder {
    struct kube_client *c;
    _Atomic usec_t since; /* start of the request in flight, 0 when none */
    int rc;
    bool held;
};

static void *hold_seat(void *arg)
{
    struct holder *h = arg;
    usec_t deadline = clock_now() + WAIT;
    char name[32];
    for (int i = 0; !h->held && h->rc >= 0 && clock_now() < deadline; i++) {
        snprintf(name, sizeof(name), "hold-%d", i);
        json_t *obj =
            json_pack("{s:s, s:s, s:{s:s, s:{s:s}}}", "apiVersion", "v1", "kind", "ConfigMap",
                      "metadata", "name", name, "labels", "as-test/hold", "true");
        usec_t t0 = clock_now();
        atomic_store(&h->since, t0);
        h->rc = kube_create(h->c, &KUBE_RES_CONFIGMAPS, ns, obj, NULL, NULL);
        atomic_store(&h->since, 0);
        h->held = clock_now() - t0 >= (WEBHOOK_TIMEOUT - 1) * USEC_PER_SEC;
        json_decref(obj);
    }
    return NULL;
}

/* True once the holder's request has run for a second: only a held one lasts that long. */
static bool seat_taken(void *ctx)
{
    struct holder *h = ctx;
    usec_t since = atomic_load(&h->since);
    return since && clock_now() - since > USEC_PER_SEC;
}

static int list_as_user(int max_retries, struct kube_client_stats *st, usec_t *took,
                        struct kube_err *err)
{
    struct kube_client_opts o = {.max_retries = max_retries};
    struct kube_client *c = NULL;
    IT_OK(it_client_new_user(USER, &o, &c, err), err);
    usec_t t0 = clock_now();
    json_t *list = NULL;
    int r = kube_list_all(c, &KUBE_RES_CONFIGMAPS, ns, NULL, &list, err);
    *took = clock_now() - t0;
    json_decref(list);
    kube_client_stats(c, st);
    kube_client_free(c);
    return r;
}

static void test_429_retry_after(void **state)
{
    struct holder h = {0};
    struct kube_err err;
    struct kube_client_stats st;
    usec_t took;
    pthread_t t;
    (void)state;

    IT_OK(it_client_new_user(USER, NULL, &h.c, &err), &err);
    assert_int_equal(pthread_create(&t, NULL, hold_seat, &h), 0);
    assert_int_equal(it_wait(seat_taken, &h, WAIT), 0);

    /* Without retries the 429 comes straight back, with its Retry-After. */
    assert_int_equal(list_as_user(0, &st, &took, &err), -EAGAIN);
    assert_true(kube_err_is_too_many_requests(&err));
    assert_int_equal(err.http_status, 429);
    assert_true(err.retry_after_s >= 1);
    assert_int_equal(st.requests, 1);
    assert_int_equal(st.retries, 0);

    /* With retries the client waits as told and succeeds once the seat is free. */
    IT_OK(list_as_user(-1, &st, &took, &err), &err);
    print_message("retried %lu times in %llu ms\n", st.retries,
                  (unsigned long long)(took / USEC_PER_MSEC));
    assert_true(st.retries >= 1);
    assert_int_equal(st.requests, st.retries + 1);
    if (took < st.retries * USEC_PER_SEC * 95 / 100)
        fail_msg("%lu retries in %llu ms: Retry-After (1 s) was not honoured", st.retries,
                 (unsigned long long)(took / USEC_PER_MSEC));

    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(h.held);
    assert_true(h.rc >= 0);
    kube_client_free(h.c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_429_retry_after),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
