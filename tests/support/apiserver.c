/* SPDX-License-Identifier: Apache-2.0 */
/* Integration-test helpers around the local kube-apiserver of hack/apiserver.sh. */
#include "support/apiserver.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/random.h>

#include <curl/curl.h>

#include "common/str.h"
#include "common/xalloc.h"
#include "kube/config.h"
#include "kube/obj.h"
#include "kube/res.h"
#include "kube/yaml.h"

#define IT_FIELD_MANAGER "as-integration"
#define IT_FILE_LIMIT    (4u * 1024 * 1024) /* a test data file */
#define IT_HTTP_LIMIT    (1u * 1024 * 1024) /* an etcd gateway response */

static char kubeconfig_path[PATH_MAX];
static char state_dir[PATH_MAX];
static pthread_once_t paths_once = PTHREAD_ONCE_INIT;

/* Formats a path into dst (PATH_MAX bytes); a path that does not fit becomes "". */
static void set_path(char *dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_path(char *dst, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(dst, PATH_MAX, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= PATH_MAX)
        dst[0] = '\0';
}

/* The repository root is two levels above $AS_TEST_DATA (<repo>/tests/data). */
static void default_kubeconfig(void)
{
    const char *data = getenv("AS_TEST_DATA");
    if (!data || !*data) {
        str_copy(kubeconfig_path, sizeof(kubeconfig_path), ".cache/apiserver/kubeconfig");
        return;
    }
    set_path(kubeconfig_path, "%s/../../.cache/apiserver/kubeconfig", data);
}

static void init_paths(void)
{
    const char *kc = getenv("AS_KUBECONFIG");
    const char *dir = getenv("AS_APISERVER_DIR");

    if (kc && *kc)
        str_copy(kubeconfig_path, sizeof(kubeconfig_path), kc);
    else if (dir && *dir)
        set_path(kubeconfig_path, "%s/kubeconfig", dir);
    else
        default_kubeconfig();

    if (dir && *dir) {
        str_copy(state_dir, sizeof(state_dir), dir);
        return;
    }
    str_copy(state_dir, sizeof(state_dir), kubeconfig_path);
    char *slash = strrchr(state_dir, '/');
    if (slash)
        *slash = '\0';
    else
        str_copy(state_dir, sizeof(state_dir), ".");
}

const char *it_kubeconfig(void)
{
    pthread_once(&paths_once, init_paths);
    return kubeconfig_path;
}

const char *it_state_dir(void)
{
    pthread_once(&paths_once, init_paths);
    return state_dir;
}

int it_data_path(const char *rel, char *out, size_t size)
{
    const char *data = getenv("AS_TEST_DATA");
    if (!data || !*data)
        return -ENOENT;
    int n = snprintf(out, size, "%s/%s", data, rel);
    return n < 0 || (size_t)n >= size ? -E2BIG : 0;
}

static int client_from(const char *kubeconfig, const struct kube_client_opts *opts,
                       struct kube_client **ret, struct kube_err *reterr)
{
    struct kube_config_opts co = {.kubeconfig = kubeconfig};
    struct kube_config *cfg = NULL;
    struct kube_client_opts defaults = {.max_retries = -1};
    int r = kube_config_load(&co, &cfg, reterr);
    if (r < 0)
        return r;
    return kube_client_new(cfg, opts ? opts : &defaults, ret);
}

int it_client_new(const struct kube_client_opts *opts, struct kube_client **ret,
                  struct kube_err *reterr)
{
    return client_from(it_kubeconfig(), opts, ret, reterr);
}

int it_client_new_user(const char *user, const struct kube_client_opts *opts,
                       struct kube_client **ret, struct kube_err *reterr)
{
    char path[PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/kubeconfig-%s", it_state_dir(), user);
    if (n < 0 || (size_t)n >= sizeof(path))
        return -E2BIG;
    return client_from(path, opts, ret, reterr);
}

static int read_file(const char *path, struct buf *out)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    char chunk[8192];
    size_t n;
    int r = 0;
    while (r == 0 && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        r = buf_append(out, chunk, n);
    if (r == 0 && ferror(f))
        r = -EIO;
    fclose(f);
    return r;
}

/* tokens.csv lines: token,user,uid,"group1,group2" */
static int find_token(struct str text, const char *user, char *out, size_t size)
{
    struct str line, rest = text;
    while (rest.len > 0) {
        if (!str_cut(rest, '\n', &line, &rest))
            rest = STR_NULL;
        struct str token, tail, name, uid;
        if (!str_cut(line, ',', &token, &tail) || !str_cut(tail, ',', &name, &uid))
            continue;
        if (!str_eq_c(name, user))
            continue;
        if (token.len + 1 > size)
            return -E2BIG;
        memcpy(out, token.p, token.len);
        out[token.len] = '\0';
        return 0;
    }
    return -ENOENT;
}

int it_user_token(const char *user, char *out, size_t size)
{
    char path[PATH_MAX];
    struct buf b;
    int n = snprintf(path, sizeof(path), "%s/tokens.csv", it_state_dir());
    if (n < 0 || (size_t)n >= sizeof(path))
        return -E2BIG;
    buf_init(&b, IT_FILE_LIMIT);
    int r = read_file(path, &b);
    if (r == 0)
        r = find_token(str_make(buf_str(&b), b.len), user, out, size);
    buf_done(&b);
    return r;
}

int it_ns_create(struct kube_client *c, const char *prefix, char *out, size_t size,
                 struct kube_err *reterr)
{
    uint32_t rnd = 0;
    char name[64];
    if (strlen(prefix) > 40)
        return -EINVAL;
    if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        rnd = (uint32_t)clock_now();
    int n = snprintf(name, sizeof(name), "%s-%08x", prefix, rnd);
    if (n < 0 || (size_t)n >= sizeof(name) || (size_t)n >= size)
        return -E2BIG;
    json_t *ns =
        json_pack("{s:s, s:s, s:{s:s, s:{s:s}}}", "apiVersion", "v1", "kind", "Namespace",
                  "metadata", "name", name, "labels", "agent-sandbox.test/integration", "true");
    int r = kube_create(c, &KUBE_RES_NAMESPACES, NULL, ns, NULL, reterr);
    json_decref(ns);
    if (r < 0)
        return r;
    memcpy(out, name, (size_t)n + 1);
    return 0;
}

int it_wait(it_cond_fn *fn, void *ctx, usec_t timeout)
{
    usec_t deadline = clock_now() + timeout;
    usec_t delay = 5 * USEC_PER_MSEC;
    for (;;) {
        if (fn(ctx))
            return 0;
        if (clock_now() >= deadline)
            return -ETIMEDOUT;
        clock_sleep(delay);
        if (delay < 100 * USEC_PER_MSEC)
            delay *= 2;
    }
}

struct gone_ctx {
    struct kube_client *c;
    const char *uid; /* NULL: any object of that name; else only this one */
    const struct kube_res *res;
    const char *ns, *name;
    int err; /* an error other than 404, which ends the wait */
};

static bool is_gone(void *ctx)
{
    struct gone_ctx *g = ctx;
    struct kube_err e;
    json_t *obj = NULL;
    int r = kube_get(g->c, g->res, g->ns, g->name, g->uid ? &obj : NULL, &e);
    bool other;
    if (r == -ENOENT)
        return true;
    if (r < 0) {
        g->err = r;
        return true;
    }
    other = g->uid && strcmp(kube_obj_uid(obj) ? kube_obj_uid(obj) : "", g->uid) != 0;
    json_decref(obj);
    return other;
}

int it_wait_gone(struct kube_client *c, const struct kube_res *res, const char *ns,
                 const char *name, usec_t timeout)
{
    struct gone_ctx g = {.c = c, .res = res, .ns = ns, .name = name};
    int r = it_wait(is_gone, &g, timeout);
    return r < 0 ? r : g.err;
}

int it_wait_gone_uid(struct kube_client *c, const struct kube_res *res, const char *ns,
                     const char *name, const char *uid, usec_t timeout)
{
    struct gone_ctx g = {.c = c, .uid = uid, .res = res, .ns = ns, .name = name};
    int r;
    if (!uid)
        return -EINVAL;
    r = it_wait(is_gone, &g, timeout);
    return r < 0 ? r : g.err;
}

/* Drops the "kubernetes" finalizer when no namespace controller does the work. */
static int ns_finalize(struct kube_client *c, const char *ns)
{
    json_t *obj = NULL;
    struct kube_req req;
    int r = kube_get(c, &KUBE_RES_NAMESPACES, NULL, ns, &obj, NULL);
    if (r < 0)
        return r == -ENOENT ? 0 : r;
    json_t *spec = json_object_get(obj, "spec");
    if (json_is_object(spec))
        json_object_set_new(spec, "finalizers", json_array());
    kube_req_init(&req, "PUT", &KUBE_RES_NAMESPACES);
    req.name = ns;
    req.subresource = "finalize";
    req.body = obj;
    r = kube_request(c, &req, NULL, NULL);
    json_decref(obj);
    return r == -ENOENT ? 0 : r;
}

int it_ns_delete(struct kube_client *c, const char *ns, usec_t timeout)
{
    int r;
    if (!c || !ns || !*ns) /* a group teardown after a setup that failed early */
        return 0;
    r = kube_delete(c, &KUBE_RES_NAMESPACES, NULL, ns, NULL);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    r = it_wait_gone(c, &KUBE_RES_NAMESPACES, NULL, ns, timeout / 2);
    if (r != -ETIMEDOUT)
        return r;
    r = ns_finalize(c, ns);
    if (r < 0)
        return r;
    return it_wait_gone(c, &KUBE_RES_NAMESPACES, NULL, ns, timeout / 2);
}

int it_load_file(const char *path, json_t **ret)
{
    struct buf b;
    json_t *v = NULL;
    char err[256];
    size_t len = strlen(path);
    int r;

    buf_init(&b, IT_FILE_LIMIT);
    r = read_file(path, &b);
    if (r < 0)
        goto out;
    if (len > 5 && strcmp(path + len - 5, ".json") == 0) {
        v = json_loadb(buf_str(&b), b.len, 0, NULL);
        r = v ? 0 : -EINVAL;
    } else {
        r = kube_yaml_load_typed(buf_str(&b), b.len, &v, err, sizeof(err));
    }
    if (r == 0)
        *ret = v;
out:
    buf_done(&b);
    return r;
}

/* The resource a CRD defines (its first version); strings borrowed from crd. */
static int crd_res(const json_t *crd, struct kube_res *ret)
{
    const json_t *ver = json_array_get(kube_obj_path(crd, "spec.versions"), 0);
    struct kube_res r = {
        .group = kube_obj_path_str(crd, "spec.group"),
        .version = json_string_value(json_object_get(ver, "name")),
        .kind = kube_obj_path_str(crd, "spec.names.kind"),
        .plural = kube_obj_path_str(crd, "spec.names.plural"),
    };
    const char *scope = kube_obj_path_str(crd, "spec.scope");
    if (!r.group || !r.version || !r.kind || !r.plural || !scope)
        return -EINVAL;
    r.namespaced = strcmp(scope, "Namespaced") == 0;
    *ret = r;
    return 0;
}

struct crd_ctx {
    struct kube_client *c;
    const char *name;
    struct kube_res res;
};

static bool crd_ready(void *ctx)
{
    struct crd_ctx *cc = ctx;
    json_t *obj = NULL;
    struct kube_req req;
    if (kube_get(cc->c, &KUBE_RES_CRDS, NULL, cc->name, &obj, NULL) < 0)
        return false;
    bool established = kube_obj_condition_true(obj, "Established");
    json_decref(obj);
    if (!established)
        return false;
    /* Established can precede the moment the new endpoint answers. */
    kube_req_init(&req, "GET", &cc->res);
    req.limit = 1;
    return kube_request(cc->c, &req, NULL, NULL) >= 0;
}

int it_crd_apply(struct kube_client *c, const char *path, usec_t timeout, struct kube_err *reterr)
{
    json_t *crd = NULL;
    struct crd_ctx cc = {.c = c};
    int r = it_load_file(path, &crd);
    if (r < 0) {
        kube_err_set(reterr, r, "cannot load %s", path);
        return r;
    }
    cc.name = kube_obj_name(crd);
    r = crd_res(crd, &cc.res);
    if (r < 0 || !cc.name) {
        kube_err_set(reterr, -EINVAL, "%s is not a CustomResourceDefinition", path);
        r = -EINVAL;
        goto out;
    }
    r = kube_apply(c, &KUBE_RES_CRDS, NULL, crd, IT_FIELD_MANAGER, true, NULL, reterr);
    if (r < 0)
        goto out;
    r = it_wait(crd_ready, &cc, timeout);
    if (r < 0)
        kube_err_set(reterr, r, "CRD %s not established", cc.name);
out:
    json_decref(crd);
    return r;
}

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
    return buf_append(ctx, data, size * n) == 0 ? size * n : 0;
}

/* Sends a GET (body NULL) or a JSON POST to url; appends the response to out. With
 * pki set, TLS uses the admin certificate of the state dir. Returns the HTTP status. */
static int http_do(const char *url, const char *body, bool pki, struct buf *out)
{
    char ca[PATH_MAX], cert[PATH_MAX], key[PATH_MAX];
    struct curl_slist *hdrs = NULL;
    long status = 0;
    CURL *h = curl_easy_init();
    if (!h)
        return -ENOMEM;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (pki) {
        set_path(ca, "%s/pki/ca.crt", it_state_dir());
        set_path(cert, "%s/pki/admin.crt", it_state_dir());
        set_path(key, "%s/pki/admin.key", it_state_dir());
        curl_easy_setopt(h, CURLOPT_CAINFO, ca);
        curl_easy_setopt(h, CURLOPT_SSLCERT, cert);
        curl_easy_setopt(h, CURLOPT_SSLKEY, key);
    }
    if (body) {
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    }
    CURLcode cr = curl_easy_perform(h);
    if (cr == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return cr == CURLE_OK ? (int)status : -EIO;
}

int it_http_get(const char *path, struct buf *out)
{
    struct kube_config_opts co = {.kubeconfig = it_kubeconfig()};
    struct kube_config *cfg = NULL;
    int r = kube_config_load(&co, &cfg, NULL);
    if (r < 0)
        return r;
    char *url = xasprintf("%s%s", kube_config_server(cfg), path);
    kube_config_free(cfg);
    r = http_do(url, NULL, true, out);
    xfree(url);
    return r;
}

static int etcd_endpoint(char *out, size_t size)
{
    const char *env = getenv("AS_ETCD_ENDPOINT");
    if (env && *env)
        return str_copy(out, size, env);
    char path[PATH_MAX];
    struct buf b;
    set_path(path, "%s/etcd-endpoint", it_state_dir());
    buf_init(&b, PATH_MAX);
    int r = read_file(path, &b);
    if (r == 0) {
        struct str s = str_trim(str_make(buf_str(&b), b.len));
        r = s.len > 0 && s.len < size ? 0 : -EINVAL;
        if (r == 0) {
            memcpy(out, s.p, s.len);
            out[s.len] = '\0';
        }
    }
    buf_done(&b);
    return r;
}

/* POSTs body to the etcd gateway at api ("/v3/kv/range") and parses the JSON reply. */
static int etcd_call(const char *api, const char *body, json_t **ret)
{
    char ep[512];
    struct buf b;
    int r = etcd_endpoint(ep, sizeof(ep));
    if (r < 0)
        return r;
    char *url = xasprintf("%s%s", ep, api);
    buf_init(&b, IT_HTTP_LIMIT);
    r = http_do(url, body, false, &b);
    xfree(url);
    if (r >= 0 && r != 200)
        r = -EPROTO;
    if (r >= 0) {
        json_t *v = json_loadb(buf_str(&b), b.len, 0, NULL);
        r = v ? 0 : -EPROTO;
        if (v)
            *ret = v;
    }
    buf_done(&b);
    return r;
}

int it_etcd_revision(int64_t *ret)
{
    json_t *v = NULL;
    int64_t rev;
    /* Any range request reports the store revision in its header ("AA==" is "\0"). */
    int r = etcd_call("/v3/kv/range", "{\"key\":\"AA==\"}", &v);
    if (r < 0)
        return r;
    const char *s = kube_obj_path_str(v, "header.revision");
    r = s ? cstr_to_i64(s, &rev) : -EPROTO;
    json_decref(v);
    if (r == 0)
        *ret = rev;
    return r;
}

int it_etcd_compact(int64_t revision)
{
    json_t *v = NULL;
    char body[128];
    int n = snprintf(body, sizeof(body), "{\"revision\":\"%lld\",\"physical\":true}",
                     (long long)revision);
    if (n < 0 || (size_t)n >= sizeof(body))
        return -E2BIG;
    int r = etcd_call("/v3/kv/compaction", body, &v);
    json_decref(v);
    return r;
}
