#!/usr/bin/env bash
# Tests of the local cluster (hack/cluster/cluster.sh). Needs root; brings the cluster
# up (idempotent) and leaves it up. Prints "N passed, N failed"; exits non-zero on failure.
#
#   tests/cluster/run.sh [--no-kwok] [--recovery] [--down]
#     --no-kwok    skip the scale test (1,000 pods on kwok nodes)
#     --recovery   also SIGKILL every cluster process and check that `up` recovers
#     --down       stop the cluster at the end
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CLUSTER=$ROOT/hack/cluster/cluster.sh
RUNTIME_IMAGE=localhost/agent-sandbox/runtime:dev
KWOK_PODS=${AS_TEST_KWOK_PODS:-1000}
KWOK_NODES=${AS_TEST_KWOK_NODES:-5}
NS=as-cluster-test-$$

opt_kwok=yes opt_recovery=no opt_down=no
for a in "$@"; do
	case $a in
	--no-kwok) opt_kwok=no ;;
	--recovery) opt_recovery=yes ;;
	--down) opt_down=yes ;;
	*) echo "unknown option: $a" >&2; exit 2 ;;
	esac
done

passed=0 failed=0
k() { "$CLUSTER" kubectl "$@"; }
kn() { k -n "$NS" "$@"; }
T0=$SECONDS
ok() {
	passed=$((passed + 1))
	echo "ok   - $1 [$((SECONDS - T0))s]"
}
not_ok() {
	failed=$((failed + 1))
	echo "FAIL - $1${2:+: $2}"
}
# poll SECONDS CMD...: retries CMD every 0.5 s until it succeeds.
poll() {
	local secs=$1 i
	shift
	for ((i = 0; i < secs * 2; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	return 1
}
pod_phase_is() { [ "$(kn get pod "$1" -o jsonpath='{.status.phase}')" = "$2" ]; }
wait_pod_done() { poll "${2:-120}" pod_phase_is "$1" Succeeded; }
component_pids() { cat "$ROOT/.cache/cluster/pids/"*.pid 2>/dev/null | sort | tr '\n' ' '; }
[ -z "${AS_CLUSTER_DIR:-}" ] || component_pids() { cat "$AS_CLUSTER_DIR/pids/"*.pid 2>/dev/null | sort | tr '\n' ' '; }

pod_yaml() { # pod_yaml NAME SHELL_COMMAND [LABEL]
	cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, labels: {app: ${3:-$1}}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: $RUNTIME_IMAGE
    imagePullPolicy: Never
    command: ["sh", "-c", $(printf '%s' "$2" | jq -Rs .)]
YAML
}

test_up() {
	if "$CLUSTER" up >/tmp/as-cluster-up.$$ 2>&1; then ok "cluster up"; else
		not_ok "cluster up" "$(tail -5 /tmp/as-cluster-up.$$)"
		rm -f /tmp/as-cluster-up.$$
		return 1
	fi
	rm -f /tmp/as-cluster-up.$$
	local before after
	before=$(component_pids)
	"$CLUSTER" up >/dev/null 2>&1 || { not_ok "second up succeeds"; return 1; }
	after=$(component_pids)
	if [ -n "$before" ] && [ "$before" = "$after" ]; then ok "second up is a no-op (same processes)"; else
		not_ok "second up is a no-op" "pids before '$before' after '$after'"
	fi
	local kc
	kc=$("$CLUSTER" kubeconfig)
	if [ "$kc" = "${AS_CLUSTER_DIR:-$ROOT/.cache/cluster}/kubeconfig" ] && [ -s "$kc" ]; then
		ok "kubeconfig at the documented path"
	else not_ok "kubeconfig path" "$kc"; fi
	"$CLUSTER" status >/dev/null && ok "status reports healthy" || not_ok "status reports healthy"
}

test_node_ready() {
	local st
	st=$(k get nodes -l '!type' -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
	if [ "$(echo "$st" | grep -c '=True$')" -ge 1 ]; then ok "real node Ready ($st)"; else
		not_ok "real node Ready" "$st"
	fi
}

test_namespace() {
	k create namespace "$NS" >/dev/null || { not_ok "create namespace $NS"; return 1; }
	if poll 60 kn get serviceaccount default; then ok "namespace gets its default service account"; else
		not_ok "default service account in $NS"
		return 1
	fi
}

test_python_pod() {
	pod_yaml py "python3 -c 'print(6*7)'" | kn apply -f - >/dev/null
	if wait_pod_done py 120; then
		local out
		out=$(kn logs py)
		[ "$out" = 42 ] && ok "runtime image pod prints 42" || not_ok "runtime image pod logs" "$out"
	else
		not_ok "runtime image pod completes" "$(kn get pod py -o wide --no-headers; kn get events --no-headers | tail -3)"
	fi
}

test_service() {
	pod_yaml web "mkdir -p /tmp/srv && echo agent-sandbox-hello >/tmp/srv/index.html && cd /tmp/srv && exec python3 -m http.server 8080" web |
		kn apply -f - >/dev/null
	kn create service clusterip web --tcp=80:8080 >/dev/null
	if ! kn wait --for=condition=Ready pod/web --timeout=120s >/dev/null; then
		not_ok "web pod Ready"
		return
	fi
	local ip
	ip=$(kn get service web -o jsonpath='{.spec.clusterIP}')
	pod_yaml client "python3 -c \"import urllib.request; print(urllib.request.urlopen('http://$ip/', timeout=5).read().decode().strip())\"" |
		kn apply -f - >/dev/null
	if wait_pod_done client 120 && [ "$(kn logs client)" = agent-sandbox-hello ]; then
		ok "ClusterIP service $ip reaches the web pod"
	else
		not_ok "ClusterIP service" "$(kn logs client 2>&1 | tail -3)"
	fi
}

test_kubernetes_service() {
	local py="import json, os, ssl, urllib.request
sa = '/var/run/secrets/kubernetes.io/serviceaccount/'
ctx = ssl.create_default_context(cafile=sa + 'ca.crt')
host = os.environ['KUBERNETES_SERVICE_HOST']
req = urllib.request.Request('https://%s/version' % host,
    headers={'Authorization': 'Bearer ' + open(sa + 'token').read()})
print(json.load(urllib.request.urlopen(req, context=ctx, timeout=5))['major'])"
	pod_yaml incluster "echo $(printf '%s' "$py" | base64 -w0) | base64 -d | python3" | kn apply -f - >/dev/null
	if wait_pod_done incluster 120 && [ "$(kn logs incluster)" = 1 ]; then
		ok "in-cluster client reaches the API server through the kubernetes service"
	else
		not_ok "kubernetes service from a pod" "$(kn logs incluster 2>&1 | tail -3)"
	fi
}

test_images() {
	local a1 d1 d2 a sock=${AS_CLUSTER_DIR:-$ROOT/.cache/cluster}/run/containerd/containerd.sock
	a1=$("$ROOT/images/build.sh" pause 2>/dev/null) && d1=$(cat "$a1.digest")
	"$ROOT/images/build.sh" pause >/dev/null 2>&1 && d2=$(cat "$a1.digest")
	if [ -n "${d1:-}" ] && [ "$d1" = "${d2:-}" ]; then ok "pause image archive is reproducible ($d1)"; else
		not_ok "pause image reproducible" "${d1:-} vs ${d2:-}"
	fi
	if a=$("$ROOT/images/build.sh" binaries as-test-echo:dev --entrypoint /usr/local/bin/echo /bin/echo 2>&1) &&
		"$ROOT/images/build.sh" import "$sock" "$a" >/dev/null 2>&1; then
		kn apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: echo}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: localhost/agent-sandbox/as-test-echo:dev, imagePullPolicy: Never, args: [from-scratch-image]}
YAML
		if wait_pod_done echo 120 && [ "$(kn logs echo)" = from-scratch-image ]; then
			ok "binaries image (scratch + shared libraries) runs"
		else not_ok "binaries image pod" "$(kn get pod echo --no-headers 2>&1)"; fi
	else
		not_ok "binaries image build/import" "$a"
	fi
}

rs_and_pods_gone() {
	[ -z "$(kn get rs -l app=gc -o name)" ] && [ -z "$(kn get pods -l app=gc -o name)" ]
}

test_gc() {
	kn apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: gc, labels: {app: gc}}
spec:
  replicas: 2
  selector: {matchLabels: {app: gc}}
  template:
    metadata: {labels: {app: gc}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: main, image: $RUNTIME_IMAGE, imagePullPolicy: Never, command: [sleep, infinity]}
YAML
	if ! kn wait --for=condition=Available deployment/gc --timeout=120s >/dev/null; then
		not_ok "deployment gc available"
		return
	fi
	[ -n "$(kn get rs -l app=gc -o name)" ] || { not_ok "deployment has a ReplicaSet"; return; }
	kn delete deployment gc --wait=false >/dev/null
	if poll 120 rs_and_pods_gone; then ok "deleting a Deployment garbage-collects its ReplicaSet and pods"; else
		not_ok "garbage collection" "$(kn get rs,pods -l app=gc --no-headers 2>&1)"
	fi
}

test_network_rules() {
	local missing=0 spec t parent chain
	for spec in raw:PREROUTING:AS-CLUSTER-PRE mangle:FORWARD:AS-CLUSTER-FWD filter:FORWARD:AS-CLUSTER-FWD \
		filter:OUTPUT:AS-CLUSTER-OUT; do
		IFS=: read -r t parent chain <<<"$spec"
		iptables -w -t "$t" -C "$parent" -j "$chain" 2>/dev/null || missing=$((missing + 1))
	done
	[ "$missing" = 0 ] && ok "isolation chains are hooked" || not_ok "isolation chains" "$missing missing"
	if iptables -w -t nat -S | grep -q 'MASQUERADE.*10.244' || iptables -w -t nat -S POSTROUTING | grep -q CNI-; then
		not_ok "no masquerading of pod traffic" "$(iptables -w -t nat -S | grep -E 'CNI-|10.244' | head -3)"
	else ok "no masquerading of pod traffic (ipMasq false)"; fi
}

ready_count() {
	kn get pods -l app=scale -o json |
		jq '[.items[] | select(.spec.nodeName | startswith("kwok-node-")) |
			select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length'
}
all_ready() { [ "$(ready_count)" -ge "$KWOK_PODS" ]; }

test_kwok() {
	if ! "$CLUSTER" up --kwok-nodes "$KWOK_NODES" >/tmp/as-cluster-kwok.$$ 2>&1; then
		not_ok "up --kwok-nodes $KWOK_NODES" "$(tail -5 /tmp/as-cluster-kwok.$$)"
		rm -f /tmp/as-cluster-kwok.$$
		return
	fi
	rm -f /tmp/as-cluster-kwok.$$
	local n
	n=$(k get nodes -l type=kwok --no-headers | awk '$2 == "Ready"' | wc -l)
	[ "$n" = "$KWOK_NODES" ] && ok "$KWOK_NODES kwok nodes Ready" || not_ok "kwok nodes Ready" "$n"
	if k get nodes -l type=kwok -o jsonpath='{.items[0].spec.taints[0].key}' | grep -qx kwok.x-k8s.io/node; then
		ok "kwok nodes are tainted"
	else not_ok "kwok nodes are tainted"; fi
	kn apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: scale}
spec:
  replicas: $KWOK_PODS
  selector: {matchLabels: {app: scale}}
  template:
    metadata: {labels: {app: scale}}
    spec:
      nodeSelector: {type: kwok}
      tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
      containers: [{name: main, image: $RUNTIME_IMAGE, imagePullPolicy: Never}]
YAML
	if poll 300 all_ready; then ok "$KWOK_PODS pods on kwok nodes all Ready"; else
		not_ok "$KWOK_PODS kwok pods Ready" "$(ready_count) Ready"
	fi
	local real
	real=$(kn get pods -l app=scale -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -vc '^kwok-node-')
	[ "$real" = 0 ] && ok "scale pods stay off the real node" || not_ok "scale pods on the real node" "$real"
	kn delete deployment scale --wait=false >/dev/null
}

test_recovery() {
	local pid pids
	pids=$(component_pids)
	for pid in $pids; do kill -KILL "$pid" 2>/dev/null; done
	if "$CLUSTER" up >/dev/null 2>&1 && poll 120 test_node_ready_quiet; then
		ok "up recovers after every process was killed"
	else not_ok "recovery after kill -9"; fi
}
test_node_ready_quiet() { k get nodes -l '!type' --no-headers | awk '$2 == "Ready"' | grep -q .; }

main() {
	[ "$(id -u)" = 0 ] || { echo "tests/cluster/run.sh needs root"; echo "0 passed, 1 failed"; exit 1; }
	if test_up; then
		test_node_ready
		test_network_rules
		if test_namespace; then
			test_python_pod
			test_service
			test_kubernetes_service
			test_gc
			test_images
			[ $opt_kwok = no ] || test_kwok
			k delete namespace "$NS" --wait=false >/dev/null
		fi
		[ $opt_recovery = no ] || test_recovery
	fi
	[ $opt_down = no ] || "$CLUSTER" down >/dev/null 2>&1
	echo "$passed passed, $failed failed"
	[ "$failed" = 0 ]
}
main
