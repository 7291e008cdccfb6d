/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox output: YAML emitter, ages and tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "cli/output.h"
#include "common/clock.h"
#include "common/xalloc.h"

/* Runs fn(out, obj) into memory and returns the text (caller frees with free via xfree). */
static char *capture_yaml(const char *json)
{
    json_t *obj = json_loads(json, JSON_DECODE_ANY, NULL);
    assert_non_null(obj);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    out_yaml(f, obj);
    assert_int_equal(fclose(f), 0);
    json_decref(obj);
    return text;
}

static void test_yaml_shapes(void **state)
{
    (void)state;
    char *y = capture_yaml("{\"kind\":\"Sandbox\",\"metadata\":{\"name\":\"a\",\"labels\":{}},"
                           "\"spec\":{\"list\":[1,\"x\",{\"k\":\"v\",\"k2\":[true]}],"
                           "\"empty\":[]}}");
    assert_string_equal(y, "kind: Sandbox\n"
                           "metadata:\n"
                           "  name: a\n"
                           "  labels: {}\n"
                           "spec:\n"
                           "  list:\n"
                           "  - 1\n"
                           "  - x\n"
                           "  - k: v\n"
                           "    k2:\n"
                           "    - true\n"
                           "  empty: []\n");
    xfree(y);
}

static void test_yaml_quoting(void **state)
{
    (void)state;
    /* strings YAML would read as another type, or that hold syntax, are quoted */
    char *y = capture_yaml("{\"a\":\"true\",\"b\":\"123\",\"c\":\"2026-11-30T01:02:03Z\","
                           "\"d\":\"x: y\",\"e\":\"line\\nbreak\",\"f\":\"\",\"g\":\"plain text\","
                           "\"h\":\"-dash\",\"i\":\"null\",\"j\":null,\"k\":1.5}");
    assert_string_equal(y, "a: \"true\"\n"
                           "b: \"123\"\n"
                           "c: \"2026-11-30T01:02:03Z\"\n"
                           "d: \"x: y\"\n"
                           "e: \"line\\nbreak\"\n"
                           "f: \"\"\n"
                           "g: plain text\n"
                           "h: \"-dash\"\n"
                           "i: \"null\"\n"
                           "j: null\n"
                           "k: 1.5\n");
    xfree(y);
}

static void test_age(void **state)
{
    (void)state;
    char b[32], ts[40];
    usec_t now = clock_wall_now();
    clock_format_rfc3339_sec(now - 30 * USEC_PER_SEC, ts, sizeof(ts));
    assert_true(strcmp(out_age(ts, b, sizeof(b)), "30s") == 0 ||
                strcmp(out_age(ts, b, sizeof(b)), "31s") == 0);
    clock_format_rfc3339_sec(now - 600 * USEC_PER_SEC, ts, sizeof(ts));
    assert_string_equal(out_age(ts, b, sizeof(b)), "10m");
    clock_format_rfc3339_sec(now - 5 * 3600 * USEC_PER_SEC, ts, sizeof(ts));
    assert_string_equal(out_age(ts, b, sizeof(b)), "5h");
    clock_format_rfc3339_sec(now - 3 * 86400 * USEC_PER_SEC, ts, sizeof(ts));
    assert_string_equal(out_age(ts, b, sizeof(b)), "3d");
    assert_string_equal(out_age("yesterday", b, sizeof(b)), "<unknown>");
    assert_string_equal(out_age(NULL, b, sizeof(b)), "<unknown>");
}

static void test_table(void **state)
{
    (void)state;
    struct out_table t;
    out_table_init(&t, 3);
    out_table_add(&t, (const char *const[]){"NAME", "READY", "AGE"});
    out_table_add(&t, (const char *const[]){"a-long-name", "True", "5m"});
    out_table_add(&t, (const char *const[]){"b", NULL, "10s"});
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    out_table_print(f, &t);
    assert_int_equal(fclose(f), 0);
    out_table_done(&t);
    assert_string_equal(text, "NAME          READY    AGE\n"
                              "a-long-name   True     5m\n"
                              "b             <none>   10s\n");
    xfree(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yaml_shapes),
        cmocka_unit_test(test_yaml_quoting),
        cmocka_unit_test(test_age),
        cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
