/* SPDX-License-Identifier: Apache-2.0 */
/* The claim-burst gate (ext_ctrl_claims_busy, ext_ctrl_burst_wait): writes no client waits
 * for wait while claim reconciles are queued, re-checked in short slices, at most the
 * window from the first call per uid, then go; a window of USEC_INFINITY never waits. The
 * controller is built but not started (no API server: the client points nowhere). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <stdio.h>

#include "common/limits.h"
#include "controller/ext_ctrl.h"
#include "controller/ext_int.h"
#include "controller/sandbox_memo.h"
#include "controller/workloop.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/workqueue.h"
#include "support/apiserver.h"

#define WINDOW (300 * USEC_PER_MSEC)

static struct kube_client *client;
static struct sb_memo *memo;

static int setup(void **state)
{
    char path[4096];
    struct kube_config *cfg = NULL;
    struct kube_err e;
    (void)state;
    if (it_data_path("kube/kc-a.yaml", path, sizeof(path)) < 0 ||
        kube_config_load(&(struct kube_config_opts){.kubeconfig = path}, &cfg, &e) < 0 ||
        kube_client_new(cfg, &(struct kube_client_opts){.qps = 0}, &client) < 0)
        return -1;
    memo = sb_memo_new();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sb_memo_free(memo);
    kube_client_free(client); /* frees the config it took */
    return 0;
}

static struct ext_ctrl *new_ctrl(usec_t window)
{
    struct ext_ctrl *x = NULL;
    struct ext_opts o = {.burst_defer = window};
    struct ext_deps d = {.client = client, .memo = memo};
    assert_int_equal(ext_ctrl_new(&o, &d, &x), 0);
    return x;
}

static void busy(struct ext_ctrl *x)
{
    wq_add(workloop_queue(x->loops[EXT_LOOP_CLAIM]), "ns/a-claim");
}

static void test_idle_writes_at_once(void **state)
{
    (void)state;
    struct ext_ctrl *x = new_ctrl(WINDOW);
    assert_false(ext_ctrl_claims_busy(x, false));
    assert_false(ext_ctrl_claims_busy(x, true));
    assert_int_equal(ext_ctrl_burst_wait(x, "u-idle", false), 0);
    ext_ctrl_free(x);
}

static void test_busy_waits_then_goes(void **state)
{
    (void)state;
    struct ext_ctrl *x = new_ctrl(WINDOW);
    usec_t t0 = clock_now(), w;
    busy(x);
    assert_true(ext_ctrl_claims_busy(x, false));
    assert_true(ext_ctrl_claims_busy(x, true)); /* a queued claim is not the caller */
    w = ext_ctrl_burst_wait(x, "u-busy", true);
    assert_true(w > 0 && w <= LIMIT_EXT_BURST_RECHECK); /* re-checked in slices */
    /* another object gets its own window (a colliding slot would not delay it at all) */
    assert_true(ext_ctrl_burst_wait(x, "u-other", false) > 0);
    while ((w = ext_ctrl_burst_wait(x, "u-busy", true)) > 0) {
        assert_true(clock_now() - t0 < WINDOW + USEC_PER_SEC); /* bounded by the window */
        clock_sleep(w);
    }
    assert_true(clock_now() - t0 >= WINDOW - 10 * USEC_PER_MSEC);
    /* the window is over: this call writes; a later pass that finds claims busy again
     * starts a new window (as a refill deferral does) */
    assert_true(ext_ctrl_burst_wait(x, "u-busy", true) > 0);
    ext_ctrl_free(x);
}

static void test_window_off_never_waits(void **state)
{
    (void)state;
    struct ext_ctrl *x = new_ctrl(USEC_INFINITY);
    busy(x);
    assert_true(ext_ctrl_claims_busy(x, false));
    assert_int_equal(ext_ctrl_burst_wait(x, "u-off", false), 0);
    ext_ctrl_free(x);
}

static void test_default_window(void **state)
{
    (void)state;
    struct ext_ctrl *x = new_ctrl(0); /* LIMIT_EXT_BURST_DEFER */
    busy(x);
    assert_true(ext_ctrl_burst_wait(x, "u-default", false) > 0);
    ext_ctrl_free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_writes_at_once),
        cmocka_unit_test(test_busy_waits_then_goes),
        cmocka_unit_test(test_window_off_never_waits),
        cmocka_unit_test(test_default_window),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
