/* SPDX-License-Identifier: Apache-2.0 */
#include "sandboxd/late.h"

#include <errno.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/xalloc.h"
#include "sandboxd/util.h"

static void on_keepalive(uv_timer_t *t)
{
    struct sbd_late *a = container_of(t, struct sbd_late, timer);
    if (!a->head_sent) {
        if (http_resp_start(a->req, 200, "application/json") < 0)
            return;
        a->head_sent = true;
    }
    (void)http_resp_write(a->req, " ", 1);
}

void sbd_late_start(struct sbd_late *a, struct http_req *req, usec_t period, void *owner)
{
    uint64_t ms = (period + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
    a->req = req;
    a->head_sent = false;
    (void)uv_timer_init(http_req_loop(req), &a->timer);
    a->timer.data = owner;
    (void)uv_timer_start(&a->timer, on_keepalive, ms, ms);
}

int sbd_late_answer(struct sbd_late *a, const char *body, size_t len)
{
    int r;
    (void)uv_timer_stop(&a->timer);
    /* a cut below must not run the owner's abort callback, which would free the owner
     * under its caller (the owner's reference keeps req until it frees itself) */
    http_req_set_abort_cb(a->req, NULL, NULL);
    if (!a->head_sent)
        return http_respond(a->req, 200, "application/json", body, len);
    r = http_resp_write(a->req, body, len);
    if (r >= 0)
        r = http_resp_end(a->req);
    if (r < 0)
        http_req_abort(a->req);
    return r < 0 ? r : 0;
}

int sbd_late_answer_json(struct sbd_late *a, const json_t *j)
{
    struct buf b;
    int r;
    buf_init(&b, SIZE_MAX);
    if (sbd_json_dump(j, &b) < 0) {
        (void)uv_timer_stop(&a->timer);
        http_req_set_abort_cb(a->req, NULL, NULL);
        http_req_abort(a->req);
        r = -ENOMEM;
    } else {
        r = sbd_late_answer(a, b.data ? b.data : "", b.len);
    }
    buf_done(&b);
    return r;
}

void sbd_late_close(struct sbd_late *a, uv_close_cb closed)
{
    (void)uv_timer_stop(&a->timer);
    uv_close((uv_handle_t *)&a->timer, closed);
}
