/* SPDX-License-Identifier: Apache-2.0 */
/* The client against a scripted HTTP/1.1 server on 127.0.0.1: retries, Retry-After,
 * 401 token refresh, request bodies, paging, connection reuse and streams. */
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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>

#include "api/res.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/limits.h"
#include "kube/client.h"
#include "kube/config_int.h"
#include "support/script_srv.h"

#define MAX_REQS 64

struct srv_req {
    char method[16];
    char target[2048];
    char auth[256];
    char ctype[128];
    char body[8192];
};

struct srv;
/* Writes a response for rq on fd. Returns 0 to keep the connection, 1 to close it. */
typedef int srv_handler(struct srv *s, const struct srv_req *rq, int n, int fd);

/* The scripted server (tests/support/script_srv.h) and what it saw, under its lock. */
struct srv {
    struct script_srv *ss;
    struct srv_req reqs[MAX_REQS];
    int nreq;
    srv_handler *handler;
    char tmp[256];
    char token_file[300];
};

static struct srv S;

static void send_all(int fd, const char *p)
{
    script_send(fd, p, strlen(p));
}

/* Records the request and hands it to the test's handler (a script_handler, run
 * without the server's lock: handlers may block). */
static int record(int fd, const struct script_req *q, void *ctx)
{
    struct srv_req rq = {0};
    (void)ctx;
    (void)snprintf(rq.method, sizeof(rq.method), "%s", q->method);
    (void)snprintf(rq.target, sizeof(rq.target), "%s", q->target);
    script_header(q->head, "\r\nAuthorization: ", rq.auth, sizeof(rq.auth));
    script_header(q->head, "\r\nContent-Type: ", rq.ctype, sizeof(rq.ctype));
    (void)snprintf(rq.body, sizeof(rq.body), "%.*s", (int)q->body_len, q->body);
    script_srv_lock(S.ss);
    int idx = S.nreq < MAX_REQS ? S.nreq++ : MAX_REQS - 1;
    S.reqs[idx] = rq;
    srv_handler *h = S.handler;
    script_srv_unlock(S.ss);
    return h(&S, &rq, idx, fd);
}

static void write_file(const char *path, const char *content)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(content, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
    (void)state;
    memset(&S, 0, sizeof(S));
    (void)snprintf(S.tmp, sizeof(S.tmp), "/tmp/as-test-http-XXXXXX");
    assert_non_null(mkdtemp(S.tmp));
    (void)snprintf(S.token_file, sizeof(S.token_file), "%s/token", S.tmp);
    write_file(S.token_file, "old");
    S.ss = script_srv_start(record, NULL, false);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    script_srv_stop(S.ss);
    char cmd[400];
    (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", S.tmp);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static struct kube_client *client_opts(srv_handler *h, struct kube_client_opts *o);

static struct kube_client *client(int max_retries, srv_handler *h)
{
    struct kube_client_opts o = {.max_retries = max_retries, .timeout = 5 * USEC_PER_SEC};
    return client_opts(h, &o);
}

static struct kube_client *client_opts(srv_handler *h, struct kube_client_opts *o)
{
    char user[400];
    (void)snprintf(user, sizeof(user), "{tokenFile: '%s'}", S.token_file);
    write_file(S.token_file, "old");
    struct kube_client *c = script_client(S.ss, S.tmp, "ns", user, o);
    script_srv_lock(S.ss);
    S.nreq = 0;
    S.handler = h;
    script_srv_unlock(S.ss);
    script_srv_reset_accepted(S.ss);
    return c;
}

static int server_requests(void)
{
    script_srv_lock(S.ss);
    int n = S.nreq;
    script_srv_unlock(S.ss);
    return n;
}

static int server_accepted(void)
{
    return script_srv_accepted(S.ss);
}

/* Copies request i into *copy and returns copy. */
static const struct srv_req *server_req(int i, struct srv_req *copy)
{
    script_srv_lock(S.ss);
    *copy = S.reqs[i];
    script_srv_unlock(S.ss);
    return copy;
}

static const char *pod = "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\"}}";

static int h_503_then_ok(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)s;
    (void)rq;
    if (n == 0)
        script_respond(fd, 503, NULL, "{\"kind\":\"Status\",\"reason\":\"ServiceUnavailable\"}");
    else
        script_respond(fd, 200, NULL, pod);
    return 0;
}

static void test_retry_5xx(void **state)
{
    (void)state;
    struct srv_req sr;
    struct kube_client *c = client(-1, h_503_then_ok);
    json_t *o = NULL;
    struct kube_client_stats st;
    assert_int_equal(kube_get(c, &KUBE_RES_PODS, NULL, "p", &o, NULL), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "metadata"), "name")),
                        "p");
    json_decref(o);
    kube_client_stats(c, &st);
    assert_int_equal(st.requests, 2);
    assert_int_equal(st.retries, 1);
    assert_int_equal(server_requests(), 2);
    assert_string_equal(server_req(0, &sr)->target, "/api/v1/namespaces/ns/pods/p");
    assert_string_equal(server_req(0, &sr)->auth, "Bearer old");
    /* the same connection served both */
    assert_int_equal(st.connections, 1);
    kube_client_free(c);
}

static int h_503_then_409(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)s;
    (void)rq;
    if (n == 0)
        script_respond(fd, 503, NULL, "{\"kind\":\"Status\",\"reason\":\"ServiceUnavailable\"}");
    else
        script_respond(fd, 409, NULL,
                       "{\"kind\":\"Status\",\"reason\":\"AlreadyExists\",\"code\":409}");
    return 0;
}

/* A create whose first attempt got a 5xx and whose retry found the name taken: the error
 * says an earlier attempt may have made the object. */
static void test_retry_maybe_done(void **state)
{
    (void)state;
    struct kube_client *c = client(-1, h_503_then_409);
    struct kube_err e;
    json_t *obj = json_loads(pod, 0, NULL);
    assert_int_equal(kube_create(c, &KUBE_RES_PODS, NULL, obj, NULL, &e), -EEXIST);
    assert_true(kube_err_is_already_exists(&e));
    assert_true(e.maybe_done);
    assert_int_equal(server_requests(), 2);
    json_decref(obj);
    kube_client_free(c);
}

/* A create whose name comes from generateName is not sent again after a 5xx: the first
 * may have been carried out (a 504 says "may still be processing"), and a retry would
 * make a second object under another generated name. The error says the outcome is
 * unknown. A create with its own name is retried (test_retry_maybe_done). */
static void test_generated_create_not_retried_after_5xx(void **state)
{
    (void)state;
    /* with no name, and with an empty one (the API server generates then too) */
    for (int empty = 0; empty < 2; empty++) {
        struct kube_client *c = client(-1, h_503_then_ok);
        struct kube_err e;
        json_t *obj = json_pack("{s:s, s:{s:s, s:s}}", "kind", "Pod", "metadata", "generateName",
                                "p-", "namespace", "ns");
        if (empty)
            json_object_set_new(json_object_get(obj, "metadata"), "name", json_string(""));
        assert_true(kube_create(c, &KUBE_RES_PODS, NULL, obj, NULL, &e) < 0);
        assert_int_equal(e.http_status, 503);
        assert_true(kube_err_outcome_unknown(&e));
        assert_int_equal(server_requests(), 1);
        json_decref(obj);
        kube_client_free(c);
    }
}

/* A GET answered (its connection kept), then the first POST: taken (as if carried out)
 * and the connection cut before any answer; a later POST: 409 AlreadyExists. */
static int h_post_taken_then_cut(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)s;
    if (strcmp(rq->method, "GET") == 0) {
        script_respond(fd, 200, NULL, pod);
        return 0;
    }
    if (n == 1)
        return 1; /* closes the connection, no answer */
    script_respond(fd, 409, NULL,
                   "{\"kind\":\"Status\",\"reason\":\"AlreadyExists\",\"code\":409}");
    return 0;
}

static int posts_seen(void)
{
    struct srv_req sr;
    int n = 0;
    for (int i = 0; i < server_requests(); i++)
        n += strcmp(server_req(i, &sr)->method, "POST") == 0;
    return n;
}

/* libcurl sends a request again on its own when a reused connection dies before any
 * answer. For a named create the second copy meets AlreadyExists, which is no name clash
 * when the first copy made the object: the error says the outcome is unknown. A
 * generated create is never sent twice (a second object under another name). */
static void test_resend_on_reused_connection(void **state)
{
    (void)state;
    struct kube_err e;
    struct kube_client *c = client(0, h_post_taken_then_cut);
    json_t *obj = json_loads(pod, 0, NULL);
    assert_int_equal(kube_get(c, &KUBE_RES_PODS, "ns", "p", NULL, NULL), 0);
    assert_int_equal(kube_create(c, &KUBE_RES_PODS, "ns", obj, NULL, &e), -EEXIST);
    assert_int_equal(posts_seen(), 2);
    assert_true(e.maybe_done); /* before: a plain AlreadyExists, as if another made it */
    json_decref(obj);
    kube_client_free(c);

    c = client(0, h_post_taken_then_cut);
    obj = json_pack("{s:s, s:{s:s, s:s}}", "kind", "Pod", "metadata", "generateName", "p-",
                    "namespace", "ns");
    assert_int_equal(kube_get(c, &KUBE_RES_PODS, "ns", "p", NULL, NULL), 0);
    assert_true(kube_create(c, &KUBE_RES_PODS, NULL, obj, NULL, &e) < 0);
    assert_int_equal(posts_seen(), 1); /* before: 2, the second a second object */
    assert_true(kube_err_outcome_unknown(&e));
    assert_non_null(strstr(e.message, "not sent again"));
    json_decref(obj);
    kube_client_free(c);
}

static int h_429_then_ok(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)s;
    (void)rq;
    if (n == 0)
        script_respond(fd, 429, "Retry-After: 1\r\n",
                       "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\",\"code\":429}");
    else
        script_respond(fd, 200, NULL, pod);
    return 0;
}

static void test_retry_after(void **state)
{
    (void)state;
    struct kube_client *c = client(3, h_429_then_ok);
    usec_t start = clock_now();
    assert_int_equal(kube_get(c, &KUBE_RES_PODS, "ns", "p", NULL, NULL), 0);
    assert_true(clock_now() - start >= USEC_PER_SEC);
    assert_int_equal(server_requests(), 2);
    kube_client_free(c);

    /* with retries off the 429 comes back with its Retry-After */
    c = client(0, h_429_then_ok);
    struct kube_err e;
    assert_int_equal(kube_get(c, &KUBE_RES_PODS, "ns", "p", NULL, &e), -EAGAIN);
    assert_true(kube_err_is_too_many_requests(&e));
    assert_int_equal(e.retry_after_s, 1);
    assert_int_equal(server_requests(), 1);
    kube_client_free(c);
}

/* A 503 whose Status asks for retryAfterSeconds far past any honoured wait. */
static int h_503_huge_retry_after(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)s;
    (void)rq;
    if (n == 0)
        script_respond(fd, 503, NULL,
                       "{\"kind\":\"Status\",\"reason\":\"ServiceUnavailable\",\"code\":503,"
                       "\"details\":{\"retryAfterSeconds\":18446744073710}}");
    else
        script_respond(fd, 200, NULL, pod);
    return 0;
}

/* A huge retryAfterSeconds in a Status body is the longest honoured wait (60 s): a
 * request whose deadline is nearer gives up instead of retrying. Before, seconds times
 * 10^6 wrapped to about 0.45 s and the request was sent again at once. */
static void test_retry_after_huge(void **state)
{
    (void)state;
    struct kube_client *c = client(3, h_503_huge_retry_after);
    struct kube_req r;
    struct kube_err e;
    kube_req_init(&r, "GET", &KUBE_RES_PODS);
    r.ns = "ns";
    r.name = "p";
    r.timeout = 3 * USEC_PER_SEC;
    assert_true(kube_request(c, &r, NULL, &e) < 0);
    assert_int_equal(server_requests(), 1);
    kube_client_free(c);
}

/* Every request: 503 with Retry-After 1 s. */
static int h_503(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)s;
    (void)rq;
    (void)n;
    script_respond(fd, 503, "Retry-After: 1\r\n",
                   "{\"kind\":\"Status\",\"reason\":\"ServiceUnavailable\",\"code\":503}");
    return 0;
}

static atomic_int gate_asked;

/* Lets the first write through, then refuses (leadership lost during its back-off). */
static bool gate_first_only(void *ctx, const struct kube_req *r)
{
    (void)ctx;
    (void)r;
    return atomic_fetch_add(&gate_asked, 1) == 0;
}

/* A write gate refuses a write's retry (the first attempt went through): the request
 * ends with -ENOLCK and is not sent again; reads pass. */
static void test_write_gate(void **state)
{
    (void)state;
    struct kube_client *c = client(3, h_503);
    struct kube_write_gate g = {.may = gate_first_only};
    struct kube_err e;
    atomic_store(&gate_asked, 0);
    kube_client_set_write_gate(c, &g);
    json_t *cm = json_pack("{s:s, s:{s:s}}", "kind", "ConfigMap", "metadata", "name", "x");
    assert_int_equal(kube_update(c, &KUBE_RES_CONFIGMAPS, "ns", cm, NULL, &e), -ENOLCK);
    assert_int_equal(server_requests(), 1);
    assert_int_equal(atomic_load(&gate_asked), 2);
    assert_false(e.sent);
    json_decref(cm);
    /* a GET is not gated (it is retried, and the gate is never asked) */
    struct kube_req r;
    kube_req_init(&r, "GET", &KUBE_RES_PODS);
    r.ns = "ns";
    r.name = "p";
    r.timeout = 1500 * USEC_PER_MSEC;
    assert_true(kube_request(c, &r, NULL, &e) < 0);
    assert_int_equal(server_requests(), 3);
    assert_int_equal(atomic_load(&gate_asked), 2);
    kube_client_set_write_gate(c, NULL);
    kube_client_free(c);
}

static int h_401_rotate(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)n;
    if (strcmp(rq->auth, "Bearer new") != 0) {
        write_file(s->token_file, "new"); /* the token rotates; the old one is refused */
        script_respond(fd, 401, NULL, "{\"kind\":\"Status\",\"reason\":\"Unauthorized\"}");
    } else {
        script_respond(fd, 200, NULL, pod);
    }
    return 0;
}

static void test_401_refresh(void **state)
{
    (void)state;
    struct srv_req sr;
    struct kube_client *c = client(0, h_401_rotate);
    assert_int_equal(kube_get(c, &KUBE_RES_PODS, "ns", "p", NULL, NULL), 0);
    assert_int_equal(server_requests(), 2);
    assert_string_equal(server_req(0, &sr)->auth, "Bearer old");
    assert_string_equal(server_req(1, &sr)->auth, "Bearer new");
    kube_client_free(c);
}

/* 401 for the exec plugin's first token ("tok-1"), the pod for any other. */
static int h_401_first_token(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)s;
    (void)n;
    if (strcmp(rq->auth, "Bearer tok-1") == 0)
        script_respond(fd, 401, NULL,
                       "{\"kind\":\"Status\",\"reason\":\"Unauthorized\",\"code\":401}");
    else
        script_respond(fd, 200, NULL, pod);
    return 0;
}

static void *get_pod(void *arg)
{
    struct kube_client *c = arg;
    struct kube_err e;
    return (void *)(intptr_t)kube_get(c, &KUBE_RES_PODS, "ns", "p", NULL, &e);
}

/* Twelve requests at once meet a 401 for one expired exec-plugin token: the plugin runs
 * once more, not once per refused request (each of which threw away the token the one
 * before had just fetched, running the plugin again under the config's lock while every
 * other request waited), and every request succeeds with the new token. */
static void test_401_burst_runs_plugin_once(void **state)
{
    enum { THREADS = 12 };
    char kc[400], text[2048], count[320], plugin[1200];
    const char *data = getenv("AS_TEST_DATA");
    pthread_t th[THREADS];
    (void)state;
    assert_non_null(data);
    (void)snprintf(plugin, sizeof(plugin), "%s/kube/exec-plugin.sh", data);
    (void)snprintf(count, sizeof(count), "%s/exec-count", S.tmp);
    (void)unlink(count);
    assert_int_equal(setenv("AS_EXEC_COUNT", count, 1), 0);
    (void)snprintf(kc, sizeof(kc), "%s/kubeconfig-exec", S.tmp);
    (void)snprintf(text, sizeof(text),
                   "current-context: t\nclusters:\n- name: k\n  cluster: {server: "
                   "'http://127.0.0.1:%d'}\ncontexts:\n- name: t\n  context: {cluster: k, user: "
                   "u, namespace: ns}\nusers:\n- name: u\n  user:\n    exec:\n      apiVersion: "
                   "client.authentication.k8s.io/v1\n      command: '%s'\n      args: [--prefix, "
                   "tok]\n      interactiveMode: Never\n",
                   script_srv_port(S.ss), plugin);
    write_file(kc, text);
    struct kube_config *cfg = NULL;
    struct kube_client *c = NULL;
    struct kube_err e;
    struct kube_client_opts o = {.max_retries = 0, .timeout = 10 * USEC_PER_SEC};
    assert_int_equal(kube_config_load(&(struct kube_config_opts){.kubeconfig = kc}, &cfg, &e), 0);
    assert_int_equal(kube_client_new(cfg, &o, &c), 0);
    script_srv_lock(S.ss);
    S.nreq = 0;
    S.handler = h_401_first_token;
    script_srv_unlock(S.ss);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, get_pod, c), 0);
    for (int i = 0; i < THREADS; i++) {
        void *r;
        assert_int_equal(pthread_join(th[i], &r), 0);
        assert_int_equal((intptr_t)r, 0);
    }
    struct buf runs;
    buf_init(&runs, 1u << 16);
    assert_int_equal(kube__read_file(count, 1u << 16, &runs), 0);
    size_t n = 0;
    for (size_t i = 0; i < runs.len; i++)
        n += runs.data[i] == '\n';
    print_message("exec plugin runs for %d requests refused at once: %zu\n", THREADS, n);
    assert_true(n >= 2);
    assert_true(n <= 3); /* the first token, the renewed one (a third: a request that raced) */
    buf_done(&runs);
    kube_client_free(c);
    (void)unsetenv("AS_EXEC_COUNT");
}

static int h_status(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)s;
    (void)n;
    if (strcmp(rq->method, "POST") == 0)
        script_respond(fd, 409, NULL,
                       "{\"kind\":\"Status\",\"reason\":\"AlreadyExists\",\"message\":\"exists\"}");
    else
        script_respond(fd, 404, NULL,
                       "{\"kind\":\"Status\",\"reason\":\"NotFound\",\"message\":\"nf\"}");
    return 0;
}

static void test_errors_not_retried(void **state)
{
    (void)state;
    struct srv_req sr;
    struct kube_client *c = client(-1, h_status);
    struct kube_err e;
    json_t *o = (json_t *)0x1; /* untouched on failure */
    assert_int_equal(kube_get(c, &KUBE_RES_PODS, "ns", "p", &o, &e), -ENOENT);
    assert_ptr_equal(o, (json_t *)0x1);
    assert_true(kube_err_is_not_found(&e));
    assert_string_equal(e.message, "nf");
    json_t *obj = json_loads(pod, 0, NULL);
    assert_int_equal(kube_create(c, &KUBE_RES_PODS, NULL, obj, NULL, &e), -EEXIST);
    assert_true(kube_err_is_already_exists(&e));
    assert_false(e.maybe_done); /* one attempt: the name was taken before */
    assert_int_equal(server_requests(), 2);
    assert_string_equal(server_req(1, &sr)->target, "/api/v1/namespaces/ns/pods");
    assert_string_equal(server_req(1, &sr)->ctype, "application/json");
    assert_string_equal(server_req(1, &sr)->body, pod);
    json_decref(obj);
    kube_client_free(c);
}

/* Namespace "gone" is being deleted: creates there are refused, updates served. */
static int h_ns_terminating(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)s;
    (void)n;
    if (strcmp(rq->method, "POST") == 0 && strncmp(rq->target, "/api/v1/namespaces/gone/", 24) == 0)
        script_respond(
            fd, 403, NULL,
            "{\"kind\":\"Status\",\"reason\":\"Forbidden\",\"message\":\"unable to create new "
            "content in namespace gone because it is being terminated\",\"details\":{"
            "\"causes\":[{\"reason\":\"NamespaceTerminating\",\"field\":\"metadata.namespace\"}]},"
            "\"code\":403}");
    else
        script_respond(fd, strcmp(rq->method, "POST") == 0 ? 201 : 200, NULL, pod);
    return 0;
}

/* After the server refuses a create because the namespace is terminating, further creates
 * there are answered without it; other namespaces and other verbs still go out. */
static void test_namespace_terminating(void **state)
{
    (void)state;
    struct kube_client *c = client(-1, h_ns_terminating);
    struct kube_err e;
    json_t *obj = json_loads(pod, 0, NULL), *upd = json_loads(pod, 0, NULL);
    char first[sizeof(e.message)] = "";
    assert_false(kube_client_ns_terminating(c, "gone"));
    assert_int_equal(kube_create(c, &KUBE_RES_PODS, "gone", obj, NULL, &e), -ESHUTDOWN);
    assert_true(e.ns_terminating);
    assert_int_equal(e.http_status, 403);
    assert_int_equal(server_requests(), 1);
    assert_true(kube_client_ns_terminating(c, "gone"));
    assert_false(kube_client_ns_terminating(c, "ns"));
    assert_false(kube_client_ns_terminating(c, NULL));
    for (int i = 0; i < 5; i++) {
        assert_int_equal(kube_create(c, &KUBE_RES_PODS, "gone", obj, NULL, &e), -ESHUTDOWN);
        assert_true(e.ns_terminating);
        assert_int_equal(e.http_status, 403);
        assert_true(kube_err_is_forbidden(&e));
        assert_non_null(strstr(e.message, "namespace gone because it is being terminated"));
        assert_non_null(strstr(e.message, "not sent"));
        /* the same text every time: a status quoting it does not change per retry */
        if (i == 0)
            memcpy(first, e.message, sizeof(first));
        assert_string_equal(e.message, first);
        clock_sleep(2 * USEC_PER_MSEC);
    }
    assert_int_equal(server_requests(), 1);
    /* another namespace, an update and a create of a subresource still reach the server */
    assert_int_equal(kube_create(c, &KUBE_RES_PODS, "ns", obj, NULL, &e), 0);
    assert_int_equal(kube_update(c, &KUBE_RES_PODS, "gone", upd, NULL, &e), 0);
    assert_int_equal(server_requests(), 3);
    struct kube_req r;
    kube_req_init(&r, "POST", &KUBE_RES_PODS);
    r.ns = "gone";
    r.name = "p";
    r.subresource = "eviction";
    r.body = obj;
    assert_int_equal(kube_request(c, &r, NULL, &e), -ESHUTDOWN); /* this server refuses it */
    assert_int_equal(server_requests(), 4);
    json_decref(obj);
    json_decref(upd);
    kube_client_free(c);
}

static int h_drop_first(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)s;
    (void)rq;
    if (n == 0)
        return 1; /* close without answering */
    script_respond(fd, 200, NULL, pod);
    return 0;
}

static void test_transport_retry(void **state)
{
    (void)state;
    struct kube_client *c = client(-1, h_drop_first);
    assert_int_equal(kube_get(c, &KUBE_RES_PODS, "ns", "p", NULL, NULL), 0);
    assert_int_equal(server_requests(), 2);
    kube_client_free(c);

    /* a POST may have been applied: a dropped connection is not retried */
    c = client(-1, h_drop_first);
    struct kube_err e;
    json_t *obj = json_loads(pod, 0, NULL);
    int r = kube_create(c, &KUBE_RES_PODS, "ns", obj, NULL, &e);
    assert_true(r < 0);
    assert_int_equal(e.http_status, 0);
    assert_int_equal(server_requests(), 1);
    json_decref(obj);
    kube_client_free(c);
}

static int h_echo_ok(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)s;
    (void)rq;
    (void)n;
    script_respond(fd, 200, NULL, pod);
    return 0;
}

/* A POST without a body sends an empty one: libcurl, left to itself, reads the body from
 * the process's stdin (a CLI user's input sent to the API server). */
static void test_post_without_body_leaves_stdin(void **state)
{
    (void)state;
    struct srv_req sr;
    struct kube_req r;
    int fds[2], saved = dup(0);
    char got[16];
    assert_true(saved >= 0);
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], "0123456789", 10), 10);
    assert_int_equal(close(fds[1]), 0);
    assert_int_equal(dup2(fds[0], 0), 0);
    struct kube_client *c = client(0, h_echo_ok);
    kube_req_init(&r, "POST", NULL);
    r.raw_path = "/api/v1/namespaces/ns/pods/p:8080/proxy/run";
    assert_int_equal(kube_request(c, &r, NULL, NULL), 0);
    ssize_t n = read(0, got, sizeof(got));
    assert_int_equal(dup2(saved, 0), 0);
    assert_int_equal(close(saved), 0);
    assert_int_equal(close(fds[0]), 0);
    assert_int_equal(n, 10); /* before: 0, all of it sent */
    assert_string_equal(server_req(0, &sr)->body, "");
    kube_client_free(c);
}

static void test_connection_reuse_and_bodies(void **state)
{
    (void)state;
    struct srv_req sr;
    struct kube_client *c = client(0, h_echo_ok);
    struct kube_req r;
    kube_req_init(&r, "DELETE", &API_RES_SANDBOXES);
    r.ns = "ns";
    r.name = "s";
    r.propagation_policy = "Foreground";
    r.precondition_uid = "u-1";
    r.precondition_rv = "7";
    r.grace_period_seconds = 0;
    assert_int_equal(kube_request(c, &r, NULL, NULL), 0);
    assert_string_equal(server_req(0, &sr)->method, "DELETE");
    assert_string_equal(server_req(0, &sr)->body,
                        "{\"apiVersion\":\"v1\",\"kind\":\"DeleteOptions\",\"propagationPolicy\":"
                        "\"Foreground\",\"gracePeriodSeconds\":0,\"preconditions\":{\"uid\":"
                        "\"u-1\",\"resourceVersion\":\"7\"}}");

    json_t *obj = json_pack("{s:{s:s}}", "metadata", "name", "s");
    assert_int_equal(kube_apply(c, &API_RES_SANDBOXES, "ns", obj, "ctl", true, NULL, NULL), 0);
    assert_string_equal(server_req(1, &sr)->method, "PATCH");
    assert_string_equal(server_req(1, &sr)->ctype, "application/apply-patch+yaml");
    assert_string_equal(server_req(1, &sr)->target,
                        "/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes/"
                        "s?fieldManager=ctl&force=true");
    assert_non_null(strstr(server_req(1, &sr)->body, "\"apiVersion\":\"agents.x-k8s.io/v1beta1\""));
    assert_non_null(strstr(server_req(1, &sr)->body, "\"kind\":\"Sandbox\""));
    assert_null(json_object_get(obj, "kind")); /* the caller's object is not modified */

    assert_int_equal(kube_update_status(c, &API_RES_SANDBOXES, NULL, obj, NULL, NULL), 0);
    assert_string_equal(server_req(2, &sr)->method, "PUT");
    assert_string_equal(server_req(2, &sr)->target,
                        "/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes/s/status");
    assert_int_equal(
        kube_patch(c, &KUBE_RES_PODS, "ns", "p", KUBE_PATCH_STRATEGIC, obj, NULL, NULL), 0);
    assert_string_equal(server_req(3, &sr)->ctype, "application/strategic-merge-patch+json");
    json_decref(obj);

    struct kube_client_stats st;
    kube_client_stats(c, &st);
    assert_int_equal(st.requests, 4);
    assert_int_equal(st.connections, 1); /* one kept-alive connection for all */
    assert_int_equal(server_accepted(), 1);
    kube_client_free(c);
}

/* kube_delete_obj: the object's namespace, name, UID and (when asked) resourceVersion
 * make the DELETE; an object without them sends nothing. */
static void test_delete_obj(void **state)
{
    (void)state;
    struct srv_req sr;
    struct kube_err e;
    struct kube_client *c = client(0, h_echo_ok);
    json_t *obj = json_pack("{s:{s:s, s:s, s:s, s:s}}", "metadata", "namespace", "ns2", "name", "s",
                            "uid", "u-9", "resourceVersion", "41");
    assert_int_equal(kube_delete_obj(c, &API_RES_SANDBOXES, obj, true, NULL, &e), 0);
    assert_string_equal(server_req(0, &sr)->method, "DELETE");
    assert_string_equal(server_req(0, &sr)->target,
                        "/apis/agents.x-k8s.io/v1beta1/namespaces/ns2/sandboxes/s");
    assert_string_equal(server_req(0, &sr)->body,
                        "{\"apiVersion\":\"v1\",\"kind\":\"DeleteOptions\",\"preconditions\":"
                        "{\"uid\":\"u-9\",\"resourceVersion\":\"41\"}}");
    assert_int_equal(kube_delete_obj(c, &API_RES_SANDBOXES, obj, false, "Orphan", &e), 0);
    assert_string_equal(server_req(1, &sr)->body,
                        "{\"apiVersion\":\"v1\",\"kind\":\"DeleteOptions\",\"propagationPolicy\":"
                        "\"Orphan\",\"preconditions\":{\"uid\":\"u-9\"}}");

    json_object_del(json_object_get(obj, "metadata"), "resourceVersion");
    assert_int_equal(kube_delete_obj(c, &API_RES_SANDBOXES, obj, true, NULL, &e), -EINVAL);
    assert_non_null(strstr(e.message, "resourceVersion"));
    json_object_del(json_object_get(obj, "metadata"), "uid");
    assert_int_equal(kube_delete_obj(c, &API_RES_SANDBOXES, obj, false, NULL, &e), -EINVAL);
    assert_non_null(strstr(e.message, "no uid"));
    assert_int_equal(kube_delete_obj(c, &API_RES_SANDBOXES, obj, false, NULL, NULL), -EINVAL);
    assert_int_equal(server_requests(), 2); /* the refused ones sent nothing */
    json_decref(obj);
    kube_client_free(c);
}

static int h_pages(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)s;
    if (strstr(rq->target, "continue=c1") && n == 1) {
        script_respond(fd, 410, NULL, "{\"kind\":\"Status\",\"reason\":\"Expired\",\"code\":410}");
    } else if (strstr(rq->target, "continue=c1")) {
        script_respond(
            fd, 200, NULL,
            "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
            "\"100\"},\"items\":[{\"metadata\":{\"name\":\"c\"}}]}");
    } else {
        script_respond(
            fd, 200, NULL,
            "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
            "\"100\",\"continue\":\"c1\"},\"items\":[{\"metadata\":{\"name\":\"a\"}},"
            "{\"metadata\":{\"name\":\"b\"}}]}");
    }
    return 0;
}

static void test_list_all(void **state)
{
    (void)state;
    struct srv_req sr;
    struct kube_client *c = client(0, h_pages);
    struct kube_req r;
    kube_req_init(&r, "GET", &KUBE_RES_PODS);
    r.label_selector = "app=x";
    r.resource_version = "0";
    r.limit = 2;
    json_t *l = NULL;
    assert_int_equal(kube_list_all(c, &KUBE_RES_PODS, "ns", &r, &l, NULL), 0);
    /* first page, 410 on its continuation, then the whole list again */
    assert_int_equal(server_requests(), 4);
    assert_string_equal(server_req(0, &sr)->target,
                        "/api/v1/namespaces/ns/pods?labelSelector=app%3Dx&resourceVersion=0"
                        "&limit=2");
    assert_string_equal(server_req(3, &sr)->target,
                        "/api/v1/namespaces/ns/pods?labelSelector=app%3Dx&continue=c1&limit=2");
    json_t *items = json_object_get(l, "items");
    assert_int_equal(json_array_size(items), 3);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(items, 2), "metadata"), "name")),
                        "c");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(l, "metadata"), "resourceVersion")),
        "100");
    assert_string_equal(json_string_value(json_object_get(l, "kind")), "PodList");
    json_decref(l);
    kube_client_free(c);
}

/* Every continuation meets an expired token; a LIST without limit is the whole list. */
static int h_pages_expiring(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)s, (void)n;
    if (strstr(rq->target, "continue="))
        script_respond(fd, 410, NULL, "{\"kind\":\"Status\",\"reason\":\"Expired\",\"code\":410}");
    else if (!strstr(rq->target, "limit="))
        script_respond(
            fd, 200, NULL,
            "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
            "\"200\"},\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":"
            "\"b\"}},{\"metadata\":{\"name\":\"c\"}}]}");
    else
        return h_pages(s, rq, 0, fd);
    return 0;
}

/* A continue token that expires again after the restart: the third try is one LIST
 * without limit (it cannot expire). Before, the second expiry failed the whole list,
 * and an informer whose pages outlast the server's compaction never synced. */
static void test_list_expires_twice(void **state)
{
    (void)state;
    struct srv_req sr;
    struct kube_client *c = client(0, h_pages_expiring);
    struct kube_req r;
    kube_req_init(&r, "GET", &KUBE_RES_PODS);
    r.limit = 2;
    json_t *l = NULL;
    assert_int_equal(kube_list_all(c, &KUBE_RES_PODS, "ns", &r, &l, NULL), 0);
    /* page, expired, page again, expired, then the unpaged list */
    assert_int_equal(server_requests(), 5);
    assert_string_equal(server_req(4, &sr)->target, "/api/v1/namespaces/ns/pods");
    assert_int_equal(json_array_size(json_object_get(l, "items")), 3);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(l, "metadata"), "resourceVersion")),
        "200");
    json_decref(l);
    kube_client_free(c);
}

/* A page of limit=4 is over the client's response limit (its body is padded past it);
 * limit=2 pages are small: the first of them continues to a last page. */
static int h_big_page(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)s, (void)n;
    if (strstr(rq->target, "limit=4")) {
        size_t len = (size_t)LIMIT_KUBE_RESPONSE + 4096;
        char head[256];
        (void)snprintf(head, sizeof(head),
                       "HTTP/1.1 200 X\r\nContent-Type: application/json\r\nContent-Length: "
                       "%zu\r\n\r\n",
                       len);
        send_all(fd, head);
        char pad[65536];
        memset(pad, ' ', sizeof(pad));
        pad[sizeof(pad) - 1] = '\0';
        for (size_t sent = 0; sent < len; sent += sizeof(pad) - 1) {
            ssize_t w = send(fd, pad, sizeof(pad) - 1, MSG_NOSIGNAL);
            if (w <= 0)
                break; /* the client gave up at its limit */
        }
        return 1;
    }
    if (strstr(rq->target, "continue=c1"))
        script_respond(fd, 200, NULL,
                       "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"7\"},"
                       "\"items\":[{\"metadata\":{\"name\":\"c\"}}]}");
    else
        script_respond(fd, 200, NULL,
                       "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"7\",\"continue\":"
                       "\"c1\"},\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{"
                       "\"name\":\"b\"}}]}");
    return 0;
}

/* A page over the response limit is asked again with half the items; the list goes on
 * with the smaller page, and a page still too large at limit=1 fails the list. */
static void test_list_page_too_large_halved(void **state)
{
    (void)state;
    struct srv_req sr;
    struct kube_client *c = client(0, h_big_page);
    struct kube_req r;
    kube_req_init(&r, "GET", &KUBE_RES_PODS);
    r.limit = 4;
    json_t *l = NULL;
    assert_int_equal(kube_list_all(c, &KUBE_RES_PODS, "ns", &r, &l, NULL), 0);
    assert_int_equal(server_requests(), 3);
    assert_string_equal(server_req(0, &sr)->target, "/api/v1/namespaces/ns/pods?limit=4");
    assert_string_equal(server_req(1, &sr)->target, "/api/v1/namespaces/ns/pods?limit=2");
    assert_string_equal(server_req(2, &sr)->target,
                        "/api/v1/namespaces/ns/pods?continue=c1&limit=2");
    assert_int_equal(json_array_size(json_object_get(l, "items")), 3);
    json_decref(l);
    kube_client_free(c);
}

static int h_always_big(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)rq;
    struct srv_req big = {.target = "limit=4"};
    return h_big_page(s, &big, n, fd);
}

static void test_list_page_too_large_at_one(void **state)
{
    (void)state;
    struct kube_client *c = client(0, h_always_big);
    struct kube_req r;
    kube_req_init(&r, "GET", &KUBE_RES_PODS);
    r.limit = 2;
    json_t *l = NULL;
    struct kube_err e;
    assert_int_equal(kube_list_all(c, &KUBE_RES_PODS, "ns", &r, &l, &e), -E2BIG);
    assert_null(l);
    assert_int_equal(server_requests(), 2); /* limit=2, then limit=1 */
    assert_non_null(strstr(e.message, "larger than"));
    kube_client_free(c);
}

static int h_stream(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)s;
    (void)n;
    if (strstr(rq->target, "/secrets")) {
        script_respond(fd, 403, NULL,
                       "{\"kind\":\"Status\",\"reason\":\"Forbidden\",\"message\":\"no\"}");
        return 0;
    }
    if (!strstr(rq->target, "watch=true")) {
        script_respond(fd, 200, NULL, pod);
        return 0;
    }
    send_all(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n");
    if (strstr(rq->target, "configmaps"))
        return 0; /* headers only, then silence */
    send_all(fd, "11\r\n{\"type\":\"ADDED\"}\n\r\n");
    if (strstr(rq->target, "services"))
        send_all(fd, "0\r\n\r\n"); /* a normal end */
    return 0;
}

struct sink {
    struct buf got;
    atomic_bool stop;
    bool stop_on_data;
    int ret;
};

static int on_chunk(void *ctx, const char *data, size_t len)
{
    struct sink *k = ctx;
    assert_int_equal(buf_append(&k->got, data, len), 0);
    if (k->stop_on_data)
        atomic_store(&k->stop, true);
    return k->ret;
}

static int stream(struct kube_client *c, const struct kube_res *res, struct sink *k, usec_t idle,
                  struct kube_err *e)
{
    struct kube_req r;
    kube_req_init(&r, "GET", res);
    r.ns = "ns";
    r.watch = true;
    buf_init(&k->got, 1024);
    atomic_init(&k->stop, false);
    return kube_request_stream(c, &r, on_chunk, k, &k->stop, idle, e);
}

static void test_streams(void **state)
{
    (void)state;
    struct kube_client *c = client(0, h_stream);
    struct kube_err e;
    struct sink k = {.stop_on_data = true};
    assert_int_equal(kube_get(c, &KUBE_RES_PODS, "ns", "p", NULL, NULL), 0);
    /* the stop flag ends a stream that the server keeps open */
    assert_int_equal(stream(c, &KUBE_RES_PODS, &k, 0, &e), -ECANCELED);
    assert_string_equal(buf_str(&k.got), "{\"type\":\"ADDED\"}\n");
    buf_done(&k.got);
    /* the watch did not borrow the pooled connection: a second one was opened */
    assert_int_equal(server_accepted(), 2);
    assert_int_equal(kube_get(c, &KUBE_RES_PODS, "ns", "p", NULL, NULL), 0);
    assert_int_equal(server_accepted(), 2);

    k.ret = -EPIPE; /* the callback's error ends the stream */
    assert_int_equal(stream(c, &KUBE_RES_PODS, &k, 0, &e), -EPIPE);
    buf_done(&k.got);
    k.ret = 0;
    k.stop_on_data = false;
    assert_int_equal(stream(c, &KUBE_RES_SERVICES, &k, 0, &e), 0);
    assert_string_equal(buf_str(&k.got), "{\"type\":\"ADDED\"}\n");
    buf_done(&k.got);
    assert_int_equal(stream(c, &KUBE_RES_SECRETS, &k, 0, &e), -EPERM);
    assert_true(kube_err_is_forbidden(&e));
    assert_string_equal(e.message, "no");
    assert_int_equal(k.got.len, 0);
    buf_done(&k.got);
    usec_t start = clock_now();
    assert_int_equal(stream(c, &KUBE_RES_CONFIGMAPS, &k, USEC_PER_SEC, &e), -ETIMEDOUT);
    assert_true(clock_now() - start >= USEC_PER_SEC);
    buf_done(&k.got);
    kube_client_free(c);
}

/* ---- cancel and fault hook ---------------------------------------------------------- */

static int h_always_503(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)s;
    (void)rq;
    (void)n;
    script_respond(fd, 503, NULL, "{\"kind\":\"Status\",\"reason\":\"ServiceUnavailable\"}");
    return 0;
}

/* Never answers: the request hangs until the client gives up. */
static int h_silent(struct srv *s, const struct srv_req *rq, int n, int fd)
{
    (void)s;
    (void)rq;
    (void)n;
    (void)fd;
    return 0;
}

struct canceller {
    atomic_bool *flag;
    usec_t after;
};

static void *cancel_later(void *arg)
{
    struct canceller *k = arg;
    clock_sleep(k->after);
    atomic_store(k->flag, true);
    return NULL;
}

static int get_cancellable(struct kube_client *c, atomic_bool *flag, struct kube_err *e)
{
    struct kube_req r;
    kube_req_init(&r, "GET", &KUBE_RES_PODS);
    r.ns = "ns";
    r.name = "p";
    r.cancel = flag;
    return kube_request(c, &r, NULL, e);
}

/* A request whose caller stops: set before it starts, no request is sent; set during
 * the retries of a failing server, it ends in the back-off instead of after 8 retries;
 * set while the server is silent, the transfer is cut before its timeout. */
static void test_cancel(void **state)
{
    atomic_bool flag = false;
    struct canceller k = {.flag = &flag, .after = 300 * USEC_PER_MSEC};
    struct kube_client *c = client(-1, h_always_503);
    struct kube_err e;
    pthread_t t;
    (void)state;
    atomic_store(&flag, true);
    assert_int_equal(get_cancellable(c, &flag, &e), -ECANCELED);
    assert_int_equal(server_requests(), 0);
    assert_false(kube_err_outcome_unknown(&e)); /* nothing left */

    atomic_store(&flag, false);
    assert_int_equal(pthread_create(&t, NULL, cancel_later, &k), 0);
    assert_int_equal(get_cancellable(c, &flag, &e), -ECANCELED);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(e.code, -ECANCELED);
    assert_in_range(server_requests(), 1, 5); /* of 9 (8 retries) without the flag */
    kube_client_free(c);

    c = client(0, h_silent); /* the client's timeout is 5 s */
    atomic_store(&flag, false);
    assert_int_equal(pthread_create(&t, NULL, cancel_later, &k), 0);
    assert_int_equal(get_cancellable(c, &flag, &e), -ECANCELED);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(e.http_status, 0);
    assert_true(e.sent);
    assert_true(kube_err_outcome_unknown(&e)); /* it was sent: it may have been done */
    assert_int_equal(server_requests(), 1);
    kube_client_free(c);
}

struct hook_log {
    int faults, observed_501;
};

static long fault_get(void *ctx, const char *method, const struct kube_res *res, const char *sub,
                      const char *url, long status)
{
    struct hook_log *l = ctx;
    (void)sub;
    if (strcmp(method, "GET") != 0 || res != &KUBE_RES_PODS || status != 200 ||
        !strstr(url, "/api/v1/namespaces/ns/pods/p"))
        return 0;
    l->faults++;
    return 501;
}

static void observe_501(void *ctx, const char *method, const struct kube_res *res, const char *sub,
                        long status)
{
    struct hook_log *l = ctx;
    (void)method;
    (void)res;
    (void)sub;
    l->observed_501 += status == 501;
}

/* The fault hook turns a served request's answer into the 5xx it returns: the caller
 * gets that status (501: not retried), with an uncertain outcome; observe sees it too;
 * requests it leaves alone are answered as served. */
static void test_fault_hook(void **state)
{
    struct hook_log l = {0};
    struct kube_client_opts o = {.max_retries = -1,
                                 .timeout = 5 * USEC_PER_SEC,
                                 .fault = fault_get,
                                 .fault_ctx = &l,
                                 .observe = observe_501,
                                 .observe_ctx = &l};
    struct kube_client *c = client_opts(h_echo_ok, &o);
    struct kube_err e;
    json_t *obj = json_loads(pod, 0, NULL);
    (void)state;
    assert_int_equal(kube_get(c, &KUBE_RES_PODS, NULL, "p", NULL, &e), -EIO);
    assert_int_equal(e.http_status, 501);
    assert_true(kube_err_outcome_unknown(&e));
    assert_int_equal(server_requests(), 1);
    assert_int_equal(l.faults, 1);
    assert_int_equal(l.observed_501, 1);
    assert_int_equal(kube_create(c, &KUBE_RES_PODS, NULL, obj, NULL, &e), 0);
    assert_int_equal(server_requests(), 2);
    assert_int_equal(l.faults, 1);
    json_decref(obj);
    kube_client_free(c);
}

/* Before an attempt (status 0) the hook may answer it unsent: PATCHes here. */
static long fault_patch_unsent(void *ctx, const char *method, const struct kube_res *res,
                               const char *sub, const char *url, long status)
{
    struct hook_log *l = ctx;
    (void)res, (void)sub, (void)url;
    if (status != 0 || strcmp(method, "PATCH") != 0)
        return 0;
    l->faults++;
    return 501;
}

/* An attempt the hook answers before sending never reaches the server, and its outcome
 * is unknown to the caller (a server may take a request, answer 5xx and still carry it
 * out); observe sees the answer. */
static void test_fault_hook_unsent(void **state)
{
    struct hook_log l = {0};
    struct kube_client_opts o = {.max_retries = -1,
                                 .timeout = 5 * USEC_PER_SEC,
                                 .fault = fault_patch_unsent,
                                 .fault_ctx = &l,
                                 .observe = observe_501,
                                 .observe_ctx = &l};
    struct kube_client *c = client_opts(h_echo_ok, &o);
    struct kube_err e;
    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "a", "b");
    (void)state;
    assert_int_equal(kube_patch(c, &KUBE_RES_PODS, NULL, "p", KUBE_PATCH_MERGE, patch, NULL, &e),
                     -EIO);
    assert_int_equal(e.http_status, 501);
    assert_true(kube_err_outcome_unknown(&e));
    assert_int_equal(server_requests(), 0);
    assert_int_equal(l.faults, 1);
    assert_int_equal(l.observed_501, 1);
    assert_int_equal(kube_get(c, &KUBE_RES_PODS, NULL, "p", NULL, &e), 0);
    assert_int_equal(server_requests(), 1);
    json_decref(patch);
    kube_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retry_5xx),
        cmocka_unit_test(test_retry_maybe_done),
        cmocka_unit_test(test_generated_create_not_retried_after_5xx),
        cmocka_unit_test(test_resend_on_reused_connection),
        cmocka_unit_test(test_post_without_body_leaves_stdin),
        cmocka_unit_test(test_retry_after),
        cmocka_unit_test(test_retry_after_huge),
        cmocka_unit_test(test_write_gate),
        cmocka_unit_test(test_401_refresh),
        cmocka_unit_test(test_401_burst_runs_plugin_once),
        cmocka_unit_test(test_errors_not_retried),
        cmocka_unit_test(test_namespace_terminating),
        cmocka_unit_test(test_transport_retry),
        cmocka_unit_test(test_connection_reuse_and_bodies),
        cmocka_unit_test(test_delete_obj),
        cmocka_unit_test(test_list_all),
        cmocka_unit_test(test_list_expires_twice),
        cmocka_unit_test(test_list_page_too_large_halved),
        cmocka_unit_test(test_list_page_too_large_at_one),
        cmocka_unit_test(test_streams),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_fault_hook),
        cmocka_unit_test(test_fault_hook_unsent),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
