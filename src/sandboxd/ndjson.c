/* SPDX-License-Identifier: Apache-2.0 */
/* Streaming NDJSON writer (see ndjson.h). */
#include "sandboxd/ndjson.h"

#include <errno.h>

#include "http/server.h"
#include "sandboxd/util.h"

static int http_sink(void *sink, const void *data, size_t len)
{
    return http_resp_write(sink, data, len);
}

void sbd_ndjson_init_sink(struct sbd_ndjson *w, sbd_ndjson_sink_fn *fn, void *sink, size_t limit)
{
    w->write = fn;
    w->sink = sink;
    buf_init(&w->queue, limit);
    w->nlines = 0;
    w->blocked = false;
}

void sbd_ndjson_init(struct sbd_ndjson *w, struct http_req *req, size_t limit)
{
    sbd_ndjson_init_sink(w, http_sink, req, limit);
}

void sbd_ndjson_done(struct sbd_ndjson *w)
{
    buf_done(&w->queue);
    w->nlines = 0;
}

void sbd_ndjson_detach(struct sbd_ndjson *w)
{
    w->sink = NULL;
    buf_reset(&w->queue);
    w->nlines = 0;
}

int sbd_ndjson_encode(json_t *j, struct buf *out)
{
    size_t len = out->len;
    int r = j ? sbd_json_dump(j, out) : -ENOMEM;
    json_decref(j);
    if (r == 0)
        r = buf_putc(out, '\n');
    if (r < 0 && out->data) {
        out->len = len; /* drop a partial line */
        out->data[len] = '\0';
    }
    return r < 0 ? -E2BIG : 0;
}

int sbd_ndjson_queue(struct sbd_ndjson *w, json_t *j)
{
    if (!w->sink) {
        json_decref(j);
        return -EPIPE;
    }
    int r = sbd_ndjson_encode(j, &w->queue);
    if (r == 0)
        w->nlines++;
    return r;
}

int sbd_ndjson_queue_raw(struct sbd_ndjson *w, const void *data, size_t len)
{
    if (!w->sink)
        return -EPIPE;
    int r = buf_append(&w->queue, data, len);
    if (r == 0)
        w->nlines++;
    return r;
}

int sbd_ndjson_flush(struct sbd_ndjson *w)
{
    if (!w->sink)
        return -EPIPE;
    if (w->blocked)
        return 1;
    if (w->queue.len == 0)
        return 0;
    int r = w->write(w->sink, w->queue.data, w->queue.len);
    if (r == -EAGAIN) {
        w->blocked = true;
        return 1;
    }
    if (r < 0)
        return r;
    buf_reset(&w->queue);
    w->nlines = 0;
    if (r == 1)
        w->blocked = true;
    return r == 1 ? 1 : 0;
}

int sbd_ndjson_send(struct sbd_ndjson *w, json_t *j)
{
    int r = sbd_ndjson_queue(w, j);
    return r < 0 ? r : sbd_ndjson_flush(w);
}

int sbd_ndjson_drain(struct sbd_ndjson *w)
{
    w->blocked = false;
    return sbd_ndjson_flush(w);
}
