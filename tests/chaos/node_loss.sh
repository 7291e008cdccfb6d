#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Node loss on the REAL node of the local cluster (make up): a Sandbox runs on the real
# node, its kubelet is stopped, and the Sandbox must turn Ready=False with a reason once
# the node lifecycle controller marks the node and its pods not ready (after the running
# kube-controller-manager's --node-monitor-grace-period, read from its command line: 50 s
# by default, 20 s on make test's cluster through AS_KCM_EXTRA_ARGS); when the kubelet
# comes back (hack/cluster/cluster.sh up restarts it) the Sandbox must be Ready again on
# the same pod (the outage is shorter than the 300 s not-ready toleration: nothing is
# evicted).
#
# It disturbs every workload on that node for about 30 s (a minute at the 50 s default),
# so it runs only when asked explicitly (make test does, on its own cluster, after the
# scale test):
#
#   AS_CHAOS_NODE_LOSS=1 tests/chaos/node_loss.sh --stack-is-mine
#
# The kubelet is restarted on every exit path (failure, Ctrl-C, SIGTERM). Env:
# AS_NODE_LOSS_TIMEOUT (seconds per wait, default 240, except the node's turn to Unknown:
# grace period + --node-monitor-period + 30 s). Ends with "node-loss: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
if [ "${AS_CHAOS_NODE_LOSS:-0}" != 1 ] || [ "${1:-}" != --stack-is-mine ]; then
	sed -n '2,20s/^# \{0,1\}//p' "$0" >&2
	echo "node-loss: 0 passed, 0 failed"
	exit 0
fi
T=${AS_NODE_LOSS_TIMEOUT:-240}
STATE=${AS_CLUSTER_DIR:-$PWD/.cache/cluster}
# The cluster must be this checkout's: restarting the kubelet runs cluster.sh up, which
# would first tear down a cluster that another checkout owns.
owner=$(cat /run/agent-sandbox/cluster-owner 2>/dev/null) || owner=""
if [ "$owner" != "$STATE" ]; then
	echo "the running cluster belongs to '${owner:-nobody}', not $STATE: refusing" >&2
	exit 1
fi
KC=$(hack/cluster/cluster.sh kubeconfig) || exit 1

# duration_s GO_DURATION: whole seconds, rounded up ("20s", "1m0s", "1m30s", "500ms").
duration_s() {
	local d=$1 ms=0 n u
	while [[ $d =~ ^([0-9]+)(ms|h|m|s)(.*)$ ]]; do
		n=${BASH_REMATCH[1]} u=${BASH_REMATCH[2]} d=${BASH_REMATCH[3]}
		case $u in
		ms) ms=$((ms + n)) ;;
		s) ms=$((ms + n * 1000)) ;;
		m) ms=$((ms + n * 60000)) ;;
		h) ms=$((ms + n * 3600000)) ;;
		esac
	done
	[ -z "$d" ] || return 1
	echo $(((ms + 999) / 1000))
}
# kcm_flag NAME DEFAULT: the value of --NAME on the running kube-controller-manager's
# command line (--NAME=V or --NAME V), else DEFAULT.
kcm_flag() {
	local pid v
	pid=$(cat "$STATE/pids/kube-controller-manager.pid" 2>/dev/null) &&
		v=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null |
			awk -v f="--$1" '$0 == f {getline; print; exit} index($0, f "=") == 1 {print substr($0, length(f) + 2); exit}') &&
		[ -n "$v" ] || v=$2
	echo "$v"
}
# The node turns Unknown once the grace period has passed since the kubelet's last status
# or lease renewal, at the next node monitor pass (every --node-monitor-period).
grace=$(duration_s "$(kcm_flag node-monitor-grace-period 50s)") || { echo "bad --node-monitor-grace-period" >&2; exit 1; }
monitor=$(duration_s "$(kcm_flag node-monitor-period 5s)") || { echo "bad --node-monitor-period" >&2; exit 1; }
T_UNKNOWN=${AS_NODE_LOSS_TIMEOUT:-$((grace + monitor + 30))}
k() { .cache/bin/kubectl --kubeconfig "$KC" "$@"; }
NS=chaos-node-loss
passed=0 failed=0
check() { if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $*" >&2; fi; }

kubelet_pid() { # the running kubelet of this cluster, or fails
	local pid
	pid=$(cat "$STATE/pids/kubelet.pid" 2>/dev/null) || return 1
	[ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$STATE/" || return 1
	echo "$pid"
}
stopped=0
restore() { # restart the kubelet if we stopped it; idempotent
	[ "$stopped" = 1 ] || return 0
	local out try
	for try in 1 2 3; do
		kubelet_pid >/dev/null && break
		out=$(hack/cluster/cluster.sh up 2>&1) && break
		echo "node-loss: hack/cluster/cluster.sh up failed (try $try of 3):" >&2
		tail -n 15 <<<"$out" | sed 's/^/   | /' >&2
		sleep 3
	done
	stopped=0
}
cleanup() {
	restore
	k delete namespace "$NS" --wait=false >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# The real node: the one that is not a kwok node.
node=$(k get nodes -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.metadata.annotations.kwok\.x-k8s\.io/node}{"\n"}{end}' |
	awk '$2 == "" {print $1; exit}')
[ -n "$node" ] || { echo "no real node found" >&2; exit 1; }
# The pod spec of the stack's default template (the runtime image with sandboxd).
spec=$(k get sandboxtemplates -A -o jsonpath='{.items[0].spec.podTemplate.spec}')
[ -n "$spec" ] || { echo "no SandboxTemplate found (make up)" >&2; exit 1; }

# A namespace left by an earlier run may still be terminating (its Sandbox with it):
# applying into it would patch the dying Sandbox instead of creating a new one.
k wait --for=delete namespace/"$NS" --timeout="${T}s" >/dev/null 2>&1 || true
k create namespace "$NS" >/dev/null || exit 1
python3 - "$spec" "$node" <<'PY' | k -n "$NS" apply -f - >/dev/null || exit 1
import json, sys
spec = json.loads(sys.argv[1])
spec["nodeSelector"] = {"kubernetes.io/hostname": sys.argv[2]}
print(json.dumps({"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
                  "metadata": {"name": "node-loss"}, "spec": {"podTemplate": {"spec": spec}}}))
PY

# wait_for WHAT SECS CMD...: polls CMD every second for up to SECS s; reports the time taken.
wait_for() {
	local what=$1 secs=$2 start=$SECONDS
	shift 2
	while [ $((SECONDS - start)) -lt "$secs" ]; do
		if "$@"; then
			echo "   $what after $((SECONDS - start))s (${SECONDS}s into the test)"
			return 0
		fi
		sleep 1
	done
	echo "   not $what after ${secs}s" >&2
	return 1
}
sb_ready() { # want: the Sandbox's Ready status, with a reason
	local st
	st=$(k -n "$NS" get sandbox node-loss -o jsonpath='{range .status.conditions[?(@.type=="Ready")]}{.status}{" "}{.reason}{" "}{.message}{end}' 2>/dev/null)
	[ "${st%% *}" = "$1" ] && [ -n "$(awk '{print $2}' <<<"$st")" ] || return 1
	echo "   Sandbox Ready=$st"
}
node_ready() { # want: the node's Ready status (True, or Unknown when the kubelet is silent)
	local st
	st=$(k get node "$node" -o jsonpath='{range .status.conditions[?(@.type=="Ready")]}{.status}{" "}{.reason}{end}')
	[ "${st%% *}" = "$1" ] || return 1
	echo "   node Ready=$st"
}
pod_uid_of_sandbox() {
	local name
	name=$(k -n "$NS" get sandbox node-loss -o jsonpath='{.metadata.annotations.agents\.x-k8s\.io/pod-name}')
	k -n "$NS" get pod "${name:-node-loss}" -o jsonpath='{.metadata.uid}' 2>/dev/null
}
same_pod() { [ -n "$uid" ] && [ "$(pod_uid_of_sandbox)" = "$uid" ]; }

SECONDS=0
echo "== Sandbox on node $node (node monitor grace period ${grace}s, period ${monitor}s)"
check wait_for "Ready" "$T" sb_ready True
uid=$(pod_uid_of_sandbox)
echo "   pod uid $uid"
pid=$(kubelet_pid) || { echo "the kubelet is not running" >&2; exit 1; }
echo "== stopping the kubelet (pid $pid)"
stopped=1
kill -TERM "$pid"
# Gone, not only signalled: until it has exited it may still hold its ports.
for _ in $(seq 1 300); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
check wait_for "node not Ready" "$T_UNKNOWN" node_ready Unknown
check wait_for "Sandbox not Ready" "$T" sb_ready False
echo "== restarting the kubelet (hack/cluster/cluster.sh up)"
t=$SECONDS
restore
echo "   cluster.sh up returned after $((SECONDS - t))s"
check wait_for "node Ready" "$T" node_ready True
check wait_for "Sandbox Ready again" "$T" sb_ready True
check same_pod
echo "node-loss: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
