# Shared settings for hack/ scripts. Source it; do not execute it.
# shellcheck shell=bash disable=SC2034 # the variables are for the scripts that source this
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Kubernetes release used for the local API server and cluster (SPEC §4: 1.34.x
# because this kernel runs cgroup v1 hybrid and Debian ships containerd 1.6).
K8S_VERSION=${K8S_VERSION:-v1.34.4}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
# Built binaries are cached per version outside the work tree as well, so that a
# fresh clone on the same machine (CI) only pays for the link step at most.
CACHE_DIR=${AGENT_SANDBOX_CACHE:-$ROOT/.cache}
BIN_CACHE=${AGENT_SANDBOX_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-sandbox/bin}
K8S_BIN=$BIN_CACHE/kubernetes-$K8S_VERSION
ETCD_BIN=$BIN_CACHE/etcd-$ETCD_VERSION

# The Python venvs of the test suites live outside the work tree too (VENV_HOME), so that
# a fresh clone (CI) does not pay ~35 s of pip per venv: link_venvs makes .cache/<name> a
# link there unless it exists. The SDK's (an editable install of this checkout) is one per
# checkout path; the two with pinned packages only (grpcio, upstream's SDK) are shared and
# always run as `python -m pip`, never through a script whose #! names another checkout.
VENV_HOME=${AGENT_SANDBOX_VENV_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-sandbox/venvs}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found: $2"; }

# Go: k8s.io/kubernetes $K8S_VERSION needs Go >= 1.24. Debian 12 ships 1.19, which is
# enough to fetch the official toolchain as a module (golang.org/toolchain) from the Go
# module proxy; it is unpacked once into $BIN_CACHE/go-<version>.
GO_MIN_MINOR=24
GO_TOOLCHAIN=${AS_GO_TOOLCHAIN:-go1.24.13}

go_recent() { # true when `go` on PATH is >= 1.$GO_MIN_MINOR
	local v
	v=$(go env GOVERSION 2>/dev/null) || return 1
	v=${v#go1.}
	[[ ${v%%.*} =~ ^[0-9]+$ ]] && [ "${v%%.*}" -ge "$GO_MIN_MINOR" ]
}

ensure_go() {
	local dir=$BIN_CACHE/$GO_TOOLCHAIN arch src
	if [ -x "$dir/bin/go" ]; then export PATH=$dir/bin:$PATH; fi
	go_recent && return 0
	need go "install golang-go (make deps) or Go >= 1.$GO_MIN_MINOR"
	case $(uname -m) in
	x86_64) arch=amd64 ;;
	aarch64) arch=arm64 ;;
	*) die "no Go toolchain for $(uname -m)" ;;
	esac
	log "fetching the $GO_TOOLCHAIN toolchain from the Go module proxy"
	src=$(cd / && GO111MODULE=on GOFLAGS='' go mod download -json \
		"golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN.linux-$arch" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -x "$src/bin/go" ] || [ -f "$src/bin/go" ] || die "could not download $GO_TOOLCHAIN"
	rm -rf "$dir.tmp"
	mkdir -p "$BIN_CACHE"
	cp -r "$src" "$dir.tmp"
	chmod -R u+w "$dir.tmp"
	chmod +x "$dir.tmp"/bin/* "$dir.tmp"/pkg/tool/*/*
	mv "$dir.tmp" "$dir"
	export PATH=$dir/bin:$PATH
	export GOTOOLCHAIN=local
	go_recent || die "$dir/bin/go does not run"
}

link_venvs() { # .cache/{pysdk,grpc,upstream-sdk}-venv -> VENV_HOME (see above)
	local key name target
	key=$(printf '%s' "$ROOT" | sha1sum | cut -c1-12)
	mkdir -p "$CACHE_DIR" "$VENV_HOME"
	for name in pysdk-venv grpc-venv upstream-sdk-venv; do
		case $name in
		pysdk-venv) target=$VENV_HOME/pysdk-$key ;;
		*) target=$VENV_HOME/$name ;;
		esac
		if [ ! -e "$CACHE_DIR/$name" ] && [ ! -L "$CACHE_DIR/$name" ]; then
			mkdir -p "$target" && ln -s "$target" "$CACHE_DIR/$name"
		fi
		[ ! -d "$target" ] || touch "$target"
	done
	# the per-checkout venvs of checkouts not tested for two weeks
	find "$VENV_HOME" -mindepth 1 -maxdepth 1 -name 'pysdk-*' -mtime +14 -exec rm -rf {} + 2>/dev/null || true
}
