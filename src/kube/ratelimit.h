/* SPDX-License-Identifier: Apache-2.0 */
/* Client-side token bucket (qps, burst). Callers reserve a token and wait out the debt,
 * so concurrent waiters are served roughly in arrival order. Thread-safe. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common/clock.h"

struct kube_ratelimit {
    pthread_mutex_t lock;
    double qps;      /* tokens per second; <= 0 disables the limiter */
    double burst;    /* bucket size */
    double tokens;   /* may go negative: tokens already promised to waiters */
    usec_t last;     /* when tokens was last brought up to date */
    usec_t last_due; /* when the latest reservation is due */
};

/** Initialises a full bucket at now. burst <= 0 means max(1, qps). */
void kube_ratelimit_init(struct kube_ratelimit *rl, double qps, int burst, usec_t now);
void kube_ratelimit_done(struct kube_ratelimit *rl);
/** Takes one token at time now and returns how long the caller must wait before using
 * it (0 when one was available; at most LIMIT_KUBE_THROTTLE_MAX). The clock is a
 * parameter so tests can drive it. */
usec_t kube_ratelimit_reserve(struct kube_ratelimit *rl, usec_t now);
/** As kube_ratelimit_reserve, but only when the token is due by deadline (0: any time).
 * Returns 0 with the wait in *ret_wait, or -ETIMEDOUT with nothing taken (so a caller
 * whose time is up adds no debt for the others). */
int kube_ratelimit_reserve_by(struct kube_ratelimit *rl, usec_t now, usec_t deadline,
                              usec_t *ret_wait);
/** Gives back, at time now, the token of a reservation due at due and not used (a caller
 * cancelled while it waited), less what the reservations made after it already counted
 * on (as golang.org/x/time/rate): the latest one's comes back whole, one with a later
 * reservation behind it gives back nothing (their waits stay as they were, so the rate
 * holds), and one already due gives back nothing. */
void kube_ratelimit_unreserve(struct kube_ratelimit *rl, usec_t due, usec_t now);
/** Reserves a token due by deadline (0: any time) and sleeps until it is due, looking at
 * *cancel (NULL: none) at least every LIMIT_KUBE_THROTTLE_SLICE. Returns 0 with the
 * time waited in *ret_waited, -ETIMEDOUT (nothing taken: the token would come too late)
 * or -ECANCELED (the token given back). */
int kube_ratelimit_wait_by(struct kube_ratelimit *rl, usec_t deadline, const atomic_bool *cancel,
                           usec_t *ret_waited);
