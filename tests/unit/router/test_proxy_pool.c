/* SPDX-License-Identifier: Apache-2.0 */
/* The proxy's fast path on a real loop: keep-alive requests share one upstream
 * connection, 40 concurrent exchanges are served again from the pool without a single
 * reconnect, the upstream sees Host ip:port, and the cached per-Sandbox target follows
 * the store (not Ready: 503 at once; Ready again: 200). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/xalloc.h"
#include "kube/store.h"
#include "support/http_client.h"
#include "support/router/proxy_env.h"

#define T_IO  (5 * USEC_PER_SEC)
#define NCONC 40

/* ---- The upstream: answers each request with its Host header as the body, holding
 * answers until `barrier` requests are pending. --------------------------------------- */

struct fx {
    struct proxy_env env;
    int barrier, total_pending; /* loop thread */
};

struct pending { /* an upstream connection's requests not answered yet */
    char host[64][64];
    int n;
};

static void up_answer(struct proxy_env_up *u, const char *host)
{
    char text[256];
    int n = snprintf(text, sizeof(text), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(host), host);
    proxy_env_send(u, text, (size_t)n);
}

static void release_all(struct fx *f)
{
    for (int i = 0; i < f->env.nups; i++) {
        struct proxy_env_up *u = f->env.ups[i];
        if (!u)
            continue;
        struct pending *p = u->data;
        for (int k = 0; k < p->n; k++)
            up_answer(u, p->host[k]);
        p->n = 0;
    }
    f->total_pending = 0;
}

static void up_request(struct proxy_env_up *u, const char *head, size_t len)
{
    struct fx *f = u->env->data;
    struct pending *p = u->data;
    const char *h = memmem(head, len, "\r\nHost: ", 8);
    assert_non_null(h);
    h += 8;
    const char *e = memmem(h, len - (size_t)(h - head), "\r\n", 2);
    assert_true(p->n < 64 && e && e - h < 64);
    memcpy(p->host[p->n], h, (size_t)(e - h));
    p->host[p->n++][e - h] = '\0';
    if (++f->total_pending >= f->barrier)
        release_all(f);
}

static void up_drop(struct proxy_env_up *u)
{
    struct fx *f = u->env->data;
    f->total_pending -= ((struct pending *)u->data)->n;
}

/* ---- Fixture -------------------------------------------------------------------------- */

static struct fx *fx_start(int barrier)
{
    struct fx *f = XNEW(struct fx);
    f->barrier = barrier;
    struct proxy_env_opts o = {
        .request = up_request, .drop = up_drop, .up_data = sizeof(struct pending), .data = f};
    proxy_env_start(&f->env, &o);
    return f;
}

static void fx_stop(struct fx *f)
{
    proxy_env_stop(&f->env);
    xfree(f);
}

static void send_get(struct fx *f, struct test_http_conn *c)
{
    char raw[256];
    (void)snprintf(raw, sizeof(raw), "GET /s/ns/box/%u/x HTTP/1.1\r\nHost: h\r\n\r\n",
                   (unsigned)f->env.up_port);
    assert_int_equal(test_http_send_str(c, raw), 0);
}

/* Reads one answer on c: its status, and for 200 the body must be Host ip:port. */
static int read_answer(struct fx *f, struct test_http_conn *c)
{
    struct test_http_resp r;
    char want[64];
    test_http_resp_init(&r);
    assert_int_equal(test_http_read(c, false, T_IO, &r), 0);
    (void)snprintf(want, sizeof(want), "127.0.0.1:%u", (unsigned)f->env.up_port);
    if (r.status == 200)
        assert_string_equal(buf_str(&r.body), want);
    int status = r.status;
    test_http_resp_done(&r);
    return status;
}

/* ---- Tests ----------------------------------------------------------------------------- */

static void test_keepalive_one_upstream(void **state)
{
    (void)state;
    struct fx *f = fx_start(1);
    struct test_http_conn c;
    assert_int_equal(test_http_connect(f->env.port, &c), 0);
    for (int i = 0; i < 20; i++) {
        send_get(f, &c);
        assert_int_equal(read_answer(f, &c), 200);
    }
    assert_int_equal(atomic_load(&f->env.accepts), 1);
    test_http_close(&c);
    fx_stop(f);
}

/* NCONC exchanges are in flight at once (the upstream answers only when all arrived), so
 * NCONC upstream connections are needed; later rounds must find all of them pooled. */
static void test_concurrent_rounds_reuse(void **state)
{
    (void)state;
    struct fx *f = fx_start(NCONC);
    struct test_http_conn *c = xcalloc(NCONC, sizeof(*c));
    for (int i = 0; i < NCONC; i++)
        assert_int_equal(test_http_connect(f->env.port, &c[i]), 0);
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < NCONC; i++)
            send_get(f, &c[i]);
        for (int i = 0; i < NCONC; i++)
            assert_int_equal(read_answer(f, &c[i]), 200);
    }
    assert_int_equal(atomic_load(&f->env.accepts), NCONC);
    for (int i = 0; i < NCONC; i++)
        test_http_close(&c[i]);
    xfree(c);
    fx_stop(f);
}

static void test_target_follows_store(void **state)
{
    (void)state;
    struct fx *f = fx_start(1);
    struct test_http_conn c;
    assert_int_equal(test_http_connect(f->env.port, &c), 0);
    send_get(f, &c);
    assert_int_equal(read_answer(f, &c), 200);
    assert_int_equal(kube_store_put(f->env.store, proxy_env_sandbox(false), NULL), 0);
    send_get(f, &c);
    assert_int_equal(read_answer(f, &c), 503);
    assert_int_equal(kube_store_put(f->env.store, proxy_env_sandbox(true), NULL), 0);
    send_get(f, &c);
    assert_int_equal(read_answer(f, &c), 200);
    assert_int_equal(kube_store_remove(f->env.store, "ns/box", NULL), 0);
    send_get(f, &c);
    assert_int_equal(read_answer(f, &c), 404);
    test_http_close(&c);
    fx_stop(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keepalive_one_upstream),
        cmocka_unit_test(test_concurrent_rounds_reuse),
        cmocka_unit_test(test_target_follows_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
