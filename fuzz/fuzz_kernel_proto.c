/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the kernel driver protocol of sandboxd's code contexts: the
 * driver's stdout is split into lines (bounded) and each line checked as an event. The
 * first byte picks a piece size and the line limit. Invariants: whole and piecewise
 * feeding give the same lines; no line passes the limit; an accepted event is an object
 * whose "type" is a string. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/xalloc.h"
#include "sandboxd/kernel_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct log {
    struct buf text;
    size_t max;
};

static void on_line(void *ctx, const char *line, size_t n, bool cut)
{
    struct log *l = ctx;
    if (cut) {
        (void)buf_putc(&l->text, '#');
        return;
    }
    ASSERT(n <= l->max);
    (void)buf_append(&l->text, line, n);
    (void)buf_putc(&l->text, '\n');
    json_t *ev = NULL;
    enum sbd_kevent kind;
    if (sbd_kevent_parse(line, n, &ev, &kind) == 0) {
        ASSERT(json_is_object(ev));
        ASSERT(json_is_string(json_object_get(ev, "type")));
        ASSERT(kind >= SBD_KEV_READY && kind <= SBD_KEV_END);
        json_decref(ev);
    }
}

static void run(const uint8_t *p, size_t n, size_t piece, size_t max, struct log *l)
{
    struct sbd_kline k;
    sbd_kline_init(&k, max);
    buf_init(&l->text, SIZE_MAX);
    l->max = max;
    for (size_t i = 0; i < n; i += piece)
        sbd_kline_feed(&k, (const char *)p + i, n - i < piece ? n - i : piece, on_line, l);
    sbd_kline_done(&k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = (size_t)(data[0] & 0x0f) + 1, max = (size_t)(data[0] >> 4) * 16 + 8;
    struct log whole, parts;
    run(data + 1, size - 1, size, max, &whole);
    run(data + 1, size - 1, piece, max, &parts);
    ASSERT(whole.text.len == parts.text.len);
    ASSERT(whole.text.len == 0 || memcmp(whole.text.data, parts.text.data, whole.text.len) == 0);
    buf_done(&whole.text);
    buf_done(&parts.text);
    return 0;
}
