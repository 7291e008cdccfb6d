#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Go SDK checks: gofmt, go vet (with and without the integration tag), the generated
# DeepCopy code (hack/gen-deepcopy.sh --check), unit tests with
# the race detector, then the integration tests against the local API server / stack.
# Integration tests skip (with the reason) when nothing is up. Exit status: 0 when every
# step passed.
#
#   sdk/go/run-tests.sh              everything
#   sdk/go/run-tests.sh -unit        no integration tests
#   AS_KUBECONFIG, AS_ROUTER_URL, AS_ROUTER_TOKEN, AS_NAMESPACE, AS_WARM_POOL,
#   AS_TEMPLATE, AS_CONCURRENT_CLAIMS, AS_SANDBOXD: see sandbox/integration_test.go and
#   docs/sdk-go.md. Unset ones are asked from make (kubeconfig, router-url,
#   router-token) when those targets exist.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=hack/lib.sh disable=SC1091
source "$root/hack/lib.sh"
ensure_go
cd "$here"

unit_only=false
[ "${1:-}" = "-unit" ] && unit_only=true

step() { printf '\n== %s\n' "$*"; }

step "gofmt"
bad=$(gofmt -l .)
if [ -n "$bad" ]; then
	printf 'not gofmt-formatted:\n%s\n' "$bad" >&2
	exit 1
fi
echo "ok"

step "go vet"
go vet ./...
go vet -tags integration ./...
echo "ok"

# zz_generated.deepcopy.go matches the types (controller-gen, built once into the cache)
step "generated DeepCopy code current (hack/gen-deepcopy.sh --check)"
"$root/hack/gen-deepcopy.sh" --check

# The local sandboxd tests use a built sandboxd (build/*/sandboxd) or $AS_SANDBOXD.
step "unit tests (go test -race)"
go test -race -count=1 -timeout 10m ./...

$unit_only && exit 0

ask_make() { make -s -C "$root" "$1" 2>/dev/null || true; }
export AS_KUBECONFIG=${AS_KUBECONFIG:-$(ask_make kubeconfig)}
export AS_ROUTER_URL=${AS_ROUTER_URL:-$(ask_make router-url)}
export AS_ROUTER_TOKEN=${AS_ROUTER_TOKEN:-$(ask_make router-token)}
step "integration tests (go test -race -tags integration)"
echo "kubeconfig=${AS_KUBECONFIG:-none} router=${AS_ROUTER_URL:-none}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
go test -race -count=1 -timeout 30m -tags integration -run Integration -v ./sandbox/ >"$log" 2>&1
rc=$?
set -e
if [ "$rc" -eq 0 ]; then
	# Verdicts, skip reasons and the package summary.
	grep -E '^(--- |\s+--- |ok|PASS|FAIL)|_test\.go:[0-9]+:' "$log" || true
else
	cat "$log"
fi
exit "$rc"
