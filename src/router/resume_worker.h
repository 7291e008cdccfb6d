/* SPDX-License-Identifier: Apache-2.0 */
/* One background thread for the router's API writes (resume patches and activity
 * annotations): jobs run off the loop, their completions run on the loop thread
 * through a uv_async_t. Bounded queue.
 *
 * Threading: new, submit and free on the loop thread; run functions on the worker. */
#pragma once

#include <uv.h>

struct resume_worker;

/** Runs on the worker thread; returns a result code for done. */
typedef int resume_job_fn(void *arg);
/** Runs on the loop thread with run's result, or -ECANCELED when the worker stopped
 * before running the job. Exactly once per submitted job. */
typedef void resume_job_done_fn(void *arg, int rc);

/** Starts the worker on loop (borrowed). Returns 0 and *ret, or a negative errno. */
int resume_worker_new(uv_loop_t *loop, struct resume_worker **ret);
/** Queues a job (arg borrowed until done). Returns 0 or -EAGAIN (queue full: done is
 * not called). */
int resume_worker_submit(struct resume_worker *w, resume_job_fn *run, resume_job_done_fn *done,
                         void *arg);
/** Finishes the running job, cancels the queued ones (their done gets -ECANCELED),
 * joins the thread and frees once the handle closed (the loop must run once more).
 * NULL is fine. */
void resume_worker_free(struct resume_worker *w);
