#!/usr/bin/env bash
# The whole local stack on the local cluster: what `make up` starts.
#
#   hack/stack.sh up [--host] | down [--purge] | status | router-url | router-token |
#                 kubeconfig | pid controller|router | logs controller|router
#
# up           build (release preset: controller, router, sandboxd, kubectl-sandbox), bring
#              up the local cluster (hack/cluster/cluster.sh) with the sandbox runtime image
#              carrying sandboxd, the default StorageClass "standard" (local-path-provisioner,
#              config/local/storage.yaml), then install.yaml as on any cluster: CRDs, RBAC,
#              the controller and router Deployments in agent-sandbox-system (one router
#              replica on this one-node cluster) and the Service sandbox-router-svc:8080,
#              plus a namespace router in "default" (config/router-namespace); then the
#              default SandboxTemplate "python" and SandboxWarmPool "python-pool"
#              (config/local/). Prints how to use it. Idempotent: a second run only rolls
#              what was rebuilt.
# up --host    development mode: the controller and router run as host processes from
#              build/release (logs in $STACK_DIR), the in-cluster Deployments are scaled to
#              0. The mode is remembered until the next `up`.
# down         stop the host processes (if any), then the cluster (--purge: remove state)
# status       what runs
# router-url   the router's base URL (in-cluster: http://<sandbox-router-svc ClusterIP>:8080,
#              reachable from this host; --host: http://127.0.0.1:28080)
# router-token a bearer token of the local user "sandbox-user" (sandboxes of "default")
# kubeconfig   the admin kubeconfig path
# pid NAME     host pid of the running controller (the Lease holder) or router process
# logs NAME    the controller's or router's log
source "$(dirname "$0")/lib.sh"
source "$ROOT/images/lib.sh"

STACK_DIR=${AS_STACK_DIR:-$CACHE_DIR/stack}
ROUTER_ADDR=${AS_ROUTER_ADDR:-127.0.0.1:28080}
ROUTER_HEALTH=${AS_ROUTER_HEALTH_ADDR:-127.0.0.1:28081}
CTRL_METRICS=${AS_CONTROLLER_METRICS_ADDR:-127.0.0.1:28090}
CTRL_HEALTH=${AS_CONTROLLER_HEALTH_ADDR:-127.0.0.1:28091}
RELEASE=$ROOT/build/release
CLUSTER=$ROOT/hack/cluster/cluster.sh
SYS_NS=agent-sandbox-system
MODE_FILE=$STACK_DIR/mode
# The namespace router for clients that look for sandbox-router-svc in the sandbox's
# namespace (config/router-namespace): "default", where config/local puts the pool.
NS_ROUTER_NS=default

usage() { sed -n '2,27s/^# \{0,1\}//p' "$0" >&2; exit 2; }

kubeconfig() { "$CLUSTER" kubeconfig; }
kctl() { "$CACHE_DIR/bin/kubectl" --kubeconfig "$(kubeconfig)" "$@"; }

# pid_alive NAME: the process recorded for NAME runs the binary we recorded.
pid_alive() {
	local pid
	pid=$(cat "$STACK_DIR/$1.pid" 2>/dev/null) || return 1
	[ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] &&
		tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$RELEASE/$1"
}

stop_proc() { # NAME
	local pid i
	pid=$(cat "$STACK_DIR/$1.pid" 2>/dev/null) || return 0
	if pid_alive "$1"; then
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 1 100); do
			[ -d "/proc/$pid" ] || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$STACK_DIR/$1.pid" "$STACK_DIR/$1.sum"
}

# free_ports NAME ARGS...: a process of ours still listening on an address given in ARGS
# (left by another checkout or a lost pid file) is stopped; anything else is an error.
free_ports() {
	local name=$1 a port pid exe
	shift
	for a in "$@"; do
		[[ $a =~ ^127\.0\.0\.1:([0-9]+)$ ]] || continue
		port=${BASH_REMATCH[1]}
		for pid in $(ss -Hltnp "( sport = :$port )" 2>/dev/null | grep -oE 'pid=[0-9]+' | cut -d= -f2 | sort -u); do
			exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || continue
			exe=${exe% (deleted)} # the binary was rebuilt since it started
			case ${exe##*/} in
			agent-sandbox-controller | sandbox-router)
				log "stopping a stale ${exe##*/} (pid $pid) on port $port"
				kill -KILL "$pid" 2>/dev/null || true
				while [ -d "/proc/$pid" ]; do sleep 0.05; done
				;;
			*) die "$name: port $port is taken by $exe (pid $pid)" ;;
			esac
		done
	done
}

# start_proc NAME ARGS...: (re)starts build/release/NAME unless the same binary already
# runs with the same arguments.
start_proc() {
	local name=$1 sum
	shift
	sum=$( (sha256sum "$RELEASE/$name" | cut -c1-16; printf '%s\n' "$@") | sha256sum | cut -c1-16)
	if pid_alive "$name" && [ "$(cat "$STACK_DIR/$name.sum" 2>/dev/null)" = "$sum" ]; then
		return 0
	fi
	stop_proc "$name"
	free_ports "$name" "$@"
	log "starting $name"
	setsid "$RELEASE/$name" "$@" >>"$STACK_DIR/$name.log" 2>&1 </dev/null &
	echo $! >"$STACK_DIR/$name.pid"
	echo "$sum" >"$STACK_DIR/$name.sum"
}

wait_http() { # URL NAME
	local i
	for i in $(seq 1 100); do
		curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
		sleep 0.2
	done
	tail -n 20 "$STACK_DIR/$2.log" >&2
	die "$2 did not become ready at $1 (log: $STACK_DIR/$2.log)"
}

build() {
	log "building (release preset)"
	cmake --preset release >/dev/null
	cmake --build --preset release --target agent-sandbox-controller sandbox-router sandboxd \
		kubectl-sandbox >/dev/null || die "build failed: cmake --build --preset release"
	# The runtime image carries sandboxd (static) at /usr/local/bin/sandboxd.
	local extra=$STACK_DIR/runtime-extra
	mkdir -p "$extra/usr/local/bin"
	cmp -s "$RELEASE/sandboxd" "$extra/usr/local/bin/sandboxd" ||
		install -m 0755 "$RELEASE/sandboxd" "$extra/usr/local/bin/sandboxd"
	# ... and the kernel driver of code contexts (docs/code-interpreter.md).
	mkdir -p "$extra/usr/local/lib/agent-sandbox"
	cmp -s "$ROOT/src/sandboxd/driver/kernel.py" "$extra/usr/local/lib/agent-sandbox/kernel.py" ||
		install -m 0644 "$ROOT/src/sandboxd/driver/kernel.py" "$extra/usr/local/lib/agent-sandbox/kernel.py"
	export AS_RUNTIME_EXTRA_DIR=$extra
}

mode() { cat "$MODE_FILE" 2>/dev/null || echo cluster; }

# runtime_digests: the digests of the runtime images in the cluster's containerd.
runtime_digests() {
	"$CLUSTER" ctr images ls 2>/dev/null | awk '$1 ~ /\/runtime(-sci)?:/ {print $1, $3}' | sort
}

# recycle_pool_members: after a runtime image changed under the same tag, the warm pools'
# unclaimed members still run the old one (a pod keeps its image); delete them so the
# pools refill with the new image. Claimed sandboxes are left alone.
recycle_pool_members() {
	local names
	names=$(kctl get sandboxes -A -o json | jq -r '.items[] |
		select(any(.metadata.ownerReferences[]?; .kind == "SandboxWarmPool" and .controller)) |
		"\(.metadata.namespace)/\(.metadata.name)"')
	[ -n "$names" ] || return 0
	log "runtime image changed: replacing $(wc -l <<<"$names") unclaimed warm-pool sandboxes"
	while IFS=/ read -r ns name; do
		kctl -n "$ns" delete sandbox "$name" --wait=false >/dev/null 2>&1 || true
	done <<<"$names"
	sleep 2 # the pools see the deletions before readyReplicas is read
}

install_crds() {
	log "installing the CRDs"
	kctl apply --server-side --force-conflicts --field-manager=agent-sandbox-up \
		-f "$ROOT/api/crds/" >/dev/null
	"$ROOT/hack/wait-crds.sh" "$CACHE_DIR/bin/kubectl" --kubeconfig "$(kubeconfig)"
}

install_defaults() {
	log "installing the default templates and pool"
	kctl apply --server-side --force-conflicts --field-manager=agent-sandbox-up \
		-f "$ROOT/config/local/router-user.yaml" -f "$ROOT/config/local/defaults.yaml" \
		-f "$ROOT/config/local/sci.yaml" >/dev/null
}

# install_storage: local-path-provisioner (built from the Go module proxy) as the default
# StorageClass "standard"; volumes live under the cluster's state dir.
install_storage() {
	local archive sock dir
	archive=$("$ROOT/hack/cluster/build-local-path.sh") || die "local-path-provisioner build failed"
	sock=$("$CLUSTER" socket)
	oci_import_changed "$sock" "$archive" >/dev/null
	dir=$("$CLUSTER" state-dir)/local-path
	mkdir -p "$dir"
	log "installing the default StorageClass (local-path-provisioner)"
	sed -e "s|@PROVISIONER_IMAGE@|$IMAGE_PREFIX/local-path-provisioner:${LOCAL_PATH_VERSION:-v0.0.30}|g" \
		-e "s|@HELPER_IMAGE@|$("$ROOT/images/build.sh" ref runtime)|g" \
		-e "s|@LOCAL_PATH_DIR@|$dir|g" "$ROOT/config/local/storage.yaml" |
		kctl apply --server-side --force-conflicts --field-manager=agent-sandbox-up -f - >/dev/null
}

# install_incluster: install.yaml (controller and router Deployments), one router replica,
# and the namespace router; a rebuilt image rolls its Deployment (the image digest is a
# pod-template annotation).
install_incluster() {
	local sock refs ctrl_digest router_digest
	sock=$("$CLUSTER" socket)
	refs=$("$ROOT/images/components.sh" import "$sock") || die "controller/router images failed"
	ctrl_digest=$("$CLUSTER" ctr images ls "name==$(sed -n 1p <<<"$refs")" | awk 'NR == 2 {print $3}')
	router_digest=$("$CLUSTER" ctr images ls "name==$(sed -n 2p <<<"$refs")" | awk 'NR == 2 {print $3}')
	log "installing install.yaml (controller and router Deployments in $SYS_NS)"
	{
		python3 "$ROOT/hack/cluster/local-install.py" "$ROOT/install.yaml" \
			"$ctrl_digest" "$router_digest"
		echo "---"
		sed "s/@NAMESPACE@/$NS_ROUTER_NS/g" "$ROOT/config/router-namespace/router.yaml" |
			python3 "$ROOT/hack/cluster/local-install.py" - "$ctrl_digest" "$router_digest"
	} | kctl apply --server-side --force-conflicts --field-manager=agent-sandbox-up -f - >/dev/null ||
		die "kubectl apply of install.yaml failed"
	kctl -n "$SYS_NS" rollout status deployment/agent-sandbox-controller --timeout=180s >/dev/null ||
		die "the controller Deployment did not roll out (kubectl -n $SYS_NS describe pods)"
	kctl -n "$SYS_NS" rollout status deployment/sandbox-router --timeout=180s >/dev/null ||
		die "the router Deployment did not roll out (kubectl -n $SYS_NS describe pods)"
	kctl -n "$NS_ROUTER_NS" rollout status deployment/sandbox-router --timeout=180s >/dev/null ||
		die "the namespace router in $NS_ROUTER_NS did not roll out"
}

# scale_incluster N: the in-cluster controller and routers (when installed) to N replicas.
scale_incluster() {
	local ns
	for ns in "$SYS_NS" "$NS_ROUTER_NS"; do
		kctl -n "$ns" get deployment -o name 2>/dev/null |
			grep -E '/(agent-sandbox-controller|sandbox-router)$' |
			xargs -r "$CACHE_DIR/bin/kubectl" --kubeconfig "$(kubeconfig)" -n "$ns" scale \
				--replicas="$1" >/dev/null
	done
}

start_host() {
	local kc
	kc=$(kubeconfig)
	scale_incluster 0
	start_proc agent-sandbox-controller --kubeconfig "$kc" \
		--metrics-bind-address "$CTRL_METRICS" --health-probe-bind-address "$CTRL_HEALTH"
	# Every local user shares this host's loopback: no request skips the review.
	start_proc sandbox-router --kubeconfig "$kc" --http-bind-address "$ROUTER_ADDR" \
		--health-probe-bind-address "$ROUTER_HEALTH" --trust-loopback=false
	wait_http "http://$CTRL_HEALTH/healthz" agent-sandbox-controller
	wait_http "http://$ROUTER_HEALTH/readyz" sandbox-router
}

up() {
	local want=cluster
	case ${1:-} in
	--host) want=host ;;
	"") ;;
	*) usage ;;
	esac
	[ "$(id -u)" = 0 ] || die "the local cluster needs root"
	mkdir -p "$STACK_DIR"
	"$ROOT/hack/deps.sh" --cluster
	"$ROOT/hack/build-k8s.sh"
	build
	"$CLUSTER" up >/dev/null
	local before
	before=$(runtime_digests)
	"$CLUSTER" images
	install_storage
	install_crds
	if [ "$want" = host ]; then
		start_host
	else
		stop_proc sandbox-router
		stop_proc agent-sandbox-controller
		install_incluster
	fi
	echo "$want" >"$MODE_FILE"
	install_defaults
	[ "$before" = "$(runtime_digests)" ] || recycle_pool_members
	log "waiting for the warm pool"
	kctl wait --for=jsonpath='{.status.readyReplicas}'=2 --timeout=180s \
		sandboxwarmpool/python-pool >/dev/null ||
		log "warning: the warm pool python-pool is not Ready yet (kubectl get sandboxes)"
	print_usage "$(kubeconfig)"
}

router_url() {
	if [ "$(mode)" = host ]; then
		echo "http://$ROUTER_ADDR"
		return
	fi
	local ip
	ip=$(kctl -n "$SYS_NS" get service sandbox-router-svc -o jsonpath='{.spec.clusterIP}') &&
		[ -n "$ip" ] || die "no Service sandbox-router-svc in $SYS_NS (make up)"
	echo "http://$ip:8080"
}

print_usage() {
	local where
	if [ "$(mode)" = host ]; then
		where="host processes (make up without --host runs them in the cluster), logs $STACK_DIR/*.log"
	else
		where="Deployments in $SYS_NS (kubectl -n $SYS_NS get pods); a namespace router in $NS_ROUTER_NS"
	fi
	cat <<MSG

Agent Sandbox is up on the local cluster.
  kubeconfig:   $1            (make -s kubeconfig)
  kubectl:      export KUBECONFIG=$1; $CACHE_DIR/bin/kubectl get sandboxes,sandboxwarmpools
  CLI:          $RELEASE/kubectl-sandbox --kubeconfig $1 get sandboxes
  controller,
  router:       $where
  router URL:   $(router_url)          (make -s router-url; token: make -s router-token)
  storage:      default StorageClass "standard" (local-path-provisioner)
  template:     "python" with warm pool "python-pool" (config/local/defaults.yaml)
                "python-sci" (numpy, pandas, matplotlib; no pool; config/local/sci.yaml)
  claim one:    $CACHE_DIR/bin/kubectl create -f - <<'YAML'
                apiVersion: extensions.agents.x-k8s.io/v1beta1
                kind: SandboxClaim
                metadata: {name: my-claim}
                spec: {warmPoolRef: {name: python-pool}}
                YAML
  stop:         make down
MSG
}

# incluster_pod NAME: namespace/uid of the pod running NAME: the Lease holder for the
# controller, the router of agent-sandbox-system.
incluster_pod_uid() {
	local pod
	if [ "$1" = agent-sandbox-controller ]; then
		pod=$(kctl -n "$SYS_NS" get lease a3317529.agent-sandbox.x-k8s.io \
			-o jsonpath='{.spec.holderIdentity}' 2>/dev/null)
		pod=${pod%_*}
	else
		pod=$(kctl -n "$SYS_NS" get pods -l app=sandbox-router \
			--field-selector=status.phase=Running -o jsonpath='{.items[0].metadata.name}')
	fi
	[ -n "$pod" ] || return 1
	kctl -n "$SYS_NS" get pod "$pod" -o jsonpath='{.metadata.uid}'
}

# pid_of NAME: host pid of the stack's NAME process.
pid_of() {
	local name=$1 uid p exe
	if [ "$(mode)" = host ]; then
		pid_alive "$name" && cat "$STACK_DIR/$name.pid"
		return
	fi
	uid=$(incluster_pod_uid "$name") || return 1
	for p in /proc/[0-9]*; do
		exe=$(readlink "$p/exe" 2>/dev/null) || continue
		[ "${exe##*/}" = "$name" ] || continue
		grep -q -e "$uid" -e "${uid//-/_}" "$p/cgroup" 2>/dev/null || continue
		echo "${p#/proc/}"
		return 0
	done
	return 1
}

component() {
	case ${1:-} in
	controller) echo agent-sandbox-controller ;;
	router) echo sandbox-router ;;
	*) usage ;;
	esac
}

logs_of() {
	if [ "$(mode)" = host ]; then
		cat "$STACK_DIR/$1.log"
	else
		local app=$1
		kctl -n "$SYS_NS" logs -l "app=$app" --tail=-1 --max-log-requests=10 --prefix=false
	fi
}

status() {
	local n rc=0
	if [ "$(mode)" = host ]; then
		for n in agent-sandbox-controller sandbox-router; do
			if pid_alive "$n"; then
				printf '%-26s running (pid %s)\n' "$n" "$(cat "$STACK_DIR/$n.pid")"
			else
				printf '%-26s stopped\n' "$n"
				rc=3
			fi
		done
	elif "$CLUSTER" status >/dev/null 2>&1; then
		for n in agent-sandbox-controller sandbox-router; do
			printf '%-26s in-cluster, %s ready\n' "$n" "$(kctl -n "$SYS_NS" get deployment "$n" \
				-o jsonpath='{.status.readyReplicas}/{.spec.replicas}' 2>/dev/null || echo "not installed")"
		done
	fi
	"$CLUSTER" status || rc=3
	return $rc
}

router_token() {
	kctl -n default create token sandbox-user --duration=24h
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
up) up "$@" ;;
down)
	stop_proc sandbox-router
	stop_proc agent-sandbox-controller
	"$CLUSTER" down "$@"
	;;
status) status ;;
router-url) router_url ;;
router-token) router_token ;;
kubeconfig) kubeconfig ;;
pid) pid_of "$(component "${1:-}")" ;;
logs) logs_of "$(component "${1:-}")" ;;
*) usage ;;
esac
