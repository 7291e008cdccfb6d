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
    /* the words typed, the last one being completed; sandbox names are "box" */
    static const struct {
        const char *words, *want;
    } cases[] = {
        {"su", "suspend"},
        {"-n x get \"\"", "sandboxes templates claims pools"},
        {"list -o y", "yaml"},
        {"exec box --st", "--stdin"},
        {"completion z", "zsh"},
        /* a global option's value is not taken for the command */
        {"--log-format json get \"\"", "sandboxes templates claims pools"},
        {"--log-format j", "json"},
        /* stat, mkdir, mv and watch: the sandbox NAME, then nothing of their own */
        {"mv \"\"", "box"},
        {"stat box \"\"", ""},
    };
    struct buf out;
    buf_init(&out, 1 << 16);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char snippet[512], want[256];
        (void)snprintf(snippet, sizeof(snippet),
                       "_kubectl_sandbox_names() { echo box; }; "
                       "COMP_WORDS=(kubectl-sandbox %s); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); "
                       "_kubectl_sandbox; echo ${COMPREPLY[@]}",
                       cases[i].words);
        (void)snprintf(want, sizeof(want), "%s\n", cases[i].want);
        run_bash(snippet, &out);
        assert_string_equal(buf_str(&out), want);
    }
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
