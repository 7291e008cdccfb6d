/* SPDX-License-Identifier: Apache-2.0 */
#include "tls/metrics_auth.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/map.h"
#include "common/xalloc.h"
#include "http/server.h"
#include "kube/client.h"
#include "kube/err.h"
#include "kube/res.h"

struct metrics_auth {
    struct kube_client *client;
    pthread_mutex_t lock;
    pthread_cond_t idle;
    struct map *cache; /* sha256 hex -> struct verdict */
    int inflight;
    bool stopping; /* metrics_auth_stop: no review starts any more */
};

struct verdict {
    int status;
    usec_t until;
};

struct job {
    struct metrics_auth *a;
    struct http_req *req;
    metrics_auth_done_fn *done;
    void *ctx;
    char *token;
    char key[2 * SHA256_DIGEST_LENGTH + 1];
    int status;
};

struct str metrics_auth_bearer(struct str v)
{
    v = str_trim(v);
    if (v.len <= 7 || strncasecmp(v.p, "Bearer ", 7) != 0)
        return str_make("", 0);
    return str_trim(str_make(v.p + 7, v.len - 7));
}

struct metrics_auth *metrics_auth_new(struct kube_client *client)
{
    struct metrics_auth *a = XNEW(struct metrics_auth);
    a->client = client;
    a->cache = map_new(xfree);
    (void)pthread_mutex_init(&a->lock, NULL);
    (void)pthread_cond_init(&a->idle, NULL);
    return a;
}

void metrics_auth_stop(struct metrics_auth *a)
{
    if (!a)
        return;
    (void)pthread_mutex_lock(&a->lock);
    a->stopping = true;
    while (a->inflight > 0)
        (void)pthread_cond_wait(&a->idle, &a->lock);
    (void)pthread_mutex_unlock(&a->lock);
}

void metrics_auth_free(struct metrics_auth *a)
{
    if (!a)
        return;
    metrics_auth_stop(a);
    map_free(a->cache);
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->idle);
    xfree(a);
}

static void token_key(struct str token, char out[2 * SHA256_DIGEST_LENGTH + 1])
{
    unsigned char d[SHA256_DIGEST_LENGTH];
    (void)SHA256((const unsigned char *)token.p, token.len, d);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
        (void)snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* ---- the reviews (on the job's thread) ------------------------------------------- */

/* TokenReview: returns the authenticated user object (new reference) or NULL. */
static json_t *review_token(struct kube_client *c, const char *token, int *ret_status)
{
    json_t *body = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "authentication.k8s.io/v1",
                             "kind", "TokenReview", "spec", "token", token);
    json_t *resp = NULL, *user = NULL;
    struct kube_err e;
    int r = kube_create(c, &KUBE_RES_TOKENREVIEWS, NULL, body, &resp, &e);
    json_decref(body);
    if (r < 0) {
        log_warn("metrics TokenReview failed\tstatus=%ld detail=\"%s\"", e.http_status, e.message);
        *ret_status = 500;
    } else if (!json_is_true(json_object_get(json_object_get(resp, "status"), "authenticated"))) {
        *ret_status = 401;
    } else {
        user = json_incref(json_object_get(json_object_get(resp, "status"), "user"));
    }
    json_decref(resp);
    return user;
}

/* SubjectAccessReview for get on /metrics: returns 200, 403 or 500. */
static int review_access(struct kube_client *c, const json_t *user)
{
    static const char *const copy[] = {"uid", "groups", "extra"};
    const char *name = json_string_value(json_object_get(user, "username"));
    json_t *spec = json_pack("{s:s, s:{s:s, s:s}}", "user", name ? name : "",
                             "nonResourceAttributes", "path", "/metrics", "verb", "get");
    json_t *body, *resp = NULL;
    struct kube_err e;
    int r, status;
    for (size_t i = 0; i < sizeof(copy) / sizeof(copy[0]); i++)
        if (json_object_get(user, copy[i]))
            (void)json_object_set_new(spec, copy[i],
                                      json_deep_copy(json_object_get(user, copy[i])));
    body = json_pack("{s:s, s:s, s:o}", "apiVersion", "authorization.k8s.io/v1", "kind",
                     "SubjectAccessReview", "spec", spec);
    r = kube_create(c, &KUBE_RES_SUBJECTACCESSREVIEWS, NULL, body, &resp, &e);
    json_decref(body);
    if (r < 0) {
        log_warn("metrics SubjectAccessReview failed\tstatus=%ld detail=\"%s\"", e.http_status,
                 e.message);
        status = 500;
    } else {
        status =
            json_is_true(json_object_get(json_object_get(resp, "status"), "allowed")) ? 200 : 403;
        if (status == 403)
            log_info("metrics scrape forbidden\tuser=\"%s\"", name ? name : "");
    }
    json_decref(resp);
    return status;
}

static void cache_put(struct metrics_auth *a, const char *key, int status)
{
    struct verdict *v;
    if (status == 500)
        return; /* not a verdict: try again next time */
    v = XNEW(struct verdict);
    v->status = status;
    v->until = clock_now() + LIMIT_METRICS_AUTH_TTL_S * USEC_PER_SEC;
    (void)pthread_mutex_lock(&a->lock);
    if (map_len(a->cache) >= LIMIT_METRICS_AUTH_CACHE)
        map_clear(a->cache);
    (void)map_put(a->cache, key, v, NULL);
    (void)pthread_mutex_unlock(&a->lock);
}

/* Loop thread: delivers the verdict. */
static void job_deliver(void *arg)
{
    struct job *j = arg;
    j->done(j->req, j->status, j->ctx);
    http_req_unref(j->req);
    xfree(j);
}

static void release_slot(struct metrics_auth *a)
{
    (void)pthread_mutex_lock(&a->lock);
    if (--a->inflight == 0)
        (void)pthread_cond_broadcast(&a->idle);
    (void)pthread_mutex_unlock(&a->lock);
}

static void *job_run(void *arg)
{
    struct job *j = arg;
    struct metrics_auth *a = j->a;
    json_t *user = review_token(a->client, j->token, &j->status);
    if (user)
        j->status = review_access(a->client, user);
    json_decref(user);
    cache_put(a, j->key, j->status);
    explicit_bzero(j->token, strlen(j->token));
    xfree(j->token);
    if (http_server_post(http_req_server(j->req), job_deliver, j) < 0)
        xfree(j); /* the server is gone, and the request with it */
    release_slot(a);
    return NULL;
}

/* Returns the cached verdict of key, or 0. */
static int cached(struct metrics_auth *a, const char *key)
{
    struct verdict *v;
    int status = 0;
    (void)pthread_mutex_lock(&a->lock);
    v = map_get(a->cache, key);
    if (v && v->until > clock_now())
        status = v->status;
    (void)pthread_mutex_unlock(&a->lock);
    return status;
}

static bool take_slot(struct metrics_auth *a)
{
    bool ok;
    (void)pthread_mutex_lock(&a->lock);
    ok = !a->stopping && a->inflight < LIMIT_METRICS_AUTH_INFLIGHT;
    a->inflight += ok;
    (void)pthread_mutex_unlock(&a->lock);
    return ok;
}

struct serve_ctx {
    metrics_auth_render_fn *render;
    void *ctx;
    size_t limit;
};

static void serve_verdict(struct http_req *req, int status, void *ctx)
{
    struct serve_ctx *s = ctx;
    struct buf b;
    if (status == 200) {
        buf_init(&b, s->limit);
        if (s->render(s->ctx, &b) < 0 && b.len == 0)
            (void)http_respond_error(req, 500, "rendering metrics failed");
        else
            (void)http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", buf_str(&b),
                               b.len);
        buf_done(&b);
    } else {
        if (status == 401)
            (void)http_resp_header_add(req, "WWW-Authenticate", "Bearer");
        (void)http_respond_error(req, status,
                                 status == 401   ? "a bearer token is required"
                                 : status == 403 ? "not allowed to get /metrics"
                                 : status == 503 ? "too many scrapes under review"
                                                 : "the review of the token failed");
    }
    xfree(s);
}

int metrics_auth_serve(struct metrics_auth *a, struct http_req *req, metrics_auth_render_fn *render,
                       void *ctx, size_t limit)
{
    struct serve_ctx *s = XNEW(struct serve_ctx);
    s->render = render;
    s->ctx = ctx;
    s->limit = limit;
    metrics_auth_check(a, req, serve_verdict, s);
    return 0;
}

void metrics_auth_check(struct metrics_auth *a, struct http_req *req, metrics_auth_done_fn *done,
                        void *ctx)
{
    struct str token = metrics_auth_bearer(http_req_header(req, "Authorization"));
    struct job *j;
    pthread_t th;
    pthread_attr_t attr;
    int status;
    if (!token.len) {
        done(req, 401, ctx);
        return;
    }
    j = XNEW(struct job);
    token_key(token, j->key);
    if ((status = cached(a, j->key)) != 0 || !take_slot(a)) {
        xfree(j);
        done(req, status ? status : 503, ctx);
        return;
    }
    j->a = a;
    j->req = http_req_ref(req);
    j->done = done;
    j->ctx = ctx;
    j->token = xstrndup(token.p, token.len);
    (void)pthread_attr_init(&attr);
    (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &attr, job_run, j) != 0) {
        http_req_unref(j->req);
        xfree(j->token);
        xfree(j);
        release_slot(a);
        done(req, 503, ctx);
    }
    (void)pthread_attr_destroy(&attr);
}
