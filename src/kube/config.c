/* SPDX-License-Identifier: Apache-2.0 */
/* Client configuration: choosing the source, accessors and bearer tokens. */
#include "kube/config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "common/limits.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "kube/client_int.h"
#include "kube/config_int.h"

struct kube_config *kube__config_alloc(void)
{
    struct kube_config *cfg = XNEW(struct kube_config);
    buf_init(&cfg->ca, LIMIT_KUBE_CERT);
    buf_init(&cfg->cert, LIMIT_KUBE_CERT);
    buf_init(&cfg->key, LIMIT_KUBE_CERT);
    cfg->exec_timeout = LIMIT_KUBE_EXEC_TIMEOUT;
    pthread_mutex_init(&cfg->lock, NULL);
    return cfg;
}

void kube_config_free(struct kube_config *cfg)
{
    if (!cfg)
        return;
    xfree(cfg->server);
    xfree(cfg->namespace);
    xfree(cfg->context);
    xfree(cfg->ca_file);
    xfree(cfg->cert_file);
    xfree(cfg->key_file);
    buf_done(&cfg->ca);
    buf_done(&cfg->cert);
    buf_done(&cfg->key);
    xfree(cfg->server_name);
    xfree(cfg->token);
    xfree(cfg->token_file);
    kube__exec_cfg_free(cfg->exec);
    xfree(cfg->file_token);
    kube__exec_result_done(&cfg->exec_res);
    while (cfg->retired) {
        struct kube_retired *r = cfg->retired;
        cfg->retired = r->next;
        xfree(r->cert);
        xfree(r->key);
        xfree(r);
    }
    pthread_mutex_destroy(&cfg->lock);
    xfree(cfg);
}

int kube__read_file(const char *path, size_t limit, struct buf *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t start = out->len;
    int r = 0;
    for (;;) {
        char chunk[8192];
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r = -errno;
            break;
        }
        if (n == 0)
            break;
        if (out->len - start + (size_t)n > limit) {
            r = -E2BIG;
            break;
        }
        r = buf_append(out, chunk, (size_t)n);
        if (r < 0)
            break;
    }
    (void)close(fd);
    if (r < 0) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
    }
    return r;
}

/* Splits a ':'-separated list into new strings (empty entries dropped). */
static size_t split_paths(const char *list, char **paths, size_t max)
{
    size_t n = 0;
    struct str rest = str_c(list), head;
    while (rest.len > 0 && n < max) {
        (void)str_cut(rest, ':', &head, &rest);
        if (head.len > 0)
            paths[n++] = str_dup(head);
    }
    return n;
}

static size_t default_paths(const struct kube_config_opts *opts, char **paths, size_t max)
{
    if (opts->kubeconfig) {
        paths[0] = xstrdup(opts->kubeconfig);
        return 1;
    }
    const char *env = getenv("KUBECONFIG");
    if (env && env[0] != '\0')
        return split_paths(env, paths, max);
    const char *home = getenv("HOME");
    if (home && home[0] != '\0') {
        char *p = xasprintf("%s/.kube/config", home);
        if (access(p, F_OK) == 0) {
            paths[0] = p;
            return 1;
        }
        xfree(p);
    }
    return 0;
}

int kube_config_load(const struct kube_config_opts *opts, struct kube_config **ret,
                     struct kube_err *reterr)
{
    static const struct kube_config_opts none = {0};
    char *paths[LIMIT_KUBECONFIG_FILES] = {0};
    size_t n = 0;
    int r;
    if (!opts)
        opts = &none;
    struct kube_config *cfg = kube__config_alloc();
    if (opts->exec_timeout)
        cfg->exec_timeout = opts->exec_timeout;
    if (!opts->in_cluster)
        n = default_paths(opts, paths, ARRAY_SIZE(paths));
    if (n == 0)
        r = kube__config_in_cluster(cfg, opts, reterr);
    else
        r = kube__config_from_kubeconfig(cfg, paths, n, opts, reterr);
    for (size_t i = 0; i < n; i++)
        xfree(paths[i]);
    if (r < 0) {
        kube_config_free(cfg);
        return r;
    }
    *ret = cfg;
    return 0;
}

const char *kube_config_server(const struct kube_config *cfg)
{
    return cfg->server;
}

const char *kube_config_namespace(const struct kube_config *cfg)
{
    return cfg->namespace ? cfg->namespace : "default";
}

const char *kube_config_context(const struct kube_config *cfg)
{
    return cfg->context ? cfg->context : "";
}

void kube_config_tls(const struct kube_config *cfg, struct kube_tls *ret)
{
    struct kube_config *c = (struct kube_config *)cfg;
    memset(ret, 0, sizeof(*ret));
    ret->ca_file = cfg->ca_file;
    ret->ca_data = cfg->ca.len ? cfg->ca.data : NULL;
    ret->ca_len = cfg->ca.len;
    ret->cert_file = cfg->cert_file;
    ret->cert_data = cfg->cert.len ? cfg->cert.data : NULL;
    ret->cert_len = cfg->cert.len;
    ret->key_file = cfg->key_file;
    ret->key_data = cfg->key.len ? cfg->key.data : NULL;
    ret->key_len = cfg->key.len;
    ret->insecure = cfg->insecure;
    ret->server_name = cfg->server_name;
    pthread_mutex_lock(&c->lock);
    if (c->exec_res.cert && c->exec_res.key) {
        ret->cert_file = ret->key_file = NULL;
        ret->cert_data = c->exec_res.cert;
        ret->cert_len = strlen(c->exec_res.cert);
        ret->key_data = c->exec_res.key;
        ret->key_len = strlen(c->exec_res.key);
    }
    pthread_mutex_unlock(&c->lock);
}

/* Copies a token out; -E2BIG when it does not fit. */
static int put_token(const char *tok, char *out, size_t size)
{
    size_t n = tok ? strlen(tok) : 0;
    if (n >= size)
        return -E2BIG;
    if (n)
        memcpy(out, tok, n);
    out[n] = '\0';
    return (int)n;
}

/* Keeps an exec plugin's previous certificate alive: kube_config_tls lent it out, and a
 * borrower copies it at once (CURL_BLOB_COPY). The LIMIT_KUBE_RETIRED_CERTS latest are
 * kept, older ones freed: a long-running client with short-lived certificates grew the
 * list by one per plugin run, for good. */
static void retire_exec_cert(struct kube_config *cfg)
{
    if (!cfg->exec_res.cert && !cfg->exec_res.key)
        return;
    struct kube_retired *r = XNEW(struct kube_retired), **p = &cfg->retired;
    r->cert = cfg->exec_res.cert;
    r->key = cfg->exec_res.key;
    r->next = cfg->retired;
    cfg->retired = r;
    cfg->exec_res.cert = cfg->exec_res.key = NULL;
    for (int n = 0; *p && n < LIMIT_KUBE_RETIRED_CERTS; n++)
        p = &(*p)->next;
    while (*p) {
        struct kube_retired *old = *p;
        *p = old->next;
        xfree(old->cert);
        xfree(old->key);
        xfree(old);
    }
}

static int exec_token_locked(struct kube_config *cfg, struct kube_err *reterr)
{
    if (cfg->exec_valid && (cfg->exec_res.expiry == 0 || clock_wall_now() < cfg->exec_res.expiry))
        return 0;
    struct kube_exec_result res = {0};
    int r = kube__exec_run(cfg, cfg->exec, &res, reterr);
    if (r < 0)
        return r;
    bool cert_changed =
        (res.cert || cfg->exec_res.cert) &&
        (!res.cert || !cfg->exec_res.cert || strcmp(res.cert, cfg->exec_res.cert) != 0 ||
         strcmp(res.key ? res.key : "", cfg->exec_res.key ? cfg->exec_res.key : "") != 0);
    if (cert_changed) {
        retire_exec_cert(cfg);
    } else {
        XFREE(res.cert);
        XFREE(res.key);
        res.cert = cfg->exec_res.cert;
        res.key = cfg->exec_res.key;
        cfg->exec_res.cert = cfg->exec_res.key = NULL;
    }
    kube__exec_result_done(&cfg->exec_res);
    cfg->exec_res = res;
    cfg->exec_valid = true;
    cfg->token_gen++;
    return 0;
}

static bool file_changed(const struct kube_config *cfg, const struct stat *st)
{
    return st->st_dev != cfg->file_dev || st->st_ino != cfg->file_ino ||
           st->st_size != cfg->file_size || st->st_mtim.tv_sec != cfg->file_mtime.tv_sec ||
           st->st_mtim.tv_nsec != cfg->file_mtime.tv_nsec;
}

static int reread_token_file(struct kube_config *cfg, const struct stat *st,
                             struct kube_err *reterr)
{
    struct buf b;
    buf_init(&b, LIMIT_KUBE_TOKEN);
    int r = kube__read_file(cfg->token_file, LIMIT_KUBE_TOKEN, &b);
    if (r < 0) {
        kube_err_set(reterr, r, "reading token file %s: %s", cfg->token_file,
                     r == -E2BIG ? "larger than the token size limit" : strerror(-r));
        buf_done(&b);
        return r;
    }
    xfree(cfg->file_token);
    cfg->file_token = str_dup(str_trim(str_make(buf_str(&b), b.len)));
    buf_done(&b);
    cfg->file_dev = st->st_dev;
    cfg->file_ino = st->st_ino;
    cfg->file_size = st->st_size;
    cfg->file_mtime = st->st_mtim;
    cfg->file_checked = clock_now();
    cfg->file_valid = true;
    cfg->token_gen++;
    return 0;
}

static int file_token_locked(struct kube_config *cfg, struct kube_err *reterr)
{
    struct stat st;
    if (stat(cfg->token_file, &st) < 0) {
        int r = -errno;
        kube_err_set(reterr, r, "token file %s: %s", cfg->token_file, strerror(errno));
        return r;
    }
    if (cfg->file_valid && !file_changed(cfg, &st) &&
        clock_now() - cfg->file_checked < LIMIT_KUBE_TOKEN_RECHECK)
        return 0;
    return reread_token_file(cfg, &st, reterr);
}

int kube_config_token_gen(struct kube_config *cfg, char *out, size_t size, uint64_t *ret_gen,
                          struct kube_err *reterr)
{
    int r;
    pthread_mutex_lock(&cfg->lock);
    if (cfg->exec) {
        r = exec_token_locked(cfg, reterr);
        if (r >= 0)
            r = put_token(cfg->exec_res.token, out, size);
    } else if (cfg->token_file) {
        r = file_token_locked(cfg, reterr);
        if (r >= 0)
            r = put_token(cfg->file_token, out, size);
    } else {
        r = put_token(cfg->token, out, size);
    }
    if (ret_gen)
        *ret_gen = cfg->token_gen;
    pthread_mutex_unlock(&cfg->lock);
    if (r == -E2BIG)
        kube_err_set(reterr, r, "bearer token longer than %zu bytes", size);
    return r;
}

int kube_config_token(struct kube_config *cfg, char *out, size_t size, struct kube_err *reterr)
{
    return kube_config_token_gen(cfg, out, size, NULL, reterr);
}

void kube_config_invalidate_token(struct kube_config *cfg)
{
    pthread_mutex_lock(&cfg->lock);
    cfg->exec_valid = false;
    cfg->file_valid = false;
    pthread_mutex_unlock(&cfg->lock);
}

void kube_config_invalidate_token_gen(struct kube_config *cfg, uint64_t gen)
{
    pthread_mutex_lock(&cfg->lock);
    if (cfg->token_gen == gen) {
        cfg->exec_valid = false;
        cfg->file_valid = false;
    }
    pthread_mutex_unlock(&cfg->lock);
}
