/* SPDX-License-Identifier: Apache-2.0 */
/* Replays the path fuzzer's corpus (fuzz/corpus/sandboxd_path) through its target as a
 * plain test, so the corpus runs under gcc with ASan/UBSan in every build. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <dirent.h>

#include "../../../fuzz/fuzz_sandboxd_path.c"

static void test_replay_corpus(void **state)
{
    (void)state;
    char dir[2048];
    const char *corpus = getenv("AS_FUZZ_CORPUS"); /* fuzz/corpus, set by tests/CMakeLists.txt */
    assert_non_null(corpus);
    (void)snprintf(dir, sizeof(dir), "%s/sandboxd_path", corpus);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char p[2400];
        (void)snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        FILE *f = fopen(p, "rb");
        assert_non_null(f);
        uint8_t buf[8192];
        size_t len = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        assert_int_equal(LLVMFuzzerTestOneInput(buf, len), 0);
        n++;
    }
    closedir(d);
    assert_true(n >= 20);
    /* Also a few generated inputs: every byte value, long paths, deep "..". */
    uint8_t all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (uint8_t)i;
    assert_int_equal(LLVMFuzzerTestOneInput(all, sizeof(all)), 0);
    char deep[3000] = "";
    size_t dl = 0;
    for (int i = 0; i < 900 && dl + 4 < sizeof(deep); i++)
        dl += (size_t)snprintf(deep + dl, sizeof(deep) - dl, "%s", i % 3 ? "a/" : "../");
    assert_int_equal(LLVMFuzzerTestOneInput((const uint8_t *)deep, strlen(deep)), 0);
    char rm[128];
    (void)snprintf(rm, sizeof(rm), "rm -rf '%s'", fuzz_base);
    assert_int_equal(system(rm), 0);
    sbd_root_free(fuzz_root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_replay_corpus)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
