/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: desired Pod, Service, PVCs and the Pod metadata patch, from a fixture. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/sandbox_desired.h"
#include "controller/sandbox_names.h"
#include "kube/obj.h"

static json_t *load_fixture(void)
{
    char path[1024];
    const char *dir = getenv("AS_TEST_DATA");
    json_error_t err;
    json_t *j;
    assert_non_null(dir);
    assert_true(snprintf(path, sizeof(path), "%s/controller/sandbox.json", dir) <
                (int)sizeof(path));
    j = json_load_file(path, 0, &err);
    if (!j)
        fail_msg("%s: %s", path, err.text);
    return j;
}

static int setup(void **state)
{
    *state = load_fixture();
    return 0;
}

static int teardown(void **state)
{
    json_decref(*state);
    return 0;
}

static void assert_owner(const json_t *obj)
{
    const json_t *ref = kube_obj_controller_ref(obj);
    assert_non_null(ref);
    assert_string_equal(json_string_value(json_object_get(ref, "apiVersion")),
                        "agents.x-k8s.io/v1beta1");
    assert_string_equal(json_string_value(json_object_get(ref, "kind")), "Sandbox");
    assert_string_equal(json_string_value(json_object_get(ref, "name")), "my-sandbox");
    assert_true(json_is_true(json_object_get(ref, "blockOwnerDeletion")));
    assert_true(sb_controlled_by(obj, "11111111-2222-3333-4444-555555555555"));
}

static void test_pod(void **state)
{
    json_t *sb = *state, *pod = sb_desired_pod(sb);
    const json_t *labels = kube_obj_path(pod, "metadata.labels");
    const json_t *vols = kube_obj_path(pod, "spec.volumes");
    assert_string_equal(kube_obj_name(pod), "my-sandbox");
    assert_string_equal(kube_obj_namespace(pod), "team-a");
    assert_owner(pod);
    assert_int_equal(json_object_size(labels), 5);
    assert_string_equal(kube_obj_label(pod, "tier"), "gold");
    assert_string_equal(kube_obj_label(pod, SB_LABEL_NAME_HASH), "374de8f5");
    assert_string_equal(kube_obj_label(pod, SB_LABEL_WARM_POOL), "91dd7983");
    assert_string_equal(kube_obj_label(pod, SB_LABEL_TEMPLATE_REF), "d274c066");
    assert_string_equal(kube_obj_label(pod, SB_LABEL_CREATED_BY), "python-client");
    assert_null(kube_obj_label(pod, "agents.x-k8s.io/claim-uid"));
    assert_string_equal(kube_obj_annotation(pod, "note"), "hello");
    assert_null(kube_obj_annotation(pod, SB_ANN_TRACE_CONTEXT));
    assert_null(kube_obj_annotation(pod, SB_ANN_POD_NAME));
    assert_string_equal(kube_obj_annotation(pod, SB_ANN_PROP_LABELS), "tier");
    assert_string_equal(kube_obj_annotation(pod, SB_ANN_PROP_ANNOTATION), "note");
    assert_int_equal(json_array_size(vols), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(vols, 0), "name")),
                        "scratch");
    assert_string_equal(
        kube_obj_path_str(json_array_get(vols, 1), "persistentVolumeClaim.claimName"),
        "data-my-sandbox");
    assert_string_equal(
        kube_obj_path_str(json_array_get(kube_obj_path(pod, "spec.containers"), 0), "image"),
        "example/python-runtime:1");
    json_decref(pod);
}

static void test_pod_extension_labels_need_ext_owner(void **state)
{
    json_t *sb = json_deep_copy(*state), *pod;
    json_object_del(json_object_get(sb, "metadata"), "ownerReferences");
    pod = sb_desired_pod(sb);
    assert_null(kube_obj_label(pod, SB_LABEL_WARM_POOL));
    assert_null(kube_obj_label(pod, SB_LABEL_TEMPLATE_REF));
    assert_string_equal(kube_obj_label(pod, SB_LABEL_NAME_HASH), "374de8f5");
    json_decref(pod);
    json_decref(sb);
}

static void test_minimal_pod(void **state)
{
    json_t *sb = json_loads("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\"},"
                            "\"spec\":{\"podTemplate\":{\"spec\":{\"containers\":[{\"name\":\"c\","
                            "\"image\":\"i\"}]}}}}",
                            0, NULL);
    json_t *pod = sb_desired_pod(sb), *svc = sb_desired_service(sb);
    (void)state;
    assert_null(kube_obj_path(pod, "metadata.annotations"));
    assert_null(kube_obj_path(pod, "spec.volumes"));
    assert_string_equal(kube_obj_label(pod, SB_LABEL_NAME_HASH), "e40c292c");
    assert_int_equal(json_array_size(kube_obj_path(svc, "spec.ports")), 0);
    json_decref(pod);
    json_decref(svc);
    json_decref(sb);
}

static void assert_port(const json_t *p, const char *name, const char *proto, int port)
{
    assert_string_equal(json_string_value(json_object_get(p, "name")), name);
    assert_string_equal(json_string_value(json_object_get(p, "protocol")), proto);
    assert_int_equal(json_integer_value(json_object_get(p, "port")), port);
    assert_int_equal(json_integer_value(json_object_get(p, "targetPort")), port);
}

static void test_service(void **state)
{
    json_t *svc = sb_desired_service(*state);
    const json_t *ports = kube_obj_path(svc, "spec.ports");
    assert_string_equal(kube_obj_name(svc), "my-sandbox");
    assert_owner(svc);
    assert_string_equal(kube_obj_path_str(svc, "spec.clusterIP"), "None");
    assert_int_equal(json_object_size(kube_obj_path(svc, "spec.selector")), 1);
    assert_string_equal(
        json_string_value(json_object_get(kube_obj_path(svc, "spec.selector"), SB_LABEL_NAME_HASH)),
        "374de8f5");
    assert_string_equal(kube_obj_label(svc, SB_LABEL_NAME_HASH), "374de8f5");
    assert_int_equal(json_array_size(ports), 5);
    assert_port(json_array_get(ports, 0), "p-53-tcp", "TCP", 53);
    assert_port(json_array_get(ports, 1), "dns", "UDP", 53);
    assert_port(json_array_get(ports, 2), "metrics", "TCP", 8080);
    assert_port(json_array_get(ports, 3), "http", "TCP", 8888);
    assert_port(json_array_get(ports, 4), "p-9000-tcp", "TCP", 9000);
    json_decref(svc);
}

static void test_generated_port_name_collision(void **state)
{
    json_t *sb = json_loads(
        "{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\"},\"spec\":{"
        "\"podTemplate\":"
        "{\"spec\":{\"containers\":[{\"name\":\"c\",\"ports\":[{\"containerPort\":80,\"name\":"
        "\"p-81-tcp\"},{\"containerPort\":81}]}]}}}}",
        0, NULL);
    json_t *ports = sb_service_ports(sb);
    (void)state;
    assert_int_equal(json_array_size(ports), 2);
    assert_port(json_array_get(ports, 0), "p-81-tcp", "TCP", 80);
    assert_port(json_array_get(ports, 1), "p-81-tcp-2", "TCP", 81);
    json_decref(ports);
    json_decref(sb);
}

static void test_pvc(void **state)
{
    json_t *sb = *state;
    const json_t *vct = json_array_get(kube_obj_path(sb, "spec.volumeClaimTemplates"), 0);
    json_t *pvc = sb_desired_pvc(sb, vct);
    char name[64];
    assert_int_equal(sb_pvc_name(sb, vct, name, sizeof(name)), 0);
    assert_string_equal(name, "data-my-sandbox");
    assert_int_equal(sb_pvc_name(sb, vct, name, 8), -E2BIG);
    assert_string_equal(kube_obj_name(pvc), "data-my-sandbox");
    assert_string_equal(kube_obj_namespace(pvc), "team-a");
    assert_string_equal(kube_obj_kind(pvc), "PersistentVolumeClaim");
    assert_owner(pvc);
    assert_string_equal(kube_obj_label(pvc, "kind"), "data");
    assert_string_equal(kube_obj_label(pvc, SB_LABEL_NAME_HASH), "374de8f5");
    assert_string_equal(kube_obj_annotation(pvc, "a"), "b");
    assert_string_equal(kube_obj_path_str(pvc, "spec.resources.requests.storage"), "1Gi");
    json_t *bad = json_loads("{\"spec\":{}}", 0, NULL);
    assert_null(sb_desired_pvc(sb, bad));
    json_decref(bad);
    json_decref(pvc);
}

static void test_meta_patch_none_for_fresh_pod(void **state)
{
    json_t *pod = sb_desired_pod(*state);
    assert_null(sb_pod_meta_patch(*state, pod));
    json_decref(pod);
}

static void test_meta_patch_drift(void **state)
{
    json_t *sb = json_deep_copy(*state);
    json_t *pod = sb_desired_pod(sb), *patch, *tl, *want;
    /* The claim adopted it: owner becomes a claim, template label changes. */
    json_object_set_new(json_array_get(kube_obj_path(sb, "metadata.ownerReferences"), 0), "kind",
                        json_string("SandboxClaim"));
    tl = (json_t *)kube_obj_path(sb, "spec.podTemplate.metadata.labels");
    json_object_del(tl, "tier");
    json_object_set_new(tl, "session", json_string("s-1"));
    json_object_del((json_t *)kube_obj_path(sb, "spec.podTemplate.metadata.annotations"), "note");
    /* A reserved key once leaked onto the Pod and listed as propagated. */
    json_object_set_new((json_t *)kube_obj_path(pod, "metadata.labels"),
                        "agents.x-k8s.io/claim-uid", json_string("c-1"));
    json_object_set_new((json_t *)kube_obj_path(pod, "metadata.annotations"), SB_ANN_PROP_LABELS,
                        json_string("agents.x-k8s.io/claim-uid,tier"));
    /* A foreign label not listed as propagated stays. */
    json_object_set_new((json_t *)kube_obj_path(pod, "metadata.labels"), "other", json_string("x"));
    patch = sb_pod_meta_patch(sb, pod);
    assert_non_null(patch);
    want = json_loads(
        "{\"metadata\":{\"annotations\":{\"agents.x-k8s.io/propagated-annotations\":\"\","
        "\"agents.x-k8s.io/propagated-labels\":\"session\",\"note\":null},\"labels\":{"
        "\"agents.x-k8s.io/claim-uid\":null,\"agents.x-k8s.io/warm-pool-sandbox\":null,"
        "\"session\":\"s-1\",\"tier\":null}}}",
        0, NULL);
    assert_non_null(want);
    assert_true(json_equal(patch, want));
    json_decref(want);
    json_decref(patch);
    json_decref(pod);
    json_decref(sb);
}

static void test_meta_patch_restores_tracking_label(void **state)
{
    json_t *pod = sb_desired_pod(*state), *patch;
    json_object_set_new((json_t *)kube_obj_path(pod, "metadata.labels"), SB_LABEL_NAME_HASH,
                        json_string("00000000"));
    json_object_del((json_t *)kube_obj_path(pod, "metadata.labels"), SB_LABEL_CREATED_BY);
    patch = sb_pod_meta_patch(*state, pod);
    const json_t *lp = kube_obj_path(patch, "metadata.labels");
    assert_int_equal(json_object_size(lp), 2);
    assert_string_equal(json_string_value(json_object_get(lp, SB_LABEL_NAME_HASH)), "374de8f5");
    assert_string_equal(json_string_value(json_object_get(lp, SB_LABEL_CREATED_BY)),
                        "python-client");
    assert_null(kube_obj_path(patch, "metadata.annotations"));
    json_decref(patch);
    json_decref(pod);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pod, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pod_extension_labels_need_ext_owner, setup, teardown),
        cmocka_unit_test(test_minimal_pod),
        cmocka_unit_test_setup_teardown(test_service, setup, teardown),
        cmocka_unit_test(test_generated_port_name_collision),
        cmocka_unit_test_setup_teardown(test_pvc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_meta_patch_none_for_fresh_pod, setup, teardown),
        cmocka_unit_test_setup_teardown(test_meta_patch_drift, setup, teardown),
        cmocka_unit_test_setup_teardown(test_meta_patch_restores_tracking_label, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
