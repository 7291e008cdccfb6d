/* SPDX-License-Identifier: Apache-2.0 */
/* Late-bound claim configuration (see config_env.h): the in-memory set and its
 * PUT/GET /v1/config/env endpoints. */
#include "sandboxd/config_env.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "common/xalloc.h"
#include "http/server.h"
#include "sandboxd/proc.h"
#include "sandboxd/sbd_int.h"
#include "sandboxd/util.h"

struct sbd_config_env {
    char *token; /* NULL: disabled */
    char **vec;  /* NULL-terminated "NAME=value" entries (owned) */
    size_t n;
};

static char *const empty_vec[] = {NULL};

struct sbd_config_env *sbd_config_env_new(const char *token)
{
    struct sbd_config_env *ce = XNEW(struct sbd_config_env);
    ce->token = token && *token ? xstrdup(token) : NULL;
    return ce;
}

/* Wipes and frees a vector of secrets. */
static void vec_free(char **vec)
{
    for (char **e = vec; e && *e; e++) {
        explicit_bzero(*e, strlen(*e));
        xfree(*e);
    }
    xfree(vec);
}

void sbd_config_env_free(struct sbd_config_env *ce)
{
    if (!ce)
        return;
    vec_free(ce->vec);
    if (ce->token) {
        explicit_bzero(ce->token, strlen(ce->token));
        xfree(ce->token);
    }
    xfree(ce);
}

bool sbd_config_env_enabled(const struct sbd_config_env *ce)
{
    return ce && ce->token;
}

bool sbd_config_env_authorized(const struct sbd_config_env *ce, struct str h)
{
    if (!sbd_config_env_enabled(ce) || !h.p || h.len < 7 ||
        !str_eq_nocase(str_make(h.p, 7), STR_LIT("Bearer ")))
        return false;
    return sbd_secure_eq(str_trim(str_make(h.p + 7, h.len - 7)), str_c(ce->token));
}

bool sbd_config_env_name_ok(const char *name, size_t len)
{
    if (len == 0 || len > LIMIT_SBD_CONFIG_ENV_NAME || (name[0] >= '0' && name[0] <= '9'))
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9')))
            return false;
    }
    return true;
}

/* Builds the vector of obj ({"NAME": "value"}) into *ret (new). */
static int build_vec(const json_t *obj, char ***ret, const char **msg)
{
    size_t i = 0;
    const char *k;
    json_t *v;
    char **vec = xcalloc(json_object_size(obj) + 1, sizeof(char *));
    json_object_foreach((json_t *)obj, k, v)
    {
        if (!sbd_config_env_name_ok(k, strlen(k))) {
            *msg = "env names must match [A-Za-z_][A-Za-z0-9_]*";
            goto fail;
        }
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
            *msg = "env values must be strings without NUL";
            goto fail;
        }
        vec[i++] = xasprintf("%s=%s", k, json_string_value(v));
    }
    *ret = vec;
    return 0;
fail:
    vec_free(vec);
    return -EINVAL;
}

int sbd_config_env_set_json(struct sbd_config_env *ce, struct str body, const char **ret_msg)
{
    json_t *j, *env;
    char **vec = NULL;
    int r = -EINVAL;
    const char *msg = "body must be {\"env\": {\"NAME\": \"value\"}}";
    if (body.len > LIMIT_SBD_CONFIG_ENV_BYTES) {
        *ret_msg = "configuration too large";
        return -E2BIG;
    }
    j = json_loadb(body.p ? body.p : "", body.len, JSON_REJECT_DUPLICATES, NULL);
    env = json_object_get(j, "env");
    if (json_is_object(env) && json_object_size(env) > LIMIT_SBD_CONFIG_ENV_VARS) {
        msg = "too many variables";
        r = -E2BIG;
    } else if (json_is_object(env)) {
        r = build_vec(env, &vec, &msg);
    }
    json_decref(j);
    if (r < 0) {
        *ret_msg = msg;
        return r;
    }
    vec_free(ce->vec);
    ce->vec = vec;
    ce->n = 0;
    for (char **e = vec; *e; e++)
        ce->n++;
    return 0;
}

size_t sbd_config_env_count(const struct sbd_config_env *ce)
{
    return ce ? ce->n : 0;
}

char *const *sbd_config_env_vector(const struct sbd_config_env *ce)
{
    return ce && ce->vec ? ce->vec : empty_vec;
}

/* ---- endpoints --------------------------------------------------------------------- */

/* Answers the request itself and returns false unless it may touch the set. */
static bool check_auth(struct sbd *d, struct http_req *req)
{
    if (!sbd_config_env_enabled(d->config_env)) {
        (void)sbd_respond_error(req, 404, SBD_NOT_FOUND,
                                "late-bound configuration is not enabled (no config token)");
        return false;
    }
    if (!sbd_config_env_authorized(d->config_env, http_req_header(req, "Authorization"))) {
        (void)http_resp_header_add(req, "WWW-Authenticate", "Bearer");
        (void)sbd_respond_error(req, 401, SBD_UNAUTHENTICATED, "missing or invalid config token");
        return false;
    }
    return true;
}

static int names_response(struct http_req *req, const struct sbd_config_env *ce)
{
    json_t *names = json_array();
    for (char *const *e = sbd_config_env_vector(ce); *e; e++) {
        const char *eq = strchr(*e, '=');
        (void)json_array_append_new(names, json_stringn(*e, eq ? (size_t)(eq - *e) : 0));
    }
    json_t *j =
        json_pack("{s:I, s:o}", "count", (json_int_t)sbd_config_env_count(ce), "names", names);
    int r = http_respond_json(req, 200, j);
    json_decref(j);
    return r;
}

static int put_env(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    const char *msg = NULL;
    if (!check_auth(d, req))
        return 0;
    int r = sbd_config_env_set_json(d->config_env, http_req_body(req), &msg);
    if (r < 0)
        return sbd_respond_error(req, r == -E2BIG ? 413 : 400,
                                 r == -E2BIG ? SBD_RESOURCE_EXHAUSTED : SBD_INVALID_ARGUMENT, msg);
    sbd_procs_set_base_env(d->procs, sbd_config_env_vector(d->config_env));
    return names_response(req, d->config_env);
}

static int get_env(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    if (!check_auth(d, req))
        return 0;
    return names_response(req, d->config_env);
}

/* sbd_body_ok_fn: the body is read only for a holder of the config token. */
static bool env_body_ok(struct http_req *req, struct sbd *d)
{
    return sbd_config_env_enabled(d->config_env) &&
           sbd_config_env_authorized(d->config_env, http_req_header(req, "Authorization"));
}

int sbd__config_env_register(struct sbd *d)
{
    /* Public as far as the API token goes: the config token is checked here instead. */
    int r = sbd__route_public_body(d, d->router, "PUT", "/v1/config/env", 0, put_env, env_body_ok);
    if (r == 0)
        r = sbd__route(d, d->router, "GET", "/v1/config/env", 0, get_env, true);
    return r;
}
