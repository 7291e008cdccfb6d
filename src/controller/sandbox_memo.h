/* SPDX-License-Identifier: Apache-2.0 */
/* Read-your-writes for status writes: remembers, per object UID (Sandboxes and
 * SandboxClaims share the table; UIDs are unique), the resourceVersion a status write was
 * based on, so a reconcile that still sees that version in the cache (the watch has not
 * delivered our own write yet) skips a write that could only fail with 409 Conflict. Our
 * write's watch event requeues the object anyway.
 *
 * A fixed table (LIMIT_SB_MEMO_SLOTS, lossy on hash collisions): memory stays bounded,
 * and a lost entry only costs a conflict. Thread-safe. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

/** True when sb (borrowed; a Sandbox or a claim) is the very version a status write of ours
 *  replaced. */
bool sb_memo_stale(const json_t *sb);
/** Records that a status write replaced sb's (borrowed) resourceVersion. */
void sb_memo_wrote(const json_t *sb);
