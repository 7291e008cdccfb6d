/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/metrics: exact exposition text, escaping, histogram buckets,
 * the series limit, series handles, concurrent updates, collectors and the process
 * collector. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/wait.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/metrics.h"
#include "common/str.h"
#include "common/xalloc.h"

#define DROPPED_HEADER                                                                     \
    "# HELP metrics_series_dropped_total Label-value tuples dropped because their metric " \
    "family reached its series limit.\n"                                                   \
    "# TYPE metrics_series_dropped_total counter\n"

#define LV(...) ((const char *const[]){__VA_ARGS__})

static char *render(struct metrics_registry *r)
{
    struct buf b;
    buf_init(&b, 64u * 1024 * 1024);
    assert_int_equal(metrics_render(r, &b), 0);
    return buf_steal(&b);
}

static void test_exposition_text(void **state)
{
    (void)state;
    struct metrics_registry *r = metrics_registry_new();
    static const char *const http_labels[] = {"method", "path", NULL};
    static const char *const pool_label[] = {"pool", NULL};
    static const double bounds[] = {0.001, 0.01, 0.1};
    struct metric *c = metrics_counter(r, "http_requests_total",
                                       "Requests \\ served \"here\".\nSecond line", http_labels);
    struct metric *g = metrics_gauge(r, "queue_depth", "Depth.", NULL);
    struct metric *h =
        metrics_histogram(r, "claim_seconds", "Claim latency.", pool_label, bounds, 3);
    (void)metrics_gauge(r, "unused", "No series yet.", NULL);

    metric_inc(c, LV("GET", "/a\"b"));
    metric_add(c, LV("GET", "/a\"b"), 2.5);
    metric_inc(c, LV("POST", "back\\slash\nnl"));
    metric_add(c, LV("POST", "back\\slash\nnl"), -5); /* counters never go down */
    metric_set(g, NULL, 7);
    metric_inc(g, NULL);
    metric_dec(g, NULL);
    metric_add(g, NULL, -2);
    metric_observe(h, LV("a"), 0.0009765625);
    metric_observe(h, LV("a"), 0.0078125);
    metric_observe(h, LV("a"), 0.0625);
    metric_observe(h, LV("a"), 4);
    metric_observe(h, LV("b"), 0.001); /* a bound is inclusive */

    static const char want[] =
        "# HELP http_requests_total Requests \\\\ served \"here\".\\nSecond line\n"
        "# TYPE http_requests_total counter\n"
        "http_requests_total{method=\"GET\",path=\"/a\\\"b\"} 3.5\n"
        "http_requests_total{method=\"POST\",path=\"back\\\\slash\\nnl\"} 1\n"
        "# HELP queue_depth Depth.\n"
        "# TYPE queue_depth gauge\n"
        "queue_depth 5\n"
        "# HELP claim_seconds Claim latency.\n"
        "# TYPE claim_seconds histogram\n"
        "claim_seconds_bucket{pool=\"a\",le=\"0.001\"} 1\n"
        "claim_seconds_bucket{pool=\"a\",le=\"0.01\"} 2\n"
        "claim_seconds_bucket{pool=\"a\",le=\"0.1\"} 3\n"
        "claim_seconds_bucket{pool=\"a\",le=\"+Inf\"} 4\n"
        "claim_seconds_sum{pool=\"a\"} 4.0712890625\n"
        "claim_seconds_count{pool=\"a\"} 4\n"
        "claim_seconds_bucket{pool=\"b\",le=\"0.001\"} 1\n"
        "claim_seconds_bucket{pool=\"b\",le=\"0.01\"} 1\n"
        "claim_seconds_bucket{pool=\"b\",le=\"0.1\"} 1\n"
        "claim_seconds_bucket{pool=\"b\",le=\"+Inf\"} 1\n"
        "claim_seconds_sum{pool=\"b\"} 0.001\n"
        "claim_seconds_count{pool=\"b\"} 1\n"
        "# HELP unused No series yet.\n"
        "# TYPE unused gauge\n" DROPPED_HEADER;
    char *text = render(r);
    assert_string_equal(text, want);
    xfree(text);
    metrics_registry_free(r);
}

static void test_histogram_unlabelled_and_specials(void **state)
{
    (void)state;
    struct metrics_registry *r = metrics_registry_new();
    double bounds[4];
    metrics_exp_buckets(0.001, 2, 4, bounds);
    struct metric *h = metrics_histogram(r, "lat_seconds", "", NULL, bounds, 4);
    metric_observe(h, NULL, 0.003);
    metric_observe(h, NULL, 1e9);
    metric_observe(h, NULL, 0.0 / 0.0); /* NaN: ignored */
    static const char want[] = "# HELP lat_seconds \n"
                               "# TYPE lat_seconds histogram\n"
                               "lat_seconds_bucket{le=\"0.001\"} 0\n"
                               "lat_seconds_bucket{le=\"0.002\"} 0\n"
                               "lat_seconds_bucket{le=\"0.004\"} 1\n"
                               "lat_seconds_bucket{le=\"0.008\"} 1\n"
                               "lat_seconds_bucket{le=\"+Inf\"} 2\n"
                               "lat_seconds_sum 1000000000.003\n"
                               "lat_seconds_count 2\n" DROPPED_HEADER;
    char *text = render(r);
    assert_string_equal(text, want);
    xfree(text);
    double v = 0;
    assert_int_equal(metric_get(h, NULL, &v), 0);
    assert_true(v == 2);
    metrics_registry_free(r);
}

static void test_buckets_helpers(void **state)
{
    (void)state;
    double b[16];
    metrics_exp_buckets(0.001, 2, 16, b);
    assert_true(b[0] == 0.001);
    assert_true(b[15] > 32.7 && b[15] < 32.8);
    metrics_linear_buckets(1, 0.5, 3, b);
    assert_true(b[0] == 1 && b[1] == 1.5 && b[2] == 2);
}

static void test_get_remove(void **state)
{
    (void)state;
    struct metrics_registry *r = metrics_registry_new();
    static const char *const ln[] = {"pool", NULL};
    struct metric *g = metrics_gauge(r, "pool_size", "Ready sandboxes.", ln);
    double v = -1;
    assert_int_equal(metric_get(g, LV("x"), &v), -ENOENT);
    assert_true(v == -1);
    metric_set(g, LV("x"), 3);
    metric_set(g, LV("y"), 4);
    metric_set(g, LV("z"), 5);
    assert_int_equal(metric_get(g, LV("y"), &v), 0);
    assert_true(v == 4);
    assert_true(metric_remove(g, LV("y")));
    assert_false(metric_remove(g, LV("y")));
    assert_int_equal(metric_get(g, LV("y"), &v), -ENOENT);
    static const char want[] = "# HELP pool_size Ready sandboxes.\n"
                               "# TYPE pool_size gauge\n"
                               "pool_size{pool=\"x\"} 3\n"
                               "pool_size{pool=\"z\"} 5\n" DROPPED_HEADER;
    char *text = render(r);
    assert_string_equal(text, want);
    xfree(text);
    /* A removed series comes back from zero, at the end. */
    metric_inc(g, LV("y"));
    assert_int_equal(metric_get(g, LV("y"), &v), 0);
    assert_true(v == 1);
    metrics_registry_free(r);
}

static void test_series_limit(void **state)
{
    (void)state;
    struct metrics_registry *r = metrics_registry_new();
    static const char *const ln[] = {"id", NULL};
    struct metric *c = metrics_counter(r, "big_total", "Many series.", ln);
    char id[32];
    for (unsigned i = 0; i < LIMIT_METRIC_SERIES + 5; i++) {
        (void)snprintf(id, sizeof(id), "%u", i);
        metric_inc(c, LV(id));
    }
    /* Existing series keep counting past the limit. */
    metric_inc(c, LV("0"));
    double v = 0;
    assert_int_equal(metric_get(c, LV("0"), &v), 0);
    assert_true(v == 2);
    (void)snprintf(id, sizeof(id), "%u", LIMIT_METRIC_SERIES);
    assert_int_equal(metric_get(c, LV(id), &v), -ENOENT);
    /* Label values too long for a key are dropped too. */
    char *huge = xmalloc(METRICS_MAX_LABEL_BYTES + 10);
    memset(huge, 'x', METRICS_MAX_LABEL_BYTES + 9);
    huge[METRICS_MAX_LABEL_BYTES + 9] = '\0';
    metric_inc(c, LV(huge));
    xfree(huge);

    char *text = render(r);
    assert_non_null(strstr(text, "big_total{id=\"9999\"} 1\n"));
    assert_null(strstr(text, "big_total{id=\"10000\"}"));
    assert_non_null(strstr(text,
                           DROPPED_HEADER "metrics_series_dropped_total{metric=\"big_total\"} "
                                          "6\n"));
    xfree(text);
    metrics_registry_free(r);
}

/* A handle updates the same series as the label values do, renders identically, and
 * the series limit gives NULL handles whose updates are ignored. */
static void test_series_handles(void **state)
{
    (void)state;
    struct metrics_registry *r = metrics_registry_new();
    static const char *const ln[] = {"method", "code", NULL};
    static const double bounds[] = {0.1, 1};
    struct metric *c = metrics_counter(r, "req_total", "Requests.", ln);
    struct metric *h = metrics_histogram(r, "req_seconds", "Request time.", ln, bounds, 2);
    struct metric *g = metrics_gauge(r, "inflight", "In flight.", NULL);
    struct metric_series *cs = metric_series_get(c, LV("GET", "200"));
    assert_ptr_equal(metric_series_get(c, LV("GET", "200")), cs); /* one series */
    struct metric_series *hs = metric_series_get(h, LV("GET", "200"));
    struct metric_series *gs = metric_series_get(g, NULL);
    metric_series_add(cs, 1);
    metric_inc(c, LV("GET", "200"));
    metric_series_add(cs, 2.5);
    metric_series_add(cs, -7); /* counters only go up */
    metric_series_observe(hs, 0.05);
    metric_series_observe(hs, 0.5);
    metric_observe(h, LV("GET", "200"), 5);
    metric_series_observe(hs, 0.0 / 0.0); /* NaN ignored */
    metric_series_add(gs, 1);
    metric_series_add(gs, 1);
    metric_series_add(gs, -1);
    double v = 0;
    assert_int_equal(metric_get(c, LV("GET", "200"), &v), 0);
    assert_true(v == 4.5);
    assert_int_equal(metric_get(h, LV("GET", "200"), &v), 0);
    assert_true(v == 3);
    assert_int_equal(metric_get(g, NULL, &v), 0);
    assert_true(v == 1);
    char *text = render(r);
    assert_non_null(strstr(text, "req_total{method=\"GET\",code=\"200\"} 4.5\n"));
    assert_non_null(strstr(text, "req_seconds_bucket{method=\"GET\",code=\"200\",le=\"0.1\"} 1\n"
                                 "req_seconds_bucket{method=\"GET\",code=\"200\",le=\"1\"} 2\n"
                                 "req_seconds_bucket{method=\"GET\",code=\"200\",le=\"+Inf\"} 3\n"
                                 "req_seconds_sum{method=\"GET\",code=\"200\"} 5.55\n"));
    assert_non_null(strstr(text, "inflight 1\n"));
    xfree(text);
    /* Past the series limit: NULL, counted as dropped; updates through NULL do nothing. */
    char id[32];
    for (unsigned i = 1; i < LIMIT_METRIC_SERIES; i++) {
        (void)snprintf(id, sizeof(id), "%u", i);
        metric_inc(c, LV("PUT", id));
    }
    struct metric_series *none = metric_series_get(c, LV("POST", "500"));
    assert_null(none);
    metric_series_add(none, 1);
    metric_series_observe(NULL, 1);
    assert_int_equal(metric_get(c, LV("POST", "500"), &v), -ENOENT);
    text = render(r);
    assert_non_null(strstr(text, "metrics_series_dropped_total{metric=\"req_total\"} 1\n"));
    xfree(text);
    metrics_registry_free(r);
}

static void test_render_limit(void **state)
{
    (void)state;
    struct metrics_registry *r = metrics_registry_new();
    struct metric *c = metrics_counter(r, "a_total", "A counter with some help text.", NULL);
    metric_inc(c, NULL);
    struct buf b;
    buf_init(&b, 40);
    assert_int_equal(metrics_render(r, &b), -E2BIG);
    assert_true(b.len <= 40);
    buf_done(&b);
    metrics_registry_free(r);
}

static int my_collector(void *ctx, struct buf *out)
{
    static const char *const ln[] = {"kind", NULL};
    int *calls = ctx;
    (*calls)++;
    if (metrics_write_header(out, "custom_items", "Items.", METRIC_GAUGE) < 0 ||
        metrics_write_sample(out, "custom_items", ln, LV("a\"b"), 42) < 0)
        return -E2BIG;
    return 0;
}

static void test_collector_order(void **state)
{
    (void)state;
    struct metrics_registry *r = metrics_registry_new();
    int calls = 0;
    struct metric *a = metrics_counter(r, "first_total", "First.", NULL);
    metrics_register_collector(r, my_collector, &calls);
    (void)metrics_gauge(r, "last", "Last.", NULL);
    metric_inc(a, NULL);
    static const char want[] = "# HELP first_total First.\n"
                               "# TYPE first_total counter\n"
                               "first_total 1\n"
                               "# HELP custom_items Items.\n"
                               "# TYPE custom_items gauge\n"
                               "custom_items{kind=\"a\\\"b\"} 42\n"
                               "# HELP last Last.\n"
                               "# TYPE last gauge\n" DROPPED_HEADER;
    char *text = render(r);
    assert_string_equal(text, want);
    assert_int_equal(calls, 1);
    xfree(text);
    metrics_registry_free(r);
}

/* Value of the unlabelled sample `name` in text, or -1. */
static double sample_value(const char *text, const char *name)
{
    char pat[128];
    (void)snprintf(pat, sizeof(pat), "\n%s ", name);
    const char *p = strstr(text, pat);
    if (!p)
        return -1;
    return strtod(p + strlen(pat), NULL);
}

static void test_process_collector(void **state)
{
    (void)state;
    struct metrics_registry *r = metrics_registry_new();
    metrics_register_process(r);
    /* Burn a little CPU and hold an extra descriptor so the values are non-trivial. */
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    char *text = render(r);
    assert_non_null(strstr(text, "# TYPE process_cpu_seconds_total counter\n"));
    assert_non_null(strstr(text, "# TYPE process_open_fds gauge\n"));
    assert_true(sample_value(text, "process_resident_memory_bytes") > 1024 * 1024);
    assert_true(sample_value(text, "process_virtual_memory_bytes") >=
                sample_value(text, "process_resident_memory_bytes"));
    assert_true(sample_value(text, "process_open_fds") >= 4); /* stdio + fd */
    assert_true(sample_value(text, "process_max_fds") >= 1);
    assert_true(sample_value(text, "process_cpu_seconds_total") >= 0);
    double start = sample_value(text, "process_start_time_seconds");
    double now = (double)time(NULL);
    assert_true(start > now - 3600 && start <= now + 1);
    xfree(text);
    (void)close(fd);
    metrics_registry_free(r);
}

struct worker {
    struct metric *c, *h;
    const char *label;
};

enum { THREADS = 4, ITER = 50000 };

static void *work(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < ITER; i++) {
        metric_inc(w->c, LV(i % 2 ? "odd" : "even"));
        metric_observe(w->h, NULL, 0.5);
    }
    return NULL;
}

static void *render_loop(void *arg)
{
    struct metrics_registry *r = arg;
    for (int i = 0; i < 50; i++)
        xfree(render(r));
    return NULL;
}

static void test_concurrent_updates(void **state)
{
    (void)state;
    struct metrics_registry *r = metrics_registry_new();
    static const char *const ln[] = {"parity", NULL};
    static const double bounds[] = {1};
    struct worker w = {
        .c = metrics_counter(r, "ops_total", "Ops.", ln),
        .h = metrics_histogram(r, "op_seconds", "Op time.", NULL, bounds, 1),
    };
    pthread_t t[THREADS], rt;
    assert_int_equal(pthread_create(&rt, NULL, render_loop, r), 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, work, &w), 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(pthread_join(rt, NULL), 0);
    double even = 0, odd = 0, n = 0;
    assert_int_equal(metric_get(w.c, LV("even"), &even), 0);
    assert_int_equal(metric_get(w.c, LV("odd"), &odd), 0);
    assert_int_equal(metric_get(w.h, NULL, &n), 0);
    assert_true(even == THREADS * ITER / 2);
    assert_true(odd == THREADS * ITER / 2);
    assert_true(n == THREADS * ITER);
    char *text = render(r);
    assert_non_null(strstr(text, "op_seconds_sum 100000\n"));
    assert_non_null(strstr(text, "op_seconds_bucket{le=\"1\"} 200000\n"));
    xfree(text);
    metrics_registry_free(r);
}

/* The registry a child registers into: a global, so that it stays reachable when the child
 * aborts (memcheck would count a registry only the stack pointed to as lost). */
static struct metrics_registry *child_reg;

/* Runs fn in a child and expects it to abort (a programmer-error ASSERT). */
static void expect_abort(void (*fn)(void))
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            (void)dup2(devnull, 2);
        fn();
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
}

static void reg_duplicate(void)
{
    struct metrics_registry *r = child_reg = metrics_registry_new();
    (void)metrics_counter(r, "dup_total", "", NULL);
    (void)metrics_gauge(r, "dup_total", "", NULL);
}

static void reg_bad_name(void)
{
    (void)metrics_counter((child_reg = metrics_registry_new()), "9bad", "", NULL);
}

static void reg_bad_label(void)
{
    static const char *const ln[] = {"ok", "bad-label", NULL};
    (void)metrics_counter((child_reg = metrics_registry_new()), "fine_total", "", ln);
}

static void reg_reserved_label(void)
{
    static const char *const ln[] = {"__name", NULL};
    (void)metrics_counter((child_reg = metrics_registry_new()), "fine_total", "", ln);
}

static void reg_le_label(void)
{
    static const char *const ln[] = {"le", NULL};
    static const double b[] = {1};
    (void)metrics_histogram((child_reg = metrics_registry_new()), "h", "", ln, b, 1);
}

static void reg_too_many_labels(void)
{
    static const char *const ln[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", NULL};
    (void)metrics_counter((child_reg = metrics_registry_new()), "fine_total", "", ln);
}

static void reg_unsorted_bounds(void)
{
    static const double b[] = {1, 1};
    (void)metrics_histogram((child_reg = metrics_registry_new()), "h", "", NULL, b, 2);
}

static void reg_self_metric_name(void)
{
    (void)metrics_counter((child_reg = metrics_registry_new()), "metrics_series_dropped_total", "",
                          NULL);
}

static void reg_process_twice(void)
{
    struct metrics_registry *r = child_reg = metrics_registry_new();
    metrics_register_process(r);
    (void)metrics_gauge(r, "process_open_fds", "", NULL);
}

static void set_on_counter(void)
{
    metric_set(metrics_counter((child_reg = metrics_registry_new()), "c_total", "", NULL), NULL, 1);
}

static void test_programmer_errors_abort(void **state)
{
    (void)state;
    expect_abort(reg_duplicate);
    expect_abort(reg_bad_name);
    expect_abort(reg_bad_label);
    expect_abort(reg_reserved_label);
    expect_abort(reg_le_label);
    expect_abort(reg_too_many_labels);
    expect_abort(reg_unsorted_bounds);
    expect_abort(reg_self_metric_name);
    expect_abort(reg_process_twice);
    expect_abort(set_on_counter);
}

static void test_valid_names_accepted(void **state)
{
    (void)state;
    struct metrics_registry *r = metrics_registry_new();
    static const char *const ln[] = {"_x", "A9", "le", "d", NULL};
    (void)metrics_counter(r, "ns:sub_system:x_total", "", ln);
    (void)metrics_gauge(r, "_g", "", NULL);
    (void)metrics_gauge(r, ":colon", "", NULL);
    metrics_registry_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exposition_text),
        cmocka_unit_test(test_histogram_unlabelled_and_specials),
        cmocka_unit_test(test_buckets_helpers),
        cmocka_unit_test(test_get_remove),
        cmocka_unit_test(test_series_limit),
        cmocka_unit_test(test_series_handles),
        cmocka_unit_test(test_render_limit),
        cmocka_unit_test(test_collector_order),
        cmocka_unit_test(test_process_collector),
        cmocka_unit_test(test_concurrent_updates),
        cmocka_unit_test(test_programmer_errors_abort),
        cmocka_unit_test(test_valid_names_accepted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
