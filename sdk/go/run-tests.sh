#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Go SDK checks: gofmt, go vet (with and without the integration tag), the generated
# DeepCopy code (hack/gen-deepcopy.sh --check), unit tests with
# the race detector, then the integration tests twice: on a private API server without a
# controller (the API-level tests play the controller there) and on the stack (make up).
# Integration tests skip (with the reason) where they cannot run. Exit status: 0 when
# every step passed.
#
#   sdk/go/run-tests.sh              everything
#   sdk/go/run-tests.sh -unit        no integration tests
#   AS_KUBECONFIG, AS_ROUTER_URL, AS_ROUTER_TOKEN, AS_NAMESPACE, AS_WARM_POOL,
#   AS_TEMPLATE, AS_CONCURRENT_CLAIMS, AS_SANDBOXD, AS_BARE_DIR, AS_NO_CLAIM_CONTROLLER: see sandbox/integration_test.go and
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

# The bench's Go programs (bench/sdkprobe-go uses this SDK; bench/pod-encoding client-go)
# are held to the same checks, so they build when a benchmark needs them.
for prog in "$root"/bench/sdkprobe-go "$root"/bench/pod-encoding; do
	step "gofmt, go vet: ${prog#"$root"/}"
	bad=$(gofmt -l "$prog")
	if [ -n "$bad" ]; then
		printf 'not gofmt-formatted:\n%s\n' "$bad" >&2
		exit 1
	fi
	(cd "$prog" && GOFLAGS=-mod=mod go vet ./...)
	echo "ok"
done

# zz_generated.deepcopy.go matches the types (controller-gen, built once into the cache)
step "generated DeepCopy code current (hack/gen-deepcopy.sh --check)"
"$root/hack/gen-deepcopy.sh" --check

# The local sandboxd tests use a built sandboxd (build/*/sandboxd) or $AS_SANDBOXD.
step "unit tests (go test -race)"
go test -race -count=1 -timeout 10m ./...

$unit_only && exit 0

# Integration tests: the Integration* tests of ./sandbox/ (go test -race -tags integration)
# against one kubeconfig; the verdicts and skip reasons are printed, the whole log on failure.
integration() { # title kubeconfig
	step "integration tests (go test -race -tags integration): $1"
	echo "kubeconfig=${2:-none} router=${AS_ROUTER_URL:-none}"
	local log rc
	log=$(mktemp)
	set +e
	AS_KUBECONFIG=$2 go test -race -count=1 -timeout 30m -tags integration -run Integration -v ./sandbox/ >"$log" 2>&1
	rc=$?
	set -e
	if [ "$rc" -eq 0 ]; then
		grep -E '^(--- |\s+--- |ok|PASS|FAIL)|_test\.go:[0-9]+:' "$log" || true
	else
		cat "$log"
	fi
	rm -f "$log"
	return "$rc"
}

# The API-level tests (types, waits by watch, the early hand-out) need an API server with
# the CRDs and no claim controller: they play the controller. A private one of
# hack/apiserver.sh (state in $AS_BARE_DIR, default .cache/sdk-apiserver), stopped again
# afterwards unless it was running. The stack-level tests skip there (no warm pool).
bare_rc=0
if [ -x "$CACHE_DIR/bin/kube-apiserver" ] && [ -x "$CACHE_DIR/bin/kubectl" ]; then
	export_bare() { AS_APISERVER_DIR=${AS_BARE_DIR:-$CACHE_DIR/sdk-apiserver} AS_APISERVER_CONTROLLERS=none "$@"; }
	was_running=0
	export_bare "$root/hack/apiserver.sh" status >/dev/null 2>&1 && was_running=1
	bare_kc=$(export_bare "$root/hack/apiserver.sh" start | tail -1)
	kctl() { "$CACHE_DIR/bin/kubectl" --kubeconfig "$bare_kc" "$@"; }
	kctl apply --server-side --force-conflicts -f "$root/api/crds/" >/dev/null
	kctl wait --for condition=established --timeout=60s -f "$root/api/crds/" >/dev/null
	# a new CRD's storage answers 429 for a moment; the tests would skip
	for _ in $(seq 100); do kctl get sandboxclaims,sandboxes -A >/dev/null 2>&1 && break; sleep 0.2; done
	AS_NO_CLAIM_CONTROLLER=1 integration "private API server without a controller" "$bare_kc" || bare_rc=$?
	[ "$was_running" = 1 ] || export_bare "$root/hack/apiserver.sh" stop >/dev/null 2>&1 || true
else
	echo "no kube-apiserver under $CACHE_DIR/bin (hack/deps.sh --cluster): the API-level tests skip"
fi

ask_make() { make -s -C "$root" "$1" 2>/dev/null || true; }
export AS_ROUTER_URL=${AS_ROUTER_URL:-$(ask_make router-url)}
export AS_ROUTER_TOKEN=${AS_ROUTER_TOKEN:-$(ask_make router-token)}
stack_rc=0
integration "the stack (make up)" "${AS_KUBECONFIG:-$(ask_make kubeconfig)}" || stack_rc=$?
[ "$bare_rc" -eq 0 ] && exit "$stack_rc"
exit "$bare_rc"
