/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for --log-format=json (common/log.c, common/log_json.c): every line written
 * parses as one JSON object with ts, level, logger, msg and the logfmt fields as
 * members, whatever bytes the message holds (quotes, newlines, control bytes, invalid
 * UTF-8, lines past the length limit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/log_json.h"
#include "common/xalloc.h"

static FILE *sink;

static int setup(void **state)
{
    (void)state;
    sink = tmpfile();
    assert_non_null(sink);
    log_set_fd(fileno(sink));
    log_set_format(LOG_FORMAT_JSON);
    log_set_component("unit");
    log_set_level(LOG_TRACE);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    log_set_fd(2);
    log_set_format(LOG_FORMAT_TEXT);
    fclose(sink);
    return 0;
}

/* Parses every line written since the last call into a JSON array. */
static json_t *lines(void)
{
    static long off;
    json_t *all = json_array();
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    assert_int_equal(fseek(sink, off, SEEK_SET), 0);
    while ((n = getline(&line, &cap, sink)) > 0) {
        json_error_t e;
        json_t *j;
        assert_int_equal(line[n - 1], '\n');
        assert_null(memchr(line, '\n', (size_t)n - 1)); /* one event, one line */
        j = json_loadb(line, (size_t)n, JSON_REJECT_DUPLICATES, &e);
        if (!j)
            fail_msg("not JSON (%s): %s", e.text, line);
        assert_true(json_is_object(j));
        json_array_append_new(all, j);
        off = ftell(sink);
    }
    xfree(line); /* getline's malloc: xfree is free */
    clearerr(sink);
    return all;
}

static const char *member(const json_t *j, const char *k)
{
    const char *v = json_string_value(json_object_get(j, k));
    if (!v)
        fail_msg("no string member %s", k);
    return v;
}

static void test_basic_members(void **state)
{
    json_t *all, *j;
    const char *ts;
    (void)state;
    log_info("reconciled\tkey=ns/name ms=3 note=\"two words\" flag");
    all = lines();
    assert_int_equal(json_array_size(all), 1);
    j = json_array_get(all, 0);
    assert_string_equal(member(j, "level"), "info");
    assert_string_equal(member(j, "logger"), "unit");
    assert_string_equal(member(j, "msg"), "reconciled");
    assert_string_equal(member(j, "key"), "ns/name");
    assert_string_equal(member(j, "ms"), "3");
    assert_string_equal(member(j, "note"), "two words");
    assert_string_equal(member(j, "flag"), "");
    /* RFC 3339 with nanoseconds, UTC: 2026-11-30T01:02:03.123456789Z */
    ts = member(j, "ts");
    assert_int_equal(strlen(ts), 30);
    assert_int_equal(ts[10], 'T');
    assert_int_equal(ts[19], '.');
    assert_int_equal(ts[29], 'Z');
    json_decref(all);
}

static void test_hostile_bytes(void **state)
{
    /* (a tab would end the message: it separates the logfmt fields) */
    static const char msg[] = "say \"hi\"\\ then\nnew line\r\x01\x1b[31m\x7f end";
    json_t *all;
    (void)state;
    log_warn("%s\tpath=\"a \\\"b\\\" c\" raw=x\x02y", msg);
    log_error("bad utf8 \xff\xfe \xc0\xaf \xed\xa0\x80 ok \xc3\xa9\tb\x01"
              "d\"key=1 =2");
    log_error_errno(-ENOENT, "open failed\tfile=\"/tmp/x\"");
    all = lines();
    assert_int_equal(json_array_size(all), 3);
    assert_string_equal(member(json_array_get(all, 0), "msg"), msg);
    assert_string_equal(member(json_array_get(all, 0), "path"), "a \"b\" c");
    assert_string_equal(member(json_array_get(all, 0), "level"), "warn");
    /* Invalid sequences come out as their Latin-1 reading; valid UTF-8 is kept. */
    assert_string_equal(member(json_array_get(all, 1), "msg"),
                        "bad utf8 \xc3\xbf\xc3\xbe \xc3\x80\xc2\xaf \xc3\xad\xc2\xa0\xc2\x80 ok "
                        "\xc3\xa9");
    assert_string_equal(member(json_array_get(all, 1), "b_d_key"), "1"); /* names sanitised */
    assert_string_equal(member(json_array_get(all, 1), "_"), "2");
    assert_string_equal(member(json_array_get(all, 2), "err"), "No such file or directory");
    assert_string_equal(member(json_array_get(all, 2), "file"), "/tmp/x");
    json_decref(all);
}

static void test_long_line_stays_json(void **state)
{
    size_t n = LIMIT_LOG_LINE * 2;
    char *big = xmalloc(n + 1);
    json_t *all;
    (void)state;
    assert_non_null(big);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)(i % 3 == 0 ? '"' : i % 3 == 1 ? '\n' : '\x01'); /* worst case */
    big[n] = '\0';
    log_info("%s", big);
    all = lines();
    assert_int_equal(json_array_size(all), 1);
    assert_int_equal(strlen(member(json_array_get(all, 0), "msg")), LIMIT_LOG_LINE);
    json_decref(all);
    xfree(big);
}

static void test_parse_format(void **state)
{
    enum log_format f;
    (void)state;
    assert_int_equal(log_parse_format("json", &f), 0);
    assert_int_equal(f, LOG_FORMAT_JSON);
    assert_int_equal(log_parse_format("text", &f), 0);
    assert_int_equal(f, LOG_FORMAT_TEXT);
    assert_int_equal(log_parse_format("JSON", &f), -EINVAL);
    assert_int_equal(log_parse_format("", &f), -EINVAL);
}

static void test_json_string(void **state)
{
    struct buf b;
    (void)state;
    buf_init(&b, 64);
    assert_int_equal(log_json_string(&b, "a\"b\\c\nd\x1f", 8), 0);
    assert_string_equal(buf_str(&b), "\"a\\\"b\\\\c\\nd\\u001f\"");
    buf_reset(&b);
    assert_int_equal(log_json_string(&b, "x\0y", 3), 0); /* NUL inside a slice */
    assert_string_equal(buf_str(&b), "\"x\\u0000y\"");
    buf_done(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_members),        cmocka_unit_test(test_hostile_bytes),
        cmocka_unit_test(test_long_line_stays_json), cmocka_unit_test(test_parse_format),
        cmocka_unit_test(test_json_string),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
