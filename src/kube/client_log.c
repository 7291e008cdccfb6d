/* SPDX-License-Identifier: Apache-2.0 */
/* What the client logs about retried requests and client-side throttling: the fields of
 * one line (never a token, a body or a query string) and the limiter that keeps a 429
 * storm from flooding the log. */
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/str.h"
#include "kube/client_int.h"

void kube__loglimit_init(struct kube__loglimit *l)
{
    memset(l, 0, sizeof(*l));
    pthread_mutex_init(&l->lock, NULL);
}

void kube__loglimit_done(struct kube__loglimit *l)
{
    pthread_mutex_destroy(&l->lock);
}

bool kube__loglimit_allow(struct kube__loglimit *l, usec_t now, unsigned long *ret_suppressed)
{
    bool ok;

    pthread_mutex_lock(&l->lock);
    if (l->window_start == 0 || now < l->window_start ||
        now - l->window_start >= LIMIT_KUBE_LOG_WINDOW) {
        l->window_start = now ? now : 1;
        l->in_window = 0;
    }
    ok = l->in_window < LIMIT_KUBE_LOG_BURST;
    if (ok) {
        l->in_window++;
        if (ret_suppressed)
            *ret_suppressed = l->suppressed;
        l->suppressed = 0;
    } else {
        l->suppressed++;
    }
    pthread_mutex_unlock(&l->lock);
    return ok;
}

void kube__url_path(const char *url, char *out, size_t size)
{
    const char *p = url ? strstr(url, "://") : NULL;
    size_t n;

    if (size == 0)
        return;
    p = p ? strchr(p + 3, '/') : url;
    if (!p)
        p = "/";
    n = strcspn(p, "?#");
    if (n >= size)
        n = size - 1;
    memcpy(out, p, n);
    out[n] = '\0';
}

size_t kube__retry_note_format(const struct kube__retry_note *n, char *out, size_t size)
{
    char path[512];
    const char *reason = n->reason ? n->reason : "";
    struct buf b;

    if (size == 0)
        return 0;
    kube__url_path(n->url, path, sizeof(path));
    buf_init(&b, LIMIT_LOG_LINE);
    (void)buf_printf(&b, "method=%s path=", n->method ? n->method : "?");
    log_quote(&b, path, strlen(path));
    (void)buf_printf(&b, " status=%ld reason=", n->status);
    log_quote(&b, reason, strnlen(reason, 256));
    (void)buf_printf(&b, " retry_after_s=%ld attempt=%d delay_ms=%llu", n->retry_after_s,
                     n->attempt, (unsigned long long)(n->delay / USEC_PER_MSEC));
    if (n->suppressed > 0)
        (void)buf_printf(&b, " suppressed=%lu", n->suppressed);
    (void)str_copy(out, size, buf_str(&b));
    buf_done(&b);
    return strlen(out);
}
