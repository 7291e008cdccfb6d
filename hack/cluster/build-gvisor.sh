#!/usr/bin/env bash
# Build gVisor's runsc and its containerd shim (containerd-shim-runsc-v1) from the Go
# module proxy.
#
#   hack/cluster/build-gvisor.sh          print the directory holding both binaries
#
# The binaries are cached in $BIN_CACHE/gvisor-$GVISOR_VERSION (a cached binary is not
# rebuilt) and linked into .cache/bin. gVisor publishes its Go module as pseudo-versions
# of its "go" branch; the default one builds with Go >= 1.26.3 (about 4 minutes on 2 cores).
#
# CGO_ENABLED=0 is required, not an optimisation: the gofer and the sandbox re-execute
# /proc/self/exe after they pivot into a root that has no dynamic loader, so a
# dynamically linked runsc fails with "error executing umounter: fork/exec
# /proc/self/exe: no such file or directory" (docs/gvisor.md).
source "$(dirname "$0")/../lib.sh"
GVISOR_VERSION=${GVISOR_VERSION:-v0.0.0-20260905035102-160fafc42237}
GVISOR_GO_MIN=1.26.3
need go "install Go $GVISOR_GO_MIN or newer (hack/deps.sh)"

# go_at_least X.Y.Z: the go on PATH is at least that version.
go_at_least() {
	local have
	have=$(go env GOVERSION 2>/dev/null) || return 1
	have=${have#go}
	have=${have%%[!0-9.]*}
	[ "$(printf '%s\n%s\n' "$1" "$have" | sort -V | head -1)" = "$1" ]
}
go_at_least "$GVISOR_GO_MIN" ||
	die "gVisor $GVISOR_VERSION needs Go >= $GVISOR_GO_MIN, found $(go env GOVERSION 2>/dev/null)"

dir=$BIN_CACHE/gvisor-$GVISOR_VERSION
mkdir -p "$CACHE_DIR/bin"
if [ ! -x "$dir/runsc" ] || [ ! -x "$dir/containerd-shim-runsc-v1" ]; then
	log "building gVisor $GVISOR_VERSION (runsc, containerd-shim-runsc-v1)"
	start=$(date +%s)
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp"
	# Its go.mod has no replace lines: go install at the exact version builds it as
	# published. The shim's main package is gvisor.dev/gvisor/shim (binary "shim").
	GOBIN=$dir.tmp CGO_ENABLED=0 go install -trimpath -ldflags="-s -w" \
		"gvisor.dev/gvisor/runsc@$GVISOR_VERSION" "gvisor.dev/gvisor/shim@$GVISOR_VERSION" >&2 ||
		die "go install gvisor.dev/gvisor/{runsc,shim}@$GVISOR_VERSION failed"
	mv "$dir.tmp/shim" "$dir.tmp/containerd-shim-runsc-v1"
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
	log "gVisor built in $(($(date +%s) - start))s"
fi
ln -sf "$dir/runsc" "$CACHE_DIR/bin/runsc"
ln -sf "$dir/containerd-shim-runsc-v1" "$CACHE_DIR/bin/containerd-shim-runsc-v1"
echo "$dir"
