/* SPDX-License-Identifier: Apache-2.0 */
/* Strict HTTP/1.1 head parser and chunked decoder (RFC 9110/9112). Anything ambiguous
 * that could let two parsers disagree about message framing is rejected. */
#include "http/parse.h"

#include <errno.h>
#include <string.h>

#include "common/limits.h"

/* Maps the status a server would answer with to our errno convention. */
static int fail(struct http_parse_err *reterr, int status, const char *msg, size_t pos)
{
    if (reterr)
        *reterr = (struct http_parse_err){.status = status, .msg = msg, .pos = pos};
    if (status == 414 || status == 431)
        return -E2BIG;
    if (status == 501 || status == 505)
        return -ENOTSUP;
    return -EPROTO;
}

bool http_is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Visible ASCII except '#' (a fragment never belongs in a request-target). */
static bool is_target_char(unsigned char c)
{
    return c > 0x20 && c < 0x7f && c != '#';
}

/* field-vchar, SP, HTAB and obs-text; every other control byte (NUL, CR, LF) is not. */
static bool is_value_char(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

const struct http_header *http_head_find(const struct http_head *h, const char *name)
{
    struct str n = str_c(name);
    for (size_t i = 0; i < h->num_headers; i++)
        if (str_eq_nocase(h->headers[i].name, n))
            return &h->headers[i];
    return NULL;
}

/* Skips the empty lines a client may send before a request-line (RFC 9112 2.2). */
static size_t skip_empty_lines(const char *b, size_t len)
{
    size_t pos = 0;
    while (pos + 1 < len && b[pos] == '\r' && b[pos + 1] == '\n')
        pos += 2;
    return pos;
}

/* "HTTP/" DIGIT "." DIGIT; only 1.0 and 1.1 are supported. */
static int parse_version(const char *b, size_t len, size_t *pos, int *ret_minor,
                         struct http_parse_err *e)
{
    static const char pat[] = "HTTP/d.d";
    size_t p = *pos;
    for (size_t i = 0; i < 8; i++, p++) {
        if (p == len)
            return 0;
        char c = b[p];
        bool ok = pat[i] == 'd' ? (c >= '0' && c <= '9') : c == pat[i];
        if (!ok)
            return fail(e, 400, "invalid HTTP version", p);
    }
    if (b[*pos + 5] != '1' || b[*pos + 7] > '1')
        return fail(e, 505, "HTTP version not supported", *pos);
    *ret_minor = b[*pos + 7] - '0';
    *pos = p;
    return 1;
}

/* Expects CR LF at *pos. */
static int parse_crlf(const char *b, size_t len, size_t *pos, struct http_parse_err *e)
{
    size_t p = *pos;
    if (p == len)
        return 0;
    if (b[p] != '\r')
        return fail(e, 400, "invalid line ending", p);
    if (p + 1 == len)
        return 0;
    if (b[p + 1] != '\n')
        return fail(e, 400, "bare CR", p);
    *pos = p + 2;
    return 1;
}

/* Scans a run of characters accepted by ok, which must be non-empty and end in SP. */
static int scan_word(const char *b, size_t len, size_t *pos, bool (*ok)(unsigned char),
                     struct str *ret, const char *msg, struct http_parse_err *e)
{
    size_t start = *pos, p = start;
    while (p < len && ok((unsigned char)b[p]))
        p++;
    if (p == len)
        return 0;
    if (p == start || b[p] != ' ')
        return fail(e, 400, msg, p);
    *ret = str_make(b + start, p - start);
    *pos = p + 1;
    return 1;
}

/* method SP request-target SP HTTP-version CRLF. Returns 1 with *ret_end after the LF,
 * 0 when the line is incomplete so far, negative on error (even on a partial line). */
static int parse_request_line(const char *b, size_t len, size_t pos, struct http_head *h,
                              size_t *ret_end, struct http_parse_err *e)
{
    int r = scan_word(b, len, &pos, http_is_tchar, &h->method, "invalid method", e);
    if (r <= 0)
        return r;
    r = scan_word(b, len, &pos, is_target_char, &h->target, "invalid request target", e);
    if (r <= 0)
        return r;
    r = parse_version(b, len, &pos, &h->minor_version, e);
    if (r <= 0)
        return r;
    r = parse_crlf(b, len, &pos, e);
    if (r <= 0)
        return r;
    *ret_end = pos;
    return 1;
}

/* Strips "http://authority" or "https://authority" from an absolute-form target. */
static bool strip_absolute(struct str t, struct str *ret_rest)
{
    size_t skip;
    if (t.len >= 7 && str_eq_nocase(str_make(t.p, 7), STR_LIT("http://")))
        skip = 7;
    else if (t.len >= 8 && str_eq_nocase(str_make(t.p, 8), STR_LIT("https://")))
        skip = 8;
    else
        return false;
    size_t end = skip;
    while (end < t.len && t.p[end] != '/' && t.p[end] != '?')
        end++;
    if (end == skip)
        return false;
    *ret_rest = str_make(t.p + end, t.len - end);
    return true;
}

/* Derives path and query from the request-target (origin, absolute, asterisk or, for
 * CONNECT, authority form). */
static int split_target(struct http_head *h, size_t pos, struct http_parse_err *e)
{
    struct str t = h->target, rest;
    if (str_eq_c(h->method, "CONNECT"))
        return 0; /* authority-form: no path; servers answer 501 */
    if (t.len == 1 && t.p[0] == '*') {
        if (!str_eq_c(h->method, "OPTIONS"))
            return fail(e, 400, "asterisk target only with OPTIONS", pos);
        h->path = t;
        return 0;
    }
    if (t.p[0] == '/')
        rest = t;
    else if (!strip_absolute(t, &rest))
        return fail(e, 400, "invalid request target", pos);
    str_cut(rest, '?', &h->path, &h->query);
    if (h->path.len == 0)
        h->path = STR_LIT("/");
    return 0;
}

/* name ":" OWS value OWS CRLF, within [*pos, end). */
static int parse_field(const char *b, size_t end, size_t *pos, struct http_header *f,
                       struct http_parse_err *e)
{
    size_t p = *pos, n = p;
    while (p < end && http_is_tchar((unsigned char)b[p]))
        p++;
    if (p == n || p >= end || b[p] != ':')
        return fail(e, 400, "invalid header name", p);
    f->name = str_make(b + n, p - n);
    p++;
    while (p < end && is_ows(b[p]))
        p++;
    size_t v = p;
    while (p < end && is_value_char((unsigned char)b[p]))
        p++;
    if (p + 1 >= end || b[p] != '\r' || b[p + 1] != '\n')
        return fail(e, 400, p < end && b[p] == '\r' ? "bare CR" : "invalid header value", p);
    size_t ve = p;
    while (ve > v && is_ows(b[ve - 1]))
        ve--;
    f->value = str_make(b + v, ve - v);
    *pos = p + 2;
    return 0;
}

/* Header lines from pos up to and including the empty line that ends at end. */
static int parse_fields(const char *b, size_t pos, size_t end, struct http_head *h,
                        struct http_parse_err *e)
{
    while (pos < end && b[pos] != '\r') {
        if (is_ows(b[pos]))
            return fail(e, 400, "obsolete line folding", pos);
        if (h->num_headers == LIMIT_HTTP_HEADERS)
            return fail(e, 431, "too many header fields", pos);
        int r = parse_field(b, end, &pos, &h->headers[h->num_headers], e);
        if (r < 0)
            return r;
        h->num_headers++;
    }
    if (pos + 2 != end || b[pos + 1] != '\n')
        return fail(e, 400, "malformed header section", pos);
    return 0;
}

/* Finds the CRLF CRLF that ends the head; from is where the header lines start. Bytes
 * that can never be part of a valid head (NUL, bare CR, bare LF) fail early, so a
 * hostile client cannot park a doomed head until the size limit. Returns 1 found, 0
 * not yet, negative on error. */
static int find_head_end(const char *b, size_t len, size_t from, size_t last_len, size_t *ret_end,
                         struct http_parse_err *e)
{
    size_t i = from >= 2 ? from - 2 : 0;
    if (last_len > 3 && last_len - 3 > i)
        i = last_len - 3;
    for (; i < len; i++) {
        char c = b[i];
        if (c == '\0')
            return fail(e, 400, "NUL in header section", i);
        if (c == '\n' && b[i - 1] != '\r')
            return fail(e, 400, "bare LF", i);
        if (c != '\r' || i + 1 == len)
            continue;
        if (b[i + 1] != '\n')
            return fail(e, 400, "bare CR", i);
        if (i + 3 < len && b[i + 2] == '\r' && b[i + 3] == '\n') {
            *ret_end = i + 4;
            return 1;
        }
    }
    return 0;
}

/* What the framing-relevant fields say, collected over all header lines. */
struct fields {
    bool have_cl, have_te, te_chunked, te_other, close, keep_alive, upgrade, expect;
    uint64_t cl;
    unsigned hosts;
};

/* Next element of a comma-separated list, trimmed; false at the end. */
static bool next_elem(struct str *list, struct str *ret)
{
    if (list->len == 0)
        return false;
    struct str head, tail;
    str_cut(*list, ',', &head, &tail);
    *ret = str_trim(head);
    *list = tail;
    return true;
}

static int add_cl(struct fields *f, struct str v, size_t pos, struct http_parse_err *e)
{
    uint64_t n;
    if (str_to_u64(v, &n) < 0)
        return fail(e, 400, "invalid Content-Length", pos);
    if (f->have_cl && n != f->cl)
        return fail(e, 400, "conflicting Content-Length", pos);
    f->have_cl = true;
    f->cl = n;
    return 0;
}

/* transfer-coding list; "chunked" must be last and appear once. */
static int add_te(struct fields *f, struct str v, size_t pos, struct http_parse_err *e)
{
    struct str el, name, params;
    f->have_te = true;
    if (v.len == 0 || v.p[v.len - 1] == ',')
        return fail(e, 400, "empty transfer coding", pos);
    while (next_elem(&v, &el)) {
        str_cut(el, ';', &name, &params);
        name = str_trim(name);
        for (size_t i = 0; i < name.len; i++)
            if (!http_is_tchar((unsigned char)name.p[i]))
                return fail(e, 400, "invalid Transfer-Encoding", pos);
        if (name.len == 0 || f->te_chunked)
            return fail(e, 400, "chunked must be the final transfer coding", pos);
        if (str_eq_nocase(name, STR_LIT("chunked")))
            f->te_chunked = true;
        else
            f->te_other = true;
    }
    return 0;
}

static void add_connection(struct fields *f, struct str v)
{
    struct str el;
    while (next_elem(&v, &el)) {
        if (str_eq_nocase(el, STR_LIT("close")))
            f->close = true;
        else if (str_eq_nocase(el, STR_LIT("keep-alive")))
            f->keep_alive = true;
        else if (str_eq_nocase(el, STR_LIT("upgrade")))
            f->upgrade = true;
    }
}

static int scan_fields(const struct http_head *h, const char *b, struct fields *f,
                       struct http_parse_err *e)
{
    for (size_t i = 0; i < h->num_headers; i++) {
        struct str n = h->headers[i].name, v = h->headers[i].value;
        size_t pos = (size_t)(n.p - b);
        int r = 0;
        if (str_eq_nocase(n, STR_LIT("content-length")))
            r = add_cl(f, v, pos, e);
        else if (str_eq_nocase(n, STR_LIT("transfer-encoding")))
            r = add_te(f, v, pos, e);
        else if (str_eq_nocase(n, STR_LIT("host")))
            f->hosts++;
        else if (str_eq_nocase(n, STR_LIT("connection")))
            add_connection(f, v);
        else if (str_eq_nocase(n, STR_LIT("expect")))
            f->expect = f->expect || str_eq_nocase(v, STR_LIT("100-continue"));
        if (r < 0)
            return r;
    }
    return 0;
}

static int request_semantics(struct http_head *h, const char *b, size_t end,
                             struct http_parse_err *e)
{
    struct fields f = {0};
    int r = scan_fields(h, b, &f, e);
    if (r < 0)
        return r;
    if (f.hosts > 1 || (h->minor_version == 1 && f.hosts == 0))
        return fail(e, 400, "exactly one Host header required", end);
    if (f.have_te && h->minor_version == 0)
        return fail(e, 400, "Transfer-Encoding in HTTP/1.0", end);
    if (f.have_te && f.have_cl)
        return fail(e, 400, "both Content-Length and Transfer-Encoding", end);
    if (f.have_te && !f.te_chunked)
        return fail(e, 400, "chunked must be the final transfer coding", end);
    if (f.te_other)
        return fail(e, 501, "transfer coding not implemented", end);
    h->body = f.have_te ? HTTP_BODY_CHUNKED : (f.cl ? HTTP_BODY_LENGTH : HTTP_BODY_NONE);
    h->content_length = f.cl;
    h->keep_alive = !f.close && (h->minor_version == 1 || f.keep_alive);
    h->expect_continue = f.expect && h->minor_version == 1;
    h->upgrade = f.upgrade;
    return 0;
}

/* Checks length limits of an incomplete head. */
static int incomplete(size_t len, size_t start, bool have_line, struct http_parse_err *e)
{
    if (!have_line && len - start > LIMIT_HTTP_REQUEST_LINE)
        return fail(e, 414, "request line too long", start);
    if (len > LIMIT_HTTP_HEADER_BYTES)
        return fail(e, 431, "request header section too large", LIMIT_HTTP_HEADER_BYTES);
    return 0;
}

int http_parse_request(const char *buf, size_t len, size_t last_len, struct http_head *ret,
                       struct http_parse_err *reterr)
{
    struct http_head h = {0};
    size_t start = skip_empty_lines(buf, len), line_end = 0, end = 0;
    if (start + 1 == len && buf[start] == '\r')
        return 0;
    int r = parse_request_line(buf, len, start, &h, &line_end, reterr);
    if (r < 0)
        return r;
    if (r == 0)
        return incomplete(len, start, false, reterr);
    if (line_end - start > LIMIT_HTTP_REQUEST_LINE)
        return fail(reterr, 414, "request line too long", start);
    r = find_head_end(buf, len, line_end, last_len, &end, reterr);
    if (r <= 0)
        return r < 0 ? r : incomplete(len, start, true, reterr);
    if (end > LIMIT_HTTP_HEADER_BYTES)
        return fail(reterr, 431, "request header section too large", LIMIT_HTTP_HEADER_BYTES);
    r = parse_fields(buf, line_end, end, &h, reterr);
    if (r >= 0)
        r = split_target(&h, start, reterr);
    if (r >= 0)
        r = request_semantics(&h, buf, end, reterr);
    if (r < 0)
        return r;
    h.head_len = end;
    *ret = h;
    return (int)end;
}

/* HTTP-version SP 3DIGIT [SP reason] CRLF */
static int parse_status_line(const char *b, size_t len, struct http_head *h, size_t *ret_end,
                             struct http_parse_err *e)
{
    size_t p = 0;
    int r = parse_version(b, len, &p, &h->minor_version, e);
    if (r <= 0)
        return r;
    for (size_t i = 0; i < 4; i++, p++) {
        if (p == len)
            return 0;
        bool ok = i == 0 ? b[p] == ' ' : (b[p] >= '0' && b[p] <= '9');
        if (!ok)
            return fail(e, 400, "invalid status code", p);
    }
    h->status = (b[p - 3] - '0') * 100 + (b[p - 2] - '0') * 10 + (b[p - 1] - '0');
    if (h->status < 100)
        return fail(e, 400, "invalid status code", p);
    if (p < len && b[p] != ' ' && b[p] != '\r')
        return fail(e, 400, "invalid status code", p);
    size_t rs = p < len && b[p] == ' ' ? p + 1 : p;
    for (p = rs; p < len && is_value_char((unsigned char)b[p]); p++)
        ;
    h->reason = str_make(b + rs, p - rs);
    r = parse_crlf(b, len, &p, e);
    if (r <= 0)
        return r;
    *ret_end = p;
    return 1;
}

static int response_semantics(struct http_head *h, const char *b, unsigned flags,
                              struct http_parse_err *e)
{
    struct fields f = {0};
    int r = scan_fields(h, b, &f, e);
    if (r < 0)
        return r;
    if (f.have_te && f.have_cl)
        return fail(e, 400, "both Content-Length and Transfer-Encoding", h->head_len);
    /* a body in another transfer coding (gzip, chunked) cannot be passed on as it is:
     * its framing and coding would reach the client as content */
    if (f.te_other)
        return fail(e, 502, "a transfer coding other than chunked", h->head_len);
    bool bodyless = (flags & HTTP_PARSE_RESP_TO_HEAD) || h->status < 200 || h->status == 204 ||
                    h->status == 304;
    if (bodyless)
        h->body = HTTP_BODY_NONE;
    else if (f.have_te)
        h->body = HTTP_BODY_CHUNKED;
    else if (f.have_cl)
        h->body = f.cl ? HTTP_BODY_LENGTH : HTTP_BODY_NONE;
    else
        h->body = HTTP_BODY_UNTIL_CLOSE;
    h->content_length = f.cl;
    h->keep_alive =
        !f.close && (h->minor_version == 1 || f.keep_alive) && h->body != HTTP_BODY_UNTIL_CLOSE;
    h->upgrade = f.upgrade;
    return 0;
}

int http_parse_response(const char *buf, size_t len, size_t last_len, unsigned flags,
                        struct http_head *ret, struct http_parse_err *reterr)
{
    struct http_head h = {0};
    size_t line_end = 0, end = 0;
    int r = parse_status_line(buf, len, &h, &line_end, reterr);
    if (r < 0)
        return r;
    if (r > 0)
        r = find_head_end(buf, len, line_end, last_len, &end, reterr);
    if (r < 0)
        return r;
    if (r == 0) {
        if (len > LIMIT_HTTP_HEADER_BYTES)
            return fail(reterr, 431, "response header section too large", 0);
        return 0;
    }
    if (end > LIMIT_HTTP_HEADER_BYTES)
        return fail(reterr, 431, "response header section too large", 0);
    h.head_len = end;
    r = parse_fields(buf, line_end, end, &h, reterr);
    if (r >= 0)
        r = response_semantics(&h, buf, flags, reterr);
    if (r < 0)
        return r;
    *ret = h;
    return (int)end;
}
