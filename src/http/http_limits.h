/* SPDX-License-Identifier: Apache-2.0 */
/* Limits of the HTTP server that are not in common/limits.h (sizes in bytes, times in
 * microseconds). The server-wide ones there (LIMIT_HTTP_*) stay the primary bounds. */
#pragma once

#include "common/clock.h"

#define LIMIT_HTTP_REQUEST_LINE (16u * 1024)       /* request line; longer gets 414 */
#define LIMIT_HTTP_READ_CHUNK   (64u * 1024)       /* one socket read (shared buffer) */
#define LIMIT_HTTP_LINGER       (2 * USEC_PER_SEC) /* drain input after an error reply */
#define LIMIT_HTTP_RESP_HEADERS (16u * 1024)       /* headers a handler adds to a reply */
#define LIMIT_HTTP_ERROR_BODY   (4u * 1024)        /* one generated error body */
#define LIMIT_HTTP_READY_REASON 1024u              /* a /readyz failure reason */
#define LIMIT_HTTP_ROUTES       256                /* routes in one router */
