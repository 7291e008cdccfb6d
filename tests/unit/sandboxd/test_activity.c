/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/activity: the pure computation (idle time, busy while a process runs) and the
 * endpoint on a real daemon: public even with a token, counts a streaming process,
 * and API requests reset the idle time while probes do not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <jansson.h>

#include "ndjson_client.h"
#include "sandboxd/activity.h"
#include "sbd_test.h"

static void test_compute_idle(void **state)
{
    (void)state;
    struct sbd_activity a;
    sbd_activity_compute(0, 0, 10 * USEC_PER_SEC, 25 * USEC_PER_SEC, 1000 * USEC_PER_SEC, &a);
    assert_int_equal(a.running_processes, 0);
    assert_int_equal(a.idle, 15 * USEC_PER_SEC);
    assert_int_equal(a.last_activity_wall, 985 * USEC_PER_SEC);
}

static void test_compute_busy(void **state)
{
    (void)state;
    struct sbd_activity a;
    sbd_activity_compute(2, 0, 10 * USEC_PER_SEC, 25 * USEC_PER_SEC, 1000 * USEC_PER_SEC, &a);
    assert_int_equal(a.running_processes, 2);
    assert_int_equal(a.idle, 0);
    assert_int_equal(a.last_activity_wall, 1000 * USEC_PER_SEC);
}

static void test_compute_orphans_are_busy(void **state)
{
    (void)state;
    struct sbd_activity a;
    /* A daemonized descendant of an exited command keeps the sandbox busy. */
    sbd_activity_compute(1, 2, 10 * USEC_PER_SEC, 25 * USEC_PER_SEC, 1000 * USEC_PER_SEC, &a);
    assert_int_equal(a.running_processes, 3);
    assert_int_equal(a.orphan_processes, 2);
    assert_int_equal(a.idle, 0);
    sbd_activity_compute(0, 1, 10 * USEC_PER_SEC, 25 * USEC_PER_SEC, 1000 * USEC_PER_SEC, &a);
    assert_int_equal(a.running_processes, 1);
    assert_int_equal(a.idle, 0);
    assert_int_equal(a.last_activity_wall, 1000 * USEC_PER_SEC);
}

static void test_compute_clock_skew(void **state)
{
    (void)state;
    struct sbd_activity a;
    /* A last time after now (never in practice) must not underflow. */
    sbd_activity_compute(0, 0, 30 * USEC_PER_SEC, 25 * USEC_PER_SEC, 1000 * USEC_PER_SEC, &a);
    assert_int_equal(a.idle, 0);
}

static void test_json_shape(void **state)
{
    (void)state;
    struct sbd_activity a = {.running_processes = 3,
                             .orphan_processes = 1,
                             .last_activity_wall = 1764464523 * USEC_PER_SEC,
                             .idle = 1500 * USEC_PER_MSEC};
    json_t *j = sbd_activity_json(&a);
    assert_int_equal(json_integer_value(json_object_get(j, "running_processes")), 3);
    assert_int_equal(json_integer_value(json_object_get(j, "orphan_processes")), 1);
    assert_string_equal(json_string_value(json_object_get(j, "last_activity")),
                        "2025-11-30T01:02:03.000000Z");
    assert_true(json_real_value(json_object_get(j, "idle_seconds")) == 1.5);
    json_decref(j);
}

/* GET /v1/activity without a token; returns the parsed body (new). */
static json_t *get_activity(struct sbd_fixture *f)
{
    struct test_http_resp r;
    int st = sbd_do(f->port, "GET", "/v1/activity", NULL, NULL, &r);
    assert_int_equal(st, 200);
    json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
    assert_non_null(j);
    test_http_resp_done(&r);
    return j;
}

static double idle_of(const json_t *j)
{
    return json_real_value(json_object_get(j, "idle_seconds"));
}

static void test_endpoint(void **state)
{
    (void)state;
    struct sbd_fixture *f = sbd_fixture_start("s3cret", 0);
    json_t *a = get_activity(f); /* public although the daemon has a token */
    assert_int_equal(json_integer_value(json_object_get(a, "running_processes")), 0);
    assert_non_null(json_string_value(json_object_get(a, "last_activity")));
    /* Probes do not count as activity: idle time only grows across them. */
    json_t *b = get_activity(f);
    assert_true(idle_of(b) >= idle_of(a));
    struct test_http_resp r;
    assert_int_equal(sbd_do(f->port, "GET", "/v1/health", NULL, NULL, &r), 200);
    test_http_resp_done(&r);
    json_t *c = get_activity(f);
    assert_true(idle_of(c) >= idle_of(b));
    /* An authenticated API request resets it. */
    assert_int_equal(
        sbd_do(f->port, "GET", "/v1/metadata", "Authorization: Bearer s3cret\r\n", NULL, &r), 200);
    test_http_resp_done(&r);
    json_t *d = get_activity(f);
    assert_true(idle_of(d) <= idle_of(c));
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(d);
    sbd_fixture_stop(f);
}

static void test_running_process_is_busy(void **state)
{
    (void)state;
    struct sbd_fixture *f = sbd_fixture_start(NULL, 0);
    struct nd_client n;
    assert_int_equal(nd_start(&n, f->port, "/v1/processes", "{\"command\":[\"sleep\",\"30\"]}"),
                     200);
    json_t *start = nd_next(&n, 5000);
    assert_non_null(start);
    json_decref(start);
    json_t *a = get_activity(f);
    assert_int_equal(json_integer_value(json_object_get(a, "running_processes")), 1);
    assert_true(idle_of(a) == 0.0);
    json_decref(a);
    nd_close(&n);
    sbd_fixture_stop(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compute_idle),
        cmocka_unit_test(test_compute_busy),
        cmocka_unit_test(test_compute_orphans_are_busy),
        cmocka_unit_test(test_compute_clock_skew),
        cmocka_unit_test(test_json_shape),
        cmocka_unit_test(test_endpoint),
        cmocka_unit_test(test_running_process_is_busy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
