#!/usr/bin/env bash
# Release artifact tests: runs hack/dist.sh (make dist) for a test version and registry
# into .cache/dist-tests/dist and checks what it wrote. Prints "N passed, N failed".
#
#   tests/dist/run.sh [--no-runtime]
#
# Checks: SHA256SUMS verifies; twine check; the wheel installs with its test and mcp
# extras in a clean venv, imports from it, and passes the SDK's unit suite (run where
# sdk/python/src is not importable); helm lint of the packaged chart (chart version and
# appVersion = VERSION); helm template with default values equals dist/install.yaml
# (tests/dist/check_dist.py same-install: Helm's labels and the flags the chart spells
# out at their defaults aside); every install.yaml image is REGISTRY/...:VERSION; the
# krew manifest's sha256s and URLs; both kubectl-sandbox binaries embed dist/install.yaml
# (REGISTRY images, no localhost/agent-sandbox); the SBOM's SPDX 2.3 fields, artifacts and Debian
# dependencies; the OCI archives (index.json, amd64 + arm64 manifests whose configs name
# that architecture; skopeo copies them and inspects each architecture); the arm64
# controller, router and sandboxd from their image's root file system run under
# qemu-aarch64-static (--help, --version), the amd64 ones natively in a chroot; the
# runtime image of each architecture: python3 and sandboxd run from it (arm64 under
# qemu), the sandbox user, CA certificates, config, and arm64's hand-made setup equal to
# amd64's; make push --dry-run. --no-runtime leaves the runtime image out (faster cold).
#
# Warm (binaries, helm, the runtime base layers, the kept wheels present) 90-105 s on
# two busy cores; cold adds the builds (docs/release.md).
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/../e2e/lib.sh"
WORK=${AS_DIST_TEST_WORK:-$ROOT/.cache/dist-tests}
VERSION=1.2.3-rc.1
REGISTRY=registry.example/team
URL=https://downloads.example/agent-sandbox/v$VERSION
DIST=$WORK/dist
HELM=${HELM:-}
args=()
case ${1:-} in
"") ;;
--no-runtime) args+=(--no-runtime) ;;
*) sed -n '2,23s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
esac

rm -rf "$WORK"
mkdir -p "$WORK"
for tool in aarch64-linux-gnu-gcc qemu-aarch64-static; do
	if ! command -v "$tool" >/dev/null; then
		skip "release artifacts" "no $tool: hack/deps.sh --cross installs the arm64 toolchain"
		summary "dist tests"
		exit 0
	fi
done
check "hack/dist.sh refuses a VERSION that is not a semantic version" eval \
	"! DIST_DIR='$DIST' VERSION=1.2 '$ROOT/hack/dist.sh' 2>'$WORK/bad.err' && grep -q 'not a semantic version' '$WORK/bad.err' && [ ! -e '$DIST' ]"
check "hack/dist.sh refuses a REGISTRY that is not an image prefix" eval \
	"! DIST_DIR='$DIST' REGISTRY='Bad Registry/' '$ROOT/hack/dist.sh' 2>'$WORK/bad.err' && grep -q 'not an image prefix' '$WORK/bad.err'"
info "hack/dist.sh VERSION=$VERSION REGISTRY=$REGISTRY (log: $WORK/dist.log)"
if ! DIST_DIR=$DIST VERSION=v$VERSION REGISTRY=$REGISTRY RELEASE_URL=$URL \
	"$ROOT/hack/dist.sh" "${args[@]}" >"$WORK/dist.log" 2>&1; then
	not_ok "hack/dist.sh" "$(tail -5 "$WORK/dist.log")"
	summary "dist tests"
	exit 1
fi
ok "hack/dist.sh (VERSION=v$VERSION: the leading v dropped)"
cd "$DIST" || exit 1
check "SHA256SUMS verifies and covers every file" eval \
	'sha256sum --quiet -c SHA256SUMS && [ "$(find . -type f ! -name SHA256SUMS | wc -l)" = "$(wc -l <SHA256SUMS)" ]'

# --- Python ----------------------------------------------------------------------------
venv=${XDG_CACHE_HOME:-$HOME/.cache}/agent-sandbox/dist/venv
wheel=$(ls ./*.whl)
sdist=$(ls ./*.tar.gz | grep -v '^./kubectl-sandbox_')
check "the wheel and sdist carry VERSION in PEP 440 form (1.2.3rc1)" eval \
	"case '$wheel' in ./agent_sandbox_sdk-1.2.3rc1-py3-*.whl) ;; *) false ;; esac &&
	 [ '$sdist' = ./agent_sandbox_sdk-1.2.3rc1.tar.gz ]"
check "twine check --strict (wheel and sdist)" eval \
	"[ -n '$sdist' ] && '$venv/bin/twine' check --strict '$wheel' '$sdist' >'$WORK/twine.log' 2>&1"
# The SDK's unit suite against the installed wheel: the wheel with its test and mcp extras
# in a clean venv, the tests run from a copy of sdk/python/tests beside pyproject.toml
# (pytest's settings) and setup.py (test_version), where no source tree is importable.
# The requirements' wheels are kept per user (pip download) and installed offline from
# there; they are downloaded again when one is missing.
wheels=${XDG_CACHE_HOME:-$HOME/.cache}/agent-sandbox/pip-wheels
suite=$WORK/sdk-suite
sdk_install() {
	"$WORK/venv/bin/pip" install -q --disable-pip-version-check --no-compile --no-index \
		--find-links "$wheels" "$wheel[test,mcp]"
}
if top=$(python3 "$ROOT/tests/dist/check_dist.py" wheel-top "$wheel") &&
	python3 -m venv "$WORK/venv" &&
	{ sdk_install >"$WORK/pip.log" 2>&1 ||
		{ "$WORK/venv/bin/pip" download -q --disable-pip-version-check -d "$wheels" "$wheel[test,mcp]" &&
			sdk_install; } >>"$WORK/pip.log" 2>&1; } &&
	mkdir -p "$suite" && cp -r "$ROOT/sdk/python/tests" "$ROOT/sdk/python/pyproject.toml" "$ROOT/sdk/python/setup.py" "$suite/" &&
	(cd "$suite" && "$WORK/venv/bin/python" -c "import $top, sys; sys.exit(0 if '$WORK/venv/' in $top.__file__ else 1)"); then
	ok "the wheel installs with its test extras in a clean venv and $top imports from it"
	if (cd "$suite" && "$WORK/venv/bin/python" -m pytest -q -ra -p no:cacheprovider -m 'not integration' \
		tests/unit >"$WORK/sdk-suite.log" 2>&1); then
		ok "SDK unit suite against the wheel: $(grep -E '^=* *[0-9]+ passed' "$WORK/sdk-suite.log" | tr -d =)"
	else
		not_ok "SDK unit suite against the wheel ($WORK/sdk-suite.log)" "$(tail -5 "$WORK/sdk-suite.log")"
	fi
else
	not_ok "the wheel installs with its test extras in a clean venv and imports" "$(tail -3 "$WORK/pip.log" 2>/dev/null)"
fi

# --- install.yaml, chart, krew ---------------------------------------------------------
check "install.yaml images are $REGISTRY/...:$VERSION" \
	python3 "$ROOT/tests/dist/check_dist.py" images install.yaml "$REGISTRY" "$VERSION"
[ -n "$HELM" ] || HELM=$("$ROOT/tests/install/build-helm.sh" 2>"$WORK/build-helm.log")
chart=agent-sandbox-$VERSION.tgz
check "helm lint --strict $chart" eval "'$HELM' lint --strict '$chart' >'$WORK/helm-lint.log' 2>&1"
check "chart version and appVersion are $VERSION" eval \
	"'$HELM' show chart '$chart' | grep -qx 'version: $VERSION' && '$HELM' show chart '$chart' | grep -qx 'appVersion: $VERSION'"
"$HELM" template agent-sandbox "$chart" -n agent-sandbox-system >"$WORK/helm-template.yaml" 2>"$WORK/helm-template.err"
check "helm template (default values) equals install.yaml" \
	python3 "$ROOT/tests/dist/check_dist.py" same-install install.yaml "$WORK/helm-template.yaml"
check "krew manifest: v$VERSION, amd64 + arm64, URLs and sha256s" \
	python3 "$ROOT/tests/dist/check_dist.py" krew sandbox.yaml "$VERSION" "$URL" kubectl-sandbox_*.tar.gz
# cli_embeds_release: both krew binaries embed dist/install.yaml (REGISTRY images, no dev ones).
cli_embeds_release() {
	local a
	for a in amd64 arm64; do
		tar -xOzf "kubectl-sandbox_${VERSION}_linux_$a.tar.gz" kubectl-sandbox >"$WORK/cli-$a" &&
			grep -aq "image: $REGISTRY/sandbox-router:$VERSION" "$WORK/cli-$a" &&
			! grep -aq localhost/agent-sandbox/ "$WORK/cli-$a" || return 1
	done
}
check "kubectl-sandbox (both architectures) embeds dist/install.yaml: REGISTRY images, no dev ones" \
	cli_embeds_release
check "krew tarballs hold kubectl-sandbox of their architecture" eval \
	"tar -xOzf kubectl-sandbox_${VERSION}_linux_amd64.tar.gz kubectl-sandbox | file - | grep -q x86-64 &&
	 tar -xOzf kubectl-sandbox_${VERSION}_linux_arm64.tar.gz kubectl-sandbox | file - | grep -q aarch64"

# --- SBOM ------------------------------------------------------------------------------
check "SBOM: SPDX 2.3 fields, every artifact's sha256, versioned Debian, Go and Python dependencies" \
	python3 "$ROOT/tests/dist/check_dist.py" sbom sbom.spdx.json .

# --- images ----------------------------------------------------------------------------
for c in agent-sandbox-controller sandbox-router sandboxd; do
	check "image $c: OCI index of linux/amd64 and linux/arm64, named $REGISTRY/$c:$VERSION" \
		python3 "$ROOT/tests/dist/check_dist.py" oci "images/$c-$VERSION.oci.tar" "$REGISTRY/$c:$VERSION" amd64 arm64
done
# skopeo (make push's tool) reads each archive: copying every architecture into an OCI
# layout verifies each blob's digest and size.
if command -v skopeo >/dev/null; then
	for c in agent-sandbox-controller sandbox-router sandboxd; do
		a=images/$c-$VERSION.oci.tar
		check "skopeo: $c copies with both architectures, the arm64 one inspects as arm64" eval \
			"skopeo copy -q --all 'oci-archive:$a' 'oci:$WORK/skopeo-$c:$VERSION' >'$WORK/skopeo.log' 2>&1 &&
			 [ \"\$(skopeo inspect --override-arch arm64 'oci-archive:$a' | jq -r .Architecture)\" = arm64 ] &&
			 [ \"\$(skopeo inspect --override-arch amd64 'oci-archive:$a' | jq -r .Architecture)\" = amd64 ]"
		rm -rf "$WORK/skopeo-$c"
	done
else
	skip "skopeo reads the archives" "no skopeo (hack/deps.sh --cross)"
fi
if [ ${#args[@]} -eq 0 ]; then
	check "image runtime: OCI index of linux/amd64 and linux/arm64, named $REGISTRY/runtime:$VERSION" \
		python3 "$ROOT/tests/dist/check_dist.py" oci "images/runtime-$VERSION.oci.tar" "$REGISTRY/runtime:$VERSION" amd64 arm64
fi

# blob ARCHIVE DIGEST: prints the blob DIGEST (sha256:HEX) of an OCI archive.
blob() { tar -xOf "$1" "blobs/sha256/${2#sha256:}"; }

# manifest ARCHIVE ARCH: prints the manifest of the ARCH image of a multi-architecture archive.
manifest() {
	local d
	d=$(tar -xOf "$1" index.json | jq -r '.manifests[0].digest') &&
		d=$(blob "$1" "$d" | jq -r --arg a "$2" '.manifests[] | select(.platform.architecture == $a) | .digest') &&
		[ -n "$d" ] && blob "$1" "$d"
}

# image_config ARCHIVE ARCH: prints the config of the ARCH image.
image_config() {
	local m
	m=$(manifest "$1" "$2") && blob "$1" "$(jq -r .config.digest <<<"$m")"
}

# rootfs ARCHIVE ARCH DIR: unpacks the ARCH image of a multi-architecture archive.
rootfs() {
	local m l
	m=$(manifest "$1" "$2") || return 1
	mkdir -p "$3"
	for l in $(jq -r '.layers[].digest' <<<"$m"); do
		blob "$1" "$l" | tar -xf - -C "$3" || return 1
	done
}

# run_in ARCH ROOT BIN ARGS...: the image's BIN with its own libraries.
run_in() {
	local arch=$1 root=$2
	shift 2
	if [ "$arch" = arm64 ]; then
		qemu-aarch64-static -L "$root" "$root$@"
	else
		chroot "$root" "$@"
	fi
}

for arch in arm64 amd64; do
	if [ "$arch" = arm64 ] && ! command -v qemu-aarch64-static >/dev/null; then
		skip "arm64 binaries under qemu" "no qemu-aarch64-static (hack/deps.sh --cross)"
		continue
	fi
	if [ "$arch" = amd64 ] && [ "$(id -u)" != 0 ]; then
		skip "amd64 binaries in a chroot of their image" "needs root"
		continue
	fi
	for c in agent-sandbox-controller sandbox-router sandboxd; do
		r=$WORK/rootfs-$c-$arch
		if ! rootfs "images/$c-$VERSION.oci.tar" "$arch" "$r"; then
			not_ok "$c ($arch): unpack its image"
			continue
		fi
		file "$r/usr/local/bin/$c" >"$WORK/file-$c-$arch"
		want=x86-64
		[ "$arch" = amd64 ] || want=aarch64
		check "$c ($arch) in its image is an $want binary" grep -q "$want" "$WORK/file-$c-$arch"
		check "$c ($arch) --help runs from its image alone" eval \
			"run_in $arch '$r' /usr/local/bin/$c --help >'$WORK/help-$c-$arch' 2>&1 && grep -qi usage '$WORK/help-$c-$arch'"
	done
	check "sandboxd ($arch) --version is sandboxd X.Y.Z" eval \
		"run_in $arch '$WORK/rootfs-sandboxd-$arch' /usr/local/bin/sandboxd --version | grep -Eq '^sandboxd [0-9]+\.[0-9]+\.[0-9]+'"
done

# --- runtime image ---------------------------------------------------------------------
# ca_links ROOT: each link of ROOT/etc/ssl/certs resolves inside ROOT, more than 100 of
# them are OpenSSL hash links, and the bundle is there.
ca_links() {
	local l t n=0
	[ -s "$1/etc/ssl/certs/ca-certificates.crt" ] || return 1
	while IFS= read -r -d '' l; do
		t=$(readlink "$l")
		case $t in
		/*) [ -f "$1$t" ] ;;
		*) [ -L "$1/etc/ssl/certs/$t" ] || [ -f "$1/etc/ssl/certs/$t" ] ;;
		esac || { echo "$l -> $t: not in the image" >&2; return 1; }
		case ${l##*/} in *.[0-9]) n=$((n + 1)) ;; esac
	done < <(find "$1/etc/ssl/certs" -type l -print0)
	[ "$n" -gt 100 ]
}

# deb_version ROOT PACKAGE: PACKAGE's version in ROOT's dpkg status.
deb_version() {
	awk -v p="$2" '$1 == "Package:" { on = ($2 == p) } on && $1 == "Version:" { print $2; exit }' \
		"$1/var/lib/dpkg/status"
}

# same_setup A B: what maintainer scripts set up in root file system A (debootstrapped)
# is the same in B (set up by hand): those files of /etc (the CA certificates' when both
# have the same ca-certificates), the alternatives (man pages aside), /bin/sh, /proc a
# directory, /var/run in /run, /var/mail.
same_setup() {
	local f files=(passwd group shells subuid subgid timezone nsswitch.conf profile)
	[ "$(deb_version "$1" ca-certificates)" != "$(deb_version "$2" ca-certificates)" ] ||
		files+=(ca-certificates.conf ssl/certs/ca-certificates.crt)
	for f in "${files[@]}"; do
		cmp "$1/etc/$f" "$2/etc/$f" >&2 || return 1
	done
	[ "$(cd "$1/etc/alternatives" && find . -type l ! -name '*.gz' -printf '%P %l\n' | sort)" = \
		"$(cd "$2/etc/alternatives" && find . -type l ! -name '*.gz' -printf '%P %l\n' | sort)" ] &&
		[ "$(readlink "$2/usr/bin/sh")" = dash ] && [ "$(readlink "$2/usr/bin/awk")" = /etc/alternatives/awk ] &&
		[ -d "$2/proc" ] && [ ! -L "$2/proc" ] && [ "$(readlink "$2/var/run")" = /run ] &&
		[ "$(stat -c %a:%g "$2/var/mail")" = "$(stat -c %a:%g "$1/var/mail")" ]
}

# Both architectures from one archive. The arm64 root file system was unpacked from
# Debian's arm64 packages without running any of them (images/build.sh): its python3 and
# sandboxd run here under qemu-aarch64-static, the amd64 ones in a chroot.
if [ ${#args[@]} -eq 0 ]; then
	rt=images/runtime-$VERSION.oci.tar
	for arch in amd64 arm64; do
		r=$WORK/rootfs-runtime-$arch
		if ! rootfs "$rt" "$arch" "$r"; then
			not_ok "runtime ($arch): unpack its image"
			continue
		fi
		want=x86-64
		[ "$arch" = amd64 ] || want=aarch64
		check "runtime ($arch): python3 and sandboxd are $want binaries" eval \
			"file -L '$r/usr/bin/python3' | grep -q '$want' && file '$r/usr/local/bin/sandboxd' | grep -q '$want'"
		check "runtime ($arch): user sandbox (1000:1000, home /workspace), the CA certificates' links and bundle" eval \
			"grep -qx 'sandbox:x:1000:1000::/workspace:/bin/bash' '$r/etc/passwd' &&
			 grep -qx 'sandbox:x:1000:' '$r/etc/group' && [ \"\$(stat -c %u:%g '$r/workspace')\" = 1000:1000 ] &&
			 ca_links '$r'"
		if [ "$arch" = amd64 ] && [ "$(id -u)" != 0 ]; then
			skip "runtime (amd64): python3 and sandboxd in a chroot of the image" "needs root"
			continue
		fi
		check "runtime ($arch): python3 from the image runs (import json, sys; sys.platform is linux)" eval \
			"[ \"\$(run_in $arch '$r' /usr/bin/python3 -c 'import json, sys; print(sys.platform)' 2>'$WORK/python3-$arch.err')\" = linux ]"
		check "runtime ($arch): sandboxd from the image: --version is sandboxd X.Y.Z" eval \
			"run_in $arch '$r' /usr/local/bin/sandboxd --version | grep -Eq '^sandboxd [0-9]+\.[0-9]+\.[0-9]+'"
	done
	image_config "$rt" amd64 >"$WORK/runtime-config-amd64.json"
	image_config "$rt" arm64 >"$WORK/runtime-config-arm64.json"
	check "runtime: the arm64 config is arm64's, with the amd64 one's command, user and environment" eval \
		"[ \"\$(jq -r .architecture '$WORK/runtime-config-arm64.json')\" = arm64 ] &&
		 [ \"\$(jq -r .architecture '$WORK/runtime-config-amd64.json')\" = amd64 ] &&
		 [ \"\$(jq -c .config '$WORK/runtime-config-arm64.json')\" = \"\$(jq -c .config '$WORK/runtime-config-amd64.json')\" ] &&
		 jq -e '.config.User == \"1000:1000\" and .config.Cmd[0] == \"/usr/local/bin/sandboxd\"' '$WORK/runtime-config-arm64.json' >/dev/null"
	check "runtime: arm64's users, groups, shells, time zone, nsswitch.conf, alternatives, /proc and /var/run are amd64's" \
		same_setup "$WORK/rootfs-runtime-amd64" "$WORK/rootfs-runtime-arm64"
	rm -rf "$WORK"/rootfs-runtime-*
fi

# --- make push -------------------------------------------------------------------------
push=$(cd "$ROOT" && make -s push REGISTRY=$REGISTRY VERSION=$VERSION DIST_DIR="$DIST" PUSH_ARGS=--dry-run 2>&1)
check "make push --dry-run: skopeo copy --all of each image to $REGISTRY/NAME:$VERSION" eval \
	"[ \"\$(grep -c '^skopeo copy --all' <<<\"\$push\")\" = \"\$(ls images | wc -l)\" ] &&
	 grep -q 'oci-archive:$DIST/images/sandbox-router-$VERSION.oci.tar docker://$REGISTRY/sandbox-router:$VERSION' <<<\"\$push\""
check "make push refuses a REGISTRY that dist/ was not built for" eval \
	"! (cd '$ROOT' && make -s push REGISTRY=other.example VERSION=$VERSION DIST_DIR='$DIST' PUSH_ARGS=--dry-run) >/dev/null 2>&1"

summary "dist tests"
