#!/usr/bin/env bash
# Local single-node Kubernetes cluster on this machine (no Docker).
#
# Usage: hack/cluster/cluster.sh COMMAND [OPTIONS]
#
#   up [--kwok-nodes N]   start the cluster (idempotent: a no-op when healthy; cleans up
#                         leftovers of a killed run). With --kwok-nodes N, keep exactly N
#                         simulated kwok nodes (scale mode); without it the kwok nodes
#                         of an earlier run are kept. Prints how to use the kubeconfig.
#   down [--purge]        stop every process, unmount, remove the bridge and our iptables
#                         chains. Keeps certificates, etcd data, images and the guard
#                         routes (docs/local-cluster.md) unless --purge.
#   status                state of each component and node; exit 0 only when healthy
#   kubeconfig [--raw]    print the admin kubeconfig path (or its contents)
#   kubectl ARGS...       run kubectl against the cluster
#   images                rebuild (cached) and import the local images into the running
#                         cluster's containerd when they changed (e.g. a new sandboxd in
#                         $AS_RUNTIME_EXTRA_DIR)
#   ctr ARGS...           run ctr against the cluster's containerd (namespace k8s.io)
#   socket | state-dir    print the containerd socket path / the state directory
#   env                   print `export KUBECONFIG=...` (eval "$(... env)")
#
# State lives in $AS_CLUSTER_DIR (default .cache/cluster); admin kubeconfig:
# $AS_CLUSTER_DIR/kubeconfig. API server: https://10.244.0.1:26443. See docs/local-cluster.md.
# AS_KCM_EXTRA_ARGS: extra kube-controller-manager flags (split into words), e.g.
# "--node-monitor-grace-period=20s"; remembered, so a later `up` without it keeps them;
# `up` with other ones (AS_KCM_EXTRA_ARGS= for none) restarts only the controller manager.
source "$(dirname "$0")/lib.sh"
source "$ROOT/hack/cluster/pki.sh"
source "$ROOT/hack/cluster/net.sh"
source "$ROOT/hack/cluster/components.sh"
source "$ROOT/hack/cluster/kwok.sh"
source "$ROOT/hack/cluster/ksm.sh"
source "$ROOT/images/lib.sh" # oci_import_changed

CNI_BIN_DIR=${AS_CNI_BIN_DIR:-/usr/lib/cni}

usage() { sed -n '2,27s/^# \{0,1\}//p' "$0"; }

prereqs() {
	[ "$(id -u)" = 0 ] || die "the local cluster needs root (bridge, iptables, mounts, containerd)"
	local c
	for c in containerd ctr runc ip iptables ss openssl curl jq setsid tar; do
		need "$c" "apt-get install containerd runc iproute2 iptables openssl curl jq util-linux tar"
	done
	for c in bridge host-local loopback; do
		[ -x "$CNI_BIN_DIR/$c" ] || die "CNI plugin $CNI_BIN_DIR/$c missing: apt-get install containernetworking-plugins"
	done
	[ -d /sys/fs/cgroup/memory ] || [ -f /sys/fs/cgroup/cgroup.controllers ] ||
		die "no cgroup hierarchy under /sys/fs/cgroup"
	local missing=()
	for c in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
		[ -x "$BIN/$c" ] || missing+=("$c")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		pgrep -f hack/build-k8s.sh >/dev/null && die "hack/build-k8s.sh is running: wait for it, then retry"
		log "building ${missing[*]} (hack/build-k8s.sh)"
		"$ROOT/hack/build-k8s.sh" "${missing[@]}" || die "hack/build-k8s.sh failed"
	fi
	local sock_len=${#CONTAINERD_SOCK}
	[ "$sock_len" -lt 100 ] || die "state dir path too long for a unix socket: $CONTAINERD_SOCK"
}

# images_up: builds (cached) and imports the local images into our containerd.
# The runtime image's extra files (sandboxd) are remembered in $STATE/runtime-extra-dir,
# so a later `up` or `images` without $AS_RUNTIME_EXTRA_DIR (e.g. --kwok-nodes from a
# benchmark) does not replace the running stack's image with one lacking sandboxd.
images_up() {
	local a
	if [ -n "${AS_RUNTIME_EXTRA_DIR:-}" ]; then
		printf '%s\n' "$AS_RUNTIME_EXTRA_DIR" >"$STATE/runtime-extra-dir"
	elif [ -s "$STATE/runtime-extra-dir" ] && [ -d "$(cat "$STATE/runtime-extra-dir")" ]; then
		AS_RUNTIME_EXTRA_DIR=$(cat "$STATE/runtime-extra-dir")
		export AS_RUNTIME_EXTRA_DIR
	fi
	for a in pause runtime runtime-sci; do
		a=$("$ROOT/images/build.sh" "$a") || die "image build failed: $a"
		oci_import_changed "$CONTAINERD_SOCK" "$a" >/dev/null
	done
}

node_ready() {
	kubectl_ get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null |
		grep -qx True
}

running_count() {
	local c n=0
	for c in "${COMPONENTS[@]}"; do pid_of "$c" >/dev/null && n=$((n + 1)); done
	echo "$n"
}

healthy() {
	local c
	for c in "${COMPONENTS[@]}"; do
		pid_of "$c" >/dev/null && "ready_$c" >/dev/null 2>&1 || return 1
	done
	ip link show "$BRIDGE" >/dev/null 2>&1 && node_ready
}

# Address and port each component listens on (checked before starting it).
component_port() {
	case $1 in
	etcd) echo "127.0.0.1 $ETCD_PORT 127.0.0.1 $ETCD_PEER_PORT" ;;
	kube-apiserver) echo "$BRIDGE_IP $API_PORT" ;;
	kube-controller-manager) echo "127.0.0.1 $KCM_PORT" ;;
	kube-scheduler) echo "127.0.0.1 $SCHED_PORT" ;;
	kubelet) echo "$BRIDGE_IP $KUBELET_PORT 127.0.0.1 $KUBELET_HEALTHZ_PORT" ;;
	kube-proxy) echo "127.0.0.1 $PROXY_HEALTHZ_PORT 127.0.0.1 $PROXY_METRICS_PORT" ;;
	esac
}

start_component() {
	local c=$1 secs=$2 a p
	if ! pid_of "$c" >/dev/null; then
		# shellcheck disable=SC2046 # word splitting intended: "addr port" pairs
		set -- $(component_port "$c")
		while [ $# -ge 2 ]; do
			a=$1 p=$2
			shift 2
			port_free "$a" "$p" || die "$c: port $a:$p is taken by another process: $(ss -Hltnp "( sport = :$p )" | head -1)"
		done
	fi
	"start_$c"
	wait_for "$c" "$secs" "$LOGS/$c.log" "ready_$c"
}

cmd_up() {
	local kwok_n=""
	while [ $# -gt 0 ]; do
		case $1 in
		--kwok-nodes) kwok_n=${2:?--kwok-nodes needs a number}; shift 2 ;;
		--kwok-nodes=*) kwok_n=${1#*=}; shift ;;
		*) die "up: unknown option $1" ;;
		esac
	done
	[ -z "$kwok_n" ] || [[ $kwok_n =~ ^[0-9]+$ ]] || die "--kwok-nodes needs a number"
	prereqs
	local start=$SECONDS
	mkdir -p "$STATE"
	take_machine
	if healthy; then
		log "cluster already up"
		! kcm_args_changed || start_component kube-controller-manager 60
	else
		if [ "$(running_count)" = 0 ]; then
			log "cleaning up leftovers of an earlier run"
			teardown
		fi
		log "starting the cluster (state: $STATE)"
		net_up
		pki_all
		start_component containerd 30
		images_up
		start_component etcd 60
		start_component kube-apiserver 120
		start_component kube-controller-manager 60
		start_component kube-scheduler 60
		start_component kubelet 60
		start_component kube-proxy 60
		wait_for "node $NODE_NAME Ready" 120 "$LOGS/kubelet.log" node_ready
	fi
	ksm_up
	if [ -n "$kwok_n" ]; then
		kwok_nodes "$kwok_n"
	elif [ -n "$(kubectl_ get nodes -l type=kwok -o name 2>/dev/null)" ]; then
		start_kwok
	fi
	log "cluster up in $((SECONDS - start))s"
	cat >&2 <<EOT
Use it:
  export KUBECONFIG=$KUBECONFIG_PATH
  $BIN/kubectl get nodes
or: hack/cluster/cluster.sh kubectl get nodes
EOT
}

# The bridge, ports, iptables chains and cgroup root are machine-wide, so one cluster runs
# per machine. OWNER records the state dir of the cluster that holds them; `up` from
# another checkout (CI in a fresh clone, say) first tears that one down.
OWNER=/run/agent-sandbox/cluster-owner

take_machine() {
	local other
	other=$(cat "$OWNER" 2>/dev/null) || other=""
	if [ -n "$other" ] && [ "$other" != "$STATE" ]; then
		log "tearing down the cluster of another checkout ($other)"
		AS_CLUSTER_DIR=$other "$0" down || log "warning: teardown of $other failed"
	fi
	mkdir -p "${OWNER%/*}"
	echo "$STATE" >"$OWNER"
}

# unmount_all: every mount under the state dir, deepest first, lazily.
unmount_all() {
	local m
	while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done < <(awk -v s="$STATE/" 'index($5, s) == 1 {print $5}' /proc/self/mountinfo | sort -r)
}

# kill_pods: kills every process in our kubelet's cgroup root (containers and pause).
kill_pods() {
	local f pid
	for f in /sys/fs/cgroup/pids/"$CGROUP_ROOT" /sys/fs/cgroup/memory/"$CGROUP_ROOT"; do
		[ -d "$f" ] || continue
		# Cgroups vanish while their pods die: find then fails, which under pipefail
		# would end `down` silently half-way.
		{ find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null || true; } | while read -r pid; do
			kill -KILL "$pid" 2>/dev/null || true
		done
	done
}

# kubelet_chains_down: the chains our kubelet creates (kube-proxy --cleanup leaves them).
kubelet_chains_down() {
	local c t rule
	for t in mangle nat filter; do
		for c in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-PROXY-CANARY KUBE-IPTABLES-HINT; do
			{ iptables -w -t "$t" -S 2>/dev/null || true; } | { grep -- "-j $c\$" || true; } |
				sed 's/^-A /-D /' | while read -r rule; do
					# shellcheck disable=SC2086
					iptables -w -t "$t" $rule 2>/dev/null || true
				done
			iptables -w -t "$t" -F "$c" 2>/dev/null || true
			iptables -w -t "$t" -X "$c" 2>/dev/null || true
		done
	done
}

cgroup_root_down() {
	local d
	for d in /sys/fs/cgroup/*/"$CGROUP_ROOT"; do
		if [ -d "$d" ]; then find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
	done
}

# teardown: stops everything we run and removes host-level state (exact, idempotent).
teardown() {
	local c i pid
	stop_daemon kwok
	for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
		c=${COMPONENTS[i]}
		case $c in
		containerd) kill_pods ;;
		esac
		stop_daemon "$c"
	done
	kill_pods
	for pid in $(our_pids); do stop_pid "$pid" 20; done
	if [ -x "$BIN/kube-proxy" ]; then "$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true; fi
	kubelet_chains_down
	unmount_all
	net_down
	cgroup_root_down
	ksm_down
	rm -rf "$RUN" "$PIDS"
	rmdir /run/containerd/s /run/containerd 2>/dev/null || true # shim sockets' dir, if empty
	find /var/log/containers -maxdepth 1 -lname "$STATE/*" -delete 2>/dev/null || true
}

cmd_down() {
	local purge=no
	[ "${1:-}" != --purge ] || purge=yes
	[ "$(id -u)" = 0 ] || die "down needs root"
	teardown
	if [ $purge = yes ]; then
		net_guard purge
		rm -rf "$STATE"
		log "cluster down; state removed"
	else
		log "cluster down (state kept in $STATE; --purge removes it)"
	fi
}

cmd_status() {
	local c pid ok=0 st
	for c in "${COMPONENTS[@]}" kwok; do
		if pid=$(pid_of "$c"); then
			st="running (pid $pid)"
			if [ "$c" != kwok ] && ! "ready_$c" >/dev/null 2>&1; then st="$st, not ready"; ok=1; fi
		else
			st="stopped"
			[ "$c" = kwok ] || ok=1
		fi
		printf '%-24s %s\n' "$c" "$st"
	done
	if api_ok /readyz >/dev/null 2>&1; then
		echo "API server: $API_SERVER  kubeconfig: $KUBECONFIG_PATH"
		kubectl_ get nodes -l '!type' 2>/dev/null
		printf 'kwok nodes: %s\n' "$(kubectl_ get nodes -l type=kwok --no-headers 2>/dev/null | wc -l)"
		node_ready || ok=1
	fi
	return $ok
}

cmd=${1:-}
[ $# -eq 0 ] || shift
case $cmd in
up) cmd_up "$@" ;;
down) cmd_down "$@" ;;
status) cmd_status ;;
kubeconfig)
	[ -s "$KUBECONFIG_PATH" ] || die "no kubeconfig yet: run hack/cluster/cluster.sh up"
	if [ "${1:-}" = --raw ]; then cat "$KUBECONFIG_PATH"; else echo "$KUBECONFIG_PATH"; fi
	;;
kubectl) kubectl_ "$@" ;;
images) images_up ;;
ctr) ctr --address "$CONTAINERD_SOCK" -n k8s.io "$@" ;;
socket) echo "$CONTAINERD_SOCK" ;;
state-dir) echo "$STATE" ;;
env) echo "export KUBECONFIG=$KUBECONFIG_PATH" ;;
-h | --help | help) usage ;;
*) usage >&2; exit 2 ;;
esac
