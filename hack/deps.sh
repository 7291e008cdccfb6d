#!/usr/bin/env bash
# make deps: install the Debian packages the build and tests need (only the missing
# ones; apt-get update at most once), a Go >= 1.24 toolchain, and build etcd,
# kube-apiserver and kube-controller-manager (cached; see hack/build-k8s.sh).
#
#   hack/deps.sh [--no-k8s]
source "$(dirname "$0")/lib.sh"

PACKAGES=(build-essential cmake ninja-build pkg-config git ca-certificates curl openssl
	libcurl4-openssl-dev libjansson-dev libyaml-dev libuv1-dev libcmocka-dev clang-format)

missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
go_recent || command -v go >/dev/null || [ -x "$BIN_CACHE/$GO_TOOLCHAIN/bin/go" ] ||
	missing+=(golang-go)

if [ ${#missing[@]} -gt 0 ]; then
	sudo=()
	[ "$(id -u)" = 0 ] || sudo=(sudo)
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -q
	"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

[ "${1:-}" = --no-k8s ] && exit 0
"$ROOT/hack/build-k8s.sh" etcd kube-apiserver kube-controller-manager
