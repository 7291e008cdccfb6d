#!/usr/bin/env bash
# The whole local stack on the local cluster: what `make up` starts.
#
#   hack/stack.sh up | down [--purge] | status | router-url | router-token | kubeconfig
#
# up           build (release preset), bring up the local cluster (hack/cluster/cluster.sh)
#              with the sandbox runtime image carrying sandboxd, install the CRDs, run
#              agent-sandbox-controller and sandbox-router as host processes, install
#              the default SandboxTemplate "python" and SandboxWarmPool "python-pool"
#              (config/local/), and print how to use it. Idempotent; a second run only
#              restarts what is not running or was rebuilt.
# down         stop the controller and router, then the cluster (--purge: remove state)
# status       what runs
# router-url   the router's base URL (http://127.0.0.1:28080)
# router-token a bearer token of the local user "sandbox-user" (sandboxes of "default")
# kubeconfig   the admin kubeconfig path
#
# Processes log to $STACK_DIR/*.log (default .cache/stack).
source "$(dirname "$0")/lib.sh"

STACK_DIR=${AS_STACK_DIR:-$CACHE_DIR/stack}
ROUTER_ADDR=${AS_ROUTER_ADDR:-127.0.0.1:28080}
ROUTER_HEALTH=${AS_ROUTER_HEALTH_ADDR:-127.0.0.1:28081}
CTRL_METRICS=${AS_CONTROLLER_METRICS_ADDR:-127.0.0.1:28090}
CTRL_HEALTH=${AS_CONTROLLER_HEALTH_ADDR:-127.0.0.1:28091}
RELEASE=$ROOT/build/release
CLUSTER=$ROOT/hack/cluster/cluster.sh

usage() { sed -n '2,19s/^# \{0,1\}//p' "$0" >&2; exit 2; }

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
	cmake --build --preset release --target agent-sandbox-controller sandbox-router sandboxd
		>/dev/null || die "build failed: cmake --build --preset release"
	# The runtime image carries sandboxd (static) at /usr/local/bin/sandboxd.
	local extra=$STACK_DIR/runtime-extra
	mkdir -p "$extra/usr/local/bin"
	cmp -s "$RELEASE/sandboxd" "$extra/usr/local/bin/sandboxd" ||
		install -m 0755 "$RELEASE/sandboxd" "$extra/usr/local/bin/sandboxd"
	export AS_RUNTIME_EXTRA_DIR=$extra
}

install_api() {
	log "installing CRDs and the default template and pool"
	kctl apply --server-side --force-conflicts --field-manager=agent-sandbox-up \
		-f "$ROOT/api/crds/" >/dev/null
	kctl wait --for condition=established --timeout=60s crd \
		sandboxes.agents.x-k8s.io sandboxtemplates.extensions.agents.x-k8s.io \
		sandboxclaims.extensions.agents.x-k8s.io sandboxwarmpools.extensions.agents.x-k8s.io >/dev/null
	kctl apply --server-side --force-conflicts --field-manager=agent-sandbox-up \
		-f "$ROOT/config/local/router-user.yaml" -f "$ROOT/config/local/defaults.yaml" >/dev/null
}

up() {
	[ "$(id -u)" = 0 ] || die "the local cluster needs root"
	mkdir -p "$STACK_DIR"
	"$ROOT/hack/deps.sh" --cluster
	"$ROOT/hack/build-k8s.sh"
	build
	"$CLUSTER" up >/dev/null
	"$CLUSTER" images
	local kc
	kc=$(kubeconfig)
	install_api
	start_proc agent-sandbox-controller --kubeconfig "$kc" \
		--metrics-bind-address "$CTRL_METRICS" --health-probe-bind-address "$CTRL_HEALTH"
	start_proc sandbox-router --kubeconfig "$kc" --http-bind-address "$ROUTER_ADDR" \
		--health-probe-bind-address "$ROUTER_HEALTH"
	wait_http "http://$CTRL_HEALTH/healthz" agent-sandbox-controller
	wait_http "http://$ROUTER_HEALTH/readyz" sandbox-router
	log "waiting for the warm pool"
	kctl wait --for=jsonpath='{.status.readyReplicas}'=2 --timeout=180s \
		sandboxwarmpool/python-pool >/dev/null ||
		log "warning: the warm pool python-pool is not Ready yet (kubectl get sandboxes)"
	print_usage "$kc"
}

print_usage() {
	cat <<MSG

Agent Sandbox is up on the local cluster.
  kubeconfig:   $1            (make -s kubeconfig)
  kubectl:      export KUBECONFIG=$1; $CACHE_DIR/bin/kubectl get sandboxes,sandboxwarmpools
  CLI:          $RELEASE/kubectl-sandbox --kubeconfig $1 get sandboxes
  router:       http://$ROUTER_ADDR          (make -s router-url; token: make -s router-token)
  controller:   metrics http://$CTRL_METRICS/metrics, logs $STACK_DIR/agent-sandbox-controller.log
  template:     "python" with warm pool "python-pool" (config/local/defaults.yaml)
  claim one:    $CACHE_DIR/bin/kubectl create -f - <<'YAML'
                apiVersion: extensions.agents.x-k8s.io/v1beta1
                kind: SandboxClaim
                metadata: {name: my-claim}
                spec: {warmPoolRef: {name: python-pool}}
                YAML
  stop:         make down
MSG
}

status() {
	local n rc=0
	for n in agent-sandbox-controller sandbox-router; do
		if pid_alive "$n"; then
			printf '%-26s running (pid %s)\n' "$n" "$(cat "$STACK_DIR/$n.pid")"
		else
			printf '%-26s stopped\n' "$n"
			rc=3
		fi
	done
	"$CLUSTER" status || rc=3
	return $rc
}

router_token() {
	kctl -n default create token sandbox-user --duration=24h
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
up) up ;;
down)
	stop_proc sandbox-router
	stop_proc agent-sandbox-controller
	"$CLUSTER" down "$@"
	;;
status) status ;;
router-url) echo "http://$ROUTER_ADDR" ;;
router-token) router_token ;;
kubeconfig) kubeconfig ;;
*) usage ;;
esac
