/* SPDX-License-Identifier: Apache-2.0 */
#include "router/trace_ctx.h"

#include <string.h>

/* True when p[0..n) are lowercase hex digits and, with nonzero, not all '0'. */
static bool hex_field(const char *p, size_t n, bool nonzero)
{
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
        any |= c != '0';
    }
    return any || !nonzero;
}

bool trace_parse_traceparent(struct str v, char trace_id[TRACE_ID_LEN + 1],
                             char span_id[SPAN_ID_LEN + 1])
{
    /* VV-TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT-SSSSSSSSSSSSSSSS-FF: 2+1+32+1+16+1+2 */
    enum { LEN = 55, T = 3, S = T + TRACE_ID_LEN + 1, F = S + SPAN_ID_LEN + 1 };
    const char *p = v.p;
    trace_id[0] = span_id[0] = '\0';
    if (!p || v.len < LEN || p[2] != '-' || p[S - 1] != '-' || p[F - 1] != '-')
        return false;
    if (!hex_field(p, 2, false) || (p[0] == 'f' && p[1] == 'f'))
        return false;
    bool v00 = p[0] == '0' && p[1] == '0';
    if ((v00 && v.len != LEN) || (!v00 && v.len > LEN && p[LEN] != '-'))
        return false;
    if (!hex_field(p + T, TRACE_ID_LEN, true) || !hex_field(p + S, SPAN_ID_LEN, true) ||
        !hex_field(p + F, 2, false))
        return false;
    memcpy(trace_id, p + T, TRACE_ID_LEN);
    trace_id[TRACE_ID_LEN] = '\0';
    memcpy(span_id, p + S, SPAN_ID_LEN);
    span_id[SPAN_ID_LEN] = '\0';
    return true;
}
