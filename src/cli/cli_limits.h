/* SPDX-License-Identifier: Apache-2.0 */
/* Limits of kubectl-sandbox (sizes in bytes, times in microseconds). */
#pragma once

#include "common/clock.h"

#define LIMIT_CLI_MANIFEST    (8u * 1024 * 1024)      /* a -f file */
#define LIMIT_CLI_SBD_JSON    (16u * 1024 * 1024)     /* a buffered sandboxd JSON response */
#define LIMIT_CLI_SBD_LINE    (4u * 1024 * 1024)      /* one NDJSON line of a process stream */
#define LIMIT_CLI_SBD_ERROR   (64u * 1024)            /* an error body kept for the message */
#define LIMIT_CLI_SBD_CONNECT (10 * USEC_PER_SEC)     /* TCP+TLS connect to sandboxd */
#define LIMIT_CLI_STDIN_CHUNK (64u * 1024)            /* one stdin POST of exec -i */
#define LIMIT_CLI_CP_DEPTH    64                      /* directory nesting copied by cp */
#define LIMIT_CLI_CP_ENTRIES  100000                  /* files copied by one cp */
#define LIMIT_CLI_WAIT        (5 * 60 * USEC_PER_SEC) /* default --timeout of waits */
