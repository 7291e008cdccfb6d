/* SPDX-License-Identifier: Apache-2.0 */
/* A tiny keep-alive HTTP/1.1 upstream for the router benchmark: answers every request
 * with a fixed 13-byte body. Bench-only: GET requests without bodies, on 127.0.0.1.
 * Build: cc -O2 -o upstream upstream.c -luv */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: "
                            "text/plain\r\n\r\nhello, world\n";

struct conn {
    uv_tcp_t tcp;
    char buf[65536];
    size_t len;
};

static void on_closed(uv_handle_t *h)
{
    free(h->data);
}

static void on_alloc(uv_handle_t *h, size_t s, uv_buf_t *b)
{
    struct conn *c = h->data;
    (void)s;
    *b = uv_buf_init(c->buf + c->len, (unsigned)(sizeof(c->buf) - c->len));
}

static void on_written(uv_write_t *w, int status)
{
    (void)status;
    free(w);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct conn *c = s->data;
    (void)b;
    if (n < 0 || c->len + (size_t)n >= sizeof(c->buf)) {
        uv_close((uv_handle_t *)s, on_closed);
        return;
    }
    c->len += (size_t)n;
    char *end;
    while ((end = memmem(c->buf, c->len, "\r\n\r\n", 4))) {
        size_t used = (size_t)(end - c->buf) + 4;
        memmove(c->buf, c->buf + used, c->len - used);
        c->len -= used;
        uv_write_t *w = malloc(sizeof(*w));
        uv_buf_t r = uv_buf_init((char *)reply, sizeof(reply) - 1);
        if (uv_write(w, s, &r, 1, on_written) < 0)
            free(w);
    }
}

static void on_conn(uv_stream_t *srv, int status)
{
    if (status < 0)
        return;
    struct conn *c = calloc(1, sizeof(*c));
    uv_tcp_init(srv->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(srv, (uv_stream_t *)&c->tcp) < 0) {
        uv_close((uv_handle_t *)&c->tcp, on_closed);
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

int main(int argc, char **argv)
{
    int port = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 18888;
    uv_tcp_t srv;
    struct sockaddr_in a;
    uv_tcp_init(uv_default_loop(), &srv);
    uv_ip4_addr("127.0.0.1", port, &a);
    if (uv_tcp_bind(&srv, (struct sockaddr *)&a, 0) < 0 ||
        uv_listen((uv_stream_t *)&srv, 511, on_conn) < 0) {
        fprintf(stderr, "upstream: cannot listen on %d\n", port);
        return 1;
    }
    return uv_run(uv_default_loop(), UV_RUN_DEFAULT);
}
