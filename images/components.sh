#!/usr/bin/env bash
# Controller and router images for the local cluster, without Docker: the release
# binaries (stripped) on a scratch base with their shared libraries (images/build.sh
# binaries), the same layout as images/Dockerfile.controller and images/Dockerfile.router.
#
#   images/components.sh build            build (release preset) and write both archives
#   images/components.sh import [SOCKET]  build, then import into containerd (default: the
#                                         local cluster's) the images whose digest changed
#   images/components.sh ref controller|router   print the image reference
#
# References: $AS_IMAGE_PREFIX/agent-sandbox-controller:dev and .../sandbox-router:dev
# (default prefix localhost/agent-sandbox), the names install.yaml uses.
source "$(dirname "$0")/../hack/lib.sh"
source "$ROOT/images/lib.sh"

RELEASE=${AS_RELEASE_DIR:-$ROOT/build/release}
NAMES=(agent-sandbox-controller sandbox-router)

usage() { sed -n '2,12s/^# \{0,1\}//p' "$0"; }

ref_of() { echo "$IMAGE_PREFIX/$1:dev"; }

# build_all: prints one archive path per component.
build_all() {
	local n tmp
	if [ -z "${AS_RELEASE_DIR:-}" ]; then
		cmake --preset release >/dev/null
		cmake --build --preset release --target "${NAMES[@]}" >/dev/null ||
			die "build failed: cmake --build --preset release"
	fi
	tmp=$IMAGES_CACHE/components-bin
	mkdir -p "$tmp"
	for n in "${NAMES[@]}"; do
		[ -x "$RELEASE/$n" ] || die "missing $RELEASE/$n"
		# Strip a copy: same input, same bytes, so the archive digest is stable.
		if ! cmp -s "$RELEASE/$n" "$tmp/$n.src"; then
			cp "$RELEASE/$n" "$tmp/$n.src"
			strip --strip-unneeded -o "$tmp/$n" "$tmp/$n.src"
		fi
		"$ROOT/images/build.sh" binaries "$(ref_of "$n")" --base scratch "$tmp/$n" ||
			die "image build failed: $n"
	done
}

# import_changed SOCKET: imports the archives whose digest the containerd lacks.
import_changed() {
	oci_import_changed "$1" $(build_all)
}

case ${1:-} in
build) build_all ;;
import)
	sock=${2:-${AS_CLUSTER_DIR:-$CACHE_DIR/cluster}/run/containerd/containerd.sock}
	[ -S "$sock" ] || die "no containerd socket at $sock (is the local cluster up?)"
	import_changed "$sock"
	;;
ref)
	case ${2:-} in
	controller) ref_of agent-sandbox-controller ;;
	router) ref_of sandbox-router ;;
	*) die "ref: controller or router" ;;
	esac
	;;
-h | --help | help) usage ;;
*) usage >&2; exit 2 ;;
esac
