/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: the daemons' flag convention (common/flag.h): the getopt loop, the common
 * flags, the value parsers and the one-line messages. */
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

#include "common/flag.h"
#include "common/log.h"
#include "common/xalloc.h"

enum { T_NAME = FLAG_OWN, T_ON, T_COUNT, T_WAIT, T_TTL, T_UNSAFE };

static const struct option opts[] = {
    {"name", required_argument, NULL, T_NAME},
    {"on", optional_argument, NULL, T_ON},
    {"count", required_argument, NULL, T_COUNT},
    {"wait", required_argument, NULL, T_WAIT},
    {"ttl", required_argument, NULL, T_TTL},
    {"unsafe", no_argument, NULL, T_UNSAFE},
    FLAG_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

struct vals {
    const char *name;
    bool on, unsafe;
    int64_t count;
    usec_t wait, ttl;
};

static int apply(void *ctx, int id, const char *v)
{
    struct vals *f = ctx;
    switch (id) {
    case T_NAME:
        f->name = v;
        return 0;
    case T_ON:
        return flag_bool(v, &f->on);
    case T_COUNT:
        return flag_int(v, 1, 10, &f->count);
    case T_WAIT:
        return flag_duration(v, 1, 3600 * USEC_PER_SEC, &f->wait);
    case T_TTL:
        return flag_duration_secs(v, 0, 3600 * USEC_PER_SEC, &f->ttl);
    case T_UNSAFE:
        return flag_bool(v, &f->unsafe);
    default:
        return -EINVAL;
    }
}

/* What one flag_parse printed on stdout and stderr. */
struct output {
    char out[512], err[512];
};

/* Moves fd to a temporary file; returns the saved fd. */
static int redirect(FILE *stream, FILE *tmp)
{
    int saved = dup(fileno(stream));
    assert_true(saved >= 0);
    (void)fflush(stream);
    assert_true(dup2(fileno(tmp), fileno(stream)) >= 0);
    return saved;
}

static void restore(FILE *stream, FILE *tmp, int saved, char *buf, size_t size)
{
    size_t n;
    (void)fflush(stream);
    assert_true(dup2(saved, fileno(stream)) >= 0);
    (void)close(saved);
    rewind(tmp);
    n = fread(buf, 1, size - 1, tmp);
    buf[n] = '\0';
    (void)fclose(tmp);
}

/* Runs flag_parse over args (NULL-terminated, argv[0] first) into *f and *o. */
static int run(const char *const *args, struct vals *f, struct output *o)
{
    const struct flag_spec spec = {.prog = "prog",
                                   .version = "1.2.3",
                                   .usage = "Usage: prog [flags]\n",
                                   .opts = opts,
                                   .apply = apply,
                                   .ctx = f};
    char *argv[16];
    int argc = 0, r, so, se;
    FILE *tout = tmpfile(), *terr = tmpfile();

    assert_non_null(tout);
    assert_non_null(terr);
    while (args[argc]) {
        assert_true(argc < 15);
        argv[argc] = (char *)args[argc];
        argc++;
    }
    argv[argc] = NULL;
    *f = (struct vals){0};
    so = redirect(stdout, tout);
    se = redirect(stderr, terr);
    r = flag_parse(&spec, argc, argv);
    restore(stderr, terr, se, o->err, sizeof(o->err));
    restore(stdout, tout, so, o->out, sizeof(o->out));
    return r;
}

static void test_values(void **state)
{
    struct vals f;
    struct output o;
    (void)state;
    assert_int_equal(run((const char *const[]){"prog", "--name=x", "--on", "--count", "3",
                                               "--wait=1m30s", "--ttl", "30", "--unsafe", NULL},
                         &f, &o),
                     0);
    assert_string_equal(f.name, "x");
    assert_true(f.on);
    assert_true(f.unsafe);
    assert_int_equal(f.count, 3);
    assert_int_equal(f.wait, 90 * USEC_PER_SEC);
    assert_int_equal(f.ttl, 30 * USEC_PER_SEC);
    assert_string_equal(o.err, "");
    assert_string_equal(o.out, "");

    /* booleans in cstr_to_bool's spellings; durations in both forms */
    static const char *const bools[][2] = {{"--on=true", "1"},  {"--on=1", "1"}, {"--on=T", "1"},
                                           {"--on=false", "0"}, {"--on=0", "0"}, {"--on=F", "0"}};
    for (size_t i = 0; i < ARRAY_SIZE(bools); i++) {
        assert_int_equal(run((const char *const[]){"prog", "--on", bools[i][0], NULL}, &f, &o), 0);
        assert_int_equal(f.on, bools[i][1][0] == '1');
    }
    assert_int_equal(
        run((const char *const[]){"prog", "--ttl=0.5", "--wait", "300ms", NULL}, &f, &o), 0);
    assert_int_equal(f.ttl, 500 * USEC_PER_MSEC);
    assert_int_equal(f.wait, 300 * USEC_PER_MSEC);
    assert_int_equal(run((const char *const[]){"prog", "--ttl=0", "--count=10", NULL}, &f, &o), 0);
    assert_int_equal(f.ttl, 0);
    assert_int_equal(f.count, 10);
    /* bounds are checked in microseconds: 1h1ns is 1h */
    assert_int_equal(run((const char *const[]){"prog", "--wait=1h1ns", NULL}, &f, &o), 0);
    assert_int_equal(f.wait, 3600 * USEC_PER_SEC);
}

static void test_bad_values(void **state)
{
    static const struct {
        const char *arg, *err;
    } v[] = {
        {"--on=yes", "prog: bad value \"yes\" for --on: not valid (see --help)\n"},
        {"--count=0", "prog: bad value \"0\" for --count: out of range (see --help)\n"},
        {"--count=11", "prog: bad value \"11\" for --count: out of range (see --help)\n"},
        {"--count=-1", "prog: bad value \"-1\" for --count: out of range (see --help)\n"},
        {"--count=3x", "prog: bad value \"3x\" for --count: not valid (see --help)\n"},
        {"--count=99999999999999999999",
         "prog: bad value \"99999999999999999999\" for --count: out of range (see --help)\n"},
        {"--wait=30", "prog: bad value \"30\" for --wait: not valid (see --help)\n"},
        {"--wait=0", "prog: bad value \"0\" for --wait: out of range (see --help)\n"},
        {"--wait=-1s", "prog: bad value \"-1s\" for --wait: out of range (see --help)\n"},
        {"--wait=1h1us", "prog: bad value \"1h1us\" for --wait: out of range (see --help)\n"},
        {"--ttl=1m30", "prog: bad value \"1m30\" for --ttl: not valid (see --help)\n"},
        {"--log-level=loud", "prog: bad value \"loud\" for --log-level: not valid (see --help)\n"},
        {"--log-format=xml", "prog: bad value \"xml\" for --log-format: not valid (see --help)\n"},
        {"--bogus", "prog: bad flag --bogus (see --help)\n"},
        {"--unsafe=1", "prog: bad flag --unsafe=1 (see --help)\n"},
        {"--count", "prog: bad flag --count (see --help)\n"},
        {"stray", "prog: unexpected argument stray (see --help)\n"},
    };
    struct vals f;
    struct output o;
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(v); i++) {
        int r = run((const char *const[]){"prog", "--name=n", v[i].arg, NULL}, &f, &o);
        if (r != -EINVAL)
            fail_msg("%s: got %d, want -EINVAL", v[i].arg, r);
        if (strcmp(o.err, v[i].err) != 0)
            fail_msg("%s: printed \"%s\", want \"%s\"", v[i].arg, o.err, v[i].err);
    }
}

static void test_common_flags(void **state)
{
    struct vals f;
    struct output o;
    (void)state;
    assert_int_equal(run((const char *const[]){"prog", "--version", NULL}, &f, &o), 1);
    assert_string_equal(o.out, "prog, version 1.2.3\n");
    assert_int_equal(
        run((const char *const[]){"prog", "--count=2", "--help", "--bogus", NULL}, &f, &o), 1);
    assert_string_equal(o.out, "Usage: prog [flags]\n");
    assert_string_equal(o.err, "");
    assert_int_equal(f.count, 2);
    assert_int_equal(run((const char *const[]){"prog", "--log-level=debug", NULL}, &f, &o), 0);
    assert_int_equal(log_max_level, LOG_DEBUG);
    assert_int_equal(run((const char *const[]){"prog", "--log-level", "info", NULL}, &f, &o), 0);
    assert_int_equal(log_max_level, LOG_INFO);
    assert_int_equal(run((const char *const[]){"prog", "--log-format=json", NULL}, &f, &o), 0);
    assert_int_equal(run((const char *const[]){"prog", "--log-format=text", NULL}, &f, &o), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_common_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
