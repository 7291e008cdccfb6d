/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox end to end against the real API server: version, get (table, wide,
 * json, yaml, name), list, pools, create, claim, suspend/resume/delete with --wait,
 * describe (also as a user who may read only Sandboxes), errors and exit codes. The
 * test plays the controller where a command waits for status (there is none in this
 * cluster). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/wait.h>

#include "api/res.h"
#include "common/buf.h"
#include "common/xalloc.h"
#include "kube/obj.h"
#include "support/apiserver.h"
#include "support/cli_run.h"
#include "support/kube_fixture.h"

static const struct kube_res ROLES = {"rbac.authorization.k8s.io", "v1", "Role", "roles", true};
static const struct kube_res ROLEBINDINGS = {"rbac.authorization.k8s.io", "v1", "RoleBinding",
                                             "rolebindings", true};

static struct kube_client *client;
static char ns[64];

/* Starts kubectl-sandbox with arguments (shell syntax) formatted from fmt; finish it with
 * it_cli_finish. */
static FILE *start_cli(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static FILE *start_cli(const char *fmt, ...)
{
    char args[512];
    FILE *p = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof(args));
    assert_int_equal(it_cli_start(args, &p), 0);
    return p;
}

static void create_sandbox(const char *name, const char *ready)
{
    struct kube_err e;
    json_t *sb = json_pack("{s:s,s:s,s:{s:s},s:{s:{s:{s:[{s:s,s:s}]}}}}", "apiVersion",
                           "agents.x-k8s.io/v1beta1", "kind", "Sandbox", "metadata", "name", name,
                           "spec", "podTemplate", "spec", "containers", "name", "main", "image",
                           "localhost/agent-sandbox/runtime:dev");
    json_t *created = NULL;
    IT_OK(kube_create(client, &API_RES_SANDBOXES, ns, sb, &created, &e), &e);
    json_decref(sb);
    if (ready) {
        json_t *st = json_pack("{s:[{s:s,s:s,s:s,s:s,s:s}],s:[s],s:s}", "conditions", "type",
                               "Ready", "status", ready, "reason", "DependenciesReady", "message",
                               "", "lastTransitionTime", "2026-01-01T00:00:00Z", "podIPs",
                               "10.244.0.7", "nodeName", "node-1");
        (void)json_object_set_new(created, "status", st);
        IT_OK(kube_update_status(client, &API_RES_SANDBOXES, ns, created, NULL, &e), &e);
    }
    json_decref(created);
}

static int setup(void **state)
{
    (void)state;
    struct kube_err e;
    struct it_sandbox_ns_opts o = {
        .prefix = "cli", .extensions = true, .timeout = 60 * USEC_PER_SEC};
    IT_OK(it_client_new(NULL, &client, &e), &e);
    IT_OK(it_sandbox_ns_setup(client, &o, ns, sizeof(ns), &e), &e);
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
    assert_int_equal(it_cli_run("version", &out), 0);
    assert_non_null(strstr(buf_str(&out), "Client Version: "));
    assert_non_null(strstr(buf_str(&out), "Server Version: v1."));
    buf_done(&out);
}

static void test_get_table(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(it_cli_runf(&out, "get sandboxes -n %s", ns), 0);
    const char *s = buf_str(&out);
    assert_true(strncmp(s, "NAME", 4) == 0);
    assert_non_null(strstr(s, "READY"));
    assert_non_null(strstr(s, "\nalpha"));
    assert_non_null(strstr(s, "True"));
    assert_non_null(strstr(s, "DependenciesReady"));
    assert_non_null(strstr(s, "\nbeta"));
    /* wide adds node and IP from status */
    assert_int_equal(it_cli_runf(&out, "get sbx -o wide -n %s", ns), 0);
    assert_non_null(strstr(buf_str(&out), "10.244.0.7"));
    assert_non_null(strstr(buf_str(&out), "node-1"));
    /* -A prints the namespace column */
    assert_int_equal(it_cli_run("get sandboxes -A", &out), 0);
    assert_non_null(strstr(buf_str(&out), "NAMESPACE"));
    assert_non_null(strstr(buf_str(&out), ns));
    buf_done(&out);
}

static void test_get_formats(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(it_cli_runf(&out, "get sandbox alpha -o json -n %s", ns), 0);
    json_t *o = json_loads(buf_str(&out), 0, NULL);
    assert_non_null(o);
    assert_string_equal(kube_obj_name(o), "alpha");
    assert_null(kube_obj_path(o, "metadata.managedFields"));
    json_decref(o);
    assert_int_equal(it_cli_runf(&out, "-n %s get sandboxes -o name", ns), 0);
    assert_string_equal(buf_str(&out), "sandbox.agents.x-k8s.io/alpha\n"
                                       "sandbox.agents.x-k8s.io/beta\n");
    assert_int_equal(it_cli_runf(&out, "get sbx beta -o yaml -n %s", ns), 0);
    assert_non_null(strstr(buf_str(&out), "kind: Sandbox\n"));
    assert_non_null(strstr(buf_str(&out), "  name: beta\n"));
    buf_done(&out);
}

static void test_errors(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(it_cli_runf(&out, "get sandbox missing -n %s", ns), 1);
    assert_non_null(strstr(buf_str(&out), "sandbox \"missing\""));
    assert_non_null(strstr(buf_str(&out), "not found"));
    assert_int_equal(it_cli_run("get nonsense", &out), 2);
    assert_int_equal(it_cli_run("get sandboxes -o xml", &out), 2);
    assert_int_equal(it_cli_run("frobnicate", &out), 2);
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

/* Sets status (taken) on object ns/name of res through the status subresource. */
static void set_status(const struct kube_res *res, const char *name, json_t *status)
{
    struct kube_err e;
    json_t *o = NULL;
    IT_OK(kube_get(client, res, ns, name, &o, &e), &e);
    (void)json_object_set_new(o, "status", status);
    IT_OK(kube_update_status(client, res, ns, o, NULL, &e), &e);
    json_decref(o);
}

static json_t *cond(const char *type, const char *status, const char *reason)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:s}", "type", type, "status", status, "reason", reason,
                     "message", "set by the test", "lastTransitionTime", "2026-01-01T00:00:00Z");
}

static void create_template_and_pool(void)
{
    struct kube_err e;
    json_t *t = json_pack("{s:s,s:s,s:{s:s},s:{s:{s:{s:[{s:s,s:s}]}},s:b}}", "apiVersion",
                          "extensions.agents.x-k8s.io/v1beta1", "kind", "SandboxTemplate",
                          "metadata", "name", "tmpl", "spec", "podTemplate", "spec", "containers",
                          "name", "main", "image", "busybox", "service", 1);
    IT_OK(kube_create(client, &API_RES_SANDBOXTEMPLATES, ns, t, NULL, &e), &e);
    json_decref(t);
    json_t *p =
        json_pack("{s:s,s:s,s:{s:s},s:{s:i,s:{s:s}}}", "apiVersion",
                  "extensions.agents.x-k8s.io/v1beta1", "kind", "SandboxWarmPool", "metadata",
                  "name", "py", "spec", "replicas", 3, "sandboxTemplateRef", "name", "tmpl");
    IT_OK(kube_create(client, &API_RES_SANDBOXWARMPOOLS, ns, p, NULL, &e), &e);
    json_decref(p);
    set_status(&API_RES_SANDBOXWARMPOOLS, "py",
               json_pack("{s:i,s:i}", "replicas", 3, "readyReplicas", 2));
}

static void test_list_and_pools(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(it_cli_runf(&out, "list -n %s", ns), 0);
    char h[6][16];
    assert_int_equal(
        sscanf(buf_str(&out), "%15s %15s %15s %15s %15s %15s", h[0], h[1], h[2], h[3], h[4], h[5]),
        6);
    assert_string_equal(h[0], "NAME");
    assert_string_equal(h[3], "POD");
    assert_string_equal(h[4], "NODE");
    assert_string_equal(h[5], "AGE");
    /* alpha: Ready, no pod-name annotation (the pod is named after it), on node-1 */
    char row[6][64];
    const char *alpha = strstr(buf_str(&out), "\nalpha");
    assert_non_null(alpha);
    assert_int_equal(sscanf(alpha + 1, "%63s %63s %63s %63s %63s %63s", row[0], row[1], row[2],
                            row[3], row[4], row[5]),
                     6);
    assert_string_equal(row[1], "True");
    assert_string_equal(row[2], "DependenciesReady");
    assert_string_equal(row[3], "alpha");
    assert_string_equal(row[4], "node-1");
    create_template_and_pool();
    assert_int_equal(it_cli_runf(&out, "pools -n %s", ns), 0);
    const char *py = strstr(buf_str(&out), "\npy");
    assert_non_null(py);
    assert_int_equal(sscanf(py + 1, "%63s %63s %63s %63s", row[0], row[1], row[2], row[3]), 4);
    assert_string_equal(row[1], "tmpl");
    assert_string_equal(row[2], "3"); /* desired */
    assert_string_equal(row[3], "2"); /* ready */
    buf_done(&out);
}

static void test_create(void **state)
{
    (void)state;
    struct buf out;
    struct kube_err e;
    buf_init(&out, 1 << 20);
    assert_int_equal(it_cli_runf(&out, "create fromtmpl --template tmpl -n %s", ns), 0);
    assert_string_equal(buf_str(&out), "sandbox.agents.x-k8s.io/fromtmpl created\n");
    json_t *sb = NULL;
    IT_OK(kube_get(client, &API_RES_SANDBOXES, ns, "fromtmpl", &sb, &e), &e);
    const json_t *ctr = json_array_get(kube_obj_path(sb, "spec.podTemplate.spec.containers"), 0);
    assert_string_equal(json_string_value(json_object_get(ctr, "image")), "busybox");
    assert_true(
        json_is_false(kube_obj_path(sb, "spec.podTemplate.spec.automountServiceAccountToken")));
    assert_true(json_is_true(kube_obj_path(sb, "spec.service")));
    json_decref(sb);
    assert_int_equal(it_cli_runf(&out, "create x --template nope -n %s", ns), 1);
    assert_non_null(strstr(buf_str(&out), "sandbox template \"nope\" not found"));
    /* a file with two documents */
    char path[] = "/tmp/cli-create-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: fromfile\n"
               "spec:\n  podTemplate:\n    spec:\n      containers:\n      - name: m\n"
               "        image: busybox\n---\n# a comment\n---\n"
               "apiVersion: v1\nkind: List\nitems:\n"
               "- apiVersion: extensions.agents.x-k8s.io/v1beta1\n  kind: SandboxClaim\n"
               "  metadata: {name: fileclaim}\n  spec: {warmPoolRef: {name: py}}\n");
    fclose(f);
    assert_int_equal(it_cli_runf(&out, "create -f %s -n %s", path, ns), 0);
    assert_non_null(strstr(buf_str(&out), "sandboxes.agents.x-k8s.io/fromfile created"));
    assert_non_null(strstr(buf_str(&out), "sandboxclaims.extensions.agents.x-k8s.io/fileclaim"));
    IT_OK(kube_get(client, &API_RES_SANDBOXCLAIMS, ns, "fileclaim", NULL, &e), &e);
    /* the same again: AlreadyExists is exit 1 and names the object */
    assert_int_equal(it_cli_runf(&out, "create -f %s -n %s", path, ns), 1);
    assert_non_null(strstr(buf_str(&out), "Sandbox \"fromfile\""));
    unlink(path);
    assert_int_equal(it_cli_runf(&out, "create onlyname -n %s", ns), 2);
    /* -o is checked before anything is created (before: --pool skipped the check) */
    assert_int_equal(it_cli_runf(&out, "create bogus1 --pool py -o bogus -n %s", ns), 2);
    assert_non_null(strstr(buf_str(&out), "unknown output format \"bogus\" for this command "
                                          "(json, yaml, name)"));
    assert_int_equal(kube_get(client, &API_RES_SANDBOXCLAIMS, ns, "bogus1", NULL, &e), -ENOENT);
    assert_int_equal(it_cli_runf(&out, "create bogus2 --template tmpl -o json -n %s", ns), 2);
    assert_non_null(strstr(buf_str(&out), "takes no output format (-o json)"));
    assert_int_equal(kube_get(client, &API_RES_SANDBOXES, ns, "bogus2", NULL, &e), -ENOENT);
    buf_done(&out);
}

/* Finds the claim kubectl-sandbox created (by name or, when name is NULL, by label). */
struct find_claim {
    const char *name;
    char found[128];
};

static bool claim_exists(void *ctx)
{
    struct find_claim *fc = ctx;
    struct kube_req q;
    json_t *list = NULL;
    kube_req_init(&q, "GET", &API_RES_SANDBOXCLAIMS);
    q.label_selector = "agents.x-k8s.io/created-by=kubectl-sandbox";
    if (kube_list_all(client, &API_RES_SANDBOXCLAIMS, ns, &q, &list, NULL) < 0)
        return false;
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(list, "items"), i, o)
    {
        const char *n = kube_obj_name(o);
        if ((fc->name && strcmp(n, fc->name) == 0) ||
            (!fc->name && strncmp(n, "sandbox-claim-", 14) == 0)) {
            (void)snprintf(fc->found, sizeof(fc->found), "%s", n);
            json_decref(list);
            return true;
        }
    }
    json_decref(list);
    return false;
}

static void test_claim(void **state)
{
    (void)state;
    struct buf out;
    struct kube_err e;
    buf_init(&out, 1 << 20);
    FILE *p = start_cli("claim py --timeout 60s -n %s", ns);
    struct find_claim fc = {0};
    assert_int_equal(it_wait(claim_exists, &fc, 30 * USEC_PER_SEC), 0);
    json_t *claim = NULL;
    IT_OK(kube_get(client, &API_RES_SANDBOXCLAIMS, ns, fc.found, &claim, &e), &e);
    assert_string_equal(kube_obj_path_str(claim, "spec.warmPoolRef.name"), "py");
    assert_non_null(kube_obj_annotation(claim, "agents.x-k8s.io/client-first-requested-at"));
    json_decref(claim);
    /* not Ready yet, then Ready with its sandbox */
    set_status(&API_RES_SANDBOXCLAIMS, fc.found,
               json_pack("{s:[o]}", "conditions", cond("Ready", "False", "SandboxNotReady")));
    set_status(&API_RES_SANDBOXCLAIMS, fc.found,
               json_pack("{s:[o],s:{s:s}}", "conditions", cond("Ready", "True", "SandboxReady"),
                         "sandbox", "name", "py-x7k2q"));
    assert_int_equal(it_cli_finish(p, &out), 0);
    /* the claim's name at once on stderr (the output takes both), then the sandbox's */
    char said[256];
    (void)snprintf(said, sizeof(said), "sandboxclaim.extensions.agents.x-k8s.io/%s created\n",
                   fc.found);
    assert_true(strncmp(buf_str(&out), said, strlen(said)) == 0);
    assert_string_equal(buf_str(&out) + strlen(said), "py-x7k2q\n");
    /* a terminal reason fails fast with the reason */
    p = start_cli("claim py --name bad1 --timeout 60s -n %s", ns);
    struct find_claim bad = {.name = "bad1"};
    assert_int_equal(it_wait(claim_exists, &bad, 30 * USEC_PER_SEC), 0);
    set_status(&API_RES_SANDBOXCLAIMS, "bad1",
               json_pack("{s:[o]}", "conditions", cond("Ready", "False", "TemplateNotFound")));
    assert_int_equal(it_cli_finish(p, &out), 1);
    assert_non_null(strstr(buf_str(&out), "TemplateNotFound"));
    /* nothing happens: timeout, exit 4 */
    assert_int_equal(it_cli_runf(&out, "claim py --name slow1 --timeout 1s -n %s", ns), 4);
    assert_non_null(strstr(buf_str(&out), "slow1"));
    assert_int_equal(it_cli_runf(&out, "claim nope -n %s", ns), 1);
    assert_non_null(strstr(buf_str(&out), "warm pool \"nope\" not found"));
    assert_int_equal(it_cli_runf(&out, "claim py --no-wait --name quick -o name -n %s", ns), 0);
    assert_string_equal(buf_str(&out), "sandboxclaim.extensions.agents.x-k8s.io/quick\n");
    buf_done(&out);
}

/* Runs `claim py --name NAME ARGS` in the background until it said the claim was
 * created, then sends it SIGTERM; out gets "rc=N" and its stderr. */
static int claim_then_term(struct buf *out, const char *name, const char *args)
{
    char f[] = "/tmp/cli-claim-XXXXXX";
    int fd = mkstemp(f);
    assert_true(fd >= 0);
    close(fd);
    int r = it_cli_runf(out,
                        "claim py --name %s %s --timeout 60s -n %s 2>%s & p=$!; i=0; "
                        "until grep -q created %s || [ $i -gt 300 ]; do sleep 0.1; i=$((i+1)); "
                        "done; kill -TERM $p; wait $p; echo rc=$?; cat %s",
                        name, args, ns, f, f, f);
    unlink(f);
    return r;
}

/* An interrupted claim says its name at once and deletes the claim (unless --keep):
 * none is left behind whose name was never shown. */
static void test_claim_interrupted(void **state)
{
    (void)state;
    struct buf out;
    struct kube_err e;
    buf_init(&out, 1 << 20);
    assert_int_equal(claim_then_term(&out, "intr1", ""), 0);
    assert_non_null(strstr(buf_str(&out), "rc=143"));
    assert_non_null(strstr(buf_str(&out), "sandboxclaim.extensions.agents.x-k8s.io/intr1 created"));
    assert_non_null(strstr(buf_str(&out), "sandboxclaim intr1 deleted"));
    assert_int_equal(kube_get(client, &API_RES_SANDBOXCLAIMS, ns, "intr1", NULL, &e), -ENOENT);
    assert_int_equal(claim_then_term(&out, "intr2", "--keep"), 0);
    assert_non_null(strstr(buf_str(&out), "rc=143"));
    assert_non_null(strstr(buf_str(&out), "sandboxclaim intr2 is kept"));
    IT_OK(kube_get(client, &API_RES_SANDBOXCLAIMS, ns, "intr2", NULL, &e), &e);
    assert_int_equal(it_cli_runf(&out, "create x --pool py --keep -n %s", ns), 2);
    buf_done(&out);
}

/* shell --template/--pool deletes at its end only what it made: a name taken already
 * fails the create and that object is kept; its own (not Ready here: no controller runs)
 * is deleted when the wait times out. */
static void test_shell_session_cleanup(void **state)
{
    (void)state;
    struct buf out;
    struct kube_err e;
    buf_init(&out, 1 << 20);
    assert_int_equal(it_cli_runf(&out, "shell --template tmpl --name alpha -n %s", ns), 1);
    assert_non_null(strstr(buf_str(&out), "already exists"));
    assert_null(strstr(buf_str(&out), "deleted"));
    IT_OK(kube_get(client, &API_RES_SANDBOXES, ns, "alpha", NULL, &e), &e);
    assert_int_equal(it_cli_runf(&out, "shell --pool py --name fileclaim -n %s", ns), 1);
    IT_OK(kube_get(client, &API_RES_SANDBOXCLAIMS, ns, "fileclaim", NULL, &e), &e);

    assert_int_equal(it_cli_runf(&out, "shell --template tmpl --name sess1 --timeout 1s -n %s", ns),
                     4);
    assert_non_null(strstr(buf_str(&out), "sandbox sess1 deleted"));
    assert_int_equal(kube_get(client, &API_RES_SANDBOXES, ns, "sess1", NULL, &e), -ENOENT);
    assert_int_equal(it_cli_runf(&out, "shell --pool py --name sess2 --timeout 1s -n %s", ns), 4);
    assert_non_null(strstr(buf_str(&out), "sandboxclaim sess2 deleted"));
    assert_int_equal(kube_get(client, &API_RES_SANDBOXCLAIMS, ns, "sess2", NULL, &e), -ENOENT);
    assert_int_equal(it_cli_runf(&out, "shell alpha --name x -n %s", ns), 2);
    buf_done(&out);
}

static bool mode_is_running(void *ctx)
{
    (void)ctx;
    json_t *o = NULL;
    if (kube_get(client, &API_RES_SANDBOXES, ns, "alpha", &o, NULL) < 0)
        return false;
    const char *m = kube_obj_path_str(o, "spec.operatingMode");
    bool r = m && strcmp(m, "Running") == 0;
    json_decref(o);
    return r;
}

static void test_suspend_resume(void **state)
{
    (void)state;
    struct buf out;
    struct kube_err e;
    buf_init(&out, 1 << 20);
    assert_int_equal(it_cli_runf(&out, "suspend alpha -n %s", ns), 0);
    json_t *o = NULL;
    IT_OK(kube_get(client, &API_RES_SANDBOXES, ns, "alpha", &o, &e), &e);
    assert_string_equal(kube_obj_path_str(o, "spec.operatingMode"), "Suspended");
    json_decref(o);
    /* --wait without a controller: times out with exit 4 */
    assert_int_equal(it_cli_runf(&out, "suspend alpha --wait --timeout 1s -n %s", ns), 4);
    set_status(&API_RES_SANDBOXES, "alpha",
               json_pack("{s:[o,o]}", "conditions", cond("Ready", "False", "SandboxSuspended"),
                         cond("Suspended", "True", "Suspended")));
    assert_int_equal(it_cli_runf(&out, "suspend alpha --wait --timeout 30s -n %s", ns), 0);
    /* resume --wait returns once Ready is True again */
    FILE *p = start_cli("resume alpha --wait --timeout 60s -n %s", ns);
    assert_int_equal(it_wait(mode_is_running, NULL, 30 * USEC_PER_SEC), 0);
    set_status(&API_RES_SANDBOXES, "alpha",
               json_pack("{s:[o,o],s:s}", "conditions", cond("Ready", "True", "DependenciesReady"),
                         cond("Suspended", "False", "NotSuspended"), "nodeName", "node-1"));
    assert_int_equal(it_cli_finish(p, &out), 0);
    assert_non_null(strstr(buf_str(&out), "sandbox.agents.x-k8s.io/alpha resumed"));
    assert_int_equal(it_cli_runf(&out, "resume missing -n %s", ns), 1);
    assert_non_null(strstr(buf_str(&out), "sandbox \"missing\""));
    /* every NAME is tried, also after one that failed; the exit code is the failure's */
    assert_int_equal(it_cli_runf(&out, "resume missing alpha -n %s", ns), 1);
    assert_non_null(strstr(buf_str(&out), "sandbox \"missing\""));
    assert_non_null(strstr(buf_str(&out), "sandbox.agents.x-k8s.io/alpha resumed"));
    buf_done(&out);
}

static void test_describe(void **state)
{
    (void)state;
    struct buf out;
    struct kube_err e;
    buf_init(&out, 1 << 20);
    json_t *ev =
        json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s,s:s,s:s},s:s,s:s,s:s,s:{s:s}}", "apiVersion", "v1",
                  "kind", "Event", "metadata", "name", "alpha.1", "involvedObject", "apiVersion",
                  "agents.x-k8s.io/v1beta1", "kind", "Sandbox", "name", "alpha", "namespace", ns,
                  "reason", "PodCreated", "message", "created pod alpha", "type", "Normal",
                  "source", "component", "agent-sandbox-controller");
    IT_OK(kube_create(client, &KUBE_RES_EVENTS, ns, ev, NULL, &e), &e);
    json_decref(ev);
    assert_int_equal(it_cli_runf(&out, "describe alpha -n %s", ns), 0);
    const char *s = buf_str(&out);
    assert_non_null(strstr(s, "Name:         alpha\n"));
    assert_non_null(strstr(s, "Mode:         Running\n"));
    assert_non_null(strstr(s, "Pod:          <none> (not created)\n"));
    assert_non_null(strstr(s, "Conditions:\n"));
    assert_non_null(strstr(s, "NotSuspended"));
    assert_non_null(strstr(s, "PodCreated"));
    assert_non_null(strstr(s, "created pod alpha"));
    assert_int_equal(it_cli_runf(&out, "describe missing -n %s", ns), 1);
    /* a pool's sandbox: its pod has another name (the annotation), whose events count
     * too; text from the cluster reaches the terminal without control characters */
    json_t *sb = json_pack("{s:s,s:s,s:{s:s,s:{s:s}},s:{s:{s:{s:[{s:s,s:s}]}}}}", "apiVersion",
                           "agents.x-k8s.io/v1beta1", "kind", "Sandbox", "metadata", "name",
                           "pooled", "annotations", "agents.x-k8s.io/pod-name", "pool-x7k2p",
                           "spec", "podTemplate", "spec", "containers", "name", "main", "image",
                           "localhost/agent-sandbox/runtime:dev");
    IT_OK(kube_create(client, &API_RES_SANDBOXES, ns, sb, NULL, &e), &e);
    json_decref(sb);
    ev = json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s,s:s,s:s},s:s,s:s,s:s,s:{s:s}}", "apiVersion", "v1",
                   "kind", "Event", "metadata", "name", "pool-x7k2p.1", "involvedObject",
                   "apiVersion", "v1", "kind", "Pod", "name", "pool-x7k2p", "namespace", ns,
                   "reason", "Pulled", "message", "pulled \x1b]52;c;aGk=\a image", "type", "Normal",
                   "source", "component", "kubelet");
    IT_OK(kube_create(client, &KUBE_RES_EVENTS, ns, ev, NULL, &e), &e);
    json_decref(ev);
    assert_int_equal(it_cli_runf(&out, "describe pooled -n %s", ns), 0);
    s = buf_str(&out);
    assert_non_null(strstr(s, "Pod:          <none> (not created)\n"));
    assert_non_null(strstr(s, "Pulled"));
    assert_non_null(strstr(s, "pulled \\x1b]52;c;aGk=\\x07 image"));
    assert_null(strchr(s, 0x1b));
    IT_OK(kube_delete(client, &API_RES_SANDBOXES, ns, "pooled", &e), &e);
    /* logs: the pod does not exist in this cluster; the message says so */
    assert_int_equal(it_cli_runf(&out, "logs alpha --tail 5 -n %s", ns), 1);
    assert_non_null(strstr(buf_str(&out), "has no pod"));
    assert_int_equal(it_cli_runf(&out, "logs alpha --tail x -n %s", ns), 2);
    buf_done(&out);
}

/* Lets the test user alice (of hack/apiserver.sh's tokens.csv; no other grants) get and
 * list Sandboxes in ns, and nothing else. */
static void grant_alice_sandboxes(void)
{
    struct kube_err e;
    json_t *o = json_pack("{s:s,s:s,s:{s:s},s:[{s:[s],s:[s],s:[s,s]}]}", "apiVersion",
                          "rbac.authorization.k8s.io/v1", "kind", "Role", "metadata", "name",
                          "sandbox-read", "rules", "apiGroups", "agents.x-k8s.io", "resources",
                          "sandboxes", "verbs", "get", "list");
    IT_OK(kube_create(client, &ROLES, ns, o, NULL, &e), &e);
    json_decref(o);
    o = json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s,s:s},s:[{s:s,s:s,s:s}]}", "apiVersion",
                  "rbac.authorization.k8s.io/v1", "kind", "RoleBinding", "metadata", "name",
                  "alice-sandbox-read", "roleRef", "apiGroup", "rbac.authorization.k8s.io", "kind",
                  "Role", "name", "sandbox-read", "subjects", "apiGroup",
                  "rbac.authorization.k8s.io", "kind", "User", "name", "alice");
    IT_OK(kube_create(client, &ROLEBINDINGS, ns, o, NULL, &e), &e);
    json_decref(o);
}

/* True once the client ctx may get Sandbox alpha (RBAC reaches the authorizer's cache
 * within a moment). */
static bool may_get_alpha(void *ctx)
{
    return kube_get(ctx, &API_RES_SANDBOXES, ns, "alpha", NULL, NULL) == 0;
}

/* A user who may read the Sandbox but not pods or events (403) still gets the Sandbox
 * described, exit 0: the pod line names the pod and the API server's refusal instead of
 * claiming there is none, and the events say they could not be listed. A user who may
 * not read the Sandbox gets an error. */
static void test_describe_forbidden(void **state)
{
    (void)state;
    struct buf out;
    struct kube_err e;
    struct kube_client *alice = NULL;
    buf_init(&out, 1 << 20);
    grant_alice_sandboxes();
    IT_OK(it_client_new_user("alice", NULL, &alice, &e), &e);
    assert_int_equal(it_wait(may_get_alpha, alice, 30 * USEC_PER_SEC), 0);
    /* the API server refuses alice the pod (there is none: 403 comes before 404) */
    assert_int_equal(kube_get(alice, &KUBE_RES_PODS, ns, "alpha", NULL, &e), -EPERM);
    assert_int_equal(e.http_status, 403);
    kube_client_free(alice);
    assert_int_equal(it_cli_runf(&out, "--kubeconfig '%s/kubeconfig-alice' describe alpha -n %s",
                                 it_state_dir(), ns),
                     0);
    const char *s = buf_str(&out);
    assert_non_null(strstr(s, "Name:         alpha\n"));
    assert_non_null(strstr(s, "Mode:         Running\n"));
    char want[512];
    (void)snprintf(want, sizeof(want),
                   "Pod:          alpha (cannot read it: pods \"alpha\" is forbidden: User "
                   "\"alice\" cannot get resource \"pods\" in API group \"\" in the namespace "
                   "\"%s\")\n",
                   ns);
    assert_non_null(strstr(s, want));
    assert_null(strstr(s, "not created"));
    assert_non_null(strstr(s, "Conditions:\n"));
    assert_non_null(strstr(s, "NotSuspended"));
    (void)snprintf(want, sizeof(want),
                   "Events:\n  <cannot list events: events is forbidden: User \"alice\" cannot "
                   "list resource \"events\" in API group \"\" in the namespace \"%s\">\n",
                   ns);
    assert_non_null(strstr(s, want));
    assert_null(strstr(s, "PodCreated")); /* alpha's event, which admin sees */
    /* bob may not read the Sandbox itself: that is the error, exit 1 */
    assert_int_equal(it_cli_runf(&out, "--kubeconfig '%s/kubeconfig-bob' describe alpha -n %s",
                                 it_state_dir(), ns),
                     1);
    assert_non_null(strstr(buf_str(&out), "sandbox \"alpha\""));
    assert_non_null(strstr(buf_str(&out), "forbidden"));
    assert_null(strstr(buf_str(&out), "Name:"));
    buf_done(&out);
}

static void test_delete(void **state)
{
    (void)state;
    struct buf out;
    struct kube_err e;
    buf_init(&out, 1 << 20);
    assert_int_equal(it_cli_runf(&out, "delete beta --wait --timeout 30s -n %s", ns), 0);
    assert_int_equal(kube_get(client, &API_RES_SANDBOXES, ns, "beta", NULL, &e), -ENOENT);
    assert_int_equal(it_cli_runf(&out, "delete beta -n %s", ns), 1);
    assert_non_null(strstr(buf_str(&out), "sandbox \"beta\""));
    /* an argument of another form is refused before any NAME is tried */
    assert_int_equal(it_cli_runf(&out, "delete beta pod/x -n %s", ns), 2);
    assert_null(strstr(buf_str(&out), "sandbox \"beta\""));
    /* a sandbox owned by a claim: the claim is deleted */
    json_t *claim = NULL;
    IT_OK(kube_get(client, &API_RES_SANDBOXCLAIMS, ns, "fileclaim", &claim, &e), &e);
    json_t *sb = json_pack("{s:s,s:s,s:{s:s,s:[{s:s,s:s,s:s,s:s,s:b}]},s:{s:{s:{s:[{s:s,s:s}]}}}}",
                           "apiVersion", "agents.x-k8s.io/v1beta1", "kind", "Sandbox", "metadata",
                           "name", "owned", "ownerReferences", "apiVersion",
                           "extensions.agents.x-k8s.io/v1beta1", "kind", "SandboxClaim", "name",
                           "fileclaim", "uid", kube_obj_uid(claim), "controller", 1, "spec",
                           "podTemplate", "spec", "containers", "name", "m", "image", "busybox");
    IT_OK(kube_create(client, &API_RES_SANDBOXES, ns, sb, NULL, &e), &e);
    json_decref(sb);
    json_decref(claim);
    assert_int_equal(it_cli_runf(&out, "delete owned -n %s", ns), 0);
    assert_non_null(strstr(buf_str(&out), "belongs to sandboxclaim \"fileclaim\""));
    assert_int_equal(kube_get(client, &API_RES_SANDBOXCLAIMS, ns, "fileclaim", NULL, &e), -ENOENT);
    assert_int_equal(it_cli_runf(&out, "delete claim/quick -n %s", ns), 0);
    assert_string_equal(buf_str(&out), "sandboxclaim.extensions.agents.x-k8s.io/quick deleted\n");
    buf_done(&out);
}

static const struct kube_res vaps = {"admissionregistration.k8s.io", "v1",
                                     "ValidatingAdmissionPolicy", "validatingadmissionpolicies",
                                     false};

static void test_install_uninstall(void **state)
{
    (void)state;
    struct buf out;
    struct kube_err e;
    buf_init(&out, 1 << 20);
    assert_int_equal(it_cli_run("install --dry-run", &out), 0);
    const char *s = buf_str(&out);
    /* CRDs first, the namespace before what lives in it */
    assert_true(strncmp(s, "customresourcedefinition.apiextensions.k8s.io/", 46) == 0);
    assert_true(strstr(s, "namespace/agent-sandbox-system") <
                strstr(s, "serviceaccount/agent-sandbox-controller"));
    assert_int_equal(it_cli_run("install", &out), 0);
    assert_non_null(strstr(buf_str(&out), "clusterrole.rbac.authorization.k8s.io/"
                                          "agent-sandbox-controller serverside-applied"));
    /* the controller's Secret policy is in place before the controller runs */
    const char *vap =
        strstr(buf_str(&out), "validatingadmissionpolicy.admissionregistration.k8s.io/"
                              "agent-sandbox-controller-secrets serverside-applied");
    const char *dep = strstr(buf_str(&out), "deployment.apps/agent-sandbox-controller");
    assert_non_null(vap);
    assert_non_null(dep);
    assert_true(vap < dep);
    assert_non_null(strstr(buf_str(&out), "validatingadmissionpolicybinding.admissionregistration."
                                          "k8s.io/agent-sandbox-controller-secrets"));
    json_t *sa = NULL;
    IT_OK(kube_get(client, &KUBE_RES_SERVICEACCOUNTS, "agent-sandbox-system",
                   "agent-sandbox-controller", &sa, &e),
          &e);
    char *mf = json_dumps(kube_obj_path(sa, "metadata.managedFields"), JSON_COMPACT);
    bool managed = mf && strstr(mf, "\"manager\":\"kubectl-sandbox\"") != NULL;
    xfree(mf);
    json_decref(sa);
    assert_true(managed);
    assert_int_equal(it_cli_run("uninstall", &out), 2); /* needs --yes or --keep-crds */
    json_t *cm = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", "v1", "kind",
                           "ConfigMap", "metadata", "name", "agent-sandbox-config", "namespace",
                           "agent-sandbox-system", "data", "allowed-label-domains", "example.com");
    if (kube_create(client, &KUBE_RES_CONFIGMAPS, "agent-sandbox-system", cm, NULL, &e) < 0 &&
        !kube_err_is_already_exists(&e)) /* a run before this one on the same server */
        fail_msg("config map: %s", e.message);
    json_decref(cm);
    assert_int_equal(it_cli_run("uninstall --keep-crds", &out), 0);
    assert_null(strstr(buf_str(&out), "customresourcedefinition"));
    /* the namespace stays, with the user's config in it (it was deleted, and all in it) */
    assert_null(strstr(buf_str(&out), "namespace/agent-sandbox-system deleted"));
    json_t *nsobj = NULL;
    IT_OK(kube_get(client, &KUBE_RES_NAMESPACES, NULL, "agent-sandbox-system", &nsobj, &e), &e);
    assert_false(kube_obj_deleting(nsobj));
    json_decref(nsobj);
    IT_OK(kube_get(client, &KUBE_RES_CONFIGMAPS, "agent-sandbox-system", "agent-sandbox-config",
                   NULL, &e),
          &e);
    assert_int_equal(kube_get(client, &KUBE_RES_SERVICEACCOUNTS, "agent-sandbox-system",
                              "agent-sandbox-controller", NULL, &e),
                     -ENOENT);
    IT_OK(kube_get(client, &KUBE_RES_CRDS, NULL, "sandboxes.agents.x-k8s.io", NULL, &e), &e);
    assert_int_equal(kube_get(client, &vaps, NULL, "agent-sandbox-controller-secrets", NULL, &e),
                     -ENOENT);
    /* again: everything is already gone and skipped */
    assert_int_equal(it_cli_run("uninstall --keep-crds", &out), 0);
    assert_non_null(strstr(buf_str(&out), "not found, skipped"));
    buf_done(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_get_table),
        cmocka_unit_test(test_get_formats),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_list_and_pools),
        cmocka_unit_test(test_create),
        cmocka_unit_test(test_claim),
        cmocka_unit_test(test_claim_interrupted),
        cmocka_unit_test(test_shell_session_cleanup),
        cmocka_unit_test(test_suspend_resume),
        cmocka_unit_test(test_describe),
        cmocka_unit_test(test_describe_forbidden),
        cmocka_unit_test(test_delete),
        cmocka_unit_test(test_install_uninstall),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
