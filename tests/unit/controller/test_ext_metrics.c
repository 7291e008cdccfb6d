/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for controller/ext_metrics: every upstream metric family listed in
 * tests/data/observability/upstream_metrics.txt is exposed with its type and exact label
 * names, histograms have upstream's buckets, and the recorded values are right. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/extensions.h"
#include "as_version.h"
#include "common/buf.h"
#include "common/metrics.h"
#include "common/xalloc.h"
#include "controller/ext_int.h"
#include "controller/ext_metrics.h"
#include "kube/store.h"
#include "support/metrics_fixture.h"

struct fixture {
    struct metrics_registry *reg;
    struct kube_store *store;
    struct ext_metrics m;
    char *text; /* the rendering */
};

static json_t *sandbox(const char *name, const char *launch, bool ready, const char *owner_kind)
{
    json_t *sb = json_pack("{s:{s:s, s:s, s:s, s:{s:s, s:s}, s:{s:s}},"
                           " s:{s:[{s:s, s:s, s:s, s:s}]}}",
                           "metadata", "name", name, "namespace", "team-a", "creationTimestamp",
                           "2026-11-30T10:00:00Z", "labels", "agents.x-k8s.io/launch-type", launch,
                           "agents.x-k8s.io/created-by", "python-client", "annotations",
                           "agents.x-k8s.io/sandbox-template-ref", "python", "status", "conditions",
                           "type", "Ready", "status", ready ? "True" : "False", "reason",
                           ready ? "DependenciesReady" : "x", "lastTransitionTime",
                           "2026-11-30T10:00:01.500Z");
    if (owner_kind)
        json_object_set_new(json_object_get(sb, "metadata"), "ownerReferences",
                            json_pack("[{s:s, s:s, s:s, s:s, s:b}]", "apiVersion",
                                      "extensions.agents.x-k8s.io/v1beta1", "kind", owner_kind,
                                      "name", "o", "uid", "u1", "controller", 1));
    return sb;
}

static json_t *claim(void)
{
    return json_pack("{s:{s:s, s:s, s:{s:s}, s:{s:s, s:s}}}", "metadata", "name", "c1", "namespace",
                     "team-a", "labels", "agents.x-k8s.io/created-by", "go-client", "annotations",
                     "agents.x-k8s.io/client-first-requested-at", "2026-11-30T10:00:00Z",
                     EXT_ANN_WEBHOOK_OBSERVED, "2026-11-30T10:00:00.250Z");
}

static int collect_sandboxes(void *ctx, struct buf *out)
{
    return ext_metrics_render_sandboxes(ctx, out);
}

static int collect_build_info(void *ctx, struct buf *out)
{
    (void)ctx;
    return ext_metrics_render_build_info(out);
}

static int setup(void **state)
{
    struct fixture *f = XNEW(struct fixture);
    json_t *c = claim(), *sb = sandbox("s1", "warm", true, "SandboxClaim");
    struct buf b;
    usec_t now;
    assert_non_null(f);
    f->reg = metrics_registry_new();
    f->store = kube_store_new();
    ext_metrics_register(f->reg, &f->m);
    metrics_register_collector(f->reg, collect_sandboxes, f->store);
    metrics_register_collector(f->reg, collect_build_info, NULL);
    assert_int_equal(kube_store_put(f->store, json_incref(sb), NULL), 0);
    assert_int_equal(kube_store_put(f->store, sandbox("s2", "warm", true, "SandboxClaim"), NULL),
                     0);
    assert_int_equal(kube_store_put(f->store, sandbox("s3", "cold", false, NULL), NULL), 0);
    ext_metrics_creation(&f->m, c, sb, "warm", "pool-a");
    assert_int_equal(clock_parse_rfc3339("2026-11-30T10:00:02Z", &now), 0);
    ext_metrics_first_ready(&f->m, c, sb, now - 300 * USEC_PER_MSEC, now);
    json_decref(c);
    json_decref(sb);
    buf_init(&b, 1u << 20);
    assert_int_equal(metrics_render(f->reg, &b), 0);
    f->text = buf_steal(&b);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    metrics_registry_free(f->reg);
    kube_store_free(f->store);
    xfree(f->text);
    xfree(f);
    return 0;
}

static void test_upstream_families(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(it_check_upstream_metrics(f->text), 7);
}

static void test_values(void **state)
{
    struct fixture *f = *state;
    static const char *const want[] = {
        /* controller: 300 ms; client: 2 s; webhook: 1.75 s; creation: 1.5 s */
        "agent_sandbox_claim_controller_startup_latency_ms_sum{launch_type=\"warm\","
        "sandbox_template=\"python\"} 300\n",
        "agent_sandbox_claim_controller_startup_latency_fine_ms_bucket{launch_type=\"warm\","
        "sandbox_template=\"python\",le=\"1\"} 0\n",
        "agent_sandbox_claim_controller_startup_latency_fine_ms_bucket{launch_type=\"warm\","
        "sandbox_template=\"python\",le=\"300\"} 1\n",
        "agent_sandbox_client_claim_startup_latency_ms_sum{launch_type=\"warm\","
        "sandbox_template=\"python\"} 2000\n",
        "agent_sandbox_claim_startup_latency_ms_sum{launch_type=\"warm\","
        "sandbox_template=\"python\"} 1750\n",
        "agent_sandbox_creation_latency_ms_sum{namespace=\"team-a\",launch_type=\"warm\","
        "sandbox_template=\"python\"} 1500\n",
        "agent_sandbox_claim_creation_total{namespace=\"team-a\",sandbox_template=\"python\","
        "launch_type=\"warm\",warmpool_name=\"pool-a\",pod_condition=\"ready\","
        "created_by=\"go-client\"} 1\n",
        "agent_sandboxes{namespace=\"team-a\",ready_condition=\"true\",expired=\"false\","
        "launch_type=\"warm\",sandbox_template=\"python\",owned_by=\"SandboxClaim\","
        "created_by=\"python-client\"} 2\n",
        "agent_sandboxes{namespace=\"team-a\",ready_condition=\"false\",expired=\"false\","
        "launch_type=\"cold\",sandbox_template=\"python\",owned_by=\"None\","
        "created_by=\"python-client\"} 1\n",
        "agent_sandbox_build_info{git_version=\"v" AS_VERSION "\",",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (!strstr(f->text, want[i]))
            fail_msg("missing %s in:\n%s", want[i], f->text);
}

static void test_no_registry(void **state)
{
    struct ext_metrics m;
    json_t *c = claim(), *sb = sandbox("s", "cold", true, NULL);
    (void)state;
    ext_metrics_register(NULL, &m);
    assert_null(m.creation_total);
    ext_metrics_creation(&m, c, sb, "cold", "p"); /* no registry: nothing, no crash */
    ext_metrics_first_ready(&m, c, sb, 1, 2);
    json_decref(c);
    json_decref(sb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_upstream_families, setup, teardown),
        cmocka_unit_test_setup_teardown(test_values, setup, teardown),
        cmocka_unit_test(test_no_registry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
