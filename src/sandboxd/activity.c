/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/activity: running processes (registered ones and background descendants that
 * outlived their command) and the time of the last API request. */
#include "sandboxd/activity.h"

#include "http/server.h"
#include "sandboxd/kernel.h"
#include "sandboxd/proc.h"
#include "sandboxd/sbd_int.h"

void sbd__activity_touch(struct sbd *d)
{
    d->last_activity = clock_now();
}

void sbd_activity_compute(size_t running, size_t orphans, usec_t last_mono, usec_t now_mono,
                          usec_t now_wall, struct sbd_activity *ret)
{
    usec_t idle = now_mono > last_mono ? now_mono - last_mono : 0;
    /* A running process is activity happening now: streams and WebSockets belong to
     * processes, so they are covered by this too; so is a daemonized descendant (a dev
     * server started with "&" or nohup) whose command has exited. */
    if (running + orphans > 0)
        idle = 0;
    *ret = (struct sbd_activity){
        .running_processes = running + orphans,
        .orphan_processes = orphans,
        .last_activity_wall = now_wall > idle ? now_wall - idle : 0,
        .idle = idle,
    };
}

json_t *sbd_activity_json(const struct sbd_activity *a)
{
    char ts[40];
    clock_format_rfc3339(a->last_activity_wall, ts, sizeof(ts));
    return json_pack("{s:I, s:I, s:s, s:f}", "running_processes", (json_int_t)a->running_processes,
                     "orphan_processes", (json_int_t)a->orphan_processes, "last_activity", ts,
                     "idle_seconds", (double)a->idle / (double)USEC_PER_SEC);
}

static int activity(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    struct sbd_activity a;
    /* A kernel waiting for code is not activity; one executing is. Its driver is a
     * registered process, so not an orphan either. */
    sbd_activity_compute(sbd_procs_count(d->procs) - sbd__kernels_idle(d),
                         sbd_procs_count_orphans(d->procs), d->last_activity, clock_now(),
                         clock_wall_now(), &a);
    json_t *j = sbd_activity_json(&a);
    int r = http_respond_json(req, 200, j);
    json_decref(j);
    return r;
}

int sbd__activity_register(struct sbd *d)
{
    return sbd__route(d, d->router, "GET", "/v1/activity", 0, activity, true);
}
