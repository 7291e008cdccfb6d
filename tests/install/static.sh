# The install checks that need no node: rendering, a private API server (hack/apiserver.sh
# with its own state dir and ports), the real images run with in-cluster config under the
# installed RBAC (chroot, as 65532), APF classification, the Helm chart, uninstall.
# Sourced by run.sh after lib.sh.
# shellcheck shell=bash disable=SC2153 # ROOT is set by lib.sh

APISERVER_DIR=${AS_INSTALL_APISERVER_DIR:-$WORK/apiserver}
TEST_NS=as-install-static

apiserver() {
	AS_APISERVER_DIR=$APISERVER_DIR AS_APISERVER_PORT=${AS_INSTALL_APISERVER_PORT:-17443} \
		AS_ETCD_PORT=${AS_INSTALL_ETCD_PORT:-13379} "$ROOT/hack/apiserver.sh" "$@"
}

static_render() {
	check "install.yaml and the chart CRDs are current (hack/render-install.sh --check)" \
		"$ROOT/hack/render-install.sh" --check
	local d
	for d in apf prometheus; do
		check "config/$d builds" eval "k kustomize '$ROOT/config/$d' >/dev/null"
	done
	check "--registry/--tag re-point both images" eval \
		"[ \"\$('$ROOT/hack/render-install.sh' --stdout --registry reg.example/x --tag v9 |
			grep -c 'image: reg.example/x/\(agent-sandbox-controller\|sandbox-router\):v9')\" = 2 ]"
	check "install.yaml: objects and pod security" python3 "$ROOT/tests/install/check_manifests.py" \
		"$ROOT/install.yaml"
}

static_apply() {
	check "server-side dry-run of the namespace and CRDs" eval \
		"yaml_docs '$ROOT/install.yaml' Namespace CustomResourceDefinition |
			k apply --server-side --dry-run=server -f - >/dev/null"
	check "install.yaml applies (server-side)" eval \
		"k apply --server-side --field-manager=install-test -f '$ROOT/install.yaml' >'$WORK/apply.log' 2>&1"
	check "CRDs are Established" "$ROOT/hack/wait-crds.sh" "$KUBECTL"
	check "a second apply changes nothing (kubectl diff is empty)" eval \
		"k diff --server-side --field-manager=install-test -f '$ROOT/install.yaml' >/dev/null"
}

# can AS VERB RESOURCE [NS] [extra args]
can() { k auth can-i "$2" "$3" --as="$1" ${4:+-n "$4"} "${@:5}" >/dev/null 2>&1; }

static_rbac() {
	local c=$CTRL_SA r=$ROUTER_SA
	check "controller may patch and delete sandboxes" eval "can $c patch sandboxes.agents.x-k8s.io default && can $c delete sandboxes.agents.x-k8s.io default"
	check "controller may PUT sandboxes/status" can "$c" update sandboxes.agents.x-k8s.io default --subresource=status
	check "controller may create and delete pods and services" eval "can $c create pods x && can $c delete services x"
	check "controller may create sandboxes and patch claims (extensions)" eval \
		"can $c create sandboxes.agents.x-k8s.io x && can $c patch sandboxclaims.extensions.agents.x-k8s.io x"
	check "controller may manage NetworkPolicies" can "$c" delete networkpolicies.networking.k8s.io x
	check "controller may get/update its Lease and create Leases in $SYS_NS" eval \
		"can $c update leases.coordination.k8s.io/$LEASE $SYS_NS && can $c create leases.coordination.k8s.io $SYS_NS"
	check "controller may get and create secrets and get configmaps (late binding)" eval \
		"can $c get secrets x && can $c create secrets x && can $c get configmaps x"
	check_not "controller may not list, watch, update or delete secrets" eval \
		"can $c list secrets x || can $c watch secrets x || can $c update secrets x || can $c delete secrets x"
	check_not "controller may not list or write configmaps" eval \
		"can $c list configmaps x || can $c update configmaps x"
	check_not "controller may not exec into pods" can "$c" create pods x --subresource=exec
	check_not "controller may not delete PVCs" can "$c" delete persistentvolumeclaims x
	check_not "controller may not update another Lease" can "$c" update leases.coordination.k8s.io/other "$SYS_NS"
	check_not "controller may not take a Lease outside $SYS_NS" can "$c" update "leases.coordination.k8s.io/$LEASE" kube-system
	check_not "controller may not create templates, pools or claims" eval \
		"can $c create sandboxtemplates.extensions.agents.x-k8s.io x || can $c create sandboxwarmpools.extensions.agents.x-k8s.io x || can $c create sandboxclaims.extensions.agents.x-k8s.io x"
	check "router may list, watch and patch (resume on traffic, activity: static_router_policy) sandboxes and review tokens and access" eval \
		"can $r list sandboxes.agents.x-k8s.io '' --all-namespaces && can $r watch sandboxes.agents.x-k8s.io x && can $r patch sandboxes.agents.x-k8s.io x && can $r create tokenreviews.authentication.k8s.io && can $r create subjectaccessreviews.authorization.k8s.io"
	check_not "router may not read pods, secrets or claims, nor create or delete sandboxes" eval \
		"can $r get pods x || can $r get secrets x || can $r list sandboxclaims.extensions.agents.x-k8s.io x || can $r create sandboxes.agents.x-k8s.io x || can $r delete sandboxes.agents.x-k8s.io x"
}

# secret_doc TYPE [OWNER]: a Secret named policy-test in default; OWNER adds the
# config-token label (naming sb) and a controller ownerReference to Sandbox OWNER.
secret_doc() {
	printf 'apiVersion: v1\nkind: Secret\nmetadata:\n  name: policy-test\n  namespace: default\n'
	[ "$1" != kubernetes.io/service-account-token ] ||
		printf '  annotations: {kubernetes.io/service-account.name: default}\n'
	if [ -n "${2:-}" ]; then
		printf '  labels: {extensions.agents.x-k8s.io/config-token-for: sb}\n'
		printf '  ownerReferences: [{apiVersion: agents.x-k8s.io/v1beta1, kind: Sandbox, name: %s, uid: %s, controller: true}]\n' \
			"$2" 0b6f1d53-2a3c-4b8e-9f1a-1c2d3e4f5a6b
	fi
	printf 'type: %s\n' "$1"
}
# secret_create AS TYPE [OWNER]: a server-side dry-run create (admission runs) as AS
# ("" = the admin); the output is in $WORK/secret.log.
secret_create() {
	secret_doc "${@:2}" | k create --dry-run=server ${1:+--as="$1"} -f - >"$WORK/secret.log" 2>&1
}

static_secret_policy() {
	local c=$CTRL_SA
	# a policy takes effect once the API server has compiled it: poll the first check
	# shellcheck disable=SC2016 # expanded by eval, on each try
	if poll 30 eval '! secret_create "$CTRL_SA" kubernetes.io/service-account-token sb &&
		grep -q "may create only Opaque" "$WORK/secret.log"'; then
		ok "controller may not create a service-account-token Secret (admission policy)"
	else
		not_ok "controller may not create a service-account-token Secret (admission policy)" \
			"$(secret_create "$c" kubernetes.io/service-account-token sb; cat "$WORK/secret.log")"
	fi
	check_not "controller may not create an Opaque Secret without a Sandbox owner and label" eval \
		"secret_create '$c' Opaque || ! grep -q 'may create only config-token Secrets' '$WORK/secret.log'"
	check_not "controller may not create a config token owned by another Sandbox than its label names" eval \
		"secret_create '$c' Opaque other || ! grep -q 'may create only config-token Secrets' '$WORK/secret.log'"
	local t
	for t in bootstrap.kubernetes.io/token example.com/custom; do
		check "controller may not create a $t Secret" eval \
			"! secret_create '$c' $t sb && grep -q 'may create only Opaque' '$WORK/secret.log'"
	done
	check "controller may create its config-token Secret (Opaque, labelled, Sandbox-controlled)" \
		secret_create "$c" Opaque sb
	check "the policy does not match other users (the admin creates a token Secret)" \
		secret_create "" kubernetes.io/service-account-token
}

# sb_patch AS PATCH: a server-side dry-run merge patch (admission runs) of the Sandbox
# policy-sb in default, as the router (AS "router": its ServiceAccount's token, a bare
# PATCH as the router sends; kubectl patch would GET first, which the router may not) or
# the admin (""); the output is in $WORK/sbpatch.log.
sb_patch() {
	if [ -z "$1" ]; then
		k -n default patch sandbox policy-sb --type=merge -p "$2" --dry-run=server >"$WORK/sbpatch.log" 2>&1
		return
	fi
	local code
	[ -s "$WORK/router.token" ] || k -n "$SYS_NS" create token sandbox-router >"$WORK/router.token"
	code=$(curl -sS -o "$WORK/sbpatch.log" -w '%{http_code}' --cacert "$APISERVER_DIR/pki/ca.crt" \
		-H "Authorization: Bearer $(cat "$WORK/router.token")" -X PATCH \
		-H 'Content-Type: application/merge-patch+json' --data "$2" \
		"$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes/policy-sb?dryRun=All")
	[ "${code:0:1}" = 2 ]
}

static_router_policy() {
	local r=router now
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	rm -f "$WORK/router.token"
	k -n default apply -f - >/dev/null <<'YAML'
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: policy-sb
  labels: {team: a}
  annotations: {note: x, agents.x-k8s.io/idle-suspended-generation: "1"}
spec:
  operatingMode: Suspended
  podTemplate:
    spec:
      containers: [{name: sandbox, image: localhost/agent-sandbox/runtime:dev}]
YAML
	# a policy takes effect once the API server has compiled it: poll the first check
	# shellcheck disable=SC2016 # expanded by eval, on each try
	if poll 30 eval '! sb_patch router "{\"spec\":{\"podTemplate\":{\"spec\":{\"serviceAccountName\":\"x\"}}}}" &&
		grep -q "may change only spec.operatingMode" "$WORK/sbpatch.log"'; then
		ok "router may not change a Sandbox's pod template (admission policy)"
	else
		not_ok "router may not change a Sandbox's pod template (admission policy)" "$(cat "$WORK/sbpatch.log")"
	fi
	check "router may resume a Sandbox on traffic (operatingMode Running, its annotations)" sb_patch "$r" \
		"{\"metadata\":{\"annotations\":{\"agents.x-k8s.io/idle-suspended-generation\":null,\"agents.x-k8s.io/last-activity\":\"$now\"}},\"spec\":{\"operatingMode\":\"Running\"}}"
	check "router may record activity (the last-activity annotation)" sb_patch "$r" \
		"{\"metadata\":{\"annotations\":{\"agents.x-k8s.io/last-activity\":\"$now\"}}}"
	k -n default patch sandbox policy-sb --type=merge -p '{"spec":{"operatingMode":"Running"}}' >/dev/null
	check_not "router may not suspend a Sandbox" sb_patch "$r" '{"spec":{"operatingMode":"Suspended"}}'
	check_not "router may not change shutdownTime" sb_patch "$r" '{"spec":{"shutdownTime":"2030-01-01T00:00:00Z"}}'
	check_not "router may not change another annotation" sb_patch "$r" '{"metadata":{"annotations":{"note":"y"}}}'
	check_not "router may not add an annotation" sb_patch "$r" '{"metadata":{"annotations":{"other":"y"}}}'
	check_not "router may not change a label" sb_patch "$r" '{"metadata":{"labels":{"team":"b"}}}'
	check_not "router may not add a finalizer" sb_patch "$r" '{"metadata":{"finalizers":["x.io/y"]}}'
	check "the policy does not match other users (the admin changes the pod template)" sb_patch "" \
		'{"spec":{"podTemplate":{"spec":{"serviceAccountName":"x"}}}}'
	check "the router policy compares every Sandbox spec field but operatingMode (CRD)" python3 - \
		"$ROOT/config/router/policy.yaml" "$ROOT/api/crds/agents.x-k8s.io_sandboxes.yaml" <<'PY'
import re, sys, yaml
policy = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "ValidatingAdmissionPolicy"][0]
text = " ".join(v["expression"] for v in policy["spec"]["validations"])
compared = set(re.findall(r"oldObject\.spec\.([A-Za-z]+)", text)) - {"operatingMode"}
crd = yaml.safe_load(open(sys.argv[2]))
fields = set()
for v in crd["spec"]["versions"]:
    fields |= set(v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]) - {"operatingMode"}
sys.exit(0 if compared == fields else 1)
PY
	k -n default delete sandbox policy-sb --wait=false >/dev/null 2>&1 || true
}

# sa_root NAME ARCHIVE SA: unpacks the image and mounts a service-account token like the
# kubelet does (token, ca.crt, namespace) under /var/run/secrets/kubernetes.io/serviceaccount.
sa_root() {
	local root=$WORK/root-$1 sa
	sa=$root/var/run/secrets/kubernetes.io/serviceaccount
	rm -rf "$root"
	unpack_image "$2" "$root" || return 1
	mkdir -p "$sa"
	k -n "$SYS_NS" create token "$3" --duration=2h >"$sa/token" || return 1
	cp "$APISERVER_DIR/pki/ca.crt" "$sa/ca.crt"
	printf '%s' "$SYS_NS" >"$sa/namespace"
	chmod 0644 "$sa"/*
	echo "$root"
}

# in_pod ROOT CMD...: CMD inside ROOT as 65532:65532 with the in-cluster environment.
in_pod() { "${POD[@]}" "$@"; }

static_images() {
	local archives
	archives=$("$ROOT/images/components.sh" build) || { not_ok "controller and router images build"; return 1; }
	ok "controller and router images build (docker-free, scratch base)"
	CTRL_ARCHIVE=$(grep agent-sandbox-controller <<<"$archives")
	ROUTER_ARCHIVE=$(grep sandbox-router <<<"$archives")
	API_PORT=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}' | sed 's/.*://')
	CHROOT=$(command -v chroot) || { not_ok "chroot found"; return 1; }
	POD=(env -i KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$API_PORT"
		"$CHROOT" --userspec=65532:65532)
	if ! CTRL_ROOT=$(sa_root controller "$CTRL_ARCHIVE" agent-sandbox-controller) ||
		! ROUTER_ROOT=$(sa_root router "$ROUTER_ARCHIVE" sandbox-router); then
		not_ok "image roots with service-account tokens"
		return 1
	fi
	check "the images hold only the binary, its libraries and /etc, /tmp" eval \
		"[ -z \"\$(cd '$CTRL_ROOT' && ls -d * | grep -v -x -e etc -e lib -e lib64 -e tmp -e usr -e var)\" ]"
	check "the controller image runs as non-root (--version)" eval \
		"in_pod '$CTRL_ROOT' /usr/local/bin/agent-sandbox-controller --version | grep -q 'agent-sandbox-controller, version'"
	check "the router image runs as non-root (--version)" eval \
		"in_pod '$ROUTER_ROOT' /usr/local/bin/sandbox-router --version | grep -q 'sandbox-router'"
}

static_controller() {
	local hp mp
	hp=$(free_port 27081) && mp=$(free_port $((hp + 1)))
	k create namespace "$TEST_NS" >/dev/null 2>&1
	# No service-account controller runs here: the pods' "default" SA is made by hand.
	k -n "$TEST_NS" create serviceaccount default >/dev/null 2>&1
	bg "$WORK/controller.log" "${POD[@]}" "$CTRL_ROOT" /usr/local/bin/agent-sandbox-controller \
		--leader-election-namespace="$SYS_NS" --health-probe-bind-address="127.0.0.1:$hp" \
		--metrics-bind-address="127.0.0.1:$mp"
	if ! poll 60 http_is 200 "http://127.0.0.1:$hp/readyz"; then
		not_ok "controller (in-cluster config, installed RBAC) becomes ready" "$(tail -5 "$WORK/controller.log")"
		return 1
	fi
	ok "controller (in-cluster config, installed RBAC) becomes ready"
	check "controller holds the Lease" poll 30 eval \
		"k -n $SYS_NS get lease $LEASE -o jsonpath='{.spec.holderIdentity}' | grep -q ."
	k -n "$TEST_NS" apply -f - >/dev/null <<'YAML'
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: python}
spec:
  podTemplate:
    spec:
      containers: [{name: sandbox, image: localhost/agent-sandbox/runtime:dev}]
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: python-pool}
spec: {replicas: 2, sandboxTemplateRef: {name: python}}
YAML
	check "a warm pool's Sandboxes and Pods get created under that RBAC" poll 60 eval \
		"[ \"\$(k -n $TEST_NS get pods -o name | wc -l)\" = 2 ] && [ \"\$(k -n $TEST_NS get sandboxes -o name | wc -l)\" = 2 ]"
	check "the template's managed NetworkPolicy is created" poll 30 eval \
		"[ -n \"\$(k -n $TEST_NS get networkpolicies -o name)\" ]"
	# a late-bound pool: each member's config-token Secret is created by the controller's
	# ServiceAccount, so through the Secret admission policy (static_secret_policy)
	k -n "$TEST_NS" apply -f - >/dev/null <<'YAML'
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: late}
spec:
  envVarsInjectionPolicy: Allowed
  claimConfigDelivery: {mode: LateBound}
  podTemplate:
    spec:
      containers: [{name: sandbox, image: localhost/agent-sandbox/runtime:dev}]
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: late-pool}
spec: {replicas: 1, sandboxTemplateRef: {name: late}}
YAML
	check "a late-bound member's config-token Secret passes the admission policy" poll 60 eval \
		"k -n $TEST_NS get secrets -l extensions.agents.x-k8s.io/config-token-for -o name | grep -q config-token"
	check "controller metrics are served" eval "curl -fsS -o '$WORK/metrics.txt' 'http://127.0.0.1:$mp/metrics' && grep -q '^# TYPE' '$WORK/metrics.txt'"
	check_not "no request of the controller was forbidden" grep -qi -e forbidden -e ' 403' \
		-e 'not permitted' "$WORK/controller.log"
}

static_router() {
	local rp hp tok_user tok_other
	rp=$(free_port 27180) && hp=$(free_port $((rp + 1)))
	# Loopback stands in for the network here (no trust for it); no pod ever starts on this
	# API server, so a request to a starting Sandbox is answered at once, not held.
	bg "$WORK/router.log" "${POD[@]}" "$ROUTER_ROOT" /usr/local/bin/sandbox-router \
		--http-bind-address="127.0.0.1:$rp" --health-probe-bind-address="127.0.0.1:$hp" \
		--trust-loopback=false --start-hold=0
	if ! poll 60 http_is 200 "http://127.0.0.1:$hp/readyz"; then
		not_ok "router (in-cluster config, installed RBAC) becomes ready" "$(tail -5 "$WORK/router.log")"
		return 1
	fi
	ok "router (in-cluster config, installed RBAC) becomes ready"
	k -n "$TEST_NS" create serviceaccount user >/dev/null
	k -n "$TEST_NS" create serviceaccount other >/dev/null
	k -n "$TEST_NS" create role sandbox-get --verb=get --resource=sandboxes.agents.x-k8s.io >/dev/null
	k -n "$TEST_NS" create rolebinding sandbox-get --role=sandbox-get --serviceaccount="$TEST_NS:user" >/dev/null
	tok_user=$(k -n "$TEST_NS" create token user) && tok_other=$(k -n "$TEST_NS" create token other)
	local sb url
	sb=$(k -n "$TEST_NS" get sandboxes -o name | grep -m1 python-pool- | cut -d/ -f2)
	url="http://127.0.0.1:$rp/s/$TEST_NS/$sb/8080/v1/health"
	check "router: no token is 401" http_is 401 "$url"
	check "router: TokenReview + SubjectAccessReview deny a stranger (403)" \
		http_is 403 "$url" -H "Authorization: Bearer $tok_other"
	check "router: an allowed user reaches the lookup (503: sandbox has no pod IP here)" \
		http_is 503 "$url" -H "Authorization: Bearer $tok_user"
	check_not "no request of the router to the API server was forbidden" grep -qi -e forbidden \
		-e 'not permitted' "$WORK/router.log"
}

# flow_schema TOKEN METHOD PATH [curl args]: name of the FlowSchema the request matched.
flow_schema() {
	local tok=$1 m=$2 p=$3 uid
	shift 3
	uid=$(curl -sk -o /dev/null -D - -X "$m" -H "Authorization: Bearer $tok" \
		--cacert "$APISERVER_DIR/pki/ca.crt" "https://127.0.0.1:$API_PORT$p" "$@" |
		tr -d '\r' | awk -F': ' 'tolower($1) == "x-kubernetes-pf-flowschema-uid" {print $2}')
	k get flowschemas -o json | jq -r --arg u "$uid" '.items[] | select(.metadata.uid == $u) | .metadata.name'
}

static_apf() {
	check "config/apf applies" eval "k apply --server-side -k '$ROOT/config/apf' >/dev/null"
	local ct rt patch='-H content-type:application/merge-patch+json -d {}'
	ct=$(cat "$CTRL_ROOT/var/run/secrets/kubernetes.io/serviceaccount/token")
	rt=$(cat "$ROUTER_ROOT/var/run/secrets/kubernetes.io/serviceaccount/token")
	local claims=/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/$TEST_NS/sandboxclaims
	local sbs=/apis/agents.x-k8s.io/v1beta1/namespaces/$TEST_NS/sandboxes
	# shellcheck disable=SC2086 # $patch is split on purpose
	check "APF: claim status patch -> agent-sandbox-critical" eval \
		"[ \"\$(flow_schema '$ct' PATCH $claims/x/status $patch)\" = agent-sandbox-critical ]"
	check "APF: sandbox adoption patch -> agent-sandbox-critical" eval \
		"[ \"\$(flow_schema '$ct' PATCH $sbs/x $patch)\" = agent-sandbox-critical ]"
	check "APF: Lease update -> agent-sandbox-critical" eval \
		"[ \"\$(flow_schema '$ct' GET /apis/coordination.k8s.io/v1/namespaces/$SYS_NS/leases/$LEASE)\" = agent-sandbox-critical ]"
	check "APF: refill create -> agent-sandbox-bulk" eval \
		"[ \"\$(flow_schema '$ct' POST $sbs -H content-type:application/json -d '{}')\" = agent-sandbox-bulk ]"
	check "APF: pod list -> agent-sandbox-bulk" eval \
		"[ \"\$(flow_schema '$ct' GET /api/v1/pods?limit=1)\" = agent-sandbox-bulk ]"
	check "APF: events -> agent-sandbox-events" eval \
		"[ \"\$(flow_schema '$ct' POST /api/v1/namespaces/$TEST_NS/events -H content-type:application/json -d '{}')\" = agent-sandbox-events ]"
	check "APF: router TokenReview -> agent-sandbox-router" eval \
		"[ \"\$(flow_schema '$rt' POST /apis/authentication.k8s.io/v1/tokenreviews -H content-type:application/json -d '{}')\" = agent-sandbox-router ]"
	check "APF: router sandbox list -> agent-sandbox-router" eval \
		"[ \"\$(flow_schema '$rt' GET /apis/agents.x-k8s.io/v1beta1/sandboxes?limit=1)\" = agent-sandbox-router ]"
	check "APF: the two levels exist with their shares" eval \
		"[ \"\$(k get prioritylevelconfigurations agent-sandbox-critical agent-sandbox-bulk \
			-o jsonpath='{.items[*].spec.limited.nominalConcurrencyShares}')\" = '40 25' ]"
}

# helm_dry NAME ARGS...: helm template ARGS | kubectl apply --dry-run=server.
helm_dry() {
	local name=$1
	shift
	if "$HELM" template agent-sandbox "$ROOT/charts/agent-sandbox" -n "$SYS_NS" "$@" \
		>"$WORK/helm-$name.yaml" 2>"$WORK/helm-$name.err" &&
		k apply --server-side --force-conflicts --field-manager=helm-test --dry-run=server \
			-f "$WORK/helm-$name.yaml" >>"$WORK/helm-$name.err" 2>&1; then
		ok "helm template ($name) passes kubectl apply --dry-run=server"
	else
		not_ok "helm template ($name) passes kubectl apply --dry-run=server" "$(tail -3 "$WORK/helm-$name.err")"
	fi
}

static_helm() {
	HELM=${HELM:-$BIN_CACHE_HELM}
	if [ ! -x "$HELM" ]; then
		skip "Helm chart" "no helm binary ($HELM): tests/install/build-helm.sh builds it"
		return 0
	fi
	check "helm lint" eval "'$HELM' lint '$ROOT/charts/agent-sandbox' >'$WORK/helm-lint.log' 2>&1"
	helm_dry defaults --set image.tag=dev
	check "chart defaults: inventory and pod security" python3 "$ROOT/tests/install/check_manifests.py" \
		"$WORK/helm-defaults.yaml"
	check "the chart's router policy is config/router/policy.yaml's" python3 - \
		"$ROOT/config/router/policy.yaml" <<PY
import subprocess, sys, yaml
def policies(docs):
    out = {}
    for d in docs:
        if d and d["kind"].startswith("ValidatingAdmissionPolicy") and d["metadata"]["name"].startswith("sandbox-router"):
            out[(d["kind"], d["metadata"]["name"])] = d["spec"]
    return out
chart = subprocess.run(["$HELM", "template", "x", "$ROOT/charts/agent-sandbox"], capture_output=True, text=True, check=True).stdout
sys.exit(0 if policies(yaml.safe_load_all(open(sys.argv[1]))) == policies(yaml.safe_load_all(chart)) else 1)
PY
	check "chart RBAC is identical to config/rbac and config/router" python3 \
		"$ROOT/tests/install/check_manifests.py" --same-rbac "$ROOT/install.yaml" "$WORK/helm-defaults.yaml"
	k create namespace team-a >/dev/null 2>&1
	helm_dry options --set apf.enabled=true --set router.auth=none --set controller.replicas=2 \
		--set controller.watchNamespace=team-a --set 'controller.allowedLabelDomains={a.example,b.example}' \
		--set 'controller.extraArgs={--log-level=debug}' --set networkPolicy.enabled=false \
		--set crds.install=false --set controller.extensions=false --set image.registry=reg.example/x
	check "options: flags reach the controller" eval "grep -q -e '--namespace=team-a' '$WORK/helm-options.yaml' &&
		grep -q -e '--extensions=false' '$WORK/helm-options.yaml' && grep -q -e '\"--log-level=debug\"' '$WORK/helm-options.yaml' &&
		grep -q 'allowed-label-domains: \"a.example,b.example\"' '$WORK/helm-options.yaml'"
	check "options: router auth, images, no CRDs, no extensions RBAC, APF objects" eval \
		"grep -q -e '--auth=none' '$WORK/helm-options.yaml' && grep -q 'image: reg.example/x/sandbox-router:0.1.0' '$WORK/helm-options.yaml' &&
		! grep -q CustomResourceDefinition '$WORK/helm-options.yaml' && ! grep -q 'name: agent-sandbox-controller-extensions' '$WORK/helm-options.yaml' &&
		[ \"\$(grep -c 'kind: FlowSchema' '$WORK/helm-options.yaml')\" = 4 ]"
	check "options: one watched namespace binds the controller's roles there only" eval \
		"[ \"\$(grep -A3 '^kind: RoleBinding' '$WORK/helm-options.yaml' | grep -c 'namespace: team-a')\" = 1 ] &&
		! grep -A2 '^kind: ClusterRoleBinding' '$WORK/helm-options.yaml' | grep -q 'name: agent-sandbox-controller'"
	"$HELM" template agent-sandbox "$ROOT/charts/agent-sandbox" -n "$SYS_NS" \
		--set controller.watchNamespace=team-a >"$WORK/helm-watch-ns.yaml" 2>"$WORK/helm-watch-ns.err"
	check "late binding follows watchNamespace by default: one RoleBinding in team-a" \
		python3 - "$WORK/helm-watch-ns.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
lb = [(d["kind"], d["metadata"].get("namespace")) for d in docs
      if d["kind"].endswith("Binding") and d["metadata"]["name"] == "agent-sandbox-controller-late-binding"]
sys.exit(0 if lb == [("RoleBinding", "team-a")] else 1)
PY
	helm_dry router-ns --set router.watchNamespace=team-a
	check "router.watchNamespace: Sandboxes granted by a Role in team-a only, reviews cluster-wide" \
		python3 - "$WORK/helm-router-ns.yaml" "$SYS_NS" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
rbac = {(d["kind"], d["metadata"].get("namespace")): d for d in docs
        if d["metadata"]["name"] == "sandbox-router" and "Role" in d["kind"]}
res = lambda d: sorted(r for rule in d["rules"] for r in rule["resources"])
sa = [{"kind": "ServiceAccount", "name": "sandbox-router", "namespace": sys.argv[2]}]
sys.exit(0 if sorted(rbac) == [("ClusterRole", None), ("ClusterRoleBinding", None),
                               ("Role", "team-a"), ("RoleBinding", "team-a")]
         and res(rbac[("ClusterRole", None)]) == ["subjectaccessreviews", "tokenreviews"]
         and res(rbac[("Role", "team-a")]) == ["sandboxes"]
         and rbac[("RoleBinding", "team-a")]["roleRef"]["kind"] == "Role"
         and rbac[("RoleBinding", "team-a")]["subjects"] == sa else 1)
PY
	k create namespace team-b >/dev/null 2>&1
	helm_dry late-binding --set 'controller.lateBindingNamespaces={team-a,team-b}'
	check "late binding confined: Secrets granted by RoleBindings in team-a and team-b only" \
		python3 - "$WORK/helm-late-binding.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
lb = [(d["kind"], d["metadata"].get("namespace")) for d in docs
      if d["kind"].endswith("Binding") and d["metadata"]["name"] == "agent-sandbox-controller-late-binding"]
ext = [d["kind"] for d in docs if d["metadata"]["name"] == "agent-sandbox-controller-extensions"]
sys.exit(0 if sorted(lb) == [("RoleBinding", "team-a"), ("RoleBinding", "team-b")]
         and "ClusterRoleBinding" in ext else 1)
PY
	check "chart APF objects equal config/apf (specs)" python3 - "$WORK/helm-options.yaml" \
		"$ROOT/config/apf/flowcontrol.yaml" <<'PY'
import sys, yaml
def specs(p):
    return {(d["kind"], d["metadata"]["name"]): d["spec"] for d in yaml.safe_load_all(open(p))
            if d and d["kind"] in ("FlowSchema", "PriorityLevelConfiguration")}
sys.exit(0 if specs(sys.argv[1]) == specs(sys.argv[2]) else 1)
PY
	check_not "router.auth must be tokenreview or none" eval "'$HELM' template x '$ROOT/charts/agent-sandbox' \
		--set router.auth=open >/dev/null 2>&1"
	check_not "values.schema.json rejects a misspelt controller value" eval "'$HELM' template x \
		'$ROOT/charts/agent-sandbox' --set controller.claimTimout=5m >/dev/null 2>&1"
	# values the binaries refuse at start (a crash loop after a successful install)
	local bad
	for bad in router.authzCacheTTL=0 router.shutdownTimeout=0 controller.workerIdleExit=30 \
		controller.workerIdleExit=25h controller.podMetadataHold=60s \
		controller.sandboxWarmPoolCoalesceWindow=1m controller.sandboxWarmPoolReadinessGracePeriod=0s \
		controller.dependentDeletionDelay=2h controller.sideWriteHold=11m; do
		# router values are integers (--set), controller durations strings (--set-string)
		check_not "values.schema.json rejects $bad (the binary would refuse it)" eval \
			"'$HELM' template x '$ROOT/charts/agent-sandbox' --set$([ "${bad%%.*}" = router ] || echo -string) '$bad' >/dev/null 2>&1"
	done
	check "a change of allowedLabelDomains rolls the controller (the config is read at start)" eval \
		"[ \"\$('$HELM' template x '$ROOT/charts/agent-sandbox' --set 'controller.allowedLabelDomains={a.example}' |
			grep 'checksum/config')\" != \"\$('$HELM' template x '$ROOT/charts/agent-sandbox' \
			--set 'controller.allowedLabelDomains={b.example}' | grep 'checksum/config')\" ]"
	check "values.schema.json takes the bounds themselves" eval "'$HELM' template x \
		'$ROOT/charts/agent-sandbox' --set-string controller.workerIdleExit=24h \
		--set-string controller.podMetadataHold=30s --set-string controller.dependentDeletionDelay=60m \
		--set-string controller.sandboxWarmPoolCoalesceWindow=10s --set-string controller.sideWriteHold=10m \
		--set-string controller.workerIdleExit=0 >/dev/null"
	check "ServiceMonitors render when enabled" eval "'$HELM' template x '$ROOT/charts/agent-sandbox' \
		--set metrics.serviceMonitor.enabled=true | grep -c 'kind: ServiceMonitor' | grep -qx 2"
}

# leftovers: objects of the install that still exist (one per line).
leftovers() {
	{
		k get crd -o name | grep -e 'agents.x-k8s.io' || true
		k get namespace "$SYS_NS" "$TEST_NS" team-a team-b -o name 2>/dev/null || true
		k get clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings \
			-o name | grep -e agent-sandbox -e sandbox-router || true
		k get flowschemas,prioritylevelconfigurations -o name | grep agent-sandbox || true
	}
}

static_uninstall() {
	stop_bg
	k delete namespace "$TEST_NS" team-a team-b --wait=false >/dev/null 2>&1
	check "config/apf deletes" eval "k delete -k '$ROOT/config/apf' >/dev/null"
	check "kubectl delete -f install.yaml succeeds" eval \
		"k delete -f '$ROOT/install.yaml' --wait=true --timeout=120s >'$WORK/delete.log' 2>&1"
	# shellcheck disable=SC2016 # expanded by eval, on each try
	if poll 120 eval '[ -z "$(leftovers)" ]'; then
		ok "uninstall leaves nothing behind"
	else
		not_ok "uninstall leaves nothing behind" "$(leftovers | xargs)"
	fi
}

run_static() {
	static_render
	apiserver start >/dev/null || { not_ok "private API server starts"; return; }
	KUBECONFIG=$(apiserver kubeconfig)
	export KUBECONFIG
	info "private API server: $KUBECONFIG"
	leftovers | xargs -r k delete --wait=true >/dev/null 2>&1 || true
	static_apply
	static_rbac
	static_secret_policy
	static_router_policy
	if static_images; then
		static_controller && static_router
		static_apf
	fi
	static_helm
	static_uninstall
	[ -n "${AS_INSTALL_KEEP:-}" ] || apiserver stop --purge >/dev/null
}
