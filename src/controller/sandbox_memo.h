/* SPDX-License-Identifier: Apache-2.0 */
/* Read-your-writes for status writes: remembers, per object UID (Sandboxes and
 * SandboxClaims share the table; UIDs are unique), the resourceVersion a status write was
 * based on, so a reconcile that still sees that version in the cache (the watch has not
 * delivered our own write yet) skips a write that could only fail with 409 Conflict. Our
 * write's watch event requeues the object.
 *
 * An entry counts for SB_MEMO_TTL only: if that event never comes (a reply or an event
 * lost across an API server restart), the memo stops suppressing the write, and callers
 * that skip a write (or drop a 409) requeue the object after SB_MEMO_TTL as a backstop.
 *
 * A fixed table (LIMIT_SB_MEMO_SLOTS, lossy on hash collisions): memory stays bounded,
 * and a lost entry only costs a conflict. Thread-safe. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "common/clock.h"

/** How long a recorded write suppresses writes on the version it replaced; also the
 *  backstop requeue delay after a skipped write or a dropped conflict. */
#define SB_MEMO_TTL (3 * USEC_PER_SEC)

/** True when sb (borrowed; a Sandbox or a claim) is the very version a status write of ours
 *  replaced, less than SB_MEMO_TTL ago. */
bool sb_memo_stale(const json_t *sb);
/** Records that a status write replaced sb's (borrowed) resourceVersion. */
void sb_memo_wrote(const json_t *sb);

/** sb_memo_stale and sb_memo_wrote on an explicit monotonic time (for tests). */
bool sb_memo_stale_at(const json_t *sb, usec_t now);
void sb_memo_wrote_at(const json_t *sb, usec_t now);
