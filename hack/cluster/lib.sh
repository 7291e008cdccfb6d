# Settings and helpers of the local cluster (hack/cluster/cluster.sh). Source it.
# shellcheck shell=bash disable=SC2034 # settings are used by the files that source this
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# State: everything the cluster writes lives here (pki, configs, logs, pids, etcd,
# containerd, kubelet). Independent of hack/apiserver.sh (.cache/apiserver).
STATE=${AS_CLUSTER_DIR:-$CACHE_DIR/cluster}
case $STATE in /*) ;; *) STATE=$PWD/$STATE ;; esac
BIN=$CACHE_DIR/bin
PKI=$STATE/pki
CONF=$STATE/config
LOGS=$STATE/logs
PIDS=$STATE/pids
RUN=$STATE/run
KUBECONFIG_PATH=$STATE/kubeconfig

# Network: a bridge of our own; nothing leaves it (see net_up).
BRIDGE=as-br0
BRIDGE_IP=10.244.0.1
POD_CIDR=10.244.0.0/24
SVC_CIDR=10.96.0.0/16
SVC_IP=10.96.0.1
KWOK_CIDR=10.245.0.0/16
CLUSTER_DOMAIN=cluster.local

# Ports (all on 127.0.0.1 except the API server and kubelet, on the bridge address).
# A block of its own (21xxx, 26443) so that hack/apiserver.sh (12379, 16443) and this
# cluster run side by side.
ETCD_PORT=21379
ETCD_PEER_PORT=21380
API_PORT=26443
KCM_PORT=21257
SCHED_PORT=21259
KUBELET_PORT=10250
KUBELET_HEALTHZ_PORT=21248
PROXY_HEALTHZ_PORT=21256
PROXY_METRICS_PORT=21249
API_SERVER=https://$BRIDGE_IP:$API_PORT

NODE_NAME=${AS_CLUSTER_NODE_NAME:-as-node}
CGROUP_ROOT=as-cluster
CONTAINERD_SOCK=$RUN/containerd/containerd.sock
KWOK_NODE_PREFIX=kwok-node-

# Processes in start order; stopped in reverse.
COMPONENTS=(containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)

kubectl_() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_PATH" "$@"; }

pid_of() { # pid_of NAME: pid of a running component started by us, or fails
	local f=$PIDS/$1.pid pid
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	[ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$STATE/" || return 1
	echo "$pid"
}

# start_daemon NAME CMD...: runs CMD in its own session, logs to $LOGS/NAME.log.
start_daemon() {
	local name=$1
	shift
	mkdir -p "$LOGS" "$PIDS"
	echo "=== $(date -Is) start: $*" >>"$LOGS/$name.log"
	setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
	echo $! >"$PIDS/$name.pid"
}

# stop_pid PID [TIMEOUT_DECISECONDS]: SIGTERM, then SIGKILL after the timeout.
stop_pid() {
	local pid=$1 n=${2:-50}
	kill -TERM "$pid" 2>/dev/null || return 0
	while [ "$n" -gt 0 ] && alive "$pid"; do
		sleep 0.1
		n=$((n - 1))
	done
	kill -KILL "$pid" 2>/dev/null || true
}

# alive PID: the process exists and is not a zombie waiting for its parent.
alive() {
	local st
	st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1) || return 1
	[ -n "$st" ] && [ "$st" != Z ]
}

stop_daemon() {
	local pid
	pid=$(pid_of "$1") && stop_pid "$pid" "${2:-50}"
	rm -f "$PIDS/$1.pid"
}

# our_pids: processes of our binaries whose command line names our state dir
# (covers runs whose pid files are gone).
our_pids() {
	local p exe cmd
	for p in /proc/[0-9]*; do
		exe=$(readlink "$p/exe" 2>/dev/null) || continue
		case ${exe##*/} in
		containerd | containerd-shim* | etcd | kube-* | kubelet | kwok) ;;
		*) continue ;;
		esac
		cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
		case $cmd in *"$STATE/"*) echo "${p#/proc/}" ;; esac
	done
}

# wait_for DESC SECONDS LOG CMD...: polls CMD every 0.2 s until it succeeds.
wait_for() {
	local desc=$1 secs=$2 logf=$3 i
	shift 3
	for ((i = 0; i < secs * 5; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	[ -z "$logf" ] || { echo "--- last lines of $logf:" >&2; tail -25 "$logf" >&2; }
	die "timed out after ${secs}s waiting for $desc"
}

http_ok() { curl -sf --max-time 2 "$@"; }
api_ok() { # api_ok PATH: GET on the API server with the admin certificate
	curl -sf --max-time 2 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" \
		--key "$PKI/admin.key" "$API_SERVER$1"
}

# port_free ADDR PORT: fails when something listens on ADDR:PORT (or on any address).
port_free() {
	! ss -Hltn "( sport = :$2 )" 2>/dev/null | awk '{print $4}' | grep -qE "^($1|0\.0\.0\.0|\*|\[::\]):$2\$"
}
