/* SPDX-License-Identifier: Apache-2.0 */
/* Token bucket with reservations (as golang.org/x/time/rate, which client-go uses). */
#include "kube/ratelimit.h"

#include <errno.h>
#include <math.h>

#include "common/limits.h"

void kube_ratelimit_init(struct kube_ratelimit *rl, double qps, int burst, usec_t now)
{
    pthread_mutex_init(&rl->lock, NULL);
    rl->qps = qps > 0 ? qps : 0;
    rl->burst = burst > 0 ? (double)burst : fmax(1.0, floor(rl->qps));
    rl->tokens = rl->burst;
    rl->last = now;
    rl->last_due = now;
}

void kube_ratelimit_done(struct kube_ratelimit *rl)
{
    pthread_mutex_destroy(&rl->lock);
}

/* Brings the bucket up to now. Called with the lock held. */
static void refill(struct kube_ratelimit *rl, usec_t now)
{
    if (now > rl->last) {
        rl->tokens += (double)(now - rl->last) * rl->qps / (double)USEC_PER_SEC;
        if (rl->tokens > rl->burst)
            rl->tokens = rl->burst;
        rl->last = now;
    }
}

/* How long until a token taken from tokens (after the take) is due; at most a
 * LIMIT_KUBE_THROTTLE_MAX (a tiny qps would overflow usec_t). */
static usec_t debt_wait(const struct kube_ratelimit *rl, double tokens)
{
    double debt = tokens < 0 ? -tokens : 0;
    double w = ceil(debt * (double)USEC_PER_SEC / rl->qps);
    return w >= (double)LIMIT_KUBE_THROTTLE_MAX ? LIMIT_KUBE_THROTTLE_MAX : (usec_t)w;
}

int kube_ratelimit_reserve_by(struct kube_ratelimit *rl, usec_t now, usec_t deadline,
                              usec_t *ret_wait)
{
    int r = 0;
    *ret_wait = 0;
    if (rl->qps <= 0)
        return 0;
    pthread_mutex_lock(&rl->lock);
    refill(rl, now);
    usec_t wait = debt_wait(rl, rl->tokens - 1.0);
    if (deadline && now + wait > deadline) {
        r = -ETIMEDOUT;
    } else {
        rl->tokens -= 1.0;
        *ret_wait = wait;
        if (now + wait > rl->last_due)
            rl->last_due = now + wait;
    }
    pthread_mutex_unlock(&rl->lock);
    return r;
}

usec_t kube_ratelimit_reserve(struct kube_ratelimit *rl, usec_t now)
{
    usec_t wait;
    (void)kube_ratelimit_reserve_by(rl, now, 0, &wait);
    return wait;
}

void kube_ratelimit_unreserve(struct kube_ratelimit *rl, usec_t due, usec_t now)
{
    double later, back;
    if (rl->qps <= 0 || due <= now)
        return; /* unlimited, or already due: its token is spent */
    pthread_mutex_lock(&rl->lock);
    later = due < rl->last_due ? (double)(rl->last_due - due) : 0;
    back = 1.0 - later * rl->qps / (double)USEC_PER_SEC;
    if (back > 1e-6) {
        refill(rl, now);
        rl->tokens += back;
        if (rl->tokens > rl->burst)
            rl->tokens = rl->burst;
        if (due == rl->last_due) {
            /* the latest one: the one before it is due a token's time earlier */
            usec_t tok = debt_wait(rl, -1.0);
            rl->last_due = due > now + tok ? due - tok : now;
        }
    }
    pthread_mutex_unlock(&rl->lock);
}

int kube_ratelimit_wait_by(struct kube_ratelimit *rl, usec_t deadline, const atomic_bool *cancel,
                           usec_t *ret_waited)
{
    usec_t start = clock_now(), wait, due;
    int r = kube_ratelimit_reserve_by(rl, start, deadline, &wait);
    *ret_waited = 0;
    if (r < 0 || wait == 0)
        return r;
    due = start + wait;
    for (usec_t now = start; now < due; now = clock_now()) {
        if (cancel && atomic_load(cancel)) {
            kube_ratelimit_unreserve(rl, due, now);
            *ret_waited = now - start;
            return -ECANCELED;
        }
        clock_sleep(due - now < LIMIT_KUBE_THROTTLE_SLICE ? due - now : LIMIT_KUBE_THROTTLE_SLICE);
    }
    *ret_waited = wait;
    return 0;
}
