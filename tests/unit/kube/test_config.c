/* SPDX-License-Identifier: Apache-2.0 */
/* kubeconfig merging, inline data, relative paths, exec plugins, in-cluster config. */
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

#include <sys/stat.h>

#include "common/base64.h"
#include "common/buf.h"
#include "common/limits.h"
#include "common/xalloc.h"
#include "kube/config.h"
#include "kube/config_int.h"
#include "kube/yaml.h"

static char data_dir[1024];
static char tmp_dir[256];

static const char *data(const char *name)
{
    static char path[2048];
    (void)snprintf(path, sizeof(path), "%s/%s", data_dir, name);
    return path;
}

static void write_file(const char *path, const char *content)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(content, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static int count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    int n = 0, ch;
    if (!f)
        return 0;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    (void)fclose(f);
    return n;
}

static int setup(void **state)
{
    (void)state;
    const char *d = getenv("AS_TEST_DATA");
    assert_non_null(d);
    (void)snprintf(data_dir, sizeof(data_dir), "%s/kube", d);
    (void)snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/as-test-config-XXXXXX");
    assert_non_null(mkdtemp(tmp_dir));
    unsetenv("KUBECONFIG");
    unsetenv("AS_EXEC_FAIL");
    unsetenv("AS_EXEC_EXPIRY");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static struct kube_config *load(const struct kube_config_opts *o)
{
    struct kube_config *cfg = NULL;
    struct kube_err e;
    int r = kube_config_load(o, &cfg, &e);
    if (r < 0)
        fail_msg("load failed: %s", e.message);
    return cfg;
}

static void test_merge_first_wins(void **state)
{
    (void)state;
    char env[8192], a[2048];
    (void)snprintf(a, sizeof(a), "%s", data("kc-a.yaml"));
    (void)snprintf(env, sizeof(env), "%s:/nonexistent/kubeconfig:%s", a, data("kc-b.yaml"));
    setenv("KUBECONFIG", env, 1);
    struct kube_config *cfg = load(&(struct kube_config_opts){0});
    /* current-context from the first file; its user "ua" from the first file too */
    assert_string_equal(kube_config_context(cfg), "ctx-a");
    assert_string_equal(kube_config_server(cfg), "https://a.example:6443");
    assert_string_equal(kube_config_namespace(cfg), "ns-a");
    char tok[128];
    assert_int_equal(kube_config_token(cfg, tok, sizeof(tok), NULL), 5);
    assert_string_equal(tok, "tok-a");
    struct kube_tls tls;
    kube_config_tls(cfg, &tls);
    /* a relative certificate-authority resolves against the kubeconfig's directory */
    assert_string_equal(tls.ca_file, data("ca.crt"));
    assert_null(tls.ca_data);
    kube_config_free(cfg);

    /* cluster "shared" is defined in both files: the first definition wins */
    cfg = load(&(struct kube_config_opts){.context = "ctx-shared", .namespace_override = "x"});
    assert_string_equal(kube_config_server(cfg), "https://first.example");
    assert_string_equal(kube_config_namespace(cfg), "x");
    kube_config_tls(cfg, &tls);
    assert_string_equal(tls.server_name, "api.internal");
    /* user ub exists only in the second file */
    assert_non_null(tls.cert_data);
    kube_config_free(cfg);
    unsetenv("KUBECONFIG");
}

static void test_inline_data(void **state)
{
    (void)state;
    struct kube_config *cfg = load(&(struct kube_config_opts){.kubeconfig = data("kc-b.yaml")});
    assert_string_equal(kube_config_context(cfg), "ctx-b");
    assert_string_equal(kube_config_server(cfg), "https://[::1]:6443");
    assert_string_equal(kube_config_namespace(cfg), "default");
    struct kube_tls tls;
    kube_config_tls(cfg, &tls);
    assert_int_equal(tls.ca_len, 6);
    assert_memory_equal(tls.ca_data, "CA-PEM", 6);
    assert_int_equal(tls.cert_len, 8);
    assert_memory_equal(tls.cert_data, "CERT-PEM", 8);
    assert_memory_equal(tls.key_data, "KEY-PEM", 7);
    assert_true(tls.insecure);
    assert_null(tls.ca_file);
    char tok[16] = "x";
    assert_int_equal(kube_config_token(cfg, tok, sizeof(tok), NULL), 0);
    assert_string_equal(tok, "");
    kube_config_free(cfg);
}

static void expect_load_error(const struct kube_config_opts *o, int code, const char *needle)
{
    struct kube_config *cfg = NULL;
    struct kube_err e;
    assert_int_equal(kube_config_load(o, &cfg, &e), code);
    assert_null(cfg);
    if (!strstr(e.message, needle))
        fail_msg("message \"%s\" lacks \"%s\"", e.message, needle);
}

static void test_errors(void **state)
{
    (void)state;
    expect_load_error(
        &(struct kube_config_opts){.kubeconfig = data("kc-a.yaml"), .context = "nope"}, -ENOENT,
        "context \"nope\" not found in kubeconfig");
    expect_load_error(&(struct kube_config_opts){.kubeconfig = data("bad.yaml")}, -EINVAL,
                      "bad.yaml: line");
    expect_load_error(&(struct kube_config_opts){.kubeconfig = "/nonexistent/kc"}, -ENOENT,
                      "/nonexistent/kc");
    char path[512];
    (void)snprintf(path, sizeof(path), "%s/missing-ca.yaml", tmp_dir);
    write_file(path, "current-context: c\nclusters:\n- name: k\n  cluster:\n"
                     "    server: https://x\n    certificate-authority: nope.crt\n"
                     "contexts:\n- name: c\n  context: {cluster: k}\n");
    expect_load_error(&(struct kube_config_opts){.kubeconfig = path}, -ENOENT, "nope.crt");
    write_file(path, "current-context: c\nclusters:\n- name: k\n  cluster:\n"
                     "    server: https://x\n    certificate-authority-data: '!!notb64'\n"
                     "contexts:\n- name: c\n  context: {cluster: k}\n");
    expect_load_error(&(struct kube_config_opts){.kubeconfig = path}, -EINVAL, "invalid base64");
}

static void test_exec_plugin_caching(void **state)
{
    (void)state;
    char count[512], tok[128];
    (void)snprintf(count, sizeof(count), "%s/count", tmp_dir);
    setenv("AS_EXEC_COUNT", count, 1);
    setenv("AS_EXEC_EXPIRY", "2999-01-01T00:00:00Z", 1);
    struct kube_config *cfg = load(&(struct kube_config_opts){.kubeconfig = data("kc-exec.yaml")});
    assert_int_equal(count_lines(count), 0); /* nothing runs until a token is needed */
    assert_int_equal(kube_config_token(cfg, tok, sizeof(tok), NULL), 5);
    assert_string_equal(tok, "tok-1");
    assert_int_equal(kube_config_token(cfg, tok, sizeof(tok), NULL), 5);
    assert_string_equal(tok, "tok-1"); /* cached until expiry */
    assert_int_equal(count_lines(count), 1);
    kube_config_invalidate_token(cfg); /* a 401 forces a new run */
    assert_int_equal(kube_config_token(cfg, tok, sizeof(tok), NULL), 5);
    assert_string_equal(tok, "tok-2");

    /* the plugin got KUBERNETES_EXEC_INFO and the env from the kubeconfig */
    char envf[600];
    struct buf b;
    (void)snprintf(envf, sizeof(envf), "%s.env", count);
    FILE *f = fopen(envf, "r");
    assert_non_null(f);
    char line[1024];
    assert_non_null(fgets(line, sizeof(line), f));
    assert_non_null(strstr(line, "\"kind\":\"ExecCredential\""));
    assert_non_null(strstr(line, "\"apiVersion\":\"client.authentication.k8s.io/v1\""));
    assert_non_null(strstr(line, "\"interactive\":false"));
    assert_non_null(fgets(line, sizeof(line), f));
    assert_string_equal(line, "hello world\n");
    (void)fclose(f);
    (void)b;

    /* an already expired credential is fetched again on every call */
    setenv("AS_EXEC_EXPIRY", "2001-01-01T00:00:00Z", 1);
    kube_config_invalidate_token(cfg);
    assert_int_equal(kube_config_token(cfg, tok, sizeof(tok), NULL), 5);
    assert_string_equal(tok, "tok-3");
    assert_int_equal(kube_config_token(cfg, tok, sizeof(tok), NULL), 5);
    assert_string_equal(tok, "tok-4");
    kube_config_free(cfg);

    /* v1beta1 is asked for and answered in kind */
    cfg = load(
        &(struct kube_config_opts){.kubeconfig = data("kc-exec.yaml"), .context = "exec-v1beta1"});
    assert_int_equal(kube_config_token(cfg, tok, sizeof(tok), NULL), 6);
    assert_string_equal(tok, "beta-5");
    kube_config_free(cfg);
    unsetenv("AS_EXEC_EXPIRY");
}

static void test_exec_plugin_failure(void **state)
{
    (void)state;
    char count[512], tok[128];
    struct kube_err e;
    (void)snprintf(count, sizeof(count), "%s/count-fail", tmp_dir);
    setenv("AS_EXEC_COUNT", count, 1);
    setenv("AS_EXEC_FAIL", "access denied", 1);
    struct kube_config *cfg = load(&(struct kube_config_opts){.kubeconfig = data("kc-exec.yaml")});
    int r = kube_config_token(cfg, tok, sizeof(tok), &e);
    assert_true(r < 0);
    assert_non_null(strstr(e.message, "exited with status 3"));
    assert_non_null(strstr(e.message, "boom: access denied"));
    assert_non_null(strstr(e.message, "exec-plugin.sh"));
    unsetenv("AS_EXEC_FAIL");
    /* a failure is not cached: the next call runs the plugin again */
    assert_int_equal(kube_config_token(cfg, tok, sizeof(tok), &e), 5);
    assert_string_equal(tok, "tok-2");
    kube_config_free(cfg);
}

/* A plugin that closes its output and runs on is killed at the run-time bound: before,
 * the wait for its exit had no bound, and every request waited for the credential. */
static void test_exec_plugin_lingering_is_bounded(void **state)
{
    (void)state;
    char count[512], tok[128];
    struct kube_err e;
    (void)snprintf(count, sizeof(count), "%s/count-linger", tmp_dir);
    setenv("AS_EXEC_COUNT", count, 1);
    setenv("AS_EXEC_LINGER", "3600", 1);
    struct kube_config *cfg = load(&(struct kube_config_opts){.kubeconfig = data("kc-exec.yaml"),
                                                              .exec_timeout = 500 * USEC_PER_MSEC});
    usec_t t0 = clock_now();
    int r = kube_config_token(cfg, tok, sizeof(tok), &e);
    usec_t took = clock_now() - t0;
    unsetenv("AS_EXEC_LINGER");
    assert_int_equal(r, -ETIMEDOUT);
    assert_non_null(strstr(e.message, "did not finish within 0.5 s"));
    assert_true(took < 10 * USEC_PER_SEC);
    kube_config_free(cfg);
}

/* A plugin that hands out another client certificate each run: the replaced ones are
 * kept only up to LIMIT_KUBE_RETIRED_CERTS (lent out to borrowers that copy them at
 * once), not one more per run for the client's life. */
static void test_exec_retired_certs_bounded(void **state)
{
    (void)state;
    char count[512], tok[128];
    struct kube_err e;
    struct kube_tls t;
    (void)snprintf(count, sizeof(count), "%s/count-certs", tmp_dir);
    setenv("AS_EXEC_COUNT", count, 1);
    setenv("AS_EXEC_CERT", "1", 1);
    struct kube_config *cfg = load(&(struct kube_config_opts){.kubeconfig = data("kc-exec.yaml")});
    for (int i = 0; i < 3 * LIMIT_KUBE_RETIRED_CERTS; i++) {
        kube_config_invalidate_token(cfg);
        assert_true(kube_config_token(cfg, tok, sizeof(tok), &e) > 0);
    }
    unsetenv("AS_EXEC_CERT");
    kube_config_tls(cfg, &t);
    assert_non_null(t.cert_data);
    assert_string_equal(t.cert_data, "cert-24");
    int n = 0;
    for (const struct kube_retired *r = cfg->retired; r; r = r->next)
        n++;
    assert_int_equal(n, LIMIT_KUBE_RETIRED_CERTS); /* before: 23 */
    kube_config_free(cfg);
}

static void make_sa_dir(char *dir, size_t size)
{
    (void)snprintf(dir, size, "%s/sa", tmp_dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    char p[600];
    (void)snprintf(p, sizeof(p), "%s/token", dir);
    write_file(p, "first-token\n");
    (void)snprintf(p, sizeof(p), "%s/ca.crt", dir);
    write_file(p, "CA");
    (void)snprintf(p, sizeof(p), "%s/namespace", dir);
    write_file(p, "sandbox-system\n");
}

static void test_in_cluster(void **state)
{
    (void)state;
    char dir[512], p[600], tok[128];
    make_sa_dir(dir, sizeof(dir));
    struct kube_config *cfg = NULL;
    struct kube_err e;
    unsetenv("KUBERNETES_SERVICE_HOST");
    assert_int_equal(
        kube_config_load(&(struct kube_config_opts){.in_cluster = true, .sa_dir = dir}, &cfg, &e),
        -ENOENT);
    assert_non_null(strstr(e.message, "KUBERNETES_SERVICE_HOST"));
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    cfg = load(&(struct kube_config_opts){.in_cluster = true, .sa_dir = dir});
    assert_string_equal(kube_config_server(cfg), "https://[fd00::1]:443");
    assert_string_equal(kube_config_namespace(cfg), "sandbox-system");
    assert_string_equal(kube_config_context(cfg), "");
    struct kube_tls tls;
    kube_config_tls(cfg, &tls);
    (void)snprintf(p, sizeof(p), "%s/ca.crt", dir);
    assert_string_equal(tls.ca_file, p);
    assert_int_equal(kube_config_token(cfg, tok, sizeof(tok), NULL), 11);
    assert_string_equal(tok, "first-token");

    /* a rotated token (written to a new file renamed over the old one, as the kubelet's
     * atomic writer does) is picked up on the next call */
    char tmp[600];
    (void)snprintf(tmp, sizeof(tmp), "%s/token.new", dir);
    write_file(tmp, "second-token-rotated\n");
    (void)snprintf(p, sizeof(p), "%s/token", dir);
    assert_int_equal(rename(tmp, p), 0);
    assert_int_equal(kube_config_token(cfg, tok, sizeof(tok), NULL), 20);
    assert_string_equal(tok, "second-token-rotated");
    kube_config_free(cfg);

    setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
    cfg = load(&(struct kube_config_opts){
        .in_cluster = true, .sa_dir = dir, .namespace_override = "other"});
    assert_string_equal(kube_config_server(cfg), "https://10.0.0.1:443");
    assert_string_equal(kube_config_namespace(cfg), "other");
    kube_config_free(cfg);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
}

static void test_token_file_in_kubeconfig(void **state)
{
    (void)state;
    char kc[512], tokf[512], tok[128];
    (void)snprintf(kc, sizeof(kc), "%s/kc-tokenfile.yaml", tmp_dir);
    (void)snprintf(tokf, sizeof(tokf), "%s/tok", tmp_dir);
    write_file(tokf, "  aaa  \n");
    write_file(kc, "current-context: c\nclusters:\n- name: k\n  cluster: {server: 'http://h'}\n"
                   "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                   "users:\n- name: u\n  user: {tokenFile: tok, token: static}\n");
    struct kube_config *cfg = load(&(struct kube_config_opts){.kubeconfig = kc});
    assert_int_equal(kube_config_token(cfg, tok, sizeof(tok), NULL), 3);
    assert_string_equal(tok, "aaa");
    write_file(tokf, "bbbb");
    assert_int_equal(kube_config_token(cfg, tok, sizeof(tok), NULL), 4);
    assert_string_equal(tok, "bbbb");
    assert_int_equal(kube_config_token(cfg, tok, 3, NULL), -E2BIG);
    kube_config_free(cfg);
}

static void test_yaml(void **state)
{
    (void)state;
    json_t *j = NULL;
    char err[256];
    const char *y = "a: 1\na: 2\nb: [x, {c: ~}]\nd: 'true'\ne: true\n";
    assert_int_equal(kube_yaml_load(y, strlen(y), &j, err, sizeof(err)), 0);
    assert_string_equal(json_string_value(json_object_get(j, "a")), "1");
    assert_true(json_is_null(json_object_get(json_array_get(json_object_get(j, "b"), 1), "c")));
    assert_string_equal(json_string_value(json_object_get(j, "d")), "true");
    assert_true(json_is_true(json_object_get(j, "e")));
    json_decref(j);
    const char *alias = "a: &x 1\nb: *x\n";
    assert_int_equal(kube_yaml_load(alias, strlen(alias), &j, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "line 2"));
    struct buf deep;
    buf_init(&deep, 4096);
    for (int i = 0; i < 100; i++)
        assert_int_equal(buf_putc(&deep, '['), 0);
    assert_int_equal(kube_yaml_load(deep.data, deep.len, &j, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "deep"));
    buf_done(&deep);
    assert_int_equal(kube_yaml_load("", 0, &j, err, sizeof(err)), 0);
    assert_true(json_is_object(j));
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_first_wins),
        cmocka_unit_test(test_inline_data),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_exec_plugin_caching),
        cmocka_unit_test(test_exec_plugin_failure),
        cmocka_unit_test(test_exec_plugin_lingering_is_bounded),
        cmocka_unit_test(test_exec_retired_certs_bounded),
        cmocka_unit_test(test_in_cluster),
        cmocka_unit_test(test_token_file_in_kubeconfig),
        cmocka_unit_test(test_yaml),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
