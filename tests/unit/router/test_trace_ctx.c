/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for router/trace_ctx: W3C traceparent parsing for the access log. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <string.h>

#include "router/trace_ctx.h"

static bool parse(const char *v, char *tid, char *sid)
{
    return trace_parse_traceparent(str_c(v), tid, sid);
}

static void test_valid(void **state)
{
    char tid[TRACE_ID_LEN + 1], sid[SPAN_ID_LEN + 1];
    (void)state;
    assert_true(parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tid, sid));
    assert_string_equal(tid, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_string_equal(sid, "00f067aa0ba902b7");
    /* a later version may carry more fields after the flags */
    assert_true(parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra", tid, sid));
    assert_true(parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09", tid, sid));
}

static void test_invalid(void **state)
{
    static const char *const bad[] = {
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",    /* short */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", /* v00 + extra */
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   /* version ff */
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",   /* zero trace */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   /* zero span */
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",   /* uppercase */
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   /* separator */
        " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  /* blank */
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",  /* v01 junk */
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",   /* not hex */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",   /* flags */
    };
    char tid[TRACE_ID_LEN + 1] = "x", sid[SPAN_ID_LEN + 1] = "y";
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (parse(bad[i], tid, sid))
            fail_msg("accepted %s", bad[i]);
        assert_string_equal(tid, "");
        assert_string_equal(sid, "");
    }
    assert_false(trace_parse_traceparent(STR_NULL, tid, sid));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
