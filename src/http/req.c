/* SPDX-License-Identifier: Apache-2.0 */
/* Request objects: lifetime (reference counted; the connection holds one reference while
 * the request is current) and accessors. */
#include "common/limits.h"
#include "common/xalloc.h"
#include "http/server_int.h"

struct http_req *http__req_new(struct http_conn *c)
{
    struct http_req *req = XNEW(struct http_req);
    req->refs = 1;
    req->conn = c;
    req->server = c->server;
    buf_init(&req->body, c->server->opts.max_body);
    buf_init(&req->resp_headers, LIMIT_HTTP_RESP_HEADERS);
    return req;
}

struct http_req *http_req_ref(struct http_req *req)
{
    ASSERT(req->refs > 0);
    req->refs++;
    return req;
}

void http_req_unref(struct http_req *req)
{
    if (!req)
        return;
    ASSERT(req->refs > 0);
    if (--req->refs > 0)
        return;
    xfree(req->raw);
    buf_done(&req->body);
    buf_done(&req->resp_headers);
    xfree(req);
}

bool http_req_is_aborted(const struct http_req *req)
{
    return req->aborted;
}

struct str http_req_method(const struct http_req *req)
{
    return req->head.method;
}

struct str http_req_target(const struct http_req *req)
{
    return req->head.target;
}

struct str http_req_path(const struct http_req *req)
{
    return req->head.path;
}

struct str http_req_query(const struct http_req *req)
{
    return req->head.query;
}

struct str http_req_path_rest(const struct http_req *req)
{
    return req->rest;
}

int http_req_minor_version(const struct http_req *req)
{
    return req->head.minor_version;
}

bool http_req_wants_upgrade(const struct http_req *req)
{
    return req->head.minor_version >= 1 && req->head.upgrade &&
           http_req_header(req, "Upgrade").p != NULL;
}

struct str http_req_header(const struct http_req *req, const char *name)
{
    const struct http_header *h = http_head_find(&req->head, name);
    return h ? h->value : STR_NULL;
}

size_t http_req_header_count(const struct http_req *req)
{
    return req->head.num_headers;
}

bool http_req_header_at(const struct http_req *req, size_t i, struct str *ret_name,
                        struct str *ret_value)
{
    if (i >= req->head.num_headers)
        return false;
    *ret_name = req->head.headers[i].name;
    *ret_value = req->head.headers[i].value;
    return true;
}

struct str http_req_body(const struct http_req *req)
{
    return str_make(req->body.data ? req->body.data : "", req->body.len);
}

bool http_req_has_body(const struct http_req *req)
{
    const struct http_head *h = &req->head;
    return h->body == HTTP_BODY_CHUNKED || (h->body == HTTP_BODY_LENGTH && h->content_length > 0);
}

bool http_req_content_length(const struct http_req *req, uint64_t *ret)
{
    if (req->head.body != HTTP_BODY_LENGTH)
        return false;
    *ret = req->head.content_length;
    return true;
}

uv_loop_t *http_req_loop(const struct http_req *req)
{
    return req->server->loop;
}

struct http_server *http_req_server(const struct http_req *req)
{
    return req->server;
}

void http_req_set_body_cb(struct http_req *req, http_body_fn *fn, void *ctx)
{
    req->body_fn = fn;
    req->body_ctx = ctx;
}

void http_req_pause_body(struct http_req *req, bool pause)
{
    if (req->body_paused == pause)
        return;
    req->body_paused = pause;
    if (!req->conn)
        return;
    if (pause)
        http__conn_update_read(req->conn);
    else
        http__conn_resume(req->conn);
}

void http_req_set_abort_cb(struct http_req *req, http_req_event_fn *fn, void *ctx)
{
    req->abort_fn = fn;
    req->abort_ctx = ctx;
}

void http_req_set_eof_aborts(struct http_req *req)
{
    req->eof_aborts = true;
}

void http_req_set_eof_cb(struct http_req *req, http_req_event_fn *fn, void *ctx)
{
    req->eof_fn = fn;
    req->eof_ctx = ctx;
    /* a request pipelined behind one that was in flight when the EOF came: it is told
     * now, as the EOF will not be read again */
    if (fn && req->conn && req->conn->read_eof && !req->conn->closing) {
        req->eof_fn = NULL;
        fn(req, ctx);
    }
}

void http_req_set_drain_cb(struct http_req *req, http_req_event_fn *fn, void *ctx)
{
    req->drain_fn = fn;
    req->drain_ctx = ctx;
}
