/* SPDX-License-Identifier: Apache-2.0 */
/* The multi-namespace source's paged LIST (controller/ns_source.h) against a scripted API
 * server: each namespace's pages reach the informer's page function one at a time, in
 * namespace order; an expired continue token in the first namespace restarts only its
 * list (the page says restarted), one in a later namespace lists every namespace again
 * (its first page says restarted), and a second such expiry fails the LIST. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "controller/ns_source.h"
#include "kube/obj.h"
#include "support/script_srv.h"

static struct {
    char expire;  /* the namespace whose continue token expires ('a', 'b'; 0: none) */
    int expiries; /* how many times it does */
    int gets;
} S;

static struct script_env ENV; /* the scripted API server and its client */

/* ns's list: two pages (x, then y) unless its token expired; then one page (x and y). */
static int answer(int fd, const struct script_req *rq, void *ctx)
{
    (void)ctx;
    const char *p = strstr(rq->target, "/namespaces/");
    char ns = p ? p[12] : 0, body[512];
    bool cont = strstr(rq->target, "continue=") != NULL;
    S.gets++;
    if (cont && ns == S.expire && S.expiries > 0) {
        S.expiries--;
        char *f = script_failure(410, "Expired");
        script_respond(fd, 410, NULL, f);
        xfree(f);
        return 0;
    }
    bool whole = !cont && ns == S.expire && S.expiries == 0 && S.gets > 1;
    (void)snprintf(body, sizeof(body),
                   "{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":\"%d\"%s},"
                   "\"items\":[%s]}",
                   ns == 'a' ? 10 : 20, cont || whole ? "" : ",\"continue\":\"t\"",
                   whole  ? "{\"metadata\":{\"name\":\"x\"}},{\"metadata\":{\"name\":\"y\"}}"
                   : cont ? "{\"metadata\":{\"name\":\"y\"}}"
                          : "{\"metadata\":{\"name\":\"x\"}}");
    script_respond(fd, 200, NULL, body);
    return 0;
}

/* What the informer's page function saw: "a:x", "a:x,y"..., "!" before a restarted page. */
static char seen[512];

static int record(void *ctx, const json_t *page, bool restarted)
{
    (void)ctx;
    size_t i;
    json_t *it;
    const char *rv = kube_obj_resource_version(page);
    size_t n = strlen(seen);
    (void)snprintf(seen + n, sizeof(seen) - n, "%s%s:", restarted ? "!" : "",
                   rv && !strcmp(rv, "10") ? "a" : "b");
    json_array_foreach(json_object_get(page, "items"), i, it)
    {
        n = strlen(seen);
        (void)snprintf(seen + n, sizeof(seen) - n, "%s%s", i ? "," : "", kube_obj_name(it));
    }
    n = strlen(seen);
    (void)snprintf(seen + n, sizeof(seen) - n, " ");
    return 0;
}

static int list(char expire, int expiries, struct kube_err *err)
{
    struct ctrl_ns_source *s = NULL;
    struct kube_informer_source src;
    script_srv_lock(ENV.srv); /* S is the server thread's under its lock */
    memset(&S, 0, sizeof(S));
    S.expire = expire;
    S.expiries = expiries;
    script_srv_unlock(ENV.srv);
    seen[0] = '\0';
    assert_int_equal(ctrl_ns_source_for("a,b", &s, &src), 0);
    assert_non_null(src.list_pages);
    struct kube_informer_opts o = {
        .client = ENV.client, .res = &KUBE_RES_CONFIGMAPS, .source = &src};
    kube_err_clear(err);
    int r = src.list_pages(src.ctx, &o, record, NULL, err);
    ctrl_ns_source_free(s);
    return r;
}

static int gets_seen(void)
{
    script_srv_lock(ENV.srv);
    int n = S.gets;
    script_srv_unlock(ENV.srv);
    return n;
}

static void test_pages_in_order(void **state)
{
    (void)state;
    struct kube_err err;
    assert_int_equal(list(0, 0, &err), 0);
    assert_string_equal(seen, "a:x a:y b:x b:y ");
    assert_int_equal(gets_seen(), 4);
}

static void test_first_namespace_restarts_alone(void **state)
{
    (void)state;
    struct kube_err err;
    assert_int_equal(list('a', 1, &err), 0);
    assert_string_equal(seen, "a:x !a:x,y b:x b:y ");
}

static void test_later_namespace_lists_all_again(void **state)
{
    (void)state;
    struct kube_err err;
    assert_int_equal(list('b', 1, &err), 0);
    assert_string_equal(seen, "a:x a:y b:x !a:x a:y b:x,y ");
}

static void test_later_namespace_expires_twice(void **state)
{
    (void)state;
    struct kube_err err;
    assert_true(list('b', 2, &err) < 0);
    assert_non_null(strstr(err.message, "expired twice"));
    assert_string_equal(seen, "a:x a:y b:x !a:x a:y b:x ");
}

static int setup(void **state)
{
    (void)state;
    log_set_level(LOG_ERROR);
    script_env_start(&ENV, answer, NULL, true, "ns", NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    script_env_stop(&ENV);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pages_in_order),
        cmocka_unit_test(test_first_namespace_restarts_alone),
        cmocka_unit_test(test_later_namespace_lists_all_again),
        cmocka_unit_test(test_later_namespace_expires_twice),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
