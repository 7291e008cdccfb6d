/* SPDX-License-Identifier: Apache-2.0 */
/* The TokenReview / SubjectAccessReview reviewer backed by the API server. */
#include <errno.h>

#include "common/log.h"
#include "kube/client.h"
#include "kube/err.h"
#include "kube/res.h"
#include "router/authz.h"

struct kube_reviewer_ctx {
    struct kube_client *client;
    const char *const *audiences;
};

/* One context per process is enough: the router has a single API client. */
static struct kube_reviewer_ctx g_ctx;

static int kube_review_token(void *ctx, const char *token, json_t **ret_user)
{
    struct kube_reviewer_ctx *k = ctx;
    json_t *spec = json_pack("{s:s}", "token", token);
    if (k->audiences && k->audiences[0]) {
        json_t *aud = json_array();
        for (const char *const *p = k->audiences; *p; p++)
            (void)json_array_append_new(aud, json_string(*p));
        (void)json_object_set_new(spec, "audiences", aud);
    }
    json_t *body = json_pack("{s:s,s:s,s:o}", "apiVersion", "authentication.k8s.io/v1", "kind",
                             "TokenReview", "spec", spec);
    json_t *resp = NULL;
    struct kube_err e;
    int r = kube_create(k->client, &KUBE_RES_TOKENREVIEWS, NULL, body, &resp, &e);
    json_decref(body);
    if (r < 0)
        return log_debug_errno(r, "TokenReview failed\tstatus=%ld", e.http_status);
    json_t *status = json_object_get(resp, "status");
    json_t *user = json_object_get(status, "user");
    bool ok = json_is_true(json_object_get(status, "authenticated")) && json_is_object(user);
    *ret_user = ok ? json_deep_copy(user) : NULL;
    json_decref(resp);
    return 0;
}

static json_t *sar_spec(const json_t *user, const struct authz_attrs *at)
{
    json_t *ra = json_pack("{s:s,s:s,s:s,s:s,s:s}", "namespace", at->ns, "verb", at->verb, "group",
                           KUBE_RES_SANDBOXES.group, "resource", KUBE_RES_SANDBOXES.plural, "name",
                           at->name);
    if (at->subresource)
        (void)json_object_set_new(ra, "subresource", json_string(at->subresource));
    json_t *spec = json_pack("{s:o}", "resourceAttributes", ra);
    static const char *const copy[] = {"uid", "groups", "extra"};
    const char *name = json_string_value(json_object_get(user, "username"));
    (void)json_object_set_new(spec, "user", json_string(name ? name : ""));
    for (size_t i = 0; i < sizeof(copy) / sizeof(copy[0]); i++) {
        json_t *v = json_object_get(user, copy[i]);
        if (v)
            (void)json_object_set_new(spec, copy[i], json_deep_copy(v));
    }
    return spec;
}

static int kube_review_access(void *ctx, const json_t *user, const struct authz_attrs *at,
                              bool *ret_allowed)
{
    struct kube_reviewer_ctx *k = ctx;
    json_t *body = json_pack("{s:s,s:s,s:o}", "apiVersion", "authorization.k8s.io/v1", "kind",
                             "SubjectAccessReview", "spec", sar_spec(user, at));
    json_t *resp = NULL;
    struct kube_err e;
    int r = kube_create(k->client, &KUBE_RES_SUBJECTACCESSREVIEWS, NULL, body, &resp, &e);
    json_decref(body);
    if (r < 0)
        return log_debug_errno(r, "SubjectAccessReview failed\tstatus=%ld", e.http_status);
    *ret_allowed = json_is_true(json_object_get(json_object_get(resp, "status"), "allowed"));
    json_decref(resp);
    return 0;
}

void authz_kube_reviewer(struct kube_client *c, const char *const *audiences,
                         struct authz_reviewer *ret)
{
    g_ctx.client = c;
    g_ctx.audiences = audiences;
    *ret = (struct authz_reviewer){
        .review_token = kube_review_token, .review_access = kube_review_access, .ctx = &g_ctx};
}
