/* SPDX-License-Identifier: Apache-2.0 */
/* Activity report of sandboxd for idle auto-suspend: GET /v1/activity tells the
 * controller how many processes run (background descendants that outlived their command
 * included) and when the last API request arrived, so that a busy sandbox is never
 * suspended. Public (no token): it carries counts and a time. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "common/clock.h"

struct sbd;

/** What /v1/activity reports. */
struct sbd_activity {
    size_t running_processes;  /* registered ones running, plus orphan_processes */
    size_t orphan_processes;   /* live descendants that are not registered processes */
    usec_t last_activity_wall; /* wall usec of the last request (or now while busy) */
    usec_t idle;               /* time since then; 0 while a process runs */
};

/** Records an API request now (called for every authenticated route). */
void sbd__activity_touch(struct sbd *d);
/** Registers GET /v1/activity on d's REST router. Returns 0 or negative. */
int sbd__activity_register(struct sbd *d);

/** Computes the report from the count of running registered processes, that of live
 * unregistered descendants (sbd_procs_count_orphans), the monotonic time of the last
 * request, and the monotonic and wall clocks now (pure; for tests). */
void sbd_activity_compute(size_t running, size_t orphans, usec_t last_mono, usec_t now_mono,
                          usec_t now_wall, struct sbd_activity *ret);
/** Returns a new JSON object {"running_processes", "orphan_processes", "last_activity",
 * "idle_seconds"} for a. There is no stream count: every NDJSON or WebSocket stream belongs to a
 * running process, which running_processes counts. */
json_t *sbd_activity_json(const struct sbd_activity *a);
