#!/usr/bin/env bash
# Install tests. Prints "N passed, N failed"; exits non-zero on failure.
#
#   tests/install/run.sh [static|pods|e2e|all]     (default all: static, then e2e)
#
# static  no node needed, never touches the shared local cluster: install.yaml and the
#         chart CRDs current; install.yaml applied to a private API server
#         (hack/apiserver.sh with state in .cache/install-tests/apiserver, ports from
#         17443/13379); least-privilege RBAC (kubectl auth can-i); the controller and
#         router images run in a chroot as 65532 with in-cluster config and the installed
#         RBAC (ready, Lease, a warm pool's Sandboxes and Pods, router auth 401/403/503,
#         nothing forbidden); APF classification of real requests (config/apf); the Helm
#         chart (helm template | kubectl apply --dry-run=server, same RBAC and APF as
#         config/); uninstall leaves nothing.
# pods    beside a running host stack: install.yaml re-scoped to namespace
#         as-install-pods (tests/install/scope.py: no CRDs, own cluster roles and Lease,
#         --namespace) on the local cluster; the controller and router images run as pods
#         under restricted Pod Security, take the Lease (2 replicas: fail-over when the
#         leader pod is deleted), serve metrics, the router
#         Service answers 401/403/404 from the host and, with the host stack reconciling a
#         Sandbox there, runs a command in it; uninstall leaves nothing.
# e2e     the in-cluster end to end on the local cluster (hack/cluster/cluster.sh):
#         images imported into its containerd, install.yaml applied, controller (2
#         replicas, leader election and fail-over) and router as pods, a claim from a
#         warm pool Ready and a command run through the router Service, kubectl-sandbox
#         install --wait over it (and timing out on an upgrade whose new pods never
#         start), uninstall leaves nothing. Refuses to run while `make up`'s host controller/router run (they
#         would reconcile the same objects): `make down` first.
#
# Env: AS_INSTALL_KEEP=1 keeps the private API server (and, for e2e, the install).
set -uo pipefail
# shellcheck source=tests/install/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/install/static.sh
source "$ROOT/tests/install/static.sh"
# shellcheck source=tests/install/e2e.sh
source "$ROOT/tests/install/e2e.sh"
BIN_CACHE_HELM=${AGENT_SANDBOX_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-sandbox/bin}/helm-${HELM_VERSION:-v3.19.5}/helm

mode=${1:-all}
case $mode in
static | pods | e2e | all) ;;
*) sed -n '2,32s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "tests/install/run.sh needs root (chroot, the local cluster)" >&2; exit 2; }
mkdir -p "$WORK"
trap stop_bg EXIT

if [ "$mode" = e2e ] || [ "$mode" = all ]; then
	e2e_refuse_if_host_stack || exit 3
fi
case $mode in
static) run_static ;;
pods) run_pods ;;
e2e) run_e2e ;;
all)
	run_static
	run_e2e
	;;
esac
summary install
[ "$failed" -eq 0 ]
