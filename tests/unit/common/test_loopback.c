/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/loopback: loopback addresses (only 127/8, ::1 and mapped 127/8),
 * Host values (names, brackets, ports, a trailing dot) and which URLs would carry a
 * credential in clear text off this machine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <string.h>

#include "common/loopback.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void test_addr(void **state)
{
    (void)state;
    static const char *const yes[] = {"127.0.0.1", "127.255.0.9", "::1", "::ffff:127.0.0.1"};
    static const char *const no[] = {
        "10.0.0.1", "169.254.1.1", "::ffff:10.0.0.1", "::",  "0.0.0.0",     "fe80::1",
        "",         "localhost",   "128.0.0.1",       "::2", "::127.0.0.1", "1.127.0.0"};
    for (size_t i = 0; i < N(yes); i++)
        assert_true(loopback_addr(yes[i]));
    for (size_t i = 0; i < N(no); i++)
        assert_false(loopback_addr(no[i]));
}

static void test_host(void **state)
{
    (void)state;
    static const char *const yes[] = {"localhost",       "LocalHost:8080", "localhost.",
                                      "a.b.localhost:1", "127.0.0.1:80",   "[::1]:8080",
                                      "[::1]",           "127.9.9.9"};
    static const char *const no[] = {"",     "localhost.example", "mylocalhost", "10.0.0.1",
                                     "[::1", "[fe80::1]:80",      "example:1",   ".localhost"};
    for (size_t i = 0; i < N(yes); i++)
        assert_true(loopback_host(str_make(yes[i], strlen(yes[i]))));
    for (size_t i = 0; i < N(no); i++)
        assert_false(loopback_host(str_make(no[i], strlen(no[i]))));
}

static void test_url_exposes(void **state)
{
    (void)state;
    static const char *const safe[] = {"https://router.example:8443",
                                       "HTTPS://10.0.0.1/",
                                       "http://127.0.0.1:8080",
                                       "http://localhost:8080/path",
                                       "http://[::1]:1/x?y",
                                       "http://user@localhost:1",
                                       "http://sandbox.localhost:80/",
                                       "http://localhost.?q=example",
                                       "localhost:8080",
                                       "127.0.0.1:8080/x"};
    static const char *const exposed[] = {"http://10.0.0.1:8080",
                                          "http://router.example/",
                                          "http://localhost@evil.example:80/",
                                          "http://127.0.0.1.example",
                                          "ws://example",
                                          "router:8080",
                                          "http://[::2]:80",
                                          "http://sandbox-router-svc.ns.svc.cluster.local:8080"};
    for (size_t i = 0; i < N(safe); i++)
        assert_false(loopback_url_exposes(safe[i]));
    for (size_t i = 0; i < N(exposed); i++)
        assert_true(loopback_url_exposes(exposed[i]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_addr),
        cmocka_unit_test(test_host),
        cmocka_unit_test(test_url_exposes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
