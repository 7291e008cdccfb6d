/* SPDX-License-Identifier: Apache-2.0 */
/* The client's request multiplexer against the real kube-apiserver: many threads' requests
 * on one client share one HTTP/2 connection per lane (and, without it, open one each); results,
 * errors, bodies and per-request timeouts come back to the right thread; a client is
 * freed cleanly whether it ever ran a request or not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sys/wait.h>

#include "common/limits.h"
#include "common/xalloc.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "kube/res.h"
#include "support/apiserver.h"
#include "support/kube_fixture.h"

#define THREADS 48
#define ROUNDS  8
#define OBJECTS 6

static struct kube_client *admin;
static char ns[64];

static int setup(void **state)
{
    (void)state;
    it_fixture_setup("it-mux", NULL, &admin, ns, sizeof(ns));
    struct kube_err err;
    char name[32], value[32];
    for (int i = 0; i < OBJECTS; i++) {
        snprintf(name, sizeof(name), "cm%d", i);
        snprintf(value, sizeof(value), "value-%d", i);
        json_t *cm = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind",
                               "ConfigMap", "metadata", "name", name, "data", "v", value);
        IT_OK(kube_create(admin, &KUBE_RES_CONFIGMAPS, ns, cm, NULL, &err), &err);
        json_decref(cm);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    it_fixture_teardown(admin, ns, NULL);
    return 0;
}

struct worker {
    struct kube_client *c;
    int id;
    atomic_int *wrong; /* answers that were not this thread's */
    atomic_int *failed;
};

/* Each thread reads the objects in its own order and writes one of its own: every answer
 * must carry what this thread asked for. */
static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct kube_err err;
    char name[32], want[32];
    for (int r = 0; r < ROUNDS; r++) {
        int i = (w->id + r) % OBJECTS;
        snprintf(name, sizeof(name), "cm%d", i);
        snprintf(want, sizeof(want), "value-%d", i);
        json_t *got = NULL;
        if (kube_get(w->c, &KUBE_RES_CONFIGMAPS, ns, name, &got, &err) < 0) {
            atomic_fetch_add(w->failed, 1);
            continue;
        }
        const char *v = kube_obj_path_str(got, "data.v");
        if (!v || strcmp(v, want) != 0 || strcmp(kube_obj_name(got), name) != 0)
            atomic_fetch_add(w->wrong, 1);
        json_decref(got);
    }
    snprintf(name, sizeof(name), "own-%d", w->id);
    json_t *cm = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                           "metadata", "name", name, "data", "id", name),
           *made = NULL;
    if (kube_create(w->c, &KUBE_RES_CONFIGMAPS, ns, cm, &made, &err) < 0)
        atomic_fetch_add(w->failed, 1);
    else if (strcmp(kube_obj_name(made), name) != 0)
        atomic_fetch_add(w->wrong, 1);
    json_decref(cm);
    json_decref(made);
    if (kube_delete(w->c, &KUBE_RES_CONFIGMAPS, ns, name, &err) < 0)
        atomic_fetch_add(w->failed, 1);
    return NULL;
}

/* Runs THREADS workers on a new client with opts; returns its stats. */
static void run_threads(const struct kube_client_opts *opts, struct kube_client_stats *ret)
{
    struct kube_client *c;
    struct kube_err err;
    IT_OK(it_client_new(opts, &c, &err), &err);
    pthread_t th[THREADS];
    struct worker w[THREADS];
    atomic_int wrong = 0, failed = 0;
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){.c = c, .id = i, .wrong = &wrong, .failed = &failed};
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    kube_client_stats(c, ret);
    kube_client_free(c);
    assert_int_equal(atomic_load(&failed), 0);
    assert_int_equal(atomic_load(&wrong), 0);
    assert_int_equal(ret->requests, (unsigned long)THREADS * (ROUNDS + 2));
}

static void test_threads_share_one_connection(void **state)
{
    (void)state;
    struct kube_client_opts o = {.max_retries = -1, .mux_lanes = 1};
    struct kube_client_stats st;
    run_threads(&o, &st);
    print_message("one lane, %d threads, %lu requests: %lu connection(s)\n", THREADS, st.requests,
                  st.connections);
    /* kube-apiserver allows more concurrent streams than THREADS on a connection; a
     * second one may only come from a GOAWAY or reset. */
    assert_in_range(st.connections, 1, 2);
}

/* The default: LIMIT_KUBE_MUX_LANES lanes, requests in turn, a connection each. */
static void test_default_lanes(void **state)
{
    (void)state;
    struct kube_client_stats st;
    run_threads(NULL, &st);
    print_message("default lanes, %d threads: %lu connection(s)\n", THREADS, st.connections);
    assert_in_range(st.connections, LIMIT_KUBE_MUX_LANES, LIMIT_KUBE_MUX_LANES + 1);
}

static void test_without_mux_each_request_connects(void **state)
{
    (void)state;
    struct kube_client_opts o = {.max_retries = -1, .no_mux = true};
    struct kube_client_stats st;
    run_threads(&o, &st);
    print_message("without the multiplexer, %d threads: %lu connections\n", THREADS,
                  st.connections);
    assert_true(st.connections > 2);
}

/* Errors come back through the multiplexer as they do without it. */
static void test_errors_and_bodies(void **state)
{
    (void)state;
    struct kube_err err;
    json_t *got = NULL;
    assert_int_equal(kube_get(admin, &KUBE_RES_CONFIGMAPS, ns, "missing", &got, &err), -ENOENT);
    assert_int_equal(err.http_status, 404);
    assert_null(got);
    json_t *cm = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                           "metadata", "name", "cm0");
    assert_int_equal(kube_create(admin, &KUBE_RES_CONFIGMAPS, ns, cm, NULL, &err), -EEXIST);
    assert_int_equal(err.http_status, 409);
    json_decref(cm);
    /* A large body: a list of every object, several times over (the response is read by
     * the lane's driver into the caller's buffer). */
    IT_OK(kube_list_all(admin, &KUBE_RES_CONFIGMAPS, ns, NULL, &got, &err), &err);
    assert_true(json_array_size(json_object_get(got, "items")) >= OBJECTS);
    json_decref(got);
}

/* A request whose own deadline passes fails with -ETIMEDOUT and does not hold up the
 * other streams of its connection. On one lane (one HTTP/2 connection): GETs are answered
 * while a watch is held open on it (one that ends only when cancelled), and a second watch
 * cut by its per-request timeout ends alone: the held watch is still open after it, and
 * the connection still answers. */
struct slow {
    struct kube_client *c;
    long server_timeout; /* s: the server ends the watch (a result of 0) */
    usec_t timeout;
    atomic_bool *cancel;
    atomic_bool done;
    int r;
};

static void *slow_main(void *arg)
{
    struct slow *s = arg;
    struct kube_req req;
    struct kube_err err;
    kube_req_init(&req, "GET", &KUBE_RES_CONFIGMAPS);
    req.ns = ns;
    req.watch = true;
    req.timeout_seconds = s->server_timeout;
    req.timeout = s->timeout;
    req.no_retry = true;
    req.cancel = s->cancel;
    s->r = kube_request(s->c, &req, NULL, &err);
    atomic_store(&s->done, true);
    return NULL;
}

struct sent {
    struct kube_client *c;
    unsigned long n;
};

/* The client counted n requests (it counts one as it hands it to the transport). */
static bool requests_sent(void *ctx)
{
    struct sent *s = ctx;
    struct kube_client_stats st;
    kube_client_stats(s->c, &st);
    return st.requests >= s->n;
}

static void start_watch(struct kube_client *c, struct slow *s, pthread_t *th)
{
    struct kube_client_stats st;
    kube_client_stats(c, &st);
    struct sent want = {c, st.requests + 1};
    assert_int_equal(pthread_create(th, NULL, slow_main, s), 0);
    assert_int_equal(it_wait(requests_sent, &want, 60 * USEC_PER_SEC), 0);
}

/* The string at dotted in obj, failing the test when there is none. */
static const char *str_at(const json_t *obj, const char *dotted)
{
    const char *v = kube_obj_path_str(obj, dotted);
    assert_non_null(v);
    return v;
}

static void get_cm1(struct kube_client *c)
{
    struct kube_err err;
    json_t *got = NULL;
    IT_OK(kube_get(c, &KUBE_RES_CONFIGMAPS, ns, "cm1", &got, &err), &err);
    assert_string_equal(str_at(got, "data.v"), "value-1");
    json_decref(got);
}

static void test_timeout_does_not_block_others(void **state)
{
    (void)state;
    struct kube_client_opts o = {.max_retries = -1, .mux_lanes = 1};
    struct kube_client *c;
    struct kube_client_stats st;
    struct kube_err err;
    atomic_bool stop = false;
    pthread_t held_th, cut_th;
    IT_OK(it_client_new(&o, &c, &err), &err);
    get_cm1(c); /* the lane's connection */
    /* held: ends only when cancelled (its own timeout, 10 minutes, is never reached) */
    struct slow held = {
        .c = c, .server_timeout = 1200, .timeout = 600 * USEC_PER_SEC, .cancel = &stop};
    /* cut: its 1.5 s timeout ends it; were it not applied, the server would at 60 s */
    struct slow cut = {.c = c, .server_timeout = 60, .timeout = 1500 * USEC_PER_MSEC};
    start_watch(c, &held, &held_th);
    start_watch(c, &cut, &cut_th);
    for (int i = 0; i < 20; i++)
        get_cm1(c);
    /* The GETs were answered beside the held watch, not after it. */
    assert_false(atomic_load(&held.done));
    pthread_join(cut_th, NULL);
    assert_int_equal(cut.r, -ETIMEDOUT);
    /* The timeout ended its own stream only: the held watch is still open and the
     * connection still answers. */
    assert_false(atomic_load(&held.done));
    for (int i = 0; i < 5; i++)
        get_cm1(c);
    assert_false(atomic_load(&held.done));
    atomic_store(&stop, true);
    pthread_join(held_th, NULL);
    assert_int_equal(held.r, -ECANCELED);
    kube_client_stats(c, &st);
    print_message("one lane, 2 watches and 26 GETs: %lu connection(s)\n", st.connections);
    /* kube-apiserver allows many streams on a connection; a second one may only come
     * from a GOAWAY or reset. */
    assert_in_range(st.connections, 1, 2);
    kube_client_free(c);
}

/* A client that never made a request has no connection to close; one that did is freed
 * right after (ASan and TSan runs check both for leaks and races). */
static void test_free_idle_and_used(void **state)
{
    (void)state;
    struct kube_client *c;
    struct kube_err err;
    IT_OK(it_client_new(NULL, &c, &err), &err);
    kube_client_free(c);
    IT_OK(it_client_new(NULL, &c, &err), &err);
    IT_OK(kube_get(c, &KUBE_RES_CONFIGMAPS, ns, "cm2", NULL, &err), &err);
    kube_client_free(c);
}

/* A child forked after the client made requests (the CLI's shell session does) runs its
 * requests on its own connection; the parent's shared connection still works after. */
static void test_fork_child(void **state)
{
    (void)state;
    struct kube_client *c;
    struct kube_err err;
    IT_OK(it_client_new(NULL, &c, &err), &err);
    IT_OK(kube_get(c, &KUBE_RES_CONFIGMAPS, ns, "cm1", NULL, &err), &err);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        json_t *got = NULL;
        int r = kube_get(c, &KUBE_RES_CONFIGMAPS, ns, "cm2", &got, &err);
        const char *v = r == 0 ? kube_obj_path_str(got, "data.v") : NULL;
        _exit(v && strcmp(v, "value-2") == 0 ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    for (int i = 0; i < 5; i++)
        IT_OK(kube_get(c, &KUBE_RES_CONFIGMAPS, ns, "cm1", NULL, &err), &err);
    kube_client_free(c);
}

/* One request at a time on both transports (the multiplexer's lanes, and without it
 * the pooled handles): every GET answers the object asked for, every PATCH answers the
 * object it made (a new resourceVersion each time), the last write is what is stored,
 * and the connections are reused rather than one opened per request. (The latency of
 * such requests is a benchmark's figure, not this test's.) */
static void sequential(bool no_mux)
{
    struct kube_client_opts o = {.max_retries = -1, .no_mux = no_mux};
    struct kube_client *c;
    struct kube_client_stats st;
    struct kube_err err;
    char prev_rv[64] = "";
    IT_OK(it_client_new(&o, &c, &err), &err);
    for (int i = 0; i < 100; i++)
        get_cm1(c);
    for (int i = 0; i < 100; i++) {
        char n[16];
        json_t *made = NULL;
        snprintf(n, sizeof(n), "%d", i);
        json_t *p = json_pack("{s:{s:s}}", "data", "n", n);
        IT_OK(kube_patch(c, &KUBE_RES_CONFIGMAPS, ns, "cm3", KUBE_PATCH_MERGE, p, &made, &err),
              &err);
        json_decref(p);
        assert_string_equal(str_at(made, "metadata.name"), "cm3");
        assert_string_equal(str_at(made, "data.n"), n);
        assert_string_equal(str_at(made, "data.v"), "value-3"); /* a merge */
        const char *rv = kube_obj_resource_version(made);
        assert_non_null(rv);
        assert_string_not_equal(rv, prev_rv);
        snprintf(prev_rv, sizeof(prev_rv), "%s", rv);
        json_decref(made);
    }
    json_t *got = NULL;
    IT_OK(kube_get(c, &KUBE_RES_CONFIGMAPS, ns, "cm3", &got, &err), &err);
    assert_string_equal(str_at(got, "data.n"), "99");
    assert_non_null(kube_obj_resource_version(got));
    assert_string_equal(kube_obj_resource_version(got), prev_rv);
    json_decref(got);
    kube_client_stats(c, &st);
    print_message("one at a time, %s: %lu requests, %lu connection(s)\n",
                  no_mux ? "without the multiplexer" : "default lanes", st.requests,
                  st.connections);
    assert_int_equal(st.requests, 201);
    /* A connection per lane (a GOAWAY may add one), or without the multiplexer the
     * pooled handles' kept-alive connection(s): never one per request. */
    if (no_mux)
        assert_in_range(st.connections, 1, 2);
    else
        assert_in_range(st.connections, LIMIT_KUBE_MUX_LANES, LIMIT_KUBE_MUX_LANES + 1);
    kube_client_free(c);
}

static void test_sequential_requests(void **state)
{
    (void)state;
    sequential(false);
    sequential(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_share_one_connection),
        cmocka_unit_test(test_default_lanes),
        cmocka_unit_test(test_without_mux_each_request_connects),
        cmocka_unit_test(test_errors_and_bodies),
        cmocka_unit_test(test_timeout_does_not_block_others),
        cmocka_unit_test(test_free_idle_and_used),
        cmocka_unit_test(test_fork_child),
        cmocka_unit_test(test_sequential_requests),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
