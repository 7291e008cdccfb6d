/* SPDX-License-Identifier: Apache-2.0 */
/* Late-bound claim configuration: token Secrets of pool members and delivery of a
 * claim's env to sandboxd (see latebind_deliver.h). */
#include "controller/latebind_deliver.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "api/res.h"
#include "common/base64.h"
#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/map.h"
#include "common/xalloc.h"
#include "controller/cascade.h"
#include "controller/ext_int.h"
#include "controller/latebind_spec.h"
#include "controller/pool_expect.h"
#include "controller/sandbox_names.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "kube/sbd_client.h"

struct lb_state {
    bool allow_loopback;
    usec_t timeout;
    pthread_mutex_t lock;
    struct map *tokens; /* "namespace/sandbox" -> char * token */
};

static void token_free(void *v)
{
    char *t = v;
    if (t)
        explicit_bzero(t, strlen(t));
    xfree(t);
}

struct lb_state *lb_state_new(bool allow_loopback, usec_t timeout)
{
    struct lb_state *s = XNEW(struct lb_state);
    s->allow_loopback = allow_loopback;
    s->timeout = timeout ? timeout : LIMIT_LB_DELIVERY_TIMEOUT;
    pthread_mutex_init(&s->lock, NULL);
    s->tokens = map_new(token_free);
    return s;
}

void lb_state_free(struct lb_state *s)
{
    if (!s)
        return;
    map_free(s->tokens);
    pthread_mutex_destroy(&s->lock);
    xfree(s);
}

int lb__cache_put(struct lb_state *s, const char *ns, const char *name, const char *token)
{
    char key[LIMIT_KUBE_STORE_KEY + 1];
    int r = 0;
    if (ext__key(ns, name, key, sizeof(key)) < 0)
        return -E2BIG;
    pthread_mutex_lock(&s->lock);
    if (map_get(s->tokens, key))
        r = -EEXIST;
    else if (map_len(s->tokens) >= LIMIT_LB_TOKEN_CACHE)
        r = -ENOSPC;
    else
        map_put(s->tokens, key, xstrdup(token), NULL);
    pthread_mutex_unlock(&s->lock);
    return r;
}

/* Returns a new copy of the cached token (drop: remove it), or NULL. */
static char *cache_get(struct lb_state *s, const char *ns, const char *name, bool drop)
{
    char key[LIMIT_KUBE_STORE_KEY + 1], *t = NULL, *v;
    if (ext__key(ns, name, key, sizeof(key)) < 0)
        return NULL;
    pthread_mutex_lock(&s->lock);
    if (drop) {
        t = map_remove(s->tokens, key);
    } else if ((v = map_get(s->tokens, key))) {
        t = xstrdup(v);
    }
    pthread_mutex_unlock(&s->lock);
    return t;
}

void lb_forget(struct lb_state *s, const char *ns, const char *name)
{
    if (s)
        token_free(cache_get(s, ns, name, true));
}

size_t lb_cached(struct lb_state *s)
{
    pthread_mutex_lock(&s->lock);
    size_t n = map_len(s->tokens);
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* ---- pool members ------------------------------------------------------------------- */

static int name_fail(struct kube_err *reterr, int r, const char *what)
{
    kube_err_clear(reterr);
    reterr->code = r;
    (void)snprintf(reterr->message, sizeof(reterr->message), "%s: errno %d", what, -r);
    return r;
}

/* Creates the member named name from sb. Its token is cached first: the member's delete
 * event (lb_forget) can only come after its create, so no entry outlives its member (a
 * put after the create could follow the deletion and stay). A failed create drops it. */
static int create_named(struct ext_ctrl *x, const char *ns, const json_t *sb, const char *name,
                        const char *token, json_t **ret, struct kube_err *reterr)
{
    char secret[LB_NAME_MAX + sizeof(LB_SECRET_SUFFIX)];
    json_t *copy;
    int r = lb_secret_name(name, secret, sizeof(secret));
    if (r < 0)
        return name_fail(reterr, r, "no token Secret name");
    if (lb__cache_put(x->lb, ns, name, token) == -EEXIST)
        return name_fail(reterr, -EEXIST, "the name is a cached member's");
    copy = json_deep_copy(sb);
    lb_pool_inject(copy, name, secret);
    r = kube_create(x->d.client, &API_RES_SANDBOXES, ns, copy, ret, reterr);
    if (r < 0 && kube_err_outcome_unknown(reterr))
        r = ext__member_settle(x, ns, name, kube_obj_controller_uid(sb), r, reterr, ret);
    else if (r < 0 && kube_err_is_already_exists(reterr))
        r = -EEXIST;
    json_decref(copy);
    if (r < 0)
        lb_forget(x->lb, ns, name);
    return r;
}

/* Creates the Sandbox under a fresh random name (retrying a name collision). */
static int create_member(struct ext_ctrl *x, const char *ns, const json_t *sb, const char *token,
                         json_t **ret, struct kube_err *reterr)
{
    char name[LB_NAME_MAX + 1];
    int r = -EEXIST;
    for (int attempt = 0; attempt < 3 && r == -EEXIST; attempt++) {
        if ((r = lb_member_name(sb, name, sizeof(name))) < 0)
            return name_fail(reterr, r, "no member name");
        r = create_named(x, ns, sb, name, token, ret, reterr);
    }
    return r;
}

/* Whether cur, read again, is still the member sb as the pool made it: the same object,
 * controlled by the same pool (not adopted by a claim since). */
static bool still_pools(const json_t *cur, const json_t *sb)
{
    const char *cu = kube_obj_uid(cur), *ou = kube_obj_controller_uid(cur);
    return cu && ou && strcmp(cu, kube_obj_uid(sb) ?: "") == 0 &&
           strcmp(ou, kube_obj_controller_uid(sb) ?: "") == 0 &&
           sb_controller_is(cur, SB_EXT_GROUP, EXT_KIND_POOL);
}

/* Deletes member sb (as its create returned it), guarded by its resourceVersion: a claim
 * that adopted it meanwhile (a PATCH guarded by a later version) keeps it. On a conflict
 * the member is read again and deleted in that version while still the pool's (its status
 * moved on, say). Returns 0 when deleted (or gone), 1 when it is no longer the pool's,
 * or a negative errno with e filled. */
static int delete_guarded(struct ext_ctrl *x, const json_t *sb, struct kube_err *e)
{
    json_t *cur = json_incref((json_t *)sb), *next = NULL;
    int r = -EBUSY;
    for (int tries = 0; tries < 3 && r == -EBUSY; tries++) {
        r = kube_delete_obj(x->d.client, &API_RES_SANDBOXES, cur, true, NULL, e);
        if (r >= 0 || kube_err_is_not_found(e)) {
            r = 0;
            break;
        }
        if (!kube_err_is_conflict(e))
            break;
        if (kube_get(x->d.client, &API_RES_SANDBOXES, kube_obj_namespace(sb), kube_obj_name(sb),
                     &next, e) < 0) {
            r = kube_err_is_not_found(e) ? 0 : e->code ? e->code : -EIO;
            break;
        }
        json_decref(cur);
        cur = next;
        r = still_pools(cur, sb) ? -EBUSY : 1;
    }
    json_decref(cur);
    return r;
}

static void delete_member(struct ext_ctrl *x, const char *pool_key, const json_t *sb)
{
    struct kube_err e;
    int r;
    lb_forget(x->lb, kube_obj_namespace(sb), kube_obj_name(sb));
    pool_expect_deletion(x->expect, pool_key, kube_obj_uid(sb), clock_now());
    r = delete_guarded(x, sb, &e);
    if (r == 0) {
        cascade_sandbox_deleted(x->d.cascade, sb);
        return;
    }
    pool_expect_deletion_observed(x->expect, pool_key, kube_obj_uid(sb));
    if (r > 0)
        log_info("a pool member without config token was adopted before its deletion; "
                 "left to its claim\tsandbox=%s/%s",
                 kube_obj_namespace(sb), kube_obj_name(sb));
    else
        log_warn("deleting a pool member without config token failed\tsandbox=%s/%s "
                 "detail=\"%s\"",
                 kube_obj_namespace(sb), kube_obj_name(sb), e.message);
}

/* The token Secret obj holds (new, wipe before xfree) into *ret. Returns 0 or -EINVAL. */
static int token_of(const json_t *obj, char **ret)
{
    const json_t *v = json_object_get(json_object_get(obj, "data"), LB_TOKEN_KEY);
    struct buf b;
    int r = -EINVAL;
    buf_init(&b, 4096);
    if (json_is_string(v) && base64_decode(json_string_value(v), json_string_length(v), &b) >= 0 &&
        b.len) {
        *ret = xstrndup(buf_str(&b), b.len);
        r = 0;
    }
    if (b.data)
        explicit_bzero(b.data, b.len);
    buf_done(&b);
    return r;
}

/* The create of member sb's token Secret secret failed with r without a sure outcome (ce:
 * its error; e.g. a retry after a 5xx that met AlreadyExists: the first attempt may have
 * made it). The Secret is read back and kept when it is sb's with a token; the cache then
 * holds that token. Returns 0, or r when it is not there, not sb's or unreadable. */
static int secret_settle(struct ext_ctrl *x, const json_t *sb, const char *secret,
                         const char *token, int r, const struct kube_err *ce)
{
    const char *ns = kube_obj_namespace(sb);
    json_t *cur = NULL;
    char *t = NULL;
    struct kube_err e;
    if (kube_get(x->d.client, &KUBE_RES_SECRETS, ns, secret, &cur, &e) < 0) {
        log_warn("config token Secret create outcome unknown\tsandbox=%s/%s detail=\"%s\" "
                 "read=\"%s\"",
                 ns, kube_obj_name(sb), ce->message, e.message);
        return r;
    }
    if (lb_secret_is_for(cur, sb) && token_of(cur, &t) == 0) {
        log_info("config token Secret created despite an error\tsandbox=%s/%s detail=\"%s\"", ns,
                 kube_obj_name(sb), ce->message);
        if (strcmp(t, token) != 0) /* not this create's: deliveries read the Secret */
            lb_forget(x->lb, ns, kube_obj_name(sb));
        r = 0;
    } else {
        log_warn("config token Secret is not the member's or holds no token\tsandbox=%s/%s "
                 "secret=%s",
                 ns, kube_obj_name(sb), secret);
    }
    token_free(t);
    json_decref(cur);
    return r;
}

/* Creates member sb's config-token Secret holding token. Returns 0 or a negative errno. */
static int secret_create(struct ext_ctrl *x, const json_t *sb, const char *token)
{
    const char *ns = kube_obj_namespace(sb), *name = kube_obj_annotation(sb, EXT_ANN_TOKEN_SECRET);
    json_t *sec = lb_token_secret(sb, name, token);
    struct kube_err e;
    int r = kube_create(x->d.client, &KUBE_RES_SECRETS, ns, sec, NULL, &e);
    json_decref(sec);
    if (r < 0 && kube_err_outcome_unknown(&e))
        r = secret_settle(x, sb, name, token, r, &e);
    if (r < 0)
        log_warn("creating the config token Secret failed\tsandbox=%s/%s detail=\"%s\"", ns,
                 kube_obj_name(sb), e.message);
    return r;
}

int lb_pool_create(struct ext_ctrl *x, const char *pool_key, const json_t *sb,
                   struct kube_err *reterr)
{
    char token[2 * LB_TOKEN_BYTES + 1];
    json_t *out = NULL;
    int r = lb_token_new(token, sizeof(token));
    if (r < 0)
        return name_fail(reterr, r, "no random token");
    r = create_member(x, kube_obj_namespace(sb), sb, token, &out, reterr);
    if (r < 0)
        goto out;
    /* Without its Secret the pod never starts: replace the member now. */
    if (secret_create(x, out, token) < 0)
        delete_member(x, pool_key, out);
out:
    explicit_bzero(token, sizeof(token));
    json_decref(out);
    return r;
}

/* ---- delivery ----------------------------------------------------------------------- */

static int failf(char *msg, size_t size, int r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int failf(char *msg, size_t size, int r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, size, fmt, ap);
    va_end(ap);
    return r;
}

/* True when obj's controller ownerReference is uid. */
static bool controlled_by(const json_t *obj, const char *uid)
{
    size_t i;
    const json_t *o;
    json_array_foreach(kube_obj_path(obj, "metadata.ownerReferences"), i, o)
    {
        const char *u = json_string_value(json_object_get(o, "uid"));
        if (json_is_true(json_object_get(o, "controller")) && u && uid && strcmp(u, uid) == 0)
            return true;
    }
    return false;
}

/* Reads key of a Secret (base64 data) or ConfigMap (data, then binaryData) into out. */
static int read_key(struct ext_ctrl *x, const char *ns, bool secret, const char *name,
                    const char *key, struct buf *out, char *msg, size_t size)
{
    const char *kind = secret ? "Secret" : "ConfigMap";
    json_t *obj = NULL;
    const json_t *v;
    struct kube_err e;
    int r = kube_get(x->d.client, secret ? &KUBE_RES_SECRETS : &KUBE_RES_CONFIGMAPS, ns, name, &obj,
                     &e);
    if (r < 0)
        return failf(msg, size, r, "reading %s %s: %s", kind, name, e.message);
    v = json_object_get(json_object_get(obj, "data"), key);
    if (!secret && json_is_string(v)) {
        r = buf_append(out, json_string_value(v), json_string_length(v));
    } else {
        if (!secret && !v)
            v = json_object_get(json_object_get(obj, "binaryData"), key);
        r = json_is_string(v) ? base64_decode(json_string_value(v), json_string_length(v), out)
                              : failf(msg, size, -ENOENT, "%s %s has no key %s", kind, name, key);
    }
    if (r == -EINVAL || r == -E2BIG)
        (void)failf(msg, size, r, "%s %s key %s: unusable value", kind, name, key);
    json_decref(obj);
    return r;
}

/* Adds entry ev of the claim's env to env (resolving references). */
static int resolve_one(struct ext_ctrl *x, const char *ns, const json_t *ev, json_t *env, char *msg,
                       size_t size)
{
    const char *name = json_string_value(json_object_get(ev, "name")), *obj = NULL, *key = NULL;
    enum lb_source src = lb_env_source(ev, &obj, &key);
    struct buf v;
    int r = 0;
    if (src == LB_SRC_INVALID)
        return failf(msg, size, -EINVAL, "env %s: needs value or one key reference",
                     name ? name : "(unnamed)");
    if (src == LB_SRC_VALUE) {
        json_object_set(env, name, json_object_get(ev, "value"));
        return 0;
    }
    buf_init(&v, LIMIT_LB_BODY);
    r = read_key(x, ns, src == LB_SRC_SECRET, obj, key, &v, msg, size);
    if (r >= 0 && strlen(buf_str(&v)) != v.len)
        r = failf(msg, size, -EINVAL, "env %s: the value contains a NUL byte", name);
    if (r >= 0)
        json_object_set_new(env, name, json_stringn(buf_str(&v), v.len));
    if (v.data)
        explicit_bzero(v.data, v.len);
    buf_done(&v);
    return r;
}

/* Returns the delivery body {"env": {...}} in *ret (new). sandboxd's limits are checked
 * before anything is read, and as values arrive: a claim listing thousands of references
 * to a large key would otherwise make a pass read them all and hold them at once. */
static int resolve_env(struct ext_ctrl *x, const json_t *claim, json_t **ret, char *msg,
                       size_t size)
{
    const json_t *list = kube_obj_path(claim, "spec.env"), *ev;
    const char *name;
    json_t *env;
    size_t i, bytes = 0;
    int r = 0;
    if (json_array_size(list) > LIMIT_SBD_CONFIG_ENV_VARS)
        return failf(msg, size, -E2BIG, "env: %zu variables, sandboxd takes at most %d",
                     json_array_size(list), LIMIT_SBD_CONFIG_ENV_VARS);
    env = json_object();
    json_array_foreach(list, i, ev)
    {
        if ((r = resolve_one(x, kube_obj_namespace(claim), ev, env, msg, size)) < 0)
            break;
        name = json_string_value(json_object_get(ev, "name"));
        bytes += name ? strlen(name) + json_string_length(json_object_get(env, name)) : 0;
        if (bytes > LIMIT_SBD_CONFIG_ENV_BYTES) {
            r = failf(msg, size, -E2BIG,
                      "env: more than %u bytes of names and values, "
                      "sandboxd takes at most that",
                      LIMIT_SBD_CONFIG_ENV_BYTES);
            break;
        }
    }
    if (r < 0) {
        json_decref(env);
        return r;
    }
    *ret = json_pack("{s:o}", "env", env);
    return 0;
}

/* Returns the config token of sb (new, wipe before xfree) in *ret. */
static int sandbox_token(struct ext_ctrl *x, const json_t *sb, char **ret, char *msg, size_t size)
{
    const char *ns = kube_obj_namespace(sb),
               *secret = kube_obj_annotation(sb, EXT_ANN_TOKEN_SECRET);
    char *t = cache_get(x->lb, ns, kube_obj_name(sb), false);
    json_t *obj = NULL;
    struct kube_err e;
    int r;
    if (t) {
        *ret = t;
        return 0;
    }
    if (!secret)
        return failf(msg, size, -ENOENT,
                     "Sandbox %s has no config token (created before the template enabled "
                     "late binding)",
                     kube_obj_name(sb));
    if ((r = kube_get(x->d.client, &KUBE_RES_SECRETS, ns, secret, &obj, &e)) < 0)
        return failf(msg, size, r, "reading the config token: %s", e.message);
    if (!controlled_by(obj, kube_obj_uid(sb)))
        r = failf(msg, size, -EPERM, "Secret %s is not controlled by Sandbox %s", secret,
                  kube_obj_name(sb));
    else if (token_of(obj, ret) < 0)
        r = failf(msg, size, -EINVAL, "Secret %s holds no token", secret);
    json_decref(obj);
    return r;
}

static int dump_cb(const char *p, size_t n, void *ctx)
{
    return buf_append(ctx, p, n) < 0 ? -1 : 0;
}

/* PUTs body to sandboxd at ip:port with the bearer token: no proxy, plain HTTP. */
static int http_put(const struct lb_state *s, const char *ip, int port, const char *token,
                    const struct buf *body, char *msg, size_t size)
{
    char base[128], err[CURL_ERROR_SIZE] = "";
    struct sbd_client_opts o = {
        .base = base, .token = token, .no_proxy = true, .http_only = true, .timeout = s->timeout};
    struct sbd_client_req req = {
        .method = "PUT", .path = LB_DELIVERY_PATH, .body = buf_str(body), .len = body->len};
    struct sbd_client *c = NULL;
    long status = 0;
    int r = sbd_client_base_url("http", ip, (uint16_t)port, base, sizeof(base));
    if (r < 0)
        return failf(msg, size, r, "no delivery URL for pod IP %s", ip);
    r = sbd_client_new(&o, &c);
    if (r < 0)
        return failf(msg, size, r, "the config token is unusable");
    r = sbd_client_call(c, &req, NULL, &status, err, sizeof(err));
    sbd_client_free(c);
    if (r < 0)
        return failf(msg, size, -EHOSTUNREACH, "delivering to sandboxd: %s", err);
    if (status != 200)
        return failf(msg, size, -EPROTO, "delivering to sandboxd: HTTP %ld", status);
    return 0;
}

int lb_deliver(struct ext_ctrl *x, const json_t *claim, const json_t *sb, const json_t *tpl,
               char *msg, size_t size)
{
    const char *ip = json_string_value(json_array_get(kube_obj_path(sb, "status.podIPs"), 0));
    char *token = NULL;
    struct lb_policy pol;
    json_t *body = NULL;
    struct buf b;
    int r;
    lb_policy_of(tpl, &pol);
    buf_init(&b, LIMIT_LB_BODY + 64);
    if ((r = lb_target_check(ip, x->lb->allow_loopback)) < 0) {
        r = failf(msg, size, r, "Sandbox %s has no usable pod IP (%s)", kube_obj_name(sb),
                  ip ? ip : "none");
        goto out;
    }
    if ((r = sandbox_token(x, sb, &token, msg, size)) < 0 ||
        (r = resolve_env(x, claim, &body, msg, size)) < 0)
        goto out;
    if (json_dump_callback(body, dump_cb, &b, JSON_COMPACT) < 0) {
        r = failf(msg, size, -E2BIG, "the claim's env is larger than %u bytes", LIMIT_LB_BODY);
        goto out;
    }
    r = http_put(x->lb, ip, pol.port, token, &b, msg, size);
    if (r >= 0)
        token_free(cache_get(x->lb, kube_obj_namespace(sb), kube_obj_name(sb), true));
out:
    if (b.data)
        explicit_bzero(b.data, b.len);
    buf_done(&b);
    json_decref(body);
    token_free(token);
    return r;
}
