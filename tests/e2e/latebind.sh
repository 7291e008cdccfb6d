#!/usr/bin/env bash
# End-to-end tests of late-bound claim configuration on the stack of `make up`, in a
# namespace of their own: a claim with env (a value, a Secret key, a ConfigMap key) on a
# LateBound template is served warm (an adopted pool member whose pod is not restarted)
# and `printenv` in it shows the values; a second claim gets its own values; the secret
# value appears in no object, Event, log or metadata answer; delivery failures fall back
# to a cold start or fail the claim, per onFailure; claim latency with and without late
# binding (controller-side, from the claim's first-observed/first-ready annotations).
# Prints "N passed, N failed"; exits non-zero on failure. Needs the stack up.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
stack_kubeconfig || exit 1
NS=as-e2e-latebind-$$
SECRET=s3cr3t-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
LAT_N=${LATEBIND_LATENCY_N:-5}

k() { "$KUBECTL" -n "$NS" "$@"; } # everything of this suite is in its namespace
cleanup() { "$KUBECTL" delete namespace "$NS" --wait=false >/dev/null 2>&1 || true; }
trap cleanup EXIT

template() { # NAME ON_FAILURE PORT
	k apply -f - >/dev/null <<YAML
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: $1}
spec:
  envVarsInjectionPolicy: Allowed
  claimConfigDelivery: {mode: LateBound, onFailure: $2, port: $3}
$(runtime_pod_template)
$EMPTYDIR_VOLUME
YAML
}

pool() { # NAME TEMPLATE REPLICAS
	cat <<YAML | k apply -f - >/dev/null
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: $1}
spec: {replicas: $3, sandboxTemplateRef: {name: $2}}
YAML
}

claim() { # NAME POOL [PLAIN]: with PLAIN, env PLAIN=value, API_KEY (Secret), MODE (ConfigMap)
	local env=""
	[ -n "${3:-}" ] && env="
  env:
  - {name: PLAIN, value: \"$3\"}
  - {name: API_KEY, valueFrom: {secretKeyRef: {name: creds, key: api-key}}}
  - {name: MODE, valueFrom: {configMapKeyRef: {name: cfg, key: mode}}}"
	cat <<YAML | k apply -f - >/dev/null
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata: {name: $1}
spec:
  warmPoolRef: {name: $2}$env
YAML
}

pool_full() { test "$(k get sandboxwarmpool "$1" -o jsonpath='{.status.readyReplicas}')" = "$2"; }
claim_ready() { test "$(cond sandboxclaim "$1" Ready)" = True; }
claim_reason_is() { test "$(cond sandboxclaim "$1" Ready reason)" = "$2"; } # CLAIM REASON
# first_ready CLAIM: the controller has stamped its claim-first-ready-at annotation.
first_ready() { k get sandboxclaim "$1" -o jsonpath='{.metadata.annotations}' | grep -q first-ready; }

# run_env POD: "PLAIN|API_KEY|MODE" as a process in the sandbox sees them (pod proxy).
run_env() {
	echo '{"command":["sh","-c","echo \"$(printenv PLAIN)|$(printenv API_KEY)|$(printenv MODE)\""]}' >"$TMP/run.json"
	"$KUBECTL" create --raw "/api/v1/namespaces/$NS/pods/$1:8080/proxy/v1/processes/run" \
		-f "$TMP/run.json" | jq -r .stdout
}

TMP=$(mktemp -d)
"$KUBECTL" create namespace "$NS" >/dev/null || exit 1
k create secret generic creds --from-literal=api-key="$SECRET" >/dev/null
k create configmap cfg --from-literal=mode=fast >/dev/null
template lb ColdStart 8080
template lb-cold ColdStart 9999 # nothing listens there: delivery fails
template lb-fail Fail 9999
pool lb-pool lb 2
pool lb-cold-pool lb-cold 1
pool lb-fail-pool lb-fail 1
check "late-bound pools fill" poll 180 pool_full lb-pool 2
poll 180 pool_full lb-cold-pool 1
poll 180 pool_full lb-fail-pool 1

# ---- a warm claim with env ----------------------------------------------------------
members=$(k get sandboxes -l agents.x-k8s.io/launch-type=warm -o jsonpath='{.items[*].metadata.name}')
claim c1 lb-pool one
check "claim with env and a secretKeyRef becomes Ready" poll 60 claim_ready c1
sb1=$(claim_sandbox c1)
check "served warm: launch-type warm, an adopted pool member" \
	test "$(launch_type "$sb1")" = warm -a "$sb1" != c1 -a -n "$(echo " $members " | grep " $sb1 ")"
check "the pod was not restarted" \
	test "$(k get pod "$sb1" -o jsonpath='{.status.containerStatuses[0].restartCount}')" = 0
check "printenv shows the value, the Secret key and the ConfigMap key" \
	test "$(run_env "$sb1")" = "one|$SECRET|fast"

# ---- a second claim gets its own values ---------------------------------------------
claim c2 lb-pool two
poll 60 claim_ready c2
sb2=$(claim_sandbox c2)
check "second claim: another warm Sandbox with its own values" \
	test "$sb2" != "$sb1" -a "$(launch_type "$sb2")" = warm -a "$(run_env "$sb2")" = "two|$SECRET|fast"
check "first claim keeps its values" test "$(run_env "$sb1")" = "one|$SECRET|fast"

# ---- the value is nowhere -----------------------------------------------------------
nowhere() {
	! k get sandboxclaims,sandboxes,pods,events,sandboxwarmpools,sandboxtemplates -o json | grep -q "$SECRET" &&
		! "$KUBECTL" get --raw "/api/v1/namespaces/$NS/pods/$sb1:8080/proxy/v1/metadata" | grep -q "$SECRET" &&
		! k logs "$sb1" | grep -q "$SECRET" &&
		! "$STACK" logs controller | grep -q "$SECRET"
}
check "the secret value is in no object, Event, log or metadata answer" nowhere

# ---- delivery failures ----------------------------------------------------------------
claim c3 lb-cold-pool three
check "delivery failure with onFailure ColdStart: Ready, cold" poll 120 claim_ready c3
check "the cold Sandbox is the claim's own" test "$(claim_sandbox c3)" = c3 -a "$(launch_type c3)" = cold
check "the cold pod got the env from its spec (Secret reference)" test "$(run_env c3)" = "three|$SECRET|fast"
check "the cold pod spec holds the reference, not the value" \
	eval "k get pod c3 -o json | grep -q secretKeyRef && ! k get pod c3 -o json | grep -q '$SECRET'"
claim c4 lb-fail-pool four
check "delivery failure with onFailure Fail: Ready=False ConfigDeliveryFailed" \
	poll 60 claim_reason_is c4 ConfigDeliveryFailed

# ---- latency ------------------------------------------------------------------------
lat() { # CLAIM: first-ready - first-observed in ms (controller-side)
	k get sandboxclaim "$1" -o json | python3 -c '
import json, sys, datetime
a = json.load(sys.stdin)["metadata"]["annotations"]
p = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
print("%.1f" % ((p(a["agents.x-k8s.io/claim-first-ready-at"]) - p(a["agents.x-k8s.io/controller-first-observed-at"])).total_seconds() * 1000))'
}
plain=() late=()
for i in $(seq 1 "$LAT_N"); do
	poll 120 pool_full lb-pool 2
	claim "p$i" lb-pool
	poll 60 claim_ready "p$i" && poll 10 first_ready "p$i" &&
		plain+=("$(lat "p$i")")
	poll 120 pool_full lb-pool 2
	claim "l$i" lb-pool "v$i"
	poll 60 claim_ready "l$i" && poll 10 first_ready "l$i" &&
		late+=("$(lat "l$i")")
	k delete sandboxclaim "p$i" "l$i" --wait=false >/dev/null
done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "n/a")}'; }
echo "latency (controller-side first-observed -> Ready, ms): plain warm: ${plain[*]} (median $(med "${plain[@]}")); late-bound warm: ${late[*]} (median $(med "${late[@]}"))"
check "latency samples taken" test "${#plain[@]}" = "$LAT_N" -a "${#late[@]}" = "$LAT_N"
check "late-bound claims were served warm" \
	test "$(k get sandboxes -l agents.x-k8s.io/launch-type=cold -o name | wc -l)" = 1

rm -rf "$TMP"
summary latebind
