# shellcheck shell=bash
# Kernel same-page merging (KSM) on the local node, for templates with
# spec.pageMerging: Enabled (docs/performance.md "Page merging"). Only memory that a
# process marked mergeable (sandboxd does with SANDBOXD_MEMORY_MERGE=1) is scanned, so
# with no such template running ksmd has nothing to do. ksmd's CPU is bounded by the
# kernel's scan-time advisor: at most $AS_KSM_MAX_CPU percent of one core (default 5).
# The advisor aims at one full scan of the mergeable memory every $AS_KSM_SCAN_TIME
# seconds (default 30) within that bound. AS_KSM=0 leaves the node's KSM settings alone.
# Sourced by cluster.sh.
KSM_SYS=/sys/kernel/mm/ksm

ksm_write() { # FILE VALUE: best effort (older kernels lack the advisor files)
	[ -w "$KSM_SYS/$1" ] && echo "$2" >"$KSM_SYS/$1" 2>/dev/null
}

ksm_up() {
	[ "${AS_KSM:-1}" != 0 ] && [ -d "$KSM_SYS" ] || return 0
	local orig=$STATE/ksm.orig f
	if [ ! -f "$orig" ]; then # the machine's settings, restored by `down`
		for f in run advisor_mode advisor_max_cpu advisor_target_scan_time; do
			[ -r "$KSM_SYS/$f" ] || continue
			printf '%s %s\n' "$f" "$(sed -E 's/.*\[([^]]*)\].*/\1/' "$KSM_SYS/$f")"
		done >"$orig.tmp" && mv "$orig.tmp" "$orig"
	fi
	ksm_write advisor_mode scan-time || true
	ksm_write advisor_max_cpu "${AS_KSM_MAX_CPU:-5}" || true
	ksm_write advisor_target_scan_time "${AS_KSM_SCAN_TIME:-30}" || true
	ksm_write run 1 || log "warning: cannot enable KSM ($KSM_SYS/run); page merging stays off"
}

ksm_down() {
	local orig=$STATE/ksm.orig f v
	[ -f "$orig" ] || return 0
	while read -r f v; do
		[ "$f" = run ] || ksm_write "$f" "$v" || true
	done <"$orig"
	v=$(awk '$1 == "run" {print $2}' "$orig")
	[ -z "$v" ] || ksm_write run "$v" || true
	rm -f "$orig"
}
