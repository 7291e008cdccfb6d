#!/usr/bin/env bash
# End-to-end tests of idle auto-suspend and resume on traffic on the stack of `make up`
# (hack/stack.sh up): a Sandbox with a 10 s idle policy suspends after idling and keeps
# its PVC data; a request through the router resumes it and gets the right answer; a
# running process keeps it awake; 20 concurrent requests to a suspended sandbox cause one
# resume and all succeed; resumeOnTraffic=false answers 409. Prints resume latency
# (first held request to its response) and "N passed, N failed"; exits non-zero on failure.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
stack_kubeconfig || exit 1
stack_router || exit 1
NS=default
WORK=$(mktemp -d)

# sandbox NAME POLICY-JSON [SPEC-TAIL-YAML]
sandbox() {
	k apply -f - >/dev/null <<YAML
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata: {name: $1, namespace: $NS}
spec:
  idlePolicy: $2
$(runtime_pod_template)
${3:-$EMPTYDIR_VOLUME}
YAML
}

# Requests wait up to 150 s: the router holds them while a sandbox resumes.
rt() { router_req "$1" "$2" 8080 "$3" -m 150 "${@:4}"; } # METHOD SANDBOX PATH [curl args...]
run_py() { router_py "$1" "$2" -m 150; }                 # SANDBOX CODE
mode() { k get sandbox "$1" -o jsonpath='{.spec.operatingMode}'; }
suspended() { [ "$(mode "$1")" = Suspended ]; }
pod_gone() { ! k get pod "$1" >/dev/null 2>&1; }

cleanup() {
	k delete sandbox idle-store idle-busy idle-burst idle-noresume --ignore-not-found \
		--wait=false >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT

# --- suspend after idling, PVC data kept, resume on traffic --------------------------
sandbox idle-store '{timeoutSeconds: 10}' "$PVC_WORKSPACE"
sandbox idle-busy '{timeoutSeconds: 10}'
sandbox idle-burst '{timeoutSeconds: 10}'
sandbox idle-noresume '{timeoutSeconds: 10, resumeOnTraffic: false}'
for s in idle-store idle-busy idle-burst idle-noresume; do
	check "$s becomes Ready" poll 120 is_ready "sandbox/$s"
done
check "data written through the router" \
	test "$(run_py idle-store 'open("/workspace/data.txt","w").write("kept"); print("w")')" = w
# A process that outlives the timeout keeps idle-busy awake.
rt POST idle-busy /v1/processes -H 'content-type: application/json' \
	-d '{"command":["sleep","120"]}' >"$WORK/busy.ndjson" 2>&1 &
busy_pid=$!
t_idle=$SECONDS
check "an idle sandbox is suspended after its timeout" poll 60 suspended idle-store
echo "  (suspended $((SECONDS - t_idle)) s after the last request; timeout 10 s)"
check "its pod is deleted" poll 60 pod_gone idle-store
pvc_kept() { k get pvc workspace-idle-store >/dev/null 2>&1; }
check "its PVC is kept" pvc_kept
check "Suspended condition says IdleTimeout" poll 30 cond_is sandbox idle-store Suspended reason IdleTimeout
check "a sandbox with a running process stays awake" test "$(mode idle-busy)" = Running

# Resume on traffic: the request is held and answered.
t1=$(date +%s.%N)
out=$(run_py idle-store 'print(open("/workspace/data.txt").read())')
t2=$(date +%s.%N)
check "a request through the router resumes it and gets the answer" test "$out" = kept
echo "  resume latency (held request to response): $(echo "$t2 - $t1" | bc) s"
check "it is Running again" test "$(mode idle-store)" = Running
check "no stale Suspended=True after resume" test "$(cond sandbox idle-store Suspended)" != True

# --- resumeOnTraffic: false --------------------------------------------------------
check "idle-noresume is suspended after its timeout" poll 60 suspended idle-noresume
code=$(rt GET idle-noresume /v1/health -s -o "$WORK/409.json" -w '%{http_code}')
check "a request to it gets 409" test "$code" = 409
check "the 409 says why" grep -q resumeOnTraffic "$WORK/409.json"
check "it stays suspended" test "$(mode idle-noresume)" = Suspended

# --- 20 concurrent requests to a suspended sandbox ---------------------------------
check "idle-burst is suspended" poll 60 suspended idle-burst
poll 60 pod_gone idle-burst
gen0=$(k get sandbox idle-burst -o jsonpath='{.metadata.generation}')
lat=$WORK/lat.txt
for i in $(seq 1 20); do
	(
		s=$(date +%s.%N)
		o=$(run_py idle-burst "print($i*2)")
		e=$(date +%s.%N)
		[ "$o" = "$((i * 2))" ] && echo "$(echo "$e - $s" | bc)" >>"$lat"
	) &
done
wait $(jobs -p | grep -v "^$busy_pid\$") 2>/dev/null
n_ok=$(wc -l <"$lat" 2>/dev/null || echo 0)
check "20 concurrent requests all succeed ($n_ok/20)" test "$n_ok" -eq 20
gen1=$(k get sandbox idle-burst -o jsonpath='{.metadata.generation}')
check "one resume for all 20 (generation $gen0 -> $gen1)" test "$((gen1 - gen0))" -eq 1
if [ -s "$lat" ]; then
	sort -n "$lat" | awk '{ a[NR] = $1 } END { p50 = int(NR * 0.5 + 0.5); p99 = int(NR * 0.99 + 0.5)
		if (p50 < 1) p50 = 1; if (p99 < 1) p99 = 1
		printf "  resume latency over %d held requests: p50 %.2f s, p99 %.2f s\n", NR, a[p50], a[p99] }'
fi
check "idle-busy is still Running while its process runs" test "$(mode idle-busy)" = Running
kill "$busy_pid" 2>/dev/null
wait "$busy_pid" 2>/dev/null

summary idle
