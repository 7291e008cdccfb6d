#!/usr/bin/env bash
# Build the local OCI images (no registry, no Docker) and import them into containerd.
#
#   images/build.sh pause                 pause image from images/pause/pause.c
#   images/build.sh runtime|runtime-sci   sandbox runtime image (debootstrap minbase); -sci: + numpy, pandas, matplotlib
#   images/build.sh binaries NAME:TAG [--base scratch|runtime] [--entrypoint PATH] FILE...
#                                         minimal image holding FILEs (plus their shared
#                                         libraries) in /usr/local/bin
#   images/build.sh import SOCKET ARCHIVE...   ctr -n k8s.io images import into containerd
#   images/build.sh ref pause|runtime|runtime-sci   print the image reference
#
# Each build prints the archive path (ARCHIVE; ARCHIVE.digest holds the manifest digest).
# Archives live in $AS_IMAGES_CACHE (default .cache/images), base layers in ~/.cache/agent-sandbox/images.
# $AS_IMAGE_PREFIX and $AS_IMAGE_TAG name the runtime images (localhost/agent-sandbox, dev);
# OCI_ARCH=arm64 builds binaries images from arm64 FILEs (images/lib.sh).
#
# Runtime image hook: the files of $AS_RUNTIME_EXTRA_DIR (default images/runtime/extra,
# if it exists) are added as a top layer, e.g. usr/local/bin/sandboxd and the kernel driver
# of code contexts usr/local/lib/agent-sandbox/kernel.py (src/sandboxd/driver/kernel.py).
# With sandboxd there, the image runs it by default (--root /workspace) as the unprivileged
# user sandbox (1000).
source "$(dirname "$0")/../hack/lib.sh"
source "$ROOT/images/lib.sh"

PAUSE_REF=$IMAGE_PREFIX/pause:3.10
RUNTIME_REF=$IMAGE_PREFIX/runtime:${AS_IMAGE_TAG:-dev}
RUNTIME_SCI_REF=$IMAGE_PREFIX/runtime-sci:${AS_IMAGE_TAG:-dev}
BASE_CACHE=${AS_IMAGES_BASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-sandbox/images}
RUNTIME_SUITE=${AS_RUNTIME_SUITE:-bookworm}
RUNTIME_EXTRA_DIR=${AS_RUNTIME_EXTRA_DIR:-$ROOT/images/runtime/extra}
BUILD_ENV='["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","LANG=C.UTF-8"]'
# The runtime image also tells workloads (and upstream's SDKs inside the sandbox) where
# sandboxd listens, as KEP-539.2's endpoint discovery does.
RUNTIME_ENV='["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","LANG=C.UTF-8","SANDBOXD_GRPC_ADDR=localhost:9090","SANDBOXD_REST_ADDR=localhost:8080"]'
# The scientific variant draws with matplotlib's file backend (no display in a sandbox).
RUNTIME_SCI_ENV=$(jq -c '. + ["MPLBACKEND=Agg"]' <<<"$RUNTIME_ENV")

usage() { sed -n '2,21s/^# \{0,1\}//p' "$0"; }

# The Debian mirror apt is configured with (deb822 or one-line format).
debian_mirror() {
	[ -z "${AS_DEBIAN_MIRROR:-}" ] || { echo "$AS_DEBIAN_MIRROR"; return; }
	local m
	m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
		awk '/^URIs:/ {u=$2} /^Suites:/ && / '"$RUNTIME_SUITE"'( |$)/ && u ~ /debian\/?$/ {print u; exit}')
	[ -n "$m" ] || m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
		awk '$1 == "deb" && $3 == "'"$RUNTIME_SUITE"'" {print $2; exit}')
	[ -n "$m" ] || die "no Debian mirror for $RUNTIME_SUITE in /etc/apt/sources.list*; set AS_DEBIAN_MIRROR"
	echo "$m"
}

build_pause() {
	need gcc "apt-get install gcc libc6-dev"
	local dir=$IMAGES_CACHE/pause out=$IMAGES_CACHE/pause.oci.tar
	mkdir -p "$dir/root"
	gcc -std=gnu11 -static -Os -s -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
		-Wmissing-prototypes -Wformat=2 -Wvla -o "$dir/root/pause" "$ROOT/images/pause/pause.c" ||
		die "cannot build the pause program (needs gcc and the static libc: libc6-dev)"
	oci_layer_from_dir "$dir/layer.tar" "$dir/root" || die "pause layer failed"
	oci_image "$out" "$PAUSE_REF" '["/pause"]' null "$BUILD_ENV" "$dir/layer.tar" ||
		die "pause image failed"
	echo "$out"
}

# prune_cache GLOB: keeps the three most recently used files of $BASE_CACHE matching GLOB.
prune_cache() {
	find "$BASE_CACHE" -maxdepth 1 -name "$1" -printf '%T@ %p\n' | sort -rn |
		tail -n +4 | cut -d' ' -f2- | xargs -r rm -f
}

# runtime_base: debootstraps the base root file system once per suite, architecture and
# package list; prints the base layer's path. Base layers are kept in $BASE_CACHE (per
# user, outside the work tree: a fresh clone on the same machine reuses them).
runtime_base() {
	local mirror pkgs key dir layer arch
	pkgs=$(grep -v '^#' "$ROOT/images/runtime/packages.txt" | xargs | tr ' ' ,)
	arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
	key=$(printf '%s\n' "$RUNTIME_SUITE" "$arch" "$pkgs" minbase-v2 | sha256sum | cut -c1-16)
	mkdir -p "$BASE_CACHE"
	layer=$BASE_CACHE/runtime-base-$key.tar
	if [ -s "$layer" ]; then
		touch "$layer"
		echo "$layer"
		return
	fi
	need debootstrap "apt-get install debootstrap"
	mirror=$(debian_mirror)
	dir=$(mktemp -d "$BASE_CACHE/.runtime-rootfs-XXXXXX")
	chmod 755 "$dir" # the image's / (mktemp makes it 0700)
	log "debootstrap $RUNTIME_SUITE minbase (+$pkgs) from $mirror (about a minute)"
	debootstrap --variant=minbase --include="$pkgs" "$RUNTIME_SUITE" "$dir" "$mirror" \
		>"$IMAGES_CACHE/debootstrap.log" 2>&1 ||
		{
			tail -20 "$IMAGES_CACHE/debootstrap.log" >&2
			rm -rf "$dir"
			die "debootstrap failed (log: $IMAGES_CACHE/debootstrap.log)"
		}
	rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/var/log/*.log
	: >"$dir/etc/resolv.conf"
	echo agent-sandbox >"$dir/etc/hostname"
	# The unprivileged user sandboxes run as (uid/gid 1000), home and workspace /workspace.
	chroot "$dir" groupadd -g 1000 sandbox &&
		chroot "$dir" useradd -u 1000 -g 1000 -d /workspace -m -s /bin/bash sandbox ||
		{ rm -rf "$dir"; die "cannot add the sandbox user to the runtime image"; }
	oci_rootfs_layer "$layer.tmp" "$dir" || { rm -rf "$dir"; die "runtime base layer failed"; }
	rm -rf "$dir"
	mv "$layer.tmp" "$layer"
	prune_cache 'runtime-base-*.tar'
	echo "$layer"
}

# runtime_sci_layer BASE: the layer runtime-sci puts on the runtime base layer BASE (so
# the two images share it): the packages of images/runtime-sci/packages.txt installed by
# apt-get --no-install-recommends in a copy of BASE's file system, as the files that the
# install created or changed. Cached in $BASE_CACHE per base layer and package list.
runtime_sci_layer() {
	local base=$1 pkgs key dir layer
	pkgs=$(grep -v '^#' "$ROOT/images/runtime-sci/packages.txt" | xargs)
	key=$(printf '%s\n' "${base##*/}" "$pkgs" apt-no-recommends-v1 | sha256sum | cut -c1-16)
	layer=$BASE_CACHE/runtime-sci-layer-$key.tar
	if [ -s "$layer" ]; then
		touch "$layer"
		echo "$layer"
		return
	fi
	dir=$(mktemp -d "$BASE_CACHE/.runtime-sci-rootfs-XXXXXX")
	chmod 755 "$dir"
	tar -xf "$base" -C "$dir" || { rm -rf "$dir"; die "cannot unpack $base"; }
	# What apt and the maintainer scripts need of /dev; left out of the layer.
	mknod -m 666 "$dir/dev/null" c 1 3 && mknod -m 666 "$dir/dev/zero" c 1 5 &&
		mknod -m 666 "$dir/dev/urandom" c 1 9 && mknod -m 666 "$dir/dev/random" c 1 8 ||
		{ rm -rf "$dir"; die "mknod in $dir failed"; }
	cp /etc/resolv.conf "$dir/etc/resolv.conf"
	touch "$dir/.layer-start"
	sleep 1
	log "installing $pkgs into the runtime base (apt-get, no recommends)"
	chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
		/bin/sh -c "apt-get -q update && apt-get -q -y --no-install-recommends install $pkgs" \
		>"$IMAGES_CACHE/apt-runtime-sci.log" 2>&1 ||
		{
			tail -20 "$IMAGES_CACHE/apt-runtime-sci.log" >&2
			rm -rf "$dir"
			die "apt-get install failed (log: $IMAGES_CACHE/apt-runtime-sci.log)"
		}
	rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb \
		"$dir"/var/log/apt "$dir"/var/log/*.log
	: >"$dir/etc/resolv.conf"
	# The layer: every path whose status changed since the stamp (new files, rewritten
	# files such as dpkg's status, directories that got entries), not /dev and friends.
	(cd "$dir" && find . -cnewer .layer-start ! -path . ! -path ./.layer-start \
		! -path './dev/*' ! -path './proc/*' ! -path './sys/*' ! -path './run/*' -print0) \
		>"$dir.list" || { rm -rf "$dir" "$dir.list"; die "cannot list the runtime-sci layer"; }
	tar --format=pax --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
		--sort=name --numeric-owner --no-recursion -C "$dir" --null -T "$dir.list" -cf "$layer.tmp" ||
		{ rm -rf "$dir" "$dir.list" "$layer.tmp"; die "runtime-sci layer failed"; }
	rm -rf "$dir" "$dir.list"
	mv "$layer.tmp" "$layer"
	prune_cache 'runtime-sci-layer-*.tar'
	echo "$layer"
}

# build_runtime [VARIANT]: the runtime image (runtime) or its scientific variant
# (runtime-sci): the base layer, for runtime-sci the scientific packages' layer, and the
# extra layer ($RUNTIME_EXTRA_DIR).
build_runtime() {
	local variant=${1:-runtime} ref=$RUNTIME_REF env=$RUNTIME_ENV
	[ "$variant" = runtime ] || { ref=$RUNTIME_SCI_REF env=$RUNTIME_SCI_ENV; }
	mkdir -p "$IMAGES_CACHE"
	local base out=$IMAGES_CACHE/$variant.oci.tar layers stamp
	base=$(runtime_base) || exit 1
	layers=("$base")
	stamp=${base##*/}
	if [ "$variant" = runtime-sci ]; then
		local sci
		sci=$(runtime_sci_layer "$base") || exit 1
		layers+=("$sci")
		stamp="$stamp ${sci##*/}"
	fi
	if [ -d "$RUNTIME_EXTRA_DIR" ]; then
		oci_layer_from_dir "$IMAGES_CACHE/runtime-extra.tar" "$RUNTIME_EXTRA_DIR" ||
			die "runtime extra layer failed"
		layers+=("$IMAGES_CACHE/runtime-extra.tar")
		stamp="$stamp $(oci_sha256 "$IMAGES_CACHE/runtime-extra.tar")"
	fi
	# With sandboxd in the extra layer it is the default command, as the unprivileged user.
	local cmd='["python3"]' user=""
	if [ -x "$RUNTIME_EXTRA_DIR/usr/local/bin/sandboxd" ]; then
		cmd='["/usr/local/bin/sandboxd","--root","/workspace"]'
		user=1000:1000
	fi
	stamp="$stamp $ref $cmd $user $env"
	if [ -s "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then
		echo "$out"
		return
	fi
	OCI_USER=$user oci_image "$out" "$ref" null "$cmd" "$env" "${layers[@]}" ||
		die "$variant image failed"
	echo "$stamp" >"$out.stamp"
	echo "$out"
}

# build_binaries NAME:TAG [--base scratch|runtime] [--entrypoint PATH] FILE...
build_binaries() {
	local ref=${1:?usage: binaries NAME:TAG FILE...} base=scratch ep="" files=() layers=()
	shift
	while [ $# -gt 0 ]; do
		case $1 in
		--base) base=$2; shift 2 ;;
		--entrypoint) ep=$2; shift 2 ;;
		*) files+=("$1"); shift ;;
		esac
	done
	[ ${#files[@]} -gt 0 ] || die "binaries: no files given"
	case $ref in */*) ;; *) ref=$IMAGE_PREFIX/$ref ;; esac
	case $ref in *:*) ;; *) ref=$ref:dev ;; esac
	local name=${ref##*/}
	name=${name//:/-}
	local dir=$IMAGES_CACHE/bin-$name out=$IMAGES_CACHE/$name.oci.tar
	rm -rf "$dir"
	mkdir -p "$dir/root"
	case $base in
	scratch) oci_base_files "$dir/root" ;;
	runtime) layers+=("$(runtime_base)") || exit 1 ;;
	*) die "binaries: unknown base '$base' (scratch or runtime)" ;;
	esac
	oci_copy_with_libs "$dir/root" "${files[@]}"
	oci_layer_from_dir "$dir/layer.tar" "$dir/root" || die "layer failed"
	layers+=("$dir/layer.tar")
	[ -n "$ep" ] || ep=/usr/local/bin/$(basename "${files[0]}")
	oci_image "$out" "$ref" "$(oci_json_array "$ep")" null "$BUILD_ENV" "${layers[@]}" ||
		die "image $ref failed"
	echo "$out"
}

# import_images SOCKET ARCHIVE...: imports into the k8s.io namespace (unpacked for CRI).
import_images() {
	local sock=${1:?usage: import SOCKET ARCHIVE...} a
	shift
	for a in "$@"; do
		ctr --address "$sock" -n k8s.io images import --no-unpack=false "$a" >/dev/null ||
			die "ctr import of $a failed"
	done
}

need jq "apt-get install jq"
mkdir -p "$IMAGES_CACHE"
case ${1:-} in
pause) build_pause ;;
runtime) build_runtime runtime ;;
runtime-sci) build_runtime runtime-sci ;;
binaries) shift; build_binaries "$@" ;;
import) shift; import_images "$@" ;;
ref)
	case ${2:-} in
	pause) echo "$PAUSE_REF" ;;
	runtime) echo "$RUNTIME_REF" ;;
	runtime-sci) echo "$RUNTIME_SCI_REF" ;;
	*) die "ref: pause, runtime or runtime-sci" ;;
	esac
	;;
-h | --help | help) usage ;;
*) usage >&2; exit 2 ;;
esac
