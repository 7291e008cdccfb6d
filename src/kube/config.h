/* SPDX-License-Identifier: Apache-2.0 */
/* Client configuration: kubeconfig (contexts, clusters, users; CA/cert/key as files or
 * inline data; token and tokenFile; exec credential plugins; KUBECONFIG with several
 * files merged as kubectl does) or in-cluster (service-account token re-read when it
 * rotates, CA file, KUBERNETES_SERVICE_HOST/PORT). */
#pragma once

#include <stdbool.h>

#include "common/clock.h"
#include "kube/err.h"

struct kube_config;

struct kube_config_opts {
    const char *kubeconfig;         /* path; NULL: $KUBECONFIG (':'-separated), ~/.kube/config,
                                       else in-cluster */
    const char *context;            /* NULL: current-context */
    const char *namespace_override; /* NULL: the context's namespace or "default" */
    bool in_cluster;                /* force in-cluster config */
    /* in-cluster paths (tests override them) */
    const char *sa_dir;  /* NULL: /var/run/secrets/kubernetes.io/serviceaccount */
    usec_t exec_timeout; /* an exec credential plugin's run time; 0: LIMIT_KUBE_EXEC_TIMEOUT */
};

/** Loads configuration. Returns 0 and *ret (new, free with kube_config_free) or a
 * negative errno with a readable reason in reterr->message. */
int kube_config_load(const struct kube_config_opts *opts, struct kube_config **ret,
                     struct kube_err *reterr);
void kube_config_free(struct kube_config *cfg);

/** Server URL ("https://127.0.0.1:6443"), no trailing slash. Borrowed. */
const char *kube_config_server(const struct kube_config *cfg);
/** Default namespace. Borrowed. */
const char *kube_config_namespace(const struct kube_config *cfg);
/** Name of the context in use ("" for in-cluster). Borrowed. */
const char *kube_config_context(const struct kube_config *cfg);

/** TLS material for curl. Each pointer is borrowed and may be NULL. *_file is a path;
 * *_data is PEM held in memory (inline -data fields, base64-decoded). */
struct kube_tls {
    const char *ca_file;
    const char *ca_data;
    size_t ca_len;
    const char *cert_file;
    const char *cert_data;
    size_t cert_len;
    const char *key_file;
    const char *key_data;
    size_t key_len;
    bool insecure;
    const char *server_name; /* tls-server-name override */
};
void kube_config_tls(const struct kube_config *cfg, struct kube_tls *ret);

/** Writes the current bearer token (NUL-terminated) into out: a static token, the token
 * file re-read when its mtime changed or every minute, or an exec plugin's token,
 * re-run when it expires. Returns the token length, 0 when there is no token
 * (client-certificate auth), or a negative errno. Thread-safe. The exec plugin may also
 * return a client certificate; kube_config_tls then reports it. */
int kube_config_token(struct kube_config *cfg, char *out, size_t size, struct kube_err *reterr);
/** kube_config_token that also gives the credential's generation (*ret_gen, optional):
 *  it changes each time the credential is fetched anew. */
int kube_config_token_gen(struct kube_config *cfg, char *out, size_t size, uint64_t *ret_gen,
                          struct kube_err *reterr);
/** Forgets a cached exec/file token so the next call fetches it again (after a 401). */
void kube_config_invalidate_token(struct kube_config *cfg);
/** The same, only while the credential is still generation gen (the one the refused
 *  request carried): a burst of 401s for one expired token fetches it once, not once per
 *  request (an exec plugin, run under the config's lock, can take seconds). */
void kube_config_invalidate_token_gen(struct kube_config *cfg, uint64_t gen);
