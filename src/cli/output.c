/* SPDX-License-Identifier: Apache-2.0 */
/* Output helpers for kubectl-sandbox. */
#include "cli/output.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <yaml.h>

#include "common/clock.h"
#include "common/xalloc.h"

void out_json(FILE *out, const json_t *obj)
{
    char *s = json_dumps(obj, JSON_INDENT(4) | JSON_ENCODE_ANY);
    if (s) {
        fprintf(out, "%s\n", s);
        xfree(s); /* jansson's allocator is malloc/free by default */
    }
}

/* libyaml's write handler: out is a FILE. */
static int write_out(void *out, unsigned char *buf, size_t size)
{
    return fwrite(buf, 1, size, out) == size;
}

/* Emits ev (taken by libyaml, also on failure). */
static int emit(yaml_emitter_t *e, yaml_event_t *ev)
{
    return yaml_emitter_emit(e, ev) ? 0 : -EIO;
}

/* Whether a string written plain would read back as another type: YAML 1.2's core
 * schema (null, booleans, numbers), and what YAML 1.1 readers (PyYAML, older Go and
 * Ruby libraries) still resolve: yes/no/on/off/y/n, sexagesimal and other numbers,
 * timestamps, .inf/.nan, the merge key and the value key. Anything that starts like a
 * number counts, as kubectl quotes it too. */
static bool reads_as_other_type(const char *s, size_t len)
{
    static const char *const words[] = {
        "null",  "Null",  "NULL",  "~",     "true",  "True", "TRUE", "false", "False", "FALSE",
        "yes",   "Yes",   "YES",   "no",    "No",    "NO",   "on",   "On",    "ON",    "off",
        "Off",   "OFF",   "y",     "Y",     "n",     "N",    ".inf", ".Inf",  ".INF",  "+.inf",
        "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN",  "<<",    "=",
    };
    if (len == 0)
        return true; /* an empty plain scalar is null */
    for (size_t i = 0; i < ARRAY_SIZE(words); i++)
        if (strlen(words[i]) == len && memcmp(s, words[i], len) == 0)
            return true;
    if (s[0] >= '0' && s[0] <= '9')
        return true;
    return len > 1 && (s[0] == '+' || s[0] == '-' || s[0] == '.') &&
           ((s[1] >= '0' && s[1] <= '9') || s[1] == '.');
}

/* Whether s holds a line break other than \n (CR, NEL, LS, PS): libyaml would write it
 * raw in a single-quoted or block scalar, where a reader folds or normalises it. */
static bool has_other_breaks(const char *s, size_t len)
{
    return memchr(s, '\r', len) || memmem(s, len, "\xc2\x85", 2) ||
           memmem(s, len, "\xe2\x80\xa8", 3) || memmem(s, len, "\xe2\x80\xa9", 3);
}

/* A scalar: a string (is_string) or the literal text of a number, boolean or null.
 * libyaml picks plain, single- or double-quoted style from the characters; strings that
 * would read as another type, or hold breaks other than \n, are double-quoted (escapes),
 * multi-line ones literal blocks (where libyaml can write them so; else double-quoted). */
static int emit_scalar(yaml_emitter_t *e, const char *s, size_t len, bool is_string)
{
    yaml_scalar_style_t style = YAML_ANY_SCALAR_STYLE;
    yaml_event_t ev;

    if (len > INT32_MAX)
        return -E2BIG;
    if (is_string && (reads_as_other_type(s, len) || has_other_breaks(s, len)))
        style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
    else if (is_string && memchr(s, '\n', len))
        style = YAML_LITERAL_SCALAR_STYLE;
    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)len, 1, 1, style))
        return -ENOMEM;
    return emit(e, &ev);
}

static int emit_value(yaml_emitter_t *e, const json_t *v);

static int emit_object(yaml_emitter_t *e, const json_t *v)
{
    const char *k;
    json_t *child;
    yaml_event_t ev;
    int r;

    if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE))
        return -ENOMEM;
    if ((r = emit(e, &ev)) < 0)
        return r;
    json_object_foreach((json_t *)v, k, child)
    {
        if ((r = emit_scalar(e, k, strlen(k), true)) < 0 || (r = emit_value(e, child)) < 0)
            return r;
    }
    if (!yaml_mapping_end_event_initialize(&ev))
        return -ENOMEM;
    return emit(e, &ev);
}

static int emit_array(yaml_emitter_t *e, const json_t *v)
{
    size_t i;
    json_t *item;
    yaml_event_t ev;
    int r;

    if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE))
        return -ENOMEM;
    if ((r = emit(e, &ev)) < 0)
        return r;
    json_array_foreach(v, i, item)
    {
        if ((r = emit_value(e, item)) < 0)
            return r;
    }
    if (!yaml_sequence_end_event_initialize(&ev))
        return -ENOMEM;
    return emit(e, &ev);
}

/* Numbers as jansson writes them in JSON (also valid YAML 1.2 core schema numbers). */
static int emit_number(yaml_emitter_t *e, const json_t *v)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    int r;

    if (!s)
        return -ENOMEM;
    r = emit_scalar(e, s, strlen(s), false);
    xfree(s); /* jansson's allocator is malloc/free by default */
    return r;
}

static int emit_value(yaml_emitter_t *e, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return emit_object(e, v);
    case JSON_ARRAY:
        return emit_array(e, v);
    case JSON_STRING:
        return emit_scalar(e, json_string_value(v), json_string_length(v), true);
    case JSON_INTEGER:
    case JSON_REAL:
        return emit_number(e, v);
    case JSON_TRUE:
        return emit_scalar(e, "true", 4, false);
    case JSON_FALSE:
        return emit_scalar(e, "false", 5, false);
    default:
        return emit_scalar(e, "null", 4, false);
    }
}

/* One implicit document holding v. */
static int emit_document(yaml_emitter_t *e, const json_t *v)
{
    yaml_event_t ev;
    int r;

    if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING))
        return -ENOMEM;
    if ((r = emit(e, &ev)) < 0)
        return r;
    if (!yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1))
        return -ENOMEM;
    if ((r = emit(e, &ev)) < 0 || (r = emit_value(e, v)) < 0)
        return r;
    if (!yaml_document_end_event_initialize(&ev, 1))
        return -ENOMEM;
    if ((r = emit(e, &ev)) < 0)
        return r;
    if (!yaml_stream_end_event_initialize(&ev))
        return -ENOMEM;
    return emit(e, &ev);
}

int out_yaml(FILE *out, const json_t *obj)
{
    yaml_emitter_t e;
    int r;

    if (!yaml_emitter_initialize(&e))
        return -ENOMEM;
    yaml_emitter_set_output(&e, write_out, out);
    yaml_emitter_set_unicode(&e, 1); /* UTF-8 as is, not \u escapes */
    yaml_emitter_set_width(&e, -1);  /* no folding of long lines */
    yaml_emitter_set_indent(&e, 2);
    r = emit_document(&e, obj);
    if (r >= 0 && !yaml_emitter_flush(&e))
        r = -EIO;
    yaml_emitter_delete(&e);
    return r;
}

const char *out_age(const char *ts, char *buf, unsigned size)
{
    usec_t t;
    if (!ts || clock_parse_rfc3339(ts, &t) < 0) {
        (void)snprintf(buf, size, "<unknown>");
        return buf;
    }
    usec_t now = clock_wall_now();
    unsigned long long s = now > t ? (now - t) / USEC_PER_SEC : 0;
    if (s < 120)
        (void)snprintf(buf, size, "%llus", s);
    else if (s < 3600 * 3)
        (void)snprintf(buf, size, "%llum", s / 60);
    else if (s < 86400 * 2)
        (void)snprintf(buf, size, "%lluh", s / 3600);
    else
        (void)snprintf(buf, size, "%llud", s / 86400);
    return buf;
}

/* The length of the valid UTF-8 sequence at s (at most len bytes) that is not a C1
 * control, or 0. */
static size_t utf8_ok(const unsigned char *s, size_t len)
{
    size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;
    unsigned char lo = 0x80, hi = 0xbf; /* the allowed range of the second byte */
    if (s[0] < 0xc2 || s[0] > 0xf4 || len < n)
        return 0;
    if (s[0] == 0xc2)
        lo = 0xa0; /* U+0080..U+009F: C1 controls */
    else if (s[0] == 0xe0)
        lo = 0xa0; /* overlong */
    else if (s[0] == 0xed)
        hi = 0x9f; /* surrogates */
    else if (s[0] == 0xf0)
        lo = 0x90; /* overlong */
    else if (s[0] == 0xf4)
        hi = 0x8f; /* past U+10FFFF */
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return n;
}

int out_safe_append(struct buf *out, const char *s, size_t len, const char *keep)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    int r = 0;
    while (r == 0 && i < len) {
        size_t n = 1;
        bool ok = p[i] >= 0x20 && p[i] < 0x7f;
        if (p[i] < 0x20)
            ok = p[i] != 0 && keep && strchr(keep, p[i]);
        else if (p[i] >= 0x80)
            ok = (n = utf8_ok(p + i, len - i)) > 0;
        n = n ? n : 1;
        r = ok ? buf_append(out, p + i, n) : buf_printf(out, "\\x%02x", p[i]);
        i += n;
    }
    return r;
}

char *out_safe_dup(const char *s)
{
    if (!s)
        return NULL;
    struct buf b;
    size_t len = strlen(s);
    buf_init(&b, 4 * len + 1);
    (void)out_safe_append(&b, s, len, "\t"); /* fits: at most 4 bytes per byte */
    return buf_steal(&b);
}

void out_safe_inplace(char *out, size_t size)
{
    if (size == 0)
        return;
    char *safe = out_safe_dup(out);
    size_t n = strlen(safe);
    if (n >= size) { /* cut before a UTF-8 sequence that would not fit whole */
        n = size - 1;
        while (n > 0 && ((unsigned char)safe[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(out, safe, n);
    out[n] = '\0';
    xfree(safe);
}

void out_table_init(struct out_table *t, unsigned ncols)
{
    *t = (struct out_table){.ncols = ncols};
}

void out_table_add(struct out_table *t, const char *const *cells)
{
    if (t->nrows == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->cells = xreallocarray(t->cells, (size_t)t->cap * t->ncols, sizeof(char *));
    }
    for (unsigned i = 0; i < t->ncols; i++)
        t->cells[t->nrows * t->ncols + i] = out_safe_dup(cells[i] ? cells[i] : "<none>");
    t->nrows++;
}

void out_table_print(FILE *out, const struct out_table *t)
{
    size_t width[OUT_MAX_COLS] = {0};
    for (unsigned r = 0; r < t->nrows; r++)
        for (unsigned c = 0; c < t->ncols && c < OUT_MAX_COLS; c++) {
            size_t n = strlen(t->cells[r * t->ncols + c]);
            width[c] = n > width[c] ? n : width[c];
        }
    for (unsigned r = 0; r < t->nrows; r++) {
        for (unsigned c = 0; c < t->ncols && c < OUT_MAX_COLS; c++) {
            const char *cell = t->cells[r * t->ncols + c];
            if (c + 1 == t->ncols)
                fprintf(out, "%s", cell);
            else
                fprintf(out, "%-*s   ", (int)width[c], cell);
        }
        fputc('\n', out);
    }
}

void out_table_done(struct out_table *t)
{
    for (unsigned i = 0; i < t->nrows * t->ncols; i++)
        xfree(t->cells[i]);
    XFREE(t->cells);
    t->nrows = t->cap = 0;
}
