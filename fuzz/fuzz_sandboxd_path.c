/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for sandboxd's path confinement: every input is cleaned and, when
 * accepted, opened beneath a small root holding files, a nested directory and hostile
 * symlinks; any result outside the root aborts. Also built without libFuzzer by
 * tests/unit/sandboxd/test_fuzz_path.c, which replays fuzz/corpus/sandboxd_path/.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Isrc \
 *     fuzz/fuzz_sandboxd_path.c src/sandboxd/path.c src/common/{buf,str,xalloc,log,clock}.c \
 *     -o build/fuzz_sandboxd_path && build/fuzz_sandboxd_path fuzz/corpus/sandboxd_path */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "common/xalloc.h"
#include "sandboxd/path.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct sbd_root *fuzz_root;
static char fuzz_base[64];

static void fuzz_mk(const char *rel, const char *link)
{
    char p[256];
    (void)snprintf(p, sizeof(p), "%s/root/%s", fuzz_base, rel);
    if (link) {
        if (symlink(link, p) < 0)
            abort();
        return;
    }
    if (rel[strlen(rel) - 1] == '/') {
        if (mkdir(p, 0755) < 0)
            abort();
        return;
    }
    int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0)
        abort();
    (void)close(fd);
}

static void fuzz_init(void)
{
    (void)snprintf(fuzz_base, sizeof(fuzz_base), "/tmp/sbd-fuzz-XXXXXX");
    if (!mkdtemp(fuzz_base))
        abort();
    char p[128];
    (void)snprintf(p, sizeof(p), "%s/root", fuzz_base);
    if (mkdir(p, 0755) < 0 || sbd_root_open(p, false, &fuzz_root) < 0)
        abort();
    fuzz_mk("a/", NULL);
    fuzz_mk("a/b/", NULL);
    fuzz_mk("a/b/f", NULL);
    fuzz_mk("file", NULL);
    fuzz_mk("up", "..");
    fuzz_mk("a/up2", "../..");
    fuzz_mk("abs", "/etc");
    fuzz_mk("a/in", "b/f");
    fuzz_mk("loop", "loop");
    fuzz_mk("magic", "/proc/self/root");
}

/* The cleaned path: relative, no empty, "." or ".." component (or exactly "."). */
static void check_clean(const char *rel)
{
    if (strcmp(rel, ".") == 0)
        return;
    if (!*rel || rel[0] == '/' || rel[strlen(rel) - 1] == '/')
        abort();
    for (const char *c = rel; c; c = strchr(c, '/')) {
        c += *c == '/';
        size_t n = strcspn(c, "/");
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            abort();
    }
}

/* An opened descriptor must name the root or something under it. */
static void check_fd(int fd)
{
    char link[64], target[4096];
    (void)snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n < 0)
        return;
    target[n] = '\0';
    const char *root = sbd_root_path(fuzz_root);
    size_t rl = strlen(root);
    if (strncmp(target, root, rl) != 0 || (target[rl] != '\0' && target[rl] != '/'))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fuzz_root)
        fuzz_init();
    char *rel = NULL;
    if (sbd_path_clean(sbd_root_path(fuzz_root), str_make((const char *)data, size), &rel) < 0)
        return 0;
    check_clean(rel);
    int fd = sbd_path_open(fuzz_root, rel, O_PATH, 0);
    if (fd >= 0) {
        check_fd(fd);
        (void)close(fd);
    }
    const char *name = NULL;
    fd = sbd_path_open_parent(fuzz_root, rel, false, &name);
    if (fd >= 0) {
        check_fd(fd);
        if (!name || strchr(name, '/'))
            abort();
        (void)close(fd);
    }
    xfree(rel);
    return 0;
}
