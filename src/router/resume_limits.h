/* SPDX-License-Identifier: Apache-2.0 */
/* Limits and defaults of resume-on-traffic and activity reporting in sandbox-router. */
#pragma once

#include "common/clock.h"

#define LIMIT_ROUTER_RESUME_HOLD        (120 * USEC_PER_SEC) /* a held request waits at most */
#define LIMIT_ROUTER_RESUME_PER_SANDBOX 256                  /* held requests per sandbox */
#define LIMIT_ROUTER_RESUME_TOTAL       4096                 /* held requests in all */
#define LIMIT_ROUTER_RESUME_POLL        (20 * USEC_PER_MSEC) /* cache check while holding */
#define LIMIT_ROUTER_WORKER_QUEUE       4096                 /* queued API writes */
#define LIMIT_ROUTER_ACTIVITY_TICK      (1 * USEC_PER_SEC)   /* activity flush period */
#define LIMIT_ROUTER_ACTIVITY_MIN       (1 * USEC_PER_SEC)   /* annotation write interval, min */
#define LIMIT_ROUTER_ACTIVITY_MAX       (60 * USEC_PER_SEC)  /* and max (timeout / 4 between) */
#define LIMIT_ROUTER_ACTIVITY_ENTRIES   65536                /* sandboxes tracked */
#define LIMIT_ROUTER_ACTIVITY_FORGET    (600 * USEC_PER_SEC) /* drop an entry idle this long */
