/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox: global options anywhere, durations, sandboxd URLs and error texts,
 * the pod log path, delete's arguments, the messages for bad option values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/sbd.h"
#include "common/duration.h"
#include "common/xalloc.h"

static FILE *devnull;

static int split(const char *const *args, struct cli_globals *g, char ***rest)
{
    int argc = 0;
    while (args[argc])
        argc++;
    *g = (struct cli_globals){.output = "", .out = devnull, .err = devnull};
    return cli_split_globals(g, argc, (char **)args, rest);
}

static void test_globals_anywhere(void **state)
{
    (void)state;
    struct cli_globals g;
    char **rest = NULL;
    const char *a1[] = {"ks",        "-n",  "ns1",    "--kubeconfig=/k",
                        "get",       "sbx", "-owide", "-A",
                        "--context", "c1",  "name",   NULL};
    assert_int_equal(split(a1, &g, &rest), 3);
    assert_string_equal(rest[0], "get");
    assert_string_equal(rest[1], "sbx");
    assert_string_equal(rest[2], "name");
    assert_string_equal(g.ns, "ns1");
    assert_string_equal(g.kubeconfig, "/k");
    assert_string_equal(g.output, "wide");
    assert_string_equal(g.context, "c1");
    assert_true(g.all_namespaces);
    xfree(rest);
    /* command options pass through; nothing after "--" is interpreted */
    const char *a2[] = {"ks", "exec", "-it", "box", "--cwd",  "d", "-nfoo",
                        "--", "ls",   "-n",  "-A",  "--help", NULL};
    assert_int_equal(split(a2, &g, &rest), 10);
    assert_string_equal(rest[1], "-it");
    assert_string_equal(rest[3], "--cwd");
    assert_string_equal(rest[5], "--");
    assert_string_equal(rest[7], "-n");
    assert_string_equal(rest[9], "--help");
    assert_string_equal(g.ns, "foo");
    assert_false(g.all_namespaces);
    assert_false(g.help);
    xfree(rest);
    const char *a3[] = {"ks", "--router-url", "http://r", "--sandboxd-port", "9000", "-h", NULL};
    assert_int_equal(split(a3, &g, &rest), 0);
    assert_string_equal(g.router_url, "http://r");
    assert_int_equal(g.sandboxd_port, 9000);
    assert_true(g.help);
    xfree(rest);
}

static void test_globals_errors(void **state)
{
    (void)state;
    struct cli_globals g;
    char **rest = NULL;
    const char *const bad[][4] = {
        {"ks", "get", "-n", NULL},         /* missing value */
        {"ks", "--bogus", "get", NULL},    /* unknown before the command */
        {"ks", "--help=yes", "get", NULL}, /* value for a flag */
        {"ks", "--sandboxd-port", "0", NULL},
        {"ks", "-v", "loud", NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(split(bad[i], &g, &rest), -EINVAL);
}

/* --timeout's documented values (docs/cli.md) in the shared grammar (common/duration.h). */
static void test_duration(void **state)
{
    (void)state;
    usec_t d;
    assert_int_equal(duration_parse_secs("90", &d), 0);
    assert_int_equal(d, 90 * USEC_PER_SEC);
    assert_int_equal(duration_parse_secs("250ms", &d), 0);
    assert_int_equal(d, 250 * USEC_PER_MSEC);
    assert_int_equal(duration_parse_secs("5m", &d), 0);
    assert_int_equal(d, 300 * USEC_PER_SEC);
    assert_int_equal(duration_parse_secs("2h", &d), 0);
    assert_int_equal(d, 7200 * USEC_PER_SEC);
    assert_int_equal(duration_parse_secs("1m30s", &d), 0);
    assert_int_equal(d, 90 * USEC_PER_SEC);
    assert_int_equal(duration_parse_secs("1.5s", &d), 0);
    assert_int_equal(d, 1500 * USEC_PER_MSEC);
    assert_int_equal(duration_parse_secs("", &d), -EINVAL);
    assert_int_equal(duration_parse_secs("m", &d), -EINVAL);
    assert_int_equal(duration_parse_secs("-1s", &d), -ERANGE);
    assert_int_equal(duration_parse_secs("99999999999999999999", &d), -ERANGE);
}

static void test_proxy_base(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 4096);
    assert_int_equal(cli_sbd_proxy_base("https://127.0.0.1:6443/", "team-a", "sb-1", 8080, &b), 0);
    assert_string_equal(buf_str(&b),
                        "https://127.0.0.1:6443/api/v1/namespaces/team-a/pods/sb-1:8080/proxy");
    buf_reset(&b);
    assert_int_equal(cli_sbd_proxy_base("https://h", "n s", "p:x", 1, &b), 0);
    assert_string_equal(buf_str(&b), "https://h/api/v1/namespaces/n%20s/pods/p%3Ax:1/proxy");
    buf_reset(&b);
    assert_int_equal(cli_sbd_proxy_base("https://h", "..", "p", 80, &b), -EINVAL);
    assert_int_equal(cli_sbd_proxy_base("https://h", "ns", "a/b", 80, &b), -EINVAL);
    assert_int_equal(cli_sbd_proxy_base("https://h", "ns", "", 80, &b), -EINVAL);
    assert_int_equal(cli_sbd_proxy_base("https://h", "ns", "p", 0, &b), -EINVAL);
    assert_int_equal(cli_sbd_proxy_base("https://h", "ns", "p", 70000, &b), -EINVAL);
    buf_reset(&b);
    assert_int_equal(cli_sbd_files_path("/dir/a b/ü?#.txt", &b), 0);
    assert_string_equal(buf_str(&b), "/v1/files/dir/a%20b/%C3%BC%3F%23.txt");
    buf_reset(&b);
    assert_int_equal(cli_sbd_files_path("", &b), 0);
    assert_string_equal(buf_str(&b), "/v1/files/");
    buf_done(&b);
}

static void test_error_text(void **state)
{
    (void)state;
    char t[256];
    const char *sbd = "{\"code\":\"NOT_FOUND\",\"message\":\"no such file\"}";
    cli_sbd_error_text(404, sbd, strlen(sbd), t, sizeof(t));
    assert_string_equal(t, "HTTP 404 NOT_FOUND: no such file");
    const char *router = "{\"detail\":\"Invalid sandbox ID format.\"}";
    cli_sbd_error_text(400, router, strlen(router), t, sizeof(t));
    assert_string_equal(t, "HTTP 400: Invalid sandbox ID format.");
    const char *status = "{\"kind\":\"Status\",\"message\":\"pods \\\"x\\\" not found\"}";
    cli_sbd_error_text(404, status, strlen(status), t, sizeof(t));
    assert_string_equal(t, "HTTP 404: pods \"x\" not found");
    cli_sbd_error_text(502, "bad\ngateway", 11, t, sizeof(t));
    assert_string_equal(t, "HTTP 502: bad gateway");
    cli_sbd_error_text(500, NULL, 0, t, sizeof(t));
    assert_string_equal(t, "HTTP 500");
    /* terminal controls from the other side are shown, not sent: OSC 52 (clipboard) */
    const char *osc = "{\"message\":\"f\\u001b]52;c;aGk=\\u0007 \\u009b2J\"}";
    cli_sbd_error_text(400, osc, strlen(osc), t, sizeof(t));
    assert_null(strchr(t, '\x1b'));
    assert_null(strchr(t, '\a'));
    assert_string_equal(t, "HTTP 400: f\\x1b]52;c;aGk=\\x07 \\xc2\\x9b2J");
    cli_sbd_error_text(502, "\x1b[2J\xff", 5, t, 16); /* cut to size */
    assert_string_equal(t, "HTTP 502: \\x1b[");
}

/* run-code's interrupt: the context id from the stream is one escaped segment, and dot
 * segments (which curl resolves) are refused. */
static void test_interrupt_path(void **state)
{
    (void)state;
    static const struct {
        const char *id, *want;
        int rc;
    } cases[] = {
        {"default", "/v1/contexts/default/interrupt", 0},
        {"a b", "/v1/contexts/a%20b/interrupt", 0},
        {"../../../api/v1/namespaces/x/secrets?",
         "/v1/contexts/..%2F..%2F..%2Fapi%2Fv1%2Fnamespaces%2Fx%2Fsecrets%3F/interrupt", 0},
        {"x#frag", "/v1/contexts/x%23frag/interrupt", 0},
        {"..", "", -EINVAL},
        {".", "", -EINVAL},
        {"", "", -EINVAL},
        {NULL, "", -EINVAL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct buf b;
        buf_init(&b, 4096);
        assert_int_equal(cli_code_interrupt_path(cases[i].id, &b), cases[i].rc);
        assert_string_equal(buf_str(&b), cases[i].want);
        buf_done(&b);
    }
}

static void test_logs_path(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 4096);
    struct cli_logs_opts o = {0};
    assert_int_equal(cli_logs_path("ns", "pod", &o, &b), 0);
    assert_string_equal(buf_str(&b), "/api/v1/namespaces/ns/pods/pod/log");
    buf_reset(&b);
    o = (struct cli_logs_opts){.container = "main", .follow = true, .tail = "20"};
    assert_int_equal(cli_logs_path("ns", "pod", &o, &b), 0);
    assert_string_equal(
        buf_str(&b), "/api/v1/namespaces/ns/pods/pod/log?container=main&follow=true&tailLines=20");
    buf_reset(&b);
    o = (struct cli_logs_opts){.container = "a&b=c"};
    assert_int_equal(cli_logs_path("ns", "pod", &o, &b), -EINVAL);
    buf_reset(&b);
    o = (struct cli_logs_opts){.tail = "-3"};
    assert_int_equal(cli_logs_path("ns", "pod", &o, &b), -EINVAL);
    buf_done(&b);
}

/* delete's arguments are checked before anything is deleted: one of another form is a
 * usage error before the cluster is asked (here: before its missing kubeconfig is read),
 * not after the NAMEs ahead of it were deleted. */
static void test_delete_args(void **state)
{
    (void)state;
    struct cli_globals g = {
        .output = "", .kubeconfig = "/nonexistent/kubeconfig", .out = devnull, .err = devnull};
    char *bad[][4] = {
        {"delete", "x", "pod/y", NULL},
        {"delete", "claim/", NULL},
        {"delete", "sandbox/a/b", NULL},
        {"delete", "x", "--wait", "sbx/"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int argc = 0;
        while (argc < 4 && bad[i][argc])
            argc++;
        assert_int_equal(cli_cmd_delete(&g, argc, bad[i]), CLI_USAGE);
    }
    char *good[] = {"delete", "x", "sbx/y", "sandbox/z", "claim/c", "sandboxclaim/d", NULL};
    assert_int_equal(cli_cmd_delete(&g, 6, good), CLI_NO_CONFIG);
}

/* Runs cmd (a NULL-terminated argv) with its errors into err (reset first); returns
 * its exit code. */
static int run_err(int (*cmd)(struct cli_globals *, int, char **), char **argv, struct buf *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    struct cli_globals g = {.output = "",
                            .kubeconfig = "/nonexistent/kubeconfig",
                            .sandboxd_url = "http://127.0.0.1:1",
                            .out = devnull,
                            .err = f};
    int argc = 0;
    while (argv[argc])
        argc++;
    int rc = cmd(&g, argc, argv);
    (void)fclose(f);
    buf_reset(err);
    assert_int_equal(buf_append(err, text, len), 0);
    xfree(text);
    return rc;
}

/* A --timeout that is no duration is named as such (before: "bad option 5x", the value
 * taken for an option), as are exec's -e without K=V and shell's empty --name. */
static void test_bad_values(void **state)
{
    (void)state;
    struct buf err;
    buf_init(&err, 4096);
    char *exec_t[] = {"exec", "x", "--timeout", "5x", "--", "true", NULL};
    char *exec_e[] = {"exec", "x", "-e", "NOEQUALS", "--", "true", NULL};
    char *code_t[] = {"run-code", "x", "--timeout", "0", "-c", "1", NULL};
    char *susp_t[] = {"suspend", "x", "--timeout", "5x", NULL};
    char *del_t[] = {"delete", "x", "--timeout=5x", NULL};
    char *inst_t[] = {"install", "--dry-run", "--timeout", "5x", NULL};
    char *claim_t[] = {"claim", "p", "--timeout", "5x", NULL};
    char *shell_t[] = {"shell", "--pool", "p", "--timeout", "5x", NULL};
    char *shell_n[] = {"shell", "--pool", "p", "--name", "", NULL};
    char *logs_t[] = {"logs", "x", "--tail", "abc", NULL};
    char *logs_p[] = {"logs", "x", "--process", "7", "--tail", "3", NULL};
    char *logs_c[] = {"logs", "x", "-p", "7", "-c", "main", NULL};
    char *mkdir_e[] = {"mkdir", "x", "d", "--mode=", NULL};
    char *mkdir_big[] = {"mkdir", "x", "d", "--mode", "77777", NULL};
    const struct {
        int (*cmd)(struct cli_globals *, int, char **);
        char **argv;
        const char *want;
    } cases[] = {
        {cli_cmd_exec, exec_t, "error: --timeout: not a duration: 5x"},
        {cli_cmd_exec, exec_e, "error: -e/--env takes K=V, not NOEQUALS"},
        {cli_cmd_run_code, code_t, "error: --timeout: not a duration above 0: 0"},
        {cli_cmd_suspend, susp_t, "error: --timeout: not a duration: 5x"},
        {cli_cmd_delete, del_t, "error: --timeout: not a duration: 5x"},
        {cli_cmd_install, inst_t, "error: --timeout: not a duration: 5x"},
        {cli_cmd_claim, claim_t, "error: --timeout: not a duration: 5x"},
        {cli_cmd_shell, shell_t, "error: --timeout: not a duration: 5x"},
        {cli_cmd_shell, shell_n, "error: --name takes a name"},
        {cli_cmd_logs, logs_t, "error: --tail: not a count of lines: abc"},
        {cli_cmd_logs, logs_p, "error: -c and --tail do not apply to --process"},
        {cli_cmd_logs, logs_c, "error: -c and --tail do not apply to --process"},
        {cli_cmd_mkdir, mkdir_e, "error: --mode takes octal digits such as 0750"},
        {cli_cmd_mkdir, mkdir_big, "error: --mode takes octal digits such as 0750"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(run_err(cases[i].cmd, cases[i].argv, &err), CLI_USAGE);
        assert_non_null(strstr(buf_str(&err), cases[i].want));
    }
    buf_done(&err);
}

int main(void)
{
    devnull = fopen("/dev/null", "w");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_globals_anywhere), cmocka_unit_test(test_globals_errors),
        cmocka_unit_test(test_duration),         cmocka_unit_test(test_proxy_base),
        cmocka_unit_test(test_error_text),       cmocka_unit_test(test_logs_path),
        cmocka_unit_test(test_interrupt_path),   cmocka_unit_test(test_delete_args),
        cmocka_unit_test(test_bad_values),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    fclose(devnull);
    return r;
}
