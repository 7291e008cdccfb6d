/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for --log-format=json (common/log_json.h): the input is split at the
 * first NUL into a message and raw logfmt fields (any bytes: quotes, escapes, control
 * bytes, invalid UTF-8). Invariant: the line is one line, ends in '\n' and parses as a
 * JSON object whose "msg" is a string. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *z = memchr(p, '\0', size);
    struct str msg = {p, z ? (size_t)(z - p) : size};
    struct str fields = z ? (struct str){z + 1, size - msg.len - 1} : (struct str){"", 0};
    struct buf b;
    json_error_t e;
    json_t *j;
    buf_init(&b, 16 * size + 1024);
    if (log_json_line(&b, 1764547200123456789LL, "info", "fuzz", msg, NULL, fields) < 0)
        abort();
    if (b.len == 0 || b.data[b.len - 1] != '\n' || memchr(b.data, '\n', b.len - 1))
        abort();
    j = json_loadb(b.data, b.len, JSON_ALLOW_NUL, &e); /* \u0000 is valid JSON */
    if (!j || !json_is_object(j) || !json_is_string(json_object_get(j, "msg")))
        abort();
    json_decref(j);
    buf_done(&b);
    return 0;
}
