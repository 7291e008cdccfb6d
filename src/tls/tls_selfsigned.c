/* SPDX-License-Identifier: Apache-2.0 */
/* A self-signed serving certificate for when none is given (kubebuilder's secure metrics
 * do the same): scrapers then skip verification or pin it. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/stat.h>

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/xalloc.h"
#include "tls/tls_front.h"

static int add_ext(X509 *crt, int nid, const char *value)
{
    X509V3_CTX v3;
    X509_EXTENSION *ext;
    int ok;
    X509V3_set_ctx(&v3, crt, crt, NULL, NULL, 0);
    ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
    if (!ext)
        return -EINVAL;
    ok = X509_add_ext(crt, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : -EINVAL;
}

static X509 *make_cert(EVP_PKEY *key, const char *cn, long valid_secs)
{
    X509 *crt = X509_new();
    X509_NAME *name;
    char san[300];
    if (!crt)
        return NULL;
    (void)snprintf(san, sizeof(san), "DNS:%s,IP:127.0.0.1", cn);
    (void)X509_set_version(crt, 2);
    (void)ASN1_INTEGER_set(X509_get_serialNumber(crt), (long)(getpid() ^ time(NULL)));
    (void)X509_gmtime_adj(X509_getm_notBefore(crt), -300);
    (void)X509_gmtime_adj(X509_getm_notAfter(crt), valid_secs);
    (void)X509_set_pubkey(crt, key);
    name = X509_get_subject_name(crt);
    (void)X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1,
                                     0);
    (void)X509_set_issuer_name(crt, name);
    if (add_ext(crt, NID_subject_alt_name, san) < 0 ||
        add_ext(crt, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
        X509_sign(crt, key, EVP_sha256()) <= 0) {
        X509_free(crt);
        return NULL;
    }
    return crt;
}

static int write_pem(const char *dir, const char *file, EVP_PKEY *key, X509 *crt)
{
    char path[PATH_MAX];
    FILE *f;
    int ok;
    (void)snprintf(path, sizeof(path), "%s/%s", dir, file);
    f = fopen(path, "wxe"); /* new file only; the directory is ours (0700) */
    if (!f)
        return -errno;
    ok = key ? PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) : PEM_write_X509(f, crt);
    if (fclose(f) != 0)
        ok = 0;
    return ok ? 0 : -EIO;
}

void tls_self_signed_remove(char *dir)
{
    char path[PATH_MAX];
    if (!dir)
        return;
    (void)snprintf(path, sizeof(path), "%s/tls.crt", dir);
    (void)unlink(path);
    (void)snprintf(path, sizeof(path), "%s/tls.key", dir);
    (void)unlink(path);
    (void)rmdir(dir);
    xfree(dir);
}

int tls_self_signed(const char *cn, char **ret_dir)
{
    return tls_self_signed_for(cn, 365L * 24 * 3600, ret_dir);
}

int tls_self_signed_for(const char *cn, long valid_secs, char **ret_dir)
{
    const char *tmp = getenv("TMPDIR");
    char *dir = xasprintf("%s/agent-sandbox-tls-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *crt = key ? make_cert(key, cn, valid_secs) : NULL;
    int r = crt ? 0 : -EINVAL;
    bool made = false;
    if (r >= 0)
        r = (made = mkdtemp(dir) != NULL) ? 0 : -errno;
    if (r >= 0)
        r = write_pem(dir, "tls.key", key, NULL);
    if (r >= 0)
        r = write_pem(dir, "tls.crt", NULL, crt);
    X509_free(crt);
    EVP_PKEY_free(key);
    if (r < 0) {
        if (made)
            tls_self_signed_remove(dir); /* no key left behind; frees dir */
        else
            xfree(dir);
        return r;
    }
    *ret_dir = dir;
    return 0;
}
