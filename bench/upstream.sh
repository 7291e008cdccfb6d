#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Upstream's controller (sigs.k8s.io/agent-sandbox) side by side with ours, on the same
# API server and the same load.
#
#   bench/upstream.sh build                 build upstream's controller (cached)
#   bench/upstream.sh crds DIR              write upstream's CRDs, conversion None, to DIR
#   bench/upstream.sh help                  --help of the built binary
#   bench/upstream.sh ctrl FLAGS...         run it, taking bench/run.sh's controller flags
#                                           (used as BENCH_CTRL by `compare`)
#   bench/upstream.sh smoke                 on a private API server: it starts, one
#                                           Sandbox becomes Ready; then everything stops
#   bench/upstream.sh compare [--rounds N] [--only a,b,...] [--profile]
#                                           bench/run.sh scenarios (default warm300,probe,
#                                           cold), ours and upstream in turn (ours first),
#                                           N rounds (default 2), each leg on a fresh
#                                           private API server (empty etcd);
#                                           each leg with its own CRDs; bench/compare.py
#                                           writes the side-by-side table (compare.md);
#                                           --profile: kube-apiserver CPU profiles of each
#                                           leg (pprof/, attributed by bench/pprof-attr.sh)
#   bench/upstream.sh wait-quiet            only the wait `compare` makes before each leg
#
# The build asks the Go module proxy for exactly $UPSTREAM_VERSION (default v0.5.6; the
# proxy refuses the module's version list, so `go install ...@version`, which reads it
# for deprecations, fails) and builds the module's cmd/agent-sandbox-controller in a
# wrapper module pinned to it. The binary is cached in
# $AGENT_SANDBOX_BIN_CACHE/upstream-controller-<version>/ like hack/build-k8s.sh's builds.
#
# Upstream runs with the flags of its own benchmarks: --extensions --kube-api-qps=1000
# --kube-api-burst=2000, 50 Sandbox and 50 claim workers, --separate-watch-connection
# --api-connections=4, and --enable-webhook=false --manage-webhook-certs=false (its
# CRDs get conversion strategy None and v1alpha1 unserved, so no webhook is needed).
# UPSTREAM_ARGS adds flags (word-split). The API server is private: state in
# $BENCH_APISERVER_DIR (default .cache/bench-apiserver), because swapping CRDs on the
# shared test API server would break the tests that use it. `smoke` stops it at the end;
# `compare` leaves it running for the next run (stop: AS_APISERVER_DIR=... hack/apiserver.sh stop).
# Before each leg `compare` waits for a quiet machine: the 1-minute load average at or
# below BENCH_QUIET_LOAD (default 1.0), for at most BENCH_QUIET_MAX seconds (default 240;
# 0 = no wait), looking every BENCH_QUIET_POLL s (default 5). A leg that starts behind
# the last one's cleanup (load 3-5 on two cores) measures that, not the controller.
# BENCH_LOADAVG names the file read instead of /proc/loadavg (tests).
source "$(dirname "$0")/../hack/lib.sh"
cd "$ROOT"

UPSTREAM_MODULE=sigs.k8s.io/agent-sandbox
UPSTREAM_VERSION=${UPSTREAM_VERSION:-v0.5.6}
UP_DIR=$BIN_CACHE/upstream-controller-$UPSTREAM_VERSION
UP_BIN=$UP_DIR/agent-sandbox-controller
BENCH_APISERVER_DIR=${BENCH_APISERVER_DIR:-$CACHE_DIR/bench-apiserver}
UP_FLAGS=(--extensions --enable-webhook=false --manage-webhook-certs=false
	--kube-api-qps=1000 --kube-api-burst=2000
	--sandbox-concurrent-workers=50 --sandbox-claim-concurrent-workers=50
	--separate-watch-connection --api-connections=4)

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2; exit 2; }

module_dir() { # the module's source in the module cache, downloaded when missing
	local dir
	dir=$(go mod download -json "$UPSTREAM_MODULE@$UPSTREAM_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -d "$dir" ] || die "could not download $UPSTREAM_MODULE@$UPSTREAM_VERSION"
	echo "$dir"
}

cmd_build() {
	[ -x "$UP_BIN" ] && return 0
	ensure_go
	local src wrap gover start
	src=$(module_dir)
	gover=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$src/go.mod")
	wrap=$CACHE_DIR/upstream-wrapper-$UPSTREAM_VERSION
	rm -rf "$wrap"
	mkdir -p "$wrap" "$UP_DIR"
	printf 'module agent-sandbox.local/upstream-wrapper\n\ngo %s\n\nrequire %s %s\n' \
		"$gover" "$UPSTREAM_MODULE" "$UPSTREAM_VERSION" >"$wrap/go.mod"
	printf '//go:build tools\n\npackage tools\n\nimport _ "%s/cmd/agent-sandbox-controller"\n' \
		"$UPSTREAM_MODULE" >"$wrap/tools.go"
	cp "$src/go.sum" "$wrap/go.sum" # the module's own dependency versions and sums
	log "building $UPSTREAM_MODULE $UPSTREAM_VERSION (go $gover; cold builds take minutes)"
	start=$(date +%s)
	(cd "$wrap" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags=-s \
		-o "$UP_BIN.tmp" "$UPSTREAM_MODULE/cmd/agent-sandbox-controller") ||
		die "building upstream's controller failed"
	mv "$UP_BIN.tmp" "$UP_BIN"
	log "built in $(($(date +%s) - start))s: $UP_BIN"
}

cmd_crds() { # dir
	local out=${1:?usage: crds DIR} src
	ensure_go
	src=$(module_dir)
	mkdir -p "$out"
	python3 - "$src/k8s/crds" "$out" <<'PY'
import pathlib, sys, yaml
src, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for f in sorted(src.glob("*.yaml")):
    docs = [d for d in yaml.safe_load_all(f.read_text()) if d]
    for d in docs:
        if d.get("kind") != "CustomResourceDefinition":
            continue
        d["spec"]["conversion"] = {"strategy": "None"}
        for v in d["spec"]["versions"]:
            if not v.get("storage"):
                v["served"] = False  # no conversion traffic while informers list
    (out / f.name).write_text(yaml.safe_dump_all(docs, sort_keys=False))
    print(out / f.name)
PY
}

# bench/run.sh starts its controller with: --namespace NS --leader-elect=false
# --metrics-bind-address 0 --health-probe-bind-address 0 --log-level L
# --sandbox-warm-pool-concurrent-workers N [BENCH_CTRL_ARGS]. Upstream watches every
# namespace (the private API server holds only the benchmark's) and logs through zap
# (--zap-log-level: debug, info, error; warn becomes error). The rest is the same.
cmd_ctrl() {
	local args=() lvl
	while [ $# -gt 0 ]; do
		case $1 in
		--namespace) shift ;;
		--namespace=*) ;;
		--log-level | --log-level=*)
			if [ "$1" = --log-level ]; then lvl=$2; shift; else lvl=${1#*=}; fi
			case $lvl in warn | error) lvl=error ;; trace) lvl=debug ;; esac
			args+=(--zap-log-level "$lvl")
			;;
		*) args+=("$1") ;;
		esac
		shift
	done
	# shellcheck disable=SC2086 # UPSTREAM_ARGS is word-split on purpose
	exec "$UP_BIN" "${UP_FLAGS[@]}" "${args[@]}" ${UPSTREAM_ARGS:-}
}

private_apiserver() { # starts (or keeps) the private API server; exports its env
	export AS_APISERVER_DIR=$BENCH_APISERVER_DIR
	[ -z "${BENCH_PPROF:-}" ] || export AS_APISERVER_EXTRA_ARGS="${AS_APISERVER_EXTRA_ARGS:-} --profiling=true"
	# the controller set of every published figure (the bench's Sandboxes have no PVCs)
	export AS_APISERVER_CONTROLLERS=${AS_APISERVER_CONTROLLERS:-namespace,garbagecollector}
	hack/apiserver.sh start >/dev/null || die "the private API server did not start"
	eval "$(hack/apiserver.sh env)"
	command -v kubectl >/dev/null 2>&1 || hack/build-k8s.sh kubectl
	need kubectl "hack/build-k8s.sh kubectl"
}

fresh_apiserver() { # the private API server restarted on an empty etcd
	AS_APISERVER_DIR=$BENCH_APISERVER_DIR hack/apiserver.sh stop >/dev/null 2>&1
	rm -rf "$BENCH_APISERVER_DIR"
	private_apiserver
}

apply_crds() { # dir: replaces the agents.x-k8s.io CRDs with those in dir
	kubectl apply --server-side --force-conflicts -f "$1" >/dev/null || die "applying $1 failed"
	kubectl wait --for condition=Established --timeout=60s -f "$1" >/dev/null
}

# gc_watches: waits (at most 90 s) until kube-controller-manager's garbage collector
# watches the Sandboxes of the CRDs just applied. It picks new resources up at its next
# discovery pass (every 30 s); until then, each Pod owned by a Sandbox it has not seen
# costs it a GET of that Sandbox (about 6 per Sandbox, 0.2 s of API CPU over a 20-Sandbox
# probe), and its watches start in the middle of whichever leg comes first. The sign: a
# Sandbox in default whose one owner is a ConfigMap that does not exist is deleted. No
# controller runs yet, so nothing else reacts to it.
gc_watches() {
	local t0=$SECONDS uid
	uid=$(cat /proc/sys/kernel/random/uuid)
	kubectl apply -f - >/dev/null <<YAML || die "cannot create the garbage collector's probe"
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: bench-gc-probe
  namespace: default
  ownerReferences:
  - {apiVersion: v1, kind: ConfigMap, name: bench-gc-probe-gone, uid: "$uid"}
spec:
  podTemplate:
    spec:
      containers: [{name: c, image: registry.local/none:1}]
YAML
	while kubectl get sandbox -n default bench-gc-probe >/dev/null 2>&1; do
		if ((SECONDS - t0 >= 90)); then
			log "the garbage collector did not pick up the CRDs in 90 s; going on"
			kubectl delete sandbox -n default bench-gc-probe --wait=false >/dev/null 2>&1
			return 0
		fi
		sleep 0.5
	done
	log "the garbage collector watches the CRDs ($((SECONDS - t0)) s)"
}

cmd_smoke() {
	local tmp pid ok=0 ns=upstream-smoke
	cmd_build
	export PATH=$CACHE_DIR/bin:$K8S_BIN:$PATH
	private_apiserver
	tmp=$(mktemp -d)
	cmd_crds "$tmp/crds" >/dev/null
	apply_crds "$tmp/crds"
	kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	# no ServiceAccount controller runs here: the Pod's admission needs the default one
	kubectl -n "$ns" create serviceaccount default --dry-run=client -o yaml |
		kubectl apply -f - >/dev/null
	"$UP_BIN" "${UP_FLAGS[@]}" --leader-elect=false --metrics-bind-address 0 \
		--health-probe-bind-address 0 >"$tmp/controller.log" 2>&1 &
	pid=$!
	kubectl -n "$ns" apply -f - >/dev/null <<'YAML'
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata: {name: smoke}
spec:
  podTemplate:
    spec:
      containers: [{name: runtime, image: registry.local/runtime:1}]
YAML
	for _ in $(seq 60); do # the kubelet's part: the Pod runs and is Ready
		if kubectl -n "$ns" get pod smoke >/dev/null 2>&1; then
			kubectl -n "$ns" patch pod smoke --subresource status --type merge -p \
				'{"status":{"phase":"Running","podIP":"10.9.0.1","podIPs":[{"ip":"10.9.0.1"}],"conditions":[{"type":"PodScheduled","status":"True"},{"type":"Ready","status":"True"}]}}' >/dev/null
			break
		fi
		sleep 0.5
	done
	if kubectl -n "$ns" wait --for condition=Ready --timeout=60s sandbox/smoke >/dev/null; then
		ok=1
		kubectl -n "$ns" get sandbox smoke -o jsonpath='{.status.conditions[?(@.type=="Ready")]}{"\n"}'
	fi
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1
	hack/apiserver.sh stop >/dev/null
	if [ "$ok" = 1 ]; then
		log "upstream $UPSTREAM_VERSION reconciled a Sandbox to Ready"
		rm -rf "$tmp"
		return 0
	fi
	log "upstream did not make the Sandbox Ready; its log: $tmp/controller.log"
	tail -5 "$tmp/controller.log" >&2
	return 1
}

load1() { cut -d' ' -f1 "${BENCH_LOADAVG:-/proc/loadavg}"; }

# Waits until load1 <= BENCH_QUIET_LOAD, BENCH_QUIET_MAX s at most; says how it went.
wait_quiet() {
	local want=${BENCH_QUIET_LOAD:-1.0} max=${BENCH_QUIET_MAX:-240} t0=$SECONDS
	local poll=${BENCH_QUIET_POLL:-5} polls=0 l v
	for v in "$want" "$max" "$poll"; do
		[[ $v =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "BENCH_QUIET_LOAD/MAX/POLL: '$v' is not a number"
	done
	[[ $max =~ ^[0-9]+$ ]] || die "BENCH_QUIET_MAX: '$max' is not a whole number of seconds"
	while l=$(load1) && [[ $l =~ ^[0-9]+(\.[0-9]+)?$ ]] &&
		awk -v l="$l" -v w="$want" 'BEGIN { exit !(l > w) }'; do
		if [ $((SECONDS - t0)) -ge "$max" ]; then
			log "load $l still above $want after ${max}s; starting anyway"
			return 0
		fi
		sleep "$poll"
		polls=$((polls + 1))
	done
	[[ ${l:-} =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "cannot read the load average from ${BENCH_LOADAVG:-/proc/loadavg}"
	# no poll: no wait (SECONDS may still have ticked over since t0)
	log "load $l (waited $((polls ? SECONDS - t0 : 0))s for <= $want)"
}

cmd_compare() {
	local rounds=2 only=warm300,probe,cold stamp out tmp leg r profile=0
	while [ $# -gt 0 ]; do
		case $1 in
		--rounds) rounds=$2; shift ;;
		--only) only=$2; shift ;;
		--profile) profile=1 ;;
		*) usage ;;
		esac
		shift
	done
	cmd_build
	export PATH=$CACHE_DIR/bin:$K8S_BIN:$PATH
	stamp=$(date -u +%Y%m%dT%H%M%SZ)
	out=bench/results/compare-$stamp
	[ "$profile" = 0 ] || export BENCH_PPROF=$ROOT/$out/pprof
	tmp=$out/crds
	mkdir -p "$out"
	cmd_crds "$tmp/upstream" >/dev/null
	for r in $(seq "$rounds"); do
		for leg in ours upstream; do
			log "round $r: $leg ($only)"
			[ "$profile" = 0 ] || export BENCH_PPROF=$ROOT/$out/pprof/$leg-$r
			# every leg on a fresh API server: one that served earlier legs is slower (its
			# etcd and heap grow: the same build's 300-claim p50 rose from 1.2 to 2.2 s
			# over seven runs), which would favour whichever leg runs first
			fresh_apiserver
			wait_quiet
			if [ "$leg" = ours ]; then
				apply_crds api/crds
				gc_watches
				BENCH_CTRL="" bench/run.sh --only "$only" || log "$leg round $r failed"
			else
				apply_crds "$tmp/upstream"
				gc_watches
				BENCH_CTRL="$0" BENCH_CTRL_MODE=ctrl bench/run.sh --only "$only" ||
					log "$leg round $r failed"
			fi
			cp bench/results/latest.json "$out/$leg-$r.json"
		done
	done
	python3 bench/compare.py "$out" --json "$out/compare.json" | tee "$out/compare.md"
	if [ "$profile" = 1 ]; then
		bench/pprof-attr.sh "$out"/pprof/*/warm_burst_300.pb.gz | tee "$out/pprof-warm300.md" || true
	fi
	log "results in $out (compare.md: the table above); plots: bench/report $out/ours-1.json --compare $out/upstream-1.json"
}

# As BENCH_CTRL, bench/run.sh calls this script with its controller flags only.
if [ "${BENCH_CTRL_MODE:-}" = ctrl ]; then
	cmd_ctrl "$@"
fi

case ${1:-} in
build) cmd_build ;;
crds) shift; cmd_crds "$@" ;;
help) cmd_build; "$UP_BIN" --help ;;
ctrl) shift; cmd_ctrl "$@" ;;
smoke) cmd_smoke ;;
compare) shift; cmd_compare "$@" ;;
wait-quiet) wait_quiet ;;
*) usage ;;
esac
