/* SPDX-License-Identifier: Apache-2.0 */
/* Page merging opt-in: the $SANDBOXD_MEMORY_MERGE grammar, and on a kernel that has
 * PR_SET_MEMORY_MERGE, that the mark is set, read back and inherited by a child across
 * execve, and stays out of processes that did not ask. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sys/wait.h>

#include "sandboxd/memmerge.h"

static void test_parse(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int ret;
        enum sbd_memmerge_mode mode;
    } cases[] = {
        {"1", 0, SBD_MEMMERGE_ON},
        {"true", 0, SBD_MEMMERGE_ON},
        {"YES", 0, SBD_MEMMERGE_ON},
        {"on", 0, SBD_MEMMERGE_ON},
        {"Enabled", 0, SBD_MEMMERGE_ON},
        {"fixed-layout", 0, SBD_MEMMERGE_FIXED_LAYOUT},
        {"Maximal", 0, SBD_MEMMERGE_FIXED_LAYOUT},
        {"", 0, SBD_MEMMERGE_OFF},
        {"0", 0, SBD_MEMMERGE_OFF},
        {"false", 0, SBD_MEMMERGE_OFF},
        {"Off", 0, SBD_MEMMERGE_OFF},
        {"Disabled", 0, SBD_MEMMERGE_OFF},
        {"2", -EINVAL, SBD_MEMMERGE_OFF},
        {"enable", -EINVAL, SBD_MEMMERGE_OFF},
        {" 1", -EINVAL, SBD_MEMMERGE_OFF},
        {"fixed", -EINVAL, SBD_MEMMERGE_OFF},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        enum sbd_memmerge_mode m = (enum sbd_memmerge_mode)99;
        int r = sbd_memmerge_parse(cases[i].in, &m);
        assert_int_equal(r, cases[i].ret);
        if (r == 0)
            assert_int_equal(m, cases[i].mode);
        else
            assert_int_equal(m, 99); /* untouched on error */
    }
    enum sbd_memmerge_mode m = SBD_MEMMERGE_ON;
    assert_int_equal(sbd_memmerge_parse(NULL, &m), 0);
    assert_int_equal(m, SBD_MEMMERGE_OFF);
}

/* Exit status of `sh -c script` in a child (what a program started after the change
 * sees), -1 when it cannot be told. */
static int sh_status(const char *script)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", script, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* 0 when a child program is marked mergeable (the kernel's /proc/self/ksm_stat), 1 not. */
static int child_sees_merge_any(void)
{
    return sh_status("grep -q 'ksm_merge_any: yes' /proc/self/ksm_stat");
}

/* In a child (an ASan process's mappings are huge: the test keeps them out of it): the
 * mark is off, then on, read back, and seen by a grandchild across execve. Exit codes
 * name the step that failed. */
static int enable_in_child(void)
{
    if (sbd_memmerge_get() != 0)
        return 10;
    int r = sbd_memmerge_enable();
    if (r == -EINVAL)
        return 77; /* kernel before 6.4 */
    if (r < 0)
        return 11;
    if (sbd_memmerge_get() != 1)
        return 12;
    if (access("/proc/self/ksm_stat", R_OK) == 0 && child_sees_merge_any() != 0)
        return 13;
    return 0;
}

/* 0 when ADDR_NO_RANDOMIZE (0x0040000) reached a child program across execve, 1 not. */
static int child_has_fixed_layout(void)
{
    return sh_status("grep -q '^00040000$' /proc/self/personality");
}

static int fix_layout_in_child(void)
{
    if (child_has_fixed_layout() != 1)
        return 20;
    int r = sbd_memmerge_fix_layout();
    if (r == -EPERM)
        return 77; /* a seccomp profile refuses personality() */
    if (r < 0)
        return 21;
    return child_has_fixed_layout() == 0 ? 0 : 22;
}

static void test_fix_layout_inherit(void **state)
{
    (void)state;
    if (access("/proc/self/personality", R_OK) != 0) {
        skip();
        return;
    }
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(fix_layout_in_child());
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) == 77) {
        skip();
        return;
    }
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(child_has_fixed_layout(), 1); /* not in the parent */
}

static void test_enable_inherit(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(enable_in_child());
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) == 77) {
        skip();
        return;
    }
    assert_int_equal(WEXITSTATUS(st), 0);
    /* the parent was never marked, nor are its other children */
    assert_int_equal(sbd_memmerge_get(), 0);
    if (access("/proc/self/ksm_stat", R_OK) == 0)
        assert_int_equal(child_sees_merge_any(), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_enable_inherit),
        cmocka_unit_test(test_fix_layout_inherit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
