/* SPDX-License-Identifier: Apache-2.0 */
/* Strict incremental HTTP/1.1 message-head parser (request and response) and chunked
 * body decoder. Zero-copy: every slice points into the caller's buffer. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"
#include "common/str.h"

/** One header field; name and value are slices into the parsed buffer (value trimmed). */
struct http_header {
    struct str name;
    struct str value;
};

/** How the body of a message is delimited. */
enum http_body_kind {
    HTTP_BODY_NONE = 0,    /* no body */
    HTTP_BODY_LENGTH,      /* content_length bytes */
    HTTP_BODY_CHUNKED,     /* chunked transfer coding */
    HTTP_BODY_UNTIL_CLOSE, /* responses only: until the connection closes */
};

/** Parse failure detail. status is the HTTP status a server should answer with
 * (400, 414, 431, 501, 505); msg is a static string compared by identity; pos is the
 * byte offset in the buffer where the problem was found. */
struct http_parse_err {
    int status;
    const char *msg;
    size_t pos;
};

/** A parsed message head. Request fields (method...query) are empty for responses and
 * response fields (status, reason) are zero for requests. */
struct http_head {
    struct str method;
    struct str target; /* request-target as sent */
    struct str path;   /* origin path (from absolute-form too), without query */
    struct str query;  /* after '?', without it; empty when absent */
    int status;
    struct str reason;
    int minor_version; /* 0 or 1 (HTTP/1.x) */
    struct http_header headers[LIMIT_HTTP_HEADERS];
    size_t num_headers;
    size_t head_len; /* bytes of the head including the final CRLF CRLF */
    enum http_body_kind body;
    uint64_t content_length; /* valid when body == HTTP_BODY_LENGTH */
    bool keep_alive;         /* connection may be reused after this message */
    bool expect_continue;    /* request: Expect: 100-continue (HTTP/1.1 only) */
    bool upgrade;            /* Connection: upgrade was present */
};

/** Flags for http_parse_response. */
enum {
    HTTP_PARSE_RESP_TO_HEAD = 1u << 0, /* the request was HEAD: the response has no body */
};

/** Parses a request head from buf (borrowed; the slices in *ret point into it).
 * last_len is the length of buf at a previous call on the same message that returned 0
 * (0 on the first call); it only avoids rescanning. Leading empty lines are skipped.
 * Returns the head length (> 0) when complete and valid, 0 when more bytes are needed,
 * or a negative errno (-EPROTO malformed, -E2BIG a limit, -ENOTSUP unsupported) with
 * *reterr (optional) filled. *ret is written only when complete. */
int http_parse_request(const char *buf, size_t len, size_t last_len, struct http_head *ret,
                       struct http_parse_err *reterr);

/** Parses a response head, like http_parse_request. flags: HTTP_PARSE_RESP_*. */
int http_parse_response(const char *buf, size_t len, size_t last_len, unsigned flags,
                        struct http_head *ret, struct http_parse_err *reterr);

/** Returns the first header named name (ASCII case-insensitive) or NULL; borrowed. */
const struct http_header *http_head_find(const struct http_head *h, const char *name);

/** Incremental chunked-body decoder state; embed it and call http_chunked_init. */
struct http_chunked {
    int state;
    uint64_t remaining;   /* data bytes left in the current chunk */
    size_t line_len;      /* bytes of the current size or trailer line */
    size_t trailer_bytes; /* bytes of trailer section so far */
    unsigned trailers;    /* trailer fields so far */
};

void http_chunked_init(struct http_chunked *c);

/** Feeds len bytes of chunked body from p (borrowed). Consumes bytes until a run of data
 * is found, the input ends, or the body ends. *ret_used is the number of bytes consumed;
 * *ret_data is the data found (a slice into p, possibly empty). Returns 1 when the body
 * (last chunk and trailers) is complete (bytes after *ret_used belong to the next
 * message), 0 when more input is wanted, or -EPROTO / -E2BIG with *reterr (optional).
 * With len > 0 it always consumes at least one byte unless the body is complete. */
int http_chunked_feed(struct http_chunked *c, const char *p, size_t len, size_t *ret_used,
                      struct str *ret_data, struct http_parse_err *reterr);

/** True for RFC 9110 token characters (method, header name, transfer-coding). */
bool http_is_tchar(unsigned char c);
