/* SPDX-License-Identifier: Apache-2.0 */
/* kubeconfig files: parsing, kubectl-style merging of several files and selection of
 * the context, cluster and user. */
#include <errno.h>
#include <jansson.h>
#include <string.h>
#include <unistd.h>

#include "common/base64.h"
#include "common/limits.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "kube/config_int.h"
#include "kube/yaml.h"

#define SOURCE_KEY "$file" /* where a merged entry came from (not a kubeconfig key) */

static const char *const sections[] = {"clusters", "contexts", "users"};

static const char *get_str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s && s[0] != '\0' ? s : NULL;
}

static bool get_bool(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_true(v) || (json_is_string(v) && strcmp(json_string_value(v), "true") == 0);
}

/* Makes a relative path in o[key] absolute against dir, as kubectl does. */
static void resolve_path(json_t *o, const char *key, const char *dir, bool only_with_slash)
{
    const char *v = get_str(o, key);
    if (!v || v[0] == '/' || (only_with_slash && !strchr(v, '/')))
        return;
    char *abs = xasprintf("%s/%s", dir, v);
    (void)json_object_set_new(o, key, json_string(abs));
    xfree(abs);
}

static void resolve_entry(const char *section, json_t *item, const char *dir)
{
    if (strcmp(section, "clusters") == 0) {
        resolve_path(json_object_get(item, "cluster"), "certificate-authority", dir, false);
    } else if (strcmp(section, "users") == 0) {
        json_t *u = json_object_get(item, "user");
        resolve_path(u, "client-certificate", dir, false);
        resolve_path(u, "client-key", dir, false);
        resolve_path(u, "tokenFile", dir, false);
        resolve_path(json_object_get(u, "exec"), "command", dir, true);
    }
}

/* Adds the named entries of one file's section to merged (the first file wins). */
static int merge_section(json_t *merged, json_t *root, const char *section, const char *path,
                         const char *dir, struct kube_err *reterr)
{
    json_t *arr = json_object_get(root, section);
    if (!arr || json_is_null(arr))
        return 0;
    if (!json_is_array(arr)) {
        kube_err_set(reterr, -EINVAL, "kubeconfig %s: %s must be a list", path, section);
        return -EINVAL;
    }
    json_t *dst = json_object_get(merged, section);
    size_t i;
    json_t *item;
    json_array_foreach(arr, i, item)
    {
        const char *name = get_str(item, "name");
        if (!json_is_object(item) || !name) {
            kube_err_set(reterr, -EINVAL, "kubeconfig %s: %s[%zu] has no name", path, section, i);
            return -EINVAL;
        }
        if (json_object_get(dst, name))
            continue;
        resolve_entry(section, item, dir);
        (void)json_object_set_new(item, SOURCE_KEY, json_string(path));
        (void)json_object_set(dst, name, item);
    }
    return 0;
}

static int parse_file(const char *path, json_t **ret, struct kube_err *reterr)
{
    struct buf b;
    char err[256] = "";
    json_t *root = NULL;
    buf_init(&b, LIMIT_KUBECONFIG);
    int r = kube__read_file(path, LIMIT_KUBECONFIG, &b);
    if (r < 0) {
        kube_err_set(reterr, r, "kubeconfig %s: %s", path,
                     r == -E2BIG ? "file larger than the 4 MiB limit" : strerror(-r));
        goto out;
    }
    r = kube_yaml_load(buf_str(&b), b.len, &root, err, sizeof(err));
    if (r < 0) {
        kube_err_set(reterr, r, "kubeconfig %s: %s", path, err);
        goto out;
    }
    if (!json_is_object(root)) {
        r = -EINVAL;
        kube_err_set(reterr, r, "kubeconfig %s: not a mapping", path);
        json_decref(root);
        goto out;
    }
    *ret = root;
out:
    buf_done(&b);
    return r;
}

static int merge_file(json_t *merged, const char *path, struct kube_err *reterr)
{
    json_t *root = NULL;
    int r = parse_file(path, &root, reterr);
    if (r < 0)
        return r;
    const char *slash = strrchr(path, '/');
    char *dir;
    if (!slash)
        dir = xstrdup(".");
    else if (slash == path)
        dir = xstrdup("/");
    else
        dir = xstrndup(path, (size_t)(slash - path));
    for (size_t i = 0; i < ARRAY_SIZE(sections) && r >= 0; i++)
        r = merge_section(merged, root, sections[i], path, dir, reterr);
    const char *cur = get_str(root, "current-context");
    if (r >= 0 && cur && !get_str(merged, "current-context"))
        (void)json_object_set_new(merged, "current-context", json_string(cur));
    xfree(dir);
    json_decref(root);
    return r;
}

/* Checks that a referenced file is readable now, for a clear error at load time. */
static int check_file(const char *what, const char *file, const char *src, struct kube_err *reterr)
{
    if (access(file, R_OK) == 0)
        return 0;
    int r = -errno;
    kube_err_set(reterr, r, "kubeconfig %s: %s %s: %s", src, what, file, strerror(-r));
    return r;
}

/* Takes the file path or the base64 inline data of one piece of TLS material. */
static int tls_item(const json_t *o, const char *key, const char *src, char **ret_file,
                    struct buf *data, struct kube_err *reterr)
{
    char data_key[64];
    (void)snprintf(data_key, sizeof(data_key), "%s-data", key);
    const char *d = get_str(o, data_key);
    const char *f = get_str(o, key);
    if (d) {
        int r = base64_decode(d, strlen(d), data);
        if (r < 0)
            kube_err_set(reterr, r, "kubeconfig %s: %s: %s", src, data_key,
                         r == -E2BIG ? "too large" : "invalid base64");
        return r;
    }
    if (!f)
        return 0;
    int r = check_file(key, f, src, reterr);
    if (r >= 0)
        *ret_file = xstrdup(f);
    return r;
}

static int fill_cluster(struct kube_config *cfg, const json_t *entry, const char *name,
                        struct kube_err *reterr)
{
    const char *src = get_str(entry, SOURCE_KEY);
    const json_t *c = json_object_get(entry, "cluster");
    const char *server = get_str(c, "server");
    if (!server) {
        kube_err_set(reterr, -EINVAL, "kubeconfig %s: cluster \"%s\" has no server", src, name);
        return -EINVAL;
    }
    struct str s = str_c(server);
    while (s.len > 0 && s.p[s.len - 1] == '/')
        s.len--;
    cfg->server = str_dup(s);
    cfg->insecure = get_bool(c, "insecure-skip-tls-verify");
    cfg->server_name = xstrdup(get_str(c, "tls-server-name"));
    return tls_item(c, "certificate-authority", src, &cfg->ca_file, &cfg->ca, reterr);
}

static char **string_list(const json_t *arr, const char *first)
{
    size_t n = json_array_size(arr), k = 0;
    char **v = xcalloc(n + 2, sizeof(char *));
    if (first)
        v[k++] = xstrdup(first);
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        if (s)
            v[k++] = xstrdup(s);
    }
    return v;
}

static char **env_list(const json_t *arr)
{
    size_t n = json_array_size(arr), k = 0;
    char **v = xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        const char *name = get_str(e, "name");
        const char *value = json_string_value(json_object_get(e, "value"));
        if (name)
            v[k++] = xasprintf("%s=%s", name, value ? value : "");
    }
    return v;
}

static int parse_exec(struct kube_config *cfg, const json_t *x, const char *src,
                      struct kube_err *reterr)
{
    const char *api = get_str(x, "apiVersion");
    const char *cmd = get_str(x, "command");
    const char *mode = get_str(x, "interactiveMode");
    if (!cmd || !api ||
        (strcmp(api, "client.authentication.k8s.io/v1") != 0 &&
         strcmp(api, "client.authentication.k8s.io/v1beta1") != 0)) {
        kube_err_set(reterr, -EINVAL,
                     "kubeconfig %s: exec needs a command and apiVersion "
                     "client.authentication.k8s.io/v1 or v1beta1",
                     src);
        return -EINVAL;
    }
    if (mode && strcmp(mode, "Always") == 0) {
        kube_err_set(reterr, -EINVAL,
                     "kubeconfig %s: exec plugin %s needs an interactive terminal "
                     "(interactiveMode: Always), which is not available",
                     src, cmd);
        return -EINVAL;
    }
    struct kube_exec_cfg *e = XNEW(struct kube_exec_cfg);
    e->api_version = xstrdup(api);
    e->command = xstrdup(cmd);
    e->argv = string_list(json_object_get(x, "args"), cmd);
    e->env = env_list(json_object_get(x, "env"));
    e->provide_cluster_info = get_bool(x, "provideClusterInfo");
    e->source = xstrdup(src);
    cfg->exec = e;
    return 0;
}

static int fill_user(struct kube_config *cfg, const json_t *entry, struct kube_err *reterr)
{
    const char *src = get_str(entry, SOURCE_KEY);
    const json_t *u = json_object_get(entry, "user");
    if (json_object_get(u, "auth-provider") || get_str(u, "username")) {
        kube_err_set(reterr, -EOPNOTSUPP,
                     "kubeconfig %s: user \"%s\": auth-provider and basic auth are not "
                     "supported; use a token, a client certificate or an exec plugin",
                     src, get_str(entry, "name"));
        return -EOPNOTSUPP;
    }
    int r = tls_item(u, "client-certificate", src, &cfg->cert_file, &cfg->cert, reterr);
    if (r >= 0)
        r = tls_item(u, "client-key", src, &cfg->key_file, &cfg->key, reterr);
    if (r < 0)
        return r;
    cfg->token = xstrdup(get_str(u, "token"));
    const char *tf = get_str(u, "tokenFile");
    if (tf) {
        r = check_file("tokenFile", tf, src, reterr);
        if (r < 0)
            return r;
        cfg->token_file = xstrdup(tf);
    }
    const json_t *x = json_object_get(u, "exec");
    if (json_is_object(x))
        r = parse_exec(cfg, x, src, reterr);
    return r;
}

/* Looks up merged.<section>.<name>; reports which files were searched when absent. */
static const json_t *find(const json_t *merged, const char *section, const char *what,
                          const char *name, const char *files, struct kube_err *reterr)
{
    const json_t *e = json_object_get(json_object_get(merged, section), name);
    if (!e)
        kube_err_set(reterr, -ENOENT, "%s \"%s\" not found in kubeconfig %s", what, name, files);
    return e;
}

static int select_context(struct kube_config *cfg, const json_t *merged,
                          const struct kube_config_opts *opts, const char *files,
                          struct kube_err *reterr)
{
    const char *name = opts->context ? opts->context : get_str(merged, "current-context");
    if (!name) {
        kube_err_set(reterr, -ENOENT, "kubeconfig %s sets no current-context; choose a context",
                     files);
        return -ENOENT;
    }
    const json_t *ctx_entry = find(merged, "contexts", "context", name, files, reterr);
    if (!ctx_entry)
        return -ENOENT;
    const json_t *ctx = json_object_get(ctx_entry, "context");
    const char *cluster = get_str(ctx, "cluster");
    const char *user = get_str(ctx, "user");
    const json_t *c = find(merged, "clusters", "cluster", cluster ? cluster : "", files, reterr);
    if (!c)
        return -ENOENT;
    int r = fill_cluster(cfg, c, cluster, reterr);
    if (r >= 0 && user) {
        const json_t *u = find(merged, "users", "user", user, files, reterr);
        r = u ? fill_user(cfg, u, reterr) : -ENOENT;
    }
    if (r < 0)
        return r;
    cfg->context = xstrdup(name);
    const char *ns =
        opts->namespace_override ? opts->namespace_override : get_str(ctx, "namespace");
    cfg->namespace = xstrdup(ns ? ns : "default");
    return 0;
}

static void describe_files(char **paths, size_t n, struct buf *out)
{
    for (size_t i = 0; i < n; i++)
        if (buf_printf(out, "%s%s", i ? ":" : "", paths[i]) < 0)
            break;
}

int kube__config_from_kubeconfig(struct kube_config *cfg, char **paths, size_t n,
                                 const struct kube_config_opts *opts, struct kube_err *reterr)
{
    struct buf files;
    buf_init(&files, 1024);
    describe_files(paths, n, &files);
    json_t *merged = json_pack("{s{}s{}s{}}", "clusters", "contexts", "users");
    size_t loaded = 0;
    int r = 0;
    for (size_t i = 0; i < n && r >= 0; i++) {
        /* kubectl skips KUBECONFIG entries that do not exist */
        if (n > 1 && access(paths[i], F_OK) < 0 && errno == ENOENT)
            continue;
        r = merge_file(merged, paths[i], reterr);
        loaded++;
    }
    if (r >= 0 && loaded == 0) {
        r = -ENOENT;
        kube_err_set(reterr, r, "none of the kubeconfig files %s exists", buf_str(&files));
    }
    if (r >= 0)
        r = select_context(cfg, merged, opts, buf_str(&files), reterr);
    json_decref(merged);
    buf_done(&files);
    return r;
}
