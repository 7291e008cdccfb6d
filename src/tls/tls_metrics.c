/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTPS metrics listener of --metrics-secure: the certificate from
 * --metrics-cert-path or a self-signed one, then a TLS front before the metrics server. */
#include <errno.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "tls/tls_front.h"

int tls_metrics_start(const struct tls_metrics_opts *o, struct http_server *server,
                      struct tls_front **ret, char **ret_dir)
{
    const char *dir = o->cert_dir;
    const char *host = o->host ? o->host : "0.0.0.0";
    *ret_dir = NULL;
    if (!dir) {
        int r = tls_self_signed(o->cn, ret_dir);
        if (r < 0)
            return log_error_errno(r, "cannot make a self-signed metrics certificate");
        dir = *ret_dir;
        log_info("metrics: serving a self-signed certificate (give --metrics-cert-path to "
                 "use your own)");
    }
    char *cert = xasprintf("%s/%s", dir, o->cert_name ? o->cert_name : "tls.crt");
    char *key = xasprintf("%s/%s", dir, o->key_name ? o->key_name : "tls.key");
    struct tls_front_opts to = {.host = o->host,
                                .port = o->port,
                                .cert_file = cert,
                                .key_file = key,
                                .max_conns = LIMIT_TLS_METRICS_CONNECTIONS};
    int r = tls_front_start(&to, server, ret);
    xfree(cert);
    xfree(key);
    if (r < 0) {
        tls_self_signed_remove(*ret_dir);
        *ret_dir = NULL;
        return log_error_errno(r, "cannot serve secure metrics\thost=%s port=%u", host,
                               (unsigned)o->port);
    }
    log_info("serving secure metrics\thost=%s port=%u authn=tokenreview authz=/metrics:get", host,
             (unsigned)tls_front_port(*ret));
    return 0;
}
