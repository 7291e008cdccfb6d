#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Regenerates the Go SDK's DeepCopy methods (sdk/go/apis/*/v1beta1/zz_generated.deepcopy.go)
# with controller-gen's object generator, from the +kubebuilder:object markers on the
# API types (doc.go: the package; types.go: the root kinds and their lists).
#
#   hack/gen-deepcopy.sh            regenerate in place
#   hack/gen-deepcopy.sh --check    fail (with a diff) when a generated file is not current
#
# controller-gen is built once from the Go module proxy into $BIN_CACHE
# (~/.cache/agent-sandbox/bin/controller-gen-<version>). Its version follows sdk/go's
# k8s.io modules: controller-tools v0.19 is built against Kubernetes 1.34.
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"

CONTROLLER_TOOLS_VERSION=${CONTROLLER_TOOLS_VERSION:-v0.19.0}
GEN=$BIN_CACHE/controller-gen-$CONTROLLER_TOOLS_VERSION

check=false
case "${1:-}" in
--check) check=true ;;
"") ;;
*) die "usage: hack/gen-deepcopy.sh [--check]" ;;
esac

ensure_controller_gen() {
	[ -x "$GEN" ] && return 0
	local tmp
	tmp=$(mktemp -d)
	log "building controller-gen $CONTROLLER_TOOLS_VERSION (once, into $BIN_CACHE)"
	(cd / && GOBIN=$tmp GOFLAGS='' GO111MODULE=on \
		go install "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS_VERSION") ||
		{
			rm -rf "$tmp"
			die "could not build controller-gen $CONTROLLER_TOOLS_VERSION"
		}
	mkdir -p "$BIN_CACHE"
	mv "$tmp/controller-gen" "$GEN"
	rm -rf "$tmp"
}

# Runs the object generator over the API packages of the Go module in $1.
generate() {
	(cd "$1" && "$GEN" object paths=./apis/...)
}

ensure_go
ensure_controller_gen
sdk=$ROOT/sdk/go
if ! $check; then
	generate "$sdk"
	log "regenerated: $(cd "$sdk" && find apis -name zz_generated.deepcopy.go | sort | tr '\n' ' ')"
	exit 0
fi

# --check: generate into a copy of the module and compare the generated files.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$sdk" "$work/go"
find "$work/go/apis" -name zz_generated.deepcopy.go -delete
generate "$work/go"
want=$(cd "$work/go" && find apis -name zz_generated.deepcopy.go | sort)
have=$(cd "$sdk" && find apis -name zz_generated.deepcopy.go | sort)
status=0
if [ "$want" != "$have" ]; then
	printf 'generated files differ:\n  want: %s\n  have: %s\n' "${want//$'\n'/ }" "${have//$'\n'/ }" >&2
	status=1
fi
while read -r f; do
	if [ -f "$sdk/$f" ] && ! diff -u "$sdk/$f" "$work/go/$f" >&2; then
		status=1
	fi
done <<<"$want"
if [ $status -ne 0 ]; then
	echo "sdk/go: DeepCopy code is not current; run hack/gen-deepcopy.sh" >&2
	exit 1
fi
echo "ok: sdk/go DeepCopy code is current (${want//$'\n'/ })"
