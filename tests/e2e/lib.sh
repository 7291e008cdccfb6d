# Helpers shared by the shell test suites: tests/e2e/*.sh (on the stack of `make up`) and
# tests/install/lib.sh. Source it; it defines functions and the counters only, and runs
# nothing. Function names are stable: other suites source this file.
# shellcheck shell=bash disable=SC2034
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STACK=$ROOT/hack/stack.sh
KUBECTL=${KUBECTL:-$ROOT/.cache/bin/kubectl}
RUNTIME_IMAGE=localhost/agent-sandbox/runtime:dev
passed=0 failed=0 skipped=0
T0=$SECONDS

# --- results: "ok   - NAME [Ns]", "FAIL - NAME: DETAIL", "skip - NAME: WHY" ------------
k() { "$KUBECTL" "$@"; }
ok() {
	passed=$((passed + 1))
	echo "ok   - $1 [$((SECONDS - T0))s]"
}
not_ok() { # NAME [DETAIL]
	failed=$((failed + 1))
	echo "FAIL - $1${2:+: $2}"
}
skip() { # NAME [WHY]
	skipped=$((skipped + 1))
	echo "skip - $1${2:+: $2}"
}
check() { # NAME CMD...
	local name=$1
	shift
	if "$@"; then ok "$name"; else not_ok "$name"; fi
}
check_not() { # NAME CMD...: passes when CMD fails
	local name=$1
	shift
	if "$@"; then not_ok "$name"; else ok "$name"; fi
}
# poll SECONDS CMD...: retries CMD every 0.2 s until it succeeds.
poll() {
	local end=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.2
	done
}
info() { printf '# %s\n' "$*"; }
# free_port START: the first port >= START nothing on 127.0.0.1 listens on.
free_port() {
	local p=$1
	while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
	echo "$p"
}
# summary SUITE: the "SUITE: N passed, N failed" line hack/test.sh counts (after a blank
# line and the skipped count, if any); returns non-zero when a check failed.
summary() {
	echo
	[ "$skipped" -eq 0 ] || echo "$1: $skipped skipped"
	echo "$1: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}

# --- the stack of `make up` (hack/stack.sh) -------------------------------------------
# stack_kubeconfig: exports KUBECONFIG of the stack's cluster; fails when it is not up.
stack_kubeconfig() {
	KUBECONFIG=$("$STACK" kubeconfig) || return 1
	export KUBECONFIG
}
# stack_router: sets ROUTER (the router's URL) and TOKEN (a bearer token of the local
# user sandbox-user); fails without a token.
stack_router() {
	ROUTER=$("$STACK" router-url)
	TOKEN=$("$STACK" router-token) || return 1
}

# --- objects --------------------------------------------------------------------------
# runtime_pod_template [CONTAINER-YAML] [SECURITY-CONTEXT-EXTRA]: the podTemplate of a
# Sandbox or SandboxTemplate spec (indented for it): one container "sandbox" running
# sandboxd from the runtime image as uid 1000 (API 8080, legacy API 8888, root /workspace,
# ready on /v1/health). CONTAINER-YAML: more lines of the container (indented by 8);
# SECURITY-CONTEXT-EXTRA: more fields of the pod's securityContext (", key: value").
# The workspace volume is the caller's (volumes or volumeClaimTemplates).
# shellcheck disable=SC2120 # the arguments are optional
runtime_pod_template() {
	cat <<YAML
  podTemplate:
    spec:
      automountServiceAccountToken: false
      securityContext: {runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, runAsNonRoot: true${2:-}}
      containers:
      - name: sandbox
        image: $RUNTIME_IMAGE
        imagePullPolicy: Never
        command: [/usr/local/bin/sandboxd, --root, /workspace, --port, "8080", --legacy-port, "8888"]
        env: [{name: HOME, value: /workspace}]
        readinessProbe: {httpGet: {path: /v1/health, port: 8080}, periodSeconds: 1}
        volumeMounts: [{name: workspace, mountPath: /workspace}]
YAML
	[ -z "${1:-}" ] || printf '%s\n' "$1"
}
EMPTYDIR_VOLUME='      volumes: [{name: workspace, emptyDir: {}}]'
# The spec tail of a Sandbox whose workspace is a 1Gi PVC without a storage class, as in
# upstream's examples: the cluster's default StorageClass provisions it (on the local
# cluster "standard", local-path-provisioner).
PVC_WORKSPACE="  volumeClaimTemplates:
  - metadata: {name: workspace}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}"
# pvc_volume NAMESPACE PVC: the PersistentVolume bound to the claim.
pvc_volume() { k -n "$1" get pvc "$2" -o jsonpath='{.spec.volumeName}'; }

# --- reading objects --------------------------------------------------------------------
# cond KIND NAME TYPE [FIELD]: FIELD (default status) of the condition TYPE of KIND/NAME.
cond() {
	k get "$1" "$2" -o jsonpath="{.status.conditions[?(@.type==\"$3\")].${4:-status}}"
}
# cond_is KIND NAME TYPE FIELD WANT: the condition's FIELD equals WANT now (re-read on
# every call, so it can be polled).
cond_is() { [ "$(cond "$1" "$2" "$3" "$4")" = "$5" ]; }
# is_ready KIND/NAME: the Ready condition is True now (kubectl wait of 1 s; use with poll).
is_ready() { k wait --for=condition=Ready "$1" --timeout=1s; }
# claim_sandbox CLAIM: the name of the Sandbox a SandboxClaim is bound to.
claim_sandbox() { k get sandboxclaim "$1" -o jsonpath='{.status.sandbox.name}'; }
# launch_type SANDBOX: its agents.x-k8s.io/launch-type label (warm or cold).
launch_type() { k get sandbox "$1" -o jsonpath='{.metadata.labels.agents\.x-k8s\.io/launch-type}'; }

# --- requests through the router -----------------------------------------------------
# router_req METHOD SANDBOX PORT PATH [curl args...]: a request through $ROUTER with
# $TOKEN to SANDBOX in $NS (header form).
router_req() {
	local m=$1 sb=$2 port=$3 path=$4
	shift 4
	curl -sS -X "$m" -H "Authorization: Bearer $TOKEN" -H "X-Sandbox-ID: $sb" \
		-H "X-Sandbox-Namespace: $NS" -H "X-Sandbox-Port: $port" "$ROUTER$path" "$@"
}
# py_cmd CODE: the JSON body of POST /v1/processes/run for python3 -c CODE.
py_cmd() { jq -cn --arg c "$1" '{command: ["python3", "-c", $c]}'; }
# router_py SANDBOX CODE [curl args...]: stdout of python3 -c CODE in SANDBOX, through the
# router.
router_py() {
	local sb=$1 code=$2
	shift 2
	router_req POST "$sb" 8080 /v1/processes/run -H 'content-type: application/json' \
		-d "$(py_cmd "$code")" "$@" | jq -r .stdout
}
# http_code URL [curl args...]: the HTTP status (000 when unreachable).
http_code() {
	local u=$1
	shift
	curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@" "$u" 2>/dev/null || true
}
http_is() { [ "$(http_code "${@:2}")" = "$1" ]; } # CODE URL [curl args...]
