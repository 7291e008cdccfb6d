/* SPDX-License-Identifier: Apache-2.0 */
/* A minimal blocking HTTP/1.1 client for tests: raw bytes out, one parsed response in,
 * with timeouts. Deliberately independent of src/http's parser so the two check each
 * other. Loopback only. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/clock.h"

struct test_http_conn {
    int fd;
    struct buf in; /* bytes received but not yet consumed (pipelined responses) */
};

struct test_http_resp {
    int status;
    struct buf head; /* status line and header lines, as received */
    struct buf body; /* decoded body (chunked framing removed) */
    bool chunked;
    unsigned chunks; /* data chunks seen for a chunked body */
    bool conn_close; /* Connection: close */
};

/** A TCP port on 127.0.0.1 that nothing listened on a moment ago (bound to port 0 and
 * closed). Returns 0 and *ret, or a negative errno. */
int test_http_free_port(uint16_t *ret);
/** Connects to 127.0.0.1:port. Returns 0 or a negative errno. */
int test_http_connect(uint16_t port, struct test_http_conn *ret);
/** Closes the socket and frees the buffer. */
void test_http_close(struct test_http_conn *c);
/** Sends all n bytes. Returns 0 or a negative errno (-EPIPE when the peer closed). */
int test_http_send(struct test_http_conn *c, const void *p, size_t n);
int test_http_send_str(struct test_http_conn *c, const char *s);
/** Reads one response (a 1xx is returned as such) within timeout into *ret, which must
 * have been set up with test_http_resp_init (it is reset first). head_request: the
 * request was HEAD (no body follows). Returns 0, -ETIMEDOUT, -ECONNRESET (closed before
 * the response was complete) or -EPROTO. */
int test_http_read(struct test_http_conn *c, bool head_request, usec_t timeout,
                   struct test_http_resp *ret);
/** Waits until the server closes the connection (EOF or reset), discarding data. Returns
 * 0, or -ETIMEDOUT when it is still open after timeout. */
int test_http_wait_closed(struct test_http_conn *c, usec_t timeout);
/** As test_http_wait_closed, but any byte before the close is -EPROTO: the server closed
 * without a word. */
int test_http_wait_silent_close(struct test_http_conn *c, usec_t timeout);
/** The value of the first header named name (case-insensitive) as a new string (xfree),
 * or NULL. */
char *test_http_header(const struct test_http_resp *r, const char *name);
void test_http_resp_init(struct test_http_resp *r);
void test_http_resp_done(struct test_http_resp *r);
/** Connect, send raw, read one response, close. Returns like test_http_read. */
int test_http_request(uint16_t port, const char *raw, usec_t timeout, struct test_http_resp *ret);
