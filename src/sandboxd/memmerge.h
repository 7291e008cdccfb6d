/* SPDX-License-Identifier: Apache-2.0 */
/* Opt-in page merging (KSM) for everything sandboxd starts: prctl(PR_SET_MEMORY_MERGE)
 * marks the process's memory mergeable, and the mark is inherited across fork and
 * execve, so every command, shell and kernel sandboxd spawns afterwards takes part. The
 * node's ksmd does the merging (only when /sys/kernel/mm/ksm/run is 1). No capability
 * is needed on Linux 6.4 and later; older kernels answer EINVAL. */
#pragma once

#include <stdbool.h>

/** Parses the $SANDBOXD_MEMORY_MERGE value s (borrowed): "1", "true", "yes", "on",
 * "Enabled" turn it on; "", "0", "false", "no", "off", "Disabled" off. Returns 0 and sets
 * *on, or -EINVAL for anything else. */
int sbd_memmerge_parse(const char *s, bool *on);

/** Turns merging on for the calling process and its future children (it is never turned
 * off again: that walks every mapping to unmerge). Returns 0 or a negative errno
 * (-EINVAL: the kernel has no PR_SET_MEMORY_MERGE). */
int sbd_memmerge_enable(void);

/** 1 when the calling process is marked mergeable, 0 when not, negative errno when the
 * kernel cannot tell. */
int sbd_memmerge_get(void);
