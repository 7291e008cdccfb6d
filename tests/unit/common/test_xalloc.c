/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/xalloc: string helpers, array helpers, macros, ASSERT. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <sys/wait.h>

#include "common/xalloc.h"

static void test_asprintf(void **state)
{
    (void)state;
    char *s = xasprintf("%s-%d-%05.1f", "a", -7, 2.25);
    assert_string_equal(s, "a--7-002.2");
    xfree(s);
    s = xasprintf("%s", "");
    assert_string_equal(s, "");
    xfree(s);
    char big[5000];
    memset(big, 'z', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    s = xasprintf("<%s>", big);
    assert_int_equal(strlen(s), sizeof(big) + 1);
    assert_int_equal(s[0], '<');
    assert_int_equal(s[sizeof(big)], '>');
    xfree(s);
}

static void test_strdup(void **state)
{
    (void)state;
    assert_null(xstrdup(NULL));
    char *s = xstrdup("copy");
    assert_string_equal(s, "copy");
    xfree(s);
    s = xstrndup("abcdef", 3);
    assert_string_equal(s, "abc");
    xfree(s);
    s = xstrndup("", 0);
    assert_string_equal(s, "");
    xfree(s);
    /* Copies exactly n bytes, embedded NULs included, and terminates. */
    s = xstrndup("a\0b", 3);
    assert_memory_equal(s, "a\0b\0", 4);
    xfree(s);
}

struct outer {
    int a;
    double b;
    char c[3];
};

static void test_macros(void **state)
{
    (void)state;
    int arr[7];
    struct outer o;
    assert_int_equal(ARRAY_SIZE(arr), 7);
    assert_int_equal(ARRAY_SIZE(o.c), 3);
    assert_ptr_equal(container_of(&o.b, struct outer, b), &o);
    assert_ptr_equal(container_of(&o.c[0], struct outer, c), &o);
    assert_ptr_equal(container_of(&o.a, struct outer, a), &o);

    struct outer *p = XNEW(struct outer);
    assert_int_equal(p->a, 0);
    assert_true(p->b == 0);
    XFREE(p);
    assert_null(p);
    XFREE(p); /* NULL is fine */
    xfree(NULL);
}

static void test_arrays(void **state)
{
    (void)state;
    int *v = xcalloc(100, sizeof(*v));
    for (int i = 0; i < 100; i++)
        assert_int_equal(v[i], 0);
    v = xreallocarray(v, 1000, sizeof(*v));
    v[999] = 5;
    assert_int_equal(v[0], 0);
    v = xrealloc(v, 0); /* still a valid, freeable pointer */
    assert_non_null(v);
    xfree(v);
    void *z = xmalloc(0);
    assert_non_null(z);
    xfree(z);
    z = xcalloc(0, 0);
    assert_non_null(z);
    xfree(z);
}

/* Runs fn in a child and expects it to abort. */
static void expect_abort(void (*fn)(void))
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            (void)dup2(devnull, 2);
        fn();
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
}

static volatile int one = 1;

static void failing_assert(void)
{
    ASSERT(one == 2);
}

static void overflowing_array(void)
{
    xfree(xreallocarray(NULL, SIZE_MAX / 2, 4));
}

static void test_abort_paths(void **state)
{
    (void)state;
    expect_abort(failing_assert);
    expect_abort(overflowing_array);
    ASSERT(one == 1); /* a true assertion does nothing */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_asprintf),    cmocka_unit_test(test_strdup),
        cmocka_unit_test(test_macros),      cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_abort_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
