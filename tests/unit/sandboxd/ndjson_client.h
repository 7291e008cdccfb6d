/* SPDX-License-Identifier: Apache-2.0 */
/* A tiny incremental reader of a chunked NDJSON response for sandboxd's streaming tests
 * (the shared test client buffers whole bodies, which 100 MB streams do not fit). */
#pragma once

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/str.h"
#include "support/http_client.h"

struct nd_client {
    struct test_http_conn c;
    struct buf raw;  /* bytes after the response head, still chunk-framed */
    struct buf data; /* de-chunked bytes not yet split into lines */
    uint64_t chunk_left;
    bool head_done, ended;
    int status;
};

static inline int nd_fill(struct nd_client *n, int timeout_ms)
{
    struct pollfd p = {.fd = n->c.fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) <= 0)
        return -ETIMEDOUT;
    char b[65536];
    ssize_t k = read(n->c.fd, b, sizeof(b));
    if (k <= 0)
        return -ECONNRESET;
    return buf_append(&n->raw, b, (size_t)k);
}

/* Moves de-chunked data from raw to data. */
static inline void nd_dechunk(struct nd_client *n)
{
    for (;;) {
        if (n->chunk_left) {
            size_t k = n->raw.len < n->chunk_left ? n->raw.len : (size_t)n->chunk_left;
            if (!k)
                return;
            buf_append(&n->data, n->raw.data, k);
            buf_consume(&n->raw, k);
            n->chunk_left -= k;
            continue;
        }
        char *nl = memmem(n->raw.data ? n->raw.data : "", n->raw.len, "\r\n", 2);
        if (!nl)
            return;
        size_t line = (size_t)(nl - n->raw.data);
        if (line == 0) { /* CRLF after a chunk */
            buf_consume(&n->raw, 2);
            continue;
        }
        uint64_t sz = 0;
        if (str_hex_to_u64(str_make(n->raw.data, line), &sz) < 0)
            abort();
        buf_consume(&n->raw, line + 2);
        if (sz == 0) {
            n->ended = true;
            return;
        }
        n->chunk_left = sz;
    }
}

/* The status code of "HTTP/1.1 NNN ...". */
static inline int atoi_status(const char *p)
{
    uint64_t v = 0;
    if (strlen(p) < 12 || str_to_u64(str_make(p + 9, 3), &v) < 0)
        return -EPROTO;
    return (int)v;
}

static inline int nd_start(struct nd_client *n, uint16_t port, const char *path, const char *json)
{
    memset(n, 0, sizeof(*n));
    buf_init(&n->raw, 64u * 1024 * 1024);
    buf_init(&n->data, 64u * 1024 * 1024);
    int r = test_http_connect(port, &n->c);
    if (r < 0)
        return r;
    char head[512];
    snprintf(head, sizeof(head),
             "POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n",
             path, strlen(json));
    if (test_http_send_str(&n->c, head) < 0 || test_http_send_str(&n->c, json) < 0)
        return -EPIPE;
    while (!n->head_done) {
        char *end = memmem(n->raw.data ? n->raw.data : "", n->raw.len, "\r\n\r\n", 4);
        if (end) {
            n->status = atoi_status(n->raw.data);
            buf_consume(&n->raw, (size_t)(end - n->raw.data) + 4);
            n->head_done = true;
            break;
        }
        if ((r = nd_fill(n, 10000)) < 0)
            return r;
    }
    return n->status;
}

/* Next JSON line (new reference) or NULL at the end / on timeout. */
static inline json_t *nd_next(struct nd_client *n, int timeout_ms)
{
    for (;;) {
        nd_dechunk(n);
        char *nl = n->data.len ? memchr(n->data.data, '\n', n->data.len) : NULL;
        if (nl) {
            json_t *j = json_loadb(n->data.data, (size_t)(nl - n->data.data), 0, NULL);
            buf_consume(&n->data, (size_t)(nl - n->data.data) + 1);
            return j;
        }
        if (n->ended || nd_fill(n, timeout_ms) < 0)
            return NULL;
    }
}

static inline void nd_close(struct nd_client *n)
{
    test_http_close(&n->c);
    buf_done(&n->raw);
    buf_done(&n->data);
}
