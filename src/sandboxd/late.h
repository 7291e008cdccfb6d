/* SPDX-License-Identifier: Apache-2.0 */
/* A JSON answer that comes only when long work ends (a run to completion, the legacy
 * /execute), kept alive meanwhile: proxies cut connections idle for about a minute (the
 * router's --idle-timeout, load balancers). After a period of silence the answer starts
 * (200, application/json, chunked) and gets a space, again each period; the JSON result
 * then follows the spaces, which JSON parsers skip. Only for work whose answer is 200
 * whatever its outcome once it started. Loop thread only. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "common/clock.h"
#include "http/server.h"

struct sbd_late {
    struct http_req *req; /* borrowed: the owner holds its reference */
    bool head_sent;       /* a keepalive started the answer */
    uv_timer_t timer;     /* .data is the owner's (for sbd_late_close's callback) */
};

/** Starts keeping req's answer alive every period (> 0) on req's loop. owner goes in
 * a->timer.data for the close callback. */
void sbd_late_start(struct sbd_late *a, struct http_req *req, usec_t period, void *owner);
/** Sends the 200 JSON answer body (len bytes, borrowed): the whole answer, or the rest
 * of the one keepalives started. Clears req's abort callback first: the owner frees
 * itself after this, whatever it returns. Returns 0 or a negative errno (the connection
 * is then cut, so that a client never takes a partial body for the result). */
int sbd_late_answer(struct sbd_late *a, const char *body, size_t len);
/** sbd_late_answer with j (borrowed) serialized; one that cannot be cuts the connection
 * (with req's abort callback cleared, as above). */
int sbd_late_answer_json(struct sbd_late *a, const json_t *j);
/** Stops the keepalives and closes the timer; closed runs once it is (free the owner
 * there, found in h->data). */
void sbd_late_close(struct sbd_late *a, uv_close_cb closed);
