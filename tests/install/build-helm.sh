#!/usr/bin/env bash
# Build helm from the Go module proxy (helm is not packaged in Debian) and cache it.
#
#   tests/install/build-helm.sh        prints the path of the helm binary
#
# The binary is cached in $BIN_CACHE/helm-$HELM_VERSION (~/.cache/agent-sandbox/bin) and
# linked into .cache/bin/helm; a cached binary is not rebuilt. helm's go.mod has no
# replace lines, so a tiny wrapper module that requires helm.sh/helm/v3 is enough.
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/../../hack/lib.sh"
HELM_VERSION=${HELM_VERSION:-v3.19.5}
need go "install Go 1.24 or newer to build helm $HELM_VERSION"
HELM_BIN=$BIN_CACHE/helm-$HELM_VERSION
mkdir -p "$HELM_BIN" "$CACHE_DIR/bin"

dir=$CACHE_DIR/helm-wrapper-$HELM_VERSION
if [ ! -x "$HELM_BIN/helm" ]; then
	if [ ! -f "$dir/.ready" ]; then
		rm -rf "$dir"
		mkdir -p "$dir"
		printf '//go:build tools\n\npackage tools\n\nimport _ "helm.sh/helm/v3/cmd/helm"\n' \
			>"$dir/tools.go"
		printf 'module agent-sandbox.local/helm-wrapper\n\ngo 1.24\n\nrequire helm.sh/helm/v3 %s\n' \
			"$HELM_VERSION" >"$dir/go.mod"
		(cd "$dir" && GOFLAGS=-mod=mod go mod tidy >/dev/null 2>"$dir/tidy.log") ||
			{ cat "$dir/tidy.log" >&2; die "go mod tidy (helm) failed"; }
		touch "$dir/.ready"
	fi
	# helm's default Kubernetes version (helm template, lint) is that of its client-go,
	# as helm's own Makefile sets it.
	kv=$(cd "$dir" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' k8s.io/client-go) ||
		die "cannot find helm's k8s.io/client-go version"
	kv=${kv#v0.}
	log "building helm $HELM_VERSION (a few minutes the first time)"
	start=$(date +%s)
	(cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
		-ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${kv%%.*}" \
		-o "$HELM_BIN/helm.tmp" helm.sh/helm/v3/cmd/helm) >&2 || die "helm build failed"
	mv "$HELM_BIN/helm.tmp" "$HELM_BIN/helm"
	log "helm built in $(($(date +%s) - start))s"
fi
ln -sf "$HELM_BIN/helm" "$CACHE_DIR/bin/helm"
echo "$HELM_BIN/helm"
