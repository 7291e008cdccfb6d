/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for sandboxd's gRPC front. The first input byte picks the layer:
 *  - even: the rest are client bytes after the HTTP/2 preface, fed into a server session
 *    (sbd_grpc_feed: frames, HPACK, gRPC framing, limits, trailers) whose ProcessService
 *    methods decode their request and convert it like the real handlers do, then answer
 *    with a message and a status, but never start a process (the streaming reflection
 *    method is the real one);
 *  - odd: the rest is a protobuf body for the request type (input[1] % 5) of one RPC,
 *    decoded and converted into a process request.
 * Invariants: no crash, no leak, converted requests have a non-empty argv[0] and a cwd
 * that stays relative to the root. Replayed over fuzz/corpus/sandboxd_grpc/ in make test;
 * fuzz/run.sh builds it with clang and libFuzzer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "sandboxd/grpc.h"
#include "sandboxd/grpc_proc.h"
#include "sandboxd/grpc_reflect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool climbs(const char *p)
{
    size_t n = strlen(p);
    return strcmp(p, "..") == 0 || strncmp(p, "../", 3) == 0 || strstr(p, "/../") ||
           (n >= 3 && strcmp(p + n - 3, "/..") == 0);
}

static void check_config(const Process__V1__ProcessConfig *cfg)
{
    struct sbd_procreq r;
    const char *msg = NULL;
    enum sbd_gstatus st = sbd__grpc_procreq(cfg, "/fuzz-root", &r, &msg);
    if (st == SBD_GRPC_OK) {
        ASSERT(r.argv && r.argv[0] && r.argv[0][0]);
        /* A cleaned cwd is relative and never climbs ("..x" is a fine name). */
        ASSERT(!r.cwd || (r.cwd[0] != '/' && !climbs(r.cwd)));
    } else {
        ASSERT(msg && *msg);
    }
    sbd_procreq_done(&r);
}

/* Decodes a request of type t (0..4) and checks it; returns whether it decoded. */
static bool decode(unsigned t, const uint8_t *d, size_t n)
{
    switch (t % 5) {
    case 0: {
        Process__V1__StartRequest *m = process__v1__start_request__unpack(NULL, n, d);
        if (m)
            check_config(m->config);
        process__v1__start_request__free_unpacked(m, NULL);
        return m != NULL;
    }
    case 1: {
        Process__V1__ExecuteRequest *m = process__v1__execute_request__unpack(NULL, n, d);
        if (m)
            check_config(m->config);
        process__v1__execute_request__free_unpacked(m, NULL);
        return m != NULL;
    }
    case 2: {
        Process__V1__WriteStdinRequest *m = process__v1__write_stdin_request__unpack(NULL, n, d);
        process__v1__write_stdin_request__free_unpacked(m, NULL);
        return m != NULL;
    }
    case 3: {
        Process__V1__SendSignalRequest *m = process__v1__send_signal_request__unpack(NULL, n, d);
        process__v1__send_signal_request__free_unpacked(m, NULL);
        return m != NULL;
    }
    default: {
        Process__V1__ResizeTTYRequest *m = process__v1__resize_ttyrequest__unpack(NULL, n, d);
        process__v1__resize_ttyrequest__free_unpacked(m, NULL);
        return m != NULL;
    }
    }
}

static void handle(struct sbd_gcall *c, unsigned t, const uint8_t *msg, size_t n)
{
    if (!decode(t, msg, n)) {
        sbd_gcall_finish(c, SBD_GRPC_INVALID_ARGUMENT, "cannot decode\n%");
        return;
    }
    Process__V1__InitEvent ev = PROCESS__V1__INIT_EVENT__INIT;
    ev.process_id = (int32_t)n;
    Process__V1__StartResponse m = PROCESS__V1__START_RESPONSE__INIT;
    m.event_case = PROCESS__V1__START_RESPONSE__EVENT_INIT;
    m.init = &ev;
    uint8_t out[64];
    size_t len = protobuf_c_message_pack(&m.base, out);
    ASSERT(sbd_gcall_send(c, out, len) == 0);
    sbd_gcall_finish(c, SBD_GRPC_OK, NULL);
}

static void h_start(struct sbd_gcall *c, const uint8_t *m, size_t n, void *ctx)
{
    (void)ctx;
    handle(c, 0, m, n);
}

static void h_execute(struct sbd_gcall *c, const uint8_t *m, size_t n, void *ctx)
{
    (void)ctx;
    handle(c, 1, m, n);
}

static void h_stdin(struct sbd_gcall *c, const uint8_t *m, size_t n, void *ctx)
{
    (void)ctx;
    handle(c, 2, m, n);
}

static void h_signal(struct sbd_gcall *c, const uint8_t *m, size_t n, void *ctx)
{
    (void)ctx;
    handle(c, 3, m, n);
}

static void h_resize(struct sbd_gcall *c, const uint8_t *m, size_t n, void *ctx)
{
    (void)ctx;
    handle(c, 4, m, n);
}

static const struct sbd_grpc_method methods[] = {
    {"/process.v1.ProcessService/Start", h_start},
    {"/process.v1.ProcessService/Execute", h_execute},
    {"/process.v1.ProcessService/WriteStdin", h_stdin},
    {"/process.v1.ProcessService/SendSignal", h_signal},
    {"/process.v1.ProcessService/ResizeTTY", h_resize},
    {SBD_REFLECT_V1, sbd__grpc_reflect, true}, /* the real one: it starts nothing */
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] % 2 == 0) {
        struct sbd_grpc_opts o = {.methods = methods, .nmethods = ARRAY_SIZE(methods)};
        if (data[0] % 4 == 2)
            o.token = "fuzz-token";
        sbd_grpc_feed(&o, data + 1, size - 1);
    } else if (size >= 2) {
        (void)decode(data[1], data + 2, size - 2);
    }
    return 0;
}
