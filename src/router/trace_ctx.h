/* SPDX-License-Identifier: Apache-2.0 */
/* W3C Trace Context (https://www.w3.org/TR/trace-context/): the router forwards
 * traceparent and tracestate unchanged (it creates no spans and makes none up when they
 * are absent); it only reads the ids out of traceparent for its access log. */
#pragma once

#include <stdbool.h>

#include "common/str.h"

#define TRACE_ID_LEN 32 /* lowercase hex digits */
#define SPAN_ID_LEN  16

/** Parses a traceparent value "VV-<32 hex trace id>-<16 hex parent id>-FF": version
 * 00 exactly so; a later version (not ff) may add "-..." fields after the flags. All-zero
 * ids, uppercase hex and surrounding blanks are invalid (as the spec says). On success
 * copies the ids, NUL-terminated, and returns true; else returns false and leaves both
 * empty. */
bool trace_parse_traceparent(struct str v, char trace_id[TRACE_ID_LEN + 1],
                             char span_id[SPAN_ID_LEN + 1]);
