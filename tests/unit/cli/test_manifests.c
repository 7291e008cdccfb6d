/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox manifests: multi-document parsing, the resource table, and the
 * manifests built in for install (identical to api/crds and config/, all known kinds). */
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

#include "api/res.h"
#include "cli/install.h"
#include "cli/manifest.h"
#include "common/buf.h"
#include "kube/obj.h"

static void test_parse_documents(void **state)
{
    (void)state;
    const char *text =
        "# leading comment\n---\n"
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n"
        "--- # a comment after the marker\n"
        "---\n"
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: ServiceAccount, metadata: {name: s, namespace: a}}\n"
        "- {apiVersion: agents.x-k8s.io/v1beta1, kind: Sandbox, metadata: {name: b},"
        " spec: {replicas: 3}}\n"
        "----not-a-marker: 1\n";
    json_t *objs = NULL;
    char err[256];
    assert_int_equal(cli_manifest_parse(text, strlen(text), &objs, err, sizeof(err)), 0);
    assert_int_equal(json_array_size(objs), 3);
    assert_string_equal(kube_obj_name(json_array_get(objs, 0)), "a");
    assert_ptr_equal(cli_manifest_res(json_array_get(objs, 0)), &KUBE_RES_NAMESPACES);
    assert_ptr_equal(cli_manifest_res(json_array_get(objs, 1)), &KUBE_RES_SERVICEACCOUNTS);
    assert_ptr_equal(cli_manifest_res(json_array_get(objs, 2)), &API_RES_SANDBOXES);
    /* typed numbers survive */
    assert_true(json_is_integer(kube_obj_path(json_array_get(objs, 2), "spec.replicas")));
    json_decref(objs);
    const char *json = "{\"apiVersion\":\"extensions.agents.x-k8s.io/v1beta1\","
                       "\"kind\":\"SandboxClaim\",\"metadata\":{\"name\":\"c\"}}";
    assert_int_equal(cli_manifest_parse(json, strlen(json), &objs, err, sizeof(err)), 0);
    assert_ptr_equal(cli_manifest_res(json_array_get(objs, 0)), &API_RES_SANDBOXCLAIMS);
    json_decref(objs);
    const char *bad = "a: 1\n---\nb: [1, 2\n";
    assert_int_equal(cli_manifest_parse(bad, strlen(bad), &objs, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "document 2"));
    json_t *o = json_pack("{s:s,s:s}", "apiVersion", "v2", "kind", "Sandbox");
    assert_null(cli_manifest_res(o));
    json_decref(o);
}

/* Reads repository file rel into b. */
static int read_repo(const char *rel, struct buf *b)
{
    const char *data = getenv("AS_TEST_DATA");
    assert_non_null(data);
    char path[2048];
    (void)snprintf(path, sizeof(path), "%s/../../%s", data, rel);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -ENOENT;
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        assert_int_equal(buf_append(b, chunk, n), 0);
    fclose(f);
    return 0;
}

static void test_builtin_manifests_current(void **state)
{
    (void)state;
    size_t n = 0;
    bool crd = false, rbac = false;
    for (const struct cli_manifest *m = cli_manifests; m->path; m++, n++) {
        struct buf b;
        buf_init(&b, 64u << 20);
        assert_int_equal(read_repo(m->path, &b), 0);
        bool same = b.len == m->len && memcmp(b.data, m->text, b.len) == 0;
        buf_done(&b);
        if (!same)
            fail_msg("%s differs from the embedded copy: rebuild", m->path);
        json_t *objs = NULL;
        char err[256];
        assert_int_equal(cli_manifest_parse(m->text, m->len, &objs, err, sizeof(err)), 0);
        size_t i;
        json_t *o;
        json_array_foreach(objs, i, o)
        {
            if (!cli_manifest_res(o))
                fail_msg("%s: kind %s is not in the install table", m->path, kube_obj_kind(o));
            crd = crd || cli_manifest_res(o) == &KUBE_RES_CRDS;
            rbac = rbac || cli_manifest_res(o) == &CLI_RES_CLUSTERROLES;
        }
        json_decref(objs);
    }
    assert_true(n >= 1);
    assert_true(crd && rbac);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_documents),
        cmocka_unit_test(test_builtin_manifests_current),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
