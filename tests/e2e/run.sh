#!/usr/bin/env bash
# End-to-end tests on the stack of `make up` (hack/stack.sh up): real sandboxes from the
# runtime image on the real node, reached through the router and the API server's pod
# proxy; storage across suspend/resume; warm-pool claims. Needs the stack up.
# Prints "N passed, N failed"; exits non-zero on failure.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STACK=$ROOT/hack/stack.sh
KUBECONFIG=$("$STACK" kubeconfig) || exit 1
export KUBECONFIG
KUBECTL=$ROOT/.cache/bin/kubectl
ROUTER=$("$STACK" router-url)
TOKEN=$("$STACK" router-token) || exit 1
NS=default
OTHER_NS=as-e2e-other-$$
PV_DIR=$ROOT/.cache/e2e/pv-$$
passed=0 failed=0
T0=$SECONDS

k() { "$KUBECTL" "$@"; }
ok() {
	passed=$((passed + 1))
	echo "ok   - $1 [$((SECONDS - T0))s]"
}
not_ok() {
	failed=$((failed + 1))
	echo "FAIL - $1${2:+: $2}"
}
check() { # NAME CMD...
	local name=$1
	shift
	if "$@"; then ok "$name"; else not_ok "$name"; fi
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

EMPTYDIR_VOLUME='      volumes: [{name: workspace, emptyDir: {}}]'
# sandbox NAME [NS] [SPEC-TAIL-YAML]: a Sandbox running sandboxd from the runtime image;
# SPEC-TAIL-YAML replaces the emptyDir workspace volume (e.g. volumeClaimTemplates).
sandbox() {
	local tail=${3:-$EMPTYDIR_VOLUME}
	cat <<YAML | k apply -f - >/dev/null
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata: {name: $1, namespace: ${2:-$NS}}
spec:
  podTemplate:
    spec:
      automountServiceAccountToken: false
      securityContext: {runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, runAsNonRoot: true}
      containers:
      - name: sandbox
        image: localhost/agent-sandbox/runtime:dev
        imagePullPolicy: Never
        command: [/usr/local/bin/sandboxd, --root, /workspace, --port, "8080", --legacy-port, "8888"]
        env: [{name: HOME, value: /workspace}]
        readinessProbe: {httpGet: {path: /v1/health, port: 8080}, periodSeconds: 1}
        volumeMounts: [{name: workspace, mountPath: /workspace}]
$tail
YAML
}

# rt METHOD SANDBOX PORT PATH [curl args...]: a request through the router (header form).
rt() {
	local m=$1 sb=$2 port=$3 path=$4
	shift 4
	curl -sS -X "$m" -H "Authorization: Bearer $TOKEN" -H "X-Sandbox-ID: $sb" \
		-H "X-Sandbox-Namespace: $NS" -H "X-Sandbox-Port: $port" "$ROUTER$path" "$@"
}

run_py() { # SANDBOX CODE: stdout of python3 -c CODE, through the router
	rt POST "$1" 8080 /v1/processes/run -H 'content-type: application/json' \
		-d "$(jq -cn --arg c "$2" '{command: ["python3", "-c", $c]}')" | jq -r .stdout
}

cleanup() {
	k delete sandbox e2e-basic e2e-store e2e-image --ignore-not-found --wait=false >/dev/null 2>&1
	k delete sandboxclaim -l agent-sandbox.test/e2e=true --ignore-not-found >/dev/null 2>&1
	k delete sandboxclaim e2e-cli --ignore-not-found --wait=false >/dev/null 2>&1
	k delete namespace "$OTHER_NS" --ignore-not-found --wait=false >/dev/null 2>&1
	k delete pv "e2e-store-$$" --ignore-not-found --wait=false >/dev/null 2>&1
	rm -rf "$PV_DIR"
}
trap cleanup EXIT

# --- a sandbox from the runtime image ----------------------------------------------
sandbox e2e-basic
if poll 120 k wait --for=condition=Ready sandbox/e2e-basic --timeout=1s; then
	ok "sandbox from the runtime image becomes Ready"
else
	not_ok "sandbox from the runtime image becomes Ready" "$(k get sandbox e2e-basic -o yaml | tail -20)"
fi
check "pod hostname is the sandbox name" \
	test "$(run_py e2e-basic 'import socket; print(socket.gethostname())')" = e2e-basic
check "python runs through the router (header form)" test "$(run_py e2e-basic 'print(6*7)')" = 42
check "legacy /execute through the router (path form)" test "$(curl -sS -X POST \
	-H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' \
	-d '{"command":"python3 -c \"print(7*6)\""}' \
	"$ROUTER/s/$NS/e2e-basic/8888/execute" | jq -r .stdout)" = 42
rt PUT e2e-basic 8080 /v1/files/notes/hello.txt --data-binary 'hello sandbox' >/dev/null
check "file written through the router reads back" \
	test "$(rt GET e2e-basic 8080 /v1/files/notes/hello.txt)" = 'hello sandbox'
check "the file is visible to processes" \
	test "$(run_py e2e-basic 'print(open("/workspace/notes/hello.txt").read())')" = 'hello sandbox'
check "no token: 401" test "$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Sandbox-ID: e2e-basic' \
	-H "X-Sandbox-Namespace: $NS" -H 'X-Sandbox-Port: 8080' "$ROUTER/v1/health")" = 401
k create namespace "$OTHER_NS" >/dev/null
sandbox e2e-basic "$OTHER_NS"
check "a sandbox outside the user's namespace: 403" test "$(curl -s -o /dev/null \
	-w '%{http_code}' -H "Authorization: Bearer $TOKEN" -H 'X-Sandbox-ID: e2e-basic' \
	-H "X-Sandbox-Namespace: $OTHER_NS" -H 'X-Sandbox-Port: 8080' "$ROUTER/v1/health")" = 403
check "API server pod proxy reaches sandboxd" \
	test "$(k get --raw "/api/v1/namespaces/$NS/pods/e2e-basic:8080/proxy/v1/health" | jq -r .status)" = ok

# --- the runtime image on its own: sandboxd is the default command, non-root ----------
cat <<YAML | k apply -f - >/dev/null
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata: {name: e2e-image, namespace: $NS}
spec:
  podTemplate:
    spec:
      containers:
      - name: sandbox
        image: localhost/agent-sandbox/runtime:dev
        imagePullPolicy: Never
        readinessProbe: {httpGet: {path: /v1/health, port: 8080}, periodSeconds: 1}
YAML
check "the runtime image serves sandboxd without a command" \
	poll 120 k wait --for=condition=Ready sandbox/e2e-image --timeout=1s
check "and runs it as the unprivileged user (uid 1000)" \
	test "$(run_py e2e-image 'import os; print(os.getuid())')" = 1000
k delete sandbox e2e-image --wait=false >/dev/null

# --- persistent storage across pod loss, suspend and resume -------------------------
# A PersistentVolume on this host (no dynamic provisioner on the local cluster), bound
# to the PVC the controller creates from volumeClaimTemplates ("<template>-<sandbox>").
mkdir -p "$PV_DIR" && chmod 0777 "$PV_DIR"
cat <<YAML | k apply -f - >/dev/null
apiVersion: v1
kind: PersistentVolume
metadata: {name: e2e-store-$$}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Delete
  storageClassName: e2e-local
  hostPath: {path: $PV_DIR, type: Directory}
  claimRef: {namespace: $NS, name: workspace-e2e-store}
YAML
sandbox e2e-store "$NS" "  volumeClaimTemplates:
  - metadata: {name: workspace}
    spec:
      accessModes: [ReadWriteOnce]
      storageClassName: e2e-local
      resources: {requests: {storage: 1Gi}}"
if poll 120 k wait --for=condition=Ready sandbox/e2e-store --timeout=1s; then
	ok "sandbox with a volumeClaimTemplate becomes Ready"
else
	not_ok "sandbox with a volumeClaimTemplate becomes Ready" "$(k describe sandbox e2e-store | tail -15)"
fi
run_py e2e-store 'open("/workspace/data.txt","w").write("kept")' >/dev/null
uid1=$(k get pod e2e-store -o jsonpath='{.metadata.uid}')
k delete pod e2e-store --wait=false >/dev/null
pod_replaced() { u=$(k get pod e2e-store -o jsonpath='{.metadata.uid}') && [ -n "$u" ] && [ "$u" != "$uid1" ]; }
check "a deleted pod is recreated" poll 60 pod_replaced
poll 120 k wait --for=condition=Ready sandbox/e2e-store --timeout=1s
check "data survives pod deletion" test "$(run_py e2e-store 'print(open("/workspace/data.txt").read())')" = kept
k patch sandbox e2e-store --type=merge -p '{"spec":{"operatingMode":"Suspended"}}' >/dev/null
pod_gone() { ! k get pod e2e-store >/dev/null 2>&1; }
check "suspend deletes the pod" poll 60 pod_gone
check "suspend keeps the PVC" eval "k get pvc workspace-e2e-store -o name >/dev/null"
check "Suspended condition is True" poll 30 test "$(k get sandbox e2e-store \
	-o jsonpath='{.status.conditions[?(@.type=="Suspended")].status}')" = True
k patch sandbox e2e-store --type=merge -p '{"spec":{"operatingMode":"Running"}}' >/dev/null
check "resume brings the sandbox back to Ready" \
	poll 120 k wait --for=condition=Ready sandbox/e2e-store --timeout=1s
check "no stale Suspended condition after resume" test "$(k get sandbox e2e-store \
	-o jsonpath='{.status.conditions[?(@.type=="Suspended")].status}')" != True
check "data survives suspend and resume" \
	test "$(run_py e2e-store 'print(open("/workspace/data.txt").read())')" = kept
k delete sandbox e2e-store >/dev/null
check "deleting the sandbox garbage-collects its pod" poll 60 pod_gone

# --- warm pool and claims (the default template "python" and pool "python-pool") ---
pool_ready() { test "$(k get sandboxwarmpool python-pool -o jsonpath='{.status.readyReplicas}')" = 2; }
check "the default warm pool is Ready" poll 120 pool_ready
warm_uids=$(k get pods -l agents.x-k8s.io/warm-pool-sandbox -o jsonpath='{.items[*].metadata.uid}')
claim() { # NAME [SPEC-YAML] [POOL]
	cat <<YAML | k apply -f - >/dev/null
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata: {name: $1, labels: {agent-sandbox.test/e2e: "true"}}
spec:
  warmPoolRef: {name: ${3:-python-pool}}
${2:-}
YAML
}
claim e2e-warm
check "a claim on the pool becomes Ready" \
	poll 60 k wait --for=condition=Ready sandboxclaim/e2e-warm --timeout=1s
sb=$(k get sandboxclaim e2e-warm -o jsonpath='{.status.sandbox.name}')
check "the claim names its sandbox" test -n "$sb"
check "the sandbox was taken warm (launch-type warm)" \
	test "$(k get sandbox "$sb" -o jsonpath='{.metadata.labels.agents\.x-k8s\.io/launch-type}')" = warm
pod_uid=$(k get pod "$sb" -o jsonpath='{.metadata.uid}')
check "the adopted sandbox kept its warm pod (no restart)" grep -qw -- "$pod_uid" <<<"$warm_uids"
check "python runs in the claimed sandbox" test "$(run_py "$sb" 'print(6*7)')" = 42
check "the pool refills to 2 Ready" poll 120 pool_ready
claim e2e-cold "  env: [{name: E2E_VAR, value: from-the-claim}]"
check "a claim with env becomes Ready" \
	poll 120 k wait --for=condition=Ready sandboxclaim/e2e-cold --timeout=1s
cold=$(k get sandboxclaim e2e-cold -o jsonpath='{.status.sandbox.name}')
check "the env claim got its env" \
	test "$(run_py "$cold" 'import os; print(os.environ.get("E2E_VAR"))')" = from-the-claim
k delete sandboxclaim e2e-warm >/dev/null
sandbox_gone() { ! k get sandbox "$sb" >/dev/null 2>&1; }
check "deleting a claim deletes its sandbox" poll 60 sandbox_gone

# --- kubectl-sandbox against the real stack (pod-proxy and router connections) -------
CLI=$ROOT/build/release/kubectl-sandbox
TMPD=$(mktemp -d)
cli_sb=$("$CLI" claim python-pool --name e2e-cli --timeout 2m 2>/dev/null)
check "kubectl-sandbox claim prints a Ready sandbox" test -n "$cli_sb"
check "kubectl-sandbox exec (pod proxy) passes stdout and the exit code" eval \
	"[ \"\$(\"$CLI\" exec \"$cli_sb\" -- python3 -c 'print(6*7)')\" = 42 ] &&
	 { \"$CLI\" exec \"$cli_sb\" -- sh -c 'exit 3'; [ \$? = 3 ]; }"
check "kubectl-sandbox exec through the router" test "$(AGENT_SANDBOX_ROUTER_TOKEN=$TOKEN \
	"$CLI" exec --router-url "$ROUTER" "$cli_sb" -- python3 -c 'print(7*6)' 2>/dev/null)" = 42
mkdir -p "$TMPD/in/sub" && echo one >"$TMPD/in/a.txt" && echo two >"$TMPD/in/sub/b.txt"
"$CLI" cp "$TMPD/in" "$cli_sb:/copied" >/dev/null 2>&1
"$CLI" cp "$cli_sb:/copied" "$TMPD/out" >/dev/null 2>&1
check "kubectl-sandbox cp copies a tree there and back" diff -r "$TMPD/in" "$TMPD/out"
"$CLI" suspend "$cli_sb" --wait >/dev/null 2>&1
check "kubectl-sandbox suspend --wait" test "$(k get sandbox "$cli_sb" \
	-o jsonpath='{.status.conditions[?(@.type=="Suspended")].status}')" = True
"$CLI" resume "$cli_sb" --wait >/dev/null 2>&1
check "kubectl-sandbox resume --wait brings it back to Ready" \
	eval "k wait --for=condition=Ready sandbox/$cli_sb --timeout=60s >/dev/null"
check "kubectl-sandbox list shows it Ready" eval "\"$CLI\" list | grep -E \"^$cli_sb +True\" >/dev/null"
check "kubectl-sandbox logs prints the sandbox's log (sandboxd's start line)" \
	eval "\"$CLI\" logs \"$cli_sb\" | grep -q listening"
# -t on a real terminal: script(1) gives the CLI a pseudo-terminal of its own.
tty_out=$(script -qfec "\"$CLI\" exec -t \"$cli_sb\" -- sh -c 'tty; stty size'" /dev/null </dev/null 2>&1 | tr -d '\r')
check "kubectl-sandbox exec -t runs the command on a pseudo-terminal" \
	eval "grep -q '^/dev/pts/' <<<\"\$tty_out\""
"$CLI" delete "$cli_sb" --wait >/dev/null 2>&1
cli_gone() { ! k get sandboxclaim e2e-cli >/dev/null 2>&1; }
check "kubectl-sandbox delete removes the claim that owns the sandbox" poll 60 cli_gone
rm -rf "$TMPD"

# --- an upstream-style template, unchanged: upstream's python-runtime image reference,
# legacy API on 8888, readiness on GET /. Our runtime image (sandboxd serves the legacy
# python-runtime API on 8888) stands in under that name: no registry is reachable here.
UPSTREAM_IMAGE=us-central1-docker.pkg.dev/k8s-staging-images/agent-sandbox/python-runtime-sandbox:latest-main
"$ROOT/hack/cluster/cluster.sh" ctr images tag --force localhost/agent-sandbox/runtime:dev \
	"$UPSTREAM_IMAGE" >/dev/null
cat <<YAML | k apply -f - >/dev/null
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: e2e-upstream-style}
spec:
  podTemplate:
    spec:
      containers:
      - name: python-runtime
        image: $UPSTREAM_IMAGE
        ports:
        - containerPort: 8888
        readinessProbe:
          httpGet: {path: "/", port: 8888}
          periodSeconds: 1
        resources:
          requests: {cpu: "250m", memory: "256Mi", ephemeral-storage: "256Mi"}
      restartPolicy: "OnFailure"
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: e2e-upstream-pool}
spec:
  replicas: 1
  sandboxTemplateRef: {name: e2e-upstream-style}
YAML
claim e2e-upstream "" e2e-upstream-pool
check "an upstream-style template's claim becomes Ready" \
	poll 120 k wait --for=condition=Ready sandboxclaim/e2e-upstream --timeout=1s
up_sb=$(k get sandboxclaim e2e-upstream -o jsonpath='{.status.sandbox.name}')
check "upstream's python-runtime API (/execute) works through the router" test "$(curl -sS \
	-X POST -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' \
	-d '{"command":"python3 -c \"print(6*7)\""}' \
	"$ROUTER/s/$NS/$up_sb/8888/execute" | jq -r .stdout)" = 42
k delete sandboxclaim e2e-upstream --wait=false >/dev/null
k delete sandboxwarmpool e2e-upstream-pool --wait=false >/dev/null
k delete sandboxtemplate e2e-upstream-style --wait=false >/dev/null

echo
echo "e2e: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
