/* SPDX-License-Identifier: Apache-2.0 */
/* metav1.Status parsing, errno mapping and predicates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "kube/err.h"

static void from(struct kube_err *e, long status, const char *body)
{
    kube_err_from_response(e, status, body, body ? strlen(body) : 0);
}

static void test_not_found(void **state)
{
    (void)state;
    struct kube_err e;
    from(&e, 404,
         "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":"
         "\"pods \\\"x\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"x\","
         "\"kind\":\"pods\"},\"code\":404}");
    assert_int_equal(e.code, -ENOENT);
    assert_int_equal(e.http_status, 404);
    assert_string_equal(e.reason, "NotFound");
    assert_string_equal(e.message, "pods \"x\" not found");
    assert_true(kube_err_is_not_found(&e));
    assert_false(kube_err_is_conflict(&e));
    assert_false(kube_err_is_retryable(&e));
}

static void test_conflicts(void **state)
{
    (void)state;
    struct kube_err e;
    from(&e, 409, "{\"kind\":\"Status\",\"reason\":\"AlreadyExists\",\"message\":\"exists\"}");
    assert_int_equal(e.code, -EEXIST);
    assert_true(kube_err_is_already_exists(&e));
    assert_false(kube_err_is_conflict(&e));
    from(&e, 409, "{\"kind\":\"Status\",\"reason\":\"Conflict\",\"message\":\"modified\"}");
    assert_int_equal(e.code, -EBUSY);
    assert_true(kube_err_is_conflict(&e));
    assert_false(kube_err_is_already_exists(&e));
}

static void test_gone_and_throttle(void **state)
{
    (void)state;
    struct kube_err e;
    from(&e, 410, "{\"kind\":\"Status\",\"reason\":\"Expired\",\"message\":\"too old\"}");
    assert_int_equal(e.code, -ESTALE);
    assert_true(kube_err_is_gone(&e));
    /* a watch ERROR event carries the Status without an HTTP status */
    from(&e, 0, "{\"kind\":\"Status\",\"reason\":\"Expired\",\"code\":410}");
    assert_int_equal(e.http_status, 410);
    assert_true(kube_err_is_gone(&e));
    from(&e, 429,
         "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\",\"details\":"
         "{\"retryAfterSeconds\":3}}");
    assert_int_equal(e.code, -EAGAIN);
    assert_int_equal(e.retry_after_s, 3);
    assert_true(kube_err_is_too_many_requests(&e));
    assert_true(kube_err_is_retryable(&e));
}

static void test_non_status_bodies(void **state)
{
    (void)state;
    struct kube_err e;
    from(&e, 503, NULL);
    assert_int_equal(e.code, -EIO);
    assert_string_equal(e.message, "HTTP status 503");
    assert_true(kube_err_is_retryable(&e));
    from(&e, 502, "  <html>bad\ngateway</html>\n");
    assert_string_equal(e.message, "<html>bad gateway</html>");
    from(&e, 504, "x");
    assert_int_equal(e.code, -ETIMEDOUT);
    from(&e, 501, "x");
    assert_false(kube_err_is_retryable(&e));
    from(&e, 422, "{\"kind\":\"Status\",\"reason\":\"Invalid\"}");
    assert_int_equal(e.code, -EINVAL);
    assert_true(kube_err_is_invalid(&e));
    from(&e, 403, "{}");
    assert_int_equal(e.code, -EPERM);
    assert_true(kube_err_is_forbidden(&e));
    from(&e, 401, "{}");
    assert_int_equal(e.code, -EACCES);
    assert_true(kube_err_is_unauthorized(&e));
    /* an overlong message is cut, not overflowed */
    char big[3000];
    memset(big, 'm', sizeof(big));
    memcpy(big, "{\"message\":\"", 12);
    memcpy(big + sizeof(big) - 3, "\"}", 3);
    from(&e, 400, big);
    assert_int_equal(strlen(e.message), sizeof(e.message) - 1);
}

/* A create in a terminating namespace (NamespaceLifecycle's answer) is told apart from
 * other 403s. */
static void test_namespace_terminating(void **state)
{
    (void)state;
    struct kube_err e;
    from(&e, 403,
         "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"pods \\\"p\\\" is "
         "forbidden: unable to create new content in namespace x because it is being "
         "terminated\",\"reason\":\"Forbidden\",\"details\":{\"name\":\"p\",\"kind\":\"pods\","
         "\"causes\":[{\"reason\":\"NamespaceTerminating\",\"message\":\"namespace x is being "
         "terminated\",\"field\":\"metadata.namespace\"}]},"
         "\"code\":403}");
    assert_int_equal(e.code, -ESHUTDOWN);
    assert_true(e.ns_terminating);
    assert_true(kube_err_is_forbidden(&e));
    assert_false(kube_err_is_retryable(&e));
    /* RBAC's 403 has no such cause */
    from(&e, 403,
         "{\"kind\":\"Status\",\"reason\":\"Forbidden\",\"details\":{\"causes\":"
         "[{\"reason\":\"FieldValueForbidden\"}]},\"code\":403}");
    assert_int_equal(e.code, -EPERM);
    assert_false(e.ns_terminating);
    /* the cause on another status is not trusted */
    from(&e, 422,
         "{\"kind\":\"Status\",\"reason\":\"Invalid\",\"details\":{\"causes\":"
         "[{\"reason\":\"NamespaceTerminating\"}]},\"code\":422}");
    assert_int_equal(e.code, -EINVAL);
    assert_false(e.ns_terminating);
    /* causes that are not an array of objects */
    from(&e, 403,
         "{\"kind\":\"Status\",\"details\":{\"causes\":{\"reason\":\"NamespaceTerminating\"}}}");
    assert_false(e.ns_terminating);
    from(&e, 403,
         "{\"kind\":\"Status\",\"details\":{\"causes\":[1,\"x\",{\"reason\":7},{\"type\":"
         "\"NamespaceTerminating\"}]}}");
    assert_false(e.ns_terminating);
}

/* Which failures may have been carried out: what a write's caller must read back. */
static void test_outcome_unknown(void **state)
{
    static const struct {
        long status;
        int code;
        bool sent, maybe_done, unknown;
    } cases[] = {
        {500, -EIO, true, false, true},          /* the server failed: maybe after the write */
        {503, -EIO, true, false, true},          /* */
        {504, -ETIMEDOUT, true, false, true},    /* */
        {409, -EEXIST, true, true, true},        /* a retry met what the first attempt made */
        {409, -EEXIST, true, false, false},      /* the name was taken before */
        {404, -ENOENT, true, false, false},      /* */
        {422, -EINVAL, true, false, false},      /* */
        {429, -EAGAIN, true, false, false},      /* refused before anything happened */
        {0, -ETIMEDOUT, true, false, true},      /* no answer in time */
        {0, -ECONNRESET, true, false, true},     /* cut after sending */
        {0, -EPROTO, true, false, true},         /* an answer that could not be read */
        {0, -ECANCELED, true, false, true},      /* cancelled in the transfer */
        {0, -ETIMEDOUT, false, false, false},    /* a connect that timed out */
        {0, -EPROTO, false, false, false},       /* a TLS handshake that failed */
        {0, -ECONNREFUSED, false, false, false}, /* nothing was sent */
        {0, -ESHUTDOWN, false, false, false},    /* refused here: namespace terminating */
        {0, -ECANCELED, false, false, false},    /* cancelled before the attempt */
        {0, -ECONNREFUSED, false, true, true},   /* refused now, but an earlier attempt went */
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct kube_err e;
        kube_err_clear(&e);
        e.http_status = cases[i].status;
        e.code = cases[i].code;
        e.sent = cases[i].sent;
        e.maybe_done = cases[i].maybe_done;
        if (kube_err_outcome_unknown(&e) != cases[i].unknown)
            fail_msg("case %zu: status %ld code %d sent %d maybe_done %d: want %d", i,
                     cases[i].status, cases[i].code, cases[i].sent, cases[i].maybe_done,
                     cases[i].unknown);
    }
    assert_false(kube_err_outcome_unknown(NULL));
}

static void test_codes_and_set(void **state)
{
    (void)state;
    assert_int_equal(kube_err_code_for_status(200, NULL), 0);
    assert_int_equal(kube_err_code_for_status(400, NULL), -EINVAL);
    assert_int_equal(kube_err_code_for_status(409, NULL), -EBUSY);
    assert_int_equal(kube_err_code_for_status(500, NULL), -EIO);
    assert_int_equal(kube_err_code_for_status(418, NULL), -EPROTO);
    struct kube_err e;
    kube_err_set(&e, -ECONNREFUSED, "connect to %s failed", "127.0.0.1");
    assert_int_equal(e.http_status, 0);
    assert_string_equal(e.message, "connect to 127.0.0.1 failed");
    assert_true(kube_err_is_retryable(&e));
    kube_err_set(&e, -EPROTO, "tls");
    assert_false(kube_err_is_retryable(&e));
    kube_err_set(NULL, -EIO, "ignored");
    assert_false(kube_err_is_not_found(NULL));
    kube_err_clear(&e);
    assert_int_equal(e.code, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_found),         cmocka_unit_test(test_conflicts),
        cmocka_unit_test(test_gone_and_throttle), cmocka_unit_test(test_non_status_bodies),
        cmocka_unit_test(test_codes_and_set),     cmocka_unit_test(test_namespace_terminating),
        cmocka_unit_test(test_outcome_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
