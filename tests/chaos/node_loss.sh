#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Node loss on the REAL node of the local cluster (make up): a Sandbox runs on the real
# node, its kubelet is stopped, and the Sandbox must turn Ready=False with a reason once
# the node lifecycle controller marks the pod not ready; when the kubelet comes back
# (hack/cluster/cluster.sh up restarts it) the Sandbox must be Ready again.
#
# It disturbs every workload on that node, so it runs only when asked explicitly and
# nobody else uses the stack:
#
#   AS_CHAOS_NODE_LOSS=1 tests/chaos/node_loss.sh --stack-is-mine
#
# Env: AS_NODE_LOSS_TIMEOUT (seconds per wait, default 300). Ends with
# "node-loss: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
if [ "${AS_CHAOS_NODE_LOSS:-0}" != 1 ] || [ "${1:-}" != --stack-is-mine ]; then
	sed -n '2,13s/^# \{0,1\}//p' "$0" >&2
	echo "node-loss: 0 passed, 0 failed"
	exit 0
fi
T=${AS_NODE_LOSS_TIMEOUT:-300}
KC=$(hack/cluster/cluster.sh kubeconfig) || exit 1
STATE=${AS_CLUSTER_DIR:-$PWD/.cache/cluster}
k() { .cache/bin/kubectl --kubeconfig "$KC" "$@"; }
NS=chaos-node-loss
passed=0 failed=0
check() { if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $*" >&2; fi; }

# The real node: the one that is not a kwok node.
node=$(k get nodes -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.metadata.annotations.kwok\.x-k8s\.io/node}{"\n"}{end}' |
	awk '$2 == "" {print $1; exit}')
[ -n "$node" ] || { echo "no real node found" >&2; exit 1; }
# The pod spec of the stack's default template (the runtime image with sandboxd).
spec=$(k get sandboxtemplates -A -o jsonpath='{.items[0].spec.podTemplate.spec}')
[ -n "$spec" ] || { echo "no SandboxTemplate found (make up)" >&2; exit 1; }

k create namespace "$NS" >/dev/null 2>&1 || true
python3 - "$spec" "$node" <<'PY' | k -n "$NS" apply -f - >/dev/null
import json, sys
spec = json.loads(sys.argv[1])
spec["nodeSelector"] = {"kubernetes.io/hostname": sys.argv[2]}
print(json.dumps({"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
                  "metadata": {"name": "node-loss"}, "spec": {"podTemplate": {"spec": spec}}}))
PY

ready() { # want: the Sandbox's Ready status; prints reason and message while waiting
	local want=$1 st i
	for ((i = 0; i < T; i++)); do
		st=$(k -n "$NS" get sandbox node-loss -o jsonpath='{range .status.conditions[?(@.type=="Ready")]}{.status}{" "}{.reason}{" "}{.message}{end}' 2>/dev/null)
		if [ "${st%% *}" = "$want" ] && [ -n "$(awk '{print $2}' <<<"$st")" ]; then
			echo "   Ready=$st (after ${i}s)"
			return 0
		fi
		sleep 1
	done
	echo "   Sandbox not Ready=$want after ${T}s: $st" >&2
	return 1
}

echo "== Sandbox on node $node"
check ready True
echo "== stopping the kubelet"
pid=$(cat "$STATE/pids/kubelet.pid")
kill -TERM "$pid"
check ready False
echo "== restarting the kubelet"
hack/cluster/cluster.sh up >/dev/null
check ready True
k delete namespace "$NS" --wait=false >/dev/null
echo "node-loss: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
