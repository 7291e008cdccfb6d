#!/usr/bin/env bash
# End-to-end tests on the stack of `make up` (hack/stack.sh up): real sandboxes from the
# runtime image on the real node, reached through the router and the API server's pod
# proxy; storage across suspend/resume; warm-pool claims. Needs the stack up.
# Prints "N passed, N failed"; exits non-zero on failure.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
stack_kubeconfig || exit 1
stack_router || exit 1
NS=default
OTHER_NS=as-e2e-other-$$

# sandbox NAME [NS] [SPEC-TAIL-YAML]: a Sandbox running sandboxd from the runtime image;
# SPEC-TAIL-YAML replaces the emptyDir workspace volume (e.g. volumeClaimTemplates).
sandbox() {
	k apply -f - >/dev/null <<YAML
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata: {name: $1, namespace: ${2:-$NS}}
spec:
$(runtime_pod_template)
${3:-$EMPTYDIR_VOLUME}
YAML
}

# legacy_py SANDBOX CODE: stdout of python3 -c "CODE" through the router's path form and
# the legacy python-runtime API (POST /execute on port 8888).
legacy_py() {
	curl -sS -X POST -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' \
		-d "$(jq -cn --arg c "python3 -c \"$2\"" '{command: $c}')" \
		"$ROUTER/s/$NS/$1/8888/execute" | jq -r .stdout
}

cleanup() {
	k delete sandbox e2e-basic e2e-store e2e-image --ignore-not-found --wait=false >/dev/null 2>&1
	k delete sandboxclaim -l agent-sandbox.test/e2e=true --ignore-not-found >/dev/null 2>&1
	k delete sandboxclaim e2e-cli --ignore-not-found --wait=false >/dev/null 2>&1
	k delete namespace "$OTHER_NS" --ignore-not-found --wait=false >/dev/null 2>&1
	k delete pv "e2e-store-$$" --ignore-not-found --wait=false >/dev/null 2>&1
}
trap cleanup EXIT

# --- a sandbox from the runtime image ----------------------------------------------
sandbox e2e-basic
if poll 120 is_ready sandbox/e2e-basic; then
	ok "sandbox from the runtime image becomes Ready"
else
	not_ok "sandbox from the runtime image becomes Ready" "$(k get sandbox e2e-basic -o yaml | tail -20)"
fi
check "pod hostname is the sandbox name" \
	test "$(router_py e2e-basic 'import socket; print(socket.gethostname())')" = e2e-basic
check "python runs through the router (header form)" test "$(router_py e2e-basic 'print(6*7)')" = 42
check "legacy /execute through the router (path form)" \
	test "$(legacy_py e2e-basic 'print(7*6)')" = 42
router_req PUT e2e-basic 8080 /v1/files/notes/hello.txt --data-binary 'hello sandbox' >/dev/null
check "file written through the router reads back" \
	test "$(router_req GET e2e-basic 8080 /v1/files/notes/hello.txt)" = 'hello sandbox'
check "the file is visible to processes" \
	test "$(router_py e2e-basic 'print(open("/workspace/notes/hello.txt").read())')" = 'hello sandbox'
check "no token: 401" http_is 401 "$ROUTER/v1/health" -H 'X-Sandbox-ID: e2e-basic' \
	-H "X-Sandbox-Namespace: $NS" -H 'X-Sandbox-Port: 8080'
k create namespace "$OTHER_NS" >/dev/null
sandbox e2e-basic "$OTHER_NS"
check "a sandbox outside the user's namespace: 403" http_is 403 "$ROUTER/v1/health" \
	-H "Authorization: Bearer $TOKEN" -H 'X-Sandbox-ID: e2e-basic' \
	-H "X-Sandbox-Namespace: $OTHER_NS" -H 'X-Sandbox-Port: 8080'
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
	poll 120 is_ready sandbox/e2e-image
check "and runs it as the unprivileged user (uid 1000)" \
	test "$(router_py e2e-image 'import os; print(os.getuid())')" = 1000
k delete sandbox e2e-image --wait=false >/dev/null

# --- persistent storage across pod loss, suspend and resume -------------------------
# The PVC the controller creates from volumeClaimTemplates ("<template>-<sandbox>") has no
# storage class: the default StorageClass provisions a volume for it.
sandbox e2e-store "$NS" "$PVC_WORKSPACE"
if poll 120 is_ready sandbox/e2e-store; then
	ok "sandbox with a class-less volumeClaimTemplate becomes Ready (default StorageClass)"
else
	not_ok "sandbox with a class-less volumeClaimTemplate becomes Ready (default StorageClass)" \
		"$(k describe sandbox e2e-store | tail -15; k get pvc workspace-e2e-store -o wide)"
fi
store_pv=$(pvc_volume "$NS" workspace-e2e-store)
check "its PVC is bound to a dynamically provisioned volume" \
	test "$(k get pv "$store_pv" -o jsonpath='{.spec.storageClassName}' 2>/dev/null)" = standard
router_py e2e-store 'open("/workspace/data.txt","w").write("kept")' >/dev/null
uid1=$(k get pod e2e-store -o jsonpath='{.metadata.uid}')
k delete pod e2e-store --wait=false >/dev/null
pod_replaced() { u=$(k get pod e2e-store -o jsonpath='{.metadata.uid}') && [ -n "$u" ] && [ "$u" != "$uid1" ]; }
check "a deleted pod is recreated" poll 60 pod_replaced
poll 120 is_ready sandbox/e2e-store
check "data survives pod deletion" test "$(router_py e2e-store 'print(open("/workspace/data.txt").read())')" = kept
k patch sandbox e2e-store --type=merge -p '{"spec":{"operatingMode":"Suspended"}}' >/dev/null
pod_gone() { ! k get pod e2e-store >/dev/null 2>&1; }
check "suspend deletes the pod" poll 60 pod_gone
check "suspend keeps the PVC" eval "k get pvc workspace-e2e-store -o name >/dev/null"
check "Suspended condition is True" poll 30 cond_is sandbox e2e-store Suspended status True
k patch sandbox e2e-store --type=merge -p '{"spec":{"operatingMode":"Running"}}' >/dev/null
check "resume brings the sandbox back to Ready" \
	poll 120 is_ready sandbox/e2e-store
check "no stale Suspended condition after resume" test "$(cond sandbox e2e-store Suspended)" != True
check "data survives suspend and resume" \
	test "$(router_py e2e-store 'print(open("/workspace/data.txt").read())')" = kept
k delete sandbox e2e-store >/dev/null
check "deleting the sandbox garbage-collects its pod" poll 60 pod_gone
pv_gone() { ! k get pv "$store_pv" >/dev/null 2>&1; }
check "and its PVC; the provisioner deletes the volume (reclaim policy Delete)" poll 120 pv_gone

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
	poll 60 is_ready sandboxclaim/e2e-warm
sb=$(claim_sandbox e2e-warm)
check "the claim names its sandbox" test -n "$sb"
check "the sandbox was taken warm (launch-type warm)" \
	test "$(launch_type "$sb")" = warm
pod_uid=$(k get pod "$sb" -o jsonpath='{.metadata.uid}')
check "the adopted sandbox kept its warm pod (no restart)" grep -qw -- "$pod_uid" <<<"$warm_uids"
check "python runs in the claimed sandbox" test "$(router_py "$sb" 'print(6*7)')" = 42
check "the pool refills to 2 Ready" poll 120 pool_ready
claim e2e-cold "  env: [{name: E2E_VAR, value: from-the-claim}]"
check "a claim with env becomes Ready" \
	poll 120 is_ready sandboxclaim/e2e-cold
cold=$(claim_sandbox e2e-cold)
check "the env claim got its env" \
	test "$(router_py "$cold" 'import os; print(os.environ.get("E2E_VAR"))')" = from-the-claim
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
check "kubectl-sandbox suspend --wait" test "$(cond sandbox "$cli_sb" Suspended)" = True
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
	poll 120 is_ready sandboxclaim/e2e-upstream
up_sb=$(claim_sandbox e2e-upstream)
check "upstream's python-runtime API (/execute) works through the router" \
	test "$(legacy_py "$up_sb" 'print(6*7)')" = 42
k delete sandboxclaim e2e-upstream --wait=false >/dev/null
k delete sandboxwarmpool e2e-upstream-pool --wait=false >/dev/null
k delete sandboxtemplate e2e-upstream-style --wait=false >/dev/null

summary e2e
