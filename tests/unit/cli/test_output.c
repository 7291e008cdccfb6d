/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox output: YAML through libyaml's emitter (shapes, quoting, round trips
 * of tricky strings through a YAML parser), ages and tables. */
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
#include "kube/yaml.h"

/* Runs fn(out, obj) into memory and returns the text (caller frees with free via xfree). */
static char *capture_yaml(const char *json)
{
    json_t *obj = json_loads(json, JSON_DECODE_ANY, NULL);
    assert_non_null(obj);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(out_yaml(f, obj), 0);
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
    /* strings YAML would read as another type are double-quoted; libyaml quotes the
     * ones whose characters need it; multi-line ones are literal blocks */
    char *y = capture_yaml("{\"a\":\"true\",\"b\":\"123\",\"c\":\"2026-11-30T01:02:03Z\","
                           "\"d\":\"x: y\",\"e\":\"line\\nbreak\",\"f\":\"\",\"g\":\"plain text\","
                           "\"h\":\"-dash\",\"i\":\"null\",\"j\":null,\"k\":1.5,\"l\":\"yes\","
                           "\"m\":\" lead\",\"u\":\"h\\u00e9llo \\u2713\",\"true\":\"key\","
                           "\"o\":\"end\\n\",\"p\":\"#x\",\"q\":-3,\"r\":false,\"n\":\"on\"}");
    assert_string_equal(y, "a: \"true\"\n"
                           "b: \"123\"\n"
                           "c: \"2026-11-30T01:02:03Z\"\n"
                           "d: 'x: y'\n"
                           "e: |-\n"
                           "  line\n"
                           "  break\n"
                           "f: \"\"\n"
                           "g: plain text\n"
                           "h: -dash\n"
                           "i: \"null\"\n"
                           "j: null\n"
                           "k: 1.5\n"
                           "l: \"yes\"\n"
                           "m: ' lead'\n"
                           "u: h\xc3\xa9llo \xe2\x9c\x93\n"
                           "\"true\": key\n"
                           "o: |\n"
                           "  end\n"
                           "p: '#x'\n"
                           "q: -3\n"
                           "r: false\n"
                           "\"n\": \"on\"\n"); /* YAML 1.1 reads n and on as booleans */
    xfree(y);
}

/* Values that plain YAML would misread, or that need quoting or escapes to survive. */
static const char *const tricky[] = {
    "",
    " ",
    "  lead",
    "trail ",
    "a: b",
    "a:b",
    "key:",
    ":",
    "- x",
    "-",
    "? q",
    "# c",
    "a #c",
    "yes",
    "No",
    "ON",
    "off",
    "y",
    "N",
    "true",
    "False",
    "null",
    "~",
    "NULL",
    "0",
    "-1",
    "+1",
    "1.5",
    ".5",
    "-.5",
    "1e3",
    "0x1F",
    "0o17",
    "017",
    "1_000",
    "1:20",
    ".inf",
    "-.Inf",
    ".nan",
    "2026-11-30",
    "2026-11-30T01:02:03Z",
    "<<",
    "=",
    "@at",
    "`tick",
    "%pct",
    "!tag",
    "&anchor",
    "*alias",
    "|",
    ">",
    "'single'",
    "\"double\"",
    "{a: 1}",
    "[1, 2]",
    "a, b",
    "line1\nline2",
    "end\n",
    "end\n\n",
    "\nlead",
    " lead\nx",
    "tab\there",
    "cr\rlf",
    "back\\slash",
    "nul\x01",
    "h\xc3\xa9llo",
    "\xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac",
    "\xef\xbb\xbf"
    "bom",
    "\xc2\x85nel",
    "\xe2\x80\xa8ls",
    "ps\xe2\x80\xa9",
    "crlf\r\n",
    "very long line of plain text that "
    "goes on well past eighty columns without any line break in it at all, on and on",
};

/* out_yaml's text parsed back (libyaml's parser, numbers typed) equals the original. */
static void roundtrip(json_t *v)
{
    char *text = NULL, err[256] = "";
    size_t len = 0;
    json_t *back = NULL;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(out_yaml(f, v), 0);
    assert_int_equal(fclose(f), 0);
    if (kube_yaml_load_typed(text, len, &back, err, sizeof(err)) < 0)
        fail_msg("output does not parse (%s):\n%s", err, text);
    if (!json_equal(v, back)) {
        char *want = json_dumps(v, JSON_ENCODE_ANY), *got = json_dumps(back, JSON_ENCODE_ANY);
        fail_msg("round trip changed the value:\nwant %s\ngot  %s\nYAML:\n%s", want, got, text);
    }
    json_decref(back);
    xfree(text);
}

static void test_yaml_roundtrip(void **state)
{
    (void)state;
    json_t *obj = json_object(), *list = json_array();
    for (size_t i = 0; i < ARRAY_SIZE(tricky); i++) {
        json_t *one = json_object();
        /* as a value, a key, an item, and a value in a nested mapping inside a list */
        assert_int_equal(json_object_set_new(one, "v", json_string(tricky[i])), 0);
        assert_int_equal(json_object_set_new(one, tricky[i], json_string("k")), 0);
        assert_int_equal(
            json_object_set_new(one, "l", json_pack("[s,{s:s}]", tricky[i], "n", tricky[i])), 0);
        roundtrip(one);
        (void)json_object_set_new(obj, tricky[i], json_string(tricky[i]));
        (void)json_array_append_new(list, json_string(tricky[i]));
        json_decref(one);
    }
    (void)json_object_set_new(obj, "list", list);
    (void)json_object_set_new(obj, "nums", json_pack("[i,i,f,f,b,b,n]", 0, -42, 1.5, 1e300, 1, 0));
    (void)json_object_set_new(obj, "nested", json_pack("{s:[[],{},[{}],{s:[]}]}", "x", "y"));
    (void)json_object_set_new(obj, "nul", json_stringn("a\0b", 3));
    roundtrip(obj);
    json_decref(obj);
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

/* Cells and sandbox text reach the terminal without control characters. */
static void test_safe(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"plain text", "plain text"},
        {"tab\there", "tab\there"},
        {"\x1b]52;c;aGk=\a", "\\x1b]52;c;aGk=\\x07"},
        {"line\r\nbreak\x7f", "line\\x0d\\x0abreak\\x7f"},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
        {"\xc2\x9b"
         "31m",
         "\\xc2\\x9b31m"},        /* C1 CSI */
        {"\xc2\xa0", "\xc2\xa0"}, /* U+00A0 is fine */
        {"\xff\xc0\xaf \xed\xa0\x80 \xe2\x82", "\\xff\\xc0\\xaf \\xed\\xa0\\x80 \\xe2\\x82"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *s = out_safe_dup(cases[i].in);
        assert_string_equal(s, cases[i].want);
        xfree(s);
    }
    assert_null(out_safe_dup(NULL));
    struct buf b;
    buf_init(&b, 64);
    assert_int_equal(out_safe_append(&b, "a\nb\0c", 5, "\n"), 0);
    assert_string_equal(buf_str(&b), "a\nb\\x00c");
    buf_done(&b);
    char small[8] = "\x1b\x1b";
    out_safe_inplace(small, sizeof(small));
    assert_string_equal(small, "\\x1b\\x1");
    char utf[6] = "ab\xc3\xa9\xc3";
    out_safe_inplace(utf, sizeof(utf)); /* "ab\xc3\xa9\\xc3" cut before the escape */
    assert_string_equal(utf, "ab\xc3\xa9\\");
    char cut[5] = "abc";
    memcpy(cut, "ab\xc3\xa9", 5);
    out_safe_inplace(cut, 4); /* "ab" and half of U+00E9 would fit: the whole char goes */
    assert_string_equal(cut, "ab");
}

static void test_table_controls(void **state)
{
    (void)state;
    struct out_table t;
    out_table_init(&t, 2);
    out_table_add(&t, (const char *const[]){"ID", "COMMAND"});
    out_table_add(&t, (const char *const[]){"1", "echo \x1b]0;pwned\a\x1b[2J"});
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    out_table_print(f, &t);
    assert_int_equal(fclose(f), 0);
    out_table_done(&t);
    assert_null(strchr(text, 0x1b));
    assert_null(strchr(text, '\a'));
    assert_string_equal(text, "ID   COMMAND\n"
                              "1    echo \\x1b]0;pwned\\x07\\x1b[2J\n");
    xfree(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yaml_shapes),    cmocka_unit_test(test_yaml_quoting),
        cmocka_unit_test(test_yaml_roundtrip), cmocka_unit_test(test_age),
        cmocka_unit_test(test_table),          cmocka_unit_test(test_safe),
        cmocka_unit_test(test_table_controls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
