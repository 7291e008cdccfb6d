/* SPDX-License-Identifier: Apache-2.0 */
/* Limits and defaults of idle auto-suspend in the controller. */
#pragma once

#include "common/clock.h"

#define LIMIT_IDLE_PROBE_PORT    8080                /* sandboxd's REST port */
#define LIMIT_IDLE_PROBE_TIMEOUT (2 * USEC_PER_SEC)  /* one GET /v1/activity */
#define LIMIT_IDLE_PROBE_BODY    (4u * 1024)         /* its response body */
#define LIMIT_IDLE_BUSY_ENTRIES  65536               /* remembered busy sandboxes */
#define LIMIT_IDLE_RETRY         (1 * USEC_PER_SEC)  /* after a conflicting suspend */
#define LIMIT_IDLE_PROBE_RETRY   (30 * USEC_PER_SEC) /* longest wait after a failed probe */
