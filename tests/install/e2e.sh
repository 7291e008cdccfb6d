# The in-cluster end to end on the local cluster (docs/local-cluster.md). Sourced by run.sh.
# shellcheck shell=bash

E2E_NS=as-install-e2e
CLUSTER=$ROOT/hack/cluster/cluster.sh

# e2e_refuse_if_host_stack: fails with a message while `make up`'s host processes run.
e2e_refuse_if_host_stack() {
	local st
	st=$("$ROOT/hack/stack.sh" status 2>/dev/null)
	if grep -qE '^(agent-sandbox-controller|sandbox-router) +running' <<<"$st"; then
		cat >&2 <<MSG
tests/install/run.sh e2e: refusing to run: the host stack of \`make up\` is running
$(grep -E '^(agent-sandbox-controller|sandbox-router) ' <<<"$st")
An in-cluster controller would reconcile the same objects as the host one. Stop the host
processes first (make down; the cluster itself may stay up), or run only the checks that
need no node: tests/install/run.sh static
MSG
		return 1
	fi
}

# e2e_images: the runtime image with sandboxd, and the controller and router images, in
# the cluster's containerd.
e2e_images() {
	local extra=$WORK/runtime-extra
	cmake --preset release >/dev/null &&
		cmake --build --preset release --target sandboxd >/dev/null || return 1
	mkdir -p "$extra/usr/local/bin"
	cmp -s "$ROOT/build/release/sandboxd" "$extra/usr/local/bin/sandboxd" ||
		install -m 0755 "$ROOT/build/release/sandboxd" "$extra/usr/local/bin/sandboxd"
	AS_RUNTIME_EXTRA_DIR=$extra "$CLUSTER" images >/dev/null || return 1
	"$ROOT/images/components.sh" import >/dev/null
}

# The controller install under test: namespace and Lease name (run_pods changes them).
CTRL_NS=$SYS_NS CTRL_LEASE=$LEASE
e2e_leader() { k -n "$CTRL_NS" get lease "$CTRL_LEASE" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
e2e_ctrl_pods() {
	k -n "$CTRL_NS" get pods -l app=agent-sandbox-controller \
		--field-selector=status.phase=Running -o jsonpath='{.items[*].metadata.name}'
}
# e2e_leader_is_pod [NOT]: the Lease holder ("<pod>_<pid>") is a running controller pod
# (other than NOT).
e2e_leader_is_pod() {
	local h p
	h=$(e2e_leader)
	for p in $(e2e_ctrl_pods); do
		[ "$p" != "${1:-}" ] || continue
		case $h in "${p}_"*) return 0 ;; esac
	done
	return 1
}

# e2e_takeover: deletes the leading pod; another replica must take the Lease.
e2e_takeover() {
	local old
	old=$(e2e_leader)
	old=${old%_*}
	k -n "$CTRL_NS" delete pod "$old" --wait=false >/dev/null
	check "after the leader pod is deleted, another replica takes the Lease" \
		poll 90 e2e_leader_is_pod "$old"
}

e2e_workload() {
	k create namespace "$E2E_NS" >/dev/null 2>&1
	k -n "$E2E_NS" apply -f - >/dev/null <<YAML
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: python}
spec:
$(runtime_pod_template '        ports: [{name: http, containerPort: 8080}]')
$EMPTYDIR_VOLUME
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: python-pool}
spec: {replicas: 1, sandboxTemplateRef: {name: python}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: user}
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
subjects: [{kind: ServiceAccount, name: user}]
YAML
}

e2e_claim() { # NAME: creates a claim on the pool
	k -n "$E2E_NS" apply -f - >/dev/null <<YAML
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata: {name: $1}
spec: {warmPoolRef: {name: python-pool}}
YAML
}

# svc_py ROUTER-IP NAMESPACE TOKEN SANDBOX CODE: stdout of python3 -c CODE, through the
# router Service's ClusterIP (path form).
svc_py() {
	curl -sS --max-time 30 -X POST -H "Authorization: Bearer $3" \
		-H 'content-type: application/json' -d "$(py_cmd "$5")" \
		"http://$1:8080/s/$2/$4/8080/v1/processes/run" | jq -r .stdout
}
# e2e_run SANDBOX CODE: the same with the e2e suite's router, namespace and token.
e2e_run() { svc_py "$ROUTER_IP" "$E2E_NS" "$E2E_TOKEN" "$1" "$2"; }

e2e_install() {
	CRDS_BEFORE=$(k get crd sandboxes.agents.x-k8s.io -o name 2>/dev/null)
	check "install.yaml applies" eval \
		"k apply --server-side --force-conflicts --field-manager=install-e2e -f '$ROOT/install.yaml' >'$WORK/e2e-apply.log' 2>&1"
	k -n "$SYS_NS" scale deployment agent-sandbox-controller --replicas=2 >/dev/null
	check "controller Deployment (2 replicas) rolls out" \
		eval "k -n $SYS_NS rollout status deployment/agent-sandbox-controller --timeout=180s >/dev/null"
	check "router Deployment rolls out" eval "k -n $SYS_NS rollout status deployment/sandbox-router --timeout=180s >/dev/null"
	check "one controller pod holds the Lease" poll 60 e2e_leader_is_pod
	check "controller pods run as 65532 with a read-only root" eval \
		"[ \"\$(k -n $SYS_NS get pods -l app=agent-sandbox-controller -o jsonpath='{.items[0].spec.securityContext.runAsUser}')\" = 65532 ]"
}

e2e_claims() {
	local sb
	e2e_workload
	check "the warm pool becomes Ready" poll 180 eval \
		"[ \"\$(k -n $E2E_NS get sandboxwarmpool python-pool -o jsonpath='{.status.readyReplicas}')\" = 1 ]"
	e2e_claim first
	check "a claim from the pool becomes Ready" \
		poll 120 k -n "$E2E_NS" wait --for=condition=Ready sandboxclaim/first --timeout=1s
	sb=$(k -n "$E2E_NS" get sandboxclaim first -o jsonpath='{.status.sandbox.name}')
	ROUTER_IP=$(k -n "$SYS_NS" get service sandbox-router-svc -o jsonpath='{.spec.clusterIP}')
	E2E_TOKEN=$(k -n "$E2E_NS" create token user)
	check "a command runs through the in-cluster router (Service $ROUTER_IP:8080)" \
		eval "[ \"\$(e2e_run '$sb' 'print(6*7)')\" = 42 ]"
	check "the router refuses a request without a token (401)" \
		http_is 401 "http://$ROUTER_IP:8080/s/$E2E_NS/$sb/8080/v1/health"
}

e2e_failover() {
	local sb
	e2e_takeover
	e2e_claim second
	check "a claim made after the fail-over becomes Ready" \
		poll 180 k -n "$E2E_NS" wait --for=condition=Ready sandboxclaim/second --timeout=1s
	sb=$(k -n "$E2E_NS" get sandboxclaim second -o jsonpath='{.status.sandbox.name}')
	check "and runs a command through the router" eval "[ \"\$(e2e_run '$sb' 'print(7*6)')\" = 42 ]"
}

# e2e_leftovers: what of the install (and the test) still exists.
e2e_leftovers() {
	{
		[ -n "$CRDS_BEFORE" ] || k get crd -o name | grep -e 'agents.x-k8s.io' || true
		k get namespace "$SYS_NS" "$E2E_NS" -o name 2>/dev/null || true
		# (make up's namespace router, config/router-namespace, is not install.yaml's)
		k get clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings \
			-o name | grep -e agent-sandbox -e sandbox-router | grep -v -e sandbox-router-review || true
		k -n "$SYS_NS" get pods -l 'app in (agent-sandbox-controller,sandbox-router)' -o name 2>/dev/null || true
	}
}

# e2e_cli_upgrade: kubectl-sandbox install --wait over the running install; then an
# "upgrade" whose new router pods can never be scheduled (a nodeSelector no node has):
# the old pods stay Available, so only a rollout check (cli_rollout_done) notices.
e2e_cli_upgrade() {
	local cli=$ROOT/build/release/kubectl-sandbox rc
	if ! cmake --build --preset release --target kubectl-sandbox >"$WORK/cli-build.log" 2>&1; then
		not_ok "kubectl-sandbox builds" "$(tail -3 "$WORK/cli-build.log")"
		return
	fi
	check "kubectl-sandbox install --wait over the install rolls both Deployments out" eval \
		"'$cli' install --wait --timeout 3m >'$WORK/cli-install.log' 2>&1"
	k -n "$SYS_NS" patch deployment sandbox-router --type=merge \
		-p '{"spec":{"template":{"spec":{"nodeSelector":{"agent-sandbox.test/none":"x"}}}}}' >/dev/null
	"$cli" install --wait --timeout 30s >"$WORK/cli-upgrade.log" 2>&1
	rc=$?
	if [ "$rc" = 4 ] && grep -q 'deployment.apps/sandbox-router -n [a-z-]*: .*replicas' "$WORK/cli-upgrade.log"; then
		ok "install --wait times out (exit 4) on a rollout whose new pods never start"
	else
		not_ok "install --wait times out (exit 4) on a rollout whose new pods never start" \
			"exit $rc: $(tail -2 "$WORK/cli-upgrade.log")"
	fi
	k -n "$SYS_NS" patch deployment sandbox-router --type=merge \
		-p '{"spec":{"template":{"spec":{"nodeSelector":{"agent-sandbox.test/none":null}}}}}' >/dev/null
	check "and after the bad change is undone, install --wait passes again" eval \
		"'$cli' install --wait --timeout 3m >'$WORK/cli-install2.log' 2>&1"
}

e2e_uninstall() {
	k delete namespace "$E2E_NS" --timeout=180s >/dev/null 2>&1
	if [ -n "$CRDS_BEFORE" ]; then
		info "the CRDs existed before the test (make up?): uninstalling all but the CRDs"
		yaml_docs -v "$ROOT/install.yaml" CustomResourceDefinition >"$WORK/install-no-crds.yaml"
		check "uninstall (all but the CRDs) succeeds" eval \
			"k delete -f '$WORK/install-no-crds.yaml' --timeout=180s >'$WORK/e2e-delete.log' 2>&1"
	else
		check "kubectl delete -f install.yaml succeeds" eval \
			"k delete -f '$ROOT/install.yaml' --timeout=180s >'$WORK/e2e-delete.log' 2>&1"
	fi
	# shellcheck disable=SC2016 # expanded by eval, on each try
	if poll 180 eval '[ -z "$(e2e_leftovers)" ]'; then
		ok "uninstall leaves nothing behind"
	else
		not_ok "uninstall leaves nothing behind" "$(e2e_leftovers | xargs)"
	fi
}

run_e2e() {
	"$CLUSTER" up >/dev/null || { not_ok "the local cluster is up"; return; }
	KUBECONFIG=$("$CLUSTER" kubeconfig)
	export KUBECONFIG
	e2e_refuse_if_host_stack || { not_ok "host stack not running"; return; }
	check "images (runtime, controller, router) are in the cluster's containerd" e2e_images
	e2e_install
	e2e_claims
	e2e_failover
	e2e_cli_upgrade
	[ -n "${AS_INSTALL_KEEP:-}" ] || e2e_uninstall
}

# --- pods: install.yaml's Deployments as pods beside the host stack --------------------
PODS_NS=as-install-pods

pods_leftovers() {
	{
		k get namespace "$PODS_NS" -o name 2>/dev/null || true
		k get clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings \
			-o name | grep -e "$PODS_NS" || true
	}
}

pods_router() {
	local ip url tu to
	ip=$(k -n "$PODS_NS" get service sandbox-router-svc -o jsonpath='{.spec.clusterIP}')
	url="http://$ip:8080/s/$PODS_NS/nothing/8080/v1/health"
	k -n "$PODS_NS" create serviceaccount user >/dev/null
	k -n "$PODS_NS" create serviceaccount other >/dev/null
	k -n "$PODS_NS" create role sandbox-get --verb=get --resource=sandboxes.agents.x-k8s.io >/dev/null
	k -n "$PODS_NS" create rolebinding sandbox-get --role=sandbox-get --serviceaccount="$PODS_NS:user" >/dev/null
	tu=$(k -n "$PODS_NS" create token user) && to=$(k -n "$PODS_NS" create token other)
	# poll: the Service's endpoints and kube-proxy's rules may trail the pod's readiness
	check "router Service from the host: no token is 401" poll 30 http_is 401 "$url"
	check "router pod reviews tokens and access in-cluster: a stranger gets 403" \
		poll 30 http_is 403 "$url" -H "Authorization: Bearer $to"
	check "an allowed user gets 404 for an unknown sandbox" http_is 404 "$url" -H "Authorization: Bearer $tu"
	ip=$(k -n "$PODS_NS" get service agent-sandbox-controller -o jsonpath='{.spec.clusterIP}')
	check "controller metrics through its Service" poll 30 http_is 200 "http://$ip:8080/metrics"
	pods_sandbox "$tu"
}

# pods_sandbox TOKEN: a Sandbox in the namespace (reconciled by the host controller) runs a
# command through the in-cluster router: the router pod reaches the sandbox pod.
pods_sandbox() {
	local ip out
	if ! k get crd sandboxes.agents.x-k8s.io >/dev/null 2>&1 || [ -z "$(k get sandboxwarmpools -A -o name 2>/dev/null)" ]; then
		skip "a command through the in-cluster router" "no host stack (make up) to reconcile a Sandbox"
		return 0
	fi
	# restricted Pod Security: seccomp, no privilege escalation, no capabilities
	k -n "$PODS_NS" apply -f - >/dev/null <<YAML
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata: {name: box}
spec:
$(runtime_pod_template \
		'        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}' \
		', seccompProfile: {type: RuntimeDefault}')
$EMPTYDIR_VOLUME
YAML
	if ! poll 120 k -n "$PODS_NS" wait --for=condition=Ready sandbox/box --timeout=1s; then
		not_ok "a Sandbox becomes Ready in $PODS_NS" "$(k -n "$PODS_NS" get sandbox box -o jsonpath='{.status.conditions}')"
		return 1
	fi
	ip=$(k -n "$PODS_NS" get service sandbox-router-svc -o jsonpath='{.spec.clusterIP}')
	out=$(svc_py "$ip" "$PODS_NS" "$1" box 'print(6*7)')
	check "a command runs through the in-cluster router to a sandbox pod" test "$out" = 42
	k -n "$PODS_NS" delete sandbox box --wait=true --timeout=60s >/dev/null 2>&1
}

run_pods() {
	"$CLUSTER" status >/dev/null 2>&1 || { not_ok "the local cluster is up (hack/cluster/cluster.sh up)"; return; }
	KUBECONFIG=$("$CLUSTER" kubeconfig)
	export KUBECONFIG
	check "controller and router images imported into the cluster's containerd" eval \
		"'$ROOT/images/components.sh' import >/dev/null"
	pods_leftovers | xargs -r k delete --wait=true >/dev/null 2>&1
	python3 "$ROOT/tests/install/scope.py" "$ROOT/install.yaml" "$PODS_NS" "$PODS_NS-idle" >"$WORK/pods.yaml"
	check "install.yaml re-scoped to $PODS_NS applies (restricted Pod Security)" eval \
		"k apply --server-side --field-manager=install-pods -f '$WORK/pods.yaml' >'$WORK/pods-apply.log' 2>&1"
	check "controller pod becomes Ready (in-cluster config, probes, read-only root, non-root)" \
		eval "k -n $PODS_NS rollout status deployment/agent-sandbox-controller --timeout=180s >/dev/null"
	check "router pods become Ready" eval "k -n $PODS_NS rollout status deployment/sandbox-router --timeout=180s >/dev/null"
	CTRL_NS=$PODS_NS CTRL_LEASE=$PODS_NS
	check "the controller pod holds its Lease" poll 60 e2e_leader_is_pod
	pods_router
	k -n "$PODS_NS" scale deployment agent-sandbox-controller --replicas=2 >/dev/null
	check "a second controller replica becomes Ready (standby)" eval \
		"k -n $PODS_NS rollout status deployment/agent-sandbox-controller --timeout=180s >/dev/null"
	check "the Lease names one of the two replicas" e2e_leader_is_pod
	e2e_takeover
	check "uninstall succeeds" eval "k delete -f '$WORK/pods.yaml' --timeout=180s >/dev/null 2>&1"
	# shellcheck disable=SC2016 # expanded by eval, on each try
	if poll 120 eval '[ -z "$(pods_leftovers)" ]'; then
		ok "uninstall leaves nothing behind"
	else
		not_ok "uninstall leaves nothing behind" "$(pods_leftovers | xargs)"
	fi
}
