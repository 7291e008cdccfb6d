/* SPDX-License-Identifier: Apache-2.0 */
/* Limits private to the watch cache (store and informer), beside common/limits.h. */
#pragma once

#include "common/clock.h"

#define LIMIT_KUBE_STORE_KEY         1024               /* "namespace/name" of one object */
#define LIMIT_KUBE_INFORMER_HANDLERS 16                 /* handler sets per informer */
#define LIMIT_KUBE_WATCH_MIN_LIFE    (1 * USEC_PER_SEC) /* a shorter event-less watch backs off */
