#!/usr/bin/env bash
# The developer-feature e2e tests (pytest, tests/e2e/devx/) on the stack of `make up`:
# each test module gets a Ready sandbox per connection mode (router, API server pod proxy,
# pod IP; see tests/e2e/devx/conftest.py). Runs in the Python SDK's venv
# ($AGENT_SANDBOX_VENV, default .cache/pysdk-venv, as sdk/python/run-tests.sh) with the
# SDK and pytest installed. kubectl-sandbox: $KUBECTL_SANDBOX (default build/release).
# Usage: tests/e2e/devx.sh [pytest args...]; ends with pytest's summary line.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
stack_kubeconfig || {
	echo "devx: the stack is not up (make up)"
	exit 1
}
VENV=${AGENT_SANDBOX_VENV:-$ROOT/.cache/pysdk-venv}
{ [ -x "$VENV/bin/python" ] || python3 -m venv "$(realpath -m "$VENV")"; } &&
	"$VENV/bin/pip" install -q --disable-pip-version-check -e "$ROOT/sdk/python[test,mcp]" || {
	echo "devx: cannot set up the venv $VENV"
	exit 1
}
export AGENT_SANDBOX_KUBECONFIG=$KUBECONFIG
if stack_router; then
	export AGENT_SANDBOX_ROUTER_URL=$ROUTER AGENT_SANDBOX_ROUTER_TOKEN=$TOKEN
else
	info "no router token: router-mode tests are skipped"
	unset AGENT_SANDBOX_ROUTER_URL AGENT_SANDBOX_ROUTER_TOKEN
fi
export KUBECTL_SANDBOX=${KUBECTL_SANDBOX:-$ROOT/build/release/kubectl-sandbox}
cd "$ROOT" || exit 1
"$VENV/bin/python" -m pytest -ra -p no:cacheprovider tests/e2e/devx "$@"
