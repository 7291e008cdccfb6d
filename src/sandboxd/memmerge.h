/* SPDX-License-Identifier: Apache-2.0 */
/* Opt-in page merging (KSM) for everything sandboxd starts: prctl(PR_SET_MEMORY_MERGE)
 * marks the process's memory mergeable, and the mark is inherited across fork and
 * execve, so every command, shell and kernel sandboxd spawns afterwards takes part. The
 * node's ksmd does the merging (only when /sys/kernel/mm/ksm/run is 1). No capability
 * is needed on Linux 6.4 and later; older kernels answer EINVAL.
 *
 * Identical programs rarely have identical heap pages while address space layout
 * randomization gives each its own addresses (the pointers in the pages differ). The
 * fixed-layout mode also sets the ADDR_NO_RANDOMIZE personality, inherited by every
 * program sandboxd starts: same layout, far more identical pages, weaker exploit
 * mitigation (docs/security.md). */
#pragma once

/** What $SANDBOXD_MEMORY_MERGE / --memory-merge asks for. */
enum sbd_memmerge_mode {
    SBD_MEMMERGE_OFF,
    SBD_MEMMERGE_ON,           /* mergeable, layout randomized */
    SBD_MEMMERGE_FIXED_LAYOUT, /* mergeable, programs started without randomization */
};

/** Parses s (borrowed): "1", "true", "yes", "on", "Enabled" are on; "fixed-layout" and
 * "Maximal" the fixed-layout mode; "", "0", "false", "no", "off", "Disabled" off (case
 * ignored). Returns 0 and sets *mode, or -EINVAL for anything else. */
int sbd_memmerge_parse(const char *s, enum sbd_memmerge_mode *mode);

/** Turns merging on for the calling process and its future children (it is never turned
 * off again: that walks every mapping to unmerge). Returns 0 or a negative errno
 * (-EINVAL: the kernel has no PR_SET_MEMORY_MERGE). */
int sbd_memmerge_enable(void);

/** Adds ADDR_NO_RANDOMIZE to the calling process's personality: programs it executes
 * afterwards get a fixed layout. Returns 0 or a negative errno (-EPERM: a seccomp
 * profile such as the runtime default refuses it). */
int sbd_memmerge_fix_layout(void);

/** 1 when the calling process is marked mergeable, 0 when not, negative errno when the
 * kernel cannot tell. */
int sbd_memmerge_get(void);
