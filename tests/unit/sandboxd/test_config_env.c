/* SPDX-License-Identifier: Apache-2.0 */
/* Late-bound configuration in sandboxd: the in-memory set (names, values, limits), the
 * config-token check of PUT/GET /v1/config/env, and delivery into processes started
 * afterwards (run, legacy /execute), never into /v1/metadata. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>

#include "sandboxd/config_env.h"
#include "sandboxd/util.h"
#include "sbd_test.h"

#define CFG_TOKEN "cfg-token-0123456789"
#define API_TOKEN "api-token-abcdef"
#define AUTH_API  "Authorization: Bearer " API_TOKEN "\r\n"
#define AUTH_CFG  "Authorization: Bearer " CFG_TOKEN "\r\n"
#define JSON_HDR  "Content-Type: application/json\r\n"

/* ---- the token comparison ---------------------------------------------------------- */

static void test_secure_eq(void **state)
{
    (void)state;
    static const struct {
        const char *guess, *secret;
        bool eq;
    } cases[] = {
        {"s3cret", "s3cret", true},  {"", "", true},
        {"s3cre", "s3cret", false},  {"s3crett", "s3cret", false},
        {"s3creT", "s3cret", false}, {"", "s3cret", false},
        {"s3cret", "", false},       {"s3cret\0", "s3cret", false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct str g = str_make(cases[i].guess, strlen(cases[i].guess) + (i == 7));
        assert_int_equal(sbd_secure_eq(g, str_c(cases[i].secret)), cases[i].eq);
    }
}

/* ---- the set ------------------------------------------------------------------------ */

static void test_names(void **state)
{
    (void)state;
    assert_true(sbd_config_env_name_ok("A", 1));
    assert_true(sbd_config_env_name_ok("_x9", 3));
    assert_false(sbd_config_env_name_ok("", 0));
    assert_false(sbd_config_env_name_ok("9A", 2));
    assert_false(sbd_config_env_name_ok("A=B", 3));
    assert_false(sbd_config_env_name_ok("A-B", 3));
    assert_false(sbd_config_env_name_ok("A B", 3));
}

static void test_set_and_replace(void **state)
{
    struct sbd_config_env *ce = sbd_config_env_new("t");
    const char *msg = NULL;
    (void)state;
    assert_int_equal(sbd_config_env_count(ce), 0);
    assert_null(sbd_config_env_vector(ce)[0]);
    assert_int_equal(
        sbd_config_env_set_json(ce, STR_LIT("{\"env\":{\"A\":\"1\",\"B\":\"x=y\"}}"), &msg), 0);
    assert_int_equal(sbd_config_env_count(ce), 2);
    assert_string_equal(sbd_config_env_vector(ce)[0], "A=1");
    assert_string_equal(sbd_config_env_vector(ce)[1], "B=x=y");
    /* A delivery replaces the whole set. */
    assert_int_equal(sbd_config_env_set_json(ce, STR_LIT("{\"env\":{\"C\":\"\"}}"), &msg), 0);
    assert_int_equal(sbd_config_env_count(ce), 1);
    assert_string_equal(sbd_config_env_vector(ce)[0], "C=");
    assert_null(sbd_config_env_vector(ce)[1]);
    sbd_config_env_free(ce);
}

static void test_set_rejects(void **state)
{
    static const char *const bad[] = {
        "",
        "[]",
        "{\"env\":[]}",
        "{\"env\":{\"A\":1}}",
        "{\"env\":{\"1A\":\"v\"}}",
        "{\"env\":{\"A=B\":\"v\"}}",
        "{\"env\":{\"A\":\"a\\u0000b\"}}",
        "{\"env\":{\"A\":\"1\",\"A\":\"2\"}}",
        "{\"env\":{\"A\":\"1\"}",
    };
    struct sbd_config_env *ce = sbd_config_env_new("t");
    const char *msg;
    (void)state;
    assert_int_equal(sbd_config_env_set_json(ce, STR_LIT("{\"env\":{\"KEEP\":\"1\"}}"), &msg), 0);
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        msg = NULL;
        assert_int_equal(sbd_config_env_set_json(ce, str_c(bad[i]), &msg), -EINVAL);
        assert_non_null(msg);
        /* A rejected delivery leaves the previous set alone. */
        assert_int_equal(sbd_config_env_count(ce), 1);
        assert_string_equal(sbd_config_env_vector(ce)[0], "KEEP=1");
    }
    sbd_config_env_free(ce);
}

static void test_set_limits(void **state)
{
    struct sbd_config_env *ce = sbd_config_env_new("t");
    struct buf b;
    const char *msg;
    (void)state;
    buf_init(&b, 64u * 1024 * 1024);
    buf_puts(&b, "{\"env\":{");
    for (unsigned i = 0; i <= LIMIT_SBD_CONFIG_ENV_VARS; i++)
        buf_printf(&b, "%s\"V%u\":\"x\"", i ? "," : "", i);
    buf_puts(&b, "}}");
    assert_int_equal(sbd_config_env_set_json(ce, str_make(b.data, b.len), &msg), -E2BIG);
    buf_reset(&b);
    buf_puts(&b, "{\"env\":{\"BIG\":\"");
    for (unsigned i = 0; i < LIMIT_SBD_CONFIG_ENV_BYTES; i++)
        buf_putc(&b, 'x');
    buf_puts(&b, "\"}}");
    assert_int_equal(sbd_config_env_set_json(ce, str_make(b.data, b.len), &msg), -E2BIG);
    assert_int_equal(sbd_config_env_count(ce), 0);
    buf_done(&b);
    sbd_config_env_free(ce);
}

static void test_authorized(void **state)
{
    struct sbd_config_env *ce = sbd_config_env_new("secret"), *off = sbd_config_env_new("");
    (void)state;
    assert_true(sbd_config_env_enabled(ce));
    assert_false(sbd_config_env_enabled(off));
    assert_true(sbd_config_env_authorized(ce, STR_LIT("Bearer secret")));
    assert_true(sbd_config_env_authorized(ce, STR_LIT("bearer secret ")));
    assert_false(sbd_config_env_authorized(ce, STR_LIT("Bearer secreT")));
    assert_false(sbd_config_env_authorized(ce, STR_LIT("Bearer ")));
    assert_false(sbd_config_env_authorized(ce, STR_LIT("secret")));
    assert_false(sbd_config_env_authorized(ce, STR_NULL));
    assert_false(sbd_config_env_authorized(off, STR_LIT("Bearer ")));
    sbd_config_env_free(ce);
    sbd_config_env_free(off);
}

/* ---- the daemon --------------------------------------------------------------------- */

struct daemon {
    char base[64], root[96];
    struct sbd_thread *t;
    uint16_t port, legacy_port;
};

static struct daemon *daemon_start(const char *config_token)
{
    struct daemon *d = XNEW(struct daemon);
    struct sbd_config c;
    (void)snprintf(d->base, sizeof(d->base), "/tmp/sbd-cfgenv-XXXXXX");
    if (!mkdtemp(d->base))
        abort();
    (void)snprintf(d->root, sizeof(d->root), "%s/root", d->base);
    sbd_config_defaults(&c);
    c.host = "127.0.0.1";
    c.port = 0;
    c.legacy_port = 0;
    c.grpc_port = 0;
    c.root = d->root;
    c.token = API_TOKEN;
    c.config_token = config_token;
    c.metadata_prefix = "LB_";
    if (sbd_thread_start(&c, &d->t) < 0)
        abort();
    d->port = sbd_thread_port(d->t);
    d->legacy_port = sbd_thread_legacy_port(d->t);
    return d;
}

static void daemon_stop(struct daemon *d)
{
    char cmd[128];
    sbd_thread_stop(d->t);
    (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->base);
    if (system(cmd) != 0)
        abort();
    xfree(d);
}

static int setup(void **state)
{
    *state = daemon_start(CFG_TOKEN);
    return 0;
}

static int teardown(void **state)
{
    daemon_stop(*state);
    return 0;
}

/* One request; returns the status and the body (new, xfree) in *ret_body. */
static int call(uint16_t port, const char *method, const char *path, const char *hdrs,
                const char *body, char **ret_body)
{
    struct test_http_resp r;
    int st = sbd_do(port, method, path, hdrs, body, &r);
    if (ret_body)
        *ret_body = xstrdup(buf_str(&r.body));
    test_http_resp_done(&r);
    return st;
}

static char *run_stdout(uint16_t port, const char *json)
{
    char *body, *out;
    json_t *j;
    assert_int_equal(call(port, "POST", "/v1/processes/run", AUTH_API JSON_HDR, json, &body), 200);
    j = json_loads(body, 0, NULL);
    assert_non_null(j);
    out = xstrdup(json_string_value(json_object_get(j, "stdout")));
    json_decref(j);
    xfree(body);
    return out;
}

static void test_put_requires_config_token(void **state)
{
    struct daemon *d = *state;
    const char *body = "{\"env\":{\"LB_SECRET\":\"s3cr3t\"}}";
    char *out;
    assert_int_equal(call(d->port, "PUT", "/v1/config/env", JSON_HDR, body, NULL), 401);
    /* The API token is not the config token. */
    assert_int_equal(call(d->port, "PUT", "/v1/config/env", AUTH_API JSON_HDR, body, NULL), 401);
    assert_int_equal(call(d->port, "GET", "/v1/config/env", AUTH_API, NULL, NULL), 401);
    out = run_stdout(d->port, "{\"command\":[\"sh\",\"-c\",\"echo \\\"[$LB_SECRET]\\\"\"]}");
    assert_string_equal(out, "[]\n");
    xfree(out);
}

/* A request's head whose body never comes: the status it is answered with within 2 s,
 * or -1 when nothing comes (the body was being waited for). */
static int answered_at_head(uint16_t port, const char *method, const char *path, const char *hdrs)
{
    struct test_http_conn c;
    struct test_http_resp r;
    char head[512];
    int st = -1;
    (void)snprintf(head, sizeof(head),
                   "%s %s HTTP/1.1\r\nHost: t\r\n%sContent-Length: 9000000\r\n\r\n", method, path,
                   hdrs);
    assert_int_equal(test_http_connect(port, &c), 0);
    assert_int_equal(test_http_send_str(&c, head), 0);
    test_http_resp_init(&r);
    if (test_http_read(&c, false, 2 * USEC_PER_SEC, &r) == 0)
        st = r.status;
    test_http_resp_done(&r);
    test_http_close(&c);
    return st;
}

/* The routes anyone may call (the probes; the config token's, which check their own
 * token) do not buffer a body for a caller without a credential: the request is answered
 * at its head (each stalled body used to hold up to --max-body of memory, for as long as
 * a byte came every body timeout). */
static void test_public_routes_take_no_body(void **state)
{
    struct daemon *d = *state;
    assert_int_equal(answered_at_head(d->port, "GET", "/v1/health", ""), 200);
    assert_int_equal(answered_at_head(d->port, "GET", "/v1/activity", ""), 200);
    assert_int_equal(answered_at_head(d->port, "PUT", "/v1/config/env", JSON_HDR), 401);
    assert_int_equal(answered_at_head(d->port, "PUT", "/v1/config/env", AUTH_API JSON_HDR), 401);
    assert_int_equal(answered_at_head(d->legacy_port, "GET", "/", ""), 200);
    /* with the config token the body is read (and so waited for) */
    assert_int_equal(answered_at_head(d->port, "PUT", "/v1/config/env",
                                      "Authorization: Bearer " CFG_TOKEN "\r\n" JSON_HDR),
                     -1);
}

static void test_put_then_run(void **state)
{
    struct daemon *d = *state;
    char *body, *out;
    assert_int_equal(call(d->port, "PUT", "/v1/config/env", AUTH_CFG JSON_HDR,
                          "{\"env\":{\"LB_SECRET\":\"s3cr3t\",\"LB_PLAIN\":\"v1\"}}", &body),
                     200);
    /* The answer names the variables, never their values. */
    assert_non_null(strstr(body, "LB_SECRET"));
    assert_null(strstr(body, "s3cr3t"));
    xfree(body);
    out = run_stdout(d->port, "{\"command\":[\"sh\",\"-c\",\"echo $LB_SECRET $LB_PLAIN\"]}");
    assert_string_equal(out, "s3cr3t v1\n");
    xfree(out);
    /* A request's own env wins over the late-bound one. */
    out = run_stdout(d->port, "{\"command\":[\"sh\",\"-c\",\"echo $LB_PLAIN\"],"
                              "\"env\":{\"LB_PLAIN\":\"mine\"}}");
    assert_string_equal(out, "mine\n");
    xfree(out);
    assert_int_equal(call(d->port, "GET", "/v1/config/env", AUTH_CFG, NULL, &body), 200);
    assert_non_null(strstr(body, "\"count\":2"));
    assert_null(strstr(body, "s3cr3t"));
    xfree(body);
    /* Never in the metadata, even under the metadata prefix. */
    assert_int_equal(call(d->port, "GET", "/v1/metadata", AUTH_API, NULL, &body), 200);
    assert_null(strstr(body, "s3cr3t"));
    assert_null(strstr(body, "LB_PLAIN"));
    xfree(body);
}

static void test_replace_drops_old(void **state)
{
    struct daemon *d = *state;
    char *out;
    assert_int_equal(call(d->port, "PUT", "/v1/config/env", AUTH_CFG JSON_HDR,
                          "{\"env\":{\"LB_A\":\"first\"}}", NULL),
                     200);
    assert_int_equal(call(d->port, "PUT", "/v1/config/env", AUTH_CFG JSON_HDR,
                          "{\"env\":{\"LB_B\":\"second\"}}", NULL),
                     200);
    out = run_stdout(d->port, "{\"command\":[\"sh\",\"-c\",\"echo \\\"[$LB_A][$LB_B]\\\"\"]}");
    assert_string_equal(out, "[][second]\n");
    xfree(out);
    /* A bad delivery is refused and keeps the current set. */
    assert_int_equal(call(d->port, "PUT", "/v1/config/env", AUTH_CFG JSON_HDR,
                          "{\"env\":{\"bad-name\":\"x\"}}", NULL),
                     400);
    out = run_stdout(d->port, "{\"command\":[\"sh\",\"-c\",\"echo $LB_B\"]}");
    assert_string_equal(out, "second\n");
    xfree(out);
}

static void test_legacy_execute_sees_env(void **state)
{
    struct daemon *d = *state;
    char *body;
    assert_int_equal(call(d->port, "PUT", "/v1/config/env", AUTH_CFG JSON_HDR,
                          "{\"env\":{\"LB_LEGACY\":\"legacy-value\"}}", NULL),
                     200);
    assert_int_equal(call(d->legacy_port, "POST", "/execute", AUTH_API JSON_HDR,
                          "{\"command\":\"printenv LB_LEGACY\"}", &body),
                     200);
    assert_non_null(strstr(body, "legacy-value"));
    xfree(body);
}

static void test_disabled_without_token(void **state)
{
    struct daemon *d = daemon_start(NULL);
    (void)state;
    assert_int_equal(
        call(d->port, "PUT", "/v1/config/env", AUTH_API JSON_HDR, "{\"env\":{\"A\":\"1\"}}", NULL),
        404);
    assert_int_equal(call(d->port, "PUT", "/v1/config/env", "Authorization: Bearer \r\n" JSON_HDR,
                          "{\"env\":{\"A\":\"1\"}}", NULL),
                     404);
    daemon_stop(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_secure_eq),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_set_and_replace),
        cmocka_unit_test(test_set_rejects),
        cmocka_unit_test(test_set_limits),
        cmocka_unit_test(test_authorized),
        cmocka_unit_test_setup_teardown(test_put_requires_config_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_put_then_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_public_routes_take_no_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_drops_old, setup, teardown),
        cmocka_unit_test_setup_teardown(test_legacy_execute_sees_env, setup, teardown),
        cmocka_unit_test(test_disabled_without_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
