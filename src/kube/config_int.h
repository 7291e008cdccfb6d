/* SPDX-License-Identifier: Apache-2.0 */
/* The configuration object, shared by config.c (tokens, accessors), config_kubeconfig.c
 * (kubeconfig files), config_incluster.c and config_exec.c (credential plugins). */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <sys/types.h>

#include "common/buf.h"
#include "common/clock.h"
#include "kube/config.h"
#include "kube/err.h"

/** An exec credential plugin as written in a kubeconfig user. */
struct kube_exec_cfg {
    char *api_version; /* client.authentication.k8s.io/v1 or v1beta1 */
    char *command;     /* resolved against the kubeconfig's directory if relative */
    char **argv;       /* NULL-terminated; argv[0] is the command */
    char **env;        /* NULL-terminated "NAME=VALUE" */
    bool provide_cluster_info;
    char *source; /* kubeconfig path, for messages */
};

/** What one plugin run returned. */
struct kube_exec_result {
    char *token; /* NULL when none */
    char *cert;  /* PEM client certificate, NULL when none */
    char *key;
    usec_t expiry; /* wall clock usec; 0 = does not expire */
};

/** A retired exec certificate kept alive for borrowers of kube_config_tls. */
struct kube_retired {
    struct kube_retired *next;
    char *cert;
    char *key;
};

struct kube_config {
    char *server;
    char *namespace;
    char *context;
    char *ca_file, *cert_file, *key_file;
    struct buf ca, cert, key; /* inline PEM */
    bool insecure;
    char *server_name;
    char *token;      /* static bearer token */
    char *token_file; /* tokenFile or the in-cluster token */
    struct kube_exec_cfg *exec;
    usec_t exec_timeout; /* the plugin's run time (kube_config_opts.exec_timeout) */

    pthread_mutex_t lock; /* guards everything below */
    char *file_token;
    bool file_valid;
    dev_t file_dev;
    ino_t file_ino;
    struct timespec file_mtime;
    off_t file_size;
    usec_t file_checked;
    struct kube_exec_result exec_res;
    bool exec_valid;
    uint64_t token_gen; /* bumped each time the credential is fetched anew (exec, file) */
    struct kube_retired *retired;
};

/** Returns a new, empty config (mutex initialised, buffers bounded). */
struct kube_config *kube__config_alloc(void);
/** Reads at most limit bytes of path into out (appended). Returns 0, -E2BIG when the
 * file is larger, or a negative errno from open/read. */
int kube__read_file(const char *path, size_t limit, struct buf *out);
/** Loads kubeconfig files into cfg (a list of paths, borrowed). */
int kube__config_from_kubeconfig(struct kube_config *cfg, char **paths, size_t n,
                                 const struct kube_config_opts *opts, struct kube_err *reterr);
/** Fills cfg from the in-cluster environment. */
int kube__config_in_cluster(struct kube_config *cfg, const struct kube_config_opts *opts,
                            struct kube_err *reterr);
/** Runs the plugin once. Fills *ret (new strings) on success. */
int kube__exec_run(const struct kube_config *cfg, const struct kube_exec_cfg *x,
                   struct kube_exec_result *ret, struct kube_err *reterr);
void kube__exec_result_done(struct kube_exec_result *r);
void kube__exec_cfg_free(struct kube_exec_cfg *x);
