#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Router benchmark: wrk against a tiny local upstream, directly and through
# sandbox-router (path form, --auth=none and --auth=tokenreview with a cached token),
# on 127.0.0.1 only. Needs hack/apiserver.sh running, a built sandbox-router
# (BUILD_DIR, default build/release) and wrk (apt package wrk).
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

run_wrk() { # name url [header]
    local out
    if [ -n "${3:-}" ]; then
        out=$(wrk -t"$THREADS" -c"$CONNS" -d"${DUR}s" --latency -H "$3" "$2")
    else
        out=$(wrk -t"$THREADS" -c"$CONNS" -d"${DUR}s" --latency "$2")
    fi
    local rps p50 p99
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1=="50%" {print $2}' <<<"$out")
    p99=$(awk '$1=="99%" {print $2}' <<<"$out")
    local non2xx
    non2xx=$(awk '/Non-2xx/ {print $5}' <<<"$out")
    printf '| %-28s | %10s | %8s | %8s | %s |\n' "$1" "$rps" "$p50" "$p99" "${non2xx:-0}"
}

start_router() { # auth-mode
    "$BUILD_DIR/sandbox-router" --kubeconfig "$KCFG" --namespace $NS --auth "$1" \
        --http-bind-address 127.0.0.1:$RT_PORT --health-probe-bind-address 127.0.0.1:$PROBE_PORT \
        --allow-loopback-upstreams --access-log false --log-level warn 2>"$TMP/router.log" &
    pids+=($!)
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$PROBE_PORT/readyz" >/dev/null && return 0
        sleep 0.1
    done
    echo "router did not become ready" >&2
    cat "$TMP/router.log" >&2
    exit 1
}

echo "| target (c=$CONNS, t=$THREADS, ${DUR}s) | req/s | p50 | p99 | non-2xx |"
echo "|---|---:|---:|---:|---:|"
run_wrk "direct" "http://127.0.0.1:$UP_PORT/x"
start_router none
run_wrk "router --auth=none" "http://127.0.0.1:$RT_PORT/s/$NS/bench/$UP_PORT/x"
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
start_router tokenreview
TOKEN=$(awk -F, '$2=="alice" {print $1}' .cache/apiserver/tokens.csv 2>/dev/null || true)
if [ -n "$TOKEN" ]; then
    k create clusterrolebinding router-bench-alice --clusterrole=cluster-admin --user=alice \
        --dry-run=client -o yaml | k apply -f - >/dev/null
    run_wrk "router --auth=tokenreview" "http://127.0.0.1:$RT_PORT/s/$NS/bench/$UP_PORT/x" \
        "Authorization: Bearer $TOKEN"
fi
