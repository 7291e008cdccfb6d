/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by sandboxd's handlers (see util.h). */
#include "sandboxd/util.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "common/log.h"
#include "common/pct.h"
#include "common/xalloc.h"

int sbd_query_get(struct str query, const char *name, struct buf *out)
{
    struct str rest = query, pair, key, val;
    while (rest.len) {
        if (!str_cut(rest, '&', &pair, &rest))
            rest = STR_NULL;
        if (!str_cut(pair, '=', &key, &val))
            val = STR_NULL;
        if (str_eq_c(key, name)) {
            int r = pct_decode(val, true, out);
            return r < 0 ? r : 1;
        }
    }
    return 0;
}

int sbd_respond_error(struct http_req *req, int status, const char *code, const char *msg)
{
    json_t *j = json_pack("{s:s, s:s}", "code", code, "message", msg ? msg : "");
    if (!j)
        return -EINVAL;
    int r = http_respond_json(req, status, j);
    json_decref(j);
    return r;
}

int sbd_respond_errno(struct http_req *req, int err, const char *what)
{
    char msg[512], eb[128];
    const char *reason = log_strerror(err, eb, sizeof(eb));
    switch (err) {
    case -EPERM:
    case -EACCES:
    case -EXDEV:
    case -ELOOP:
        (void)snprintf(msg, sizeof(msg), "%s: access denied", what);
        return sbd_respond_error(req, 403, SBD_PERMISSION_DENIED, msg);
    case -ENOENT:
    case -ENOTDIR:
        (void)snprintf(msg, sizeof(msg), "%s: not found", what);
        return sbd_respond_error(req, 404, SBD_NOT_FOUND, msg);
    case -EINVAL:
    case -ENAMETOOLONG:
    case -EISDIR:
    case -ENXIO: /* a FIFO or socket without a peer where a regular file was meant */
        (void)snprintf(msg, sizeof(msg), "%s: %s", what, reason);
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, msg);
    case -ENOTEMPTY:
    case -EEXIST:
        (void)snprintf(msg, sizeof(msg), "%s: %s", what, reason);
        return sbd_respond_error(req, 409, SBD_CONFLICT, msg);
    case -E2BIG:
    case -EFBIG:
        (void)snprintf(msg, sizeof(msg), "%s: too large", what);
        return sbd_respond_error(req, 413, SBD_INVALID_ARGUMENT, msg);
    case -EMFILE:
    case -ENFILE: /* out of descriptors: passes, try again */
        (void)snprintf(msg, sizeof(msg), "%s: %s", what, reason);
        return sbd_respond_error(req, 503, SBD_UNAVAILABLE, msg);
    default:
        (void)snprintf(msg, sizeof(msg), "%s: %s", what, reason);
        return sbd_respond_error(req, 500, SBD_INTERNAL, msg);
    }
}

int sbd_respond_not_dir(struct http_req *req, const char *what)
{
    char msg[512];
    (void)snprintf(msg, sizeof(msg), "%s: " SBD_MSG_NOT_DIR, what);
    return sbd_respond_error(req, 409, SBD_CONFLICT, msg);
}

const char *sbd_code_for_status(int status)
{
    switch (status) {
    case 401:
        return SBD_UNAUTHENTICATED;
    case 403:
        return SBD_PERMISSION_DENIED;
    case 404:
        return SBD_NOT_FOUND;
    case 409:
        return SBD_CONFLICT;
    case 429:
        return SBD_RESOURCE_EXHAUSTED;
    case 503:
        return SBD_UNAVAILABLE;
    default:
        return status >= 500 ? SBD_INTERNAL : SBD_INVALID_ARGUMENT;
    }
}

int sbd_error_body(void *ctx, int status, const char *detail, struct buf *out,
                   const char **ret_content_type)
{
    (void)ctx;
    json_t *j = json_pack("{s:s, s:s}", "code", sbd_code_for_status(status), "message",
                          detail ? detail : http_status_reason(status));
    if (!j)
        return -EINVAL;
    buf_reset(out);
    int r = sbd_json_dump(j, out);
    json_decref(j);
    if (r < 0)
        return r;
    *ret_content_type = "application/json";
    return 0;
}

static int dump_cb(const char *p, size_t n, void *data)
{
    return buf_append(data, p, n) < 0 ? -1 : 0;
}

int sbd_json_dump(const json_t *j, struct buf *out)
{
    if (json_dump_callback(j, dump_cb, out, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY) <
        0)
        return -E2BIG;
    if (!out->data)
        (void)buf_puts(out, "");
    return 0;
}

void sbd_http_date(time_t t, char *out, size_t size)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    if (strftime(out, size, "%a, %d %b %Y %H:%M:%S GMT", &tm) == 0 && size)
        out[0] = '\0';
}

int sbd_parse_http_date(struct str s, time_t *ret)
{
    char tmp[64];
    if (s.len == 0 || s.len >= sizeof(tmp))
        return -EINVAL;
    memcpy(tmp, s.p, s.len);
    tmp[s.len] = '\0';
    struct tm tm = {0};
    const char *end = strptime(tmp, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (!end || *end)
        return -EINVAL;
    *ret = timegm(&tm);
    return 0;
}

/* Length of a valid UTF-8 sequence at p (at most n bytes), or 0 when invalid. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t len;
    unsigned min;
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0) {
        len = 2, min = 0x80, c &= 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3, min = 0x800, c &= 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4, min = 0x10000, c &= 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (p[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    return len;
}

int sbd_utf8_sanitize(const char *p, size_t n, struct buf *out)
{
    const unsigned char *u = (const unsigned char *)p;
    size_t i = 0;
    if (!out->data && buf_puts(out, "") < 0)
        return -E2BIG;
    while (i < n) {
        size_t run = i;
        size_t l;
        while (run < n && (l = utf8_seq(u + run, n - run)) > 0)
            run += l;
        if (run > i && buf_append(out, p + i, run - i) < 0)
            return -E2BIG;
        i = run;
        if (i < n) {
            if (buf_puts(out, "\xef\xbf\xbd") < 0)
                return -E2BIG;
            i++;
        }
    }
    return 0;
}

json_t *sbd_json_name(const char *s)
{
    struct buf b;
    json_t *j;
    if (!s)
        return json_null();
    j = json_string(s);
    if (j)
        return j;
    buf_init(&b, SIZE_MAX);
    (void)sbd_utf8_sanitize(s, strlen(s), &b);
    j = json_stringn(b.data, b.len);
    buf_done(&b);
    return j ? j : json_string("");
}

bool sbd_secure_eq(struct str a, struct str b)
{
    /* The time depends on b's length only: b is the secret, a the caller's guess. */
    size_t d = a.len ^ b.len;
    for (size_t i = 0; i < b.len; i++) {
        unsigned char x = i < a.len ? (unsigned char)a.p[i] : 0;
        d |= (unsigned char)(x ^ (unsigned char)b.p[i]);
    }
    return d == 0;
}

void sbd_timer_at(uv_timer_t *t, uv_timer_cb cb, usec_t due)
{
    usec_t now = clock_now();
    (void)uv_timer_start(t, cb, due > now ? (due - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC : 0, 0);
}
