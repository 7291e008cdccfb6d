/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for background processes: the input is split at its first two NUL
 * bytes into the path after /v1/processes/ and the query of the output and wait
 * endpoints, both parsed as sandboxd does; the rest drives the output ring (each
 * operation: a tag byte, a length byte, then up to that many data bytes, the length
 * scaled so that appends larger than the ring happen). Invariants: a parsed id is
 * non-zero, a parsed timeout lies in [0, 86400] or is the "until the exit" default, the
 * ring's charge stays within its limit, and walking the ring from offset 0 yields
 * increasing offsets ending at its end with the dropped bytes accounted for. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "sandboxd/api_bg.h"
#include "sandboxd/bgring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define RING_LIMIT (16u * 1024)

static struct str part(const char **p, const char *end)
{
    const char *z = *p < end ? memchr(*p, '\0', (size_t)(end - *p)) : NULL;
    size_t n = z ? (size_t)(z - *p) : (size_t)(end - *p);
    struct str s = str_make(*p, n);
    *p += n + (z ? 1 : 0);
    return s;
}

static void check_parsers(struct str path, struct str query)
{
    uint32_t id = 0;
    struct str action;
    if (sbd_bg_target_parse(path, &id, &action) == 0)
        ASSERT(id != 0 && action.len <= path.len);
    struct sbd_bg_query q;
    const char *msg = NULL;
    if (sbd_bg_query_parse(query, &q, &msg) == 0)
        ASSERT(q.timeout_s == -1 || (q.timeout_s >= 0 && q.timeout_s <= 86400));
    else
        ASSERT(msg != NULL);
}

static void check_ring(const struct sbd_ring *r)
{
    ASSERT(sbd_ring_used(r) <= RING_LIMIT);
    uint64_t off = 0, seen = 0, lost = 0;
    struct sbd_ring_slice s;
    while (sbd_ring_next(r, off, 1000, &s)) {
        ASSERT(s.offset == off + s.dropped && s.len > 0 && s.len <= 1000);
        lost += s.dropped;
        seen += s.len;
        off = s.offset + s.len;
    }
    ASSERT(off <= sbd_ring_end(r) && seen + lost == off);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *end = p + size;
    struct str path = part(&p, end);
    struct str query = part(&p, end);
    check_parsers(path, query);
    struct sbd_ring *r = sbd_ring_new(RING_LIMIT);
    char *scratch = xmalloc(256u * 128);
    while (end - p >= 2) {
        int tag = 1 + (p[0] & 1);
        size_t n = (size_t)(uint8_t)p[1] * ((p[0] & 2) ? 128 : 1);
        p += 2;
        size_t have = (size_t)(end - p) < n ? (size_t)(end - p) : n;
        memset(scratch, 'x', n);
        memcpy(scratch, p, have);
        sbd_ring_append(r, tag, scratch, n);
        p += have;
        check_ring(r);
    }
    xfree(scratch);
    sbd_ring_free(r);
    return 0;
}
