/* SPDX-License-Identifier: Apache-2.0 */
/* Request router: method + exact path or longest path prefix. */
#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "common/xalloc.h"
#include "http/server_int.h"

struct http_router *http_router_new(void)
{
    return XNEW(struct http_router);
}

void http_router_free(struct http_router *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        xfree(r->routes[i].method);
        xfree(r->routes[i].path);
    }
    xfree(r->routes);
    xfree(r);
}

static bool is_token(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!http_is_tchar((unsigned char)*s))
            return false;
    return true;
}

int http_router_add(struct http_router *r, const char *method, const char *path, unsigned flags,
                    http_handler_fn *fn, void *ctx)
{
    if (!path || path[0] != '/' || !fn || (method && !is_token(method)))
        return -EINVAL;
    if (r->n == LIMIT_HTTP_ROUTES)
        return -E2BIG;
    r->routes = xreallocarray(r->routes, r->n + 1, sizeof(*r->routes));
    r->routes[r->n++] = (struct http_route){
        .method = xstrdup(method),
        .path = xstrdup(path),
        .path_len = strlen(path),
        .flags = flags,
        .fn = fn,
        .ctx = ctx,
    };
    return 0;
}

static bool path_matches(const struct http_route *rt, struct str path)
{
    struct str p = str_make(rt->path, rt->path_len);
    return (rt->flags & HTTP_ROUTE_PREFIX) ? str_has_prefix(path, p) : str_eq(path, p);
}

static bool method_matches(const struct http_route *rt, struct str method)
{
    if (!rt->method || str_eq_c(method, rt->method))
        return true;
    return str_eq_c(method, "HEAD") && strcmp(rt->method, "GET") == 0;
}

const struct http_route *http__router_match(const struct http_router *r, struct str method,
                                            struct str path, bool *ret_path_known)
{
    const struct http_route *best = NULL;
    size_t best_score = 0;
    bool known = false;
    for (size_t i = 0; r && i < r->n; i++) {
        const struct http_route *rt = &r->routes[i];
        if (!path_matches(rt, path))
            continue;
        known = true;
        if (!method_matches(rt, method))
            continue;
        size_t score = (rt->flags & HTTP_ROUTE_PREFIX) ? rt->path_len : SIZE_MAX;
        if (!best || score > best_score) {
            best = rt;
            best_score = score;
        }
    }
    *ret_path_known = known;
    return best;
}

void http__router_allow(const struct http_router *r, struct str path, struct buf *out)
{
    for (size_t i = 0; r && i < r->n; i++) {
        const struct http_route *rt = &r->routes[i];
        if (!path_matches(rt, path) || !rt->method)
            continue;
        (void)buf_printf(out, "%s%s", out->len ? ", " : "", rt->method);
        if (strcmp(rt->method, "GET") == 0)
            (void)buf_puts(out, ", HEAD");
    }
}
