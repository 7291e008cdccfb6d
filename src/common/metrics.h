/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus metrics registry: counter, gauge and histogram families with up to
 * METRICS_MAX_LABELS labels, rendered in the text exposition format 0.0.4.
 *
 *   static const char *const labels[] = {"controller", "result", NULL};
 *   struct metric *m = metrics_counter(r, "reconcile_total", "Reconciles.", labels);
 *   metric_inc(m, (const char *const[]){"sandbox", "success"});
 *
 * Thread-safety: updates (metric_*) and metrics_render may run concurrently from any
 * threads; each family has its own mutex. Registration is thread-safe too, but is
 * meant for start-up. A family has at most LIMIT_METRIC_SERIES label-value tuples;
 * updates that would create more are dropped and counted in the self-metric
 * metrics_series_dropped_total{metric="<family>"}, which every registry renders last. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct buf;
struct metrics_registry;
struct metric;
struct metric_series;

#define METRICS_MAX_LABELS      8
#define METRICS_MAX_BUCKETS     64   /* finite bucket bounds per histogram */
#define METRICS_MAX_LABEL_BYTES 2048 /* a series' label values together; longer: dropped */

enum metric_type {
    METRIC_COUNTER,
    METRIC_GAUGE,
    METRIC_HISTOGRAM,
};

/** Returns a new empty registry (caller frees with metrics_registry_free). */
struct metrics_registry *metrics_registry_new(void);
/** Frees the registry and every family; all struct metric pointers become invalid.
 * NULL is fine. No update may be running concurrently. */
void metrics_registry_free(struct metrics_registry *r);

/** Registers a family and returns it (borrowed, valid until the registry is freed).
 * name, help and label_names (a NULL-terminated array of at most METRICS_MAX_LABELS
 * names, or NULL for none) are borrowed; the registry keeps copies. An invalid or
 * duplicate metric name, an invalid label name ("__" prefix, and "le" for histograms,
 * are reserved) or too many labels is a programmer error and aborts. */
struct metric *metrics_counter(struct metrics_registry *r, const char *name, const char *help,
                               const char *const *label_names);
struct metric *metrics_gauge(struct metrics_registry *r, const char *name, const char *help,
                             const char *const *label_names);
/** Histogram with nbounds finite upper bounds (borrowed, copied), strictly increasing,
 * 1..METRICS_MAX_BUCKETS of them; the +Inf bucket is implicit. Aborts otherwise. */
struct metric *metrics_histogram(struct metrics_registry *r, const char *name, const char *help,
                                 const char *const *label_names, const double *bounds,
                                 size_t nbounds);

/** Fills ret_bounds[0..count) with start, start*factor, start*factor^2, ... (start > 0,
 * factor > 1), e.g. (0.001, 2, 16) covers 1 ms .. 32.8 s. */
void metrics_exp_buckets(double start, double factor, size_t count, double *ret_bounds);
/** Fills ret_bounds[0..count) with start, start+width, ... (width > 0). */
void metrics_linear_buckets(double start, double width, size_t count, double *ret_bounds);

/* Updates. label_values (borrowed) has exactly as many non-NULL strings as the family
 * has labels, in the same order; pass NULL for a family without labels. The series is
 * created on first use. Using the wrong kind of update for a type aborts. */

/** Counter or gauge: adds 1. */
void metric_inc(struct metric *m, const char *const *label_values);
/** Gauge: subtracts 1. */
void metric_dec(struct metric *m, const char *const *label_values);
/** Counter or gauge: adds v. Counters ignore negative and NaN v (they only go up). */
void metric_add(struct metric *m, const char *const *label_values, double v);
/** Gauge: sets the value. */
void metric_set(struct metric *m, const char *const *label_values, double v);
/** Histogram: records one observation (NaN is ignored). */
void metric_observe(struct metric *m, const char *const *label_values, double v);
/* Series handles, for hot paths that update the same label values again and again:
 * one lookup, then each update only takes the family's lock (no key building or
 * hashing). A handle is borrowed: valid until its series is removed (metric_remove) or
 * the registry is freed. */

/** Returns the series of label_values, created on first use, or NULL when the family's
 * series limit dropped it (counted as for any update). */
struct metric_series *metric_series_get(struct metric *m, const char *const *label_values);
/** Counter or gauge series: adds v (counters ignore negative and NaN v). NULL: nothing. */
void metric_series_add(struct metric_series *s, double v);
/** Histogram series: records one observation (NaN is ignored). NULL: nothing. */
void metric_series_observe(struct metric_series *s, double v);

/** Deletes one series (e.g. of a deleted object) so it is no longer rendered. Returns
 * true when it existed. */
bool metric_remove(struct metric *m, const char *const *label_values);
/** Reads a series: the value of a counter or gauge, the observation count of a
 * histogram. Returns 0, or -ENOENT when the series does not exist (*ret_value then
 * untouched). Mainly for tests. */
int metric_get(struct metric *m, const char *const *label_values, double *ret_value);

/** Appends the whole registry to out in text format 0.0.4: families in registration
 * order, series in creation order. Returns 0, or -E2BIG when out's limit was reached
 * (out then holds a truncated rendering). */
int metrics_render(struct metrics_registry *r, struct buf *out);

/** A collector renders families of its own at render time, in its registration
 * position (use metrics_write_header / metrics_write_sample). It is called with the
 * registry locked: it must not register anything. Returns 0 or a negative errno
 * (rendering continues with the next family; -E2BIG is passed on). */
typedef int metrics_collect_fn(void *ctx, struct buf *out);

/** Registers fn with ctx (borrowed: must outlive the registry). */
void metrics_register_collector(struct metrics_registry *r, metrics_collect_fn *fn, void *ctx);
/** Registers the standard process metrics, read from /proc/self at render time:
 * process_cpu_seconds_total, process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_open_fds, process_max_fds,
 * process_start_time_seconds. Unreadable values are skipped. */
void metrics_register_process(struct metrics_registry *r);

/** Appends the "# HELP" and "# TYPE" lines of a family (help escaped). Returns 0 or
 * -E2BIG. */
int metrics_write_header(struct buf *out, const char *name, const char *help,
                         enum metric_type type);
/** Appends one sample line `name{l1="v1",...} value`. label_names is NULL-terminated
 * (or NULL); label_values has as many entries and is escaped here. Returns 0 or
 * -E2BIG. */
int metrics_write_sample(struct buf *out, const char *name, const char *const *label_names,
                         const char *const *label_values, double value);
