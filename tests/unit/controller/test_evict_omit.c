/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: a warm-adopted Sandbox marked pod-omits-safe-to-evict keeps the pool's
 * safe-to-evict "true" off its Pod (create and metadata patch) while its template keeps it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "controller/sandbox_desired.h"
#include "controller/sandbox_names.h"
#include "kube/obj.h"

/* The fixture Sandbox with safe-to-evict = value in its pod template (a pool member). */
static json_t *pool_member(const char *value)
{
    char path[1024];
    const char *dir = getenv("AS_TEST_DATA");
    json_t *sb;
    assert_non_null(dir);
    assert_true(snprintf(path, sizeof(path), "%s/controller/sandbox.json", dir) <
                (int)sizeof(path));
    sb = json_load_file(path, 0, NULL);
    assert_non_null(sb);
    json_object_set_new((json_t *)kube_obj_path(sb, "spec.podTemplate.metadata.annotations"),
                        SB_ANN_SAFE_TO_EVICT, json_string(value));
    return sb;
}

/* What adoption does by default: the marker on the Sandbox, the template unchanged. */
static void mark(json_t *sb)
{
    json_t *meta = json_object_get(sb, "metadata");
    if (!json_object_get(meta, "annotations"))
        json_object_set_new(meta, "annotations", json_object());
    json_object_set_new(json_object_get(meta, "annotations"), SB_ANN_POD_OMIT_EVICT,
                        json_string("true"));
}

static const char *pod_evict(const json_t *pod)
{
    return json_string_value(
        json_object_get(kube_obj_path(pod, "metadata.annotations"), SB_ANN_SAFE_TO_EVICT));
}

static void test_pool_pod_carries_it(void **state)
{
    json_t *sb = pool_member("true"), *pod = sb_desired_pod(sb);
    (void)state;
    assert_non_null(pod_evict(pod));
    assert_string_equal(pod_evict(pod), "true");
    json_decref(pod);
    json_decref(sb);
}

static void test_adopted_pod_patch_drops_it(void **state)
{
    json_t *sb = pool_member("true"), *pod = sb_desired_pod(sb), *patch, *ap;
    (void)state;
    mark(sb);
    patch = sb_pod_meta_patch(sb, pod);
    assert_non_null(patch);
    ap = (json_t *)kube_obj_path(patch, "metadata.annotations");
    assert_true(json_is_null(json_object_get(ap, SB_ANN_SAFE_TO_EVICT)));
    /* the template still has it: adoption changed no spec */
    assert_string_equal(
        json_string_value(json_object_get(
            kube_obj_path(sb, "spec.podTemplate.metadata.annotations"), SB_ANN_SAFE_TO_EVICT)),
        "true");
    json_decref(patch);
    json_decref(pod);
    json_decref(sb);
}

static void test_adopted_new_pod_lacks_it(void **state)
{
    json_t *sb = pool_member("true"), *pod;
    (void)state;
    mark(sb);
    pod = sb_desired_pod(sb);
    assert_null(pod_evict(pod));
    assert_null(sb_pod_meta_patch(sb, pod));
    json_decref(pod);
    json_decref(sb);
}

static void test_explicit_false_stays(void **state)
{
    json_t *sb = pool_member("false"), *pod;
    (void)state;
    mark(sb);
    pod = sb_desired_pod(sb);
    assert_non_null(pod_evict(pod));
    assert_string_equal(pod_evict(pod), "false");
    json_decref(pod);
    json_decref(sb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_pod_carries_it),
        cmocka_unit_test(test_adopted_pod_patch_drops_it),
        cmocka_unit_test(test_adopted_new_pod_lacks_it),
        cmocka_unit_test(test_explicit_false_stays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
