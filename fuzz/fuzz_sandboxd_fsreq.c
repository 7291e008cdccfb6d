/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the request parsers of sandboxd's filesystem operations
 * (sandboxd/fsreq.h). The first byte picks the parser: 'm' move body, 'b' batch body,
 * 'r' read-window query, 'k' mkdir query, 'w' watch query, 'l' listing query, 'o' octal
 * mode; the rest is the input. Invariants: a parse either fails with a reason and nothing to free,
 * or gives fields within their documented bounds. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/xalloc.h"
#include "sandboxd/fsreq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_move(struct str in)
{
    struct sbd_move_req m;
    const char *err = NULL;
    int r = sbd_move_req_parse(in, &m, &err);
    if (r < 0) {
        ASSERT(r == -EINVAL && err && !m.from && !m.to);
        return;
    }
    ASSERT(m.from && *m.from && strlen(m.from) <= LIMIT_SBD_PATH);
    ASSERT(m.to && *m.to && strlen(m.to) <= LIMIT_SBD_PATH);
    sbd_move_req_done(&m);
}

static void check_batch(struct str in)
{
    struct sbd_batch_req b;
    const char *err = NULL;
    const uint64_t max_file = 64;
    int r = sbd_batch_req_parse(in, max_file, &b, &err);
    if (r < 0) {
        ASSERT((r == -EINVAL || r == -E2BIG) && err && b.n == 0 && !b.files);
        return;
    }
    ASSERT(b.n >= 1 && b.n <= LIMIT_SBD_BATCH_FILES);
    for (size_t i = 0; i < b.n; i++) {
        ASSERT(b.files[i].path && *b.files[i].path);
        ASSERT(b.files[i].data.len <= max_file);
        ASSERT(b.files[i].mode <= 07777);
    }
    sbd_batch_req_done(&b);
}

static void check_queries(char kind, struct str in)
{
    const char *err = NULL;
    if (kind == 'r') {
        struct sbd_read_window w;
        int r = sbd_read_window_parse(in, &w, &err);
        ASSERT(r == 0 || (r == -EINVAL && err));
    } else if (kind == 'k') {
        struct sbd_mkdir_opts o;
        int r = sbd_mkdir_opts_parse(in, &o, &err);
        ASSERT(r == -EINVAL ? err != NULL : (r == 0 && o.mode <= 07777));
    } else if (kind == 'w') {
        struct sbd_watch_opts o;
        int r = sbd_watch_opts_parse(in, &o, &err);
        ASSERT(r == -EINVAL ? err != NULL
                            : (r == 0 && o.queue >= LIMIT_SBD_WATCH_QUEUE_MIN &&
                               o.queue <= LIMIT_SBD_WATCH_QUEUE));
    } else if (kind == 'l') {
        struct sbd_list_opts o;
        int r = sbd_list_opts_parse(in, &o, &err);
        ASSERT(r == -EINVAL ? err != NULL
                            : (r == 0 && o.limit >= 1 && o.limit <= LIMIT_SBD_LISTING &&
                               (!o.has_after || (o.after[0] && !strchr(o.after, '/') &&
                                                 strlen(o.after) < sizeof(o.after)))));
    } else if (kind == 'o') {
        char *s = xstrndup(in.p, in.len);
        mode_t m;
        if (sbd_parse_mode(s, &m) == 0)
            ASSERT(m <= 07777 && strlen(s) <= 5);
        xfree(s);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char kind = (char)data[0];
    struct str in = str_make((const char *)data + 1, size - 1);
    if (kind == 'm')
        check_move(in);
    else if (kind == 'b')
        check_batch(in);
    else
        check_queries(kind, in);
    return 0;
}
