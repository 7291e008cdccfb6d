/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the HTTP head parsers and the chunked decoder. Build with clang:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Isrc \
 *     fuzz/fuzz_http_parser.c src/http/parse.c src/http/chunked.c src/common/str.c \
 *     src/common/buf.c \
 *     src/common/xalloc.c src/common/log.c src/common/clock.c -o fuzz_http_parser
 * Invariants checked: results are independent of how the input is split, slices stay
 * inside the input, and the decoder always makes progress. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "http/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_slice(struct str s, const char *buf, size_t len)
{
    ASSERT(s.len == 0 || (s.p >= buf && s.p + s.len <= buf + len));
}

static void check_head(const struct http_head *h, const char *buf, size_t len)
{
    for (size_t i = 0; i < h->num_headers; i++) {
        check_slice(h->headers[i].name, buf, len);
        check_slice(h->headers[i].value, buf, len);
        ASSERT(h->headers[i].name.len > 0);
    }
    check_slice(h->method, buf, len);
    check_slice(h->target, buf, len);
    ASSERT(h->head_len <= len);
}

/* Whole input vs. growing prefixes with the rescan hint. */
static void fuzz_request(const char *buf, size_t len)
{
    struct http_head h, h2;
    struct http_parse_err e = {0}, e2 = {0};
    int want = http_parse_request(buf, len, 0, &h, &e);
    if (want > 0)
        check_head(&h, buf, len);
    size_t last = 0, step = len / 7 + 1;
    for (size_t k = step; k < len; k += step) {
        int r = http_parse_request(buf, k, last, &h2, &e2);
        ASSERT(r == 0 || r == want);
        last = r == 0 ? k : 0;
        if (r != 0)
            break;
    }
}

static void fuzz_response(const char *buf, size_t len)
{
    struct http_head h;
    int r = http_parse_response(buf, len, 0, (unsigned)(len & 1), &h, NULL);
    if (r > 0)
        check_head(&h, buf, len);
}

/* Decodes in one go and in small pieces; both must agree. */
static uint64_t decode(const char *buf, size_t len, size_t piece, int *ret)
{
    struct http_chunked c;
    http_chunked_init(&c);
    uint64_t total = 0;
    size_t off = 0;
    int r = 0;
    while (off < len && r == 0) {
        size_t n = piece && len - off > piece ? piece : len - off, used = 0;
        struct str d;
        r = http_chunked_feed(&c, buf + off, n, &used, &d, NULL);
        if (r < 0)
            break;
        ASSERT(used > 0 || r == 1);
        ASSERT(used <= n && d.len <= used);
        total += d.len;
        off += used;
    }
    *ret = r;
    return total;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = xmalloc(size ? size : 1); /* exact size: ASan sees overreads */
    memcpy(buf, data, size);
    fuzz_request(buf, size);
    fuzz_response(buf, size);
    int r1, r2;
    uint64_t a = decode(buf, size, 0, &r1), b = decode(buf, size, 3, &r2);
    ASSERT(r1 == r2 || (r1 < 0 && r2 < 0) || r1 == 0 || r2 == 0);
    if (r1 == 1 && r2 == 1)
        ASSERT(a == b);
    xfree(buf);
    return 0;
}
