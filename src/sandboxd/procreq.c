/* SPDX-License-Identifier: Apache-2.0 */
/* Parsing of the JSON process request (see procreq.h). */
#include "sandboxd/procreq.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>

#include "common/base64.h"
#include "common/limits.h"
#include "common/xalloc.h"
#include "sandboxd/util.h"

static int parse_command(const json_t *c, struct sbd_procreq *r, const char **msg)
{
    if (json_is_string(c)) {
        if (json_string_length(c) == 0 || strlen(json_string_value(c)) != json_string_length(c))
            return *msg = "command must be a non-empty string without NUL", -EINVAL;
        r->argv = xcalloc(4, sizeof(char *));
        r->argv[0] = xstrdup("/bin/sh");
        r->argv[1] = xstrdup("-c");
        r->argv[2] = xstrdup(json_string_value(c));
        return 0;
    }
    size_t n = json_array_size(c);
    if (!json_is_array(c) || n == 0 || n > LIMIT_SBD_ARGS)
        return *msg = "command must be a string or a non-empty array of strings", -EINVAL;
    r->argv = xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        const json_t *a = json_array_get(c, i);
        if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a))
            return *msg = "command entries must be strings without NUL", -EINVAL;
        r->argv[i] = xstrdup(json_string_value(a));
    }
    if (!r->argv[0][0])
        return *msg = "command[0] is empty", -EINVAL;
    return 0;
}

static int parse_env(const json_t *e, struct sbd_procreq *r, const char **msg)
{
    if (!e)
        return 0;
    if (!json_is_object(e) || json_object_size(e) > LIMIT_SBD_ARGS)
        return *msg = "env must be an object of strings", -EINVAL;
    r->env = xcalloc(json_object_size(e) + 1, sizeof(char *));
    const char *k;
    json_t *v;
    size_t i = 0;
    json_object_foreach((json_t *)e, k, v)
    {
        if (!json_is_string(v) || !*k || strchr(k, '=') ||
            strlen(json_string_value(v)) != json_string_length(v))
            return *msg = "env must map names (without '=') to strings", -EINVAL;
        r->env[i++] = xasprintf("%s=%s", k, json_string_value(v));
    }
    return 0;
}

static int parse_stdin(const json_t *j, struct sbd_procreq *r, const char **msg)
{
    const json_t *s = json_object_get(j, "stdin");
    const json_t *b = json_object_get(j, "stdin_b64");
    buf_init(&r->stdin_data, LIMIT_SBD_STDIN);
    r->stdin_given = s || b;
    if (s && !json_is_string(s))
        return *msg = "stdin must be a string", -EINVAL;
    if (s && buf_append(&r->stdin_data, json_string_value(s), json_string_length(s)) < 0)
        return *msg = "stdin too large", -E2BIG;
    if (b && (!json_is_string(b) ||
              base64_decode(json_string_value(b), json_string_length(b), &r->stdin_data) < 0))
        return *msg = "stdin_b64 must be base64", -EINVAL;
    return 0;
}

static int parse_pty(const json_t *p, struct sbd_procreq *r, const char **msg)
{
    if (!p || json_is_false(p) || json_is_null(p))
        return 0;
    r->pty = true;
    if (json_is_true(p))
        return 0;
    json_int_t cols = 0, rows = 0;
    if (json_unpack((json_t *)p, "{s?I, s?I}", "cols", &cols, "rows", &rows) < 0 || cols < 0 ||
        rows < 0 || cols > 65535 || rows > 65535)
        return *msg = "pty must be true or {\"cols\": N, \"rows\": N}", -EINVAL;
    r->cols = (unsigned short)cols;
    r->rows = (unsigned short)rows;
    return 0;
}

static int parse_cwd(const json_t *c, const struct sbd_root *root, struct sbd_procreq *r,
                     const char **msg)
{
    if (!c)
        return 0;
    if (!json_is_string(c))
        return *msg = "cwd must be a string", -EINVAL;
    int e = sbd_path_clean(sbd_root_path(root),
                           str_make(json_string_value(c), json_string_length(c)), &r->cwd);
    if (e == -EPERM)
        return *msg = "cwd escapes the root", -EPERM;
    return e < 0 ? (*msg = "invalid cwd", -EINVAL) : 0;
}

static int parse_numbers(const json_t *j, struct sbd_procreq *r, const char **msg)
{
    const json_t *t = json_object_get(j, "timeout_seconds");
    if (t && !json_is_null(t)) {
        double v = json_number_value(t);
        if (!json_is_number(t) || !isfinite(v) || v < 0 || v > LIMIT_SBD_MAX_TIMEOUT_S)
            return *msg = "timeout_seconds must be a number in [0, 86400]", -EINVAL;
        r->timeout_s = v;
    }
    const json_t *m = json_object_get(j, "max_output_bytes");
    if (m && (!json_is_integer(m) || json_integer_value(m) < 0))
        return *msg = "max_output_bytes must be a non-negative integer", -EINVAL;
    if (m && (size_t)json_integer_value(m) < r->max_output)
        r->max_output = (size_t)json_integer_value(m);
    const json_t *e = json_object_get(j, "encoding");
    if (e && !json_is_string(e))
        return *msg = "encoding must be \"utf-8\" or \"base64\"", -EINVAL;
    r->base64 = e && strcmp(json_string_value(e), "base64") == 0;
    return 0;
}

static int parse_flags(const json_t *j, struct sbd_procreq *r, const char **msg)
{
    const json_t *b = json_object_get(j, "background");
    const json_t *s = json_object_get(j, "stdin_open");
    if ((b && !json_is_boolean(b)) || (s && !json_is_boolean(s)))
        return *msg = "background and stdin_open must be booleans", -EINVAL;
    r->background = json_is_true(b);
    r->stdin_open = json_is_true(s);
    return 0;
}

int sbd_procreq_parse(const json_t *j, const struct sbd_root *root, size_t max_output,
                      struct sbd_procreq *r, const char **ret_msg)
{
    *r = (struct sbd_procreq){.max_output = max_output};
    buf_init(&r->stdin_data, LIMIT_SBD_STDIN);
    const char *msg = "invalid request";
    if (!json_is_object(j)) {
        *ret_msg = "request must be a JSON object";
        return -EINVAL;
    }
    const json_t *c = json_object_get(j, "command");
    int e = c ? parse_command(c, r, &msg) : (msg = "command is required", -EINVAL);
    if (e == 0)
        e = parse_env(json_object_get(j, "env"), r, &msg);
    if (e == 0)
        e = parse_stdin(j, r, &msg);
    if (e == 0)
        e = parse_pty(json_object_get(j, "pty"), r, &msg);
    if (e == 0)
        e = parse_cwd(json_object_get(j, "cwd"), root, r, &msg);
    if (e == 0)
        e = parse_numbers(j, r, &msg);
    if (e == 0)
        e = parse_flags(j, r, &msg);
    if (e < 0)
        *ret_msg = msg;
    return e;
}

static void free_vec(char **v)
{
    for (char **p = v; p && *p; p++)
        xfree(*p);
    xfree(v);
}

void sbd_procreq_done(struct sbd_procreq *r)
{
    free_vec(r->argv);
    free_vec(r->env);
    xfree(r->cwd);
    buf_done(&r->stdin_data);
    r->argv = r->env = NULL;
    r->cwd = NULL;
}

/* The spec's timeout of timeout_s seconds: one that is positive but under a microsecond
 * is a microsecond, not 0 (which means none). */
static usec_t proc_timeout(double timeout_s)
{
    usec_t t = (usec_t)(timeout_s * (double)USEC_PER_SEC);
    return timeout_s > 0 && t == 0 ? 1 : t;
}

int sbd_procreq_spec(const struct sbd_procreq *r, const struct sbd_root *root,
                     struct sbd_proc_spec *spec, int *ret_cwd_fd)
{
    int fd = sbd_path_open(root, r->cwd ? r->cwd : ".", O_PATH | O_DIRECTORY, 0);
    if (fd < 0)
        return fd;
    *spec = (struct sbd_proc_spec){
        .argv = r->argv,
        .env = r->env,
        .cwd_fd = fd,
        .pty = r->pty,
        .stdin_null = r->stdin_null && !r->pty,
        .cols = r->cols,
        .rows = r->rows,
        .timeout = proc_timeout(r->timeout_s),
    };
    *ret_cwd_fd = fd;
    return 0;
}
