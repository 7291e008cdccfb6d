# Scale mode: simulated nodes managed by kwok. Source it after lib.sh.
# shellcheck shell=bash
# kwok manages only nodes annotated kwok.x-k8s.io/node=fake; they are labelled
# type=kwok and tainted kwok.x-k8s.io/node=fake:NoSchedule, so only pods that
# tolerate the taint (and select the label) land there. Their pod IPs come from
# $KWOK_CIDR, which carries no traffic (net.sh rejects it).

KWOK_NODE_PODS=${AS_KWOK_NODE_PODS:-250}

start_kwok() {
	pid_of kwok >/dev/null && return 0
	"$ROOT/hack/cluster/build-kwok.sh" || die "kwok build failed (see above)"
	start_daemon kwok "$BIN/kwok" --kubeconfig "$CONF/kwok.kubeconfig" \
		--config "$BIN/kwok-stages.yaml" \
		--manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
		--cidr "$KWOK_CIDR" --node-ip "$BRIDGE_IP" --node-lease-duration-seconds 40
}

kwok_node_yaml() { # kwok_node_yaml NAME
	cat <<YAML
apiVersion: v1
kind: Node
metadata:
  name: $1
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/hostname: $1
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kubernetes.io/role: agent
spec:
  taints:
  - key: kwok.x-k8s.io/node
    value: fake
    effect: NoSchedule
status:
  allocatable: {cpu: "64", memory: 256Gi, pods: "$KWOK_NODE_PODS"}
  capacity: {cpu: "64", memory: 256Gi, pods: "$KWOK_NODE_PODS"}
---
YAML
}

# kwok_nodes N: makes exactly N kwok nodes exist (kwok-node-0..N-1) and waits for Ready.
kwok_nodes() {
	local want=$1 i name have=()
	mapfile -t have < <(kubectl_ get nodes -l type=kwok -o name | sed 's#^node/##')
	for name in "${have[@]}"; do
		i=${name#"$KWOK_NODE_PREFIX"}
		if ! [[ $i =~ ^[0-9]+$ ]] || [ "$i" -ge "$want" ]; then
			kubectl_ delete node "$name" --wait=false >/dev/null
		fi
	done
	[ "$want" -gt 0 ] || { stop_daemon kwok; return 0; }
	start_kwok
	for ((i = 0; i < want; i++)); do kwok_node_yaml "$KWOK_NODE_PREFIX$i"; done |
		kubectl_ apply --server-side --force-conflicts -f - >/dev/null || die "cannot create kwok nodes"
	wait_for "$want kwok nodes Ready" 120 "$LOGS/kwok.log" kwok_nodes_ready "$want"
}

kwok_nodes_ready() {
	local n
	n=$(kubectl_ get nodes -l type=kwok --no-headers 2>/dev/null | awk '$2 == "Ready"' | wc -l)
	[ "$n" -ge "$1" ]
}
