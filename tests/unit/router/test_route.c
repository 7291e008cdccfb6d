/* SPDX-License-Identifier: Apache-2.0 */
/* Routing: header form, path form, every validation error (status and detail), repeated
 * X-Sandbox-* headers, and the SSRF address classes (with 6to4, Teredo and NAT64 forms). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "router/route.h"

/* Headers as a NULL-terminated list of name, value pairs. */
static struct str hdr(void *ctx, const char *name)
{
    const char *const *h = ctx;
    for (; h && h[0]; h += 2)
        if (strcasecmp(h[0], name) == 0)
            return str_c(h[1]);
    return STR_NULL;
}

static int parse(const char *path, const char *query, const char *const *headers, struct route *r,
                 struct route_err *e)
{
    struct route_input in = {
        .path = str_c(path), .query = str_c(query), .header = hdr, .header_ctx = (void *)headers};
    e->status = 0;
    e->detail = NULL;
    return route_parse(&in, r, e);
}

static void expect_err(const char *path, const char *const *headers, const char *detail)
{
    struct route r;
    struct route_err e;
    assert_int_equal(parse(path, "", headers, &r, &e), -EINVAL);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.detail, detail);
}

static void test_header_form_defaults(void **state)
{
    (void)state;
    const char *h[] = {"x-sandbox-id", "my-box", NULL};
    struct route r;
    struct route_err e;
    assert_int_equal(parse("/a/b%2F..//c", "x=1&y", h, &r, &e), 0);
    assert_string_equal(r.name, "my-box");
    assert_string_equal(r.ns, "default");
    assert_int_equal(r.port, 8888);
    assert_string_equal(r.pod_ip, "");
    assert_false(r.path_form);
    assert_true(str_eq_c(r.path, "/a/b%2F..//c")); /* unchanged, not normalised */
    assert_true(str_eq_c(r.query, "x=1&y"));
    assert_int_equal(r.timeout, 0);
}

static void test_header_form_full(void **state)
{
    (void)state;
    const char *h[] = {"X-Sandbox-ID",
                       "s1",
                       "X-Sandbox-Namespace",
                       "team-a",
                       "X-Sandbox-Port",
                       "65535",
                       "X-Sandbox-Pod-IP",
                       "10.1.2.3",
                       "X-Sandbox-UID",
                       "0c9d8a6e-1111-4b2c-9d3e-abcdefabcdef",
                       "X-Sandbox-Timeout",
                       "2.5",
                       NULL};
    struct route r;
    struct route_err e;
    assert_int_equal(parse("/s/x/y/1/z", "", h, &r, &e), 0); /* header form wins */
    assert_string_equal(r.ns, "team-a");
    assert_int_equal(r.port, 65535);
    assert_string_equal(r.pod_ip, "10.1.2.3");
    assert_string_equal(r.uid, "0c9d8a6e-1111-4b2c-9d3e-abcdefabcdef");
    assert_int_equal(r.timeout, 2500000);
    assert_true(str_eq_c(r.path, "/s/x/y/1/z"));
}

static void test_timeout_ignored_when_bad(void **state)
{
    (void)state;
    const char *bad[] = {"0", "-1", "nan", "inf", "1e99", "abc", "", "1s"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *h[] = {"X-Sandbox-ID", "a", "X-Sandbox-Timeout", bad[i], NULL};
        struct route r;
        struct route_err e;
        assert_int_equal(parse("/", "", h, &r, &e), 0);
        assert_int_equal(r.timeout, 0);
    }
}

static void test_header_errors(void **state)
{
    (void)state;
    expect_err("/x", NULL, ROUTE_ERR_ID_REQUIRED);
    const char *ids[] = {
        "",    "A",    "a.b",
        "a/b", "-a",   "a-",
        "a_b", "../x", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        const char *h[] = {"X-Sandbox-ID", ids[i], NULL};
        expect_err("/x", h, ROUTE_ERR_ID_INVALID);
    }
    const char *nss[] = {"", "Kube-System", "a.b", "a b", "x/y"};
    for (size_t i = 0; i < sizeof(nss) / sizeof(nss[0]); i++) {
        const char *h[] = {"X-Sandbox-ID", "a", "X-Sandbox-Namespace", nss[i], NULL};
        expect_err("/x", h, ROUTE_ERR_NS_INVALID);
    }
    const char *ports[] = {"", "0", "65536", "-1", "+80", "8o", "1.5", "000080", "99999999999"};
    for (size_t i = 0; i < sizeof(ports) / sizeof(ports[0]); i++) {
        const char *h[] = {"X-Sandbox-ID", "a", "X-Sandbox-Port", ports[i], NULL};
        expect_err("/x", h, ROUTE_ERR_PORT_INVALID);
    }
    const char *ips[] = {"",
                         "example.com",
                         "10.0.0",
                         "127.0.0.1:80",
                         "[::1]",
                         "0.0.0.0",
                         "169.254.169.254",
                         "fe80::1",
                         "224.0.0.1",
                         "ff02::1",
                         "::",
                         "::ffff:169.254.169.254",
                         "10.0.0.1 "};
    for (size_t i = 0; i < sizeof(ips) / sizeof(ips[0]); i++) {
        const char *h[] = {"X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", ips[i], NULL};
        expect_err("/x", h, ROUTE_ERR_IP_INVALID);
    }
    const char *uids[] = {"", "ABC", "a/b", "x y"};
    for (size_t i = 0; i < sizeof(uids) / sizeof(uids[0]); i++) {
        const char *h[] = {"X-Sandbox-ID", "a", "X-Sandbox-UID", uids[i], NULL};
        expect_err("/x", h, ROUTE_ERR_UID_INVALID);
    }
}

static void test_path_form(void **state)
{
    (void)state;
    struct route r;
    struct route_err e;
    assert_int_equal(parse("/s/team-a/box-1/8080/api/v1/x%20y", "q=1", NULL, &r, &e), 0);
    assert_true(r.path_form);
    assert_string_equal(r.ns, "team-a");
    assert_string_equal(r.name, "box-1");
    assert_int_equal(r.port, 8080);
    assert_true(str_eq_c(r.path, "/api/v1/x%20y"));
    assert_true(str_eq_c(r.query, "q=1"));
    assert_int_equal(parse("/s/ns/b/80", "", NULL, &r, &e), 0);
    assert_true(str_eq_c(r.path, "/"));
    assert_int_equal(parse("/s/ns/b/80/", "", NULL, &r, &e), 0);
    assert_true(str_eq_c(r.path, "/"));
    assert_int_equal(parse("/s/ns/b/80//x/../y", "", NULL, &r, &e), 0);
    assert_true(str_eq_c(r.path, "//x/../y"));
}

static void test_path_form_errors(void **state)
{
    (void)state;
    expect_err("/s/", NULL, ROUTE_ERR_NS_INVALID);
    expect_err("/s//b/80", NULL, ROUTE_ERR_NS_INVALID);
    expect_err("/s/NS/b/80", NULL, ROUTE_ERR_NS_INVALID);
    expect_err("/s/%6e/b/80", NULL, ROUTE_ERR_NS_INVALID);
    expect_err("/s/ns", NULL, ROUTE_ERR_ID_INVALID);
    expect_err("/s/ns/", NULL, ROUTE_ERR_ID_INVALID);
    expect_err("/s/ns/b.c/80", NULL, ROUTE_ERR_ID_INVALID);
    expect_err("/s/ns/b", NULL, ROUTE_ERR_PORT_INVALID);
    expect_err("/s/ns/b/", NULL, ROUTE_ERR_PORT_INVALID);
    expect_err("/s/ns/b/0/x", NULL, ROUTE_ERR_PORT_INVALID);
    expect_err("/s/ns/b/http/x", NULL, ROUTE_ERR_PORT_INVALID);
    expect_err("/sx/ns/b/80", NULL, ROUTE_ERR_ID_REQUIRED);
    const char *h[] = {"X-Sandbox-Pod-IP", "127.0.0.1:1", NULL};
    expect_err("/s/ns/b/80", h, ROUTE_ERR_IP_INVALID);
}

static void ip_ok(const char *ip, bool lo, const char *canon)
{
    char out[ROUTE_IP_MAX] = "";
    assert_int_equal(route_ip_check(ip, lo, out), 0);
    assert_string_equal(out, canon);
}

static void ip_refused(const char *ip, bool lo, int want)
{
    char out[ROUTE_IP_MAX] = "untouched";
    assert_int_equal(route_ip_check(ip, lo, out), want);
    assert_string_equal(out, "untouched");
}

static void test_ip_classes(void **state)
{
    (void)state;
    ip_ok("10.244.0.5", false, "10.244.0.5");
    ip_ok("192.168.1.1", false, "192.168.1.1");
    ip_ok("2001:DB8::1", false, "2001:db8::1");
    ip_ok("fd00::5", false, "fd00::5");
    ip_ok("::ffff:10.0.0.1", false, "::ffff:10.0.0.1");
    /* loopback only with the flag */
    ip_refused("127.0.0.1", false, -EPERM);
    ip_refused("127.255.0.1", false, -EPERM);
    ip_refused("::1", false, -EPERM);
    ip_refused("::ffff:127.0.0.1", false, -EPERM);
    ip_ok("127.0.0.1", true, "127.0.0.1");
    ip_ok("::1", true, "::1");
    /* never */
    const char *never[] = {"0.0.0.0",
                           "0.1.2.3",
                           "169.254.0.1",
                           "169.254.169.254",
                           "224.0.0.251",
                           "239.1.1.1",
                           "255.255.255.255",
                           "240.0.0.1",
                           "168.63.129.16",
                           "100.100.100.200",
                           "::",
                           "fe80::1",
                           "febf::1",
                           "fec0::1",
                           "ff02::1",
                           "ff05::2",
                           "fd00:ec2::254",
                           "::ffff:169.254.169.254",
                           "::ffff:0.0.0.0",
                           "::169.254.169.254",
                           "64:ff9b::a9fe:a9fe",
                           "::ffff:224.0.0.1"};
    for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++) {
        ip_refused(never[i], false, -EPERM);
        ip_refused(never[i], true, -EPERM);
    }
    /* not literals */
    const char *bad[] = {"",      "localhost",    "010.0.0.1", "10.0.0.1/8", "1.2.3",
                         "[::1]", "fe80::1%eth0", " 10.0.0.1", "0x7f.0.0.1", "1.2.3.4.5"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ip_refused(bad[i], true, -EINVAL);
}

static void test_tunnel_forms(void **state)
{
    (void)state;
    /* 6to4: the IPv4 address in bytes 2-5. */
    ip_refused("2002:a9fe:a9fe::1", false, -EPERM);
    ip_refused("2002:a9fe:a9fe::1", true, -EPERM);
    ip_refused("2002:7f00:1::", false, -EPERM);
    ip_refused("2002::", true, -EPERM);
    ip_ok("2002:a00:1::1", false, "2002:a00:1::1");
    /* Teredo: server in bytes 4-7, client inverted in bytes 12-15. */
    ip_ok("2001:0:4136:e378:8000:63bf:3fff:fdd2", false, "2001:0:4136:e378:8000:63bf:3fff:fdd2");
    ip_refused("2001:0:a00:1::5601:5601", true, -EPERM);     /* client 169.254.169.254 */
    ip_refused("2001:0:a9fe:a9fe::f5ff:fffe", true, -EPERM); /* server 169.254.169.254 */
    ip_refused("2001:0:a00:1::80ff:fffe", false, -EPERM);    /* client 127.0.0.1 */
    /* Local-use NAT64 64:ff9b:1::/48 at every RFC 6052 prefix length. */
    ip_refused("64:ff9b:1::a9fe:a9fe", true, -EPERM);       /* /96 */
    ip_refused("64:ff9b:1:a9fe:a9:fe00::", true, -EPERM);   /* /48 */
    ip_refused("64:ff9b:1:a9:fe:a9fe::", true, -EPERM);     /* /56 */
    ip_refused("64:ff9b:1::a9:fea9:fe00:0", true, -EPERM);  /* /64 */
    ip_refused("64:ff9b:1::7f00:1", false, -EPERM);         /* loopback at /96 */
    ip_refused("64:ff9b:1::", true, -EPERM);                /* 0.0.0.0 everywhere */
    ip_ok("64:ff9b:1::a00:1", false, "64:ff9b:1::a00:1");   /* 10.0.0.1 at /96 */
    ip_ok("64:ff9b:1:a00:1::", false, "64:ff9b:1:a00:1::"); /* 10.0.1.0 at /48 */
}

/* Headers as a NULL-terminated list of name, value pairs, by position. */
static bool hdr_at(void *ctx, size_t i, struct str *ret_name, struct str *ret_value)
{
    const char *const *h = ctx;
    for (size_t k = 0; k < i; k++, h += 2)
        if (!h[0])
            return false;
    if (!h[0])
        return false;
    *ret_name = str_c(h[0]);
    *ret_value = str_c(h[1]);
    return true;
}

static int parse_all(const char *path, const char *const *headers, struct route_err *e)
{
    struct route r;
    struct route_input in = {.path = str_c(path),
                             .query = STR_LIT(""),
                             .header = hdr,
                             .header_at = hdr_at,
                             .header_ctx = (void *)headers};
    *e = (struct route_err){0};
    return route_parse(&in, &r, e);
}

static void test_duplicate_headers(void **state)
{
    (void)state;
    struct route_err e;
    const char *ok[] = {"Host", "x", "X-Sandbox-ID", "box", "Accept", "a", "Accept", "b", NULL};
    assert_int_equal(parse_all("/", ok, &e), 0);
    const char *const dup[][9] = {
        {"X-Sandbox-ID", "box", "X-Sandbox-ID", "other", NULL},
        {"X-Sandbox-ID", "box", "x-sandbox-id", "box", NULL},
        {"X-Sandbox-ID", "box", "X-Sandbox-Namespace", "a", "X-SANDBOX-NAMESPACE", "b", NULL},
        {"X-Sandbox-Pod-IP", "10.0.0.1", "X-Sandbox-Pod-IP", "169.254.169.254", NULL},
        {"X-Sandbox-Timeout", "1", "Host", "x", "X-Sandbox-Timeout", "1", NULL},
        /* the path form too: a header it does not read is still refused twice */
        {"X-Sandbox-UID", "a", "X-Sandbox-UID", "b", NULL},
    };
    for (size_t i = 0; i < sizeof(dup) / sizeof(dup[0]); i++) {
        assert_int_equal(parse_all("/s/ns/box/80/", dup[i], &e), -EINVAL);
        assert_int_equal(e.status, 400);
        assert_ptr_equal(e.detail, ROUTE_ERR_DUPLICATE);
    }
}

static void test_dns_label(void **state)
{
    (void)state;
    assert_true(route_dns_label(STR_LIT("a")));
    assert_true(route_dns_label(STR_LIT("0-a-9")));
    assert_true(route_dns_label(
        STR_LIT("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")));
    assert_false(route_dns_label(
        STR_LIT("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")));
    assert_false(route_dns_label(str_make("a\0b", 3)));
}

/* A token-less loopback request (--trust-loopback) that a browser page of another site
 * could have sent is refused: by its Host, Sec-Fetch-Site or Origin. */
static void test_loopback_refusal(void **state)
{
    (void)state;
    static const struct {
        const char *host, *origin, *site;
        bool ok;
    } t[] = {
        {"127.0.0.1:8080", NULL, NULL, true},                             /* an SDK */
        {NULL, NULL, NULL, true},                                         /* HTTP/1.0, no Host */
        {"localhost:8080", "http://localhost:8080", "same-origin", true}, /* a page of it */
        {"LOCALHOST", "https://localhost", NULL, true},
        {"[::1]:80", NULL, "none", true}, /* typed into the address bar */
        {"app.localhost:80", NULL, NULL, true},
        {"localhost.:8080", NULL, NULL, true},
        {"127.9.9.9", NULL, NULL, true},
        {"evil.example:8080", NULL, NULL, false}, /* a rebound DNS name */
        {"10.0.0.1:8080", NULL, NULL, false},     /* not loopback */
        {"localhost.evil.example", NULL, NULL, false},
        {"[::2]:80", NULL, NULL, false},
        {"[::1", NULL, NULL, false},
        {"localhost:8080", "https://evil.example", NULL, false},  /* a cross-site POST */
        {"localhost:8080", "http://localhost:3000", NULL, false}, /* another local app */
        {"localhost:8080", "null", NULL, false},
        {"localhost:8080", "localhost:8080", NULL, false},
        {"localhost:8080", NULL, "cross-site", false}, /* a no-cors GET: no Origin */
        {"localhost:8080", NULL, "same-site", false},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        const char *why = route_loopback_refusal(t[i].host ? str_c(t[i].host) : STR_NULL,
                                                 t[i].origin ? str_c(t[i].origin) : STR_NULL,
                                                 t[i].site ? str_c(t[i].site) : STR_NULL);
        if ((why == NULL) != t[i].ok)
            fail_msg("host=%s origin=%s site=%s: %s", t[i].host ? t[i].host : "-",
                     t[i].origin ? t[i].origin : "-", t[i].site ? t[i].site : "-",
                     why ? why : "let through");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_form_defaults),
        cmocka_unit_test(test_header_form_full),
        cmocka_unit_test(test_timeout_ignored_when_bad),
        cmocka_unit_test(test_header_errors),
        cmocka_unit_test(test_path_form),
        cmocka_unit_test(test_path_form_errors),
        cmocka_unit_test(test_ip_classes),
        cmocka_unit_test(test_tunnel_forms),
        cmocka_unit_test(test_duplicate_headers),
        cmocka_unit_test(test_dns_label),

        cmocka_unit_test(test_loopback_refusal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
