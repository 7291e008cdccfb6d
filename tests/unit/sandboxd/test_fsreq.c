/* SPDX-License-Identifier: Apache-2.0 */
/* Parsers of the filesystem-operation requests: move and batch bodies, read windows,
 * stat, mkdir and watch options, octal modes; accepted shapes and every refused one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/xalloc.h"
#include "sandboxd/fsreq.h"

static void test_move(void **state)
{
    (void)state;
    struct sbd_move_req m;
    const char *err = NULL;
    assert_int_equal(sbd_move_req_parse(STR_LIT("{\"from\":\"a/b\",\"to\":\"/c\"}"), &m, &err), 0);
    assert_string_equal(m.from, "a/b");
    assert_string_equal(m.to, "/c");
    assert_false(m.overwrite);
    sbd_move_req_done(&m);
    assert_int_equal(
        sbd_move_req_parse(STR_LIT("{\"from\":\"a\",\"to\":\"b\",\"overwrite\":true}"), &m, &err),
        0);
    assert_true(m.overwrite);
    sbd_move_req_done(&m);
    static const char *const bad[] = {
        "",
        "null",
        "[]",
        "{\"from\":\"a\"}",
        "{\"to\":\"a\"}",
        "{\"from\":\"\",\"to\":\"b\"}",
        "{\"from\":1,\"to\":\"b\"}",
        "{\"from\":\"a\",\"to\":\"b\",\"overwrite\":\"true\"}",
        "{\"from\":\"a\",\"from\":\"x\",\"to\":\"b\"}",
        "{\"from\":\"a\\u0000b\",\"to\":\"b\"}",
        "{\"from\":\"a\",\"to\":\"b\"} trailing",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = NULL;
        assert_int_equal(sbd_move_req_parse(str_c(bad[i]), &m, &err), -EINVAL);
        assert_non_null(err);
        assert_null(m.from);
        assert_null(m.to);
    }
}

static void test_batch(void **state)
{
    (void)state;
    struct sbd_batch_req b;
    const char *err = NULL;
    struct str body = STR_LIT("{\"files\":[{\"path\":\"a\",\"content\":\"aGk=\"},"
                              "{\"path\":\"b/c\",\"content\":\"x y\",\"encoding\":\"utf-8\","
                              "\"mode\":\"0600\"},{\"path\":\"e\",\"content\":\"\"}]}");
    assert_int_equal(sbd_batch_req_parse(body, 100, &b, &err), 0);
    assert_int_equal(b.n, 3);
    assert_string_equal(b.files[0].path, "a");
    assert_memory_equal(b.files[0].data.data, "hi", 2);
    assert_int_equal(b.files[0].data.len, 2);
    assert_int_equal(b.files[0].mode, 0644);
    assert_string_equal(buf_str(&b.files[1].data), "x y");
    assert_int_equal(b.files[1].mode, 0600);
    assert_int_equal(b.files[2].data.len, 0);
    sbd_batch_req_done(&b);
    /* Per-file size bound. */
    assert_int_equal(sbd_batch_req_parse(body, 2, &b, &err), -E2BIG);
    assert_int_equal(b.n, 0);
    static const char *const bad[] = {
        "{}",
        "{\"files\":[]}",
        "{\"files\":{}}",
        "{\"files\":[1]}",
        "{\"files\":[{\"content\":\"\"}]}",
        "{\"files\":[{\"path\":\"a\"}]}",
        "{\"files\":[{\"path\":\"a\",\"content\":\"***\"}]}",
        "{\"files\":[{\"path\":\"a\",\"content\":\"\",\"encoding\":\"hex\"}]}",
        "{\"files\":[{\"path\":\"a\",\"content\":\"\",\"encoding\":1}]}",
        "{\"files\":[{\"path\":\"a\",\"content\":\"\",\"mode\":\"8\"}]}",
        "{\"files\":[{\"path\":\"a\",\"content\":\"\",\"mode\":420}]}",
        "{\"files\":[{\"path\":\"a\",\"content\":\"\"},{\"path\":\"\",\"content\":\"\"}]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = NULL;
        assert_int_equal(sbd_batch_req_parse(str_c(bad[i]), 100, &b, &err), -EINVAL);
        assert_non_null(err);
        assert_int_equal(b.n, 0);
    }
}

static void test_batch_count_bound(void **state)
{
    (void)state;
    struct buf body;
    buf_init(&body, 1u << 20);
    (void)buf_puts(&body, "{\"files\":[");
    for (int i = 0; i <= LIMIT_SBD_BATCH_FILES; i++)
        (void)buf_printf(&body, "%s{\"path\":\"f%d\",\"content\":\"\"}", i ? "," : "", i);
    (void)buf_puts(&body, "]}");
    struct sbd_batch_req b;
    const char *err = NULL;
    assert_int_equal(sbd_batch_req_parse(str_make(body.data, body.len), 10, &b, &err), -E2BIG);
    buf_done(&body);
}

static void test_read_window(void **state)
{
    (void)state;
    struct sbd_read_window w;
    const char *err;
    assert_int_equal(sbd_read_window_parse(STR_LIT(""), &w, &err), 0);
    assert_false(w.has_offset || w.has_max);
    assert_int_equal(sbd_read_window_parse(STR_LIT("x=1&offset=10&max_bytes=0"), &w, &err), 0);
    assert_true(w.has_offset && w.has_max);
    assert_int_equal(w.offset, 10);
    assert_int_equal(w.max_bytes, 0);
    assert_int_equal(sbd_read_window_parse(STR_LIT("max_bytes=18446744073709551615"), &w, &err), 0);
    assert_true(w.max_bytes == UINT64_MAX);
    assert_int_equal(sbd_read_window_parse(STR_LIT("offset=-1"), &w, &err), -EINVAL);
    assert_int_equal(sbd_read_window_parse(STR_LIT("offset=1x"), &w, &err), -EINVAL);
    assert_int_equal(sbd_read_window_parse(STR_LIT("max_bytes="), &w, &err), -EINVAL);
    assert_int_equal(sbd_read_window_parse(STR_LIT("max_bytes=%zz"), &w, &err), -EINVAL);
    assert_int_equal(sbd_read_window_parse(STR_LIT("offset=18446744073709551616"), &w, &err),
                     -EINVAL);
}

/* Listing pages: limit in 1..10000, and a continue token that is the hex of a name
 * (round trip through sbd_list_token); anything else is refused. */
static void test_list_opts(void **state)
{
    (void)state;
    struct sbd_list_opts o;
    const char *err = NULL;
    char token[600];
    assert_int_equal(sbd_list_opts_parse(STR_LIT(""), &o, &err), 0);
    assert_true(o.limit == LIMIT_SBD_LISTING && !o.has_after);
    assert_int_equal(sbd_list_opts_parse(STR_LIT("limit=1&continue=61"), &o, &err), 0);
    assert_true(o.limit == 1 && o.has_after);
    assert_string_equal(o.after, "a");
    sbd_list_token("\xc3\xa9t\xc3\xa9 x", token, sizeof(token));
    assert_string_equal(token, "c3a974c3a92078");
    char q[700];
    (void)snprintf(q, sizeof(q), "continue=%s", token);
    assert_int_equal(sbd_list_opts_parse(str_make(q, strlen(q)), &o, &err), 0);
    assert_string_equal(o.after, "\xc3\xa9t\xc3\xa9 x");
    char name[256];
    memset(name, 'z', 255);
    name[255] = '\0';
    sbd_list_token(name, token, sizeof(token));
    (void)snprintf(q, sizeof(q), "continue=%s", token);
    assert_int_equal(sbd_list_opts_parse(str_make(q, strlen(q)), &o, &err), 0);
    assert_int_equal(strlen(o.after), 255);
    (void)snprintf(q, sizeof(q), "continue=%s7a", token); /* 256 bytes: no such name */
    assert_int_equal(sbd_list_opts_parse(str_make(q, strlen(q)), &o, &err), -EINVAL);
    static const char *const bad[] = {
        "limit=0",     "limit=10001", "limit=x",     "limit=",      "continue=",   "continue=6",
        "continue=6G", "continue=2f", "continue=00", "continue=6A", "continue=%zz"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = NULL;
        assert_int_equal(sbd_list_opts_parse(str_make(bad[i], strlen(bad[i])), &o, &err), -EINVAL);
        assert_non_null(err);
    }
}

static void test_mode_and_options(void **state)
{
    (void)state;
    mode_t m;
    assert_int_equal(sbd_parse_mode("0755", &m), 0);
    assert_int_equal(m, 0755);
    assert_int_equal(sbd_parse_mode("7777", &m), 0);
    assert_int_equal(m, 07777);
    assert_int_equal(sbd_parse_mode("644", &m), 0);
    assert_int_equal(m, 0644);
    assert_int_equal(sbd_parse_mode("", &m), -EINVAL);
    assert_int_equal(sbd_parse_mode("08", &m), -EINVAL);
    assert_int_equal(sbd_parse_mode("17777", &m), -EINVAL);
    assert_int_equal(sbd_parse_mode("000000", &m), -EINVAL);
    assert_int_equal(sbd_parse_mode("-1", &m), -EINVAL);

    struct sbd_mkdir_opts mo;
    const char *err;
    assert_int_equal(sbd_mkdir_opts_parse(STR_LIT(""), &mo, &err), 0);
    assert_false(mo.parents);
    assert_int_equal(mo.mode, 0755);
    assert_int_equal(sbd_mkdir_opts_parse(STR_LIT("parents=true&mode=0700"), &mo, &err), 0);
    assert_true(mo.parents);
    assert_int_equal(mo.mode, 0700);
    assert_int_equal(sbd_mkdir_opts_parse(STR_LIT("parents=maybe"), &mo, &err), -EINVAL);
    assert_int_equal(sbd_mkdir_opts_parse(STR_LIT("mode=rwx"), &mo, &err), -EINVAL);

    struct sbd_watch_opts wo;
    assert_int_equal(sbd_watch_opts_parse(STR_LIT(""), &wo, &err), 0);
    assert_false(wo.recursive);
    assert_int_equal(wo.queue, LIMIT_SBD_WATCH_QUEUE);
    assert_int_equal(sbd_watch_opts_parse(STR_LIT("recursive=1&queue=16"), &wo, &err), 0);
    assert_true(wo.recursive);
    assert_int_equal(wo.queue, 16);
    assert_int_equal(sbd_watch_opts_parse(STR_LIT("queue=15"), &wo, &err), -EINVAL);
    assert_int_equal(sbd_watch_opts_parse(STR_LIT("queue=65537"), &wo, &err), -EINVAL);
    assert_int_equal(sbd_watch_opts_parse(STR_LIT("recursive=yes"), &wo, &err), -EINVAL);
}

static void test_stat_opts(void **state)
{
    (void)state;
    static const struct {
        const char *query;
        int rc;
        bool follow;
    } cases[] = {
        {"", 0, false},
        {"follow=true", 0, true},
        {"follow=1", 0, true},
        {"follow=false", 0, false},
        {"follow=0", 0, false},
        {"x=1&follow=true", 0, true},
        {"follow=bogus", -EINVAL, false},
        {"follow=", -EINVAL, false},
        {"follow", -EINVAL, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sbd_stat_opts o = {.follow = !cases[i].follow};
        const char *err = NULL;
        assert_int_equal(sbd_stat_opts_parse(str_c(cases[i].query), &o, &err), cases[i].rc);
        if (cases[i].rc == 0)
            assert_int_equal(o.follow, cases[i].follow);
        else
            assert_non_null(strstr(err, "follow must be a boolean"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_move),
        cmocka_unit_test(test_batch),
        cmocka_unit_test(test_batch_count_bound),
        cmocka_unit_test(test_read_window),
        cmocka_unit_test(test_list_opts),
        cmocka_unit_test(test_mode_and_options),
        cmocka_unit_test(test_stat_opts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
