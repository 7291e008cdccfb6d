#!/usr/bin/env bash
# Upstream's clients, unchanged, in their default modes on the stack of `make up`
# (in-cluster controller and router; hack/stack.sh up):
# - upstream's Python SDK from PyPI (k8s-agent-sandbox, in a venv under .cache/) with no
#   connection config: `kubectl port-forward svc/sandbox-router-svc` in agent-sandbox-system,
#   no Authorization header; claim, run, file write/read/list/exists, delete;
# - upstream's Go SDK (sigs.k8s.io/agent-sandbox v0.5.6, tests/e2e/upstream-go) with empty
#   Options: SPDY port-forward to the sandbox-router-svc of the sandbox's namespace;
# - the loopback trust behind both stays narrow: a request from the network without a
#   token gets 401 (both routers), a user without pods/portforward on the router pod cannot
#   open the tunnel, `kubectl port-forward` to a sandbox pod works.
# Prints "N passed, N failed"; exits non-zero on failure.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
UPSTREAM_PY_SDK=${AS_UPSTREAM_PY_SDK:-k8s-agent-sandbox==1.0.8}
VENV=$ROOT/.cache/venvs/upstream-sdk
WORK=$(mktemp -d)
SYS_NS=agent-sandbox-system
stack_kubeconfig || { echo "the stack is not up (make up)" >&2; exit 1; }
export PATH=$ROOT/.cache/bin:$PATH # the Python SDK runs `kubectl port-forward`
PF_PIDS=()
cleanup() {
	local p
	for p in "${PF_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	k delete sandboxclaim -l e2e=dropin --ignore-not-found --wait=false >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT

# --- upstream's Python SDK, default connection ----------------------------------------
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import k8s_agent_sandbox' 2>/dev/null; then
	python3 -m venv "$VENV" && "$VENV/bin/pip" install -q --disable-pip-version-check "$UPSTREAM_PY_SDK" >"$WORK/pip.log" 2>&1 ||
		{ not_ok "pip install $UPSTREAM_PY_SDK" "$(tail -3 "$WORK/pip.log")"; summary dropin; exit 1; }
fi
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

# --- upstream's Go SDK, empty Options --------------------------------------------------
if (cd "$ROOT/tests/e2e/upstream-go" && go build -o "$WORK/upstream-go" . >"$WORK/go-build.log" 2>&1); then
	out=$(timeout 300 "$WORK/upstream-go" python-pool 2>&1)
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
# kubectl port-forward to a sandbox pod (the node's container runtime serves it).
sb=$(k get sandboxes -l agents.x-k8s.io/pool -o jsonpath='{.items[0].metadata.name}' 2>/dev/null)
[ -n "$sb" ] || sb=$(k get sandboxes -o jsonpath='{.items[0].metadata.name}')
pod=$(k get sandbox "$sb" -o jsonpath='{.metadata.annotations.agents\.x-k8s\.io/pod-name}')
[ -n "$pod" ] || pod=$sb
lp2=$(free_port $((lp + 1)))
kubectl --kubeconfig "$KUBECONFIG" port-forward "pod/$pod" "$lp2:8080" >"$WORK/pf2.log" 2>&1 &
PF_PIDS+=($!)
check "kubectl port-forward to a sandbox pod reaches sandboxd" \
	poll 30 http_is 200 "http://127.0.0.1:$lp2/v1/health"

summary dropin
