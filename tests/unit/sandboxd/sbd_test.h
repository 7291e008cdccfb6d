/* SPDX-License-Identifier: Apache-2.0 */
/* Shared fixture of sandboxd's tests: a daemon on its own thread with a fresh temporary
 * root, and one-shot requests through the test HTTP client. */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "common/buf.h"
#include "common/xalloc.h"
#include "sandboxd/sandboxd.h"
#include "support/http_client.h"

struct sbd_fixture {
    char base[64];
    char root[96];
    struct sbd_thread *t;
    uint16_t port, legacy_port, grpc_port;
};

/* Tweaks of the fixture's config; 0 fields keep the defaults. */
struct sbd_fixture_opts {
    unsigned max_websockets;
    usec_t ws_first_timeout;
    usec_t ws_stdin_stall;
    usec_t ws_write_stall;
};

static inline struct sbd_fixture *sbd_fixture_start_with(const char *token, unsigned max_procs,
                                                         const struct sbd_fixture_opts *o);

static inline struct sbd_fixture *sbd_fixture_start(const char *token, unsigned max_procs)
{
    return sbd_fixture_start_with(token, max_procs, NULL);
}

static inline struct sbd_fixture *sbd_fixture_start_with(const char *token, unsigned max_procs,
                                                         const struct sbd_fixture_opts *o)
{
    struct sbd_fixture *f = XNEW(struct sbd_fixture);
    snprintf(f->base, sizeof(f->base), "/tmp/sbd-test-XXXXXX");
    if (!mkdtemp(f->base))
        abort();
    snprintf(f->root, sizeof(f->root), "%s/root", f->base);
    struct sbd_config c;
    sbd_config_defaults(&c);
    c.host = "127.0.0.1";
    c.port = 0;
    c.legacy_port = 0;
    c.grpc_port = 0;
    c.root = f->root;
    c.token = token;
    c.max_upload = 64u * 1024 * 1024;
    if (max_procs)
        c.max_procs = max_procs;
    if (o && o->max_websockets)
        c.max_websockets = o->max_websockets;
    if (o && o->ws_first_timeout)
        c.ws_first_timeout = o->ws_first_timeout;
    if (o && o->ws_stdin_stall)
        c.ws_stdin_stall = o->ws_stdin_stall;
    if (o && o->ws_write_stall)
        c.ws_write_stall = o->ws_write_stall;
    if (sbd_thread_start(&c, &f->t) < 0)
        abort();
    f->port = sbd_thread_port(f->t);
    f->legacy_port = sbd_thread_legacy_port(f->t);
    f->grpc_port = sbd_thread_grpc_port(f->t);
    return f;
}

static inline void sbd_fixture_stop(struct sbd_fixture *f)
{
    sbd_thread_stop(f->t);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->base);
    if (system(cmd) != 0)
        abort();
    xfree(f);
}

/* Sends raw to port and reads one response (10 s). Returns the status or negative. */
static inline int sbd_req(uint16_t port, const char *raw, struct test_http_resp *ret)
{
    test_http_resp_init(ret);
    int r = test_http_request(port, raw, 10 * USEC_PER_SEC, ret);
    return r < 0 ? r : ret->status;
}

/* Formats a request with an optional body (Content-Length added). Returns new (xfree). */
static inline char *sbd_fmt_req(const char *method, const char *target, const char *headers,
                                const char *body, size_t body_len)
{
    struct buf b;
    buf_init(&b, 256u * 1024 * 1024);
    buf_printf(&b, "%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n%s", method, target,
               headers ? headers : "");
    if (body)
        buf_printf(&b, "Content-Length: %zu\r\n", body_len);
    buf_puts(&b, "\r\n");
    if (body)
        buf_append(&b, body, body_len);
    return buf_steal(&b);
}

static inline int sbd_do(uint16_t port, const char *method, const char *target, const char *headers,
                         const char *body, struct test_http_resp *ret)
{
    char *raw = sbd_fmt_req(method, target, headers, body, body ? strlen(body) : 0);
    int r = sbd_req(port, raw, ret);
    xfree(raw);
    return r;
}

static inline void sbd_write_file(const char *dir, const char *name, const char *content)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *fp = fopen(p, "w");
    if (!fp || fputs(content, fp) < 0 || fclose(fp) != 0)
        abort();
}
