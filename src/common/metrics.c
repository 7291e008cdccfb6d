/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus metrics registry, text exposition format 0.0.4, and the process
 * collector. */
#include "common/metrics.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/resource.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/map.h"
#include "common/str.h"
#include "common/xalloc.h"

#define DROPPED_NAME "metrics_series_dropped_total"
#define DROPPED_HELP \
    "Label-value tuples dropped because their metric family reached its series limit."

struct metric_series {
    struct metric *fam; /* the family (its lock guards the values below) */
    char *key;          /* the label values, each NUL-terminated, back to back */
    size_t keylen;
    const char *values[METRICS_MAX_LABELS]; /* point into key */
    double value;                           /* counter, gauge */
    double sum;                             /* histogram */
    uint64_t count;                         /* histogram */
    uint64_t buckets[];                     /* histogram: nbounds + 1, not cumulative */
};

struct metric {
    char *name; /* NULL for a collector entry */
    char *help;
    enum metric_type type;
    size_t nlabels;
    char *label_names[METRICS_MAX_LABELS + 2]; /* NULL-terminated; room for "le" */
    double *bounds;
    size_t nbounds;
    char *name_bucket, *name_sum, *name_count; /* histogram sample names */
    pthread_mutex_t lock;                      /* guards everything below */
    struct map *index;                         /* key -> struct metric_series *, not owning */
    struct metric_series **series;             /* in creation order, owning */
    size_t nseries, cap;
    uint64_t dropped;
    metrics_collect_fn *collect;
    void *ctx;
};

struct metrics_registry {
    pthread_mutex_t lock; /* guards the family list and the name set */
    struct metric **fam;
    size_t n, cap;
    struct map *names;
};

/* ---- registration ---- */

static bool valid_name(const char *s, bool colon)
{
    if (!s || !*s || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++) {
        char c = *s;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || (colon && c == ':');
        if (!ok)
            return false;
    }
    return true;
}

struct metrics_registry *metrics_registry_new(void)
{
    struct metrics_registry *r = XNEW(struct metrics_registry);
    (void)pthread_mutex_init(&r->lock, NULL);
    r->names = map_new(NULL);
    (void)map_put(r->names, DROPPED_NAME, NULL, NULL); /* reserved for the self-metric */
    return r;
}

static void series_free(struct metric_series *s)
{
    if (!s)
        return;
    xfree(s->key);
    xfree(s);
}

static void metric_free(struct metric *m)
{
    for (size_t i = 0; i < m->nseries; i++)
        series_free(m->series[i]);
    xfree(m->series);
    map_free(m->index);
    for (size_t i = 0; m->label_names[i]; i++)
        xfree(m->label_names[i]);
    xfree(m->bounds);
    xfree(m->name_bucket);
    xfree(m->name_sum);
    xfree(m->name_count);
    xfree(m->name);
    xfree(m->help);
    (void)pthread_mutex_destroy(&m->lock);
    xfree(m);
}

void metrics_registry_free(struct metrics_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        metric_free(r->fam[i]);
    xfree(r->fam);
    map_free(r->names);
    (void)pthread_mutex_destroy(&r->lock);
    xfree(r);
}

/* Appends m to the registry; asserts that a named family's name is new. */
static void add_family(struct metrics_registry *r, struct metric *m)
{
    (void)pthread_mutex_lock(&r->lock);
    if (m->name)
        ASSERT(map_put(r->names, m->name, m, NULL) == 1); /* duplicate metric name */
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->fam = xreallocarray(r->fam, r->cap, sizeof(*r->fam));
    }
    r->fam[r->n++] = m;
    (void)pthread_mutex_unlock(&r->lock);
}

static struct metric *metric_alloc(void)
{
    struct metric *m = XNEW(struct metric);
    (void)pthread_mutex_init(&m->lock, NULL);
    m->index = map_new(NULL);
    return m;
}

static struct metric *new_family(enum metric_type type, const char *name, const char *help,
                                 const char *const *label_names)
{
    ASSERT(valid_name(name, true));
    struct metric *m = metric_alloc();
    m->type = type;
    m->name = xstrdup(name);
    m->help = xstrdup(help ? help : "");
    for (size_t i = 0; label_names && label_names[i]; i++) {
        const char *l = label_names[i];
        ASSERT(i < METRICS_MAX_LABELS);
        ASSERT(valid_name(l, false) && strncmp(l, "__", 2) != 0);
        ASSERT(type != METRIC_HISTOGRAM || strcmp(l, "le") != 0);
        m->label_names[i] = xstrdup(l);
        m->nlabels = i + 1;
    }
    return m;
}

struct metric *metrics_counter(struct metrics_registry *r, const char *name, const char *help,
                               const char *const *label_names)
{
    struct metric *m = new_family(METRIC_COUNTER, name, help, label_names);
    add_family(r, m);
    return m;
}

struct metric *metrics_gauge(struct metrics_registry *r, const char *name, const char *help,
                             const char *const *label_names)
{
    struct metric *m = new_family(METRIC_GAUGE, name, help, label_names);
    add_family(r, m);
    return m;
}

struct metric *metrics_histogram(struct metrics_registry *r, const char *name, const char *help,
                                 const char *const *label_names, const double *bounds,
                                 size_t nbounds)
{
    ASSERT(nbounds >= 1 && nbounds <= METRICS_MAX_BUCKETS);
    for (size_t i = 0; i < nbounds; i++)
        ASSERT(isfinite(bounds[i]) && (i == 0 || bounds[i] > bounds[i - 1]));
    struct metric *m = new_family(METRIC_HISTOGRAM, name, help, label_names);
    m->bounds = xcalloc(nbounds, sizeof(*bounds));
    memcpy(m->bounds, bounds, nbounds * sizeof(*bounds));
    m->nbounds = nbounds;
    m->label_names[m->nlabels] = xstrdup("le");
    m->name_bucket = xasprintf("%s_bucket", name);
    m->name_sum = xasprintf("%s_sum", name);
    m->name_count = xasprintf("%s_count", name);
    add_family(r, m);
    return m;
}

void metrics_register_collector(struct metrics_registry *r, metrics_collect_fn *fn, void *ctx)
{
    ASSERT(fn);
    struct metric *m = metric_alloc();
    m->collect = fn;
    m->ctx = ctx;
    add_family(r, m);
}

void metrics_exp_buckets(double start, double factor, size_t count, double *ret_bounds)
{
    ASSERT(start > 0 && factor > 1);
    for (size_t i = 0; i < count; i++, start *= factor)
        ret_bounds[i] = start;
}

void metrics_linear_buckets(double start, double width, size_t count, double *ret_bounds)
{
    ASSERT(width > 0);
    for (size_t i = 0; i < count; i++)
        ret_bounds[i] = start + width * (double)i;
}

/* ---- series ---- */

/* Joins the label values into key. Returns the length, or -E2BIG. */
static int make_key(const struct metric *m, const char *const *lv, char *key, size_t size)
{
    size_t n = 0;
    ASSERT(m->nlabels == 0 || lv != NULL);
    for (size_t i = 0; i < m->nlabels; i++) {
        ASSERT(lv[i] != NULL);
        size_t len = strlen(lv[i]) + 1;
        if (len > size - n)
            return -E2BIG;
        memcpy(key + n, lv[i], len);
        n += len;
    }
    return (int)n;
}

static struct metric_series *series_new(struct metric *m, const char *key, size_t keylen)
{
    size_t nb = m->type == METRIC_HISTOGRAM ? m->nbounds + 1 : 0;
    struct metric_series *s = xcalloc(1, sizeof(*s) + nb * sizeof(s->buckets[0]));
    s->fam = m;
    s->key = xstrndup(key, keylen);
    s->keylen = keylen;
    const char *p = s->key;
    for (size_t i = 0; i < m->nlabels; i++) {
        s->values[i] = p;
        p += strlen(p) + 1;
    }
    return s;
}

/* Finds (or, with create, makes) the series for lv; NULL when absent or dropped.
 * Called with m->lock held. */
static struct metric_series *find_series(struct metric *m, const char *const *lv, bool create)
{
    char key[METRICS_MAX_LABEL_BYTES];
    int n = make_key(m, lv, key, sizeof(key));
    if (n < 0) {
        m->dropped += create;
        return NULL;
    }
    struct metric_series *s = map_getn(m->index, key, (size_t)n);
    if (s || !create)
        return s;
    if (m->nseries >= LIMIT_METRIC_SERIES) {
        m->dropped++;
        return NULL;
    }
    s = series_new(m, key, (size_t)n);
    if (m->nseries == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 4;
        m->series = xreallocarray(m->series, m->cap, sizeof(*m->series));
    }
    m->series[m->nseries++] = s;
    (void)map_putn(m->index, key, (size_t)n, s, NULL);
    return s;
}

enum op { OP_ADD, OP_SET, OP_OBSERVE };

/* Index of the bucket of v: the first bound >= v, or nbounds for +Inf. */
static size_t bucket_of(const struct metric *m, double v)
{
    size_t lo = 0, hi = m->nbounds;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v <= m->bounds[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static void update(struct metric *m, const char *const *lv, enum op op, double v)
{
    (void)pthread_mutex_lock(&m->lock);
    struct metric_series *s = find_series(m, lv, true);
    if (s && op == OP_ADD)
        s->value += v;
    else if (s && op == OP_SET)
        s->value = v;
    else if (s && op == OP_OBSERVE) {
        s->buckets[bucket_of(m, v)]++;
        s->count++;
        s->sum += v;
    }
    (void)pthread_mutex_unlock(&m->lock);
}

void metric_add(struct metric *m, const char *const *label_values, double v)
{
    ASSERT(m->type == METRIC_COUNTER || m->type == METRIC_GAUGE);
    if (m->type == METRIC_COUNTER && !(v >= 0))
        return;
    update(m, label_values, OP_ADD, v);
}

void metric_inc(struct metric *m, const char *const *label_values)
{
    metric_add(m, label_values, 1);
}

void metric_dec(struct metric *m, const char *const *label_values)
{
    ASSERT(m->type == METRIC_GAUGE);
    update(m, label_values, OP_ADD, -1);
}

void metric_set(struct metric *m, const char *const *label_values, double v)
{
    ASSERT(m->type == METRIC_GAUGE);
    update(m, label_values, OP_SET, v);
}

void metric_observe(struct metric *m, const char *const *label_values, double v)
{
    ASSERT(m->type == METRIC_HISTOGRAM);
    if (isnan(v))
        return;
    update(m, label_values, OP_OBSERVE, v);
}

struct metric_series *metric_series_get(struct metric *m, const char *const *label_values)
{
    (void)pthread_mutex_lock(&m->lock);
    struct metric_series *s = find_series(m, label_values, true);
    (void)pthread_mutex_unlock(&m->lock);
    return s;
}

void metric_series_add(struct metric_series *s, double v)
{
    if (!s)
        return;
    struct metric *m = s->fam;
    ASSERT(m->type == METRIC_COUNTER || m->type == METRIC_GAUGE);
    if (m->type == METRIC_COUNTER && !(v >= 0))
        return;
    (void)pthread_mutex_lock(&m->lock);
    s->value += v;
    (void)pthread_mutex_unlock(&m->lock);
}

void metric_series_observe(struct metric_series *s, double v)
{
    if (!s)
        return;
    struct metric *m = s->fam;
    ASSERT(m->type == METRIC_HISTOGRAM);
    if (isnan(v))
        return;
    size_t b = bucket_of(m, v);
    (void)pthread_mutex_lock(&m->lock);
    s->buckets[b]++;
    s->count++;
    s->sum += v;
    (void)pthread_mutex_unlock(&m->lock);
}

bool metric_remove(struct metric *m, const char *const *label_values)
{
    char key[METRICS_MAX_LABEL_BYTES];
    struct metric_series *s = NULL;
    (void)pthread_mutex_lock(&m->lock);
    int n = make_key(m, label_values, key, sizeof(key));
    if (n >= 0)
        s = map_removen(m->index, key, (size_t)n);
    for (size_t i = 0; s && i < m->nseries; i++) {
        if (m->series[i] != s)
            continue;
        memmove(&m->series[i], &m->series[i + 1], (m->nseries - i - 1) * sizeof(*m->series));
        m->nseries--;
        break;
    }
    (void)pthread_mutex_unlock(&m->lock);
    series_free(s);
    return s != NULL;
}

int metric_get(struct metric *m, const char *const *label_values, double *ret_value)
{
    (void)pthread_mutex_lock(&m->lock);
    struct metric_series *s = find_series(m, label_values, false);
    double v = 0;
    if (s)
        v = m->type == METRIC_HISTOGRAM ? (double)s->count : s->value;
    (void)pthread_mutex_unlock(&m->lock);
    if (!s)
        return -ENOENT;
    *ret_value = v;
    return 0;
}

/* ---- text format ---- */

/* Shortest text that reads back as v ("+Inf", "NaN" for the specials). */
static void fmt_double(double v, char *out, size_t size)
{
    if (isnan(v)) {
        (void)str_copy(out, size, "NaN");
        return;
    }
    if (isinf(v)) {
        (void)str_copy(out, size, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    (void)snprintf(out, size, "%.15g", v);
    if (strtod(out, NULL) != v)
        (void)snprintf(out, size, "%.17g", v);
}

/* Appends s with backslash and newline escaped, and also the double quote when
 * quote is set (label values; HELP text keeps quotes as they are). */
static int put_escaped(struct buf *out, const char *s, bool quote)
{
    for (; *s; s++) {
        int r;
        if (*s == '\\')
            r = buf_puts(out, "\\\\");
        else if (*s == '\n')
            r = buf_puts(out, "\\n");
        else if (*s == '"' && quote)
            r = buf_puts(out, "\\\"");
        else
            r = buf_putc(out, *s);
        if (r < 0)
            return r;
    }
    return 0;
}

static const char *const type_names[] = {"counter", "gauge", "histogram"};

int metrics_write_header(struct buf *out, const char *name, const char *help, enum metric_type type)
{
    if (buf_printf(out, "# HELP %s ", name) < 0 || put_escaped(out, help, false) < 0 ||
        buf_printf(out, "\n# TYPE %s %s\n", name, type_names[type]) < 0)
        return -E2BIG;
    return 0;
}

static int put_labels(struct buf *out, const char *const *names, const char *const *values)
{
    if (!names || !names[0])
        return 0;
    for (size_t i = 0; names[i]; i++) {
        if (buf_putc(out, i ? ',' : '{') < 0 || buf_printf(out, "%s=\"", names[i]) < 0 ||
            put_escaped(out, values[i], true) < 0 || buf_putc(out, '"') < 0)
            return -E2BIG;
    }
    return buf_putc(out, '}');
}

int metrics_write_sample(struct buf *out, const char *name, const char *const *label_names,
                         const char *const *label_values, double value)
{
    char num[32];
    fmt_double(value, num, sizeof(num));
    if (buf_puts(out, name) < 0 || put_labels(out, label_names, label_values) < 0 ||
        buf_printf(out, " %s\n", num) < 0)
        return -E2BIG;
    return 0;
}

static int render_histogram(const struct metric *m, const struct metric_series *s, struct buf *out)
{
    const char *lv[METRICS_MAX_LABELS + 1];
    const char *const *ln = (const char *const *)m->label_names;
    char le[32];
    uint64_t cum = 0;
    memcpy(lv, s->values, m->nlabels * sizeof(lv[0]));
    lv[m->nlabels] = le;
    for (size_t i = 0; i <= m->nbounds; i++) {
        cum += s->buckets[i];
        fmt_double(i < m->nbounds ? m->bounds[i] : INFINITY, le, sizeof(le));
        if (metrics_write_sample(out, m->name_bucket, ln, lv, (double)cum) < 0)
            return -E2BIG;
    }
    /* The label list without "le". */
    const char *base[METRICS_MAX_LABELS + 1] = {0};
    memcpy(base, m->label_names, m->nlabels * sizeof(base[0]));
    if (metrics_write_sample(out, m->name_sum, base, s->values, s->sum) < 0 ||
        buf_puts(out, m->name_count) < 0 || put_labels(out, base, s->values) < 0 ||
        buf_printf(out, " %" PRIu64 "\n", s->count) < 0)
        return -E2BIG;
    return 0;
}

/* Renders one registered family; called with m->lock held. */
static int render_family_locked(const struct metric *m, struct buf *out)
{
    const char *const *ln = (const char *const *)m->label_names;
    if (metrics_write_header(out, m->name, m->help, m->type) < 0)
        return -E2BIG;
    for (size_t i = 0; i < m->nseries; i++) {
        const struct metric_series *s = m->series[i];
        int r = m->type == METRIC_HISTOGRAM
                    ? render_histogram(m, s, out)
                    : metrics_write_sample(out, m->name, ln, s->values, s->value);
        if (r < 0)
            return r;
    }
    return 0;
}

static int render_family(struct metric *m, struct buf *out)
{
    if (m->collect) {
        int r = m->collect(m->ctx, out);
        return r == -E2BIG ? r : 0;
    }
    (void)pthread_mutex_lock(&m->lock);
    int r = render_family_locked(m, out);
    (void)pthread_mutex_unlock(&m->lock);
    return r;
}

/* Renders the self-metric: one sample per family that dropped series. */
static int render_dropped(struct metrics_registry *r, struct buf *out)
{
    static const char *const ln[] = {"metric", NULL};
    if (metrics_write_header(out, DROPPED_NAME, DROPPED_HELP, METRIC_COUNTER) < 0)
        return -E2BIG;
    for (size_t i = 0; i < r->n; i++) {
        struct metric *m = r->fam[i];
        (void)pthread_mutex_lock(&m->lock);
        uint64_t d = m->dropped;
        (void)pthread_mutex_unlock(&m->lock);
        const char *lv[] = {m->name};
        if (d && metrics_write_sample(out, DROPPED_NAME, ln, lv, (double)d) < 0)
            return -E2BIG;
    }
    return 0;
}

int metrics_render(struct metrics_registry *r, struct buf *out)
{
    int ret = 0;
    (void)pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->n && ret == 0; i++)
        ret = render_family(r->fam[i], out);
    if (ret == 0)
        ret = render_dropped(r, out);
    (void)pthread_mutex_unlock(&r->lock);
    return ret;
}

/* ---- process collector ---- */

/* Reads a small file (as under /proc) into b[0..size-1], NUL-terminated. Returns the
 * length or a negative errno. */
static int read_small(const char *path, char *b, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t n = 0;
    while (n < size - 1) {
        ssize_t k = read(fd, b + n, size - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    (void)close(fd);
    b[n] = '\0';
    return (int)n;
}

/* The idx-th space-separated field of s (0-based) as an unsigned number. */
static int field_u64(struct str s, unsigned idx, uint64_t *ret)
{
    struct str head, tail;
    for (unsigned i = 0;; i++) {
        bool more = str_cut(s, ' ', &head, &tail);
        if (i == idx)
            return str_to_u64(str_trim(head), ret);
        if (!more)
            return -ENOENT;
        s = tail;
    }
}

/* System boot time in seconds since the epoch, from the btime line of /proc/stat. */
static int boot_time(uint64_t *ret)
{
    FILE *f = fopen("/proc/stat", "re");
    if (!f)
        return -errno;
    char line[256];
    bool at_start = true;
    int r = -ENOENT;
    while (r < 0 && fgets(line, sizeof(line), f)) {
        if (at_start && strncmp(line, "btime ", 6) == 0)
            r = str_to_u64(str_trim(str_c(line + 6)), ret);
        at_start = strchr(line, '\n') != NULL;
    }
    (void)fclose(f);
    return r;
}

static int process_start_time(double *ret)
{
    char b[1024];
    uint64_t ticks, btime;
    if (read_small("/proc/self/stat", b, sizeof(b)) < 0)
        return -EIO;
    /* The command name may contain spaces and parentheses: fields follow the last ')'.
     * After it, field 3 (state) is index 0, so starttime (field 22) is index 19. */
    const char *p = strrchr(b, ')');
    long hz = sysconf(_SC_CLK_TCK);
    if (!p || p[1] != ' ' || hz <= 0 || field_u64(str_c(p + 2), 19, &ticks) < 0 ||
        boot_time(&btime) < 0)
        return -EIO;
    *ret = (double)btime + (double)ticks / (double)hz;
    return 0;
}

static int open_fds(double *ret)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -errno;
    long n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    (void)closedir(d);
    *ret = (double)(n - 1); /* not the directory's own descriptor */
    return 0;
}

/* Virtual and resident size in bytes from /proc/self/statm (in pages). */
static int memory(double *ret_virtual, double *ret_resident)
{
    char b[256];
    uint64_t vsz, rss;
    long page = sysconf(_SC_PAGESIZE);
    if (read_small("/proc/self/statm", b, sizeof(b)) < 0 || page <= 0 ||
        field_u64(str_c(b), 0, &vsz) < 0 || field_u64(str_c(b), 1, &rss) < 0)
        return -EIO;
    *ret_virtual = (double)vsz * (double)page;
    *ret_resident = (double)rss * (double)page;
    return 0;
}

static int one(struct buf *out, const char *name, const char *help, enum metric_type t, double v)
{
    if (metrics_write_header(out, name, help, t) < 0 ||
        metrics_write_sample(out, name, NULL, NULL, v) < 0)
        return -E2BIG;
    return 0;
}

static int collect_process(void *ctx, struct buf *out)
{
    (void)ctx;
    struct rusage ru;
    struct rlimit rl;
    double v = 0, rss = 0;
    int r = 0;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        v = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
            (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
        r |= one(out, "process_cpu_seconds_total",
                 "Total user and system CPU time spent in seconds.", METRIC_COUNTER, v);
    }
    if (memory(&v, &rss) == 0) {
        r |= one(out, "process_resident_memory_bytes", "Resident memory size in bytes.",
                 METRIC_GAUGE, rss);
        r |= one(out, "process_virtual_memory_bytes", "Virtual memory size in bytes.", METRIC_GAUGE,
                 v);
    }
    if (open_fds(&v) == 0)
        r |= one(out, "process_open_fds", "Number of open file descriptors.", METRIC_GAUGE, v);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        r |= one(out, "process_max_fds", "Maximum number of open file descriptors.", METRIC_GAUGE,
                 rl.rlim_cur == RLIM_INFINITY ? INFINITY : (double)rl.rlim_cur);
    if (process_start_time(&v) == 0)
        r |= one(out, "process_start_time_seconds",
                 "Start time of the process since unix epoch in seconds.", METRIC_GAUGE, v);
    return r ? -E2BIG : 0;
}

void metrics_register_process(struct metrics_registry *r)
{
    static const char *const names[] = {
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    };
    /* Reserve the names so that registering them again is caught as a duplicate. */
    (void)pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        ASSERT(map_put(r->names, names[i], NULL, NULL) == 1);
    (void)pthread_mutex_unlock(&r->lock);
    metrics_register_collector(r, collect_process, NULL);
}
