/* SPDX-License-Identifier: Apache-2.0 */
/* WebSocket (RFC 6455): handshake helpers, the frame codec (server and client side), and
 * a server connection on the socket that http_req_upgrade hands over. Loop thread only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/str.h"
#include "http/server.h"

#define HTTP_WS_ACCEPT_LEN 28 /* base64 of a SHA-1 digest */
#define HTTP_WS_MAX_HEADER 14 /* largest frame header */

enum http_ws_opcode {
    HTTP_WS_CONT = 0x0,
    HTTP_WS_TEXT = 0x1,
    HTTP_WS_BINARY = 0x2,
    HTTP_WS_CLOSE = 0x8,
    HTTP_WS_PING = 0x9,
    HTTP_WS_PONG = 0xA,
};

/** Computes Sec-WebSocket-Accept for the client's key into out (NUL-terminated). */
void http_ws_accept_key(struct str key, char out[HTTP_WS_ACCEPT_LEN + 1]);
/** Checks that req is a WebSocket opening handshake (GET, Upgrade: websocket, Connection:
 * upgrade, Sec-WebSocket-Version: 13, a 16-byte base64 key). Returns 0 or -EINVAL with a
 * static reason in *ret_msg. */
int http_ws_check_request(struct http_req *req, const char **ret_msg);

/** A parsed frame header. */
struct http_ws_frame {
    bool fin;
    uint8_t opcode;
    bool masked;
    uint8_t mask[4];
    uint64_t len;      /* payload length */
    size_t header_len; /* bytes of the header */
};

/** Parses a frame header from p[0..n). Returns the header length (> 0), 0 when more bytes
 * are needed, -EPROTO (reserved bits, bad opcode, bad control frame) or -E2BIG (payload
 * over max_payload). *ret is written only on success. */
int http_ws_parse_header(const uint8_t *p, size_t n, uint64_t max_payload,
                         struct http_ws_frame *ret);
/** Checks the (unmasked) payload of a close frame from a peer: empty, or a code a peer
 * may send (1000-1003, 1007-1014, 3000-4999) and a UTF-8 reason. Returns 0 with *ret_code
 * (0 for an empty payload), or -EPROTO (a 1-byte payload, a reserved code such as 0,
 * 1005 or 1006, or a reason that is not UTF-8): the answer is a 1002 close. */
int http_ws_check_close(const uint8_t *p, size_t n, uint16_t *ret_code);
/** XORs p[0..n) with mask, starting at payload offset off. */
void http_ws_unmask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t off);
/** Writes a frame header into out; mask NULL for server frames (unmasked). Returns its
 * length. */
size_t http_ws_build_header(uint8_t opcode, bool fin, uint64_t len, const uint8_t *mask,
                            uint8_t out[HTTP_WS_MAX_HEADER]);

struct http_ws;

/** Connection events, on the loop thread. */
struct http_ws_ops {
    /** A complete message (text or binary; data borrowed for the call). */
    void (*message)(struct http_ws *ws, uint8_t opcode, struct str data, void *ctx);
    /** The write queue drained below half after http_ws_send returned 1 (optional). */
    void (*drain)(struct http_ws *ws, void *ctx);
    /** The connection is gone (code from the peer's close frame, 1006 without one). Last
     * event: ws is freed after it returns. */
    void (*closed)(struct http_ws *ws, int code, void *ctx);
};

struct http_ws_opts {
    size_t max_message;  /* largest message; larger ones close with 1009 */
    size_t write_queue;  /* queued bytes before http_ws_send returns 1; when a
                          * frame's answers fill it, the peer is not read until
                          * it drains to half */
    usec_t idle_timeout; /* no frame from the peer for this long: close (0: none) */
    /* No complete message from the peer this long after the handshake: close with 1008
     * (bytes that trickle in do not extend it; idle_timeout counts from that message on).
     * 0: none. */
    usec_t first_message_timeout;
    /* Queued frames the peer takes no byte of for this long (no write completes and the
     * socket's queue stays the same: a peer that stopped reading, or is gone without a
     * reset): the connection is torn down (close code 1006). 0: none. */
    usec_t write_stall;
    const struct http_ws_ops *ops; /* borrowed; must outlive ws */
    void *ctx;
};

/** Completes the handshake of req (checked with http_ws_check_request first) through
 * http_req_upgrade and returns the connection at once; sends made before the socket is
 * handed over are queued. opts is borrowed (copied). Returns 0 with *ret (valid until the
 * closed event returns), or a negative errno (nothing sent: the caller responds). */
int http_ws_accept(struct http_req *req, const struct http_ws_opts *opts, struct http_ws **ret);
/** Sends one message (data copied). Returns 0, 1 when the queue is over the limit (wait for
 * drain), or -EPIPE when closing. */
int http_ws_send(struct http_ws *ws, uint8_t opcode, const void *data, size_t len);
/** Sends a close frame (code, reason borrowed) and closes after the queued writes. */
void http_ws_close(struct http_ws *ws, uint16_t code, const char *reason);
/** Stops (true) or resumes reading from the peer. */
void http_ws_pause(struct http_ws *ws, bool pause);
