/* SPDX-License-Identifier: Apache-2.0 */
/* TLS (1.2 or newer; OpenSSL) in front of a plain http_server: the router's HTTPS
 * listener (--https-bind-address) and the controller's secure metrics
 * (--metrics-secure). An acceptor thread takes TCP connections; each gets a thread that
 * completes the handshake (bounded by LIMIT_TLS_HANDSHAKE_S), then hands one end of a
 * socketpair to the http_server (http_server_adopt, with the
 * client's address as its peer) and moves bytes between TLS and that socketpair until
 * either side ends. So everything the plain listener does (keep-alive, streaming,
 * WebSocket upgrades, access log, authz) works unchanged over TLS.
 *
 * Client certificates (mTLS): with a CA file, mode "required" rejects a handshake
 * without a certificate signed by that CA, "optional" asks for one and rejects only a
 * bad one. With client_identity, a verified certificate's subject is mapped to a
 * Kubernetes identity (tls_identity.h) that the connection carries as its peer info
 * (http_req_peer_info); a subject that gives none is logged and the connection served
 * without one. The certificate, key and client CA files are read again when one's
 * modification time, size or inode changes (checked at each new connection), so a
 * rotated Secret (a new CA bundle too) is picked up without a restart; a broken new set
 * is logged and the old one kept. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/limits.h"

struct http_server;

enum tls_mtls_mode {
    TLS_MTLS_OFF = 0,
    TLS_MTLS_OPTIONAL,
    TLS_MTLS_REQUIRED,
};

struct tls_front_opts {
    const char *host;        /* numeric address; NULL: "0.0.0.0" (borrowed, copied) */
    uint16_t port;           /* 0: ephemeral */
    const char *cert_file;   /* PEM certificate chain (borrowed, copied) */
    const char *key_file;    /* PEM private key (borrowed, copied) */
    const char *client_ca;   /* PEM CA bundle for client certificates; NULL: none */
    enum tls_mtls_mode mtls; /* needs client_ca unless OFF */
    bool client_identity;    /* pass a client certificate's identity on (see above) */
    unsigned max_conns;      /* connections bridged at once, this front's own budget (more
                                are closed at accept); 0: LIMIT_TLS_CONNECTIONS */
};

struct tls_front;

/** Parses "off", "optional" or "required". Returns 0 or -EINVAL. */
int tls_mtls_parse(const char *s, enum tls_mtls_mode *ret);
/** Loads the certificate and key (and CA), binds, listens and starts the acceptor
 * thread that hands connections to server (borrowed; must outlive the front, and its
 * http_server_post must be usable from other threads). Returns 0 or a negative errno
 * (-EINVAL: unusable certificate, key or CA, or mTLS without a CA). */
int tls_front_start(const struct tls_front_opts *opts, struct http_server *server,
                    struct tls_front **ret);
/** The bound port. */
uint16_t tls_front_port(const struct tls_front *t);
/** Writes a new self-signed certificate (EC P-256, valid for a year, CN and DNS name
 * cn, IP SAN 127.0.0.1) and its key as PEM files tls.crt and tls.key into a new private
 * directory under $TMPDIR (or /tmp); *ret_dir gets the directory (xfree). Returns 0 or a
 * negative errno. */
int tls_self_signed(const char *cn, char **ret_dir);
/** The same, valid from 5 minutes ago until valid_secs from now (tests: a certificate
 * that expires soon). */
int tls_self_signed_for(const char *cn, long valid_secs, char **ret_dir);
/** Removes a directory tls_self_signed made (its two files, then it) and frees dir
 * (NULL is fine). */
void tls_self_signed_remove(char *dir);

/** The HTTPS listener of --metrics-secure (controller and router alike). */
struct tls_metrics_opts {
    const char *cn;        /* of the self-signed certificate, e.g. "sandbox-router-metrics" */
    const char *cert_dir;  /* --metrics-cert-path; NULL: a self-signed certificate */
    const char *cert_name; /* file in cert_dir; NULL: tls.crt */
    const char *key_name;  /* file in cert_dir; NULL: tls.key */
    const char *host;      /* as tls_front_opts */
    uint16_t port;
};
/** Starts the metrics listener in front of server (as tls_front_start) with the given
 * certificate or a self-signed one, whose directory goes into *ret_dir (remove it with
 * tls_self_signed_remove after tls_front_stop; NULL otherwise). Logs the outcome.
 * Returns 0 or a negative errno. */
int tls_metrics_start(const struct tls_metrics_opts *o, struct http_server *server,
                      struct tls_front **ret, char **ret_dir);
/** Stops accepting, waits for handshakes in progress (at most LIMIT_TLS_HANDSHAKE_S;
 * none hands a connection to the server afterwards) and frees the front (NULL is
 * fine). Call it before the server shuts down. Connections already bridged end with
 * their proxy connection. */
void tls_front_stop(struct tls_front *t);
