/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox port-forward: the answer to the upgrade request and the server's
 * channel frames, both bytes from the API server (pfwd.h). The first byte picks the
 * frame limit; the rest is fed in pieces of varying size. */
#include <stddef.h>
#include <stdint.h>

#include "cli/pfwd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int sink(void *ctx, const uint8_t *p, size_t n)
{
    size_t *total = ctx;
    *total += n;
    (void)p;
    return *total > (1u << 20) ? -1 : 0;
}

static void ping(void *ctx, const uint8_t *p, size_t n)
{
    (void)ctx;
    (void)p;
    (void)n;
}

static const struct cli_pfwd_ops ops = {.data = sink, .ping = ping};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct cli_pfwd_resp resp;
    (void)cli_pfwd_parse_resp((const char *)data, size, "dGhlIHNhbXBsZSBub25jZQ==", &resp);
    size_t total = 0;
    struct cli_pfwd_rx rx;
    cli_pfwd_rx_init(&rx, 8080, 16u + data[0] * 4u, &ops, &total);
    size_t off = 1, step = 1;
    while (off < size) {
        size_t n = size - off < step ? size - off : step;
        if (cli_pfwd_rx_feed(&rx, data + off, n) < 0)
            break;
        off += n;
        step = step * 3 % 97 + 1;
    }
    cli_pfwd_rx_done(&rx);
    return 0;
}
