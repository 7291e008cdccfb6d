# Shared settings for hack/ scripts. Source it; do not execute it.
# shellcheck shell=bash
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

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found: $2"; }
