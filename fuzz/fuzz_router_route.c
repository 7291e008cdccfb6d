/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the router's request routing and SSRF address checks: the input
 * is split at NUL bytes into a path, a query and header values for X-Sandbox-ID,
 * -Namespace, -Port, -Pod-IP, -UID and -Timeout. Invariants: a routed request has DNS
 * label names, a port in range and a pod IP that passes route_ip_check.
 * Build (clang only, not wired into CMake):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Isrc \
 *     fuzz/fuzz_router_route.c src/router/route.c src/common/str.c src/common/xalloc.c \
 *     src/common/log.c src/common/clock.c src/common/buf.c -lm -o fuzz_router_route */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "router/route.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NPARTS 8

static const char *const names[] = {"X-Sandbox-ID",     "X-Sandbox-Namespace", "X-Sandbox-Port",
                                    "X-Sandbox-Pod-IP", "X-Sandbox-UID",       "X-Sandbox-Timeout"};

static struct str hdr(void *ctx, const char *name)
{
    const struct str *parts = ctx;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcasecmp(names[i], name) == 0)
            return parts[2 + i];
    return STR_NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct str parts[NPARTS];
    const char *p = (const char *)data, *end = p + size;
    for (size_t i = 0; i < NPARTS; i++) {
        const char *z = p < end ? memchr(p, '\0', (size_t)(end - p)) : NULL;
        size_t n = z ? (size_t)(z - p) : (size_t)(end - p);
        parts[i] = (i >= 2 && p >= end) ? STR_NULL : str_make(p < end ? p : "", n);
        p = z ? z + 1 : end;
    }
    struct route_input in = {
        .path = parts[0], .query = parts[1], .header = hdr, .header_ctx = parts};
    struct route r;
    struct route_err e;
    if (route_parse(&in, &r, &e) == 0) {
        if (!route_dns_label(str_c(r.name)) || !route_dns_label(str_c(r.ns)) || r.port == 0)
            abort();
        if (r.pod_ip[0] && route_ip_check(r.pod_ip, true, NULL) != 0)
            abort();
    } else if (e.status != 400 || !e.detail) {
        abort();
    }
    return 0;
}
