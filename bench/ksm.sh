#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Page-merging benchmark on the real node of `make up` (docs/performance.md, "Page
# merging"): for each fleet size N and each mode (spec.pageMerging Disabled, Enabled, Maximal), N Sandboxes of
# one template each run the same workload (Python with numpy and pandas imported and a
# small data frame held, started through sandboxd so that it inherits the merge mark);
# the script reports the fleet's total PSS (from /proc/PID/smaps_rollup of every process
# in the pods' cgroups), the node's used memory (MemTotal - MemAvailable) over the
# baseline without the fleet, KSM's pages_sharing, the time for pages_sharing to settle,
# and ksmd's CPU (share of one core) over a window once settled.
#
#   bench/ksm.sh [N...]        default: 20 50
#
# Env: BENCH_KSM_IMAGE (default the scientific runtime image), BENCH_KSM_NS (default
# bench-ksm), BENCH_KSM_SETTLE (seconds pages_sharing must stay within 1 % to count as
# settled, default 30), BENCH_KSM_MAX_WAIT (default 900), BENCH_KSM_CPU_WINDOW (default 30),
# BENCH_KSM_WORKLOAD (the Python program; it must print "ready" and stay),
# BENCH_KSM_MODES (default "Disabled Enabled Maximal": spec.pageMerging of the template).
# Writes bench/results/ksm-<timestamp>.json. Not a test: it prints figures.
set -euo pipefail
source "$(dirname "$0")/../tests/e2e/lib.sh"
stack_kubeconfig || { echo "the stack of make up is not running" >&2; exit 1; }
stack_router || exit 1
IMAGE=${BENCH_KSM_IMAGE:-localhost/agent-sandbox/runtime-sci:dev}
NS=${BENCH_KSM_NS:-bench-ksm}
SETTLE=${BENCH_KSM_SETTLE:-30}
MAX_WAIT=${BENCH_KSM_MAX_WAIT:-900}
CPU_WINDOW=${BENCH_KSM_CPU_WINDOW:-30}
KSM=/sys/kernel/mm/ksm
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(20 50)
[ "$(cat $KSM/run)" = 1 ] || { echo "KSM is not running on the node ($KSM/run)" >&2; exit 1; }
WORKLOAD=${BENCH_KSM_WORKLOAD:-'import numpy as np, pandas as pd, time
df = pd.DataFrame(np.arange(200000, dtype=np.int64).reshape(-1, 20), columns=[f"c{i}" for i in range(20)])
df["s"] = df.sum(axis=1)
print("ready", len(df), flush=True)
time.sleep(1e9)'}
RUNTIME_IMAGE=$IMAGE

setup_ns() {
	local end=$((SECONDS + 300))
	while [ "$(k get namespace "$NS" -o jsonpath='{.status.phase}' 2>/dev/null)" = Terminating ] &&
		[ $SECONDS -lt $end ]; do sleep 2; done
	k create namespace "$NS" --dry-run=client -o yaml | k apply -f - >/dev/null
	# the router's token (sandbox-user of default) may reach sandboxes here
	k apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: bench-ksm-router, namespace: $NS}
rules:
- {apiGroups: [agents.x-k8s.io], resources: [sandboxes], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bench-ksm-router, namespace: $NS}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: bench-ksm-router}
subjects: [{kind: ServiceAccount, name: sandbox-user, namespace: default}]
YAML
}
fleet_up() { # N MODE
	k apply -f - >/dev/null <<YAML
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: ksm-${2,,}, namespace: $NS}
spec:
  pageMerging: $2
  networkPolicyManagement: Unmanaged
$(runtime_pod_template "        resources: {requests: {cpu: 10m, memory: 64Mi}}")
$EMPTYDIR_VOLUME
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: ksm-${2,,}, namespace: $NS}
spec: {replicas: $1, sandboxTemplateRef: {name: ksm-${2,,}}}
YAML
}
ready_count() {
	k -n "$NS" get sandboxes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
		grep -c True || true
}
wait_ready() { # N
	local end=$((SECONDS + 600))
	until [ "$(ready_count)" -ge "$1" ]; do
		[ $SECONDS -lt $end ] || { echo "only $(ready_count)/$1 Ready" >&2; return 1; }
		sleep 2
	done
}
# Starts the workload in every sandbox through the router as a background process
# (sandboxd starts it, so it is mergeable when sandboxd is) and waits until each printed
# "ready".
start_workloads() {
	local sb body ids=()
	body=$(py_cmd "$WORKLOAD" | jq -c '. + {background: true}')
	SBS=$(k -n "$NS" get sandboxes -o name | cut -d/ -f2)
	for sb in $SBS; do
		router_req POST "$sb" 8080 /v1/processes -H 'content-type: application/json' -d "$body" |
			jq -r .id >"$WORK/$sb.id"
	done
	local end=$((SECONDS + 300)) left
	while :; do
		left=0
		for sb in $SBS; do
			router_req GET "$sb" 8080 "/v1/processes/$(cat "$WORK/$sb.id")/output?follow=false" -m 10 |
				jq -r 'select(.type == "stdout") | .data | @base64d' 2>/dev/null | grep -q ready ||
				left=$((left + 1))
		done
		[ "$left" -gt 0 ] || return 0
		[ $SECONDS -lt $end ] || { echo "$left workloads did not start" >&2; return 1; }
		sleep 2
	done
}
stop_workloads() { rm -f "$WORK"/*.id; }
# Total PSS (KiB) of every process in the cgroups of the namespace's pods.
fleet_pss() {
	local uids u pids=() p
	uids=$(k -n "$NS" get pods -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}')
	for u in $uids; do
		for p in $(grep -l -e "pod$u" -e "pod${u//-/_}" /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3); do
			pids+=("$p")
		done
	done
	for p in "${pids[@]}"; do awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null; done |
		awk '{s += $1} END {print s + 0}'
}
used_kib() { awk '/^MemTotal:/ {t = $2} /^MemAvailable:/ {a = $2} END {print t - a}' /proc/meminfo; }
sharing() { cat $KSM/pages_sharing; }
ksmd_ticks() { awk '{print $14 + $15}' "/proc/$(pgrep -x ksmd)/stat"; }
# Waits until ksmd has made two full passes since the workloads started (merging needs
# two) and pages_sharing then stays within 1 % for SETTLE seconds; prints the seconds it
# took.
settle() {
	local t0=$SECONDS ref ref_t now v fs0
	fs0=$(cat $KSM/full_scans)
	ref=$(sharing) ref_t=$SECONDS
	while [ $((SECONDS - t0)) -lt "$MAX_WAIT" ]; do
		sleep 5
		v=$(sharing)
		now=$SECONDS
		if [ "$(cat $KSM/full_scans)" -ge $((fs0 + 2)) ] && [ "$v" -gt 0 ] &&
			[ $((v > ref ? v - ref : ref - v)) -le $((ref / 100)) ]; then
			[ $((now - ref_t)) -lt "$SETTLE" ] || { echo $((ref_t - t0)); return; }
		else
			ref=$v ref_t=$now
		fi
	done
	echo "$MAX_WAIT"
}
fleet_down() {
	k -n "$NS" delete sandboxwarmpool --all --wait=false >/dev/null 2>&1 || true
	k -n "$NS" delete sandboxtemplate --all --wait=false >/dev/null 2>&1 || true
	local end=$((SECONDS + 300))
	while [ -n "$(k -n "$NS" get pods -o name 2>/dev/null)" ] && [ $SECONDS -lt $end ]; do sleep 2; done
}
cleanup() {
	stop_workloads
	fleet_down
	k delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
WORK=$(mktemp -d)
trap cleanup EXIT
setup_ns
fleet_down
HZ=$(getconf CLK_TCK)
PAGE_KIB=$(($(getconf PAGESIZE) / 1024))
results=()
for n in "${SIZES[@]}"; do
	for mode in ${BENCH_KSM_MODES:-Disabled Enabled Maximal}; do
		sleep 5
		base=$(used_kib) sh0=$(sharing)
		fleet_up "$n" "$mode"
		wait_ready "$n"
		start_workloads
		conv=0
		if [ "$mode" != Disabled ]; then conv=$(settle); else sleep "$SETTLE"; fi
		t0=$(ksmd_ticks)
		sleep "$CPU_WINDOW"
		cpu=$(awk -v d=$(($(ksmd_ticks) - t0)) -v hz="$HZ" -v w="$CPU_WINDOW" 'BEGIN {printf "%.2f", 100 * d / hz / w}')
		pss=$(fleet_pss) used=$(($(used_kib) - base)) sh=$(($(sharing) - sh0))
		line=$(awk -v n="$n" -v m="$mode" -v pss="$pss" -v used="$used" -v sh="$sh" -v pk="$PAGE_KIB" \
			-v conv="$conv" -v cpu="$cpu" 'BEGIN {
			printf "{\"n\": %d, \"merging\": \"%s\", \"fleet_pss_mib\": %.1f, \"node_used_mib\": %.1f, ", n, m, pss / 1024, used / 1024
			printf "\"pages_sharing\": %d, \"saved_mib\": %.1f, \"settle_s\": %d, \"ksmd_cpu_pct\": %s}\n", sh, sh * pk / 1024, conv, cpu
		}')
		echo "$line"
		results+=("$line")
		stop_workloads
		fleet_down
	done
done
mkdir -p "$ROOT/bench/results"
out=$ROOT/bench/results/ksm-$(date -u +%Y%m%dT%H%M%SZ).json
printf '%s\n' "${results[@]}" | jq -s --arg image "$IMAGE" --arg kernel "$(uname -r)" \
	--arg cpus "$(nproc)" '{image: $image, kernel: $kernel, cpus: ($cpus | tonumber), runs: .}' >"$out"
echo "wrote $out"
