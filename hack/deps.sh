#!/usr/bin/env bash
# make deps: install the Debian packages the build and tests need (only the missing
# ones; apt-get update at most once), a Go >= 1.24 toolchain, and build etcd,
# kube-apiserver, kube-controller-manager and kubectl (cached; see hack/build-k8s.sh).
# ccache caches compiles across clones (CMakeLists.txt); make test also runs clang's
# ThreadSanitizer (runtimes in libclang-rt-14-dev) and valgrind memcheck.
#
#   hack/deps.sh [--no-k8s] [--cluster] [--cross]
#
# --cluster also installs what the local cluster needs (containerd, runc, CNI plugins,
# debootstrap, ...) and Python's PyYAML for the CRD generator.
# --cross: what make dist needs beyond that: the arm64 cross toolchain and arm64 -dev
# libraries (dpkg --add-architecture arm64; cmake/toolchain-aarch64.cmake), qemu-user-static
# (lists the arm64 binaries' libraries, runs them in tests/dist), twine, python3-venv,
# skopeo (make push).
source "$(dirname "$0")/lib.sh"

PACKAGES=(build-essential cmake ninja-build pkg-config git ca-certificates curl openssl
	libcurl4-openssl-dev libssl-dev libjansson-dev libyaml-dev libuv1-dev libcmocka-dev clang-format ccache
	libzstd-dev
	libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler libprotobuf-dev
	clang libclang-rt-14-dev valgrind)

CLUSTER_PACKAGES=(containerd runc containernetworking-plugins iproute2 iptables kmod procps jq
	util-linux tar debootstrap gcc libc6-dev python3)

# make dist (hack/dist.sh): arm64 builds of the C binaries and the release tooling.
CROSS_PACKAGES=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static binfmt-support file
	twine python3-venv skopeo jq debootstrap
	libc6-dev:arm64 libcurl4-openssl-dev:arm64 libssl-dev:arm64 libjansson-dev:arm64
	libyaml-dev:arm64 libuv1-dev:arm64 libcmocka-dev:arm64 libnghttp2-dev:arm64
	libprotobuf-c-dev:arm64 libzstd-dev:arm64)

no_k8s=0 cross=0
for a in "$@"; do
	case $a in
	--no-k8s) no_k8s=1 ;;
	--cluster) PACKAGES+=("${CLUSTER_PACKAGES[@]}") ;;
	--cross) cross=1 PACKAGES+=("${CROSS_PACKAGES[@]}") ;;
	*) die "usage: hack/deps.sh [--no-k8s] [--cluster] [--cross]" ;;
	esac
done

missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
go_recent || command -v go >/dev/null || [ -x "$BIN_CACHE/$GO_TOOLCHAIN/bin/go" ] ||
	missing+=(golang-go)

sudo=()
[ "$(id -u)" = 0 ] || sudo=(sudo)
if [ "$cross" = 1 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
	log "dpkg --add-architecture arm64 (the arm64 -dev libraries for cross builds)"
	"${sudo[@]}" dpkg --add-architecture arm64
	[ ${#missing[@]} -gt 0 ] || missing=(libc6-dev:arm64)
fi
if [ ${#missing[@]} -gt 0 ]; then
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -q
	"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

python3 -c 'import yaml' 2>/dev/null || {
	log "installing PyYAML"
	python3 -m pip install -q PyYAML 2>/dev/null || "${sudo[@]}" apt-get install -y -q python3-yaml
}

# The router's TLS tests (tests/hostile/test_tls.py) make their certificates with it.
python3 -c 'import cryptography' 2>/dev/null || {
	log "installing python cryptography"
	python3 -m pip install -q cryptography 2>/dev/null ||
		"${sudo[@]}" apt-get install -y -q python3-cryptography
}

[ "$no_k8s" = 1 ] && exit 0
"$ROOT/hack/build-k8s.sh" etcd kube-apiserver kube-controller-manager kubectl
