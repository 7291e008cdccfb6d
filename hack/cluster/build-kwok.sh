#!/usr/bin/env bash
# Build the kwok binary (simulated nodes for the scale mode) from the Go module proxy.
#
#   hack/cluster/build-kwok.sh
#
# The binary is cached in $BIN_CACHE/kwok-$KWOK_VERSION and linked into .cache/bin;
# a cached binary is not rebuilt. kwok's go.mod has no replace lines, so a tiny
# wrapper module that requires sigs.k8s.io/kwok is enough.
source "$(dirname "$0")/../lib.sh"
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
need go "install Go 1.26 or newer (kwok $KWOK_VERSION needs it)"
KWOK_BIN=$BIN_CACHE/kwok-$KWOK_VERSION
mkdir -p "$KWOK_BIN" "$CACHE_DIR/bin"

dir=$CACHE_DIR/kwok-wrapper-$KWOK_VERSION
if [ ! -x "$KWOK_BIN/kwok" ] || [ ! -f "$dir/.ready" ]; then
	if [ ! -f "$dir/.ready" ]; then
		rm -rf "$dir"
		mkdir -p "$dir"
		cat >"$dir/tools.go" <<'GO'
//go:build tools

package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
GO
		printf 'module agent-sandbox.local/kwok-wrapper\n\ngo 1.26\n\nrequire sigs.k8s.io/kwok %s\n' \
			"$KWOK_VERSION" >"$dir/go.mod"
		(cd "$dir" && GOFLAGS=-mod=mod go mod tidy >/dev/null 2>"$dir/tidy.log") ||
			{ cat "$dir/tidy.log" >&2; die "go mod tidy (kwok) failed"; }
		touch "$dir/.ready"
	fi
fi
if [ ! -x "$KWOK_BIN/kwok" ]; then
	log "building kwok $KWOK_VERSION"
	start=$(date +%s)
	(cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags="-s -w" \
		-o "$KWOK_BIN/kwok.tmp" sigs.k8s.io/kwok/cmd/kwok)
	mv "$KWOK_BIN/kwok.tmp" "$KWOK_BIN/kwok"
	log "kwok built in $(($(date +%s) - start))s"
fi
# kwok itself has no built-in stages (kwokctl adds them): collect the upstream
# "fast" node/pod stages plus the lease heartbeat from the module into one file.
if [ ! -s "$KWOK_BIN/stages.yaml" ]; then
	moddir=$(cd "$CACHE_DIR/kwok-wrapper-$KWOK_VERSION" 2>/dev/null &&
		GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' sigs.k8s.io/kwok) ||
		die "cannot locate sigs.k8s.io/kwok@$KWOK_VERSION in the module cache"
	st=$moddir/kustomize/stage
	for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
		pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
		[ -f "$st/$f" ] || die "kwok stage $f missing in $moddir"
		echo "---"
		cat "$st/$f"
	done >"$KWOK_BIN/stages.yaml.tmp"
	mv "$KWOK_BIN/stages.yaml.tmp" "$KWOK_BIN/stages.yaml"
fi
ln -sf "$KWOK_BIN/kwok" "$CACHE_DIR/bin/kwok"
ln -sf "$KWOK_BIN/stages.yaml" "$CACHE_DIR/bin/kwok-stages.yaml"
