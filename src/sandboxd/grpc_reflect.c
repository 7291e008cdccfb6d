/* SPDX-License-Identifier: Apache-2.0 */
/* gRPC server reflection (see grpc_reflect.h), answered as grpc-go's reflection service
 * answers (upstream registers it): list_services names the ProcessService and the two
 * reflection services; file_by_filename and file_containing_symbol give the file's
 * FileDescriptorProto followed by those it imports, from the FileDescriptorSet built from
 * api/proto (gen-fdset.sh); an unknown file or symbol, and extensions (there are none),
 * are an ErrorResponse NOT_FOUND. The few messages are read and written by hand: the
 * wire format of grpc/reflection/v1/reflection.proto (v1alpha has the same). */
#include "sandboxd/grpc_reflect.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/str.h"
#include "common/xalloc.h"

/* ---- protobuf wire format ---------------------------------------------------------- */

/* A reader over an encoded message. */
struct pbr {
    const uint8_t *p, *end;
};

/* One field read: its number, and its value (varint) or bytes (length-delimited). */
struct pbf {
    uint32_t num;
    unsigned type;
    uint64_t v;
    struct str bytes;
};

static bool pbr_varint(struct pbr *r, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64 && r->p < r->end; shift += 7) {
        uint8_t b = *r->p++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* Reads the next field into f. Returns false at the end of the message or on malformed
 * input (*bad then tells which, when given). */
static bool pbr_next(struct pbr *r, struct pbf *f, bool *bad)
{
    uint64_t key, len;
    size_t fixed;
    if (bad)
        *bad = r->p < r->end;
    if (r->p >= r->end || !pbr_varint(r, &key) || key >> 3 == 0 || key >> 3 > UINT32_MAX)
        return false;
    f->num = (uint32_t)(key >> 3);
    f->type = (unsigned)(key & 7);
    f->bytes = STR_NULL;
    if (f->type == 0)
        return pbr_varint(r, &f->v);
    if (f->type == 2) {
        if (!pbr_varint(r, &len) || len > (uint64_t)(r->end - r->p))
            return false;
        f->bytes = str_make((const char *)r->p, (size_t)len);
        r->p += len;
        return true;
    }
    fixed = f->type == 1 ? 8 : f->type == 5 ? 4 : 0;
    if (fixed == 0 || (size_t)(r->end - r->p) < fixed)
        return false; /* groups and unknown wire types */
    r->p += fixed;
    return true;
}

static struct pbr pbr_of(struct str s)
{
    return (struct pbr){(const uint8_t *)s.p, (const uint8_t *)s.p + s.len};
}

/* The first string or bytes of field num in the message m (empty when none). */
static struct str pb_field(struct str m, uint32_t num)
{
    struct pbr r = pbr_of(m);
    struct pbf f;
    while (pbr_next(&r, &f, NULL))
        if (f.num == num && f.type == 2)
            return f.bytes;
    return STR_NULL;
}

static void put_varint(struct buf *b, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        (void)buf_putc(b, (char)(v ? c | 0x80 : c));
    } while (v);
}

static void put_bytes(struct buf *b, uint32_t num, struct str s)
{
    put_varint(b, (uint64_t)num << 3 | 2);
    put_varint(b, s.len);
    (void)buf_append(b, s.p, s.len);
}

/* ---- the descriptors --------------------------------------------------------------- */

/* The files of the set, in its order (an import before the files importing it). */
#define MAX_FILES 8

static size_t set_files(struct str files[MAX_FILES])
{
    struct pbr r = {sbd_process_fdset, sbd_process_fdset + sbd_process_fdset_len};
    struct pbf f;
    size_t n = 0;
    while (n < MAX_FILES && pbr_next(&r, &f, NULL))
        if (f.num == 1 && f.type == 2)
            files[n++] = f.bytes;
    return n;
}

/* Whether name is the string s + "." + rest (rest: the part after the dot). */
static bool scoped(struct str name, struct str s, struct str *rest)
{
    if (name.len <= s.len + 1 || memcmp(name.p, s.p, s.len) != 0 || name.p[s.len] != '.')
        return false;
    *rest = str_make(name.p + s.len + 1, name.len - s.len - 1);
    return true;
}

/* Whether an element of a repeated field num of m (each a message) is named name. */
static bool any_named(struct str m, uint32_t num, struct str name)
{
    struct pbr r = pbr_of(m);
    struct pbf f;
    while (pbr_next(&r, &f, NULL))
        if (f.num == num && f.type == 2 && str_eq(pb_field(f.bytes, 1), name))
            return true;
    return false;
}

/* Whether the enum e (EnumDescriptorProto) defines sym, relative to its scope: the
 * enum itself, or one of its values (which C++ scoping puts beside the enum). */
static bool enum_has(struct str e, struct str sym)
{
    return str_eq(pb_field(e, 1), sym) || any_named(e, 2, sym);
}

/* Whether the message m (DescriptorProto) defines sym, relative to its scope: itself,
 * or a field, oneof, nested message or enum (or one of its values) inside it. */
static bool message_has(struct str m, struct str sym, int depth)
{
    struct str name = pb_field(m, 1), rest;
    if (str_eq(name, sym))
        return true;
    if (depth > 32 || !scoped(sym, name, &rest))
        return false;
    if (any_named(m, 2, rest) || any_named(m, 6, rest) || any_named(m, 8, rest))
        return true; /* field, extension, oneof */
    struct pbr r = pbr_of(m);
    struct pbf f;
    while (pbr_next(&r, &f, NULL))
        if ((f.num == 3 && f.type == 2 && message_has(f.bytes, rest, depth + 1)) ||
            (f.num == 4 && f.type == 2 && enum_has(f.bytes, rest)))
            return true;
    return false;
}

/* Whether the service s (ServiceDescriptorProto) is sym, or has sym as a method. */
static bool service_has(struct str s, struct str sym)
{
    struct str name = pb_field(s, 1), rest;
    return str_eq(name, sym) || (scoped(sym, name, &rest) && any_named(s, 2, rest));
}

/* Whether the file fd (FileDescriptorProto) defines the fully qualified symbol sym. */
static bool file_has(struct str fd, struct str sym)
{
    struct str pkg = pb_field(fd, 2), rest = sym;
    if (pkg.len && !scoped(sym, pkg, &rest))
        return false;
    struct pbr r = pbr_of(fd);
    struct pbf f;
    while (pbr_next(&r, &f, NULL)) {
        bool hit = f.type == 2 && ((f.num == 4 && message_has(f.bytes, rest, 0)) ||
                                   (f.num == 5 && enum_has(f.bytes, rest)) ||
                                   (f.num == 6 && service_has(f.bytes, rest)) ||
                                   (f.num == 7 && str_eq(pb_field(f.bytes, 1), rest)));
        if (hit)
            return true;
    }
    return false;
}

/* The index of the file named name (by_name) or defining the symbol name, or -1. */
static long find_file(const struct str *files, size_t n, struct str name, bool by_name)
{
    for (size_t i = 0; i < n; i++)
        if (by_name ? str_eq(pb_field(files[i], 1), name) : file_has(files[i], name))
            return (long)i;
    return -1;
}

/* Whether the file fd imports the file named dep (directly). */
static bool imports(struct str fd, struct str dep)
{
    struct pbr r = pbr_of(fd);
    struct pbf f;
    while (pbr_next(&r, &f, NULL))
        if (f.num == 3 && f.type == 2 && str_eq(f.bytes, dep))
            return true;
    return false;
}

/* ---- answers ----------------------------------------------------------------------- */

/* FileDescriptorResponse: file i, then the files it imports, directly or not (the set
 * lists an import before its importers, so they all come before i). */
static void put_files(struct buf *out, const struct str *files, size_t n, size_t i)
{
    bool need[MAX_FILES] = {0};
    struct buf inner;
    buf_init(&inner, LIMIT_SBD_GRPC_REPLY);
    need[i] = true;
    for (size_t k = i + 1; k-- > 0;) {
        for (size_t j = k + 1; j < n && !need[k]; j++)
            need[k] = need[j] && imports(files[j], pb_field(files[k], 1));
    }
    put_bytes(&inner, 1, files[i]);
    for (size_t k = 0; k < i; k++)
        if (need[k])
            put_bytes(&inner, 1, files[k]);
    put_bytes(out, 4, str_make(inner.data, inner.len));
    buf_done(&inner);
}

static void put_error(struct buf *out, int code, const char *msg)
{
    struct buf inner;
    buf_init(&inner, LIMIT_SBD_GRPC_REPLY);
    put_varint(&inner, 1 << 3 | 0);
    put_varint(&inner, (uint64_t)code);
    put_bytes(&inner, 2, str_c(msg));
    put_bytes(out, 7, str_make(inner.data, inner.len));
    buf_done(&inner);
}

static void put_services(struct buf *out)
{
    static const char *const names[] = {"grpc.reflection.v1.ServerReflection",
                                        "grpc.reflection.v1alpha.ServerReflection",
                                        "process.v1.ProcessService"};
    struct buf inner, one;
    buf_init(&inner, LIMIT_SBD_GRPC_REPLY);
    buf_init(&one, LIMIT_SBD_GRPC_REPLY);
    for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
        buf_reset(&one);
        put_bytes(&one, 1, str_c(names[i]));
        put_bytes(&inner, 1, str_make(one.data, one.len));
    }
    put_bytes(out, 6, str_make(inner.data, inner.len));
    buf_done(&one);
    buf_done(&inner);
}

/* ExtensionNumberResponse for a message type we define (it has no extensions). */
static void put_extension_numbers(struct buf *out, struct str type)
{
    struct buf inner;
    buf_init(&inner, LIMIT_SBD_GRPC_REPLY);
    put_bytes(&inner, 1, type);
    put_bytes(out, 5, str_make(inner.data, inner.len));
    buf_done(&inner);
}

#define NOT_FOUND 5 /* the gRPC code an ErrorResponse carries */

/* Appends the answer to the request field f (one of the message_request oneof). */
static void answer(struct buf *out, const struct pbf *f)
{
    struct str files[MAX_FILES];
    size_t n = set_files(files);
    long i;
    switch (f->num) {
    case 3: /* file_by_filename */
    case 4: /* file_containing_symbol */
        i = find_file(files, n, f->bytes, f->num == 3);
        if (i < 0)
            put_error(out, NOT_FOUND, f->num == 3 ? "file not found" : "symbol not found");
        else
            put_files(out, files, n, (size_t)i);
        return;
    case 6: /* all_extension_numbers_of_type */
        if (find_file(files, n, f->bytes, false) >= 0)
            put_extension_numbers(out, f->bytes);
        else
            put_error(out, NOT_FOUND, "type not found");
        return;
    case 7: /* list_services */
        put_services(out);
        return;
    default: /* 5: file_containing_extension */
        put_error(out, NOT_FOUND, "extension not found");
    }
}

/* Reads a ServerReflectionRequest: its host and the field of its oneof (num 0: none).
 * Returns false when it is malformed. */
static bool read_request(struct str msg, struct str *host, struct pbf *req)
{
    struct pbr r = pbr_of(msg);
    struct pbf f;
    bool bad;
    req->num = 0;
    while (pbr_next(&r, &f, &bad)) {
        if (f.num == 1 && f.type == 2)
            *host = f.bytes;
        else if (f.num >= 3 && f.num <= 7 && f.type == 2)
            *req = f;
    }
    return !bad;
}

void sbd__grpc_reflect(struct sbd_gcall *call, const uint8_t *msg, size_t n, void *ctx)
{
    struct str m = str_make((const char *)msg, n), host = STR_NULL;
    struct pbf req;
    struct buf out;
    (void)ctx;
    if (!msg) {
        sbd_gcall_finish(call, SBD_GRPC_OK, NULL);
        return;
    }
    if (!read_request(m, &host, &req) || req.num == 0) {
        sbd_gcall_finish(call, SBD_GRPC_INVALID_ARGUMENT, "invalid ServerReflectionRequest");
        return;
    }
    buf_init(&out, LIMIT_SBD_GRPC_REPLY);
    if (host.len)
        put_bytes(&out, 1, host); /* valid_host */
    put_bytes(&out, 2, m);        /* original_request */
    answer(&out, &req);
    int r = sbd_gcall_send(call, (const uint8_t *)out.data, out.len);
    buf_done(&out);
    if (r == -ENOBUFS)
        sbd_gcall_finish(call, SBD_GRPC_RESOURCE_EXHAUSTED, SBD_GRPC_UNSENT_MSG);
    else if (r < 0 && r != -EPIPE)
        sbd_gcall_finish(call, SBD_GRPC_RESOURCE_EXHAUSTED, "response message too large");
}
