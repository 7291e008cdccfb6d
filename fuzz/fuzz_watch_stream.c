/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the watch stream: the line framer (kube/linebuf) and the event
 * decoder (kube/watch) fed the same bytes whole and in small pieces. Invariants: the
 * framer yields the same frames however the input is split and never a frame longer
 * than its bound; the decoder delivers the same events and stops with the same error
 * whichever way it is fed; every event has an object and a known type.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Isrc \
 *     fuzz/fuzz_watch_stream.c src/kube/{linebuf,watch,err}.c \
 *     src/common/{buf,str,xalloc,log,clock}.c -ljansson -o build/fuzz_watch_stream */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "kube/linebuf.h"
#include "kube/watch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_FRAME 512 /* small, so that the size bound is exercised */

/* Frames seen by one pass: a running hash and count, compared between passes. */
struct frames {
    uint64_t hash;
    size_t count;
};

static int on_frame(void *ctx, const char *frame, size_t len)
{
    struct frames *f = ctx;
    ASSERT(len > 0 && len <= FUZZ_MAX_FRAME);
    ASSERT(frame[len - 1] != '\n');
    for (size_t i = 0; i < len; i++)
        f->hash = (f->hash ^ (uint8_t)frame[i]) * 1099511628211u;
    f->hash = (f->hash ^ 0xff) * 1099511628211u; /* frame boundary */
    f->count++;
    return 0;
}

static int frame_pass(const char *buf, size_t len, size_t piece, struct frames *ret)
{
    struct linebuf lb;
    int r = 0;
    *ret = (struct frames){.hash = 14695981039346656037u};
    linebuf_init(&lb, FUZZ_MAX_FRAME);
    for (size_t off = 0; off < len && r == 0;) {
        size_t n = piece && len - off > piece ? piece : len - off;
        r = linebuf_feed(&lb, buf + off, n, on_frame, ret);
        ASSERT(r == 0 || r == -E2BIG);
        ASSERT(linebuf_pending(&lb) <= FUZZ_MAX_FRAME);
        off += n;
    }
    linebuf_done(&lb);
    return r;
}

/* Events seen by one decoder pass. */
struct events {
    uint64_t hash;
    size_t count;
};

static int on_event(void *ctx, const struct kube_event *ev)
{
    struct events *e = ctx;
    ASSERT(ev->object && json_is_object(ev->object));
    ASSERT(ev->type != KUBE_EVENT_ERROR);
    ASSERT(kube_event_type_name(ev->type) != NULL);
    e->hash = (e->hash ^ (uint64_t)ev->type) * 1099511628211u;
    e->hash = (e->hash ^ json_object_size(ev->object)) * 1099511628211u;
    e->count++;
    return 0;
}

static int watch_pass(const char *buf, size_t len, size_t piece, struct events *ret)
{
    struct kube_watch *w;
    int r = 0;
    *ret = (struct events){.hash = 14695981039346656037u};
    w = kube_watch_new(FUZZ_MAX_FRAME, on_event, ret);
    for (size_t off = 0; off < len && r == 0;) {
        size_t n = piece && len - off > piece ? piece : len - off;
        r = kube_watch_feed(w, buf + off, n);
        off += n;
    }
    ASSERT(r == 0 || r == -E2BIG || r == -EPROTO || r == -ESTALE);
    ASSERT(r == 0 || kube_watch_error(w)->code < 0); /* ERROR events keep their status code */
    ASSERT(kube_watch_events(w) == ret->count);
    kube_watch_free(w);
    return r;
}

/* One frame decoded directly, as the informer's list path never does but a caller may. */
static void decode_one(const char *buf, size_t len)
{
    struct kube_event ev;
    struct kube_err e;
    if (kube_event_decode(buf, len, &ev, &e) == 0) {
        ASSERT(json_is_object(ev.object));
        if (ev.type == KUBE_EVENT_ERROR) {
            struct kube_err st;
            ASSERT(kube_event_status(&ev, &st) == 0 && st.code < 0);
            ASSERT(!kube_event_is_gone(&ev) || st.code == -ESTALE);
        }
        kube_event_done(&ev);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = xmalloc(size ? size : 1); /* exact size: ASan sees overreads */
    struct frames fa, fb;
    struct events ea, eb;
    memcpy(buf, data, size);
    int ra = frame_pass(buf, size, 0, &fa), rb = frame_pass(buf, size, 7, &fb);
    ASSERT(ra == rb);
    if (ra == 0)
        ASSERT(fa.count == fb.count && fa.hash == fb.hash);
    ra = watch_pass(buf, size, 0, &ea);
    rb = watch_pass(buf, size, 5, &eb);
    ASSERT(ra == rb && ea.count == eb.count && ea.hash == eb.hash);
    decode_one(buf, size);
    xfree(buf);
    return 0;
}
