# shellcheck shell=bash
# Kernel same-page merging (KSM) on the local node, for templates with
# spec.pageMerging: Enabled (docs/performance.md "Page merging"). Only memory that a
# process marked mergeable (sandboxd does with SANDBOXD_MEMORY_MERGE=1) is scanned, so
# with no such template running ksmd has nothing to do. ksmd's CPU is bounded by a fixed
# scan rate: $AS_KSM_PAGES pages (default 100, the kernel's) every $AS_KSM_SLEEP_MS ms (default 20),
# 20 MB/s, a few percent of one core; the kernel's scan-time advisor is not used (on
# this machine it raised the rate to its maximum and took half a core). AS_KSM=0 leaves
# the node's KSM settings alone. Sourced by cluster.sh.
KSM_SYS=/sys/kernel/mm/ksm

ksm_write() { # FILE VALUE: best effort (older kernels lack the advisor files)
	[ -w "$KSM_SYS/$1" ] && echo "$2" >"$KSM_SYS/$1" 2>/dev/null
}

ksm_up() {
	[ "${AS_KSM:-1}" != 0 ] && [ -d "$KSM_SYS" ] || return 0
	local orig=$STATE/ksm.orig f
	if [ ! -f "$orig" ]; then # the machine's settings, restored by `down`
		for f in run advisor_mode pages_to_scan sleep_millisecs; do
			[ -r "$KSM_SYS/$f" ] || continue
			printf '%s %s\n' "$f" "$(sed -E 's/.*\[([^]]*)\].*/\1/' "$KSM_SYS/$f")"
		done >"$orig.tmp" && mv "$orig.tmp" "$orig"
	fi
	ksm_write advisor_mode none || true
	ksm_write pages_to_scan "${AS_KSM_PAGES:-100}" || true
	ksm_write sleep_millisecs "${AS_KSM_SLEEP_MS:-20}" || true
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
