/* SPDX-License-Identifier: Apache-2.0 */
/* One proxied exchange, request side: route, authorize, resolve the Sandbox, connect (or
 * reuse) upstream, send the head and stream the request body with back-pressure. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api/sandbox.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/loopback.h"
#include "common/map.h"
#include "common/metrics.h"
#include "common/xalloc.h"
#include "kube/obj.h"
#include "kube/store.h"
#include "router/activity_track.h"
#include "router/authz.h"
#include "router/proxy_int.h"
#include "router/resume_gate.h"
#include "router/trace_ctx.h"

static void px_arm(struct px *x);

static struct str req_header(void *ctx, const char *name)
{
    return http_req_header(ctx, name);
}

static bool req_header_at(void *ctx, size_t i, struct str *ret_name, struct str *ret_value)
{
    return http_req_header_at(ctx, i, ret_name, ret_value);
}

static uint64_t ms(usec_t u)
{
    return (u + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
}

static void on_timer_closed(uv_handle_t *h)
{
    struct px *x = h->data;
    buf_done(&x->in);
    xfree(x->head);
    xfree(x->raw);
    xfree(x);
}

/* The exchange's last byte either way. While the client's queue is full (upstream reads
 * stopped until it drains to half, which a slow client takes long for), the bytes the
 * client takes count (http_resp_write_progress): a slow but steady download is not
 * idle. */
static usec_t px_activity(struct px *x)
{
    usec_t w = x->blocked && x->req ? http_resp_write_progress(x->req) : 0;
    return w > x->last_activity ? w : x->last_activity;
}

static void on_px_timer(uv_timer_t *t)
{
    struct px *x = t->data;
    usec_t now = clock_now();
    usec_t idle_end = px_activity(x) + x->p->o.idle_timeout;
    if (x->held && now < x->deadline) {
        /* Held for a resume: no byte is due; the gate answers past its own hold limit. */
        x->last_activity = now;
        px_arm(x);
        return;
    }
    if (now < x->deadline && now < idle_end) {
        px_arm(x);
        return;
    }
    char d[160];
    (void)snprintf(d, sizeof(d), "Timed out waiting for the backend sandbox: %s", x->rt.name);
    proxy__px_fail(x, 504, d, "timeout");
}

static void px_arm(struct px *x)
{
    usec_t now = clock_now(), idle_end = px_activity(x) + x->p->o.idle_timeout;
    usec_t end = idle_end < x->deadline ? idle_end : x->deadline;
    (void)uv_timer_start(&x->timer, on_px_timer, end > now ? ms(end - now) : 0, 0);
}

/* The namespace label only once the caller passed authorization: strangers cannot
 * create series. */
static const char *ns_label(const struct px *x)
{
    return x->authorized ? x->rt.ns : "";
}

/* A client-supplied value, quoted and cut at 512 bytes. */
static void put_quoted(struct buf *b, struct str s)
{
    log_quote(b, s.p, s.len < 512 ? s.len : 512);
}

static void put_field(struct buf *b, const char *name, const char *value)
{
    (void)buf_puts(b, name);
    (void)buf_puts(b, value);
}

/* trace_id= span_id= of a valid traceparent (forwarded unchanged; see trace_ctx.h). */
static void put_trace_ids(struct buf *b, struct http_req *r)
{
    char tid[TRACE_ID_LEN + 1], sid[SPAN_ID_LEN + 1];
    if (!trace_parse_traceparent(http_req_header(r, "traceparent"), tid, sid))
        return;
    put_field(b, " trace_id=", tid);
    put_field(b, " span_id=", sid);
}

/* One logfmt line: appends (no printf but two numbers), skipped when info is off. */
static void access_log(struct px *x, double secs)
{
    if (LOG_INFO > log_max_level)
        return;
    struct buf b;
    char num[64];
    buf_init(&b, 4096);
    struct http_req *r = x->req;
    struct str m = http_req_method(r);
    (void)buf_puts(&b, "method=");
    (void)buf_append(&b, m.p, m.len);
    (void)buf_puts(&b, " path=");
    put_quoted(&b, http_req_path(r)); /* the query is left out: it may carry secrets */
    int n = snprintf(num, sizeof(num), " status=%d duration_ms=%.3f", x->status, secs * 1000);
    (void)buf_append(&b, num, n > 0 && (size_t)n < sizeof(num) ? (size_t)n : 0);
    put_field(&b, " client_ip=", x->client_ip);
    put_field(&b, " sandbox_namespace=", x->rt.ns);
    put_field(&b, " sandbox_id=", x->rt.name);
    n = snprintf(num, sizeof(num), " bytes_out=%llu user=", (unsigned long long)x->bytes_out);
    (void)buf_append(&b, num, n > 0 && (size_t)n < sizeof(num) ? (size_t)n : 0);
    put_quoted(&b, str_c(x->user));
    (void)buf_puts(&b, " user_agent=");
    put_quoted(&b, http_req_header(r, "User-Agent"));
    put_trace_ids(&b, r);
    log_info("access\t%s", buf_str(&b));
    buf_done(&b);
}

/* The requests/duration series of x's method, status and namespace label. */
static const struct px_series *request_series(struct proxy *p, const struct px *x)
{
    struct str m = http_req_method(x->req);
    char method[sizeof(p->series[0].method)];
    (void)snprintf(method, sizeof(method), "%.*s", (int)(m.len < 15 ? m.len : 15), m.p);
    const char *ns = ns_label(x);
    for (unsigned i = 0; i < PX_SERIES; i++) {
        struct px_series *s = &p->series[i];
        if (s->requests && s->status == x->status && strcmp(s->method, method) == 0 &&
            strcmp(s->ns, ns) == 0)
            return s;
    }
    struct px_series *s = &p->series[p->series_next++ % PX_SERIES];
    char code[8];
    (void)snprintf(code, sizeof(code), "%d", x->status);
    const char *labels[] = {method, code, ns};
    (void)snprintf(s->method, sizeof(s->method), "%s", method);
    (void)snprintf(s->ns, sizeof(s->ns), "%s", ns);
    s->status = x->status;
    s->requests = metric_series_get(p->m.requests, labels);
    s->duration = metric_series_get(p->m.duration, labels);
    return s;
}

/* Idle auto-suspend bookkeeping of a finished exchange. */
static void idle_finish(struct px *x)
{
    char key[2 * ROUTE_NAME_MAX + 2];
    if (x->held) {
        resume_gate_cancel(x->p->o.resume, x->held);
        x->held = NULL;
    }
    if (x->active) {
        (void)snprintf(key, sizeof(key), "%s/%s", x->rt.ns, x->rt.name);
        activity_end(x->p->o.activity, key);
        x->active = false;
    }
}

void proxy__px_finish(struct px *x)
{
    if (x->finished)
        return;
    x->finished = true;
    struct proxy *p = x->p;
    proxy__unstarve(x);
    p->inflight--;
    if (x->counts_upgrade) {
        x->counts_upgrade = false;
        p->nupgrading--;
    }
    metric_series_add(p->m.inflight_now, -1);
    idle_finish(x);
    double secs = (double)(clock_now() - x->start) / (double)USEC_PER_SEC;
    const struct px_series *ser = request_series(p, x);
    metric_series_add(ser->requests, 1);
    metric_series_observe(ser->duration, secs);
    if (x->error_reason)
        metric_inc(p->m.upstream_errors, (const char *const[]){ns_label(x), x->error_reason});
    if (p->o.access_log)
        access_log(x, secs);
    if (x->up) {
        bool reuse = x->resp_done && x->body_done && x->head && x->head->keep_alive &&
                     x->in.len == 0 && !x->up_eof && x->status != 101;
        if (reuse)
            upconn_release(x->up);
        else if (x->status != 101)
            upconn_close(x->up);
        x->up = NULL;
    }
    http_req_set_abort_cb(x->req, NULL, NULL);
    http_req_set_drain_cb(x->req, NULL, NULL);
    http_req_set_body_cb(x->req, NULL, NULL);
    http_req_set_eof_cb(x->req, NULL, NULL);
    http_req_unref(x->req);
    x->req = NULL;
    if (!x->authz_pending)
        uv_close((uv_handle_t *)&x->timer, on_timer_closed);
}

void proxy__px_fail(struct px *x, int status, const char *detail, const char *reason)
{
    if (x->finished)
        return;
    if (reason)
        x->error_reason = reason;
    if (!x->resp_started && !http_req_is_aborted(x->req)) {
        x->status = status;
        /* the router's own 503s (not Ready, resuming with no room to wait, a failed
         * resume, the cache not synced) are passing: a client may retry in a second */
        if (status == 503)
            (void)http_resp_header_add(x->req, "Retry-After", "1");
        (void)http_respond_error(x->req, status, detail);
    } else {
        http_req_abort(x->req);
    }
    if (x->up) {
        upconn_close(x->up);
        x->up = NULL;
    }
    proxy__px_finish(x);
}

static void on_abort(struct http_req *req, void *ctx)
{
    struct px *x = ctx;
    if (!x->status)
        x->status = 499; /* client closed the request */
    if (x->up) {
        /* a cut-off client (TLS without close_notify): a reset, so that sandboxd never
         * takes a truncated body, or the EOF after a request, for a clean end */
        if (http_req_input_cut(req))
            upconn_reset(x->up);
        else
            upconn_close(x->up);
        x->up = NULL;
    }
    proxy__px_finish(x);
}

/* ---- Upstream request ------------------------------------------------------------------ */

/* Passes the client's half-close on to sandboxd once the whole request is written, as a
 * client talking to it directly would: a run whose client gave up ends there too (its
 * handler takes the EOF as the client going away), and any other answer still comes. */
static void pass_eof(struct px *x)
{
    if (x->client_eof && !x->finished && x->up && x->req_sent && x->body_done &&
        upconn_shutdown(x->up) < 0)
        proxy__px_fail(x, 502, "Could not write to the backend sandbox.", "eof");
}

static void on_client_eof(struct http_req *req, void *ctx)
{
    struct px *x = ctx;
    (void)req;
    x->client_eof = true;
    pass_eof(x);
}

bool proxy__listed(struct str list, struct str name)
{
    struct str rest = list, tok;
    while (rest.len) {
        (void)str_cut(rest, ',', &tok, &rest);
        if (str_eq_nocase(str_trim(tok), name))
            return true;
    }
    return false;
}

/* Whether name is listed in any Connection field of r (the field may be repeated: each
 * counts, not just the first). */
static bool in_connection(struct http_req *r, struct str name)
{
    struct str n, v;
    for (size_t i = 0; http_req_header_at(r, i, &n, &v); i++)
        if (str_eq_nocase(n, STR_LIT("connection")) && proxy__listed(v, name))
            return true;
    return false;
}

static bool hop_by_hop(struct http_req *r, struct str name)
{
    static const char *const names[] = {"connection",
                                        "keep-alive",
                                        "proxy-authenticate",
                                        "proxy-authorization",
                                        "te",
                                        "trailer",
                                        "trailers",
                                        "transfer-encoding",
                                        "upgrade",
                                        "host",
                                        "authorization",
                                        "content-length",
                                        "expect",
                                        "x-forwarded-for",
                                        "x-forwarded-host",
                                        "x-forwarded-proto",
                                        "forwarded",
                                        "proxy-connection"};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (str_eq_nocase(name, str_c(names[i])))
            return true;
    if (str_has_prefix(name, STR_LIT("x-sandbox-")) ||
        str_has_prefix(name, STR_LIT("X-Sandbox-")) ||
        (name.len > 10 && str_eq_nocase(str_make(name.p, 10), STR_LIT("x-sandbox-"))))
        return true;
    return in_connection(r, name); /* fields named in Connection are hop-by-hop too */
}

static void put(struct buf *b, struct str s)
{
    (void)buf_append(b, s.p, s.len);
}

static void put_header(struct buf *b, struct str name, struct str value)
{
    put(b, name);
    put(b, STR_LIT(": "));
    put(b, value);
    put(b, STR_LIT("\r\n"));
}

/* The request head sent upstream. Appends only (no printf): this runs per request. The
 * buffer's limit bounds it; a head past it is cut and the upstream rejects it. */
static void build_head(struct px *x, struct buf *b)
{
    struct http_req *r = x->req;
    put(b, http_req_method(r));
    put(b, STR_LIT(" "));
    put(b, x->rt.path);
    if (x->rt.query.len) {
        put(b, STR_LIT("?"));
        put(b, x->rt.query);
    }
    bool v6 = strchr(x->ip, ':') != NULL;
    char port[16];
    int pn = snprintf(port, sizeof(port), ":%u\r\n", (unsigned)x->rt.port);
    put(b, STR_LIT(" HTTP/1.1\r\nHost: "));
    put(b, v6 ? STR_LIT("[") : STR_NULL);
    put(b, str_c(x->ip));
    put(b, v6 ? STR_LIT("]") : STR_NULL);
    put(b, str_make(port, pn > 0 && (size_t)pn < sizeof(port) ? (size_t)pn : 0));
    struct str name, value;
    for (size_t i = 0; http_req_header_at(r, i, &name, &value); i++) {
        if (hop_by_hop(r, name) || (x->is_upgrade && str_eq_nocase(name, STR_LIT("origin"))))
            continue;
        put_header(b, name, value);
    }
    struct str host = http_req_header(r, "Host");
    put_header(b, STR_LIT("X-Forwarded-For"), str_c(x->client_ip));
    put(b, http_req_secure(r) ? STR_LIT("X-Forwarded-Proto: https\r\n")
                              : STR_LIT("X-Forwarded-Proto: http\r\n"));
    if (host.p)
        put_header(b, STR_LIT("X-Forwarded-Host"), host);
    struct str te = http_req_header(r, "Transfer-Encoding"),
               cl = http_req_header(r, "Content-Length");
    if (te.p)
        put(b, STR_LIT("Transfer-Encoding: chunked\r\n"));
    else if (cl.p)
        put_header(b, STR_LIT("Content-Length"), cl);
    if (x->is_upgrade) {
        put(b, STR_LIT("Connection: Upgrade\r\n"));
        put_header(b, STR_LIT("Upgrade"), http_req_header(r, "Upgrade"));
    }
    put(b, STR_LIT("\r\n"));
}

static int on_body(struct http_req *req, struct str data, bool last, void *ctx)
{
    struct px *x = ctx;
    (void)req;
    if (x->finished || !x->up)
        return 0;
    x->last_activity = clock_now();
    bool chunked = http_req_header(x->req, "Transfer-Encoding").p != NULL;
    char hex[24];
    int n = snprintf(hex, sizeof(hex), "%zx\r\n", data.len);
    struct str parts[4];
    size_t np = 0;
    if (data.len) {
        if (chunked)
            parts[np++] = str_make(hex, (size_t)n);
        parts[np++] = data;
        if (chunked)
            parts[np++] = STR_LIT("\r\n");
    }
    if (last && chunked)
        parts[np++] = STR_LIT("0\r\n\r\n");
    if (upconn_write(x->up, parts, np) < 0) {
        proxy__px_fail(x, 502, "Could not write to the backend sandbox.", "eof");
        return 0;
    }
    if (last) {
        x->body_done = true;
        pass_eof(x);
        if (x->finished)
            return 0;
    }
    if (x->up->queued >= LIMIT_ROUTER_UPSTREAM_QUEUE && !x->body_paused_by_us) {
        x->body_paused_by_us = true;
        http_req_pause_body(x->req, true);
    }
    return 0;
}

void proxy__px_up_written(struct px *x, int status)
{
    if (status < 0) {
        proxy__px_fail(x, 502, "Could not write to the backend sandbox.", "eof");
        return;
    }
    x->last_activity = clock_now();
    if (x->body_paused_by_us && x->up->queued < LIMIT_ROUTER_UPSTREAM_QUEUE / 2) {
        x->body_paused_by_us = false;
        http_req_pause_body(x->req, false);
    }
}

static void connect_upstream(struct px *x);

/* The connect failed: 504 for a timeout, else 502. "Could not connect" only while the
 * request never left: after a retry the first attempt was sent (it may have run), and
 * clients take that text as proof that it did not (docs/router.md). */
static void connect_failed(struct px *x, int status)
{
    char d[160];
    const char *what = status == -ETIMEDOUT ? "Timed out waiting for the backend sandbox"
                       : x->retried ? "The backend sandbox closed the connection or answered badly"
                                    : "Could not connect to the backend sandbox";
    (void)snprintf(d, sizeof(d), "%s: %s", what, x->rt.name);
    proxy__px_fail(x, status == -ETIMEDOUT ? 504 : 502, d,
                   status == -ETIMEDOUT ? "timeout" : "dial");
}

void proxy__px_connected(struct px *x, int status)
{
    if (x->finished)
        return;
    if (status < 0) {
        x->up = NULL;
        connect_failed(x, status);
        return;
    }
    x->last_activity = clock_now();
    struct buf b;
    buf_init(&b, LIMIT_ROUTER_REQ_HEAD);
    build_head(x, &b);
    struct str part = str_make(buf_str(&b), b.len);
    int r = upconn_write(x->up, &part, 1);
    buf_done(&b);
    if (r >= 0)
        r = upconn_read(x->up, true);
    if (r < 0) {
        proxy__px_fail(x, 502, "Could not write to the backend sandbox.", "eof");
        return;
    }
    x->req_sent = true;
    if (!x->body_done) {
        http_req_set_body_cb(x->req, on_body, x);
        http_req_pause_body(x->req, false);
    }
    pass_eof(x);
}

/* Whether req may be sent twice: an idempotent method (RFC 9110 9.2.2), or a request
 * that carries an idempotency key (as Go's http.Transport decides). */
static bool replayable(struct http_req *req)
{
    static const char *const methods[] = {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"};
    struct str m = http_req_method(req);
    for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
        if (str_eq_c(m, methods[i]))
            return true;
    return http_req_header(req, "Idempotency-Key").p || http_req_header(req, "X-Idempotency-Key").p;
}

/* A new connection to the sandbox (not a pooled one); proxy__px_connected hears how it
 * went, now when it could not start. */
static void dial_new(struct px *x)
{
    int err = 0;
    x->up = upconn_connect(x->p, x->ip, x->rt.port, x, &err);
    if (!x->up)
        proxy__px_connected(x, err);
}

bool proxy__px_retry(struct px *x)
{
    if (!x->up || !x->up->reused || x->retried || x->in.len || x->head_done || x->got_bytes ||
        http_req_header(x->req, "Transfer-Encoding").p ||
        http_req_header(x->req, "Content-Length").p || !replayable(x->req))
        return false;
    x->retried = true;
    upconn_close(x->up);
    x->up = NULL;
    x->req_sent = false;
    dial_new(x); /* not another pooled one: that may be as stale as this was */
    return true;
}

static void connect_upstream(struct px *x)
{
    if (!x->active && x->p->o.activity) {
        char key[2 * ROUTE_NAME_MAX + 2];
        (void)snprintf(key, sizeof(key), "%s/%s", x->rt.ns, x->rt.name);
        x->active = activity_begin(x->p->o.activity, key);
    }
    x->up = upconn_take(x->p, x->ip, x->rt.port);
    if (x->up) {
        x->up->owner_kind = UP_PX;
        x->up->owner = x;
        proxy__px_connected(x, 0);
        return;
    }
    dial_new(x);
}

/* ---- Resolution ------------------------------------------------------------------------ */

static bool ip_listed(const json_t *ips, const char *want)
{
    size_t i;
    json_t *v;
    json_array_foreach(ips, i, v)
    {
        char canon[ROUTE_IP_MAX];
        const char *s = json_string_value(v);
        if (s && route_ip_check(s, true, canon) == 0 && strcmp(canon, want) == 0)
            return true;
    }
    return false;
}

/* Picks the target IP of sandbox obj. Returns 0 or an HTTP status with *detail. */
static int pick_ip(struct px *x, const json_t *obj, char *detail, size_t size)
{
    const json_t *ips = kube_obj_path(obj, "status.podIPs");
    const char *first = json_string_value(json_array_get(ips, 0));
    if (!first) {
        (void)snprintf(detail, size, "Sandbox %s/%s is not ready: it has no pod IP.", x->rt.ns,
                       x->rt.name);
        return 503;
    }
    if (x->rt.pod_ip[0]) {
        if (!ip_listed(ips, x->rt.pod_ip)) {
            (void)snprintf(detail, size, "%s", ROUTE_ERR_IP_INVALID);
            return 400;
        }
        (void)snprintf(x->ip, sizeof(x->ip), "%s", x->rt.pod_ip);
    } else if (route_ip_check(first, true, x->ip) < 0) {
        x->ip[0] = '\0';
    }
    if (!x->ip[0] || route_ip_check(x->ip, x->p->o.allow_loopback, NULL) < 0) {
        log_warn("refusing to dial a forbidden pod IP\tsandbox=%s/%s ip=%s", x->rt.ns, x->rt.name,
                 first);
        (void)snprintf(detail, size, "Could not connect to the backend sandbox: %s", x->rt.name);
        return 502;
    }
    return 0;
}

static struct px_target *target_slot(struct proxy *p, const json_t *obj)
{
    return &p->targets[((uintptr_t)obj >> 4) % PX_TARGETS];
}

/* A request without a pod-IP pin to an object whose checks passed before: x->ip set. */
static bool target_cached(struct px *x, const json_t *obj)
{
    const struct px_target *t = target_slot(x->p, obj);
    if (x->rt.pod_ip[0] || t->obj != obj)
        return false;
    memcpy(x->ip, t->ip, sizeof(x->ip));
    return true;
}

static void target_remember(struct px *x, json_t *obj)
{
    struct px_target *t = target_slot(x->p, obj);
    if (x->rt.pod_ip[0] || t->obj == obj)
        return;
    json_decref(t->obj);
    t->obj = json_incref(obj);
    memcpy(t->ip, x->ip, sizeof(t->ip));
}

static int check_sandbox(struct px *x, json_t *obj, char *detail, size_t size)
{
    if (!obj || (x->rt.uid[0] && strcmp(kube_obj_uid(obj) ? kube_obj_uid(obj) : "", x->rt.uid))) {
        (void)snprintf(detail, size, "Sandbox %s/%s not found.", x->rt.ns, x->rt.name);
        return 404;
    }
    if (target_cached(x, obj))
        return 0;
    if (!kube_obj_condition_true(obj, SB_COND_READY)) {
        const json_t *c = kube_obj_condition(obj, SB_COND_READY);
        const char *reason = json_string_value(json_object_get(c, "reason"));
        (void)snprintf(detail, size, "Sandbox %s/%s is not ready: %s.", x->rt.ns, x->rt.name,
                       reason ? reason : "no Ready condition");
        return 503;
    }
    int status = pick_ip(x, obj, detail, size);
    if (status == 0)
        target_remember(x, obj);
    return status;
}

static void resolve_and_go(struct px *x);

static void on_resumed(void *ctx, int status, const char *detail)
{
    struct px *x = ctx;
    x->held = NULL;
    x->last_activity = clock_now(); /* the idle time starts again after the hold */
    if (status)
        proxy__px_fail(x, status, detail, "resume");
    else
        resolve_and_go(x);
}

static void resolve_and_go(struct px *x)
{
    struct proxy *p = x->p;
    char detail[512];
    int status;
    if (p->o.synced && !p->o.synced(p->o.synced_ctx)) {
        (void)snprintf(detail, sizeof(detail), "The sandbox cache is not synced yet.");
        status = 503;
    } else {
        json_t *obj = kube_store_get_ns(p->o.store, x->rt.ns, x->rt.name);
        status = check_sandbox(x, obj, detail, sizeof(detail));
        /* Not Ready: a Sandbox suspended by its idle policy is resumed and the request
         * held until it is Ready (or answered 409 when the policy forbids it). */
        bool held = status == 503 && p->o.resume &&
                    resume_gate_hold(p->o.resume, obj, x->rt.ns, x->rt.name, on_resumed, x,
                                     &x->held, &status, detail, sizeof(detail)) > 0;
        if (obj)
            json_decref(obj);
        if (held)
            return;
    }
    if (status) {
        proxy__px_fail(x, status, detail, NULL);
        return;
    }
    connect_upstream(x);
}

/* A non-empty "Bearer" credential was sent (another scheme is a missing header, as
 * upstream answers it). */
static bool has_bearer(struct http_req *req)
{
    struct str a = http_req_header(req, "Authorization");
    return a.len > 7 && str_eq_nocase(str_make(a.p, 7), STR_LIT("Bearer ")) &&
           str_trim(str_make(a.p + 7, a.len - 7)).len > 0;
}

static void on_authz(void *ctx, const struct authz_result *res)
{
    struct px *x = ctx;
    x->authz_pending = false;
    x->authorized = res->verdict == AUTHZ_ALLOW;
    static const char *const decision[] = {"allow", "deny", "deny", "error", "busy"};
    (void)snprintf(x->user, sizeof(x->user), "%s", res->user);
    metric_inc(x->p->m.authz,
               (const char *const[]){res->verdict == AUTHZ_ALLOW ? x->rt.ns : "",
                                     decision[res->verdict], x->by_cert ? "client-cert" : "token"});
    if (x->finished) {
        uv_close((uv_handle_t *)&x->timer, on_timer_closed);
        return;
    }
    switch (res->verdict) {
    case AUTHZ_ALLOW:
        resolve_and_go(x);
        return;
    case AUTHZ_UNAUTHENTICATED:
        (void)http_resp_header_add(x->req, "WWW-Authenticate", "Bearer");
        proxy__px_fail(x, 401,
                       x->user[0] || has_bearer(x->req)
                           ? "Invalid token."
                           : "Missing or invalid Authorization header.",
                       NULL);
        return;
    case AUTHZ_FORBIDDEN:
        proxy__px_fail(x, 403, "Not authorized to access this sandbox.", NULL);
        return;
    case AUTHZ_BUSY:
        proxy__px_fail(x, 503, "Too many authorization checks in progress.", NULL);
        return;
    case AUTHZ_ERROR:
        proxy__px_fail(x, 500, "Authorization check failed.", NULL);
        return;
    }
}

static void bearer(struct http_req *req, char *out, size_t size)
{
    struct str a = http_req_header(req, "Authorization");
    out[0] = '\0';
    if (a.len > 7 && a.len - 7 < size && str_eq_nocase(str_make(a.p, 7), STR_LIT("Bearer "))) {
        struct str t = str_trim(str_make(a.p + 7, a.len - 7));
        memcpy(out, t.p, t.len);
        out[t.len] = '\0';
    }
}

/* Token, else client certificate, else a trusted loopback peer, else 401 (proxy_opts). */
static void authorize(struct px *x)
{
    struct proxy *p = x->p;
    struct http_req *req = x->req;
    struct str ident = p->o.client_cert_auth ? http_req_peer_info(req) : STR_NULL;
    if (!has_bearer(req) && ident.len > 0) {
        x->by_cert = true;
        x->authz_pending = true;
        (void)authz_check_identity(p->o.authz, ident, x->rt.ns, x->rt.name, x->client_ip, on_authz,
                                   x);
        return;
    }
    if (p->o.trust_loopback && !http_req_header(req, "Authorization").p &&
        loopback_addr(x->client_ip)) {
        const char *why =
            route_loopback_refusal(http_req_header(req, "Host"), http_req_header(req, "Origin"),
                                   http_req_header(req, "Sec-Fetch-Site"));
        if (why) { /* a browser's page of another site, through a port-forward */
            proxy__px_fail(x, 403, why, "loopback");
            return;
        }
        x->authorized = true; /* a port-forward to the router pod: see proxy_opts */
        resolve_and_go(x);
        return;
    }
    char token[LIMIT_ROUTER_TOKEN];
    bearer(req, token, sizeof(token));
    x->authz_pending = true;
    (void)authz_check(p->o.authz, token, x->rt.ns, x->rt.name, x->client_ip, on_authz, x);
}

/* ---- Handler --------------------------------------------------------------------------- */

static struct px *px_new(struct proxy *p, struct http_req *req)
{
    struct px *x = XNEW(struct px);
    x->p = p;
    x->req = http_req_ref(req);
    x->start = x->last_activity = clock_now();
    buf_init(&x->in, LIMIT_ROUTER_UPSTREAM_HEAD + sizeof(p->read_buf));
    (void)uv_timer_init(p->loop, &x->timer);
    x->timer.data = x;
    if (http_req_peer(req, x->client_ip, sizeof(x->client_ip)) < 0)
        x->client_ip[0] = '\0';
    p->inflight++;
    metric_series_add(p->m.inflight_now, 1);
    return x;
}

static int proxy_handle(struct http_req *req, void *ctx)
{
    struct proxy *p = ctx;
    struct px *x = px_new(p, req);
    struct route_input in = {.path = http_req_path(req),
                             .query = http_req_query(req),
                             .header = req_header,
                             .header_at = req_header_at,
                             .header_ctx = req};
    struct route_err e;
    http_req_set_abort_cb(req, on_abort, x);
    http_req_set_drain_cb(req, proxy__resp_drain, x);
    x->body_done = !http_req_has_body(req);
    if (!x->body_done)
        http_req_pause_body(req, true);
    if (route_parse(&in, &x->rt, &e) < 0) {
        proxy__px_fail(x, e.status, e.detail, NULL);
        return 0;
    }
    /* an Upgrade header alone (no Connection: upgrade, or HTTP/1.0) asks for nothing: it
     * is dropped with the other hop-by-hop headers */
    x->is_upgrade = http_req_wants_upgrade(req);
    if (x->is_upgrade && p->ntunnels + p->nupgrading >= p->o.max_tunnels) {
        /* an upgraded connection leaves the server's connection count: this is its bound,
         * counting the upgrades in flight (each may become a tunnel: checking the open
         * tunnels only let up to a server's connections more through at once) */
        proxy__px_fail(x, 503, "Too many open tunnels: try again later.", "tunnels");
        return 0;
    }
    if (x->is_upgrade) {
        p->nupgrading++;
        x->counts_upgrade = true;
        /* a client that half-closes before the 101 cannot use the tunnel: it goes, and
         * its upstream with it, instead of holding a tunnel's room until an answer */
        http_req_set_eof_aborts(req);
    } else {
        http_req_set_eof_cb(req, on_client_eof, x);
    }
    usec_t limit = p->o.proxy_timeout;
    x->deadline = x->start + (x->rt.timeout && x->rt.timeout < limit ? x->rt.timeout : limit);
    px_arm(x);
    if (!p->o.authz) {
        x->authorized = true;
        resolve_and_go(x);
        return 0;
    }
    authorize(x);
    return 0;
}

static int healthz(struct http_req *req, void *ctx)
{
    (void)ctx;
    static const char body[] = "{\"status\":\"ok\"}";
    return http_respond(req, 200, "application/json", body, sizeof(body) - 1);
}

int proxy_register(struct proxy *p, struct http_router *r)
{
    int rc = http_router_add(r, "GET", "/healthz", HTTP_ROUTE_NO_BODY, healthz, p);
    if (rc >= 0)
        rc = http_router_add(r, NULL, "/", HTTP_ROUTE_PREFIX | HTTP_ROUTE_STREAM_BODY, proxy_handle,
                             p);
    return rc;
}
