#!/usr/bin/env bash
# make dist: the release artifacts in dist/ (docs/release.md).
#
#   hack/dist.sh [--no-images] [--no-runtime]
#
#   dist/agent_sandbox_sdk-*.whl, *.tar.gz   Python SDK wheel and sdist (VERSION in PEP 440
#                                        form; twine check)
#   dist/install.yaml                    CRDs, controller and router, images REGISTRY/...:VERSION
#   dist/agent-sandbox-VERSION.tgz       the Helm chart (version VERSION, image.registry REGISTRY)
#   dist/kubectl-sandbox_VERSION_linux_{amd64,arm64}.tar.gz and sandbox.yaml (krew manifest);
#                                        its `install` applies dist/install.yaml
#   dist/images/NAME-VERSION.oci.tar     agent-sandbox-controller, sandbox-router, sandboxd,
#                                        runtime: one OCI archive each with an image index
#                                        of linux/amd64 and linux/arm64
#   dist/sbom.spdx.json                  SPDX 2.3 SBOM; dist/SHA256SUMS over everything
#
# Variables: VERSION (default 0.1.0-dev; a leading v is dropped), REGISTRY (image
# prefix, default ghcr.io/agent-sandbox-dev), PROJECT_URL (the krew manifest's homepage),
# RELEASE_URL (where krew downloads the tarballs; PROJECT_URL/releases/download/vVERSION),
# DIST_DIR (default dist). --no-images skips the OCI archives (and the arm64 builds of
# the controller, router and sandboxd); --no-runtime skips the runtime image. arm64
# binaries are cross-compiled (cmake/toolchain-aarch64.cmake; hack/deps.sh --cross); the
# arm64 runtime image is unpacked from Debian's arm64 packages (images/build.sh).
source "$(dirname "$0")/lib.sh"
source "$ROOT/images/lib.sh"

VERSION=${VERSION:-0.1.0-dev}
VERSION=${VERSION#v}
REGISTRY=${REGISTRY:-ghcr.io/agent-sandbox-dev}
REGISTRY=${REGISTRY%/}
PROJECT_URL=${PROJECT_URL:-https://github.com/agent-sandbox-dev/agent-sandbox}
RELEASE_URL=${RELEASE_URL:-$PROJECT_URL/releases/download/v$VERSION}
DIST=${DIST_DIR:-$ROOT/dist}
DIST_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/agent-sandbox/dist
WORK=$CACHE_DIR/dist
ARCHES=(amd64 arm64)
COMPONENTS=(agent-sandbox-controller sandbox-router sandboxd)
# Debian -dev packages whose static archives sandboxd links (CMakeLists.txt AS_STATIC_SANDBOXD).
SANDBOXD_STATIC=libc6-dev,libuv1-dev,libjansson-dev,libnghttp2-dev,libprotobuf-c-dev

usage() { sed -n '2,22s/^# \{0,1\}//p' "$0"; }

images=1 runtime=1
for a in "$@"; do
	case $a in
	--no-images) images=0 ;;
	--no-runtime) runtime=0 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
[[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$ ]] ||
	die "VERSION '$VERSION' is not a semantic version (X.Y.Z[-pre][+build])"
[[ $REGISTRY =~ ^[a-z0-9.:-]+(/[a-z0-9._-]+)*$ ]] || die "REGISTRY '$REGISTRY' is not an image prefix"
need jq "apt-get install jq"
# Image tags cannot hold '+' (semver build metadata): Helm's convention, '_'.
TAG=${VERSION//+/_}

# builddir ARCH: the release build directory of ARCH (configured on first use).
builddir() {
	case $1 in
	amd64)
		# kubectl-sandbox embeds dist/install.yaml (the release images), not the tree's
		cmake --preset release -DAS_INSTALL_MANIFEST="$DIST/install.yaml" >/dev/null ||
			die "cmake --preset release failed"
		echo "$ROOT/build/release"
		;;
	arm64)
		need aarch64-linux-gnu-gcc "hack/deps.sh --cross (gcc-aarch64-linux-gnu and the arm64 libraries)"
		if [ -f "$ROOT/build/release-arm64/build.ninja" ]; then
			cmake -B "$ROOT/build/release-arm64" -DAS_INSTALL_MANIFEST="$DIST/install.yaml" >/dev/null
		else
			cmake -S "$ROOT" -B "$ROOT/build/release-arm64" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
				-DAS_TESTS=OFF -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchain-aarch64.cmake" \
				-DAS_INSTALL_MANIFEST="$DIST/install.yaml" >/dev/null
		fi || die "cmake for arm64 failed (hack/deps.sh --cross installs the cross toolchain)"
		echo "$ROOT/build/release-arm64"
		;;
	esac
}

# build_arch ARCH TARGET...: builds TARGETs for ARCH; strips copies into $WORK/bin-ARCH.
build_arch() {
	local arch=$1 dir t strip=strip
	shift
	dir=$(builddir "$arch") || exit 1
	[ "$arch" = amd64 ] || strip=aarch64-linux-gnu-strip
	log "building $* ($arch)"
	nice -n 10 cmake --build "$dir" -j2 --target "$@" >"$WORK/build-$arch.log" 2>&1 ||
		{ tail -20 "$WORK/build-$arch.log" >&2; die "build failed ($arch): $WORK/build-$arch.log"; }
	mkdir -p "$WORK/bin-$arch"
	# a released `kubectl-sandbox install` must deploy the released images
	! grep -aq "localhost/agent-sandbox/" "$dir/kubectl-sandbox" ||
		die "kubectl-sandbox ($arch) embeds the development images (localhost/agent-sandbox)"
	grep -aq "image: $REGISTRY/agent-sandbox-controller:$TAG" "$dir/kubectl-sandbox" ||
		die "kubectl-sandbox ($arch) does not embed $REGISTRY/agent-sandbox-controller:$TAG"
	for t in "$@"; do
		# Same input, same bytes: the image digests stay stable.
		if ! cmp -s "$dir/$t" "$WORK/bin-$arch/$t.src"; then
			cp "$dir/$t" "$WORK/bin-$arch/$t.src"
			"$strip" --strip-unneeded -o "$WORK/bin-$arch/$t" "$WORK/bin-$arch/$t.src"
		fi
	done
}

python_dist() {
	local venv=$DIST_CACHE/venv src=$WORK/python
	if [ ! -x "$venv/bin/twine" ]; then
		log "creating $venv (build, twine, setuptools)"
		rm -rf "$venv"
		python3 -m venv "$venv" && "$venv/bin/pip" install -q build twine 'setuptools>=68' wheel ||
			die "cannot install build and twine into $venv"
	fi
	# Build from a copy: the source tree gets no build/ or egg-info.
	rm -rf "$src"
	mkdir -p "$src"
	(cd "$ROOT/sdk/python" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$src") ||
		die "cannot copy sdk/python"
	rm -rf "$WORK/pydist"
	# the copy has no hack/version.sh: setup.py takes VERSION (in PEP 440 form) from AS_VERSION
	AS_VERSION=$VERSION "$venv/bin/python" -m build --no-isolation --outdir "$WORK/pydist" "$src" >"$WORK/python-build.log" 2>&1 ||
		{ tail -20 "$WORK/python-build.log" >&2; die "python -m build failed"; }
	"$venv/bin/twine" check --strict "$WORK"/pydist/* || die "twine check failed"
	mv "$WORK"/pydist/* "$DIST/"
}

install_yaml() {
	[ -n "${KUBECTL:-}" ] || [ -x "$CACHE_DIR/bin/kubectl" ] || [ ! -x "$K8S_BIN/kubectl" ] ||
		export KUBECTL=$K8S_BIN/kubectl
	"$ROOT/hack/render-install.sh" --stdout --registry "$REGISTRY" --tag "$TAG" >"$DIST/install.yaml" ||
		die "rendering install.yaml failed"
}

helm_chart() {
	local helm chart=$WORK/chart/agent-sandbox
	helm=${HELM:-$("$ROOT/tests/install/build-helm.sh")} || die "no helm"
	rm -rf "$WORK/chart"
	mkdir -p "$WORK/chart"
	cp -r "$ROOT/charts/agent-sandbox" "$chart"
	# The packaged chart's images default to REGISTRY (tag: the appVersion, TAG).
	sed -i "s|^  registry: localhost/agent-sandbox$|  registry: $REGISTRY|" "$chart/values.yaml"
	grep -q "^  registry: $REGISTRY$" "$chart/values.yaml" || die "cannot set image.registry in the chart"
	"$helm" lint --strict "$chart" >"$WORK/helm-lint.log" 2>&1 ||
		{ cat "$WORK/helm-lint.log" >&2; die "helm lint failed"; }
	"$helm" package "$chart" --version "$VERSION" --app-version "$TAG" -d "$DIST" >/dev/null ||
		die "helm package failed"
}

# krew: kubectl-sandbox per architecture and the plugin manifest.
krew() {
	local arch tgz d
	for arch in "${ARCHES[@]}"; do
		tgz=$DIST/kubectl-sandbox_${VERSION}_linux_$arch.tar.gz
		d=$WORK/krew-$arch
		rm -rf "$d"
		mkdir -p "$d"
		cp "$WORK/bin-$arch/kubectl-sandbox" "$d/"
		tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$d" -c kubectl-sandbox |
			gzip -n >"$tgz" || die "cannot write $tgz"
	done
	python3 "$ROOT/hack/krew_manifest.py" --version "$VERSION" --url "$RELEASE_URL" --homepage "$PROJECT_URL" \
		"$DIST"/kubectl-sandbox_"${VERSION}"_linux_*.tar.gz >"$DIST/sandbox.yaml" ||
		die "krew manifest failed"
}

# component_images: controller, router and sandboxd for each architecture, one index each.
component_images() {
	local arch c per=()
	for arch in "${ARCHES[@]}"; do
		for c in "${COMPONENTS[@]}"; do
			log "image $c ($arch)"
			OCI_ARCH=$arch AS_IMAGES_CACHE=$WORK/images-$arch "$ROOT/images/build.sh" binaries \
				"$REGISTRY/$c:$TAG" --base scratch "$WORK/bin-$arch/$c" >/dev/null ||
				die "image $c ($arch) failed"
		done
	done
	mkdir -p "$DIST/images"
	for c in "${COMPONENTS[@]}"; do
		per=()
		for arch in "${ARCHES[@]}"; do per+=("$WORK/images-$arch/$c-$TAG.oci.tar"); done
		oci_index "$DIST/images/$c-$VERSION.oci.tar" "$REGISTRY/$c:$TAG" "${per[@]}" ||
			die "image index $c failed"
	done
}

# runtime_image: the sandbox runtime image (Debian + python3 + sandboxd) for each
# architecture, one index; each base layer's dpkg status for the SBOM.
runtime_image() {
	local arch extra out per=()
	for arch in "${ARCHES[@]}"; do
		extra=$WORK/runtime-extra-$arch
		rm -rf "$extra"
		mkdir -p "$extra/usr/local/bin" "$extra/usr/local/lib/agent-sandbox"
		install -m 0755 "$WORK/bin-$arch/sandboxd" "$extra/usr/local/bin/sandboxd"
		install -m 0644 "$ROOT/src/sandboxd/driver/kernel.py" "$extra/usr/local/lib/agent-sandbox/kernel.py"
		log "image runtime ($arch)"
		out=$(OCI_ARCH=$arch AS_RUNTIME_EXTRA_DIR=$extra AS_IMAGE_PREFIX=$REGISTRY AS_IMAGE_TAG=$TAG \
			AS_IMAGES_CACHE=$WORK/images-$arch "$ROOT/images/build.sh" runtime) || die "runtime image ($arch) failed"
		per+=("$out")
		runtime_status "$out" >"$WORK/runtime-dpkg-status-$arch" ||
			die "no dpkg status in the runtime image's base layer ($arch)"
	done
	mkdir -p "$DIST/images"
	oci_index "$DIST/images/runtime-$VERSION.oci.tar" "$REGISTRY/runtime:$TAG" "${per[@]}" ||
		die "image index runtime failed"
}

# runtime_status ARCHIVE: the dpkg status of the single-image ARCHIVE's base layer.
runtime_status() {
	local d
	d=$(tar -xOf "$1" index.json | jq -r '.manifests[0].digest' | cut -d: -f2) &&
		d=$(tar -xOf "$1" "blobs/sha256/$d" | jq -r '.layers[0].digest' | cut -d: -f2) &&
		tar -xOf "$1" "blobs/sha256/$d" | tar -xO ./var/lib/dpkg/status
}

sbom() {
	local args=() arch c
	for arch in "${ARCHES[@]}"; do
		for c in kubectl-sandbox "${COMPONENTS[@]}"; do
			[ -x "$WORK/bin-$arch/$c" ] || continue
			args+=(--binary "$arch:$WORK/bin-$arch/$c")
		done
	done
	if [ "$images" = 1 ] && [ "$runtime" = 1 ]; then
		for arch in "${ARCHES[@]}"; do
			args+=(--runtime-status "$arch:$WORK/runtime-dpkg-status-$arch")
		done
	fi
	python3 "$ROOT/hack/sbom.py" --version "$VERSION" --registry "$REGISTRY" --tag "$TAG" --dist "$DIST" \
		--static "sandboxd=$SANDBOXD_STATIC" --go-mod "$ROOT/sdk/go/go.mod" \
		--pyproject "$ROOT/sdk/python/pyproject.toml" "${args[@]}" >"$DIST/sbom.spdx.json" ||
		die "SBOM failed"
}

start=$(date +%s)
rm -rf "$DIST"
mkdir -p "$DIST" "$WORK" "$DIST_CACHE"
python_dist
install_yaml
helm_chart
targets=(kubectl-sandbox)
[ "$images" = 0 ] || targets+=("${COMPONENTS[@]}")
for arch in "${ARCHES[@]}"; do build_arch "$arch" "${targets[@]}"; done
# the next `make build` embeds the tree's install.yaml again (the preset resets it too)
cmake --preset release >/dev/null || die "cmake --preset release failed"
krew
if [ "$images" = 1 ]; then
	component_images
	[ "$runtime" = 0 ] || runtime_image
fi
sbom
(cd "$DIST" && find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort |
	xargs sha256sum >SHA256SUMS) || die "SHA256SUMS failed"
log "dist/ for $VERSION ($REGISTRY) in $(($(date +%s) - start))s:"
(cd "$DIST" && find . -type f -printf '  %P  %s\n' | LC_ALL=C sort) >&2
