#!/usr/bin/env bash
# Upstream's clients, unchanged, on the stack of `make up` (in-cluster controller and
# router; hack/stack.sh up):
# - upstream's Python SDK from PyPI (k8s-agent-sandbox[grpc], in a venv under .cache/
#   shared with tests/e2e/sandboxd_grpc.sh):
#   - default (no connection config): `kubectl port-forward svc/sandbox-router-svc` in
#     agent-sandbox-system, no Authorization header; claim, run, files, delete;
#   - direct (the router's URL, our token in extra_headers), in-cluster (legacy API on the
#     pod IP) and sandboxd in-cluster-service (gRPC + REST on the sandbox's headless
#     Service name): run and files on one claim, reattached in each mode
#     (sandboxd's pod-IP and pod-tunnel modes: tests/e2e/sandboxd_grpc.sh);
# - upstream's Go SDK (sigs.k8s.io/agent-sandbox v0.5.6, tests/e2e/upstream-go) with empty
#   Options: SPDY port-forward to the sandbox-router-svc of the sandbox's namespace;
# - the loopback trust behind the default modes stays narrow: a request from the network
#   without a token gets 401 (both routers), a user without pods/portforward on the router
#   pod cannot open the tunnel; `kubectl port-forward` to a sandbox pod works.
# Prints "dropin: N passed, N failed"; exits non-zero on failure.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
UPSTREAM_PY_SDK=${AS_UPSTREAM_PY_SDK:-k8s-agent-sandbox[grpc]==1.0.8}
VENV=${AS_E2E_SDK_VENV:-$ROOT/.cache/upstream-sdk-venv}
WORK=$(mktemp -d)
SYS_NS=agent-sandbox-system
DNS=as-e2e-dropin-$$ # the namespace of the claim reattached in each mode
stack_kubeconfig || { echo "the stack is not up (make up)" >&2; exit 1; }
export PATH=$ROOT/.cache/bin:$PATH # the Python SDK runs `kubectl port-forward`
PF_PIDS=()
cleanup() {
	local p
	for p in "${PF_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	k delete sandboxclaim -l e2e=dropin --ignore-not-found --wait=false >/dev/null 2>&1
	k delete namespace "$DNS" --ignore-not-found --wait=false >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import k8s_agent_sandbox, grpc' 2>/dev/null; then
	{ [ -x "$VENV/bin/python" ] || python3 -m venv "$(realpath -m "$VENV")"; } &&
		"$VENV/bin/python" -m pip install -q --disable-pip-version-check "$UPSTREAM_PY_SDK" >"$WORK/pip.log" 2>&1 ||
		{ not_ok "pip install $UPSTREAM_PY_SDK" "$(tail -3 "$WORK/pip.log")"; summary dropin; exit 1; }
fi

# --- upstream's Python SDK, default connection ----------------------------------------
cat >"$WORK/py_default.py" <<'PY'
import sys

from k8s_agent_sandbox import SandboxClient

def step(name, cond):
    print(("ok - " if cond else "not ok - ") + name, flush=True)
    if not cond:
        sys.exit(1)

with SandboxClient() as client:  # SandboxLocalTunnelConnectionConfig()
    sb = client.create_sandbox("python-pool", namespace="default", labels={"e2e": "dropin"})
    try:
        r = sb.commands.run("python3 -c 'print(6*7)'")
        step("run prints 42", r.stdout.strip() == "42" and r.exit_code == 0)
        data = b"bytes \x00\xff through the router\n"
        sb.files.write("py-sdk.bin", data)
        step("write then read returns the bytes", sb.files.read("py-sdk.bin") == data)
        step("list shows the file", "py-sdk.bin" in [e.name for e in sb.files.list(".")])
        step("exists", sb.files.exists("py-sdk.bin") and not sb.files.exists("nope.bin"))
    finally:
        sb.terminate()
    step("terminate deletes the claim", True)
PY
out=$(cd "$WORK" && timeout 300 "$VENV/bin/python" py_default.py 2>&1)
rc=$?
sed 's/^/    /' <<<"$out"
check "upstream Python SDK ($UPSTREAM_PY_SDK) in its default mode: claim, run, files, delete" \
	test "$rc" = 0

# --- upstream's Python SDK, its other modes -------------------------------------------
# A template with a headless Service (spec.service) and a pool in a namespace of their
# own; one claim, reattached (get_sandbox) in each mode.
k create namespace "$DNS" >/dev/null
k -n "$DNS" apply -f - >/dev/null <<YAML
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: python-svc}
spec:
  service: true
$(runtime_pod_template)
$EMPTYDIR_VOLUME
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: svc-pool}
spec: {replicas: 1, sandboxTemplateRef: {name: python-svc}}
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata: {name: modes}
spec: {warmPoolRef: {name: svc-pool}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: sandbox-user}
rules: [{apiGroups: [agents.x-k8s.io], resources: [sandboxes], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sandbox-user}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: sandbox-user}
subjects: [{kind: ServiceAccount, name: sandbox-user, namespace: default}]
YAML
cat >"$WORK/py_mode.py" <<'PY'
import sys

from k8s_agent_sandbox import SandboxClient
from k8s_agent_sandbox.models import (
    SandboxDirectConnectionConfig,
    SandboxdInClusterConnectionConfig,
    SandboxInClusterConnectionConfig,
)

mode, ns = sys.argv[1], sys.argv[2]
if mode == "direct":  # the router by URL, our token through extra_headers
    cfg = SandboxDirectConnectionConfig(
        api_url=sys.argv[3], extra_headers={"Authorization": "Bearer " + sys.argv[4]})
elif mode == "in-cluster":  # legacy python-runtime API on the pod IP, port 8888
    cfg = SandboxInClusterConnectionConfig()
else:  # sandboxd: gRPC :9090 + REST :8080 on the Service's DNS name
    cfg = SandboxdInClusterConnectionConfig(mode="in-cluster-service")
client = SandboxClient(connection_config=cfg)
sb = client.get_sandbox("modes", namespace=ns)
r = sb.commands.run("python3 -c 'print(6*7)'")
assert r.stdout.strip() == "42" and r.exit_code == 0, r
data = ("%s mode \x00\xff\n" % mode).encode("latin-1")
sb.files.write(mode + ".bin", data)
assert sb.files.read(mode + ".bin") == data
assert mode + ".bin" in [e.name for e in sb.files.list(".")]
assert sb.files.exists(mode + ".bin")
sb.close_connection()
print("ok")
PY
msb=""
if poll 180 k -n "$DNS" wait --for=condition=Ready sandboxclaim/modes --timeout=1s; then
	msb=$(k -n "$DNS" get sandboxclaim modes -o jsonpath='{.status.sandbox.name}')
	# The in-cluster modes run on this host: pod IPs are reachable, cluster DNS is not;
	# the driver's own mount namespace gets the Service's name as a hosts entry (a
	# headless Service resolves to the pod IP).
	fqdn=$(k -n "$DNS" get sandbox "$msb" -o jsonpath='{.status.serviceFQDN}')
	ip=$(k -n "$DNS" get sandbox "$msb" -o jsonpath='{.status.podIPs[0]}')
	{ cat /etc/hosts; echo "$ip $fqdn"; } >"$WORK/hosts"
	check "status.serviceFQDN names the Sandbox's headless Service" \
		test "$fqdn" = "$msb.$DNS.svc.cluster.local"
	rurl=$("$STACK" router-url)
	rtok=$("$STACK" router-token)
	for mode in direct in-cluster in-cluster-service; do
		if [ "$mode" = in-cluster-service ]; then
			out=$(cd "$WORK" && timeout 120 unshare -m sh -c \
				'mount --bind "$0" /etc/hosts && exec "$@"' "$WORK/hosts" \
				"$VENV/bin/python" py_mode.py "$mode" "$DNS" 2>&1)
		else
			out=$(cd "$WORK" && timeout 120 "$VENV/bin/python" py_mode.py "$mode" "$DNS" \
				"$rurl" "$rtok" 2>&1)
		fi
		if [ "$(tail -n 1 <<<"$out")" = ok ]; then
			ok "upstream Python SDK, $mode mode: run, files"
		else
			not_ok "upstream Python SDK, $mode mode: run, files" "$(tail -n 3 <<<"$out")"
		fi
	done
else
	not_ok "a claim on a pool with a headless Service becomes Ready" \
		"$(k -n "$DNS" get sandboxclaim modes -o jsonpath='{.status.conditions}')"
fi

# --- upstream's Go SDK, empty Options --------------------------------------------------
# Built once per source (kept in the per-user binary cache): a cold Go build of the SDK
# and its client-go dependencies takes about a minute.
ugo_key=$(cat "$ROOT"/tests/e2e/upstream-go/{main.go,go.mod,go.sum} | sha256sum | cut -c1-16)
ugo=${AGENT_SANDBOX_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-sandbox/bin}/upstream-go-$ugo_key
if [ -x "$ugo" ] || (mkdir -p "$(dirname "$ugo")" && cd "$ROOT/tests/e2e/upstream-go" &&
	go build -o "$ugo.tmp" . >"$WORK/go-build.log" 2>&1 && mv "$ugo.tmp" "$ugo"); then
	out=$(timeout 300 "$ugo" python-pool 2>&1)
	rc=$?
	sed 's/^/    /' <<<"$out"
	check "upstream Go SDK (v0.5.6) with empty Options: claim, run, files, delete" test "$rc" = 0
else
	not_ok "build tests/e2e/upstream-go (upstream Go SDK v0.5.6)" "$(tail -5 "$WORK/go-build.log")"
fi

# --- who may use the loopback trust ----------------------------------------------------
central=$(k -n "$SYS_NS" get service sandbox-router-svc -o jsonpath='{.spec.clusterIP}')
nsrouter=$(k -n default get service sandbox-router-svc -o jsonpath='{.spec.clusterIP}')
check "a request from the network without a token gets 401 (central router)" \
	http_is 401 "http://$central:8080/s/default/none/8080/v1/health"
check "a request from the network without a token gets 401 (namespace router)" \
	http_is 401 "http://$nsrouter:8080/s/default/none/8080/v1/health"
# A port-forward into the router pod reaches it over loopback: no token needed.
lp=$(free_port 28500)
kubectl --kubeconfig "$KUBECONFIG" -n "$SYS_NS" port-forward svc/sandbox-router-svc "$lp:8080" \
	>"$WORK/pf.log" 2>&1 &
PF_PIDS+=($!)
check "kubectl port-forward to the router Service: a token-less request is served (404 for an unknown sandbox)" \
	poll 30 http_is 404 "http://127.0.0.1:$lp/s/default/none/8080/v1/health"
utok=$(k -n default create token sandbox-user)
check "the local user sandbox-user may not port-forward to the router pod (RBAC)" \
	eval "[ \"\$(k auth can-i create pods/portforward -n $SYS_NS --as=system:serviceaccount:default:sandbox-user)\" = no ]"
router_pod=$(k -n "$SYS_NS" get pods -l app=sandbox-router -o jsonpath='{.items[0].metadata.name}')
# A kubeconfig holding only sandbox-user's token (the admin kubeconfig's client
# certificate would otherwise authenticate the request).
k config view --raw --minify -o json | jq --arg t "$utok" \
	'.users[0].user = {token: $t} | .contexts[0].context.namespace = "default"' >"$WORK/user.kubeconfig"
pf_refused() {
	local out rc
	out=$(timeout 20 "$KUBECTL" --kubeconfig "$WORK/user.kubeconfig" -n "$SYS_NS" \
		port-forward "pod/$router_pod" 28999:8080 2>&1)
	rc=$?
	[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -qi forbidden <<<"$out"
}
check "and its port-forward to the router pod is refused (Forbidden)" pf_refused
# kubectl port-forward to a sandbox pod (the node's container runtime serves it): the
# Ready sandbox of the claim "modes" (its pod is named after it).
lp2=$(free_port $((lp + 1)))
kubectl --kubeconfig "$KUBECONFIG" -n "$DNS" port-forward "pod/${msb:-none}" "$lp2:8080" \
	>"$WORK/pf2.log" 2>&1 &
PF_PIDS+=($!)
check "kubectl port-forward to a sandbox pod reaches sandboxd" \
	poll 30 http_is 200 "http://127.0.0.1:$lp2/v1/health"

summary dropin
