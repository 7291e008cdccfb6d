/* SPDX-License-Identifier: Apache-2.0 */
/* Streaming NDJSON responses through curl (see stream.h). */
#include "cli/stream.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "common/limits.h"

void cli_stream_init(struct cli_stream *st, size_t max_line, linebuf_frame_fn *on_line, void *ctx)
{
    st->h = NULL;
    st->status = 0;
    linebuf_init(&st->lb, max_line);
    buf_init(&st->errbody, LIMIT_CLI_SBD_ERROR);
    st->on_line = on_line;
    st->ctx = ctx;
    st->err = 0;
}

void cli_stream_start(struct cli_stream *st, CURL *h)
{
    st->h = h;
    st->status = 0;
    linebuf_reset(&st->lb);
    buf_reset(&st->errbody);
    st->err = 0;
}

void cli_stream_done(struct cli_stream *st)
{
    linebuf_done(&st->lb);
    buf_done(&st->errbody);
}

size_t cli_stream_write(char *p, size_t size, size_t n, void *ctx)
{
    struct cli_stream *st = ctx;
    if (st->status == 0)
        curl_easy_getinfo(st->h, CURLINFO_RESPONSE_CODE, &st->status);
    if (st->status != 200) {
        (void)buf_append(&st->errbody, p, size * n); /* past the limit: keep the start */
        return size * n;
    }
    int r = linebuf_feed(&st->lb, p, size * n, st->on_line, st->ctx);
    if (r < 0 && !st->err)
        st->err = r;
    return r == 0 ? size * n : 0;
}

void cli_stream_settle(struct cli_stream *st)
{
    if (st->status == 0 && st->h)
        (void)curl_easy_getinfo(st->h, CURLINFO_RESPONSE_CODE, &st->status);
}

const char *cli_stream_why(int proto_err, CURLcode cc, const char *errbuf)
{
    if (proto_err == -E2BIG)
        return "event line too long";
    if (proto_err)
        return "malformed event";
    if (cc == CURLE_OK)
        return "connection closed";
    return errbuf && errbuf[0] ? errbuf : curl_easy_strerror(cc);
}

CURLcode cli_stream_run(CURL *h, cli_stream_turn_fn *turn, void (*ready)(void *ctx), void *ctx)
{
    CURLM *m = curl_multi_init();
    curl_multi_add_handle(m, h);
    int running = 1;
    while (running) {
        if (curl_multi_perform(m, &running) != CURLM_OK)
            break;
        int fd = -1;
        if (!turn(ctx, running != 0, &fd) || !running)
            break;
        struct curl_waitfd w = {.fd = fd, .events = CURL_WAIT_POLLIN};
        curl_multi_poll(m, fd >= 0 ? &w : NULL, fd >= 0 ? 1 : 0, 200, NULL);
        if (fd >= 0 && ready && (w.revents & (CURL_WAIT_POLLIN | POLLHUP | POLLERR)))
            ready(ctx);
    }
    CURLMsg *msg;
    int left;
    CURLcode cc = CURLE_OK;
    while ((msg = curl_multi_info_read(m, &left)))
        if (msg->msg == CURLMSG_DONE)
            cc = msg->data.result;
    curl_multi_remove_handle(m, h);
    curl_multi_cleanup(m);
    return cc;
}

int cli_write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 && errno != EPIPE ? -errno : -EPIPE;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}
