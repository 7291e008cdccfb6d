/* SPDX-License-Identifier: Apache-2.0 */
/* Parsers of the filesystem-operation requests (see fsreq.h). */
#include "sandboxd/fsreq.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "common/base64.h"
#include "common/limits.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "sandboxd/util.h"

static json_t *load_object(struct str body, const char **ret_err)
{
    json_t *j = json_loadb(body.p ? body.p : "", body.len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        *ret_err = "body must be a JSON object";
        return NULL;
    }
    return j;
}

/* A non-empty string member without NUL bytes, new in *ret. */
static int get_path(const json_t *obj, const char *key, char **ret)
{
    const json_t *v = json_object_get(obj, key);
    if (!json_is_string(v) || json_string_length(v) == 0 ||
        json_string_length(v) > LIMIT_SBD_PATH ||
        memchr(json_string_value(v), '\0', json_string_length(v)))
        return -EINVAL;
    *ret = xstrdup(json_string_value(v));
    return 0;
}

int sbd_move_req_parse(struct str body, struct sbd_move_req *ret, const char **ret_err)
{
    *ret = (struct sbd_move_req){0};
    json_t *j = load_object(body, ret_err);
    if (!j)
        return -EINVAL;
    int r = 0;
    const json_t *ow = json_object_get(j, "overwrite");
    if (get_path(j, "from", &ret->from) < 0 || get_path(j, "to", &ret->to) < 0) {
        *ret_err = "\"from\" and \"to\" must be non-empty path strings";
        r = -EINVAL;
    } else if (ow && !json_is_boolean(ow) && !json_is_null(ow)) {
        *ret_err = "\"overwrite\" must be a boolean";
        r = -EINVAL;
    } else {
        ret->overwrite = json_is_true(ow);
    }
    json_decref(j);
    if (r < 0)
        sbd_move_req_done(ret);
    return r;
}

void sbd_move_req_done(struct sbd_move_req *m)
{
    xfree(m->from);
    xfree(m->to);
    *m = (struct sbd_move_req){0};
}

int sbd_parse_mode(const char *s, mode_t *ret)
{
    if (!s || !*s || strlen(s) > 5)
        return -EINVAL;
    unsigned v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '7')
            return -EINVAL;
        v = v * 8 + (unsigned)(*p - '0');
    }
    if (v > 07777)
        return -EINVAL;
    *ret = (mode_t)v;
    return 0;
}

/* Decodes the content of one entry into f->data. */
static int batch_content(const json_t *e, struct sbd_batch_file *f, const char **ret_err)
{
    const json_t *c = json_object_get(e, "content");
    const json_t *enc = json_object_get(e, "encoding");
    const char *encoding = json_is_string(enc) ? json_string_value(enc) : "base64";
    if (enc && !json_is_string(enc)) {
        *ret_err = "\"encoding\" must be \"base64\" or \"utf-8\"";
        return -EINVAL;
    }
    if (!json_is_string(c)) {
        *ret_err = "each file needs a string \"content\"";
        return -EINVAL;
    }
    struct str s = str_make(json_string_value(c), json_string_length(c));
    int r;
    if (strcmp(encoding, "base64") == 0) {
        r = base64_decode(s.p, s.len, &f->data);
        *ret_err = r == -E2BIG ? "a file is over --max-upload" : "content is not valid base64";
    } else if (strcmp(encoding, "utf-8") == 0) {
        r = buf_append(&f->data, s.p, s.len) < 0 ? -E2BIG : 0;
        *ret_err = "a file is over --max-upload";
    } else {
        r = -EINVAL;
        *ret_err = "\"encoding\" must be \"base64\" or \"utf-8\"";
    }
    return r;
}

static int batch_entry(const json_t *e, uint64_t max_file, struct sbd_batch_file *f,
                       const char **ret_err)
{
    *f = (struct sbd_batch_file){.mode = 0644};
    buf_init(&f->data, max_file > SIZE_MAX - 1 ? SIZE_MAX - 1 : (size_t)max_file);
    if (!json_is_object(e)) {
        *ret_err = "each file must be an object";
        return -EINVAL;
    }
    if (get_path(e, "path", &f->path) < 0) {
        *ret_err = "each file needs a non-empty \"path\" string";
        return -EINVAL;
    }
    const json_t *m = json_object_get(e, "mode");
    if (m && !json_is_null(m) &&
        (!json_is_string(m) || sbd_parse_mode(json_string_value(m), &f->mode) < 0)) {
        *ret_err = "\"mode\" must be an octal string such as \"0644\"";
        return -EINVAL;
    }
    return batch_content(e, f, ret_err);
}

int sbd_batch_req_parse(struct str body, uint64_t max_file, struct sbd_batch_req *ret,
                        const char **ret_err)
{
    *ret = (struct sbd_batch_req){0};
    json_t *j = load_object(body, ret_err);
    if (!j)
        return -EINVAL;
    const json_t *files = json_object_get(j, "files");
    int r = 0;
    if (!json_is_array(files) || json_array_size(files) == 0) {
        *ret_err = "\"files\" must be a non-empty array";
        r = -EINVAL;
    } else if (json_array_size(files) > LIMIT_SBD_BATCH_FILES) {
        *ret_err = "too many files in one batch (at most 1000)";
        r = -E2BIG;
    } else {
        ret->files = xcalloc(json_array_size(files), sizeof(*ret->files));
        for (size_t i = 0; r == 0 && i < json_array_size(files); i++) {
            r = batch_entry(json_array_get(files, i), max_file, &ret->files[i], ret_err);
            ret->n = i + 1;
        }
    }
    json_decref(j);
    if (r < 0)
        sbd_batch_req_done(ret);
    return r;
}

void sbd_batch_req_done(struct sbd_batch_req *b)
{
    for (size_t i = 0; i < b->n; i++) {
        xfree(b->files[i].path);
        buf_done(&b->files[i].data);
    }
    xfree(b->files);
    *b = (struct sbd_batch_req){0};
}

/* Reads the u64 query parameter name. Returns 1 found, 0 absent, -EINVAL. */
static int query_u64(struct str query, const char *name, uint64_t *ret)
{
    struct buf v;
    buf_init(&v, 32);
    int q = sbd_query_get(query, name, &v);
    if (q == 1 && cstr_to_u64(buf_str(&v), ret) < 0)
        q = -EINVAL;
    buf_done(&v);
    return q < 0 ? -EINVAL : q;
}

/* Reads the boolean query parameter name (absent: unchanged). Returns 0 or -EINVAL. */
static int query_bool(struct str query, const char *name, bool *ret)
{
    struct buf v;
    buf_init(&v, 16);
    int q = sbd_query_get(query, name, &v);
    if (q == 1 && cstr_to_bool(buf_str(&v), ret) < 0)
        q = -EINVAL;
    buf_done(&v);
    return q < 0 ? -EINVAL : 0;
}

int sbd_read_window_parse(struct str query, struct sbd_read_window *ret, const char **ret_err)
{
    *ret = (struct sbd_read_window){0};
    int a = query_u64(query, "offset", &ret->offset);
    int b = query_u64(query, "max_bytes", &ret->max_bytes);
    if (a < 0 || b < 0) {
        *ret_err = "offset and max_bytes must be non-negative integers";
        return -EINVAL;
    }
    ret->has_offset = a == 1;
    ret->has_max = b == 1;
    return 0;
}

int sbd_mkdir_opts_parse(struct str query, struct sbd_mkdir_opts *ret, const char **ret_err)
{
    *ret = (struct sbd_mkdir_opts){.mode = 0755};
    if (query_bool(query, "parents", &ret->parents) < 0) {
        *ret_err = "parents must be a boolean";
        return -EINVAL;
    }
    struct buf v;
    buf_init(&v, 16);
    int q = sbd_query_get(query, "mode", &v);
    int r = q < 0 || (q == 1 && sbd_parse_mode(buf_str(&v), &ret->mode) < 0) ? -EINVAL : 0;
    buf_done(&v);
    if (r < 0)
        *ret_err = "mode must be an octal string such as 0755";
    return r;
}

int sbd_stat_opts_parse(struct str query, struct sbd_stat_opts *ret, const char **ret_err)
{
    *ret = (struct sbd_stat_opts){0};
    if (query_bool(query, "follow", &ret->follow) < 0) {
        *ret_err = "follow must be a boolean (true or false)";
        return -EINVAL;
    }
    return 0;
}

int sbd_watch_opts_parse(struct str query, struct sbd_watch_opts *ret, const char **ret_err)
{
    *ret = (struct sbd_watch_opts){.queue = LIMIT_SBD_WATCH_QUEUE};
    if (query_bool(query, "recursive", &ret->recursive) < 0) {
        *ret_err = "recursive must be a boolean";
        return -EINVAL;
    }
    uint64_t q = 0;
    int r = query_u64(query, "queue", &q);
    if (r < 0 || (r == 1 && (q < LIMIT_SBD_WATCH_QUEUE_MIN || q > LIMIT_SBD_WATCH_QUEUE))) {
        *ret_err = "queue must be an integer between 16 and 65536";
        return -EINVAL;
    }
    if (r == 1)
        ret->queue = (size_t)q;
    return 0;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Decodes a continue token into a name of 1..255 bytes without '/' or NUL. */
static int decode_token(const char *hex, size_t len, char *out, size_t size)
{
    if (len == 0 || len % 2 || len / 2 >= size)
        return -EINVAL;
    for (size_t i = 0; i < len; i += 2) {
        int hi = hex_digit(hex[i]), lo = hex_digit(hex[i + 1]);
        if (hi < 0 || lo < 0 || hi * 16 + lo == 0 || hi * 16 + lo == '/')
            return -EINVAL;
        out[i / 2] = (char)(hi * 16 + lo);
    }
    out[len / 2] = '\0';
    return 0;
}

void sbd_list_token(const char *name, char *out, size_t size)
{
    static const char digits[] = "0123456789abcdef";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p && o + 2 < size; p++) {
        out[o++] = digits[*p >> 4];
        out[o++] = digits[*p & 15];
    }
    if (size > 0)
        out[o] = '\0';
}

int sbd_list_opts_parse(struct str query, struct sbd_list_opts *ret, const char **ret_err)
{
    *ret = (struct sbd_list_opts){.limit = LIMIT_SBD_LISTING};
    uint64_t n = 0;
    int r = query_u64(query, "limit", &n);
    if (r < 0 || (r == 1 && (n == 0 || n > LIMIT_SBD_LISTING))) {
        *ret_err = "limit must be an integer between 1 and 10000";
        return -EINVAL;
    }
    if (r == 1)
        ret->limit = (size_t)n;
    struct buf v;
    buf_init(&v, 2 * sizeof(ret->after));
    int q = sbd_query_get(query, "continue", &v);
    if (q == 1 && decode_token(v.data ? v.data : "", v.len, ret->after, sizeof(ret->after)) < 0)
        q = -EINVAL;
    buf_done(&v);
    if (q < 0) {
        *ret_err = "continue must be the token of a listing's page";
        return -EINVAL;
    }
    ret->has_after = q == 1;
    return 0;
}
