/* SPDX-License-Identifier: Apache-2.0 */
/* Requests: URL and query building, bodies, the convenience verbs and paged LIST. */
#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "common/pct.h"
#include "common/xalloc.h"
#include "kube/client.h"
#include "kube/client_int.h"
#include "kube/obj.h"

void kube_req_init(struct kube_req *r, const char *method, const struct kube_res *res)
{
    memset(r, 0, sizeof(*r));
    r->method = method;
    r->res = res;
    r->grace_period_seconds = -1;
}

/* Appends "&key=escaped(value)" (or "?" first). */
static int add_query(struct buf *out, bool *first, const char *key, const char *value)
{
    int r = buf_printf(out, "%c%s=", *first ? '?' : '&', key);
    *first = false;
    if (r >= 0)
        r = pct_encode(out, value, NULL);
    return r;
}

static int add_query_long(struct buf *out, bool *first, const char *key, long v)
{
    char num[32];
    (void)snprintf(num, sizeof(num), "%ld", v);
    return add_query(out, first, key, num);
}

static bool is_method(const struct kube_req *r, const char *m)
{
    return r->method && strcmp(r->method, m) == 0;
}

static int build_query(const struct kube_req *r, struct buf *out)
{
    bool first = true;
    int ret = 0;
    struct {
        const char *key;
        const char *value;
    } strs[] = {
        {"labelSelector", r->label_selector},
        {"fieldSelector", r->field_selector},
        {"continue", r->continue_token},
        {"resourceVersion", r->resource_version},
        {"resourceVersionMatch", r->resource_version_match},
        {"watch", r->watch ? "true" : NULL},
        {"allowWatchBookmarks", r->allow_watch_bookmarks ? "true" : NULL},
        {"dryRun", r->dry_run ? "All" : NULL},
        {"fieldManager", r->field_manager},
        {"force",
         r->force && r->patch_type == KUBE_PATCH_APPLY && is_method(r, "PATCH") ? "true" : NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(strs) && ret >= 0; i++)
        if (strs[i].value)
            ret = add_query(out, &first, strs[i].key, strs[i].value);
    if (ret >= 0 && r->limit > 0)
        ret = add_query_long(out, &first, "limit", r->limit);
    if (ret >= 0 && r->timeout_seconds > 0)
        ret = add_query_long(out, &first, "timeoutSeconds", r->timeout_seconds);
    return ret;
}

int kube_req_url(const struct kube_client *c, const struct kube_req *r, struct buf *out)
{
    if (r->raw_path ? r->raw_path[0] != '/'
                    : (!r->res || (r->res->namespaced && r->name && !r->ns)))
        return -EINVAL;
    size_t start = out->len;
    int ret = buf_puts(out, c->base_url);
    if (ret >= 0)
        ret = r->raw_path ? buf_puts(out, r->raw_path)
                          : kube_res_path(r->res, r->ns, r->name, r->subresource, out);
    if (ret >= 0)
        ret = build_query(r, out);
    if (ret < 0) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
    }
    return ret;
}

static int dump_cb(const char *p, size_t n, void *data)
{
    return buf_append(data, p, n) < 0 ? -1 : 0;
}

static json_t *delete_options(const struct kube_req *r)
{
    if (!r->propagation_policy && !r->precondition_uid && !r->precondition_rv &&
        r->grace_period_seconds < 0)
        return NULL;
    json_t *o = json_pack("{s:s,s:s}", "apiVersion", "v1", "kind", "DeleteOptions");
    if (r->propagation_policy)
        (void)json_object_set_new(o, "propagationPolicy", json_string(r->propagation_policy));
    if (r->grace_period_seconds >= 0)
        (void)json_object_set_new(o, "gracePeriodSeconds", json_integer(r->grace_period_seconds));
    if (r->precondition_uid || r->precondition_rv) {
        json_t *pre = json_object();
        if (r->precondition_uid)
            (void)json_object_set_new(pre, "uid", json_string(r->precondition_uid));
        if (r->precondition_rv)
            (void)json_object_set_new(pre, "resourceVersion", json_string(r->precondition_rv));
        (void)json_object_set_new(o, "preconditions", pre);
    }
    return o;
}

static const char *content_type(const struct kube_req *r)
{
    if (!is_method(r, "PATCH"))
        return "application/json";
    switch (r->patch_type) {
    case KUBE_PATCH_JSON:
        return "application/json-patch+json";
    case KUBE_PATCH_STRATEGIC:
        return "application/strategic-merge-patch+json";
    case KUBE_PATCH_APPLY:
        return "application/apply-patch+yaml";
    case KUBE_PATCH_MERGE:
    default:
        return "application/merge-patch+json";
    }
}

static int build_body(const struct kube_req *r, struct kube__prep *p, struct kube_err *reterr)
{
    json_t *owned = NULL;
    const json_t *body = r->body;
    if (!body && is_method(r, "DELETE"))
        body = owned = delete_options(r);
    if (!body)
        return 0;
    int ret = json_dump_callback(body, dump_cb, &p->body, JSON_COMPACT) == 0 ? 0 : -E2BIG;
    json_decref(owned);
    if (ret < 0) {
        kube_err_set(reterr, ret, "request body larger than %u bytes", LIMIT_KUBE_REQUEST_BODY);
        return ret;
    }
    p->has_body = true;
    p->content_type = content_type(r);
    return 0;
}

static bool known_method(const char *m)
{
    static const char *const methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE"};
    for (size_t i = 0; m && i < ARRAY_SIZE(methods); i++)
        if (strcmp(m, methods[i]) == 0)
            return true;
    return false;
}

int kube__prepare(struct kube_client *c, const struct kube_req *r, struct kube__prep *p,
                  struct kube_err *reterr)
{
    memset(p, 0, sizeof(*p));
    buf_init(&p->url, LIMIT_KUBE_URL);
    buf_init(&p->body, LIMIT_KUBE_REQUEST_BODY);
    p->method = r->method;
    p->res = r->raw_path ? NULL : r->res;
    p->subresource = r->raw_path ? NULL : r->subresource;
    if (!known_method(r->method)) {
        kube_err_set(reterr, -EINVAL, "unknown HTTP method %s", r->method ? r->method : "(null)");
        return -EINVAL;
    }
    p->idempotent = !is_method(r, "POST") && !is_method(r, "PATCH");
    /* an empty name with generateName is a generated create too (the API server's rule) */
    const char *name = kube_obj_name(r->body);
    p->generated = is_method(r, "POST") && (!name || !*name) &&
                   json_is_string(kube_obj_path(r->body, "metadata.generateName"));
    int ret = kube_req_url(c, r, &p->url);
    if (ret < 0) {
        kube_err_set(reterr, ret, "cannot build the URL for %s %s/%s: %s", r->method,
                     r->res ? r->res->plural : "?", r->name ? r->name : "",
                     ret == -E2BIG ? "too long" : "empty, \".\", \"..\" or slashed name");
        return ret;
    }
    return build_body(r, p, reterr);
}

void kube__prep_done(struct kube__prep *p)
{
    buf_done(&p->url);
    buf_done(&p->body);
}

/* The namespace for a request about obj: the one given, else the object's, else the
 * client's default (cluster-scoped resources get none). */
static const char *pick_ns(const struct kube_client *c, const struct kube_res *res, const char *ns,
                           const json_t *obj)
{
    if (!res->namespaced)
        return NULL;
    if (ns)
        return ns;
    const char *o = obj ? kube_obj_namespace(obj) : NULL;
    return o ? o : kube_client_namespace(c);
}

int kube_get(struct kube_client *c, const struct kube_res *res, const char *ns, const char *name,
             json_t **ret_obj, struct kube_err *reterr)
{
    struct kube_req r;
    kube_req_init(&r, "GET", res);
    r.ns = pick_ns(c, res, ns, NULL);
    r.name = name;
    return kube_request(c, &r, ret_obj, reterr);
}

int kube_create(struct kube_client *c, const struct kube_res *res, const char *ns,
                const json_t *obj, json_t **ret_obj, struct kube_err *reterr)
{
    struct kube_req r;
    kube_req_init(&r, "POST", res);
    r.ns = pick_ns(c, res, ns, obj);
    r.body = obj;
    return kube_request(c, &r, ret_obj, reterr);
}

static int put(struct kube_client *c, const struct kube_res *res, const char *ns, const json_t *obj,
               const char *sub, json_t **ret_obj, struct kube_err *reterr)
{
    struct kube_req r;
    kube_req_init(&r, "PUT", res);
    r.ns = pick_ns(c, res, ns, obj);
    r.name = kube_obj_name(obj);
    r.subresource = sub;
    r.body = obj;
    if (!r.name) {
        kube_err_set(reterr, -EINVAL, "object to update has no metadata.name");
        return -EINVAL;
    }
    return kube_request(c, &r, ret_obj, reterr);
}

int kube_update(struct kube_client *c, const struct kube_res *res, const char *ns,
                const json_t *obj, json_t **ret_obj, struct kube_err *reterr)
{
    return put(c, res, ns, obj, NULL, ret_obj, reterr);
}

int kube_update_status(struct kube_client *c, const struct kube_res *res, const char *ns,
                       const json_t *obj, json_t **ret_obj, struct kube_err *reterr)
{
    return put(c, res, ns, obj, "status", ret_obj, reterr);
}

int kube_patch(struct kube_client *c, const struct kube_res *res, const char *ns, const char *name,
               enum kube_patch_type type, const json_t *patch, json_t **ret_obj,
               struct kube_err *reterr)
{
    struct kube_req r;
    kube_req_init(&r, "PATCH", res);
    r.ns = pick_ns(c, res, ns, NULL);
    r.name = name;
    r.patch_type = type;
    r.body = patch;
    return kube_request(c, &r, ret_obj, reterr);
}

/* Server-side apply needs apiVersion and kind in the body; fills them from res. */
static json_t *with_type_meta(const struct kube_res *res, const json_t *obj)
{
    char av[256];
    if (json_object_get(obj, "apiVersion") && json_object_get(obj, "kind"))
        return NULL;
    json_t *copy = json_deep_copy(obj);
    if (kube_res_api_version(res, av, sizeof(av)) >= 0)
        (void)json_object_set_new(copy, "apiVersion", json_string(av));
    (void)json_object_set_new(copy, "kind", json_string(res->kind));
    return copy;
}

int kube_apply(struct kube_client *c, const struct kube_res *res, const char *ns, const json_t *obj,
               const char *field_manager, bool force, json_t **ret_obj, struct kube_err *reterr)
{
    struct kube_req r;
    kube_req_init(&r, "PATCH", res);
    r.ns = pick_ns(c, res, ns, obj);
    r.name = kube_obj_name(obj);
    r.patch_type = KUBE_PATCH_APPLY;
    r.field_manager = field_manager;
    r.force = force;
    if (!r.name || !field_manager) {
        kube_err_set(reterr, -EINVAL, "apply needs metadata.name and a field manager");
        return -EINVAL;
    }
    json_t *copy = with_type_meta(res, obj);
    r.body = copy ? copy : obj;
    int ret = kube_request(c, &r, ret_obj, reterr);
    json_decref(copy);
    return ret;
}

int kube_delete(struct kube_client *c, const struct kube_res *res, const char *ns, const char *name,
                struct kube_err *reterr)
{
    struct kube_req r;
    kube_req_init(&r, "DELETE", res);
    r.ns = pick_ns(c, res, ns, NULL);
    r.name = name;
    return kube_request(c, &r, NULL, reterr);
}

int kube_delete_obj(struct kube_client *c, const struct kube_res *res, const json_t *obj,
                    bool same_version, const char *propagation, struct kube_err *reterr)
{
    struct kube_req r;
    kube_req_init(&r, "DELETE", res);
    r.ns = pick_ns(c, res, NULL, obj);
    r.name = kube_obj_name(obj);
    r.precondition_uid = kube_obj_uid(obj);
    r.precondition_rv = same_version ? kube_obj_resource_version(obj) : NULL;
    r.propagation_policy = propagation;
    if (!r.name || !r.precondition_uid || (same_version && !r.precondition_rv)) {
        kube_err_set(reterr, -EINVAL, "delete of %s: the object has no %s", res->kind,
                     !r.name               ? "name"
                     : !r.precondition_uid ? "uid"
                                           : "resourceVersion");
        return -EINVAL;
    }
    return kube_request(c, &r, NULL, reterr);
}

/* ---- paged LIST ---- */

static void list_req(const struct kube_res *res, const char *ns, const struct kube_req *r,
                     struct kube_req *q)
{
    if (r)
        *q = *r;
    else
        kube_req_init(q, "GET", res);
    q->method = "GET";
    q->res = res;
    q->ns = res->namespaced ? ns : NULL;
    q->name = NULL;
    q->watch = false;
    q->limit = q->limit > 0 ? q->limit : LIMIT_KUBE_LIST_PAGE;
}

/* The page's continue token (new string) or NULL on the last page. */
static char *page_continue(const json_t *page)
{
    const char *cont = kube_obj_path_str(page, "metadata.continue");
    return cont && cont[0] ? xstrdup(cont) : NULL;
}

int kube_list_pages(struct kube_client *c, const struct kube_res *res, const char *ns,
                    const struct kube_req *r, kube_list_page_fn *fn, void *ctx,
                    struct kube_err *reterr)
{
    struct kube_req q;
    char *cont = NULL;
    bool fresh = false;
    int ret, expiries = 0;
    size_t pages = 0;
    list_req(res, ns, r, &q);
    for (;;) {
        json_t *page = NULL;
        if (++pages > LIMIT_KUBE_LIST_PAGES) {
            kube_err_set(reterr, -EPROTO,
                         "LIST of %s: more than %d pages, the server never ends it", res->plural,
                         LIMIT_KUBE_LIST_PAGES);
            ret = -EPROTO;
            break;
        }
        /* a continuation carries its own snapshot: resourceVersion must not be sent */
        q.continue_token = cont;
        q.resource_version = cont ? NULL : (r ? r->resource_version : NULL);
        q.resource_version_match = cont ? NULL : (r ? r->resource_version_match : NULL);
        ret = kube_request(c, &q, &page, reterr);
        if (ret == -E2BIG && q.limit > 1) {
            /* the page's text went over LIMIT_KUBE_RESPONSE (large objects): the same page
             * again with half as many items, and the smaller size from here on */
            q.limit /= 2;
            continue;
        }
        if (ret == -ESTALE && cont && expiries++ < 2) {
            /* The continue token expired (the server compacted the snapshot while the
             * pages were read): list again from scratch; after a second expiry in one
             * paged list, as one unpaged LIST, which no compaction can cut. */
            fresh = true;
            if (expiries == 2)
                q.limit = 0;
            XFREE(cont);
            continue;
        }
        if (ret == -E2BIG && q.limit == 0)
            kube_err_set(reterr, -E2BIG,
                         "LIST of %s: its continue token expired twice and the whole list "
                         "is over %u bytes",
                         res->plural, LIMIT_KUBE_RESPONSE);
        if (ret < 0)
            break;
        if (!page)
            page = json_object();
        XFREE(cont);
        cont = page_continue(page);
        ret = fn(ctx, page, fresh);
        fresh = false;
        json_decref(page); /* the page's text went with kube_request: one page at a time */
        if (ret < 0 || !cont)
            break;
    }
    xfree(cont);
    return ret;
}

struct list_acc {
    json_t *items;
    json_t *first; /* the first page, for apiVersion/kind/resourceVersion */
    bool too_many; /* past LIMIT_KUBE_LIST_ALL_ITEMS */
};

static void acc_reset(struct list_acc *a)
{
    json_decref(a->items);
    json_decref(a->first);
    a->items = json_array();
    a->first = NULL;
}

/* kube_list_page_fn: appends the page's items (-E2BIG past LIMIT_KUBE_LIST_ALL_ITEMS). */
static int acc_add(void *ctx, const json_t *page, bool restarted)
{
    struct list_acc *a = ctx;
    json_t *items = json_object_get(page, "items");
    if (restarted)
        acc_reset(a);
    if (json_array_size(a->items) + json_array_size(items) > LIMIT_KUBE_LIST_ALL_ITEMS) {
        a->too_many = true;
        return -E2BIG;
    }
    if (json_is_array(items))
        (void)json_array_extend(a->items, items);
    if (!a->first)
        a->first = json_incref((json_t *)page);
    return 0;
}

static json_t *acc_result(struct list_acc *a)
{
    const char *rv = kube_obj_path_str(a->first, "metadata.resourceVersion");
    json_t *l = json_pack("{s:o,s:{s:s}}", "items", json_incref(a->items), "metadata",
                          "resourceVersion", rv ? rv : "");
    const char *av = json_string_value(json_object_get(a->first, "apiVersion"));
    const char *kind = kube_obj_kind(a->first);
    if (av)
        (void)json_object_set_new(l, "apiVersion", json_string(av));
    if (kind)
        (void)json_object_set_new(l, "kind", json_string(kind));
    return l;
}

int kube_list_all(struct kube_client *c, const struct kube_res *res, const char *ns,
                  const struct kube_req *r, json_t **ret_list, struct kube_err *reterr)
{
    struct list_acc a = {0};
    acc_reset(&a);
    int ret = kube_list_pages(c, res, ns, r, acc_add, &a, reterr);
    if (a.too_many)
        kube_err_set(reterr, ret, "LIST of %s: more than %d items", res->plural,
                     LIMIT_KUBE_LIST_ALL_ITEMS);
    if (ret >= 0)
        *ret_list = acc_result(&a);
    json_decref(a.items);
    json_decref(a.first);
    return ret;
}
