/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the router's traceparent parser (router/trace_ctx.h): any bytes.
 * Invariant: a parsed value yields ids of exactly 32 and 16 lowercase hex digits, not
 * all zero, copied from the input at their fixed offsets. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "router/trace_ctx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_hex(const char *s, size_t n)
{
    bool nonzero = false;
    if (strlen(s) != n)
        abort();
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            abort();
        nonzero |= s[i] != '0';
    }
    if (!nonzero)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char tid[TRACE_ID_LEN + 1], sid[SPAN_ID_LEN + 1];
    struct str v = {(const char *)data, size};
    if (!trace_parse_traceparent(v, tid, sid)) {
        if (tid[0] || sid[0])
            abort();
        return 0;
    }
    check_hex(tid, TRACE_ID_LEN);
    check_hex(sid, SPAN_ID_LEN);
    if (memcmp(tid, data + 3, TRACE_ID_LEN) != 0 || memcmp(sid, data + 36, SPAN_ID_LEN) != 0)
        abort();
    return 0;
}
