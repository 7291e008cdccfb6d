/* SPDX-License-Identifier: Apache-2.0 */
/* Streaming multipart/form-data parser (see multipart.h). */
#include "sandboxd/multipart.h"

#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "common/xalloc.h"

enum { MP_PREAMBLE = 0, MP_AFTER_DELIM, MP_HEADERS, MP_DATA, MP_END };

int sbd_header_param(struct str value, const char *name, struct buf *out)
{
    struct str rest = value, item, key, val;
    while (rest.len) {
        /* A ';' inside quotes does not split: scan by hand. */
        size_t i = 0;
        bool q = false;
        for (; i < rest.len && (q || rest.p[i] != ';'); i++) {
            if (rest.p[i] == '\\' && q)
                i++;
            else if (rest.p[i] == '"')
                q = !q;
        }
        item = str_make(rest.p, i < rest.len ? i : rest.len);
        rest = i < rest.len ? str_make(rest.p + i + 1, rest.len - i - 1) : STR_NULL;
        if (!str_cut(item, '=', &key, &val) || !str_eq_nocase(str_trim(key), str_c(name)))
            continue;
        val = str_trim(val);
        buf_reset(out);
        if (buf_puts(out, "") < 0)
            return -E2BIG;
        bool quoted = val.len >= 2 && val.p[0] == '"' && val.p[val.len - 1] == '"';
        if (quoted)
            val = str_make(val.p + 1, val.len - 2);
        for (size_t j = 0; j < val.len; j++) {
            /* only \" and \\ are escapes (as browsers and python-multipart read them);
             * any other backslash is a character of the value (a\b.txt) */
            if (quoted && val.p[j] == '\\' && j + 1 < val.len &&
                (val.p[j + 1] == '"' || val.p[j + 1] == '\\'))
                j++;
            if (buf_putc(out, val.p[j]) < 0)
                return -E2BIG;
        }
        return 1;
    }
    return 0;
}

int sbd_multipart_boundary(struct str ct, char **ret)
{
    struct str type, params;
    if (!str_cut(ct, ';', &type, &params))
        params = STR_NULL;
    if (!str_eq_nocase(str_trim(type), STR_LIT("multipart/form-data")))
        return -ENOENT;
    struct buf b;
    buf_init(&b, 200);
    int r = sbd_header_param(params, "boundary", &b);
    if (r <= 0 || b.len == 0 || b.len > 70) {
        buf_done(&b);
        return -EINVAL;
    }
    *ret = buf_steal(&b);
    return 0;
}

void sbd_multipart_init(struct sbd_multipart *m, const char *boundary, sbd_part_begin_fn *begin,
                        sbd_part_data_fn *data, sbd_part_end_fn *end, void *ctx)
{
    *m = (struct sbd_multipart){.begin = begin, .data = data, .end = end, .ctx = ctx};
    m->delim = xasprintf("\r\n--%s", boundary);
    m->delim_len = strlen(m->delim);
    buf_init(&m->in, LIMIT_SBD_CHUNK * 4 + LIMIT_SBD_MULTIPART_HEAD);
    /* The first delimiter may start the body: pretend a CRLF came before it. */
    (void)buf_puts(&m->in, "\r\n");
}

void sbd_multipart_done(struct sbd_multipart *m)
{
    XFREE(m->delim);
    buf_done(&m->in);
}

/* The bytes fed and not parsed yet. */
static struct str unparsed(const struct sbd_multipart *m)
{
    return str_make(m->in.data + m->off, m->in.len - m->off);
}

/* Parses the part headers in p[0..n) (without the final CRLF CRLF). */
static int part_headers(struct sbd_multipart *m, struct str h)
{
    struct str line, rest = h, name, value;
    struct buf pn, fn;
    buf_init(&pn, 1024);
    buf_init(&fn, LIMIT_SBD_PATH);
    bool has_name = false, has_file = false;
    while (rest.len) {
        long nl = str_index(rest, '\n');
        line = nl < 0 ? rest : str_make(rest.p, (size_t)nl);
        rest = nl < 0 ? STR_NULL : str_make(rest.p + nl + 1, rest.len - (size_t)nl - 1);
        if (!str_cut(str_trim(line), ':', &name, &value))
            continue;
        if (!str_eq_nocase(str_trim(name), STR_LIT("content-disposition")))
            continue;
        has_name = sbd_header_param(value, "name", &pn) == 1;
        has_file = sbd_header_param(value, "filename", &fn) == 1;
    }
    int r = m->begin(m->ctx, has_name ? str_make(pn.data, pn.len) : STR_LIT(""),
                     has_file ? str_make(fn.data, fn.len) : STR_NULL);
    buf_done(&pn);
    buf_done(&fn);
    if (r < 0)
        return r;
    m->accepted = r > 0;
    return 0;
}

static int step_headers(struct sbd_multipart *m)
{
    struct str in = unparsed(m);
    size_t skip;
    const char *end;
    if (in.len >= 2 && memcmp(in.p, "\r\n", 2) == 0) {
        end = in.p; /* no header lines at all */
        skip = 2;
    } else {
        end = memmem(in.p, in.len, "\r\n\r\n", 4);
        skip = 4;
    }
    /* too long whether or not its end has come yet (the same body in any split) */
    if ((!end && in.len > LIMIT_SBD_MULTIPART_HEAD) ||
        (end && (size_t)(end - in.p) > LIMIT_SBD_MULTIPART_HEAD))
        return -E2BIG;
    if (!end)
        return 0;
    int r = part_headers(m, str_make(in.p, (size_t)(end - in.p)));
    if (r < 0)
        return r;
    m->off += (size_t)(end - in.p) + skip;
    m->state = MP_DATA;
    return 1;
}

/* What follows a delimiter candidate: 1 a real delimiter ("--", or optional spaces and
 * CRLF), 0 more bytes needed, -1 plain data that only looks like one. */
static int delim_follows(const char *p, size_t n)
{
    if (n >= 2 && p[0] == '-' && p[1] == '-')
        return 1;
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    if (i + 2 > n)
        return n < 2 || (n >= 1 && p[0] == '-') || i == n || p[i] == '\r' ? 0 : -1;
    return p[i] == '\r' && p[i + 1] == '\n' ? 1 : -1;
}

/* Finds the next real delimiter in in. Returns its offset, or -1 with *ret_safe the
 * number of leading bytes that can be emitted as data now. */
static long find_delim(const struct sbd_multipart *m, struct str in, size_t *ret_safe)
{
    size_t from = 0;
    for (;;) {
        const char *d = memmem(in.p + from, in.len - from, m->delim, m->delim_len);
        if (!d) {
            size_t keep = m->delim_len - 1;
            *ret_safe = in.len > keep ? in.len - keep : 0;
            if (*ret_safe < from)
                *ret_safe = from;
            return -1;
        }
        size_t at = (size_t)(d - in.p), after = at + m->delim_len;
        int k = delim_follows(in.p + after, in.len - after);
        if (k > 0)
            return (long)at;
        if (k == 0) {
            *ret_safe = at;
            return -1;
        }
        from = at + 1;
    }
}

static int step_data(struct sbd_multipart *m, bool preamble)
{
    struct str in = unparsed(m);
    size_t safe = 0;
    long d = find_delim(m, in, &safe);
    size_t emit = d >= 0 ? (size_t)d : safe;
    if (!preamble && m->accepted && emit) {
        int r = m->data(m->ctx, str_make(in.p, emit));
        if (r < 0)
            return r;
    }
    if (d < 0) {
        m->off += emit;
        return 0;
    }
    m->off += emit + m->delim_len;
    if (!preamble && m->accepted) {
        m->accepted = false;
        int r = m->end(m->ctx);
        if (r < 0)
            return r;
    }
    m->state = MP_AFTER_DELIM;
    return 1;
}

static int step_after_delim(struct sbd_multipart *m)
{
    struct str in = unparsed(m);
    if (in.len < 2)
        return 0;
    if (memcmp(in.p, "--", 2) == 0) {
        m->state = MP_END;
        buf_reset(&m->in);
        m->off = 0;
        return 1;
    }
    /* Linear whitespace may follow the boundary before the CRLF. */
    size_t i = 0;
    while (i < in.len && (in.p[i] == ' ' || in.p[i] == '\t'))
        i++;
    if (i + 2 > in.len)
        return 0;
    if (memcmp(in.p + i, "\r\n", 2) != 0)
        return -EPROTO;
    m->off += i + 2;
    m->state = MP_HEADERS;
    return 1;
}

static int step(struct sbd_multipart *m)
{
    switch (m->state) {
    case MP_PREAMBLE:
        return step_data(m, true);
    case MP_AFTER_DELIM:
        return step_after_delim(m);
    case MP_HEADERS:
        return step_headers(m);
    case MP_DATA:
        return step_data(m, false);
    default:
        buf_reset(&m->in);
        m->off = 0;
        return 0;
    }
}

int sbd_multipart_feed(struct sbd_multipart *m, struct str data, bool last)
{
    while (data.len || m->in.len > m->off) {
        buf_consume(&m->in, m->off); /* what the last steps parsed, at once */
        m->off = 0;
        size_t room = m->in.limit - m->in.len;
        size_t n = data.len < room ? data.len : room;
        if (n && buf_append(&m->in, data.p, n) < 0)
            return -E2BIG;
        data = str_make(data.p + n, data.len - n);
        int r;
        while ((r = step(m)) > 0)
            ;
        if (r < 0)
            return r;
        if (n == 0 && data.len)
            return -E2BIG; /* no progress with a full buffer */
        if (!data.len)
            break;
    }
    if (m->state == MP_END)
        return 1;
    return last ? -EPROTO : 0;
}
