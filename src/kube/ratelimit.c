/* SPDX-License-Identifier: Apache-2.0 */
/* Token bucket with reservations (as golang.org/x/time/rate, which client-go uses). */
#include "kube/ratelimit.h"

#include <math.h>

void kube_ratelimit_init(struct kube_ratelimit *rl, double qps, int burst, usec_t now)
{
    pthread_mutex_init(&rl->lock, NULL);
    rl->qps = qps > 0 ? qps : 0;
    rl->burst = burst > 0 ? (double)burst : fmax(1.0, floor(rl->qps));
    rl->tokens = rl->burst;
    rl->last = now;
}

void kube_ratelimit_done(struct kube_ratelimit *rl)
{
    pthread_mutex_destroy(&rl->lock);
}

usec_t kube_ratelimit_reserve(struct kube_ratelimit *rl, usec_t now)
{
    if (rl->qps <= 0)
        return 0;
    pthread_mutex_lock(&rl->lock);
    if (now > rl->last) {
        rl->tokens += (double)(now - rl->last) * rl->qps / (double)USEC_PER_SEC;
        if (rl->tokens > rl->burst)
            rl->tokens = rl->burst;
        rl->last = now;
    }
    rl->tokens -= 1.0;
    double debt = rl->tokens < 0 ? -rl->tokens : 0;
    pthread_mutex_unlock(&rl->lock);
    return (usec_t)ceil(debt * (double)USEC_PER_SEC / rl->qps);
}

usec_t kube_ratelimit_wait(struct kube_ratelimit *rl)
{
    usec_t d = kube_ratelimit_reserve(rl, clock_now());
    if (d > 0)
        clock_sleep(d);
    return d;
}
