/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon object: configuration, servers, authentication, health, metadata and
 * shutdown (see sandboxd.h). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/pct.h"
#include "common/xalloc.h"
#include "sandboxd/activity.h"
#include "sandboxd/api_bg.h"
#include "sandboxd/config_env.h"
#include "sandboxd/fsops.h"
#include "sandboxd/grpc_proc.h"
#include "sandboxd/kernel.h"
#include "sandboxd/proc.h"
#include "sandboxd/sbd_int.h"
#include "sandboxd/util.h"

extern char **environ;

void sbd_config_defaults(struct sbd_config *c)
{
    *c = (struct sbd_config){
        .host = "::", /* every address, IPv4 too (see bind_host) */
        .port = 8080,
        .legacy_port = 8888,
        .grpc_port = 9090,
        .root = "/workspace",
        .metadata_prefix = "SANDBOX_",
        .max_upload = LIMIT_SBD_UPLOAD,
        .max_body = LIMIT_SBD_STDIN + LIMIT_SBD_REQUEST_JSON,
        .max_output = LIMIT_SBD_OUTPUT,
        .max_procs = LIMIT_SBD_PROCS,
        .max_bg_procs = LIMIT_SBD_BG_PROCS,
        .bg_output_buffer = LIMIT_SBD_BG_OUTPUT,
        .exec_timeout_s = LIMIT_SBD_TIMEOUT_S,
        .header_timeout = LIMIT_HTTP_HEADER_TIMEOUT,
        .body_timeout = LIMIT_HTTP_BODY_TIMEOUT,
        .idle_timeout = LIMIT_HTTP_IDLE_TIMEOUT,
        .grpc_max_unsent = LIMIT_SBD_GRPC_ALL_OUT,
        .max_contexts = LIMIT_SBD_CONTEXTS,
        .max_code_output = LIMIT_SBD_CODE_OUTPUT,
        .code_keepalive = LIMIT_SBD_KERNEL_KEEPALIVE,
        .proc_keepalive = LIMIT_SBD_PROC_KEEPALIVE,
        .max_websockets = LIMIT_SBD_WEBSOCKETS,
        .ws_first_timeout = LIMIT_SBD_WS_FIRST,
        .ws_stdin_stall = LIMIT_SBD_WS_STDIN_STALL,
    };
}

/* ---- routes and authentication ----------------------------------------------------- */

static bool authorized(const struct sbd *d, struct http_req *req)
{
    if (!d->token)
        return true;
    struct str h = http_req_header(req, "Authorization");
    if (!h.p || h.len < 7 || !str_eq_nocase(str_make(h.p, 7), STR_LIT("Bearer ")))
        return false;
    struct str tok = str_trim(str_make(h.p + 7, h.len - 7));
    return sbd_secure_eq(tok, str_c(d->token));
}

static int route_trampoline(struct http_req *req, void *ctx)
{
    struct sbd_route *rt = ctx;
    if (!rt->public_ && !authorized(rt->d, req)) {
        (void)http_resp_header_add(req, "WWW-Authenticate", "Bearer");
        return http_respond_error(req, 401, "missing or invalid bearer token");
    }
    if (!rt->public_)
        sbd__activity_touch(rt->d);
    return rt->fn(req, rt->d);
}

/* http_server_opts.refuse_early: a request to a route of ours that needs the token and
 * lacks it is refused before its body is buffered, and so is one whose route's body_ok
 * says no (an upload that announces more than --max-upload). A public route (a probe, the config
 * token's routes) reads a body only when its body_ok allows it: anyone can reach those,
 * and their bodies (up to --max-body each, for as long as a byte comes every body
 * timeout) would otherwise be memory anyone can hold. */
static bool refuse_early(struct http_req *req, http_handler_fn *fn, void *route_ctx)
{
    struct sbd_route *rt = route_ctx;
    if (fn != route_trampoline)
        return false;
    if (!rt->public_)
        return !authorized(rt->d, req) || (rt->body_ok && !rt->body_ok(req, rt->d));
    return !rt->body_ok || !rt->body_ok(req, rt->d);
}

static int add_route(struct sbd *d, struct http_router *r, const char *method, const char *path,
                     unsigned flags, const struct sbd_route *want)
{
    if (d->nroutes >= SBD_MAX_ROUTES)
        return -E2BIG;
    struct sbd_route *rt = &d->routes[d->nroutes++];
    *rt = *want;
    return http_router_add(r, method, path, flags, route_trampoline, rt);
}

int sbd__route(struct sbd *d, struct http_router *r, const char *method, const char *path,
               unsigned flags, http_handler_fn *fn, bool public_)
{
    return add_route(d, r, method, path, flags,
                     &(struct sbd_route){.d = d, .fn = fn, .public_ = public_});
}

int sbd__route_body(struct sbd *d, struct http_router *r, const char *method, const char *path,
                    unsigned flags, http_handler_fn *fn, sbd_body_ok_fn *body_ok)
{
    return add_route(d, r, method, path, flags,
                     &(struct sbd_route){.d = d, .fn = fn, .body_ok = body_ok});
}

int sbd__route_public_body(struct sbd *d, struct http_router *r, const char *method,
                           const char *path, unsigned flags, http_handler_fn *fn,
                           sbd_body_ok_fn *body_ok)
{
    return add_route(d, r, method, path, flags,
                     &(struct sbd_route){.d = d, .fn = fn, .public_ = true, .body_ok = body_ok});
}

int sbd__req_path(struct http_req *req, const struct sbd_root *root, char **ret)
{
    struct buf raw;
    buf_init(&raw, LIMIT_SBD_PATH * 3);
    struct str rest = http_req_path_rest(req);
    if (str_eq_c(http_req_path(req), "/v1/files"))
        rest = STR_LIT("");
    int r = pct_decode(rest, false, &raw);
    if (r == 0)
        r = sbd_path_clean(sbd_root_path(root), str_make(raw.data, raw.len), ret);
    buf_done(&raw);
    if (r == -EPERM)
        (void)sbd_respond_error(req, 403, SBD_PERMISSION_DENIED, "path escapes the root");
    else if (r < 0)
        (void)sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "invalid path");
    return r;
}

/* ---- health and metadata ----------------------------------------------------------- */

static int health(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    if (d->shutting_down)
        return sbd_respond_error(req, 503, SBD_UNAVAILABLE, "sandboxd is shutting down");
    json_t *j = json_pack("{s:s, s:I}", "status", "ok", "uptime_seconds",
                          (json_int_t)((clock_now() - d->started) / USEC_PER_SEC));
    int r = http_respond_json(req, 200, j);
    json_decref(j);
    return r;
}

static bool credential_like(const char *name, size_t len)
{
    static const char *const words[] = {"TOKEN", "SECRET", "PASSWORD", "PASSWD",  "CRED",
                                        "KEY",   "AUTH",   "BEARER",   "PRIVATE", "CERT"};
    for (size_t i = 0; i < ARRAY_SIZE(words); i++) {
        size_t wl = strlen(words[i]);
        for (size_t j = 0; j + wl <= len; j++)
            if (strncasecmp(name + j, words[i], wl) == 0)
                return true;
    }
    return false;
}

static json_t *build_metadata(const char *prefix)
{
    json_t *env = json_object();
    size_t pl = strlen(prefix);
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || strncmp(*e, prefix, pl) != 0)
            continue;
        size_t nl = (size_t)(eq - *e);
        if (credential_like(*e, nl))
            continue;
        char *name = xstrndup(*e, nl);
        (void)json_object_set_new(env, name, json_string(eq + 1));
        xfree(name);
    }
    return json_pack("{s:o}", "env", env);
}

static int metadata(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    return http_respond_json(req, 200, d->metadata);
}

/* ---- lifecycle --------------------------------------------------------------------- */

/* Whether this host can listen on IPv6 (a kernel booted with ipv6.disable=1 cannot). */
static bool ipv6_listen_works(void)
{
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    if (fd >= 0)
        (void)close(fd);
    return ok;
}

/* The address both servers bind: host, except that "::" (every address: dual-stack, as
 * upstream's Go listeners on "0.0.0.0" are) is 0.0.0.0 on a host without IPv6. */
static const char *bind_host(const char *host)
{
    if (!host)
        return "127.0.0.1";
    if (strcmp(host, "::") != 0 || ipv6_listen_works())
        return host;
    log_info("no IPv6 on this host: listening on 0.0.0.0");
    return "0.0.0.0";
}

static void copy_config(struct sbd *d, const struct sbd_config *cfg)
{
    d->cfg = *cfg;
    d->host = xstrdup(bind_host(cfg->host));
    d->root_path = xstrdup(cfg->root);
    d->legacy_root_path = xstrdup(cfg->legacy_root ? cfg->legacy_root : cfg->root);
    d->token = cfg->token && *cfg->token ? xstrdup(cfg->token) : NULL;
    d->metadata_prefix = xstrdup(cfg->metadata_prefix ? cfg->metadata_prefix : "SANDBOX_");
}

static int start_server(struct sbd *d, struct http_router *router, int port, bool legacy,
                        struct http_server **ret)
{
    struct http_server_opts o = {
        .host = d->host,
        .port = (uint16_t)port,
        .router = router,
        .header_timeout = d->cfg.header_timeout,
        .body_timeout = d->cfg.body_timeout,
        .idle_timeout = d->cfg.idle_timeout,
        .max_body = d->cfg.max_body,
        .error_body = legacy ? sbd__legacy_error_body : sbd_error_body,
        .error_ctx = d,
        .refuse_early = refuse_early,
    };
    return http_server_new(d->loop, &o, ret);
}

static int register_routes(struct sbd *d)
{
    int r = 0;
    r |= sbd__route(d, d->router, "GET", "/v1/health", 0, health, true);
    r |= sbd__route(d, d->router, "GET", "/v1/metadata", 0, metadata, false);
    r |= sbd__activity_register(d);
    r |= sbd__files_register(d);
    r |= sbd__fsops_register(d);
    r |= sbd__procs_register(d);
    r |= sbd__config_env_register(d);
    r |= sbd__kernels_register(d);
    if (d->cfg.legacy_port >= 0)
        r |= sbd__legacy_register(d);
    return r < 0 ? -EINVAL : 0;
}

static int sbd_setup(struct sbd *d)
{
    int r = sbd_root_open(d->root_path, true, &d->root);
    if (r == 0)
        r = sbd_root_open(d->legacy_root_path, true, &d->legacy_root);
    if (r < 0)
        return log_error_errno(r, "cannot open the root\troot=\"%s\"", d->root_path);
    r = sbd_procs_new(d->loop, d->cfg.max_procs, &d->procs);
    d->bgs = sbd_bgs_new(d->cfg.max_bg_procs, d->cfg.bg_output_buffer, d->cfg.proc_keepalive);
    if (r == 0)
        r = register_routes(d);
    if (r == 0)
        r = start_server(d, d->router, d->cfg.port, false, &d->server);
    if (r == 0)
        d->servers_open++;
    if (r == 0 && d->cfg.legacy_port >= 0) {
        r = start_server(d, d->legacy_router, d->cfg.legacy_port, true, &d->legacy);
        if (r == 0)
            d->servers_open++;
    }
    if (r == 0 && d->cfg.grpc_port >= 0) {
        r = sbd__grpc_start(d);
        if (d->grpc)
            d->servers_open++; /* closed by the shutdown even when listen failed */
    }
    return r;
}

static void free_when_done(void *ctx)
{
    sbd_free(ctx);
}

int sbd_new(uv_loop_t *loop, const struct sbd_config *cfg, struct sbd **ret)
{
    /* Writes to the stdin of an exited process must fail with EPIPE, not kill us. */
    (void)signal(SIGPIPE, SIG_IGN);
    struct sbd *d = XNEW(struct sbd);
    d->loop = loop;
    d->started = d->last_activity = clock_now();
    copy_config(d, cfg);
    d->router = http_router_new();
    d->legacy_router = http_router_new();
    d->metadata = build_metadata(d->metadata_prefix);
    d->config_env = sbd_config_env_new(cfg->config_token);
    int r = sbd_setup(d);
    if (r < 0) {
        /* Servers that did start close when the loop next runs; d is freed then. */
        if (d->server || d->legacy || d->grpc)
            sbd_shutdown(d, 0, free_when_done, d);
        else
            sbd_free(d);
        return r;
    }
    *ret = d;
    return 0;
}

unsigned sbd_reap_orphans(const struct sbd *d)
{
    return d->procs ? sbd_procs_reap_orphans(d->procs) : 0;
}

uint16_t sbd_port(const struct sbd *d)
{
    return http_server_port(d->server);
}

uint16_t sbd_legacy_port(const struct sbd *d)
{
    return d->legacy ? http_server_port(d->legacy) : 0;
}

uint16_t sbd_grpc_port_of(const struct sbd *d)
{
    return sbd_grpc_port(d->grpc);
}

static void part_done(struct sbd *d)
{
    if (--d->servers_open > 0)
        return;
    if (d->done)
        d->done(d->done_ctx);
}

static void on_server_done(struct http_server *s, void *ctx)
{
    (void)s;
    part_done(ctx);
}

static void on_grpc_done(void *ctx)
{
    part_done(ctx);
}

static void on_procs_done(void *ctx)
{
    part_done(ctx);
}

void sbd_shutdown(struct sbd *d, usec_t grace, void (*done)(void *ctx), void *ctx)
{
    d->shutting_down = true;
    d->done = done;
    d->done_ctx = ctx;
    d->servers_open++; /* the processes count as one more part */
    sbd__kernels_shutdown(d);
    sbd__watch_shutdown(d);
    if (!d->procs) {
        part_done(d);
    } else {
        sbd_procs_shutdown(d->procs, LIMIT_SBD_KILL_GRACE < grace ? LIMIT_SBD_KILL_GRACE : grace,
                           on_procs_done, d);
    }
    if (d->server)
        http_server_shutdown(d->server, grace, on_server_done, d);
    if (d->legacy)
        http_server_shutdown(d->legacy, grace, on_server_done, d);
    if (d->grpc)
        sbd_grpc_shutdown(d->grpc, grace, on_grpc_done, d);
}

void sbd_free(struct sbd *d)
{
    if (!d)
        return;
    http_server_free(d->server);
    http_server_free(d->legacy);
    sbd_grpc_free(d->grpc);
    sbd_procs_free(d->procs);
    sbd_bgs_free(d->bgs);
    sbd__kernels_free(d);
    sbd_config_env_free(d->config_env);
    http_router_free(d->router);
    http_router_free(d->legacy_router);
    sbd_root_free(d->root);
    sbd_root_free(d->legacy_root);
    json_decref(d->metadata);
    xfree(d->host);
    xfree(d->root_path);
    xfree(d->legacy_root_path);
    xfree(d->token);
    xfree(d->metadata_prefix);
    xfree(d);
}

/* ---- a daemon on its own thread ---------------------------------------------------- */

struct sbd_thread {
    uv_loop_t loop;
    uv_async_t stop;
    pthread_t th;
    struct sbd *d;
    uint16_t port, legacy_port, grpc_port;
};

static void *thread_main(void *arg)
{
    struct sbd_thread *t = arg;
    (void)uv_run(&t->loop, UV_RUN_DEFAULT);
    return NULL;
}

static void on_thread_done(void *ctx)
{
    struct sbd_thread *t = ctx;
    uv_close((uv_handle_t *)&t->stop, NULL);
}

static void on_stop(uv_async_t *a)
{
    struct sbd_thread *t = a->data;
    sbd_shutdown(t->d, 2 * USEC_PER_SEC, on_thread_done, t);
}

int sbd_thread_start(const struct sbd_config *cfg, struct sbd_thread **ret)
{
    struct sbd_thread *t = XNEW(struct sbd_thread);
    int r = uv_loop_init(&t->loop);
    if (r < 0) {
        xfree(t);
        return r;
    }
    r = sbd_new(&t->loop, cfg, &t->d);
    if (r < 0) {
        (void)uv_run(&t->loop, UV_RUN_DEFAULT);
        (void)uv_loop_close(&t->loop);
        xfree(t);
        return r;
    }
    t->port = sbd_port(t->d);
    t->legacy_port = sbd_legacy_port(t->d);
    t->grpc_port = sbd_grpc_port_of(t->d);
    (void)uv_async_init(&t->loop, &t->stop, on_stop);
    t->stop.data = t;
    r = -pthread_create(&t->th, NULL, thread_main, t);
    ASSERT(r == 0);
    *ret = t;
    return 0;
}

uint16_t sbd_thread_port(const struct sbd_thread *t)
{
    return t->port;
}

uint16_t sbd_thread_legacy_port(const struct sbd_thread *t)
{
    return t->legacy_port;
}

uint16_t sbd_thread_grpc_port(const struct sbd_thread *t)
{
    return t->grpc_port;
}

void sbd_thread_stop(struct sbd_thread *t)
{
    if (!t)
        return;
    (void)uv_async_send(&t->stop);
    (void)pthread_join(t->th, NULL);
    sbd_free(t->d);
    (void)uv_loop_close(&t->loop);
    xfree(t);
}
