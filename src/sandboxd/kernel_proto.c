/* SPDX-License-Identifier: Apache-2.0 */
/* Line splitting and event checking of the kernel driver protocol (see kernel_proto.h). */
#include "sandboxd/kernel_proto.h"

#include <errno.h>
#include <string.h>

void sbd_kline_init(struct sbd_kline *l, size_t max)
{
    buf_init(&l->line, max);
    l->skipping = false;
}

void sbd_kline_done(struct sbd_kline *l)
{
    buf_done(&l->line);
    l->skipping = false;
}

void sbd_kline_reset(struct sbd_kline *l)
{
    buf_reset(&l->line);
    l->skipping = false;
}

void sbd_kline_trim(struct sbd_kline *l, size_t keep)
{
    if (l->line.len == 0 && !l->skipping && l->line.cap > keep)
        buf_done(&l->line);
}

/* Adds a piece of the current line; an overflow drops the line and reports it once. */
static void add_piece(struct sbd_kline *l, const char *p, size_t n, sbd_kline_fn *fn, void *ctx)
{
    if (l->skipping || n == 0)
        return;
    if (buf_append(&l->line, p, n) < 0) {
        buf_reset(&l->line);
        l->skipping = true;
        fn(ctx, NULL, 0, true);
    }
}

void sbd_kline_feed(struct sbd_kline *l, const char *data, size_t n, sbd_kline_fn *fn, void *ctx)
{
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        size_t len = nl ? (size_t)(nl - data) : n;
        add_piece(l, data, len, fn, ctx);
        if (!nl)
            return;
        if (!l->skipping)
            fn(ctx, l->line.data ? l->line.data : "", l->line.len, false);
        buf_reset(&l->line);
        l->skipping = false;
        data += len + 1;
        n -= len + 1;
    }
}

static const struct {
    const char *name;
    enum sbd_kevent kind;
} kinds[] = {
    {"ready", SBD_KEV_READY},         {"stdout", SBD_KEV_STDOUT},   {"stderr", SBD_KEV_STDERR},
    {"result", SBD_KEV_RESULT},       {"display", SBD_KEV_DISPLAY}, {"error", SBD_KEV_ERROR},
    {"truncated", SBD_KEV_TRUNCATED}, {"end", SBD_KEV_END},         {"started", SBD_KEV_STARTED},
};

/* data: an object of string values (mime type -> text). Returns a new copy or NULL. */
static json_t *check_data(const json_t *data)
{
    if (!json_is_object(data))
        return NULL;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)data, k, v) if (!json_is_string(v)) return NULL;
    return json_deep_copy(data);
}

static json_t *build(enum sbd_kevent kind, const json_t *j)
{
    const char *name = json_string_value(json_object_get(j, "type"));
    json_t *out = json_pack("{s:s}", "type", name);
    const char *text[] = {"text", "name", "value", "traceback"};
    switch (kind) {
    case SBD_KEV_STDOUT:
    case SBD_KEV_STDERR:
        if (!json_is_string(json_object_get(j, "text")))
            goto fail;
        (void)json_object_set(out, "text", json_object_get(j, "text"));
        return out;
    case SBD_KEV_RESULT:
    case SBD_KEV_DISPLAY: {
        json_t *d = check_data(json_object_get(j, "data"));
        if (!d)
            goto fail;
        (void)json_object_set_new(out, "data", d);
        if (kind == SBD_KEV_RESULT)
            (void)json_object_set_new(out, "is_main",
                                      json_boolean(json_is_true(json_object_get(j, "is_main"))));
        return out;
    }
    case SBD_KEV_ERROR:
        for (size_t i = 1; i < 4; i++) {
            if (!json_is_string(json_object_get(j, text[i])))
                goto fail;
            (void)json_object_set(out, text[i], json_object_get(j, text[i]));
        }
        return out;
    case SBD_KEV_END:
        if (!json_is_integer(json_object_get(j, "execution_count")) ||
            json_integer_value(json_object_get(j, "execution_count")) < 0)
            goto fail;
        (void)json_object_set(out, "execution_count", json_object_get(j, "execution_count"));
        (void)json_object_set_new(out, "truncated",
                                  json_boolean(json_is_true(json_object_get(j, "truncated"))));
        return out;
    case SBD_KEV_READY: /* whether "started" events will come */
        (void)json_object_set_new(out, "started_events",
                                  json_boolean(json_is_true(json_object_get(j, "started_events"))));
        return out;
    default: /* truncated, started: the type alone */
        return out;
    }
fail:
    json_decref(out);
    return NULL;
}

int sbd_kevent_parse(const char *p, size_t n, json_t **ret_event, enum sbd_kevent *ret_kind)
{
    json_t *j = json_loadb(p, n, JSON_REJECT_DUPLICATES, NULL);
    if (!j)
        return -EINVAL;
    const char *type = json_string_value(json_object_get(j, "type"));
    json_t *ev = NULL;
    enum sbd_kevent kind = 0;
    for (size_t i = 0; type && i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (strcmp(kinds[i].name, type) == 0)
            kind = kinds[i].kind;
    if (kind)
        ev = build(kind, j);
    json_decref(j);
    if (!ev)
        return -EINVAL;
    *ret_event = ev;
    *ret_kind = kind;
    return 0;
}
