#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Router memory with N Sandboxes in its watch cache (default 10,000): creates them in the
# standalone API server of hack/apiserver.sh (never the shared cluster), each Ready with
# status.podIPs written through /status, starts sandbox-router on that namespace, and
# reports the initial list+sync time and VmRSS/VmHWM, next to the same router on an
# empty namespace. A request to the last Sandbox (502: nothing listens on 127.0.0.1:9)
# shows it is in the cache. Needs a built sandbox-router (BUILD_DIR, default
# build/release).
#   bench/router/cache_rss.sh [count=10000]     KEEP=1 keeps the namespace afterwards
set -euo pipefail
cd "$(dirname "$0")/../.."
COUNT=${1:-10000}
BUILD_DIR=${BUILD_DIR:-build/release}
NS=router-cache-rss
EMPTY_NS=router-cache-empty
RT_PORT=18180
PROBE_PORT=18181
hack/apiserver.sh start >/dev/null
KCFG=$(hack/apiserver.sh kubeconfig)
TMP=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
	if [ "${KEEP:-0}" != 1 ]; then
		kubectl --kubeconfig "$KCFG" delete namespace "$NS" "$EMPTY_NS" --wait=false \
			--ignore-not-found >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT
k() { kubectl --kubeconfig "$KCFG" "$@"; }
k apply --server-side -f api/crds/agents.x-k8s.io_sandboxes.yaml >/dev/null
k wait --for=condition=Established crd/sandboxes.agents.x-k8s.io --timeout=60s >/dev/null
for n in "$NS" "$EMPTY_NS"; do
	# a previous run's namespace may still be going away
	if [ "$(k get namespace "$n" -o jsonpath='{.status.phase}' 2>/dev/null)" = Terminating ]; then
		k wait --for=delete "namespace/$n" --timeout=600s >/dev/null
	fi
	k create namespace "$n" --dry-run=client -o yaml | k apply -f - >/dev/null
done

# Sandboxes: create, then status (Ready, podIPs) through the /status subresource; 16
# connections in parallel. Existing ones (a KEEP=1 run) are only re-statused.
t0=$(date +%s.%N)
python3 - "$KCFG" "$NS" "$COUNT" "$TMP" <<'PY'
import base64, concurrent.futures, http.client, json, re, ssl, sys, threading, urllib.parse

kcfg, ns, count, tmp = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
text = open(kcfg).read()
def field(name: str) -> str:
    m = re.search(rf"{name}:\s*(\S+)", text)
    assert m, name
    return m.group(1)
for name, fn in (("certificate-authority-data", "ca"), ("client-certificate-data", "crt"),
                 ("client-key-data", "key")):
    with open(f"{tmp}/{fn}.pem", "wb") as f:
        f.write(base64.b64decode(field(name)))
server = urllib.parse.urlsplit(field("server"))
ctx = ssl.create_default_context(cafile=f"{tmp}/ca.pem")
ctx.load_cert_chain(f"{tmp}/crt.pem", f"{tmp}/key.pem")
local = threading.local()

def conn() -> http.client.HTTPSConnection:
    if not hasattr(local, "c"):
        local.c = http.client.HTTPSConnection(server.hostname, server.port, context=ctx, timeout=60)
    return local.c

def call(method: str, path: str, body: dict, ctype: str) -> int:
    for _ in range(5):
        try:
            c = conn()
            c.request(method, path, json.dumps(body), {"Content-Type": ctype})
            r = c.getresponse()
            r.read()
            if r.status == 429 or r.status >= 500:
                continue
            return r.status
        except (OSError, http.client.HTTPException):
            local.__dict__.pop("c", None)
    return 0

base = f"/apis/agents.x-k8s.io/v1beta1/namespaces/{ns}/sandboxes"
status = {"status": {"podIPs": ["127.0.0.1"], "conditions": [{
    "type": "Ready", "status": "True", "reason": "DependenciesReady", "message": "Pod is Ready",
    "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}],
    "selector": "agents.x-k8s.io/sandbox-name-hash=00000000", "replicas": 1}}

def one(i: int) -> bool:
    name = f"sb-{i:05d}"
    obj = {"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
           "metadata": {"name": name, "labels": {"app": "cache-rss", "index": str(i)}},
           "spec": {"podTemplate": {"spec": {"containers": [{
               "name": "sandbox", "image": "localhost/agent-sandbox/runtime:dev",
               "ports": [{"containerPort": 8888}]}]}}}}
    if call("POST", base, obj, "application/json") not in (201, 409):
        return False
    return call("PATCH", f"{base}/{name}/status", status, "application/merge-patch+json") == 200

with concurrent.futures.ThreadPoolExecutor(16) as ex:
    bad = sum(1 for ok in ex.map(one, range(count)) if not ok)
if bad:
    sys.exit(f"{bad} of {count} Sandboxes could not be created")
PY
t1=$(date +%s.%N)
have=$(k get sandboxes -n "$NS" --no-headers 2>/dev/null | wc -l)
printf 'created %d Sandboxes (%d in the namespace) in %.1f s\n' "$COUNT" "$have" "$(echo "$t1 - $t0" | bc)"

# measure NS: starts the router on NS, waits for /readyz (list + sync), then 2 s more.
measure() {
	local t0 t1 pid
	t0=$(date +%s.%N)
	"$BUILD_DIR/sandbox-router" --kubeconfig "$KCFG" --namespace "$1" --auth none \
		--http-bind-address 127.0.0.1:$RT_PORT --health-probe-bind-address 127.0.0.1:$PROBE_PORT \
		--allow-loopback-upstreams --access-log false --log-level warn 2>"$TMP/router.log" &
	pid=$!
	pids+=("$pid")
	until curl -sf "http://127.0.0.1:$PROBE_PORT/readyz" >/dev/null 2>&1; do
		kill -0 "$pid" 2>/dev/null || { cat "$TMP/router.log" >&2 && exit 1; }
		sleep 0.02
	done
	t1=$(date +%s.%N)
	sleep 2
	local rss hwm
	rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
	hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
	printf '| %-24s | %8.2f s | %7.1f MiB | %7.1f MiB |\n' "$2" "$(echo "$t1 - $t0" | bc)" \
		"$(echo "$rss / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)"
	if [ "$1" = "$NS" ]; then
		last=$(printf 'sb-%05d' $((COUNT - 1)))
		code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$RT_PORT/s/$NS/$last/9/")
		miss=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$RT_PORT/s/$NS/sb-none/9/")
		echo "  $last -> $code (cached, nothing listens), sb-none -> $miss" >"$TMP/check"
	fi
	kill "$pid"
	wait "$pid" 2>/dev/null || true
}
echo "| router cache | start to ready | VmRSS | VmHWM |"
echo "|---|---:|---:|---:|"
measure "$EMPTY_NS" "0 Sandboxes"
measure "$NS" "$COUNT Sandboxes"
cat "$TMP/check"
grep -q " -> 502 .*sb-none -> 404" "$TMP/check"
