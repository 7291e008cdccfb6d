/* SPDX-License-Identifier: Apache-2.0 */
/* YAML to jansson through libyaml's event parser. */
#include "kube/yaml.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "common/limits.h"
#include "common/str.h"
#include "common/xalloc.h"

struct ystate {
    json_t *stack[LIMIT_KUBE_YAML_DEPTH]; /* containers being filled (own references) */
    char *keys[LIMIT_KUBE_YAML_DEPTH];    /* pending key per mapping level (owned) */
    int depth;
    json_t *root;
    bool done;
    bool typed; /* resolve plain numbers (YAML 1.2 core schema) */
    char *err;
    size_t errsize;
};

static int fail(struct ystate *st, const yaml_mark_t *m, const char *what)
{
    (void)snprintf(st->err, st->errsize, "line %zu column %zu: %s", m->line + 1, m->column + 1,
                   what);
    return -EINVAL;
}

static bool is_one_of(const char *v, const char *a, const char *b, const char *c)
{
    return strcmp(v, a) == 0 || strcmp(v, b) == 0 || strcmp(v, c) == 0;
}

/* A plain scalar that the YAML 1.2 core schema reads as an integer or a float, or NULL.
 * Hex and octal forms and .inf/.nan stay strings (Kubernetes objects never need them). */
static json_t *number_value(const char *v)
{
    int64_t i;
    if (cstr_to_i64(v, &i) == 0)
        return json_integer((json_int_t)i);
    size_t n = strlen(v), digits = strspn(v + (v[0] == '-' || v[0] == '+'), "0123456789");
    if (n == 0 || n > 64 || digits == 0 || strspn(v, "0123456789.eE+-") != n)
        return NULL;
    char *end = NULL;
    double d = strtod(v, &end);
    return end && *end == '\0' ? json_real(d) : NULL;
}

static json_t *scalar_value(const yaml_event_t *ev, bool typed)
{
    const char *v = (const char *)ev->data.scalar.value;
    if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        json_t *num = typed ? number_value(v) : NULL;
        if (num)
            return num;
        if (v[0] == '\0' || strcmp(v, "~") == 0 || is_one_of(v, "null", "Null", "NULL"))
            return json_null();
        if (is_one_of(v, "true", "True", "TRUE"))
            return json_true();
        if (is_one_of(v, "false", "False", "FALSE"))
            return json_false();
    }
    return json_stringn(v, ev->data.scalar.length);
}

/* True when the current container is a mapping waiting for a key. */
static bool wants_key(const struct ystate *st)
{
    return st->depth > 0 && json_is_object(st->stack[st->depth - 1]) && !st->keys[st->depth - 1];
}

/* Attaches v (taken) to the current container, or makes it the root. */
static int attach(struct ystate *st, json_t *v, const yaml_mark_t *m)
{
    if (!v)
        return fail(st, m, "invalid UTF-8 in a scalar");
    if (st->depth == 0) {
        st->root = v;
        st->done = true;
        return 0;
    }
    json_t *top = st->stack[st->depth - 1];
    if (json_is_array(top)) {
        (void)json_array_append_new(top, v);
        return 0;
    }
    char *key = st->keys[st->depth - 1];
    st->keys[st->depth - 1] = NULL;
    int r = 0;
    if (json_object_get(top, key))
        json_decref(v); /* duplicate key: the first one wins */
    else if (json_object_set_new(top, key, v) != 0)
        r = fail(st, m, "invalid UTF-8 in a key");
    xfree(key);
    return r;
}

static int on_scalar(struct ystate *st, const yaml_event_t *ev)
{
    if (wants_key(st)) {
        st->keys[st->depth - 1] =
            xstrndup((const char *)ev->data.scalar.value, ev->data.scalar.length);
        return 0;
    }
    return attach(st, scalar_value(ev, st->typed), &ev->start_mark);
}

static int on_start(struct ystate *st, const yaml_event_t *ev, json_t *container)
{
    if (wants_key(st) || st->depth >= LIMIT_KUBE_YAML_DEPTH) {
        json_decref(container);
        return fail(st, &ev->start_mark,
                    st->depth >= LIMIT_KUBE_YAML_DEPTH ? "nested too deeply"
                                                       : "a mapping key must be a scalar");
    }
    st->keys[st->depth] = NULL;
    st->stack[st->depth++] = container;
    return 0;
}

static int on_end(struct ystate *st, const yaml_event_t *ev)
{
    if (st->depth == 0)
        return fail(st, &ev->start_mark, "unbalanced end");
    json_t *c = st->stack[--st->depth];
    XFREE(st->keys[st->depth]);
    return attach(st, c, &ev->start_mark);
}

static int on_event(struct ystate *st, const yaml_event_t *ev)
{
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        return on_scalar(st, ev);
    case YAML_SEQUENCE_START_EVENT:
        return on_start(st, ev, json_array());
    case YAML_MAPPING_START_EVENT:
        return on_start(st, ev, json_object());
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        return on_end(st, ev);
    case YAML_ALIAS_EVENT:
        return fail(st, &ev->start_mark, "aliases are not supported");
    case YAML_DOCUMENT_END_EVENT:
    case YAML_STREAM_END_EVENT:
        st->done = true;
        return 0;
    default:
        return 0;
    }
}

static void state_done(struct ystate *st)
{
    while (st->depth > 0) {
        st->depth--;
        json_decref(st->stack[st->depth]);
        XFREE(st->keys[st->depth]);
    }
    json_decref(st->root);
}

static int run_parser(yaml_parser_t *p, struct ystate *st)
{
    while (!st->done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(p, &ev)) {
            (void)snprintf(st->err, st->errsize, "line %zu column %zu: %s",
                           p->problem_mark.line + 1, p->problem_mark.column + 1,
                           p->problem ? p->problem : "syntax error");
            return -EINVAL;
        }
        int r = on_event(st, &ev);
        yaml_event_delete(&ev);
        if (r < 0)
            return r;
    }
    return 0;
}

static int load(const char *data, size_t len, bool typed, json_t **ret, char *err, size_t errsize)
{
    struct ystate st = {.err = err, .errsize = errsize, .typed = typed};
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return -ENOMEM;
    yaml_parser_set_input_string(&p, (const unsigned char *)data, len);
    int r = run_parser(&p, &st);
    yaml_parser_delete(&p);
    if (r < 0)
        goto out;
    if (!st.root || json_is_null(st.root)) {
        json_decref(st.root);
        st.root = json_object();
    }
    *ret = st.root;
    st.root = NULL;
out:
    state_done(&st);
    return r;
}

int kube_yaml_load(const char *data, size_t len, json_t **ret, char *err, size_t errsize)
{
    return load(data, len, false, ret, err, errsize);
}

int kube_yaml_load_typed(const char *data, size_t len, json_t **ret, char *err, size_t errsize)
{
    return load(data, len, true, ret, err, errsize);
}
