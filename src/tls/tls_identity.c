/* SPDX-License-Identifier: Apache-2.0 */
/* Client certificate subject -> Kubernetes identity (see the header). */
#include "tls/tls_identity.h"

#include <errno.h>
#include <string.h>

#include <openssl/asn1.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/x509.h>

/* The parts of a subject that make the identity. */
struct subject_parts {
    char user[LIMIT_TLS_PEER_NAME + 1];
    char groups[LIMIT_TLS_PEER_GROUPS][LIMIT_TLS_PEER_NAME + 1];
    int ncn, ngroups;
};

/* Decodes the code point at s[*i] and moves *i past it. Returns it, or -1 for an
 * invalid sequence (truncated, overlong, a surrogate, past U+10FFFF). */
static long utf8_next(const unsigned char *s, size_t len, size_t *i)
{
    unsigned char c = s[*i];
    size_t n;
    long cp, min;
    if (c < 0x80) {
        (*i)++;
        return c;
    }
    if ((c & 0xE0) == 0xC0)
        n = 1, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
        n = 2, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
        n = 3, cp = c & 0x07, min = 0x10000;
    else
        return -1;
    if (len - *i < n + 1)
        return -1;
    for (size_t k = 1; k <= n; k++) {
        unsigned char d = s[*i + k];
        if ((d & 0xC0) != 0x80)
            return -1;
        cp = cp << 6 | (d & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return -1;
    *i += n + 1;
    return cp;
}

bool tls_identity_text_ok(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        long cp = utf8_next(u, len, &i);
        if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F))
            return false; /* invalid (-1) or a C0/DEL/C1 control character */
    }
    return true;
}

/* The entry's value as checked UTF-8 into out (LIMIT_TLS_PEER_NAME + 1 bytes). Returns
 * its length (0: empty), -EINVAL or -E2BIG. */
static int entry_text(const X509_NAME_ENTRY *ne, char *out)
{
    unsigned char *u = NULL;
    int n = ASN1_STRING_to_UTF8(&u, X509_NAME_ENTRY_get_data(ne));
    int r = n;
    if (n < 0)
        r = -EINVAL;
    else if ((size_t)n > LIMIT_TLS_PEER_NAME)
        r = -E2BIG;
    else if (!tls_identity_text_ok((const char *)u, (size_t)n))
        r = -EINVAL;
    else if (n > 0)
        memcpy(out, u, (size_t)n);
    if (r >= 0)
        out[r] = '\0';
    if (n < 0)
        ERR_clear_error(); /* a later SSL_get_error on this thread must not see it */
    OPENSSL_free(u);
    return r;
}

/* Takes one entry of interest into p. Returns 0 or a negative errno. */
static int take_entry(const X509_NAME_ENTRY *ne, struct subject_parts *p)
{
    int nid = OBJ_obj2nid(X509_NAME_ENTRY_get_object(ne)), r;
    if (nid == NID_commonName) {
        if (p->ncn++ > 0)
            return -EINVAL; /* which one would be the user? */
        r = entry_text(ne, p->user);
        return r < 0 ? r : r == 0 ? -ENOENT : 0;
    }
    if (nid != NID_organizationName)
        return 0;
    if (p->ngroups == LIMIT_TLS_PEER_GROUPS)
        return -E2BIG;
    r = entry_text(ne, p->groups[p->ngroups]);
    if (r < 0)
        return r;
    if (r == 0)
        return -EINVAL;
    p->ngroups++;
    return 0;
}

/* Appends s and its NUL at *off (the caller checked the room). */
static void put(char *out, size_t *off, const char *s)
{
    size_t n = strlen(s) + 1;
    memcpy(out + *off, s, n);
    *off += n;
}

int tls_identity_from_subject(const struct X509_name_st *subject, char *out, size_t size)
{
    struct subject_parts p = {.ncn = 0};
    int r = 0, n = X509_NAME_entry_count(subject);
    for (int i = 0; i < n && r >= 0; i++)
        r = take_entry(X509_NAME_get_entry(subject, i), &p);
    if (r < 0)
        return r;
    if (p.ncn == 0)
        return -ENOENT;
    bool named_all = false;
    size_t need = strlen(p.user) + 1, off = 0;
    for (int i = 0; i < p.ngroups; i++) {
        need += strlen(p.groups[i]) + 1;
        named_all = named_all || strcmp(p.groups[i], TLS_IDENTITY_GROUP_ALL) == 0;
    }
    if (!named_all)
        need += sizeof(TLS_IDENTITY_GROUP_ALL);
    if (need > size)
        return -ENOSPC;
    put(out, &off, p.user);
    for (int i = 0; i < p.ngroups; i++)
        put(out, &off, p.groups[i]);
    if (!named_all)
        put(out, &off, TLS_IDENTITY_GROUP_ALL);
    return (int)off;
}
