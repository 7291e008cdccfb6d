#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Benchmark suite runner: builds the tools, runs every scenario and writes
# bench/results/<timestamp>.json and bench/results/latest.json.
#
#   bench/run.sh [--smoke] [--target apiserver|cluster] [--only a,b,...]
#
# --target apiserver (default): the standalone API server of hack/apiserver.sh (started
#     when not running), no nodes: a simulated kubelet marks Pods Ready, and our own
#     controller build runs scoped to each scenario's namespace (--leader-elect=false).
#     Measures the controller and the API server only.
# --target cluster: the local cluster of `make up` (KUBECONFIG or .cache/cluster); Pods go
#     to kwok nodes (hack/cluster/cluster.sh up --kwok-nodes N) and the stack's
#     controller does the work (its RSS/CPU are sampled through its pid file).
# --smoke: small N, < 2 minutes; prints "N passed, N failed" and exits non-zero on failure.
# Scenarios: warm300 warm1000 claimprobe sdkprobe sdkprobego sdkburst sustained cold probe
# sweep scale router sandboxd
# (claimprobe: 20 warm claims one at a time on an idle pool of 2, each once the previous
# one's refill is Ready; sdkprobe: the same through the Python SDK's create(), 20 with the
# early hand-out and 20 without, alternating; sdkprobego: the same through the Go SDK's
# CreateSandbox (bench/sdkprobe-go); sdkburst: BENCH_SDK_BURST (40) claims at once
# through one AsyncSandboxClient on a pool of that size, three rounds; probe: 20 Sandboxes
# one at a time, each after the previous one is Ready; BENCH_PROBE_COUNT for all four;
# sweep: sustained claims at rising rates BENCH_SWEEP_RATES, default "5 10 20 40 80",
# until p99 > 1 s: the highest rate held; scale: BENCH_SCALE Sandboxes with their Pods,
# then, on the standalone API server, the controller's RSS once idle and a restarted
# controller's sync time, CPU and RSS on the same objects).
# With --target apiserver every scenario also reports the CPU of kube-apiserver + etcd
# (from /proc) per object, for its measured phase (api.cpu / api_cpu) and for the whole
# run including set-up and cleanup (<scenario>.run in the results: run_cpu).
# Env: BENCH_SRC (source tree to build, default this checkout; e.g. a `git archive` snapshot
#      when others edit the tree), BENCH_BUILD (build dir of it, default build/bench-rel;
#      the tools go to $BENCH_BUILD-tools),
#      BENCH_CTRL (controller binary, default $BENCH_BUILD/agent-sandbox-controller),
#      BENCH_CTRL_ARGS (extra controller flags, word-split),
#      BENCH_WARM_COUNT (claims in the warm300 burst, default 300; e.g. 30 or 100),
#      BENCH_COLD_COUNT (Sandboxes of the cold burst, default 300), BENCH_PROBE_COUNT (20),
#      BENCH_RATE (sustained claims/s, default 500; arrivals stop once 5 s worth of claims
#      are unready), BENCH_RATE_LOW (a second sustained run at a rate this machine holds,
#      default 25), BENCH_SCALE (default 10000), BENCH_SCALE_IDLE (s the scale
#      run's controllers idle before their RSS is read, default 35; 2 with --smoke),
#      BENCH_PPROF (a directory: CPU profiles of kube-apiserver, 10 s each, for the whole of
#      every scenario, merged into <dir>/<scenario>.pb.gz; the API server is (re)started
#      with --profiling=true; bench/pprof-attr.sh attributes them),
#      (every scenario also writes <scenario>.records.tsv: each object's create, POST
#      acknowledged and Ready times in ms from the first create),
#      BENCH_TIMELINE (set: every scenario also writes <scenario>.timeline.json, a
#      per-second record of the CPU of the API server, etcd, kube-controller-manager, the
#      controller and the load generator and of the API server's writes by kind;
#      `bench/timeline.py show FILE` prints it; --smoke checks them),
#      BENCH_NS_WAIT (seconds to wait for a scenario's namespace to be gone, so its
#      cleanup does not load the next one; default 900, smoke 0: small namespaces).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SMOKE=0 TARGET=apiserver ONLY=""
while [ $# -gt 0 ]; do
	case $1 in
	--smoke) SMOKE=1 ;;
	--target) TARGET=$2; shift ;;
	--only) ONLY=$2; shift ;;
	*) sed -n '2,21s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
	shift
done
SRC=${BENCH_SRC:-.}
BUILD=${BENCH_BUILD:-build/bench-rel}
TOOLS=$BUILD-tools
[ "$BUILD" = build/bench-rel ] && TOOLS=build/bench-tools
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
case $TOOLS in /*) ;; *) TOOLS=$ROOT/$TOOLS ;; esac
KC=${AGENT_SANDBOX_CACHE:-$ROOT/.cache}/bin/kubectl # built by hack/build-k8s.sh
RATE=${BENCH_RATE:-500} RATE_LOW=${BENCH_RATE_LOW:-25} SCALE=${BENCH_SCALE:-10000}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=bench/results/$STAMP
mkdir -p "$OUT"
log() { echo "bench: $*" >&2; }

build() {
	{ [ -f "$BUILD/build.ninja" ] || cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DAS_TESTS=OFF >/dev/null; } &&
		ninja -C "$BUILD" agent-sandbox-controller sandbox-router sandboxd >/dev/null &&
		{ [ -f "$TOOLS/build.ninja" ] || cmake -S "$SRC/bench" -B "$TOOLS" -G Ninja \
			-DCMAKE_BUILD_TYPE=RelWithDebInfo -DAS_BUILD_DIR="$BUILD" >/dev/null; } &&
		ninja -C "$TOOLS" >/dev/null
}

setup_target() {
	if [ "$TARGET" = apiserver ]; then
		# profiles need --profiling=true (hack/apiserver.sh restarts a server whose flags differ)
		[ -z "${BENCH_PPROF:-}" ] || export AS_APISERVER_EXTRA_ARGS="${AS_APISERVER_EXTRA_ARGS:-} --profiling=true"
		# the controller set of every published figure (the bench's Sandboxes have no PVCs)
		export AS_APISERVER_CONTROLLERS=${AS_APISERVER_CONTROLLERS:-namespace,garbagecollector}
		hack/apiserver.sh start >/dev/null || return 1
		eval "$(hack/apiserver.sh env)"
		# a fresh API server has none of the CRDs the scenarios create objects of
		"$KC" --kubeconfig "$AS_KUBECONFIG" apply --server-side --force-conflicts \
			--field-manager=agent-sandbox-bench -f api/crds/ >/dev/null &&
			hack/wait-crds.sh "$KC" --kubeconfig "$AS_KUBECONFIG" ||
			{ log "cannot install the CRDs"; return 1; }
		LGFLAGS=(--kubelet)
		local d=${AS_APISERVER_DIR:-$ROOT/.cache/apiserver} a e
		a=$(cat "$d/kube-apiserver.pid" 2>/dev/null) e=$(cat "$d/etcd.pid" 2>/dev/null)
		API_PIDS=""
		[ -n "$a" ] && [ -n "$e" ] && API_PIDS=$a,$e && LGFLAGS+=(--api-pids "$API_PIDS")
	else
		export KUBECONFIG=${KUBECONFIG:-$ROOT/.cache/cluster/kubeconfig}
		LGFLAGS=(--kwok)
	fi
}

CTRL_PID=""
start_ctrl() { # namespace
	if [ "$TARGET" != apiserver ]; then
		CTRL_PID=$(cat .cache/stack/agent-sandbox-controller.pid 2>/dev/null || true)
		return 0
	fi
	# shellcheck disable=SC2086
	"${BENCH_CTRL:-$BUILD/agent-sandbox-controller}" --namespace "$1" --leader-elect=false \
		--metrics-bind-address 0 --health-probe-bind-address 0 --log-level warn \
		--sandbox-warm-pool-concurrent-workers 4 ${BENCH_CTRL_ARGS:-} \
		>>"$OUT/controller-$1.log" 2>&1 &
	CTRL_PID=$!
}
stop_ctrl() { # a controller draining a large backlog may not stop in time: 30 s, then KILL
	if [ "$TARGET" = apiserver ] && [ -n "$CTRL_PID" ]; then
		kill "$CTRL_PID" 2>/dev/null
		for _ in $(seq 60); do kill -0 "$CTRL_PID" 2>/dev/null || break; sleep 0.5; done
		kill -0 "$CTRL_PID" 2>/dev/null && { log "controller did not stop in 30 s: KILL"; kill -9 "$CTRL_PID"; }
		wait "$CTRL_PID" 2>/dev/null
	fi
	CTRL_PID=""
}

API_PIDS=""
proc_cpu() { # pid,... -> utime+stime in seconds, summed (0 for a pid that is gone)
	local p sum=0 tck
	tck=$(getconf CLK_TCK)
	for p in ${1//,/ }; do
		sum=$((sum + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	awk -v s="$sum" -v t="$tck" 'BEGIN { printf "%.2f", s / t }'
}
status_mib() { # pid field -> a /proc/PID/status size (VmRSS, VmHWM) in MiB, 0 when gone
	awk -v f="$2:" '$1 == f { v = $2 / 1024 } END { printf "%.1f", v }' "/proc/$1/status" 2>/dev/null || echo 0
}
peak_rss_mib() { status_mib "$1" VmHWM; }

PPROF_PID=""
pprof_start() { # scenario: profiles kube-apiserver in 10 s slices until pprof_stop
	[ -n "${BENCH_PPROF:-}" ] && [ "$TARGET" = apiserver ] || return 0
	local d=${AS_APISERVER_DIR:-$ROOT/.cache/apiserver} port
	port=$(sed -n 's/^APISERVER_PORT=//p' "$d/ports.env")
	mkdir -p "$BENCH_PPROF/$1"
	(
		i=0
		while :; do
			curl -sf --cacert "$d/pki/ca.crt" --cert "$d/pki/admin.crt" --key "$d/pki/admin.key" \
				-o "$BENCH_PPROF/$1/$i.pb.gz" "https://127.0.0.1:$port/debug/pprof/profile?seconds=10" ||
				{ rm -f "$BENCH_PPROF/$1/$i.pb.gz"; sleep 1; }
			i=$((i + 1))
		done
	) &
	PPROF_PID=$!
}
pprof_stop() { # scenario: merges its slices into one profile
	[ -n "$PPROF_PID" ] || return 0
	kill "$PPROF_PID" 2>/dev/null
	wait "$PPROF_PID" 2>/dev/null
	pkill -f "$BENCH_PPROF/$1/" 2>/dev/null || true
	PPROF_PID=""
	local files=("$BENCH_PPROF/$1"/*.pb.gz)
	[ -e "${files[0]}" ] || { log "pprof: no profile of $1 (is --profiling=true set?)"; return 0; }
	go tool pprof -proto "${files[@]}" >"$BENCH_PPROF/$1.pb.gz" 2>/dev/null &&
		rm -rf "${BENCH_PPROF:?}/$1" && log "pprof: $BENCH_PPROF/$1.pb.gz"
}

TL_PID=""
timeline_start() { # scenario
	[ -n "${BENCH_TIMELINE:-}" ] || return 0
	local kc=$KC
	[ -x "$kc" ] || kc=kubectl
	KUBECTL=$kc KUBECONFIG=${AS_KUBECONFIG:-${KUBECONFIG:-}} \
		python3 bench/timeline.py record "$OUT/$1.timeline.json" &
	TL_PID=$!
}
timeline_stop() {
	[ -n "$TL_PID" ] || return 0
	kill -TERM "$TL_PID" 2>/dev/null
	wait "$TL_PID" 2>/dev/null
	TL_PID=""
}

want() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; }

# <name>.run.json: the whole scenario, set-up and cleanup included (what the issue's
# figures divide by N): API server and controller CPU since the given starts, the
# controller's peak RSS, the wall time.
run_json() { # name api_cpu0 ctrl_cpu0 t0
	printf '{"api_cpu_s": %s, "controller_cpu_s": %s, "controller_peak_rss_mib": %s, "wall_s": %s}\n' \
		"$(awk -v a="$(proc_cpu "$API_PIDS")" -v b="$2" 'BEGIN { printf "%.2f", a - b }')" \
		"$(awk -v a="$(proc_cpu "${CTRL_PID:-0}")" -v b="$3" 'BEGIN { printf "%.2f", a - b }')" \
		"$(peak_rss_mib "${CTRL_PID:-0}")" \
		"$(awk -v a="$(date +%s.%N)" -v b="$4" 'BEGIN { printf "%.1f", a - b }')" >"$OUT/$1.run.json"
}

loadgen() { # name scenario args...
	local name=$1 ns="bench-${1//_/-}-$(date +%s)" api0 ctrl0 t0 rc; shift
	api0=$(proc_cpu "$API_PIDS") t0=$(date +%s.%N)
	pprof_start "$name"
	timeline_start "$name"
	start_ctrl "$ns"
	ctrl0=$(proc_cpu "${CTRL_PID:-0}")
	log "$name: $*"
	"$TOOLS/as-loadgen" --namespace "$ns" --controller-pid "${CTRL_PID:-0}" \
		--ns-wait "$NS_WAIT" "${LGFLAGS[@]}" "$@" --records "$OUT/$name.records.tsv" \
		--out "$OUT/$name.json"
	rc=$?
	run_json "$name" "$api0" "$ctrl0" "$t0"
	[ -z "${LG_AFTER:-}" ] || "$LG_AFTER" "$name" "$ns" || rc=1
	stop_ctrl
	timeline_stop
	pprof_stop "$name"
	return $rc
}

wait_quiet() { # pid max_s -> seconds until its CPU stayed under 2 % of a core for 3 s
	local t0 c prev n=0 i
	t0=$(date +%s.%N) prev=$(proc_cpu "$1")
	for ((i = 0; i < $2; i++)); do
		sleep 1
		c=$(proc_cpu "$1")
		if awk -v a="$c" -v b="$prev" 'BEGIN { exit !(a - b < 0.02) }'; then n=$((n + 1)); else n=0; fi
		prev=$c
		[ $n -ge 3 ] && [ $i -ge 4 ] && break
	done
	awk -v a="$(date +%s.%N)" -v b="$t0" -v q=$n 'BEGIN { printf "%.1f", a - b - (q >= 3 ? 3 : 0) }'
}

api_writes() { # -> the API server's POST, PUT, PATCH and DELETE requests so far
	"$KC" --kubeconfig "$AS_KUBECONFIG" get --raw /metrics 2>/dev/null |
		awk '/^apiserver_request_total\{/ && /verb="(POST|PUT|PATCH|DELETE)"/ { n += $NF } END { printf "%d", n }'
}

# After the scale run, before its namespace goes (LG_AFTER): the controller's RSS once idle
# (BENCH_SCALE_IDLE s, default 35: the extra workers end after 30 s without work), then a
# fresh controller on the same objects: its sync time (until its CPU is quiet), CPU, RSS
# once synced and once idle, and its peak. Written to NAME.memory.json.
scale_memory() { # name namespace
	local idle=${BENCH_SCALE_IDLE:-35} rss_idle sync_s cpu0 rss_sync rss_ridle hwm cpu api0 t0 w0 w1 rc=0
	sleep "$idle"
	rss_idle=$(status_mib "$CTRL_PID" VmRSS)
	stop_ctrl
	w0=$(api_writes)
	start_ctrl "$2"
	cpu0=$(proc_cpu "$CTRL_PID")
	sync_s=$(wait_quiet "$CTRL_PID" 600)
	rss_sync=$(status_mib "$CTRL_PID" VmRSS) w1=$(api_writes)
	cpu=$(awk -v a="$(proc_cpu "$CTRL_PID")" -v b="$cpu0" 'BEGIN { printf "%.2f", a - b }')
	sleep "$idle"
	rss_ridle=$(status_mib "$CTRL_PID" VmRSS) hwm=$(peak_rss_mib "$CTRL_PID")
	# a restarted controller that died fails the run, but the namespace still goes
	kill -0 "$CTRL_PID" 2>/dev/null || { log "$1: the restarted controller exited"; rc=1; }
	log "$1: RSS idle $rss_idle MiB; restart: synced in $sync_s s ($cpu CPU-s, $((w1 - w0)) API writes), RSS $rss_sync MiB, idle $rss_ridle MiB, peak $hwm MiB"
	# as the load generator does: wait for the namespace to be gone unless --ns-wait is 0;
	# its API CPU goes back into the run's whole (the restart's stays out)
	api0=$(proc_cpu "$API_PIDS") t0=$(date +%s.%N)
	"$KC" --kubeconfig "$AS_KUBECONFIG" delete namespace "$2" --wait="$([ "$NS_WAIT" = 0 ] && echo false || echo true)" \
		--timeout="$((NS_WAIT + 60))s" >/dev/null 2>&1 || log "$1: namespace $2 not gone yet"
	printf '{"idle_s": %s, "rss_idle_mib": %s, "restart_sync_s": %s, "restart_cpu_s": %s, "restart_rss_synced_mib": %s, "restart_rss_idle_mib": %s, "restart_peak_rss_mib": %s, "restart_api_writes": %s, "ns_delete_s": %s, "ns_delete_api_cpu_s": %s}\n' \
		"$idle" "$rss_idle" "$sync_s" "$cpu" "$rss_sync" "$rss_ridle" "$hwm" "$((w1 - w0))" \
		"$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')" \
		"$(awk -v a="$(proc_cpu "$API_PIDS")" -v b="$api0" 'BEGIN { printf "%.2f", a - b }')" >"$OUT/$1.memory.json"
	return $rc
}
scale() { # count timeout settle: on the standalone API server with the memory steps above
	if [ "$TARGET" = apiserver ]; then
		LG_AFTER=scale_memory loadgen scale_10k --scenario scale --count "$1" --threads 32 \
			--timeout "$2" --settle "$3" --keep
	else
		loadgen scale_10k --scenario scale --count "$1" --threads 32 --timeout "$2" --settle "$3"
	fi
}

# Sustained Poisson claims at rising rates (BENCH_SWEEP_RATES), 30 s each, one pool of
# 10 s worth of claims: the highest rate held with p99 <= 1 s. Stops at the first rate
# that misses it (or saturates).
sweep() {
	local rate p99
	for rate in ${BENCH_SWEEP_RATES:-5 10 20 40 80}; do
		loadgen "sweep_$rate" --scenario sustained --rate "$rate" --seconds 30 --dwell 5 \
			--pools 1 --pool-size $((rate * 10)) --threads 64 --timeout 300 || break
		p99=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(int(j.get("saturated") or (j.get("p99_ms") or 1e9) > 1000))' \
			"$OUT/sweep_$rate.json" 2>/dev/null || echo 1)
		[ "$p99" = 0 ] || break
	done
}

# The Python SDK in its venv (as sdk/python/run-tests.sh makes it), for sdkprobe.
sdk_python() {
	local venv=${AGENT_SANDBOX_VENV:-$ROOT/.cache/pysdk-venv}
	if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import agent_sandbox_sdk' 2>/dev/null; then
		python3 -m venv "$(realpath -m "$venv")" && "$venv/bin/pip" install -q --disable-pip-version-check -e "$ROOT/sdk/python" >&2 ||
			return 1
	fi
	echo "$venv/bin/python"
}

# The Go SDK's probe (bench/sdkprobe-go, built against sdk/go), for sdkprobego: built once
# per source (its own and the SDK's) into the tools dir.
sdk_go_probe() {
	local key bin
	key=$(find "$ROOT/bench/sdkprobe-go" "$ROOT/sdk/go" -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) \
		-not -name '*_test.go' | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)
	bin=$TOOLS/sdkprobe-go-$key
	if [ ! -x "$bin" ]; then
		(
			# shellcheck source=hack/lib.sh disable=SC1091
			source "$ROOT/hack/lib.sh" && ensure_go &&
				cd "$ROOT/bench/sdkprobe-go" && GOFLAGS=-mod=mod go build -trimpath -o "$bin.tmp" .
		) >&2 && mv "$bin.tmp" "$bin" || return 1
	fi
	echo "$bin"
}

# A scenario of an SDK on an idle pool that as-loadgen serves (--scenario serve-pool: the
# pool and, without nodes, the simulated kubelet): a script of the Python SDK
# (bench/sdk_probe.py, bench/sdk_burst.py; run in its venv) or a program (bench/sdkprobe-go,
# the path of its binary); it gets the kubeconfig, the namespace, its own arguments and
# --out, --records in $OUT.
sdk_scenario() { # name script|binary pool-size [script args...]
	local name=$1 script=$2 size=$3 ns="bench-${1//_/-}-$(date +%s)" py lg rc=1 api0 ctrl0 t0 cmd
	shift 3
	case $script in
	*.py)
		py=$(sdk_python) || { log "$name: no Python SDK venv"; return 1; }
		cmd=("$py" "bench/$script")
		;;
	*) cmd=("$script") ;;
	esac
	api0=$(proc_cpu "$API_PIDS") t0=$(date +%s.%N)
	timeline_start "$name"
	start_ctrl "$ns"
	ctrl0=$(proc_cpu "${CTRL_PID:-0}")
	log "$name: $*"
	"$TOOLS/as-loadgen" --namespace "$ns" --scenario serve-pool --pool-size "$size" --seconds 1800 \
		--ns-wait "$NS_WAIT" "${LGFLAGS[@]}" --out "$OUT/$name.pool.json" >"$OUT/$name.pool.out" 2>&1 &
	lg=$!
	for _ in $(seq 1200); do
		grep -q '^ready$' "$OUT/$name.pool.out" 2>/dev/null && break
		kill -0 "$lg" 2>/dev/null || break
		sleep 0.1
	done
	if grep -q '^ready$' "$OUT/$name.pool.out" 2>/dev/null; then
		"${cmd[@]}" --kubeconfig "$KUBECONFIG" --namespace "$ns" "$@" \
			--out "$OUT/$name.json" --records "$OUT/$name.records.tsv"
		rc=$?
	else
		log "$name: the pool did not become Ready (see $OUT/$name.pool.out)"
	fi
	kill -TERM "$lg" 2>/dev/null
	wait "$lg"
	run_json "$name" "$api0" "$ctrl0" "$t0"
	stop_ctrl
	timeline_stop
	return $rc
}

# One warm claim at a time through the Python SDK (SandboxClient.create with and without
# the early hand-out, alternating) on an idle pool of 2.
sdkprobe() { # claims per mode
	sdk_scenario sdk_probe sdk_probe.py 2 --count "$1"
}

# The same through the Go SDK (Client.CreateSandbox with and without
# Options.WaitForClaimReady, alternating).
sdkprobego() { # claims per mode
	local bin
	bin=$(sdk_go_probe) || { log "sdk_probe_go: cannot build bench/sdkprobe-go"; return 1; }
	sdk_scenario sdk_probe_go "$bin" 2 --count "$1"
}

# N warm claims at once through one AsyncSandboxClient on an idle pool of N, in rounds.
sdkburst() { # claims at once, rounds
	sdk_scenario sdk_burst sdk_burst.py "$1" --count "$1" --rounds "$2" --api-pids "$API_PIDS"
}

NS_WAIT=${BENCH_NS_WAIT:-$([ "$SMOKE" = 1 ] && echo 0 || echo 900)}

run_all() {
	local small=$SMOKE
	if [ "$small" = 1 ]; then
		want warm300 && loadgen warm_burst_300 --scenario warm-burst --count 30 --timeout 60
		want sustained && loadgen sustained --scenario sustained --rate 10 --seconds 5 --dwell 1 --timeout 60
		want cold && loadgen cold --scenario cold --count 30 --timeout 60
		want probe && loadgen probe --scenario probe --count 5 --timeout 60
		want claimprobe && loadgen claim_probe --scenario claim-probe --count 5 --timeout 60
		want sdkprobe && sdkprobe 3
		want sdkprobego && sdkprobego 3
		want sdkburst && sdkburst 5 1
		want scale && BENCH_SCALE_IDLE=${BENCH_SCALE_IDLE:-2} scale 200 60 2
	else
		want warm300 && loadgen warm_burst_300 --scenario warm-burst --count "${BENCH_WARM_COUNT:-300}"
		want warm1000 && loadgen warm_burst_1000 --scenario warm-burst --count 1000 --timeout 600
		want sustained && loadgen sustained --scenario sustained --rate "$RATE" --seconds 60 --dwell 5 \
			--pools 4 --pool-size 750 --threads 256 --timeout 300
		want sustained && loadgen sustained_low --scenario sustained --rate "$RATE_LOW" --seconds 60 \
			--dwell 5 --pools 4 --pool-size 150 --threads 64 --timeout 300
		want cold && loadgen cold --scenario cold --count "${BENCH_COLD_COUNT:-300}"
		want probe && loadgen probe --scenario probe --count "${BENCH_PROBE_COUNT:-20}" --timeout 60
		want claimprobe && loadgen claim_probe --scenario claim-probe \
			--count "${BENCH_PROBE_COUNT:-20}" --timeout 60
		want sdkprobe && sdkprobe "${BENCH_PROBE_COUNT:-20}"
		want sdkprobego && sdkprobego "${BENCH_PROBE_COUNT:-20}"
		want sdkburst && sdkburst "${BENCH_SDK_BURST:-40}" 3
		want sweep && sweep
		want scale && scale "$SCALE" 1800 10
		if want router && command -v wrk >/dev/null; then
			BUILD_DIR=$BUILD bench/router/run.sh 10 50 2 >"$OUT/router.md" 2>"$OUT/router.err" || true
		fi
		if want sandboxd; then
			py=$(hack/grpc-venv.sh 2>/dev/null || echo python3)
			"$py" bench/sandboxd/bench.py --bin "$BUILD/sandboxd" --runs 1000 --mb 64 \
				>"$OUT/sandboxd.json" 2>"$OUT/sandboxd.err" || true
		fi
	fi
}

build || { log "build failed"; exit 1; }
setup_target || { log "target $TARGET not reachable"; exit 1; }
T0=$(date +%s)
run_all
python3 bench/assemble.py --dir "$OUT" --target "$TARGET" --smoke "$SMOKE" --build "$BUILD" \
	--out "bench/results/$STAMP.json" || exit 1
cp "bench/results/$STAMP.json" bench/results/latest.json
log "results: bench/results/$STAMP.json ($(($(date +%s) - T0)) s)"
if [ $SMOKE = 1 ]; then
	python3 bench/assemble.py --check "bench/results/$STAMP.json"
	rc=$?
	if [ -n "${BENCH_TIMELINE:-}" ]; then
		tl=("$OUT"/*.timeline.json)
		if [ -e "${tl[0]}" ] && python3 bench/timeline.py check "${tl[@]}"; then
			echo "PASS timelines recorded (${#tl[@]})"
		else
			echo "FAIL timelines: none recorded, or one without samples or writes"
			rc=1
		fi
	fi
	exit $rc
fi
