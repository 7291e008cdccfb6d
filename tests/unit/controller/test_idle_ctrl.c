/* SPDX-License-Identifier: Apache-2.0 */
/* controller/idle_ctrl: the idle step of a pass against a scripted API server on
 * 127.0.0.1 (tests/support/script_srv.h) and a stub sandboxd probe: what a refused
 * suspend PATCH waits for by the refusal's kind, and no probe or PATCH with a
 * resourceVersion the pass knows is old. */
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
#include <unistd.h>

#include "common/clock.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "controller/idle_ctrl.h"
#include "controller/sandbox_memo.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "support/script_srv.h"

/* What the scripted server saw and answers (under its lock). */
static struct {
    long patch_code; /* the status of every PATCH */
    int patches;
    char body[4096]; /* the last PATCH's */
} S;

static struct script_env ENV; /* the scripted API server and its client */
static int probes;

static int answer(int fd, const struct script_req *rq, void *ctx)
{
    (void)ctx;
    if (strcmp(rq->method, "PATCH") != 0 || !strstr(rq->target, "/sandboxes/sb")) {
        char *f = script_failure(404, NULL);
        script_respond(fd, 404, NULL, f);
        xfree(f);
        return 0;
    }
    S.patches++;
    (void)snprintf(S.body, sizeof(S.body), "%.*s", (int)rq->body_len, rq->body);
    if (S.patch_code == 200) {
        script_respond(fd, 200, NULL, "{\"kind\":\"Sandbox\",\"metadata\":{\"name\":\"sb\"}}");
    } else {
        char *f = script_failure(S.patch_code, NULL);
        script_respond(fd, S.patch_code, NULL, f);
        xfree(f);
    }
    return 0;
}

static size_t running; /* what probe_idle reports */

/* sandboxd: `running` processes, last request an hour ago. */
static int probe_idle(void *ctx, const char *ip, uint16_t port, usec_t timeout,
                      struct idle_probe *ret)
{
    (void)ctx;
    (void)port;
    (void)timeout;
    assert_string_equal(ip, "10.0.0.9");
    probes++;
    *ret = (struct idle_probe){.running_processes = running,
                               .last_activity = clock_wall_now() - 3600 * USEC_PER_SEC};
    return 0;
}

static int setup(void **state)
{
    (void)state;
    log_set_level(LOG_ERROR);
    memset(&S, 0, sizeof(S));
    probes = 0;
    running = 0;
    script_env_start(&ENV, answer, NULL, true, "ns", NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    script_env_stop(&ENV);
    return 0;
}

/* A Running, Ready Sandbox with an idle policy of timeout_s, made and Ready an hour ago. */
static json_t *idle_sandbox(int timeout_s)
{
    char old[64];
    clock_format_rfc3339_sec(clock_wall_now() - 3600 * USEC_PER_SEC, old, sizeof(old));
    return json_pack("{s:{s:s, s:s, s:s, s:s, s:i, s:s}, s:{s:s, s:{s:i}}, "
                     "s:{s:[{s:s, s:s, s:s}], s:[s]}}",
                     "metadata", "name", "sb", "namespace", "ns", "uid", "u-1", "resourceVersion",
                     "7", "generation", 1, "creationTimestamp", old, "spec", "operatingMode",
                     "Running", "idlePolicy", "timeoutSeconds", timeout_s, "status", "conditions",
                     "type", "Ready", "status", "True", "lastTransitionTime", old, "podIPs",
                     "10.0.0.9");
}

struct refusal_case {
    const char *what;
    int timeout_s;
    long code;
    usec_t stale;
    int want_ret, want_patches, want_probes;
    usec_t want_requeue;
    uint64_t want_conflicts, want_errors;
};

/* Before, every refusal was retried after 1 s with a probe each time (an admission
 * policy refusing the change cost a PATCH and a probe a second, for good), and a pass
 * that had just written the status sent a PATCH with the old resourceVersion (a 409). */
static void test_suspend_refusals(void **state)
{
    static const struct refusal_case cases[] = {
        {"suspended", 60, 200, 0, 1, 1, 1, 0, 0, 0},
        {"conflict: decided again soon", 60, 409, 0, 0, 1, 1, LIMIT_IDLE_RETRY, 1, 0},
        {"forbidden: as a failed probe", 60, 403, 0, 0, 1, 1, LIMIT_IDLE_PROBE_RETRY, 0, 1},
        {"invalid: as a failed probe", 60, 422, 0, 0, 1, 1, LIMIT_IDLE_PROBE_RETRY, 0, 1},
        {"server error, short timeout", 10, 500, 0, 0, 1, 1, 10 * USEC_PER_SEC, 0, 1},
        {"status just written: no probe, no PATCH", 60, 200, SB_MEMO_TTL, 0, 0, 0, SB_MEMO_TTL, 0,
         0},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct refusal_case *k = &cases[i];
        struct idle_ctrl_opts o = {.client = ENV.client, .probe = probe_idle};
        struct idle_ctrl *c = idle_ctrl_new(&o);
        struct idle_ctrl_stats st;
        json_t *sb = idle_sandbox(k->timeout_s);
        usec_t requeue = 0;
        print_message("case: %s\n", k->what);
        script_srv_lock(ENV.srv);
        S.patch_code = k->code;
        S.patches = 0;
        script_srv_unlock(ENV.srv);
        probes = 0;
        int r = idle_ctrl_check(c, sb, json_object_get(sb, "status"), k->stale, &requeue);
        assert_int_equal(r, k->want_ret);
        script_srv_lock(ENV.srv);
        assert_int_equal(S.patches, k->want_patches);
        if (k->want_patches) {
            assert_non_null(strstr(S.body, "\"resourceVersion\":\"7\""));
            assert_non_null(strstr(S.body, "\"operatingMode\":\"Suspended\""));
        }
        script_srv_unlock(ENV.srv);
        assert_int_equal(probes, k->want_probes);
        assert_int_equal(requeue, k->want_requeue);
        idle_ctrl_stats(c, &st);
        assert_int_equal(st.suspends, (uint64_t)k->want_ret);
        assert_int_equal(st.conflicts, k->want_conflicts);
        assert_int_equal(st.suspend_errors, k->want_errors);
        json_decref(sb);
        idle_ctrl_free(c);
    }
}

/* A Sandbox seen busy is remembered: the next pass waits a timeout from then, without a
 * probe. Once it is deleted (idle_ctrl_forget, from the manager's deletion handler) it
 * is not: before, entries stayed until the map's limit cleared every live one too. */
static void test_busy_remembered_until_forgotten(void **state)
{
    struct idle_ctrl_opts o = {.client = ENV.client, .probe = probe_idle};
    struct idle_ctrl *c = idle_ctrl_new(&o);
    json_t *sb = idle_sandbox(60);
    const json_t *st = json_object_get(sb, "status");
    usec_t requeue = 0;
    (void)state;
    running = 2;
    assert_int_equal(idle_ctrl_check(c, sb, st, 0, &requeue), 0);
    assert_int_equal(probes, 1);
    assert_int_equal(requeue, 30 * USEC_PER_SEC); /* busy: half the timeout */
    running = 0;
    requeue = 0;
    assert_int_equal(idle_ctrl_check(c, sb, st, 0, &requeue), 0);
    assert_int_equal(probes, 1); /* the busy time stands for activity: no probe */
    assert_true(requeue > 55 * USEC_PER_SEC && requeue <= 60 * USEC_PER_SEC);
    idle_ctrl_forget(c, "u-1");
    idle_ctrl_forget(c, NULL);
    script_srv_lock(ENV.srv);
    S.patch_code = 409;
    script_srv_unlock(ENV.srv);
    requeue = 0;
    assert_int_equal(idle_ctrl_check(c, sb, st, 0, &requeue), 0);
    assert_int_equal(probes, 2); /* forgotten: due again from its creation an hour ago */
    json_decref(sb);
    idle_ctrl_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_suspend_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_busy_remembered_until_forgotten, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
