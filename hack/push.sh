#!/usr/bin/env bash
# make push: copies the OCI archives of dist/images (make dist) to a registry with skopeo.
#
#   REGISTRY=ghcr.io/me VERSION=0.1.0 hack/push.sh [--dry-run]
#
# Each dist/images/NAME-VERSION.oci.tar goes to REGISTRY/NAME:VERSION with every
# architecture it holds (skopeo copy --all: the image index of amd64 and arm64). The
# archives' layers are uncompressed tars; skopeo gzips them on the way to the registry.
# Credentials are skopeo's (skopeo login REGISTRY, or $REGISTRY_AUTH_FILE). REGISTRY must
# be the prefix make dist was run with: install.yaml and the chart name those images.
# --dry-run prints the skopeo commands instead.
source "$(dirname "$0")/lib.sh"

VERSION=${VERSION:-0.1.0-dev}
VERSION=${VERSION#v}
REGISTRY=${REGISTRY:?set REGISTRY (e.g. make push REGISTRY=ghcr.io/me)}
REGISTRY=${REGISTRY%/}
TAG=${VERSION//+/_} # as hack/dist.sh tags the images
DIST=${DIST_DIR:-$ROOT/dist}
dry=0
case ${1:-} in
"") ;;
--dry-run) dry=1 ;;
*) sed -n '2,10s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
esac
[ "$dry" = 1 ] || need skopeo "apt-get install skopeo"
grep -q "image: $REGISTRY/agent-sandbox-controller:$TAG\$" "$DIST/install.yaml" 2>/dev/null ||
	die "$DIST/install.yaml is not for $REGISTRY and $VERSION: run make dist REGISTRY=$REGISTRY VERSION=$VERSION first"
shopt -s nullglob
archives=("$DIST"/images/*-"$VERSION".oci.tar)
[ ${#archives[@]} -gt 0 ] || die "no images in $DIST/images for $VERSION (make dist)"
for a in "${archives[@]}"; do
	name=${a##*/}
	name=${name%-"$VERSION".oci.tar}
	cmd=(skopeo copy --all "oci-archive:$a" "docker://$REGISTRY/$name:$TAG")
	if [ "$dry" = 1 ]; then
		echo "${cmd[*]}"
	else
		log "pushing $REGISTRY/$name:$TAG"
		"${cmd[@]}" || die "skopeo copy of $a failed"
	fi
done
