#!/usr/bin/env bash
# Build rancher's local-path-provisioner (the dynamic provisioner kind ships as its default
# StorageClass) from the Go module proxy, and its image for the local cluster.
#
#   hack/cluster/build-local-path.sh          print the image archive path
#
# The binary is cached in $BIN_CACHE/local-path-provisioner-$LOCAL_PATH_VERSION (a cached
# binary is not rebuilt); the image ($IMAGE_PREFIX/local-path-provisioner:$VERSION, the
# static binary on a scratch base) is written by images/build.sh binaries.
source "$(dirname "$0")/../lib.sh"
source "$ROOT/images/lib.sh"
LOCAL_PATH_VERSION=${LOCAL_PATH_VERSION:-v0.0.30}
need go "install Go (hack/deps.sh)"
bin_dir=$BIN_CACHE/local-path-provisioner-$LOCAL_PATH_VERSION
bin=$bin_dir/local-path-provisioner
if [ ! -x "$bin" ]; then
	log "building local-path-provisioner $LOCAL_PATH_VERSION"
	start=$(date +%s)
	mkdir -p "$bin_dir"
	# Its go.mod has no replace lines: go install at the exact version builds it as released.
	GOBIN=$bin_dir.tmp CGO_ENABLED=0 go install -trimpath -ldflags="-s -w" \
		"github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION" >&2 ||
		die "go install github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION failed"
	mv "$bin_dir.tmp/local-path-provisioner" "$bin"
	rmdir "$bin_dir.tmp"
	log "local-path-provisioner built in $(($(date +%s) - start))s"
fi
"$ROOT/images/build.sh" binaries "$IMAGE_PREFIX/local-path-provisioner:$LOCAL_PATH_VERSION" \
	--base scratch --entrypoint /usr/local/bin/local-path-provisioner "$bin" ||
	die "local-path-provisioner image failed"
