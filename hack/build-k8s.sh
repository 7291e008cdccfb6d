#!/usr/bin/env bash
# Build etcd and the Kubernetes components from the Go module proxy and cache them.
#
#   hack/build-k8s.sh [component...]
#
# Components: etcd kube-apiserver kube-controller-manager kube-scheduler kubelet
# kube-proxy kubectl (default: all). Binaries land in $K8S_BIN / $ETCD_BIN and are
# linked into .cache/bin. A component whose binary is cached is not rebuilt.
#
# k8s.io/kubernetes cannot be required as-is: its go.mod points every staging
# module (k8s.io/api, k8s.io/client-go, ...) at ./staging/src. We generate a small
# wrapper module whose replace lines point each of them at the published
# k8s.io/X v0.M.P instead, derived from k8s.io/kubernetes's own go.mod.
source "$(dirname "$0")/lib.sh"

all=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${all[@]}")

mkdir -p "$K8S_BIN" "$ETCD_BIN" "$CACHE_DIR/bin"
export GOFLAGS=-mod=mod
export CGO_ENABLED=0

staging_version() { # v1.34.4 -> v0.34.4
	local v=${K8S_VERSION#v}
	echo "v0.${v#*.}"
}

wrapper_module() {
	local dir=$CACHE_DIR/k8s-wrapper-$K8S_VERSION
	if [ -f "$dir/.ready" ]; then echo "$dir"; return; fi
	rm -rf "$dir"; mkdir -p "$dir"
	log "generating wrapper module for k8s.io/kubernetes $K8S_VERSION"
	local modfile
	modfile=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	[ -f "$modfile" ] || die "could not download k8s.io/kubernetes@$K8S_VERSION"
	local sv gover
	sv=$(staging_version)
	gover=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$modfile")
	{
		echo "module agent-sandbox.local/k8s-wrapper"
		echo
		echo "go $gover"
		echo
		echo "require k8s.io/kubernetes $K8S_VERSION"
		echo
		echo "replace ("
		sed -n "s#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/[a-z0-9-]*\$#\t\1 => \1 $sv#p" "$modfile"
		echo ")"
	} >"$dir/go.mod"
	cat >"$dir/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubectl/pkg/cmd"
)
GO
	(cd "$dir" && go mod tidy -e >/dev/null 2>"$dir/tidy.log") || { cat "$dir/tidy.log" >&2; die "go mod tidy failed"; }
	touch "$dir/.ready"
	echo "$dir"
}

etcd_module() {
	local dir=$CACHE_DIR/etcd-wrapper-$ETCD_VERSION
	if [ -f "$dir/.ready" ]; then echo "$dir"; return; fi
	rm -rf "$dir"; mkdir -p "$dir"
	cat >"$dir/main.go" <<'GO'
// Command etcd runs etcd's own server entry point.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
	printf 'module agent-sandbox.local/etcd-wrapper\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >"$dir/go.mod"
	(cd "$dir" && go mod tidy >/dev/null 2>"$dir/tidy.log") || { cat "$dir/tidy.log" >&2; die "go mod tidy (etcd) failed"; }
	touch "$dir/.ready"
	echo "$dir"
}

# Version stamping as the Kubernetes release build does, so /version and `kubectl
# version` say v1.M.P (not v0.0.0-master). A binary built with other flags is rebuilt.
k8s_ldflags() {
	local v=${K8S_VERSION#v} x f=
	local major=${v%%.*} minor=${v#*.}
	minor=${minor%%.*}
	for x in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		f="$f -X $x.gitVersion=$K8S_VERSION -X $x.gitMajor=$major -X $x.gitMinor=$minor"
		f="$f -X $x.gitTreeState=clean"
	done
	echo "-s -w$f"
}

pkg_of() {
	case $1 in
	kubectl) echo k8s.io/kubernetes/cmd/kubectl ;;
	*) echo "k8s.io/kubernetes/cmd/$1" ;;
	esac
}

k8s_todo=()
for c in "${want[@]}"; do
	case $c in
	etcd)
		if [ ! -x "$ETCD_BIN/etcd" ]; then
			ensure_go
			dir=$(etcd_module)
			log "building etcd $ETCD_VERSION"
			start=$(date +%s)
			(cd "$dir" && go build -trimpath -ldflags=-s -o "$ETCD_BIN/etcd.tmp" .)
			mv "$ETCD_BIN/etcd.tmp" "$ETCD_BIN/etcd"
			log "etcd built in $(($(date +%s) - start))s"
		fi
		ln -sf "$ETCD_BIN/etcd" "$CACHE_DIR/bin/etcd"
		;;
	kube-apiserver | kube-controller-manager | kube-scheduler | kubelet | kube-proxy | kubectl)
		if [ ! -x "$K8S_BIN/$c" ] ||
			[ "$(cat "$K8S_BIN/$c.ldflags" 2>/dev/null)" != "$(k8s_ldflags)" ]; then
			k8s_todo+=("$c")
		fi
		;;
	*) die "unknown component: $c (known: ${all[*]})" ;;
	esac
done

if [ ${#k8s_todo[@]} -gt 0 ]; then
	ensure_go
	dir=$(wrapper_module)
	pkgs=()
	for c in "${k8s_todo[@]}"; do pkgs+=("$(pkg_of "$c")"); done
	log "building ${k8s_todo[*]} $K8S_VERSION (cold builds take many minutes)"
	start=$(date +%s)
	tmp=$K8S_BIN/.tmp.$$
	mkdir -p "$tmp"
	flags=$(k8s_ldflags)
	(cd "$dir" && go build -trimpath -ldflags="$flags" -o "$tmp/" "${pkgs[@]}")
	for c in "${k8s_todo[@]}"; do printf '%s\n' "$flags" >"$K8S_BIN/$c.ldflags"; done
	for c in "${k8s_todo[@]}"; do mv "$tmp/$c" "$K8S_BIN/$c"; done
	rmdir "$tmp"
	log "built ${k8s_todo[*]} in $(($(date +%s) - start))s"
fi
for c in "${want[@]}"; do
	[ "$c" = etcd ] || ln -sf "$K8S_BIN/$c" "$CACHE_DIR/bin/$c"
done
