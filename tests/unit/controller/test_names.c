/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: name hash vectors, reserved keys, created-by normalisation, ownership. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <jansson.h>

#include "controller/sandbox_names.h"

static void test_hash_vectors(void **state)
{
    static const char *const v[][2] = {
        {"", "811c9dc5"},
        {"a", "e40c292c"},
        {"my-sandbox", "374de8f5"},
        {"pool", "91dd7983"},
        {"python-sandbox-template", "d274c066"},
    };
    char out[SB_HASH_LEN + 1];
    (void)state;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        sb_name_hash(v[i][0], out);
        assert_string_equal(out, v[i][1]);
    }
    sb_name_hash(NULL, out);
    assert_string_equal(out, "811c9dc5");
}

static void test_reserved(void **state)
{
    (void)state;
    assert_true(sb_key_reserved("agents.x-k8s.io/sandbox-name-hash"));
    assert_true(sb_key_reserved("extensions.agents.x-k8s.io/anything"));
    assert_false(sb_key_reserved("agents.x-k8s.io"));
    assert_false(sb_key_reserved("my.agents.x-k8s.io/x"));
    assert_false(sb_key_reserved("tier"));
    assert_true(sb_annotation_system("opentelemetry.io/trace-context"));
    assert_false(sb_annotation_system("opentelemetry.io/other"));
}

static void test_created_by(void **state)
{
    (void)state;
    assert_string_equal(sb_created_by_normalize("go-client"), "go-client");
    assert_string_equal(sb_created_by_normalize("python-client"), "python-client");
    assert_string_equal(sb_created_by_normalize("controller"), "controller");
    assert_string_equal(sb_created_by_normalize("kubectl"), "unknown");
    assert_null(sb_created_by_normalize(NULL));
}

static void test_ownership(void **state)
{
    json_t *o =
        json_loads("{\"metadata\":{\"labels\":{\"agents.x-k8s.io/adoptable\":\"true\"},"
                   "\"ownerReferences\":[{\"apiVersion\":\"agents.x-k8s.io/v1alpha1\","
                   "\"kind\":\"Sandbox\",\"name\":\"s\",\"uid\":\"u1\",\"controller\":true}]}}",
                   0, NULL);
    json_t *bare =
        json_loads("{\"metadata\":{\"labels\":{\"agents.x-k8s.io/adoptable\":\"yes\"}}}", 0, NULL);
    (void)state;
    assert_non_null(o);
    assert_true(sb_controlled_by(o, "u1"));
    assert_false(sb_controlled_by(o, "u2"));
    assert_false(sb_uncontrolled(o));
    assert_true(sb_adoptable_label(o));
    assert_true(sb_controller_is(o, "agents.x-k8s.io", "Sandbox"));
    assert_false(sb_controller_is(o, "extensions.agents.x-k8s.io", "Sandbox"));
    assert_false(sb_controller_is(o, "agents.x-k8s.io", "SandboxClaim"));
    assert_true(sb_uncontrolled(bare));
    assert_false(sb_adoptable_label(bare));
    assert_false(sb_controlled_by(bare, "u1"));
    json_decref(o);
    json_decref(bare);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_vectors),
        cmocka_unit_test(test_reserved),
        cmocka_unit_test(test_created_by),
        cmocka_unit_test(test_ownership),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
