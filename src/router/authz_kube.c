/* SPDX-License-Identifier: Apache-2.0 */
/* The TokenReview / SubjectAccessReview reviewer backed by the API server. */
#include <errno.h>
#include <string.h>

#include "api/res.h"
#include "common/log.h"
#include "kube/client.h"
#include "kube/err.h"
#include "kube/res.h"
#include "router/authz.h"

/* Is one of the strings in the JSON array got among want (NULL-terminated)? */
static bool audiences_meet(const json_t *got, const char *const *want)
{
    size_t i;
    const json_t *v;
    json_array_foreach(got, i, v)
    {
        const char *a = json_string_value(v);
        for (const char *const *p = want; a && *p; p++)
            if (strcmp(a, *p) == 0)
                return true;
    }
    return false;
}

json_t *authz_token_review_user(const json_t *status, const char *const *audiences)
{
    const json_t *user = json_object_get(status, "user");
    if (!json_is_true(json_object_get(status, "authenticated")) || !json_is_object(user))
        return NULL;
    if (audiences && audiences[0] &&
        !audiences_meet(json_object_get(status, "audiences"), audiences))
        return NULL; /* an authenticator that ignored the requested audiences */
    return json_deep_copy(user);
}

static int kube_review_token(void *ctx, const char *token, json_t **ret_user)
{
    const struct authz_kube *k = ctx;
    json_t *spec = json_pack("{s:s}", "token", token);
    if (!spec) { /* not UTF-8: no Kubernetes token, so not authenticated (401, no review) */
        *ret_user = NULL;
        return 0;
    }
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
    *ret_user = authz_token_review_user(json_object_get(resp, "status"), k->audiences);
    json_decref(resp);
    return 0;
}

static json_t *sar_spec(const json_t *user, const struct authz_attrs *at)
{
    json_t *ra =
        json_pack("{s:s,s:s,s:s,s:s,s:s}", "namespace", at->ns, "verb", at->verb, "group",
                  API_RES_SANDBOXES.group, "resource", API_RES_SANDBOXES.plural, "name", at->name);
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
    const struct authz_kube *k = ctx;
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

void authz_kube_reviewer(struct authz_kube *k, struct kube_client *c, const char *const *audiences,
                         struct authz_reviewer *ret)
{
    *k = (struct authz_kube){.client = c, .audiences = audiences};
    *ret = (struct authz_reviewer){
        .review_token = kube_review_token, .review_access = kube_review_access, .ctx = k};
}
