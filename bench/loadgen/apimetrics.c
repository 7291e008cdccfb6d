/* SPDX-License-Identifier: Apache-2.0 */
/* API server request counters (apiserver_request_total from /metrics) and /proc samples
 * of the controller process. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "lg.h"

#define LG_METRICS_MAX (128u * 1024 * 1024)

static int collect(void *ctx, const char *data, size_t len)
{
    return buf_append(ctx, data, len);
}

/* The value of label name in a sample line, into out (empty when absent). */
static void label(const char *line, const char *name, char *out, size_t size)
{
    char pat[48];
    const char *p, *e;
    out[0] = '\0';
    (void)snprintf(pat, sizeof(pat), "%s=\"", name);
    p = strstr(line, pat);
    if (!p)
        return;
    p += strlen(pat);
    e = strchr(p, '"');
    if (e && (size_t)(e - p) < size)
        (void)snprintf(out, size, "%.*s", (int)(e - p), p);
}

static void add_line(json_t *acc, const char *line)
{
    char verb[16], res[64], sub[32], key[128];
    const char *sp = strrchr(line, ' ');
    const json_t *old;
    double v;
    label(line, "verb", verb, sizeof(verb));
    label(line, "resource", res, sizeof(res));
    label(line, "subresource", sub, sizeof(sub));
    if (!sp || !res[0])
        return;
    v = strtod(sp + 1, NULL);
    (void)snprintf(key, sizeof(key), "%s %s%s%s", verb, res, sub[0] ? "/" : "", sub);
    old = json_object_get(acc, key);
    json_object_set_new(acc, key, json_real(v + (old ? json_real_value(old) : 0)));
}

int lg_api_scrape(struct kube_client *c, json_t **ret)
{
    struct kube_req r;
    struct buf b;
    json_t *acc;
    char *save = NULL, *line;
    int rc;
    buf_init(&b, LG_METRICS_MAX);
    kube_req_init(&r, "GET", NULL);
    r.raw_path = "/metrics";
    rc = kube_request_stream(c, &r, collect, &b, NULL, 30 * USEC_PER_SEC, NULL);
    if (rc < 0 || buf_putc(&b, '\0') < 0) {
        buf_done(&b);
        return rc < 0 ? rc : -E2BIG;
    }
    acc = json_object();
    for (line = strtok_r(b.data, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (strncmp(line, "apiserver_request_total{", 24) == 0)
            add_line(acc, line);
    buf_done(&b);
    *ret = acc;
    return 0;
}

json_t *lg_api_delta(const json_t *before, const json_t *after)
{
    json_t *d = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)after, k, v)
    {
        const json_t *b = json_object_get(before, k);
        double x = json_real_value(v) - (b ? json_real_value(b) : 0);
        if (x > 0)
            json_object_set_new(d, k, json_real(x));
    }
    return d;
}

/* Whether word appears as a whole item of the comma-separated list. */
static bool in_list(const char *list, const char *word, size_t len)
{
    const char *p = list;
    while (p && *p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == len && strncmp(p, word, len) == 0)
            return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

double lg_api_sum(const json_t *delta, const char *verbs, const char *skip)
{
    const char *k;
    json_t *v;
    double s = 0;
    json_object_foreach((json_t *)delta, k, v)
    {
        const char *sp = strchr(k, ' ');
        if (!sp || (verbs && !in_list(verbs, k, (size_t)(sp - k))))
            continue;
        if (skip && in_list(skip, k, strlen(k)))
            continue;
        s += json_real_value(v);
    }
    return s;
}

int lg_proc_sample(pid_t pid, double *ret_rss_mib, double *ret_cpu_s)
{
    char path[64], line[256], stat[4096];
    unsigned long ut = 0, st = 0;
    double rss = -1;
    FILE *f;
    size_t n;
    const char *p;
    (void)snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if (!(f = fopen(path, "re")))
        return -errno;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            rss = strtod(line + 6, NULL) / 1024.0;
    fclose(f);
    (void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (!(f = fopen(path, "re")))
        return -errno;
    n = fread(stat, 1, sizeof(stat) - 1, f);
    fclose(f);
    stat[n] = '\0';
    /* fields after the ")" of comm: state is 3rd; utime 14th, stime 15th. */
    if (!(p = strrchr(stat, ')')) ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -EPROTO;
    *ret_rss_mib = rss;
    *ret_cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    return 0;
}

double lg_api_cpu(const struct lg_opts *o)
{
    double sum = 0, rss, cpu;
    if (o->n_api_pids == 0)
        return -1;
    for (int i = 0; i < o->n_api_pids; i++) {
        if (lg_proc_sample(o->api_pids[i], &rss, &cpu) < 0)
            return -1;
        sum += cpu;
    }
    return sum;
}

void lg_api_cpu_put(const struct lg_opts *o, json_t *out, const char *key, double before, long n,
                    const char *unit)
{
    double now = lg_api_cpu(o);
    char per[64];
    if (before < 0 || now < 0 || n <= 0)
        return;
    (void)snprintf(per, sizeof(per), "per_%s_ms", unit);
    json_object_set_new(out, key,
                        json_pack("{s:f, s:f}", "s", now - before, per,
                                  round((now - before) / (double)n * 1e5) / 100));
}

int lg_api_pids_parse(struct lg_opts *o, const char *s)
{
    const char *p = s;
    o->n_api_pids = 0;
    while (*p) {
        char *end;
        long v;
        errno = 0;
        v = strtol(p, &end, 10);
        if (errno || end == p || v <= 0 || (*end && *end != ',') ||
            o->n_api_pids == LG_MAX_API_PIDS)
            return -EINVAL;
        o->api_pids[o->n_api_pids++] = (pid_t)v;
        p = *end ? end + 1 : end;
    }
    return o->n_api_pids ? 0 : -EINVAL;
}
