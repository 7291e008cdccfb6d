/* SPDX-License-Identifier: Apache-2.0 */
/* The process API against a real daemon: run to completion (exit codes, stdin, env, cwd,
 * output caps, timeouts that kill the whole group, errors), NDJSON streaming (100 MB of
 * output, stdin round trip, signals, PTY with resize), listing, kill, 64 concurrent runs,
 * the process cap, and processes killed when the daemon stops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "common/base64.h"
#include "ndjson_client.h"
#include "sandboxd/util.h"
#include "sbd_test.h"

static int setup(void **state)
{
    *state = sbd_fixture_start(NULL, 0);
    return 0;
}

static int teardown(void **state)
{
    sbd_fixture_stop(*state);
    return 0;
}

/* POST /v1/processes/run with json; returns the status and the parsed body in *ret. */
static int run_json(uint16_t port, const char *json, json_t **ret)
{
    struct test_http_resp r;
    int st =
        sbd_do(port, "POST", "/v1/processes/run", "Content-Type: application/json\r\n", json, &r);
    *ret = json_loadb(r.body.data, r.body.len, 0, NULL);
    if (!*ret)
        fail_msg("status %d body %s", st, buf_str(&r.body));
    test_http_resp_done(&r);
    return st;
}

static const char *jstr(const json_t *j, const char *k)
{
    return json_string_value(json_object_get(j, k));
}

static json_int_t jint(const json_t *j, const char *k)
{
    return json_integer_value(json_object_get(j, k));
}

static void test_run_basic(void **state)
{
    struct sbd_fixture *f = *state;
    json_t *j;
    assert_int_equal(run_json(f->port, "{\"command\": [\"echo\", \"hi there\"]}", &j), 200);
    assert_string_equal(jstr(j, "stdout"), "hi there\n");
    assert_string_equal(jstr(j, "stderr"), "");
    assert_int_equal(jint(j, "exit_code"), 0);
    assert_false(json_is_true(json_object_get(j, "timed_out")));
    json_decref(j);
    assert_int_equal(run_json(f->port, "{\"command\": \"echo out; echo err >&2; exit 3\"}", &j),
                     200);
    assert_string_equal(jstr(j, "stdout"), "out\n");
    assert_string_equal(jstr(j, "stderr"), "err\n");
    assert_int_equal(jint(j, "exit_code"), 3);
    json_decref(j);
    /* stdin round trip, env and cwd (inside the root). */
    mkdir(f->root, 0755);
    char p[256];
    snprintf(p, sizeof(p), "%s/sub", f->root);
    mkdir(p, 0755);
    assert_int_equal(run_json(f->port,
                              "{\"command\": \"cat; echo $FOO; pwd\", \"stdin\": \"in\\n\","
                              " \"env\": {\"FOO\": \"bar\"}, \"cwd\": \"sub\"}",
                              &j),
                     200);
    char want[512];
    snprintf(want, sizeof(want), "in\nbar\n%s/sub\n", f->root);
    assert_string_equal(jstr(j, "stdout"), want);
    json_decref(j);
    assert_int_equal(run_json(f->port,
                              "{\"command\": [\"cat\"], \"stdin_b64\": \"AAEC/w==\","
                              " \"encoding\": \"base64\"}",
                              &j),
                     200);
    assert_string_equal(jstr(j, "stdout"), "AAEC/w==");
    json_decref(j);
}

static void test_run_errors(void **state)
{
    struct sbd_fixture *f = *state;
    json_t *j;
    assert_int_equal(run_json(f->port, "{\"command\": [\"/no/such/binary\"]}", &j), 404);
    assert_string_equal(jstr(j, "code"), "NOT_FOUND");
    json_decref(j);
    assert_int_equal(run_json(f->port, "{\"command\": [\"ls\"], \"cwd\": \"../..\"}", &j), 403);
    assert_string_equal(jstr(j, "code"), "PERMISSION_DENIED");
    json_decref(j);
    assert_int_equal(run_json(f->port, "{\"command\": []}", &j), 400);
    assert_string_equal(jstr(j, "code"), "INVALID_ARGUMENT");
    json_decref(j);
    assert_int_equal(run_json(f->port, "{\"cmd\": 1}", &j), 400);
    json_decref(j);
    assert_int_equal(run_json(f->port, "[1]", &j), 400);
    json_decref(j);
    assert_int_equal(run_json(f->port, "{\"command\": [\"true\"], \"timeout_seconds\": -1}", &j),
                     400);
    json_decref(j);
    assert_int_equal(run_json(f->port, "{\"command\": [\"true\"], \"cwd\": \"missing\"}", &j), 404);
    json_decref(j);
}

static void test_output_cap(void **state)
{
    struct sbd_fixture *f = *state;
    json_t *j;
    assert_int_equal(run_json(f->port,
                              "{\"command\": \"head -c 100000 /dev/zero | tr '\\\\0' x\","
                              " \"max_output_bytes\": 1000}",
                              &j),
                     200);
    assert_int_equal(strlen(jstr(j, "stdout")), 1000);
    assert_true(json_is_true(json_object_get(j, "stdout_truncated")));
    assert_false(json_is_true(json_object_get(j, "stderr_truncated")));
    assert_int_equal(jint(j, "exit_code"), 0);
    json_decref(j);
}

static void test_timeout_kills_group(void **state)
{
    struct sbd_fixture *f = *state;
    json_t *j;
    char json[512];
    snprintf(json, sizeof(json),
             "{\"command\": \"sleep 60 & echo $! > %s/bg.pid; sleep 60\","
             " \"timeout_seconds\": 0.3}",
             f->base);
    assert_int_equal(run_json(f->port, json, &j), 200);
    assert_true(json_is_true(json_object_get(j, "timed_out")));
    assert_int_equal(jint(j, "signal"), SIGKILL);
    assert_int_equal(jint(j, "exit_code"), -1);
    json_decref(j);
    char p[256];
    snprintf(p, sizeof(p), "%s/bg.pid", f->base);
    FILE *fp = fopen(p, "r");
    assert_non_null(fp);
    int pid = 0;
    assert_int_equal(fscanf(fp, "%d", &pid), 1);
    fclose(fp);
    /* The background child was in the group: it is gone (or a zombie of init). */
    for (int i = 0; i < 200 && kill(pid, 0) == 0; i++) {
        char st[64], line[256];
        snprintf(st, sizeof(st), "/proc/%d/stat", pid);
        fp = fopen(st, "r");
        if (!fp)
            break;
        char *l = fgets(line, sizeof(line), fp);
        fclose(fp);
        if (l && strstr(line, ") Z "))
            break;
        usleep(10000);
    }
    char st[64];
    snprintf(st, sizeof(st), "/proc/%d/cmdline", pid);
    fp = fopen(st, "r");
    if (fp) {
        char cmd[64] = {0};
        size_t n = fread(cmd, 1, sizeof(cmd) - 1, fp);
        fclose(fp);
        assert_true(n == 0 || strcmp(cmd, "sleep") != 0); /* no live sleep left */
    }
}

static void test_stream_100mb(void **state)
{
    struct sbd_fixture *f = *state;
    struct nd_client n;
    assert_int_equal(nd_start(&n, f->port, "/v1/processes",
                              "{\"command\": \"head -c 100000000 /dev/zero; echo done >&2\"}"),
                     200);
    json_t *j = nd_next(&n, 10000);
    assert_string_equal(jstr(j, "type"), "start");
    assert_true(jint(j, "id") > 0);
    json_decref(j);
    uint64_t out = 0;
    bool saw_err = false, saw_exit = false;
    while ((j = nd_next(&n, 20000))) {
        const char *t = jstr(j, "type");
        if (strcmp(t, "stdout") == 0) {
            size_t l = strlen(jstr(j, "data"));
            const char *d = jstr(j, "data");
            out += l / 4 * 3 - (l && d[l - 1] == '=') - (l > 1 && d[l - 2] == '=');
        } else if (strcmp(t, "stderr") == 0) {
            saw_err = true;
        } else if (strcmp(t, "exit") == 0) {
            saw_exit = true;
            assert_int_equal(jint(j, "exit_code"), 0);
        }
        json_decref(j);
    }
    assert_true(n.ended);
    assert_true(saw_err);
    assert_true(saw_exit);
    assert_int_equal(out, 100000000);
    nd_close(&n);
}

static uint32_t start_id(struct nd_client *n)
{
    json_t *j = nd_next(n, 10000);
    assert_non_null(j);
    assert_string_equal(jstr(j, "type"), "start");
    uint32_t id = (uint32_t)jint(j, "id");
    json_decref(j);
    return id;
}

static int post(uint16_t port, const char *target, const char *body)
{
    struct test_http_resp r;
    int st = sbd_do(port, "POST", target, NULL, body ? body : "", &r);
    test_http_resp_done(&r);
    return st;
}

/* Reads events until exit; returns the exit event and collects stdout (decoded). */
static json_t *collect(struct nd_client *n, struct buf *out)
{
    json_t *j;
    while ((j = nd_next(n, 10000))) {
        if (strcmp(jstr(j, "type"), "exit") == 0)
            return j;
        if (strcmp(jstr(j, "type"), "stdout") == 0)
            (void)base64_decode(jstr(j, "data"), strlen(jstr(j, "data")), out);
        json_decref(j);
    }
    return NULL;
}

static void test_stream_stdin_signal(void **state)
{
    struct sbd_fixture *f = *state;
    struct nd_client n;
    assert_int_equal(nd_start(&n, f->port, "/v1/processes", "{\"command\": [\"cat\"]}"), 200);
    uint32_t id = start_id(&n);
    char path[64];
    snprintf(path, sizeof(path), "/v1/processes/%u/stdin", id);
    assert_int_equal(post(f->port, path, "hello "), 204);
    snprintf(path, sizeof(path), "/v1/processes/%u/stdin?close=true", id);
    assert_int_equal(post(f->port, path, "world"), 204);
    struct buf out;
    buf_init(&out, 1024);
    json_t *e = collect(&n, &out);
    assert_non_null(e);
    assert_string_equal(buf_str(&out), "hello world");
    assert_int_equal(jint(e, "exit_code"), 0);
    json_decref(e);
    buf_done(&out);
    nd_close(&n);
    /* Unknown ids and actions. */
    assert_int_equal(post(f->port, "/v1/processes/99999/stdin", "x"), 404);
    /* A signal reaches the group. */
    assert_int_equal(nd_start(&n, f->port, "/v1/processes", "{\"command\": \"sleep 30\"}"), 200);
    id = start_id(&n);
    snprintf(path, sizeof(path), "/v1/processes/%u/signal", id);
    assert_int_equal(post(f->port, path, "{\"signal\": \"BOGUS\"}"), 400);
    assert_int_equal(post(f->port, path, "{\"signal\": \"SIGTERM\"}"), 204);
    buf_init(&out, 1024);
    e = collect(&n, &out);
    assert_non_null(e);
    assert_int_equal(jint(e, "signal"), SIGTERM);
    json_decref(e);
    buf_done(&out);
    nd_close(&n);
}

/* A PTY whose program does not read: stdin fills its queue (429), and then the end of input
 * (^D, one byte) is refused too, with 429, where it used to answer 204 with nothing sent. */
static void test_pty_stdin_full_queue(void **state)
{
    struct sbd_fixture *f = *state;
    struct nd_client n;
    assert_int_equal(
        nd_start(
            &n, f->port, "/v1/processes",
            "{\"command\": \"stty raw -echo; sleep 30\", \"pty\": {\"cols\": 80, \"rows\": 24}}"),
        200);
    uint32_t id = start_id(&n);
    char path[64];
    size_t chunk = 512u * 1024;
    char *body = xmalloc(chunk + 1);
    memset(body, 'x', chunk);
    body[chunk] = '\0';
    snprintf(path, sizeof(path), "/v1/processes/%u/stdin", id);
    int st = 204, i;
    for (i = 0; i < 64 && st == 204; i++)
        st = post(f->port, path, body);
    assert_int_equal(st, 429);
    assert_true(i > 8); /* about 8 MiB went before the refusal */
    /* fill it to the byte: smaller and smaller bodies until one byte is refused */
    for (size_t len = chunk / 2; len > 0; len /= 2) {
        body[len] = '\0';
        while (post(f->port, path, body) == 204)
            ;
    }
    xfree(body);
    snprintf(path, sizeof(path), "/v1/processes/%u/stdin/close", id);
    assert_int_equal(post(f->port, path, ""), 429);
    snprintf(path, sizeof(path), "/v1/processes/%u/stdin?close=true", id);
    assert_int_equal(post(f->port, path, "y"), 429);
    nd_close(&n); /* the client goes away: the process is killed */
}

static void test_pty_resize(void **state)
{
    struct sbd_fixture *f = *state;
    struct nd_client n;
    assert_int_equal(nd_start(&n, f->port, "/v1/processes",
                              "{\"command\": \"tty; stty size; read x; stty size\","
                              " \"pty\": {\"cols\": 80, \"rows\": 24}}"),
                     200);
    uint32_t id = start_id(&n);
    struct buf out;
    buf_init(&out, 1 << 20);
    json_t *j;
    while (!strstr(buf_str(&out), "24 80") && (j = nd_next(&n, 10000))) {
        if (strcmp(jstr(j, "type"), "stdout") == 0)
            (void)base64_decode(jstr(j, "data"), strlen(jstr(j, "data")), &out);
        json_decref(j);
    }
    assert_non_null(strstr(buf_str(&out), "/dev/pts/"));
    char path[64];
    snprintf(path, sizeof(path), "/v1/processes/%u/resize", id);
    assert_int_equal(post(f->port, path, "{\"cols\": 100, \"rows\": 30}"), 204);
    assert_int_equal(post(f->port, path, "{\"cols\": 0}"), 400);
    snprintf(path, sizeof(path), "/v1/processes/%u/stdin", id);
    assert_int_equal(post(f->port, path, "go\n"), 204);
    json_t *e = collect(&n, &out);
    assert_non_null(e);
    assert_non_null(strstr(buf_str(&out), "30 100"));
    assert_int_equal(jint(e, "exit_code"), 0);
    json_decref(e);
    buf_done(&out);
    nd_close(&n);
    /* Resizing a process without a PTY fails. */
    assert_int_equal(nd_start(&n, f->port, "/v1/processes", "{\"command\": \"sleep 30\"}"), 200);
    id = start_id(&n);
    snprintf(path, sizeof(path), "/v1/processes/%u/resize", id);
    assert_int_equal(post(f->port, path, "{\"cols\": 100, \"rows\": 30}"), 400);
    nd_close(&n); /* the client goes away: the process is killed */
}

/* Processes listed now. */
static size_t procs_listed(uint16_t port)
{
    struct test_http_resp r;
    size_t n;
    assert_int_equal(sbd_do(port, "GET", "/v1/processes", NULL, NULL, &r), 200);
    json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
    n = json_array_size(json_object_get(j, "processes"));
    json_decref(j);
    test_http_resp_done(&r);
    return n;
}

/* A run whose client gives up and closes its connection (a client timeout: the response
 * was not streaming, so only the EOF said so) ends its process, on the REST and the
 * legacy port alike (it ran on until its own timeout, holding a process slot). */
static void test_run_client_gone(void **state)
{
    struct sbd_fixture *f = *state;
    static const char body[] = "{\"command\": \"sleep 30\", \"timeout_seconds\": 600}";
    static const char legacy[] = "{\"command\": \"sleep 30\"}";
    const struct {
        uint16_t port;
        const char *path, *body;
    } rows[] = {{f->port, "/v1/processes/run", body}, {f->legacy_port, "/execute", legacy}};
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        struct test_http_conn c;
        char req[512];
        usec_t until;
        (void)snprintf(req, sizeof(req),
                       "POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                       "Content-Length: %zu\r\n\r\n%s",
                       rows[i].path, strlen(rows[i].body), rows[i].body);
        assert_int_equal(test_http_connect(rows[i].port, &c), 0);
        assert_int_equal(test_http_send_str(&c, req), 0);
        until = clock_now() + 5 * USEC_PER_SEC;
        while (procs_listed(f->port) == 0 && clock_now() < until)
            clock_sleep(20 * USEC_PER_MSEC);
        assert_int_equal(procs_listed(f->port), 1);
        test_http_close(&c);
        until = clock_now() + 5 * USEC_PER_SEC;
        while (procs_listed(f->port) > 0 && clock_now() < until)
            clock_sleep(20 * USEC_PER_MSEC);
        assert_int_equal(procs_listed(f->port), 0);
    }
}

/* Each sandboxd numbers its processes from a random start (at most 2^30, leaving room
 * below INT32_MAX), so a handle kept from another instance (a restart, the Sandbox's
 * next Pod) names none of its processes; within one instance the ids count up. */
static void test_ids_start_at_random(void **state)
{
    (void)state;
    uint32_t first[2];
    for (int i = 0; i < 2; i++) {
        struct sbd_fixture *f = sbd_fixture_start(NULL, 0);
        struct nd_client n;
        uint32_t ids[2];
        for (int k = 0; k < 2; k++) {
            assert_int_equal(nd_start(&n, f->port, "/v1/processes", "{\"command\": [\"true\"]}"),
                             200);
            ids[k] = start_id(&n);
            nd_close(&n);
        }
        assert_true(ids[0] >= 1 && ids[0] <= (1u << 30) + 1);
        assert_int_equal(ids[1], ids[0] + 1);
        first[i] = ids[0];
        sbd_fixture_stop(f);
    }
    assert_int_not_equal(first[0], first[1]); /* equal once in 2^30 runs */
}

static void test_list_and_kill(void **state)
{
    struct sbd_fixture *f = *state;
    struct nd_client n;
    assert_int_equal(nd_start(&n, f->port, "/v1/processes", "{\"command\": [\"sleep\", \"30\"]}"),
                     200);
    uint32_t id = start_id(&n);
    struct test_http_resp r;
    assert_int_equal(sbd_do(f->port, "GET", "/v1/processes", NULL, NULL, &r), 200);
    json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
    json_t *arr = json_object_get(j, "processes");
    assert_int_equal(json_array_size(arr), 1);
    assert_int_equal(jint(json_array_get(arr, 0), "id"), id);
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(json_array_get(arr, 0), "command"), 0)),
        "sleep");
    json_decref(j);
    test_http_resp_done(&r);
    char path[64];
    snprintf(path, sizeof(path), "/v1/processes/%u", id);
    assert_int_equal(sbd_do(f->port, "DELETE", path, NULL, NULL, &r), 204);
    test_http_resp_done(&r);
    struct buf out;
    buf_init(&out, 1024);
    json_t *e = collect(&n, &out);
    assert_non_null(e);
    assert_int_equal(jint(e, "signal"), SIGKILL);
    json_decref(e);
    buf_done(&out);
    nd_close(&n);
    assert_int_equal(sbd_do(f->port, "DELETE", path, NULL, NULL, &r), 404);
    test_http_resp_done(&r);
}

struct conc {
    uint16_t port;
    int i;
    bool ok;
};

static void *conc_run(void *arg)
{
    struct conc *c = arg;
    char json[128], want[32];
    snprintf(json, sizeof(json), "{\"command\": [\"echo\", \"run-%d\"]}", c->i);
    snprintf(want, sizeof(want), "run-%d\n", c->i);
    struct test_http_resp r;
    int st = sbd_do(c->port, "POST", "/v1/processes/run", NULL, json, &r);
    json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
    c->ok = st == 200 && j && strcmp(jstr(j, "stdout"), want) == 0;
    json_decref(j);
    test_http_resp_done(&r);
    return NULL;
}

static void test_concurrent_64(void **state)
{
    struct sbd_fixture *f = *state;
    pthread_t th[64];
    struct conc c[64];
    for (int i = 0; i < 64; i++) {
        c[i] = (struct conc){.port = f->port, .i = i};
        assert_int_equal(pthread_create(&th[i], NULL, conc_run, &c[i]), 0);
    }
    for (int i = 0; i < 64; i++) {
        pthread_join(th[i], NULL);
        assert_true(c[i].ok);
    }
}

/* The pid that a process wrote to path as a line, once it is there (30 s at most). */
static pid_t read_pid_line(const char *path)
{
    for (int i = 0; i < 3000; i++) {
        char line[32] = "";
        FILE *fp = fopen(path, "r");
        if (fp) {
            bool whole = fgets(line, sizeof(line), fp) && strchr(line, '\n');
            fclose(fp);
            long pid = whole ? strtol(line, NULL, 10) : 0;
            if (pid > 0)
                return (pid_t)pid;
        }
        usleep(10000);
    }
    fail_msg("no pid in %s", path);
    return -1;
}

/* Starts a stream of a process that writes its pid to <base>/<name>.pid and then sleeps
 * for ten minutes; returns the pid. */
static pid_t start_sleeper(struct sbd_fixture *f, struct nd_client *n, const char *name)
{
    char json[256], path[160];
    snprintf(path, sizeof(path), "%s/%s.pid", f->base, name);
    snprintf(json, sizeof(json), "{\"command\": \"echo $$ > %s; exec sleep 600\"}", path);
    assert_int_equal(nd_start(n, f->port, "/v1/processes", json), 200);
    (void)start_id(n);
    return read_pid_line(path);
}

static void test_cap_and_shutdown(void **state)
{
    (void)state;
    struct sbd_fixture *f = sbd_fixture_start(NULL, 2);
    struct nd_client a, b;
    pid_t pa = start_sleeper(f, &a, "a"), pb = start_sleeper(f, &b, "b");
    json_t *j;
    assert_int_equal(run_json(f->port, "{\"command\": [\"true\"]}", &j), 429);
    assert_string_equal(jstr(j, "code"), "RESOURCE_EXHAUSTED");
    json_decref(j);
    assert_int_equal(kill(pa, 0), 0);
    assert_int_equal(kill(pb, 0), 0);
    /* Stopping the daemon terminates both streams' processes (SIGTERM): the stop returns
     * once they have exited and been reaped, long before their ten minutes of sleep (a
     * daemon that waited for them would hang here until ctest's timeout). */
    sbd_fixture_stop(f);
    assert_int_equal(kill(pa, 0), -1);
    assert_int_equal(errno, ESRCH);
    assert_int_equal(kill(pb, 0), -1);
    assert_int_equal(errno, ESRCH);
    struct buf out;
    buf_init(&out, 1024);
    json_t *e = collect(&a, &out);
    if (e) {
        assert_int_equal(jint(e, "signal"), SIGTERM);
        json_decref(e);
    }
    buf_done(&out);
    nd_close(&a);
    nd_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_run_basic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_output_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_kills_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_100mb, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_stdin_signal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pty_resize, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pty_stdin_full_queue, setup, teardown),
        cmocka_unit_test(test_ids_start_at_random),
        cmocka_unit_test_setup_teardown(test_list_and_kill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_client_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_64, setup, teardown),
        cmocka_unit_test(test_cap_and_shutdown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
