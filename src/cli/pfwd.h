/* SPDX-License-Identifier: Apache-2.0 */
/* The client side of the Kubernetes WebSocket port-forward protocol
 * (GET /api/v1/namespaces/NS/pods/POD/portforward?ports=P, subprotocol
 * v4.channel.k8s.io), without I/O so it can be tested byte for byte:
 *   - the opening handshake (request text and the check of the 101 answer);
 *   - frames to the server: masked binary frames whose first payload byte is the channel
 *     (0: data of the first port);
 *   - frames from the server: channel 0 carries the port's data, channel 1 an error text;
 *     the first two bytes of each channel are the port number, little-endian, and are
 *     checked and dropped. Text frames would mean the base64 variant, which is not asked
 *     for, and are refused. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define CLI_PFWD_PROTOCOL  "v4.channel.k8s.io"
#define CLI_PFWD_KEY_LEN   24 /* base64 of 16 random bytes */
#define CLI_PFWD_CH_DATA   0
#define CLI_PFWD_CH_ERROR  1
#define CLI_PFWD_MAX_ERROR 4096 /* error text kept from channel 1 */

/** Parses "[LOCAL:]REMOTE" as kubectl: "P" is P on both sides, ":P" and "0:P" a free
 * local port (0). Returns 0 with both ports written, or -EINVAL (not numbers, REMOTE 0,
 * a port over 65535). */
int cli_pfwd_parse_spec(const char *spec, unsigned *ret_local, unsigned *ret_remote);

/** What the opening request needs. All strings borrowed. */
struct cli_pfwd_req {
    const char *host_port;     /* Host header: host[:port] of the API server */
    const char *path_prefix;   /* the server URL's path ("" or e.g. "/k8s/clusters/c1") */
    const char *ns, *pod;      /* DNS names: checked, not escaped */
    unsigned port;             /* remote port */
    const char *authorization; /* the Authorization header value, or NULL */
    const char *key;           /* Sec-WebSocket-Key (CLI_PFWD_KEY_LEN characters) */
};

/** Appends the HTTP/1.1 upgrade request to out. Returns 0, -EINVAL (a namespace or pod
 * name with characters outside [a-z0-9.-], a bad port, a header value with CR/LF) or
 * -E2BIG. */
int cli_pfwd_request(const struct cli_pfwd_req *q, struct buf *out);

/** The answer to the opening request. */
struct cli_pfwd_resp {
    int status;          /* HTTP status */
    size_t head_len;     /* bytes of the status line and headers (with the blank line) */
    bool upgraded;       /* 101 with the right Upgrade, Sec-WebSocket-Accept, protocol */
    const char *problem; /* static text when 101 came but is not acceptable */
    long body_len;       /* Content-Length, or -1 when absent or not a number */
};

/** Parses the response head in p[0..n) for the request sent with key. Returns 1 when the
 * head is complete (*ret filled; a non-101 status is not an error here: its body
 * follows), 0 when more bytes are needed, or -EPROTO for something that is not an HTTP
 * response head. */
int cli_pfwd_parse_resp(const char *p, size_t n, const char *key, struct cli_pfwd_resp *ret);

/** Appends one masked client frame (opcode, fin) with the channel byte (when channel >=
 * 0) and data to out. Returns 0 or -E2BIG. */
int cli_pfwd_frame(int opcode, int channel, const void *data, size_t len, const uint8_t mask[4],
                   struct buf *out);

/** Callbacks of the frame reader. */
struct cli_pfwd_ops {
    /** Data of the forwarded port (channel 0, after its port prefix). Returns 0 or a
     * negative errno that stops the reader. */
    int (*data)(void *ctx, const uint8_t *p, size_t n);
    /** A ping: answer with a pong carrying p. */
    void (*ping)(void *ctx, const uint8_t *p, size_t n);
};

/** Reads the server's frames. Bounded: a frame payload over max_frame fails. */
struct cli_pfwd_rx {
    struct buf in;                  /* bytes of an incomplete frame */
    uint64_t max_frame;             /* largest frame payload accepted */
    unsigned port;                  /* the port expected in the prefixes */
    int msg_channel;                /* channel of the message being read (fragments), -1 */
    uint8_t prefix[2][2];           /* the port prefix bytes read so far, per channel */
    uint8_t prefix_len[2];          /* how many of them */
    struct buf error;               /* error text of channel 1 (CLI_PFWD_MAX_ERROR) */
    bool closed;                    /* a close frame came */
    uint16_t close_code;            /* its code (0 when it had none) */
    const struct cli_pfwd_ops *ops; /* borrowed */
    void *ctx;
};

/** Initialises rx for remote port port; ops borrowed. */
void cli_pfwd_rx_init(struct cli_pfwd_rx *rx, unsigned port, uint64_t max_frame,
                      const struct cli_pfwd_ops *ops, void *ctx);
void cli_pfwd_rx_done(struct cli_pfwd_rx *rx);
/** Feeds n bytes from the server. Returns 0, or a negative errno: -EPROTO (a masked
 * frame, a text frame, a bad channel, a wrong port prefix, a malformed header), -E2BIG (a
 * frame over the limit), or the data callback's error. Bytes after a close frame are
 * ignored. */
int cli_pfwd_rx_feed(struct cli_pfwd_rx *rx, const void *p, size_t n);
/** Whether channel 1 carried an error text (in rx->error). */
bool cli_pfwd_rx_has_error(const struct cli_pfwd_rx *rx);
