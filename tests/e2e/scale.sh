#!/usr/bin/env bash
# Scale on the stack of `make up`: N Sandboxes (default 1000) on simulated kwok nodes all
# become Ready through the real controller; the controller's RSS and CPU seconds are
# reported (from /proc of its process: hack/stack.sh pid controller). Adds kwok nodes when
# there are none. Prints "N passed, N failed"; exits non-zero on failure.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
N=${AS_SCALE_SANDBOXES:-1000}
NS=as-scale-$$
stack_kubeconfig || exit 1

pid=$("$STACK" pid controller 2>/dev/null)
[ -n "$pid" ] && [ -d "/proc/$pid" ] || { echo "the stack's controller is not running (make up)" >&2; exit 1; }
# usage: RSS (MiB) and CPU seconds (utime + stime) of the controller
usage() {
	local rss ticks hz
	rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
	ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	hz=$(getconf CLK_TCK)
	echo "$((rss / 1024)) $(awk -v t="$ticks" -v h="$hz" 'BEGIN {printf "%.1f", t / h}')"
}

[ -n "$(k get nodes -l type=kwok -o name)" ] || "$ROOT/hack/cluster/cluster.sh" up --kwok-nodes 5 >/dev/null 2>&1
k create namespace "$NS" >/dev/null
trap 'k delete namespace "$NS" --wait=false >/dev/null 2>&1' EXIT
read -r rss0 cpu0 < <(usage)
start=$SECONDS
for ((i = 0; i < N; i++)); do
	cat <<YAML
---
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata: {name: s-$i, namespace: $NS}
spec:
  podTemplate:
    spec:
      nodeSelector: {type: kwok}
      tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
      containers: [{name: main, image: $RUNTIME_IMAGE}]
YAML
done | k apply --server-side -f - >/dev/null
ready() {
	k get sandboxes -n "$NS" -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
		grep -c '^True$'
}
n=0
while [ $((SECONDS - start)) -lt 600 ]; do
	n=$(ready)
	[ "$n" -ge "$N" ] && break
	sleep 2
done
secs=$((SECONDS - start))
read -r rss1 cpu1 < <(usage)
if [ "$n" -ge "$N" ]; then ok "$N sandboxes on kwok nodes all Ready in ${secs}s"; else
	not_ok "$N sandboxes Ready" "$n Ready after ${secs}s"
fi
echo "# controller RSS ${rss0} MiB before, ${rss1} MiB with $N more sandboxes; CPU $(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN {printf "%.1f", b - a}') s for them"
real=$(k get pods -n "$NS" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -vc '^kwok-node-')
[ "$real" = 0 ] && ok "none on the real node" || not_ok "pods on the real node" "$real"
[ "$rss1" -le 64 ] && ok "controller RSS within 64 MiB ($rss1 MiB)" || not_ok "controller RSS over 64 MiB" "$rss1 MiB"
summary scale
