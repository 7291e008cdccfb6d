/* SPDX-License-Identifier: Apache-2.0 */
#include "support/metrics_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *open_data(const char *name)
{
    char path[1024];
    const char *dir = getenv("AS_TEST_DATA");
    FILE *fp;
    assert_non_null(dir);
    assert_true(snprintf(path, sizeof(path), "%s/observability/%s", dir, name) < (int)sizeof(path));
    fp = fopen(path, "re");
    if (!fp)
        fail_msg("cannot open %s", path);
    return fp;
}

/* The label names of the first sample line of series (e.g. "x_bucket"), comma-joined
 * into out in their order, without "le". */
static void sample_labels(const char *text, const char *series, char *out, size_t size)
{
    char want[256];
    const char *p, *end;
    size_t n = 0;
    (void)snprintf(want, sizeof(want), "\n%s{", series);
    p = strstr(text, want);
    if (!p)
        fail_msg("no sample of %s in:\n%s", series, text);
    p += strlen(want);
    end = strchr(p, '}');
    assert_non_null(end);
    out[0] = '\0';
    while (p < end) {
        const char *eq = strchr(p, '=');
        assert_non_null(eq);
        if (!(eq - p == 2 && strncmp(p, "le", 2) == 0)) {
            n += (size_t)snprintf(out + n, size - n, "%s%.*s", n ? "," : "", (int)(eq - p), p);
            assert_true(n < size);
        }
        p = eq + 2; /* past =" */
        while (*p && !(*p == '"' && p[-1] != '\\'))
            p++;
        p += *p == '"';
        p += *p == ',';
    }
}

static int check_families(const char *text)
{
    char line[512], name[128], type[32], labels[256], got[256], want[256], series[160];
    FILE *fp = open_data("upstream_metrics.txt");
    int checked = 0;
    while (fgets(line, sizeof(line), fp)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        assert_int_equal(sscanf(line, "%127s %31s %255s", name, type, labels), 3);
        (void)snprintf(want, sizeof(want), "\n# TYPE %s %s\n", name, type);
        if (!strstr(text, want))
            fail_msg("missing '# TYPE %s %s' in:\n%s", name, type, text);
        (void)snprintf(series, sizeof(series), "%s%s", name,
                       strcmp(type, "histogram") == 0 ? "_bucket" : "");
        sample_labels(text, series, got, sizeof(got));
        assert_string_equal(got, strcmp(labels, "-") == 0 ? "" : labels);
        checked++;
    }
    fclose(fp);
    return checked;
}

static int check_buckets(const char *text)
{
    char line[512], name[128], bounds[384], want[160];
    FILE *fp = open_data("upstream_buckets.txt");
    int checked = 0;
    while (fgets(line, sizeof(line), fp)) {
        size_t nb = 0;
        const char *p;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        assert_int_equal(sscanf(line, "%127s %383s", name, bounds), 2);
        for (char *save = NULL, *b = strtok_r(bounds, ",", &save); b;
             b = strtok_r(NULL, ",", &save), nb++) {
            (void)snprintf(want, sizeof(want), "le=\"%s\"}", b);
            p = strstr(text, name);
            assert_non_null(p);
            if (!strstr(p, want))
                fail_msg("%s has no bucket %s", name, b);
        }
        /* No bucket beyond upstream's (+ the implicit +Inf) on the first series. */
        (void)snprintf(want, sizeof(want), "\n%s_bucket{", name);
        p = strstr(text, want);
        assert_non_null(p);
        for (size_t k = 0; k < nb; k++)
            assert_non_null(p = strstr(p + 1, want));
        /* The (nb+1)-th bucket line of the series is +Inf. */
        assert_non_null(strchr(p + 1, '\n'));
        assert_non_null(strstr(p, "le=\"+Inf\"}"));
        assert_true(strstr(p, "le=\"+Inf\"}") < strchr(p + 1, '\n'));
        checked++;
    }
    fclose(fp);
    return checked;
}

int it_check_upstream_metrics(const char *exposition)
{
    int n = check_families(exposition);
    assert_int_equal(check_buckets(exposition), 4);
    return n;
}
