/* SPDX-License-Identifier: Apache-2.0 */
/* Client certificate subject -> Kubernetes identity (tls/tls_identity.h): CN as the
 * user, every O as a group plus system:authenticated, other attributes ignored; no CN,
 * two CNs, empty, overlong, non-UTF-8 or control-character values and too many
 * organizations give no identity; the UTF-8 checker on its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/asn1.h>
#include <openssl/objects.h>
#include <openssl/x509.h>

#include "tls/tls_identity.h"

/* Adds an attribute with raw bytes of the given ASN.1 string type (not checked by
 * OpenSSL, so invalid values can be made). */
static void add(X509_NAME *n, int nid, int type, const char *v, size_t len)
{
    assert_int_equal(
        X509_NAME_add_entry_by_NID(n, nid, type, (const unsigned char *)v, (int)len, -1, 0), 1);
}

static void add_utf8(X509_NAME *n, int nid, const char *v)
{
    add(n, nid, V_ASN1_UTF8STRING, v, strlen(v));
}

static int map(X509_NAME *n, char *out, size_t size)
{
    int r = tls_identity_from_subject(n, out, size);
    X509_NAME_free(n);
    return r;
}

#define ENC(lit) lit, sizeof(lit) - 1 /* an expected encoding (it holds NULs) */

static void expect(X509_NAME *n, const char *want, size_t want_len)
{
    char out[TLS_IDENTITY_MAX];
    int r = map(n, out, sizeof(out));
    assert_int_equal(r, (int)want_len);
    assert_memory_equal(out, want, want_len);
}

static void test_user_and_groups(void **state)
{
    (void)state;
    X509_NAME *n = X509_NAME_new();
    add_utf8(n, NID_countryName, "DE");
    add_utf8(n, NID_organizationName, "dev");
    add_utf8(n, NID_organizationalUnitName, "ignored");
    add_utf8(n, NID_commonName, "alice");
    add_utf8(n, NID_organizationName, "ops");
    expect(n, ENC("alice\0dev\0ops\0system:authenticated\0"));

    n = X509_NAME_new();
    add_utf8(n, NID_commonName, "bob");
    expect(n, ENC("bob\0system:authenticated\0"));

    n = X509_NAME_new(); /* named by the certificate: not twice */
    add_utf8(n, NID_organizationName, "system:authenticated");
    add_utf8(n, NID_organizationName, "system:masters");
    add_utf8(n, NID_commonName, "admin");
    expect(n, ENC("admin\0system:authenticated\0system:masters\0"));

    n = X509_NAME_new(); /* other string types convert to UTF-8 (T61 as Latin-1) */
    add(n, NID_commonName, V_ASN1_T61STRING, "caf\xe9", 4);
    add(n, NID_organizationName, V_ASN1_PRINTABLESTRING, "Team 1", 6);
    expect(n, ENC("caf\xc3\xa9\0Team 1\0system:authenticated\0"));
}

static void test_no_identity(void **state)
{
    char out[TLS_IDENTITY_MAX];
    (void)state;
    X509_NAME *n = X509_NAME_new();
    assert_int_equal(map(n, out, sizeof(out)), -ENOENT); /* empty subject */
    n = X509_NAME_new();
    add_utf8(n, NID_organizationName, "dev");
    assert_int_equal(map(n, out, sizeof(out)), -ENOENT); /* groups but no CN */
    n = X509_NAME_new();
    add(n, NID_commonName, V_ASN1_UTF8STRING, "", 0);
    assert_int_equal(map(n, out, sizeof(out)), -ENOENT);
    n = X509_NAME_new();
    add_utf8(n, NID_commonName, "alice");
    add_utf8(n, NID_commonName, "admin");
    assert_int_equal(map(n, out, sizeof(out)), -EINVAL); /* which one? */
    n = X509_NAME_new();
    add_utf8(n, NID_commonName, "alice");
    add(n, NID_organizationName, V_ASN1_UTF8STRING, "", 0);
    assert_int_equal(map(n, out, sizeof(out)), -EINVAL);
    n = X509_NAME_new();
    add_utf8(n, NID_commonName, "alice");
    assert_int_equal(map(n, out, 10), -ENOSPC);
}

static void test_bounds(void **state)
{
    char out[TLS_IDENTITY_MAX], big[LIMIT_TLS_PEER_NAME + 2];
    char group[16];
    (void)state;
    memset(big, 'a', sizeof(big));
    X509_NAME *n = X509_NAME_new();
    add(n, NID_commonName, V_ASN1_UTF8STRING, big, LIMIT_TLS_PEER_NAME);
    assert_int_equal(map(n, out, sizeof(out)), LIMIT_TLS_PEER_NAME + 1 + 21);
    n = X509_NAME_new();
    add(n, NID_commonName, V_ASN1_UTF8STRING, big, LIMIT_TLS_PEER_NAME + 1);
    assert_int_equal(map(n, out, sizeof(out)), -E2BIG);
    n = X509_NAME_new();
    add_utf8(n, NID_commonName, "alice");
    add(n, NID_organizationName, V_ASN1_UTF8STRING, big, LIMIT_TLS_PEER_NAME + 1);
    assert_int_equal(map(n, out, sizeof(out)), -E2BIG);

    /* LIMIT_TLS_PEER_GROUPS organizations of the longest kind fit TLS_IDENTITY_MAX */
    n = X509_NAME_new();
    add(n, NID_commonName, V_ASN1_UTF8STRING, big, LIMIT_TLS_PEER_NAME);
    for (int i = 0; i < LIMIT_TLS_PEER_GROUPS; i++) {
        big[0] = (char)('A' + i);
        add(n, NID_organizationName, V_ASN1_UTF8STRING, big, LIMIT_TLS_PEER_NAME);
    }
    assert_int_equal(map(n, out, sizeof(out)),
                     (LIMIT_TLS_PEER_GROUPS + 1) * (LIMIT_TLS_PEER_NAME + 1) + 21);
    n = X509_NAME_new();
    add_utf8(n, NID_commonName, "alice");
    for (int i = 0; i <= LIMIT_TLS_PEER_GROUPS; i++) {
        (void)snprintf(group, sizeof(group), "g%d", i);
        add_utf8(n, NID_organizationName, group);
    }
    assert_int_equal(map(n, out, sizeof(out)), -E2BIG);
}

static void test_bad_text(void **state)
{
    static const char *const bad[] = {
        "ali\nce",          /* C0 */
        "alice\r",          /* C0 */
        "al\x7fice",        /* DEL */
        "al\xc2\x85ice",    /* C1 (NEL) */
        "\xff\xfe",         /* not UTF-8 */
        "\xc0\xaf",         /* overlong '/' */
        "\xed\xa0\x80",     /* a surrogate */
        "\xf4\x90\x80\x80", /* past U+10FFFF */
        "\xe2\x82",         /* truncated */
    };
    char out[TLS_IDENTITY_MAX];
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        X509_NAME *n = X509_NAME_new();
        add(n, NID_commonName, V_ASN1_UTF8STRING, bad[i], strlen(bad[i]));
        assert_int_equal(map(n, out, sizeof(out)), -EINVAL);
        n = X509_NAME_new();
        add_utf8(n, NID_commonName, "alice");
        add(n, NID_organizationName, V_ASN1_UTF8STRING, bad[i], strlen(bad[i]));
        assert_int_equal(map(n, out, sizeof(out)), -EINVAL);
        assert_false(tls_identity_text_ok(bad[i], strlen(bad[i])));
    }
    /* a NUL inside the value */
    X509_NAME *n = X509_NAME_new();
    add(n, NID_commonName, V_ASN1_UTF8STRING, "al\0ice", 6);
    assert_int_equal(map(n, out, sizeof(out)), -EINVAL);
    static const char fine[] = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82"; /* é € emoji */
    assert_true(tls_identity_text_ok(fine, sizeof(fine) - 1));
    assert_true(tls_identity_text_ok("", 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_user_and_groups),
        cmocka_unit_test(test_no_identity),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_bad_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
