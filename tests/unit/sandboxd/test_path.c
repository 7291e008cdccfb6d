/* SPDX-License-Identifier: Apache-2.0 */
/* Path confinement: lexical cleaning table, escape attempts through "..", absolute and
 * relative symlinks (existing targets, new files, nested new files), sibling prefixes,
 * magic links, and a race that swaps a directory for an escaping symlink. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "common/xalloc.h"
#include "sandboxd/path.h"

struct fixture {
    char base[64];     /* temp dir holding root/ and outside files */
    char root[128];    /* base/workspace */
    char sibling[128]; /* base/workspace-evil */
    struct sbd_root *r;
};

static void write_file(const char *path, const char *content)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(content, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
    struct fixture *f = XNEW(struct fixture);
    snprintf(f->base, sizeof(f->base), "/tmp/sbd-path-XXXXXX");
    assert_non_null(mkdtemp(f->base));
    snprintf(f->root, sizeof(f->root), "%s/workspace", f->base);
    snprintf(f->sibling, sizeof(f->sibling), "%s/workspace-evil", f->base);
    assert_int_equal(mkdir(f->root, 0755), 0);
    assert_int_equal(mkdir(f->sibling, 0755), 0);
    char p[256];
    snprintf(p, sizeof(p), "%s/secret", f->base);
    write_file(p, "outside");
    snprintf(p, sizeof(p), "%s/secret", f->sibling);
    write_file(p, "sibling");
    snprintf(p, sizeof(p), "%s/inside.txt", f->root);
    write_file(p, "inside");
    assert_int_equal(sbd_root_open(f->root, false, &f->r), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->base);
    assert_int_equal(system(cmd), 0);
    sbd_root_free(f->r);
    xfree(f);
    return 0;
}

static void check_clean(const char *root, const char *in, int want_r, const char *want)
{
    char *out = NULL;
    int r = sbd_path_clean(root, str_c(in), &out);
    if (r != want_r)
        fail_msg("clean(%s): got %d want %d", in, r, want_r);
    if (want)
        assert_string_equal(out, want);
    xfree(out);
}

static void test_clean_table(void **state)
{
    (void)state;
    const char *root = "/workspace";
    check_clean(root, "", 0, ".");
    check_clean(root, ".", 0, ".");
    check_clean(root, "/", 0, ".");
    check_clean(root, "a.txt", 0, "a.txt");
    check_clean(root, "a//b/./c/", 0, "a/b/c");
    check_clean(root, "a/b/../c", 0, "a/c");
    check_clean(root, "/workspace", 0, ".");
    check_clean(root, "/workspace/", 0, ".");
    check_clean(root, "/workspace/f.txt", 0, "f.txt");
    check_clean(root, "/workspace-evil/f.txt", 0, "workspace-evil/f.txt");
    check_clean(root, "/etc/passwd", 0, "etc/passwd");
    check_clean(root, "/../etc/passwd", 0, "etc/passwd");
    check_clean(root, "/workspace/../workspace-evil/x", 0, "workspace-evil/x");
    check_clean(root, "../etc/passwd", -EPERM, NULL);
    check_clean(root, "../../etc/passwd", -EPERM, NULL);
    check_clean(root, "a/../../etc/passwd", -EPERM, NULL);
    check_clean(root, "..", -EPERM, NULL);
    check_clean(root, "../workspace-evil/secret", -EPERM, NULL);
    check_clean(root, "a/..", 0, ".");
    check_clean(NULL, "/x/y", 0, "x/y");
    char *out = NULL;
    assert_int_equal(sbd_path_clean(root, str_make("a\0b", 3), &out), -EINVAL);
    char big[5000];
    memset(big, 'a', sizeof(big));
    assert_int_equal(sbd_path_clean(root, str_make(big, sizeof(big)), &out), -ENAMETOOLONG);
    assert_null(out);
}

/* Opens user path for reading through clean + open; returns fd or negative. */
static int open_user(struct fixture *f, const char *user)
{
    char *rel = NULL;
    int r = sbd_path_clean(sbd_root_path(f->r), str_c(user), &rel);
    if (r < 0)
        return r;
    r = sbd_path_open(f->r, rel, O_RDONLY, 0);
    xfree(rel);
    return r;
}

static void read_expect(int fd, const char *want)
{
    char b[64] = {0};
    assert_true(fd >= 0);
    ssize_t n = read(fd, b, sizeof(b) - 1);
    assert_int_equal(n, (ssize_t)strlen(want));
    assert_string_equal(b, want);
    close(fd);
}

static void test_open_inside(void **state)
{
    struct fixture *f = *state;
    read_expect(open_user(f, "inside.txt"), "inside");
    read_expect(open_user(f, "/inside.txt"), "inside");
    char abs[256];
    snprintf(abs, sizeof(abs), "%s/inside.txt", f->root);
    read_expect(open_user(f, abs), "inside");
    int fd = open_user(f, "");
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(open_user(f, "missing"), -ENOENT);
}

static void link_in_root(struct fixture *f, const char *target, const char *name)
{
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", f->root, name);
    assert_int_equal(symlink(target, p), 0);
}

static void test_escapes(void **state)
{
    struct fixture *f = *state;
    char abs_secret[256], abs_inside[256];
    snprintf(abs_secret, sizeof(abs_secret), "%s/secret", f->base);
    snprintf(abs_inside, sizeof(abs_inside), "%s/inside.txt", f->root);
    link_in_root(f, "../secret", "rel-out");
    link_in_root(f, abs_secret, "abs-out");
    link_in_root(f, "..", "up");
    link_in_root(f, "../workspace-evil", "sib");
    link_in_root(f, "inside.txt", "rel-in");
    link_in_root(f, "/proc/self/root/etc/passwd", "magic");
    struct {
        const char *path;
        int want;
    } cases[] = {
        {"../secret", -EPERM},      {"../../etc/passwd", -EPERM},
        {"a/../../secret", -EPERM}, {"..", -EPERM},
        {"rel-out", -EPERM},        {"abs-out", -EPERM},
        {"up/secret", -EPERM},      {"up/workspace/inside.txt", -EPERM},
        {"sib/secret", -EPERM},     {"../workspace-evil/secret", -EPERM},
        {"magic", -EPERM},          {"/workspace-evil/secret", -ENOENT},
        {"/etc/passwd", -ENOENT},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        int fd = open_user(f, cases[i].path);
        if (fd != cases[i].want)
            fail_msg("%s: got %d want %d", cases[i].path, fd, cases[i].want);
    }
    read_expect(open_user(f, "rel-in"), "inside");
    /* ".." is lexical, as upstream: "rel-in/.." is the root, not a path under a file. */
    int fd = open_user(f, "rel-in/..");
    assert_true(fd >= 0);
    close(fd);
    assert_true(sbd_path_err_is_denied(-EPERM));
    assert_false(sbd_path_err_is_denied(-ENOENT));
}

static void test_parent_new_files(void **state)
{
    struct fixture *f = *state;
    link_in_root(f, "..", "up");
    link_in_root(f, f->base, "absdir");
    const char *name = NULL;
    /* New file through an escaping symlinked parent, one and two levels deep. */
    assert_int_equal(sbd_path_open_parent(f->r, "up/new.txt", true, &name), -EPERM);
    assert_int_equal(sbd_path_open_parent(f->r, "up/x/y/new.txt", true, &name), -EPERM);
    assert_int_equal(sbd_path_open_parent(f->r, "absdir/new.txt", true, &name), -EPERM);
    assert_null(name);
    char p[256];
    snprintf(p, sizeof(p), "%s/x", f->base);
    struct stat st;
    assert_int_equal(stat(p, &st), -1); /* nothing was created outside */
    /* Nested new file inside: parents are created. */
    int fd = sbd_path_open_parent(f->r, "d1/d2/d3/new.txt", true, &name);
    assert_true(fd >= 0);
    assert_string_equal(name, "new.txt");
    close(fd);
    snprintf(p, sizeof(p), "%s/d1/d2/d3", f->root);
    assert_int_equal(stat(p, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0755);
    /* Without create a missing parent is ENOENT; the root has no parent. */
    assert_int_equal(sbd_path_open_parent(f->r, "nope/new.txt", false, &name), -ENOENT);
    assert_int_equal(sbd_path_open_parent(f->r, ".", true, &name), -EINVAL);
    fd = sbd_path_open_parent(f->r, "top.txt", false, &name);
    assert_true(fd >= 0);
    assert_string_equal(name, "top.txt");
    close(fd);
}

static void test_root_open(void **state)
{
    struct fixture *f = *state;
    struct sbd_root *r = NULL;
    assert_int_equal(sbd_root_open("", true, &r), -EINVAL);
    char p[256];
    snprintf(p, sizeof(p), "%s/new/root/dir", f->base);
    assert_int_equal(sbd_root_open(p, false, &r), -ENOENT);
    assert_int_equal(sbd_root_open(p, true, &r), 0);
    assert_string_equal(sbd_root_path(r), p);
    assert_true(sbd_root_fd(r) >= 0);
    sbd_root_free(r);
    /* A root given through a symlink is canonicalised once. */
    char l[256];
    snprintf(l, sizeof(l), "%s/rootlink", f->base);
    assert_int_equal(symlink(f->root, l), 0);
    assert_int_equal(sbd_root_open(l, false, &r), 0);
    assert_string_equal(sbd_root_path(r), f->root);
    sbd_root_free(r);
}

struct race {
    struct fixture *f;
    atomic_bool stop;
};

/* Swaps root/d between a real directory and a symlink to the outside directory. */
static void *swapper(void *arg)
{
    struct race *rc = arg;
    char d[256], real[256], lnk[256];
    snprintf(d, sizeof(d), "%s/d", rc->f->root);
    snprintf(real, sizeof(real), "%s/d.real", rc->f->root);
    snprintf(lnk, sizeof(lnk), "%s/d.link", rc->f->root);
    while (!atomic_load(&rc->stop)) {
        (void)rename(real, d);
        (void)rename(d, real);
        (void)rename(lnk, d);
        (void)rename(d, lnk);
    }
    return NULL;
}

static void test_symlink_swap_race(void **state)
{
    struct fixture *f = *state;
    char p[256];
    snprintf(p, sizeof(p), "%s/d.real", f->root);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/d.real/secret", f->root);
    write_file(p, "inside");
    snprintf(p, sizeof(p), "%s/d.link", f->root);
    assert_int_equal(symlink(f->base, p), 0);
    struct race rc = {.f = f};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, swapper, &rc), 0);
    int opened = 0, denied = 0;
    for (int i = 0; i < 20000; i++) {
        int fd = open_user(f, "d/secret");
        if (fd >= 0) {
            char b[16] = {0};
            assert_true(read(fd, b, sizeof(b) - 1) > 0);
            assert_string_equal(b, "inside"); /* never "outside" */
            close(fd);
            opened++;
        } else if (fd == -EPERM) {
            denied++;
        }
        const char *name;
        int pfd = sbd_path_open_parent(f->r, "d/newfile", false, &name);
        if (pfd >= 0) {
            struct stat st;
            assert_int_equal(fstatat(pfd, "secret", &st, 0), 0);
            char b[16] = {0};
            int sfd = openat(pfd, "secret", O_RDONLY);
            if (sfd >= 0) {
                assert_true(read(sfd, b, sizeof(b) - 1) > 0);
                assert_string_equal(b, "inside");
                close(sfd);
            }
            close(pfd);
        }
    }
    atomic_store(&rc.stop, true);
    pthread_join(t, NULL);
    print_message("race: %d opened inside, %d denied\n", opened, denied);
}

/* Open descriptors of this process. */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* The parents made for a deep path hold one descriptor (not one each) while recorded;
 * undo removes every one of them, deepest first, and keeps a directory that is no longer
 * the one made (replaced) with what is above it. */
static void test_parent_made_chain(void **state)
{
    struct fixture *f = *state;
    enum { DEPTH = 300 };
    char rel[DEPTH * 2 + 16] = "", p[sizeof(rel) + 160];
    for (int i = 0; i < DEPTH; i++)
        memcpy(rel + 2 * i, "d/", 2);
    memcpy(rel + 2 * DEPTH, "file", 5);
    int before = open_fds();
    const char *name = NULL;
    struct sbd_path_made *made = NULL;
    int fd = sbd_path_open_parent_made(f->r, rel, &name, &made);
    assert_true(fd >= 0);
    assert_non_null(made);
    assert_string_equal(name, "file");
    assert_int_equal(open_fds(), before + 2); /* the parent returned, the chain's top */
    (void)close(fd);
    sbd_path_made_undo(made);
    assert_int_equal(open_fds(), before);
    snprintf(p, sizeof(p), "%s/d", f->root);
    assert_int_equal(access(p, F_OK), -1);

    /* a made directory replaced before the undo: it and the ones above it stay */
    fd = sbd_path_open_parent_made(f->r, "a/b/c/file", &name, &made);
    assert_true(fd >= 0);
    (void)close(fd);
    char other[sizeof(p)];
    snprintf(other, sizeof(other), "%s/a/other", f->root);
    assert_int_equal(mkdir(other, 0755), 0); /* another inode than a/b's while both live */
    snprintf(p, sizeof(p), "%s/a/b/c", f->root);
    assert_int_equal(rmdir(p), 0);
    snprintf(p, sizeof(p), "%s/a/b", f->root);
    assert_int_equal(rename(other, p), 0); /* another a/b */
    sbd_path_made_undo(made);
    assert_int_equal(access(p, F_OK), 0);
    snprintf(p, sizeof(p), "%s/a", f->root);
    assert_int_equal(access(p, F_OK), 0);
    /* nothing made (the parent exists): no record */
    fd = sbd_path_open_parent_made(f->r, "a/file", &name, &made);
    assert_true(fd >= 0);
    assert_null(made);
    (void)close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clean_table),
        cmocka_unit_test_setup_teardown(test_open_inside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_escapes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parent_new_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_root_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_swap_race, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parent_made_chain, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
