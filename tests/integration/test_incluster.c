/* SPDX-License-Identifier: Apache-2.0 */
/* In-cluster configuration against the real kube-apiserver: a fake service-account
 * directory laid out as the kubelet does (token -> ..data/token, ..data -> a versioned
 * directory swapped atomically on rotation) holds static tokens of hack/apiserver.sh's
 * users; KUBERNETES_SERVICE_HOST/PORT point at the local API server. After each
 * rotation, requests authenticate as the new user (SelfSubjectReview), and a token the
 * server does not know gives 401. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "kube/client.h"
#include "kube/config.h"
#include "kube/obj.h"
#include "kube/res.h"
#include "support/apiserver.h"

#define WAIT (90 * USEC_PER_SEC) /* the token file is re-read at least every minute */

static const struct kube_res SELFSUBJECTREVIEWS = {
    "authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", false};

static char sa_dir[64];
static int version;

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static void copy_file(const char *from, const char *to)
{
    char buf[16384];
    FILE *in = fopen(from, "re");
    assert_non_null(in);
    size_t n = fread(buf, 1, sizeof(buf) - 1, in);
    fclose(in);
    buf[n] = '\0';
    write_file(to, buf);
}

/* Publishes token as the kubelet's atomic writer does: a new versioned directory, then
 * one rename of the ..data symlink. */
static void publish_token(const char *token)
{
    char dir[128], path[PATH_MAX], tmp[PATH_MAX], data[PATH_MAX], target[32];
    version++;
    snprintf(target, sizeof(target), "..v%d", version);
    snprintf(dir, sizeof(dir), "%s/%s", sa_dir, target);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(path, sizeof(path), "%s/token", dir);
    write_file(path, token);
    snprintf(tmp, sizeof(tmp), "%s/..data_tmp", sa_dir);
    snprintf(data, sizeof(data), "%s/..data", sa_dir);
    assert_int_equal(symlink(target, tmp), 0);
    assert_int_equal(rename(tmp, data), 0);
}

static void publish_user(const char *user)
{
    char token[256];
    assert_int_equal(it_user_token(user, token, sizeof(token)), 0);
    publish_token(token);
}

/* KUBERNETES_SERVICE_HOST/PORT from the admin kubeconfig's server URL. */
static void set_service_env(void)
{
    struct kube_config_opts co = {.kubeconfig = it_kubeconfig()};
    struct kube_config *cfg = NULL;
    struct kube_err err;
    IT_OK(kube_config_load(&co, &cfg, &err), &err);
    const char *port = strrchr(kube_config_server(cfg), ':');
    assert_non_null(port);
    assert_int_equal(setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1), 0);
    assert_int_equal(setenv("KUBERNETES_SERVICE_PORT", port + 1, 1), 0);
    kube_config_free(cfg);
}

static int setup(void **state)
{
    char path[PATH_MAX], link[PATH_MAX];
    (void)state;
    snprintf(sa_dir, sizeof(sa_dir), "/tmp/as-it-sa.XXXXXX");
    assert_non_null(mkdtemp(sa_dir));
    snprintf(path, sizeof(path), "%s/pki/ca.crt", it_state_dir());
    snprintf(link, sizeof(link), "%s/ca.crt", sa_dir);
    copy_file(path, link);
    snprintf(link, sizeof(link), "%s/namespace", sa_dir);
    write_file(link, "default");
    publish_user("admin");
    snprintf(link, sizeof(link), "%s/token", sa_dir);
    assert_int_equal(symlink("..data/token", link), 0);
    set_service_env();
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", sa_dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

/* The user the API server authenticates the client as, into out ("" on failure). */
static int whoami(struct kube_client *c, char *out, size_t size, struct kube_err *err)
{
    json_t *body = json_pack("{s:s, s:s}", "apiVersion", "authentication.k8s.io/v1", "kind",
                             "SelfSubjectReview"),
           *got = NULL;
    int r = kube_create(c, &SELFSUBJECTREVIEWS, NULL, body, &got, err);
    json_decref(body);
    out[0] = '\0';
    if (r >= 0) {
        const char *u = kube_obj_path_str(got, "status.userInfo.username");
        snprintf(out, size, "%s", u ? u : "");
    }
    json_decref(got);
    return r;
}

struct who_ctx {
    struct kube_client *c;
    const char *want;
};

static bool is_user(void *ctx)
{
    struct who_ctx *w = ctx;
    char who[64];
    return whoami(w->c, who, sizeof(who), NULL) >= 0 && strcmp(who, w->want) == 0;
}

static bool is_unauthorized(void *ctx)
{
    struct who_ctx *w = ctx;
    struct kube_err err;
    char who[64];
    return whoami(w->c, who, sizeof(who), &err) < 0 && kube_err_is_unauthorized(&err);
}

static void test_token_rotation(void **state)
{
    struct kube_config_opts co = {.in_cluster = true, .sa_dir = sa_dir};
    struct kube_client_opts o = {.max_retries = 0};
    struct kube_config *cfg = NULL;
    struct kube_client *c = NULL;
    struct kube_err err;
    char who[64];
    (void)state;

    IT_OK(kube_config_load(&co, &cfg, &err), &err);
    IT_OK(kube_client_new(cfg, &o, &c), &err);
    IT_OK(whoami(c, who, sizeof(who), &err), &err);
    assert_string_equal(who, "admin");
    /* admin may read kube-system: the lookup reaches the store and finds nothing. */
    assert_int_equal(kube_get(c, &KUBE_RES_CONFIGMAPS, "kube-system", "no-such-cm", NULL, &err),
                     -ENOENT);

    publish_user("alice");
    struct who_ctx w = {.c = c, .want = "alice"};
    assert_int_equal(it_wait(is_user, &w, WAIT), 0);
    /* alice has no RBAC grants: what admin could read is now forbidden. */
    assert_int_equal(kube_get(c, &KUBE_RES_CONFIGMAPS, "kube-system", "no-such-cm", NULL, &err),
                     -EPERM);
    assert_true(kube_err_is_forbidden(&err));

    publish_token("not-a-token-the-server-knows");
    assert_int_equal(it_wait(is_unauthorized, &w, WAIT), 0);

    publish_user("bob");
    w.want = "bob";
    assert_int_equal(it_wait(is_user, &w, WAIT), 0);
    kube_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_rotation),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
