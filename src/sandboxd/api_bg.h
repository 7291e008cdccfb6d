/* SPDX-License-Identifier: Apache-2.0 */
/* Background (detached) processes: started with {"background": true}, they outlive the
 * client that started them. Each keeps its output in a bounded ring (bgring.h) that any
 * client can replay and follow; exited ones stay listed with their exit status until
 * removed or evicted by a newer start when the table is full. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/clock.h"
#include "common/str.h"

struct sbd;
struct sbd_bgs;
struct sbd_procreq;
struct http_req;

/** Query of GET /v1/processes/{id}/output and .../wait. */
struct sbd_bg_query {
    bool follow;      /* output: keep streaming until the exit (default true) */
    uint64_t offset;  /* output: first logical byte wanted (default 0) */
    double timeout_s; /* wait: seconds; < 0: until the exit (default) */
};

/** Parses "{id}[/action]" (the path after /v1/processes/). Returns 0 with *ret_id and
 * *ret_action (a slice of rest, empty when none), or -EINVAL. */
int sbd_bg_target_parse(struct str rest, uint32_t *ret_id, struct str *ret_action);
/** Parses follow=, offset= and timeout= of query (URL-encoded). Returns 0, or -EINVAL with
 * a static message in *ret_msg. */
int sbd_bg_query_parse(struct str query, struct sbd_bg_query *ret, const char **ret_msg);

/** Returns a new table of at most max records whose rings keep ring_limit bytes. A
 * follower of a running process gets {"type":"keepalive"} after keepalive of silence, and
 * a wait not answered after keepalive starts its answer and gets a space each period
 * (late.h), so that proxies that cut idle connections keep them; 0: never. */
struct sbd_bgs *sbd_bgs_new(unsigned max, size_t ring_limit, usec_t keepalive);
/** Frees the table and its records (call after every process and request is gone). */
void sbd_bgs_free(struct sbd_bgs *t);

/** POST /v1/processes with "background": true: starts r (borrowed) and responds. */
int sbd__bg_start(struct http_req *req, struct sbd *d, const struct sbd_procreq *r);
/** Replaces the entries of arr (sbd_procs_list) that are background processes with their
 * full description ("background": true, "state", exit status...), marks the others
 * ("background": false, "state": "running"), and appends the exited background ones. */
void sbd__bg_list_merge(struct sbd *d, json_t *arr);
/** POST /v1/processes/{id}/...: handles wait, and actions on exited background processes.
 * Returns true when it responded. */
bool sbd__bg_post(struct http_req *req, struct sbd *d);
/** DELETE /v1/processes/{id}: removes an exited background process. Returns true when it
 * responded. */
bool sbd__bg_delete(struct http_req *req, struct sbd *d);
/** Registers GET /v1/processes/{id}[/output|/wait]. Returns 0 or negative. */
int sbd__bg_register(struct sbd *d);
