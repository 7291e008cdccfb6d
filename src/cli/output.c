/* SPDX-License-Identifier: Apache-2.0 */
/* Output helpers for kubectl-sandbox. */
#include "cli/output.h"

#include <string.h>

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

/* Strings that YAML would read as something else (numbers, booleans, null) or that contain
 * syntax characters are written as JSON strings, which are valid YAML. */
static int needs_quotes(const char *s)
{
    static const char *const words[] = {"true", "false", "yes", "no", "on", "off", "null", "~",
                                        "True", "False", "Yes", "No", "On", "Off", "Null", "NULL",
                                        "TRUE", "FALSE", "y",   "n",  "Y",  "N"};
    if (!*s || strchr("-?:,[]{}#&*!|>'\"%@` 0123456789.+", s[0]) || s[strlen(s) - 1] == ' ')
        return 1;
    for (size_t i = 0; i < ARRAY_SIZE(words); i++)
        if (strcmp(s, words[i]) == 0)
            return 1;
    return strstr(s, ": ") || strstr(s, " #") || strpbrk(s, "\n\t\r\\") || s[strlen(s) - 1] == ':';
}

static void yaml_scalar(FILE *out, const json_t *v)
{
    if (json_is_string(v) && !needs_quotes(json_string_value(v))) {
        fputs(json_string_value(v), out);
        return;
    }
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (s) {
        fputs(s, out);
        xfree(s);
    }
}

static int is_container(const json_t *v)
{
    return (json_is_object(v) && json_object_size(v) > 0) ||
           (json_is_array(v) && json_array_size(v) > 0);
}

static void yaml_node(FILE *out, const json_t *v, int indent);

static void yaml_value_after_key(FILE *out, const json_t *v, int indent)
{
    if (is_container(v)) {
        fputc('\n', out);
        yaml_node(out, v, json_is_array(v) ? indent : indent + 2);
    } else {
        fputc(' ', out);
        yaml_scalar(out, v);
        fputc('\n', out);
    }
}

static void yaml_object(FILE *out, const json_t *v, int indent, int first_inline)
{
    const char *k;
    const json_t *child;
    int first = 1;
    json_object_foreach((json_t *)v, k, child)
    {
        if (!(first && first_inline))
            fprintf(out, "%*s", indent, "");
        first = 0;
        json_t *key = json_string(k);
        yaml_scalar(out, key);
        json_decref(key);
        fputc(':', out);
        yaml_value_after_key(out, child, indent);
    }
}

static void yaml_node(FILE *out, const json_t *v, int indent)
{
    if (json_is_object(v)) {
        yaml_object(out, v, indent, 0);
        return;
    }
    size_t i;
    const json_t *item;
    json_array_foreach(v, i, item)
    {
        fprintf(out, "%*s- ", indent, "");
        if (json_is_object(item) && json_object_size(item) > 0)
            yaml_object(out, item, indent + 2, 1);
        else if (is_container(item)) {
            fputc('\n', out);
            yaml_node(out, item, indent + 2);
        } else {
            yaml_scalar(out, item);
            fputc('\n', out);
        }
    }
}

void out_yaml(FILE *out, const json_t *obj)
{
    if (is_container(obj))
        yaml_node(out, obj, 0);
    else {
        yaml_scalar(out, obj);
        fputc('\n', out);
    }
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
        t->cells[t->nrows * t->ncols + i] = xstrdup(cells[i] ? cells[i] : "<none>");
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
