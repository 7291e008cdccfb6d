/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox end to end against the real API server: version, get (table, wide,
 * json, yaml, name), errors and exit codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/wait.h>

#include "common/buf.h"
#include "kube/obj.h"
#include "support/apiserver.h"

static struct kube_client *client;
static char ns[64];

/* Runs kubectl-sandbox with args (a shell-quoted string) against the test API server;
 * stdout and stderr go into out; returns the exit code. */
static int run_cli(const char *args, struct buf *out)
{
    const char *bin = getenv("AS_BIN_DIR");
    assert_non_null(bin);
    char cmd[4096];
    int n = snprintf(cmd, sizeof(cmd), "'%s/kubectl-sandbox' --kubeconfig '%s' %s 2>&1", bin,
                     it_kubeconfig(), args);
    assert_true(n > 0 && (size_t)n < sizeof(cmd));
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char chunk[4096];
    size_t got;
    buf_reset(out);
    while ((got = fread(chunk, 1, sizeof(chunk), p)) > 0)
        assert_int_equal(buf_append(out, chunk, got), 0);
    int st = pclose(p);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void create_sandbox(const char *name, const char *ready)
{
    struct kube_err e;
    json_t *sb = json_pack("{s:s,s:s,s:{s:s},s:{s:{s:{s:[{s:s,s:s}]}}}}", "apiVersion",
                           "agents.x-k8s.io/v1beta1", "kind", "Sandbox", "metadata", "name", name,
                           "spec", "podTemplate", "spec", "containers", "name", "main", "image",
                           "localhost/agent-sandbox/runtime:dev");
    json_t *created = NULL;
    IT_OK(kube_create(client, &KUBE_RES_SANDBOXES, ns, sb, &created, &e), &e);
    json_decref(sb);
    if (ready) {
        json_t *st = json_pack("{s:[{s:s,s:s,s:s,s:s,s:s}],s:[s],s:s}", "conditions", "type",
                               "Ready", "status", ready, "reason", "DependenciesReady", "message",
                               "", "lastTransitionTime", "2026-01-01T00:00:00Z", "podIPs",
                               "10.244.0.7", "nodeName", "node-1");
        (void)json_object_set_new(created, "status", st);
        IT_OK(kube_update_status(client, &KUBE_RES_SANDBOXES, ns, created, NULL, &e), &e);
    }
    json_decref(created);
}

static int setup(void **state)
{
    (void)state;
    struct kube_err e;
    char path[1024];
    IT_OK(it_client_new(NULL, &client, &e), &e);
    const char *src = getenv("AS_SOURCE_DIR");
    assert_non_null(src);
    (void)snprintf(path, sizeof(path), "%s/api/crds/agents.x-k8s.io_sandboxes.yaml", src);
    IT_OK(it_crd_apply(client, path, 60 * USEC_PER_SEC, &e), &e);
    IT_OK(it_ns_create(client, "cli", ns, sizeof(ns), &e), &e);
    create_sandbox("alpha", "True");
    create_sandbox("beta", NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    (void)it_ns_delete(client, ns, 60 * USEC_PER_SEC);
    kube_client_free(client);
    return 0;
}

static void test_version(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(run_cli("version", &out), 0);
    assert_non_null(strstr(buf_str(&out), "Client Version: "));
    assert_non_null(strstr(buf_str(&out), "Server Version: v1."));
    buf_done(&out);
}

static void test_get_table(void **state)
{
    (void)state;
    struct buf out;
    char args[256];
    buf_init(&out, 1 << 20);
    (void)snprintf(args, sizeof(args), "get sandboxes -n %s", ns);
    assert_int_equal(run_cli(args, &out), 0);
    const char *s = buf_str(&out);
    assert_true(strncmp(s, "NAME", 4) == 0);
    assert_non_null(strstr(s, "READY"));
    assert_non_null(strstr(s, "\nalpha"));
    assert_non_null(strstr(s, "True"));
    assert_non_null(strstr(s, "DependenciesReady"));
    assert_non_null(strstr(s, "\nbeta"));
    /* wide adds node and IP from status */
    (void)snprintf(args, sizeof(args), "get sbx -o wide -n %s", ns);
    assert_int_equal(run_cli(args, &out), 0);
    assert_non_null(strstr(buf_str(&out), "10.244.0.7"));
    assert_non_null(strstr(buf_str(&out), "node-1"));
    /* -A prints the namespace column */
    assert_int_equal(run_cli("get sandboxes -A", &out), 0);
    assert_non_null(strstr(buf_str(&out), "NAMESPACE"));
    assert_non_null(strstr(buf_str(&out), ns));
    buf_done(&out);
}

static void test_get_formats(void **state)
{
    (void)state;
    struct buf out;
    char args[256];
    buf_init(&out, 1 << 20);
    (void)snprintf(args, sizeof(args), "get sandbox alpha -o json -n %s", ns);
    assert_int_equal(run_cli(args, &out), 0);
    json_t *o = json_loads(buf_str(&out), 0, NULL);
    assert_non_null(o);
    assert_string_equal(kube_obj_name(o), "alpha");
    assert_null(kube_obj_path(o, "metadata.managedFields"));
    json_decref(o);
    (void)snprintf(args, sizeof(args), "-n %s get sandboxes -o name", ns);
    assert_int_equal(run_cli(args, &out), 0);
    assert_string_equal(buf_str(&out), "sandbox.agents.x-k8s.io/alpha\n"
                                       "sandbox.agents.x-k8s.io/beta\n");
    (void)snprintf(args, sizeof(args), "get sbx beta -o yaml -n %s", ns);
    assert_int_equal(run_cli(args, &out), 0);
    assert_non_null(strstr(buf_str(&out), "kind: Sandbox\n"));
    assert_non_null(strstr(buf_str(&out), "  name: beta\n"));
    buf_done(&out);
}

static void test_errors(void **state)
{
    (void)state;
    struct buf out;
    char args[256];
    buf_init(&out, 1 << 20);
    (void)snprintf(args, sizeof(args), "get sandbox missing -n %s", ns);
    assert_int_equal(run_cli(args, &out), 1);
    assert_non_null(strstr(buf_str(&out), "sandbox \"missing\""));
    assert_non_null(strstr(buf_str(&out), "not found"));
    assert_int_equal(run_cli("get nonsense", &out), 2);
    assert_int_equal(run_cli("get sandboxes -o xml", &out), 2);
    assert_int_equal(run_cli("frobnicate", &out), 2);
    buf_done(&out);
    /* an unreadable kubeconfig is exit code 3 with the path in the message */
    FILE *p =
        popen("\"$AS_BIN_DIR/kubectl-sandbox\" --kubeconfig /nonexistent/kc get sbx 2>&1", "r");
    char line[512] = {0};
    assert_non_null(fgets(line, sizeof(line), p));
    int st = pclose(p);
    assert_int_equal(WEXITSTATUS(st), 3);
    assert_non_null(strstr(line, "/nonexistent/kc"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_get_table),
        cmocka_unit_test(test_get_formats),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
