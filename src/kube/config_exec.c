/* SPDX-License-Identifier: Apache-2.0 */
/* Exec credential plugins (client.authentication.k8s.io v1 and v1beta1): run without a
 * shell, bounded output and time, ExecCredential parsing. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <unistd.h>

#include <sys/wait.h>

#include "common/base64.h"
#include "common/limits.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "kube/config_int.h"

extern char **environ;

void kube__exec_result_done(struct kube_exec_result *r)
{
    XFREE(r->token);
    XFREE(r->cert);
    XFREE(r->key);
    r->expiry = 0;
}

static void strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        xfree(v[i]);
    xfree(v);
}

void kube__exec_cfg_free(struct kube_exec_cfg *x)
{
    if (!x)
        return;
    xfree(x->api_version);
    xfree(x->command);
    strv_free(x->argv);
    strv_free(x->env);
    xfree(x->source);
    xfree(x);
}

/* The KUBERNETES_EXEC_INFO value: an ExecCredential with spec.interactive=false and,
 * when asked for, spec.cluster. */
static char *exec_info(const struct kube_config *cfg, const struct kube_exec_cfg *x)
{
    json_t *spec = json_pack("{s:b}", "interactive", 0);
    if (x->provide_cluster_info) {
        json_t *cl = json_pack("{s:s,s:b}", "server", cfg->server, "insecure-skip-tls-verify",
                               cfg->insecure);
        if (cfg->server_name)
            (void)json_object_set_new(cl, "tls-server-name", json_string(cfg->server_name));
        struct buf b;
        buf_init(&b, 2 * LIMIT_KUBE_CERT);
        if (cfg->ca.len && base64_encode(cfg->ca.data, cfg->ca.len, &b) >= 0)
            (void)json_object_set_new(cl, "certificate-authority-data", json_string(buf_str(&b)));
        buf_done(&b);
        (void)json_object_set_new(spec, "cluster", cl);
    }
    json_t *info = json_pack("{s:s,s:s,s:o}", "apiVersion", x->api_version, "kind",
                             "ExecCredential", "spec", spec);
    size_t n = json_dumpb(info, NULL, 0, JSON_COMPACT);
    char *ret = xmalloc(n + 1);
    ret[json_dumpb(info, ret, n, JSON_COMPACT)] = '\0';
    json_decref(info);
    return ret;
}

static bool overridden(const char *entry, char **env, const char *extra)
{
    size_t n = strcspn(entry, "=");
    for (size_t i = 0; env[i]; i++)
        if (strncmp(env[i], entry, n) == 0 && env[i][n] == '=')
            return true;
    return strncmp(extra, entry, n) == 0 && extra[n] == '=';
}

/* environ, minus what the plugin's env overrides, plus its env and the exec info. */
static char **build_env(char **plugin_env, const char *info)
{
    size_t n = 0, m = 0, k = 0;
    while (environ && environ[n])
        n++;
    while (plugin_env[m])
        m++;
    char **v = xcalloc(n + m + 2, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        if (!overridden(environ[i], plugin_env, info))
            v[k++] = xstrdup(environ[i]);
    for (size_t i = 0; i < m; i++)
        v[k++] = xstrdup(plugin_env[i]);
    v[k] = xstrdup(info);
    return v;
}

struct child {
    pid_t pid;
    int out; /* read end of stdout */
    int err; /* read end of stderr */
};

static int spawn_plugin(const struct kube_exec_cfg *x, char **envp, struct child *ret)
{
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(pe, O_CLOEXEC) < 0) {
        int r = -errno;
        (void)close(po[0]);
        (void)close(po[1]);
        return r;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    /* SIGPIPE back to its default: a caller that ignores it (kubectl-sandbox) must not
     * hand that on to the plugin */
    posix_spawnattr_t at;
    sigset_t def;
    posix_spawnattr_init(&at);
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    posix_spawnattr_setsigdefault(&at, &def);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int e = strchr(x->command, '/') ? posix_spawn(&pid, x->command, &fa, &at, x->argv, envp)
                                    : posix_spawnp(&pid, x->command, &fa, &at, x->argv, envp);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    (void)close(po[1]);
    (void)close(pe[1]);
    if (e != 0) {
        (void)close(po[0]);
        (void)close(pe[0]);
        return -e;
    }
    *ret = (struct child){.pid = pid, .out = po[0], .err = pe[0]};
    return 0;
}

/* Reads what is ready on fd; stderr past its limit is dropped, stdout past its limit
 * fails. Returns 1 on data, 0 on EOF, negative on error. */
static int drain(int fd, struct buf *b, bool drop_excess)
{
    char chunk[4096];
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 1 : -errno;
    if (n == 0)
        return 0;
    int r = buf_append(b, chunk, (size_t)n);
    if (r == -E2BIG && drop_excess)
        r = buf_append(b, chunk, b->limit - b->len);
    return r < 0 ? r : 1;
}

/* Collects both outputs until EOF on both or the deadline. */
static int collect(struct child *ch, struct buf *out, struct buf *err, usec_t deadline)
{
    struct pollfd p[2] = {{.fd = ch->out, .events = POLLIN}, {.fd = ch->err, .events = POLLIN}};
    while (p[0].fd >= 0 || p[1].fd >= 0) {
        usec_t now = clock_now();
        if (now >= deadline)
            return -ETIMEDOUT;
        int n = poll(p, 2, (int)((deadline - now + 999) / 1000));
        if (n < 0 && errno != EINTR)
            return -errno;
        for (int i = 0; i < 2 && n > 0; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            int r = drain(p[i].fd, i == 0 ? out : err, i == 1);
            if (r < 0)
                return r;
            if (r == 0)
                p[i].fd = -1;
        }
    }
    return 0;
}

/* Waits for the child, killing it first when it must not run on, and once deadline has
 * passed: a plugin that closed its output but runs on (a daemon it did not detach, a
 * sleep) would otherwise hold every request, which waits for the credential, for as long
 * as it runs. Returns its wait status, -ETIMEDOUT when it had to be killed at the
 * deadline, or a negative errno. */
static int reap(pid_t pid, bool kill_first, usec_t deadline)
{
    int status = 0;
    bool late = false;
    if (kill_first)
        (void)kill(pid, SIGKILL);
    for (;;) {
        pid_t w = waitpid(pid, &status, kill_first || late ? 0 : WNOHANG);
        if (w == pid)
            return late ? -ETIMEDOUT : status;
        if (w < 0 && errno != EINTR)
            return -errno;
        if (w == 0 && clock_now() >= deadline) {
            (void)kill(pid, SIGKILL);
            late = true;
        } else if (w == 0) {
            clock_sleep(10 * USEC_PER_MSEC);
        }
    }
}

static int bad_output(const struct kube_exec_cfg *x, const char *what, struct kube_err *reterr)
{
    kube_err_set(reterr, -EPROTO, "exec plugin %s (kubeconfig %s): %s", x->command, x->source,
                 what);
    return -EPROTO;
}

static int parse_credential(const struct kube_exec_cfg *x, const struct buf *out,
                            struct kube_exec_result *ret, struct kube_err *reterr)
{
    json_t *j = json_loadb(buf_str(out), out->len, 0, NULL);
    const char *kind = json_string_value(json_object_get(j, "kind"));
    const char *api = json_string_value(json_object_get(j, "apiVersion"));
    const json_t *st = json_object_get(j, "status");
    const char *token = json_string_value(json_object_get(st, "token"));
    const char *cert = json_string_value(json_object_get(st, "clientCertificateData"));
    const char *key = json_string_value(json_object_get(st, "clientKeyData"));
    const char *exp = json_string_value(json_object_get(st, "expirationTimestamp"));
    usec_t expiry = 0;
    int r = 0;
    if (!json_is_object(j) || !kind || strcmp(kind, "ExecCredential") != 0)
        r = bad_output(x, "output is not an ExecCredential JSON object", reterr);
    else if (!api || strcmp(api, x->api_version) != 0)
        r = bad_output(x, "ExecCredential apiVersion differs from the one requested", reterr);
    else if (!(token && token[0]) && !(cert && key))
        r = bad_output(x, "ExecCredential status has neither a token nor a client certificate",
                       reterr);
    else if ((cert != NULL) != (key != NULL))
        r = bad_output(x, "clientCertificateData and clientKeyData must come together", reterr);
    else if (exp && clock_parse_rfc3339(exp, &expiry) < 0)
        r = bad_output(x, "invalid status.expirationTimestamp", reterr);
    if (r >= 0) {
        *ret = (struct kube_exec_result){
            .token = token && token[0] ? xstrdup(token) : NULL,
            .cert = xstrdup(cert),
            .key = xstrdup(key),
            .expiry = expiry,
        };
    }
    json_decref(j);
    return r;
}

static int run_failed(const struct kube_exec_cfg *x, usec_t timeout, int r, int status,
                      const struct buf *err, struct kube_err *reterr)
{
    struct str e = str_trim(str_make(buf_str(err), err->len));
    if (r == -ETIMEDOUT)
        kube_err_set(reterr, r, "exec plugin %s (kubeconfig %s) did not finish within %.1f s",
                     x->command, x->source, (double)timeout / USEC_PER_SEC);
    else if (r == -E2BIG)
        kube_err_set(reterr, r, "exec plugin %s (kubeconfig %s) wrote more than %u bytes",
                     x->command, x->source, LIMIT_KUBE_EXEC_OUTPUT);
    else if (r < 0)
        kube_err_set(reterr, r, "exec plugin %s (kubeconfig %s): %s", x->command, x->source,
                     strerror(-r));
    else if (WIFEXITED(status))
        kube_err_set(reterr, r = -EPERM,
                     "exec plugin %s (kubeconfig %s) exited with status %d: %.*s", x->command,
                     x->source, WEXITSTATUS(status), (int)e.len, e.p);
    else
        kube_err_set(reterr, r = -EPERM, "exec plugin %s (kubeconfig %s) killed by signal %d: %.*s",
                     x->command, x->source, WTERMSIG(status), (int)e.len, e.p);
    return r;
}

int kube__exec_run(const struct kube_config *cfg, const struct kube_exec_cfg *x,
                   struct kube_exec_result *ret, struct kube_err *reterr)
{
    struct buf out, err;
    struct child ch = {.pid = -1, .out = -1, .err = -1};
    buf_init(&out, LIMIT_KUBE_EXEC_OUTPUT);
    buf_init(&err, LIMIT_KUBE_EXEC_STDERR);
    char *info = exec_info(cfg, x);
    char *info_env = xasprintf("KUBERNETES_EXEC_INFO=%s", info);
    char **envp = build_env(x->env, info_env);
    int status = 0;
    int r = spawn_plugin(x, envp, &ch);
    if (r >= 0) {
        usec_t deadline = clock_now() + cfg->exec_timeout;
        r = collect(&ch, &out, &err, deadline);
        (void)close(ch.out);
        (void)close(ch.err);
        status = reap(ch.pid, r < 0, deadline);
    }
    if (r < 0 || status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        r = run_failed(x, cfg->exec_timeout, r < 0 ? r : (status < 0 ? status : 0), status, &err,
                       reterr);
    else
        r = parse_credential(x, &out, ret, reterr);
    strv_free(envp);
    xfree(info_env);
    xfree(info);
    buf_done(&out);
    buf_done(&err);
    return r;
}
