#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Router benchmark: wrk against a tiny local upstream, directly and through
# sandbox-router (path form, --auth=none and --auth=tokenreview with a cached token),
# on 127.0.0.1 only. Needs hack/apiserver.sh running, a built sandbox-router
# (BUILD_DIR, default build/release) and wrk (apt package wrk). The CPU columns are the
# serving process's user+system time per request, from /proc/<pid>/stat.
#   bench/router/run.sh [duration_s=10] [connections=50] [threads=2]
set -euo pipefail
cd "$(dirname "$0")/../.."
DUR=${1:-10}
CONNS=${2:-50}
THREADS=${3:-2}
BUILD_DIR=${BUILD_DIR:-build/release}
KCFG=${AS_KUBECONFIG:-.cache/apiserver/kubeconfig}
UP_PORT=18888
RT_PORT=18080
PROBE_PORT=18081
NS=router-bench
TMP=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT

cc -O2 -o "$TMP/upstream" bench/router/upstream.c -luv
"$TMP/upstream" $UP_PORT &
pids+=($!)

k() { kubectl --kubeconfig "$KCFG" "$@"; }
k apply --server-side -f api/crds/agents.x-k8s.io_sandboxes.yaml >/dev/null
k create namespace $NS --dry-run=client -o yaml | k apply -f - >/dev/null
cat <<YAML | k apply -n $NS -f - >/dev/null
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata: {name: bench}
spec: {podTemplate: {spec: {containers: [{name: main, image: example}]}}}
YAML
k patch sandbox bench -n $NS --subresource=status --type=merge -p \
  '{"status":{"podIPs":["127.0.0.1"],"conditions":[{"type":"Ready","status":"True","reason":"DependenciesReady","message":"bench","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}' >/dev/null

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

run_wrk() { # name url pid [header]
    local out t0 t1
    t0=$(cpu_ticks "$3")
    if [ -n "${4:-}" ]; then
        out=$(wrk -t"$THREADS" -c"$CONNS" -d"${DUR}s" --latency -H "$4" "$2")
    else
        out=$(wrk -t"$THREADS" -c"$CONNS" -d"${DUR}s" --latency "$2")
    fi
    t1=$(cpu_ticks "$3")
    local rps p50 p99 reqs cpu
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1=="50%" {print $2}' <<<"$out")
    p99=$(awk '$1=="99%" {print $2}' <<<"$out")
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    cpu=$(awk -v t=$((t1 - t0)) -v n="$reqs" -v hz="$(getconf CLK_TCK)" \
        'BEGIN { printf "%.1f us", n ? t * 1e6 / hz / n : 0 }')
    local non2xx
    non2xx=$(awk '/Non-2xx/ {print $5}' <<<"$out")
    printf '| %-34s | %10s | %8s | %8s | %10s | %s |\n' "$1" "$rps" "$p50" "$p99" "$cpu" "${non2xx:-0}"
}

start_router() { # auth-mode [access-log=false]
    "$BUILD_DIR/sandbox-router" --kubeconfig "$KCFG" --namespace $NS --auth "$1" \
        --http-bind-address 127.0.0.1:$RT_PORT --health-probe-bind-address 127.0.0.1:$PROBE_PORT \
        --allow-loopback-upstreams --access-log "${2:-false}" --log-level info 2>"$TMP/router.log" &
    pids+=($!)
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$PROBE_PORT/readyz" >/dev/null && return 0
        sleep 0.1
    done
    echo "router did not become ready" >&2
    cat "$TMP/router.log" >&2
    exit 1
}

UP_PID=${pids[0]}
echo "| target (c=$CONNS, t=$THREADS, ${DUR}s) | req/s | p50 | p99 | CPU/req | non-2xx |"
echo "|---|---:|---:|---:|---:|---:|"
run_wrk "direct (upstream CPU)" "http://127.0.0.1:$UP_PORT/x" "$UP_PID"
start_router none
run_wrk "router --auth=none (router CPU)" "http://127.0.0.1:$RT_PORT/s/$NS/bench/$UP_PORT/x" "${pids[-1]}"
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
start_router none true
run_wrk "router --auth=none, access log on" "http://127.0.0.1:$RT_PORT/s/$NS/bench/$UP_PORT/x" "${pids[-1]}"
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
start_router tokenreview true
TOKEN=$(awk -F, '$2=="alice" {print $1}' .cache/apiserver/tokens.csv 2>/dev/null || true)
if [ -n "$TOKEN" ]; then
    k create clusterrolebinding router-bench-alice --clusterrole=cluster-admin --user=alice \
        --dry-run=client -o yaml | k apply -f - >/dev/null
    run_wrk "router --auth=tokenreview, access log" "http://127.0.0.1:$RT_PORT/s/$NS/bench/$UP_PORT/x" \
        "${pids[-1]}" "Authorization: Bearer $TOKEN"
fi
