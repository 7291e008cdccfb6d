/* SPDX-License-Identifier: Apache-2.0 */
/* A main() for the fuzz targets built without libFuzzer: replays every file of the
 * corpus directories (or single files) given as arguments through
 * LLVMFuzzerTestOneInput, so each corpus runs under gcc with ASan/UBSan as an ordinary
 * test. Exits 1 when no input was found or one could not be read; a failing input
 * aborts inside the target (the sanitizer or ASSERT report names it on stderr). */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "common/buf.h"
#include "common/xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_MAX_INPUT (4u * 1024 * 1024) /* libFuzzer's default -max_len is far below */

static int replay_file(const char *path)
{
    struct buf b;
    FILE *f = fopen(path, "rb");
    char chunk[65536];
    size_t n;
    int r = 0;
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -errno;
    }
    buf_init(&b, REPLAY_MAX_INPUT);
    while (r >= 0 && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        r = buf_append(&b, chunk, n);
    (void)fclose(f);
    if (r < 0) {
        fprintf(stderr, "replay: %s: larger than %u bytes\n", path, REPLAY_MAX_INPUT);
    } else {
        /* An exact-size copy, so that ASan catches reads past the input's end. */
        uint8_t *copy = xmalloc(b.len ? b.len : 1);
        memcpy(copy, b.data, b.len);
        (void)LLVMFuzzerTestOneInput(copy, b.len);
        xfree(copy);
    }
    buf_done(&b);
    return r;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays a directory's regular files in name order; returns the count or -errno. */
static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int r = 0;
    if (!d) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -errno;
    }
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        if (n == cap)
            names = xrealloc(names, (cap = cap ? 2 * cap : 64) * sizeof(*names));
        names[n++] = xasprintf("%s/%s", dir, de->d_name);
    }
    (void)closedir(d);
    qsort(names, n, sizeof(*names), cmp_names);
    for (size_t i = 0; i < n; i++) {
        if (r >= 0 && replay_file(names[i]) < 0)
            r = -EIO;
        xfree(names[i]);
    }
    xfree(names);
    return r < 0 ? r : (int)n;
}

int main(int argc, char **argv)
{
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        int r;
        if (stat(argv[i], &st) < 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        r = S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : (replay_file(argv[i]) < 0 ? -EIO : 1);
        if (r < 0)
            return 1;
        total += r;
    }
    printf("replayed %d inputs\n", total);
    return total > 0 ? 0 : 1;
}
