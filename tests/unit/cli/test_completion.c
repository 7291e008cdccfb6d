/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox completion: the bash and zsh scripts parse (bash -n), and bash
 * completes commands, flags, kinds, output and log formats and sandbox names (compgen
 * smoke test). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/wait.h>

#include "cli/cli.h"
#include "common/buf.h"

static char script[] = "/tmp/cli-completion-XXXXXX";

static void write_script(const char *shell)
{
    int fd = mkstemp(script);
    assert_true(fd >= 0);
    FILE *out = fdopen(fd, "w");
    FILE *err = fopen("/dev/null", "w");
    struct cli_globals g = {.output = "", .out = out, .err = err};
    char *argv[] = {"completion", (char *)shell, NULL};
    assert_int_equal(cli_cmd_completion(&g, 2, argv), CLI_OK);
    fclose(out);
    fclose(err);
}

/* Runs a bash snippet after sourcing the script; returns its stdout. */
static void run_bash(const char *snippet, struct buf *out)
{
    char cmd[4096];
    (void)snprintf(cmd, sizeof(cmd),
                   "bash -c 'source %s; complete -p kubectl-sandbox >/dev/null || exit 9; %s'",
                   script, snippet);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char chunk[4096];
    size_t n;
    buf_reset(out);
    while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
        assert_int_equal(buf_append(out, chunk, n), 0);
    int st = pclose(p);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_bash(void **state)
{
    (void)state;
    write_script("bash");
    char cmd[256];
    (void)snprintf(cmd, sizeof(cmd), "bash -n %s", script);
    assert_int_equal(system(cmd), 0);
    struct buf out;
    buf_init(&out, 1 << 16);
    run_bash("COMP_WORDS=(kubectl-sandbox su); COMP_CWORD=1; _kubectl_sandbox; "
             "echo ${COMPREPLY[@]}",
             &out);
    assert_string_equal(buf_str(&out), "suspend\n");
    run_bash("COMP_WORDS=(kubectl-sandbox -n x get \"\"); COMP_CWORD=4; _kubectl_sandbox; "
             "echo ${COMPREPLY[@]}",
             &out);
    assert_string_equal(buf_str(&out), "sandboxes templates claims pools\n");
    run_bash("COMP_WORDS=(kubectl-sandbox list -o y); COMP_CWORD=3; _kubectl_sandbox; "
             "echo ${COMPREPLY[@]}",
             &out);
    assert_string_equal(buf_str(&out), "yaml\n");
    run_bash("COMP_WORDS=(kubectl-sandbox exec box --st); COMP_CWORD=3; _kubectl_sandbox; "
             "echo ${COMPREPLY[@]}",
             &out);
    assert_string_equal(buf_str(&out), "--stdin\n");
    run_bash("COMP_WORDS=(kubectl-sandbox completion z); COMP_CWORD=2; _kubectl_sandbox; "
             "echo ${COMPREPLY[@]}",
             &out);
    assert_string_equal(buf_str(&out), "zsh\n");
    /* a global option's value is not taken for the command */
    run_bash("COMP_WORDS=(kubectl-sandbox --log-format json get \"\"); COMP_CWORD=4; "
             "_kubectl_sandbox; echo ${COMPREPLY[@]}",
             &out);
    assert_string_equal(buf_str(&out), "sandboxes templates claims pools\n");
    run_bash("COMP_WORDS=(kubectl-sandbox --log-format j); COMP_CWORD=2; _kubectl_sandbox; "
             "echo ${COMPREPLY[@]}",
             &out);
    assert_string_equal(buf_str(&out), "json\n");
    /* stat, mkdir, mv and watch complete the sandbox NAME, then nothing of their own */
    run_bash("_kubectl_sandbox_names() { echo box; }; COMP_WORDS=(kubectl-sandbox mv \"\"); "
             "COMP_CWORD=2; _kubectl_sandbox; echo ${COMPREPLY[@]}",
             &out);
    assert_string_equal(buf_str(&out), "box\n");
    run_bash("_kubectl_sandbox_names() { echo box; }; "
             "COMP_WORDS=(kubectl-sandbox stat box \"\"); COMP_CWORD=3; _kubectl_sandbox; "
             "echo ${COMPREPLY[@]}",
             &out);
    assert_string_equal(buf_str(&out), "\n");
    buf_done(&out);
    unlink(script);
}

static void test_zsh_script(void **state)
{
    (void)state;
    (void)snprintf(script, sizeof(script), "/tmp/cli-completion-XXXXXX");
    write_script("zsh");
    FILE *f = fopen(script, "r");
    char line[256];
    assert_non_null(fgets(line, sizeof(line), f));
    assert_string_equal(line, "#compdef kubectl-sandbox\n");
    fclose(f);
    char cmd[256];
    (void)snprintf(cmd, sizeof(cmd), "bash -n %s", script); /* bashcompinit runs it as bash */
    assert_int_equal(system(cmd), 0);
    unlink(script);
    FILE *err = fopen("/dev/null", "w");
    struct cli_globals g = {.output = "", .out = err, .err = err};
    char *argv[] = {"completion", "fish", NULL};
    assert_int_equal(cli_cmd_completion(&g, 2, argv), CLI_USAGE);
    fclose(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bash),
        cmocka_unit_test(test_zsh_script),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
