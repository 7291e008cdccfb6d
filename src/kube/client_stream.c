/* SPDX-License-Identifier: Apache-2.0 */
/* Long-running responses (watch) on a connection of their own. */
#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "kube/client.h"
#include "kube/client_int.h"

struct stream {
    CURL *h;
    kube_stream_fn *fn;
    void *ctx;
    const atomic_bool *stop;
    long status;
    int fn_ret;          /* the callback's negative value, once it asked to stop */
    bool delivered;      /* some body reached fn */
    bool cut;            /* ended by the cut below */
    usec_t cut_after;    /* a watch: cut once open this long, fn's time left out (0: never) */
    usec_t start;        /* when the transfer began */
    usec_t in_fn;        /* time spent in fn so far */
    struct buf err_body; /* non-2xx body, bounded */
    uint64_t token_gen;  /* of the credential the request carried */
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userp)
{
    struct stream *s = userp;
    size_t n = size * nmemb;
    if (s->status == 0)
        curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &s->status);
    if (s->status < 200 || s->status >= 300) {
        size_t room = LIMIT_KUBE_ERROR_BODY - s->err_body.len;
        (void)buf_append(&s->err_body, ptr, n < room ? n : room);
        return n;
    }
    s->delivered = true;
    usec_t t0 = clock_now();
    int r = s->fn(s->ctx, ptr, n);
    s->in_fn += clock_now() - t0;
    if (r < 0) {
        s->fn_ret = r;
        return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
    }
    return n;
}

static int on_progress(void *userp, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    struct stream *s = userp;
    if (s->stop && atomic_load(s->stop))
        return 1;
    if (s->cut_after && clock_now() - s->start - s->in_fn > s->cut_after) {
        s->cut = true;
        return 1;
    }
    return 0;
}

/* A stream with a server-side timeoutSeconds (a watch) ends the client's watch_slack
 * after it client-side too, for a proxy that ignores it or a server that trickles bytes
 * without ever ending a frame; other streams only have the idle detection. The time fn
 * blocks (a handler that waits) does not count: the server's clock does not run for the
 * events it has sent and we have not read yet either. libcurl looks at least once a
 * second (the progress callback). */
static void stream_options(const struct kube_client *c, CURL *h, struct stream *s, usec_t idle,
                           long timeout_seconds, char *errbuf)
{
    long idle_s = (long)(idle / USEC_PER_SEC);
    s->cut_after =
        timeout_seconds > 0 ? (usec_t)timeout_seconds * USEC_PER_SEC + c->watch_slack : 0;
    /* No whole-transfer bound: kube__setup's is the client's per-request timeout (60 s by
     * default), which cut every watch a minute in, whatever its timeoutSeconds. */
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 0L);
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, idle_s > 0 ? idle_s : 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, s);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
}

static int stream_result(struct stream *s, CURLcode cc, const char *errbuf, struct kube_err *e)
{
    if (s->fn_ret < 0)
        return s->fn_ret;
    if (cc == CURLE_ABORTED_BY_CALLBACK && s->cut) {
        kube_err_set(e, -ETIMEDOUT, "stream cut: open past its timeout");
        return -ETIMEDOUT;
    }
    if (cc == CURLE_ABORTED_BY_CALLBACK)
        return -ECANCELED;
    if (cc == CURLE_OPERATION_TIMEDOUT) {
        kube_err_set(e, -ETIMEDOUT, "stream cut: no data for too long: %s", errbuf);
        return -ETIMEDOUT;
    }
    if (cc != CURLE_OK) {
        kube__transport_err(e, cc, errbuf);
        return e->code;
    }
    if (s->status >= 200 && s->status < 300)
        return 0;
    kube_err_from_response(e, s->status, s->err_body.data, s->err_body.len);
    return e->code;
}

/* One attempt on a fresh handle (never from the pool). */
static int stream_once(struct kube_client *c, const struct kube__prep *p, struct stream *s,
                       usec_t idle, long timeout_seconds, struct kube_err *e)
{
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdrs = NULL;
    CURL *h = curl_easy_init();
    if (!h) {
        kube_err_set(e, -ENOMEM, "cannot create a curl handle");
        return -ENOMEM;
    }
    int r = kube__setup(c, h, p, &hdrs, &s->token_gen, e);
    if (r >= 0) {
        s->h = h;
        stream_options(c, h, s, idle, timeout_seconds, errbuf);
        r = kube__throttle(c, p, s->stop, e);
    }
    if (r >= 0) {
        atomic_fetch_add(&c->requests, 1);
        s->start = clock_now();
        CURLcode cc = curl_easy_perform(h);
        long nconn = 0;
        curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &nconn);
        atomic_fetch_add(&c->connections, (unsigned long)nconn);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &s->status);
        r = stream_result(s, cc, errbuf, e);
    }
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    return r;
}

int kube_request_stream(struct kube_client *c, const struct kube_req *r, kube_stream_fn *fn,
                        void *ctx, const atomic_bool *stop, usec_t idle_timeout,
                        struct kube_err *reterr)
{
    struct kube__prep p;
    struct kube_err e;
    struct stream s = {.fn = fn, .ctx = ctx, .stop = stop};
    kube_err_clear(&e);
    buf_init(&s.err_body, LIMIT_KUBE_ERROR_BODY);
    usec_t idle = idle_timeout ? idle_timeout : LIMIT_KUBE_WATCH_IDLE;
    int ret = kube__prepare(c, r, &p, &e);
    if (ret >= 0)
        ret = stream_once(c, &p, &s, idle, r->timeout_seconds, &e);
    if (ret < 0 && s.status == 401 && !s.delivered) {
        /* the token was rotated or expired: fetch a fresh one and try once more */
        kube_config_invalidate_token_gen(c->cfg, s.token_gen);
        atomic_fetch_add(&c->retries, 1);
        s.status = 0;
        buf_reset(&s.err_body);
        kube_err_clear(&e);
        ret = stream_once(c, &p, &s, idle, r->timeout_seconds, &e);
    }
    if (ret < 0 && reterr)
        *reterr = e;
    buf_done(&s.err_body);
    kube__prep_done(&p);
    return ret;
}
