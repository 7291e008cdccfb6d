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
# OCI_ARCH=arm64 builds binaries images from arm64 FILEs (images/lib.sh) and the arm64
# runtime image (its root file system unpacked from Debian's arm64 packages, no arm64
# program run; runtime-sci only for this machine's architecture).
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

usage() { sed -n '2,23s/^# \{0,1\}//p' "$0"; }

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

# runtime_base: the base root file system of the runtime image for $OCI_ARCH, built once
# per suite, architecture and package list; prints the base layer's path. This machine's
# own architecture is debootstrapped (runtime_rootfs_native); another one (arm64 on an
# amd64 machine) is put together from its packages without running any of its programs
# (runtime_rootfs_foreign). Base layers are kept in $BASE_CACHE (per user, outside the
# work tree: a fresh clone on the same machine reuses them).
runtime_base() {
	local mirror pkgs key dir layer arch host method=minbase-v2
	pkgs=$(grep -v '^#' "$ROOT/images/runtime/packages.txt" | xargs | tr ' ' ,)
	host=$(dpkg --print-architecture 2>/dev/null || uname -m)
	arch=$OCI_ARCH
	[ "$arch" = "$host" ] || method=foreign-v2
	key=$(printf '%s\n' "$RUNTIME_SUITE" "$arch" "$pkgs" "$method" | sha256sum | cut -c1-16)
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
	if [ "$method" = minbase-v2 ]; then
		runtime_rootfs_native "$dir" "$mirror" "$pkgs" || { rm -rf "$dir"; exit 1; }
	else
		runtime_rootfs_foreign "$dir" "$arch" "$mirror" "$pkgs" || { rm -rf "$dir"; exit 1; }
	fi
	oci_rootfs_layer "$layer.tmp" "$dir" || { rm -rf "$dir"; die "runtime base layer failed"; }
	rm -rf "$dir"
	mv "$layer.tmp" "$layer"
	prune_cache 'runtime-base-*.tar'
	echo "$layer"
}

# runtime_rootfs_native DIR MIRROR PKGS: debootstrap minbase plus PKGS (comma-separated)
# into DIR, and the unprivileged user sandboxes run as (uid/gid 1000, home and workspace
# /workspace).
runtime_rootfs_native() {
	local dir=$1 mirror=$2 pkgs=$3
	log "debootstrap $RUNTIME_SUITE minbase (+$pkgs) from $mirror (about a minute)"
	debootstrap --variant=minbase --include="$pkgs" "$RUNTIME_SUITE" "$dir" "$mirror" \
		>"$IMAGES_CACHE/debootstrap.log" 2>&1 ||
		{
			tail -20 "$IMAGES_CACHE/debootstrap.log" >&2
			log "debootstrap failed (log: $IMAGES_CACHE/debootstrap.log)"
			return 1
		}
	runtime_rootfs_clean "$dir"
	chroot "$dir" groupadd -g 1000 sandbox &&
		chroot "$dir" useradd -u 1000 -g 1000 -d /workspace -m -s /bin/bash sandbox ||
		{ log "cannot add the sandbox user to the runtime image"; return 1; }
}

# runtime_rootfs_clean DIR: no package cache, apt lists or logs; an empty resolv.conf
# (the runtime mounts its own) and the image's host name.
runtime_rootfs_clean() {
	rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/* "$1"/var/log/*.log
	: >"$1/etc/resolv.conf"
	echo agent-sandbox >"$1/etc/hostname"
}

# runtime_rootfs_foreign DIR ARCH MIRROR PKGS: the root file system of
# runtime_rootfs_native for an architecture whose programs this machine does not run
# (debootstrap's second stage would need qemu registered with binfmt_misc). Nothing of
# the image is executed: debootstrap --foreign resolves the same packages, downloads them
# (cached in $BASE_CACHE/debs) and unpacks the required ones with merged /usr; the rest
# are unpacked here with dpkg-deb; the dpkg status is written from the packages' control
# files; runtime_configure_foreign does what their maintainer scripts would have done that
# the runtime needs.
runtime_rootfs_foreign() {
	local dir=$1 arch=$2 mirror=$3 pkgs=$4 p deb log=$IMAGES_CACHE/debootstrap-$2.log
	need dpkg-deb "apt-get install dpkg"
	mkdir -p "$BASE_CACHE/debs"
	log "debootstrap --foreign --arch=$arch $RUNTIME_SUITE minbase (+$pkgs) from $mirror, unpacked without running it"
	debootstrap --foreign --arch="$arch" --variant=minbase --include="$pkgs" \
		--cache-dir="$BASE_CACHE/debs" "$RUNTIME_SUITE" "$dir" "$mirror" >"$log" 2>&1 ||
		{
			cat "$dir/debootstrap/debootstrap.log" >>"$log" 2>/dev/null
			tail -20 "$log" >&2
			log "debootstrap --foreign failed (log: $log)"
			return 1
		}
	cat "$dir/debootstrap/debootstrap.log" >>"$log" 2>/dev/null
	# debootstrap/debpaths: "PACKAGE /var/cache/apt/archives/FILE.deb" for every package;
	# debootstrap/base: those the second stage would install after the required ones.
	[ -s "$dir/debootstrap/debpaths" ] || { log "debootstrap left no debootstrap/debpaths"; return 1; }
	while read -r p deb; do
		# Merged /usr: /bin, /sbin and /lib stay symlinks into /usr.
		dpkg-deb --fsys-tarfile "$dir$deb" | tar --keep-directory-symlink -xf - -C "$dir" ||
			{ log "cannot unpack $p ($deb)"; return 1; }
	done < <(awk 'NR == FNR { for (i = 1; i <= NF; i++) base[$i] = 1; next } $1 in base' \
		"$dir/debootstrap/base" "$dir/debootstrap/debpaths")
	mkdir -p "$dir/var/lib/dpkg/info"
	while read -r p deb; do
		dpkg-deb -f "$dir$deb" | awk '{ print } /^Package:/ { print "Status: install ok installed" }' &&
			echo || { log "cannot read the control file of $p"; return 1; }
	done < <(LC_ALL=C sort "$dir/debootstrap/debpaths") >"$dir/var/lib/dpkg/status"
	runtime_configure_foreign "$dir" || return 1
	rm -rf "$dir/debootstrap"
	runtime_rootfs_clean "$dir"
}

# runtime_configure_foreign DIR: by hand, what the maintainer scripts of the packages in
# DIR would have set up that the runtime uses, as the native image has it: base-files'
# directories and files (runtime_base_files), the system users and groups (base-passwd,
# apt's _apt, shadow files as pwconv makes them), the sandbox user (as useradd makes it),
# /etc/shells, the UTC time zone, the alternatives' links, python3's local site directory
# and byte code, the trusted CA certificates, dash's diversion of /bin/sh. Not done: no
# ld.so.cache (the libraries are in the dynamic loader's default paths), no PAM common
# files (pam-auth-update), no dpkg file lists or maintainer scripts.
runtime_configure_foreign() {
	local d=$1 day py link name path
	day=$(($(date +%s) / 86400))
	# base-passwd's masters, their passwords moved to the shadow files (x).
	awk -F: -v OFS=: '{ $2 = "x"; print }' "$d/usr/share/base-passwd/passwd.master" >"$d/etc/passwd" &&
		awk -F: -v OFS=: '{ $2 = "x"; print }' "$d/usr/share/base-passwd/group.master" >"$d/etc/group" ||
		{ log "no base-passwd in the runtime root file system"; return 1; }
	if [ -x "$d/usr/bin/apt-get" ] && ! grep -q '^_apt:' "$d/etc/passwd"; then
		awk '/^nobody:/ { print "_apt:x:42:65534::/nonexistent:/usr/sbin/nologin" } { print }' \
			"$d/etc/passwd" >"$d/etc/passwd.new" && mv "$d/etc/passwd.new" "$d/etc/passwd"
	fi
	echo 'sandbox:x:1000:1000::/workspace:/bin/bash' >>"$d/etc/passwd"
	echo 'sandbox:x:1000:' >>"$d/etc/group"
	awk -F: -v day="$day" '{ printf "%s:%s:%s:0:99999:7:::\n", $1, ($1 == "sandbox" ? "!" : "*"), day }' \
		"$d/etc/passwd" >"$d/etc/shadow"
	awk -F: '{ printf "%s:%s::\n", $1, ($1 == "sandbox" ? "!" : "*") }' "$d/etc/group" >"$d/etc/gshadow"
	chown 0:42 "$d/etc/shadow" "$d/etc/gshadow" && chmod 0640 "$d/etc/shadow" "$d/etc/gshadow" || return 1
	runtime_base_files "$d" || { log "cannot set up base-files' directories and files"; return 1; }
	echo 'sandbox:100000:65536' >"$d/etc/subuid"
	echo 'sandbox:100000:65536' >"$d/etc/subgid"
	mkdir -p "$d/workspace" && cp -a "$d/etc/skel/." "$d/workspace/" &&
		chown -R 1000:1000 "$d/workspace" && chmod 0755 "$d/workspace" ||
		{ log "cannot make /workspace"; return 1; }
	printf '%s\n' '# /etc/shells: valid login shells' /bin/sh /usr/bin/sh /bin/bash /usr/bin/bash \
		/bin/rbash /usr/bin/rbash /bin/dash /usr/bin/dash >"$d/etc/shells"
	if [ -e "$d/usr/share/zoneinfo/Etc/UTC" ]; then
		ln -sfn /usr/share/zoneinfo/Etc/UTC "$d/etc/localtime"
		echo Etc/UTC >"$d/etc/timezone"
	fi
	: >>"$d/etc/environment"
	mkdir -p "$d/etc/alternatives"
	while read -r link name path; do
		[ -e "$d$path" ] || continue
		ln -sfn "$path" "$d/etc/alternatives/$name"
		ln -sfn "/etc/alternatives/$name" "$d$link"
	done <<-'EOF'
		/usr/bin/awk awk /usr/bin/mawk
		/usr/bin/nawk nawk /usr/bin/mawk
		/usr/bin/which which /usr/bin/which.debianutils
		/usr/bin/pager pager /bin/more
		/usr/sbin/rmt rmt /usr/sbin/rmt-tar
	EOF
	for py in "$d"/usr/lib/python3.[0-9]*; do
		[ -d "$py" ] || continue
		mkdir -p "$d/usr/local/lib/${py##*/}/dist-packages"
		# py3compile: the byte code (not architecture-specific), by this machine's python3
		# when it is of the same version; else python3 compiles on import (where writable).
		if [ "$(python3 -c 'import sys; print("python%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "${py##*/}" ]; then
			nice -n 10 python3 -m compileall -q -j 2 -s "$d" -p / "$py" "$d/usr/lib/python3/dist-packages" \
				>"$IMAGES_CACHE/compileall.log" 2>&1 || true
		fi
	done
	if [ -x "$d/usr/bin/dash" ]; then
		printf '%s\n' /usr/share/man/man1/sh.1.gz /usr/share/man/man1/sh.distrib.1.gz dash \
			/bin/sh /bin/sh.distrib dash >"$d/var/lib/dpkg/diversions"
	fi
	runtime_ca_certificates "$d"
}

# runtime_base_files DIR: what base-files' configuration sets up (the top directories,
# /proc a directory, /var/run and /var/lock in /run, /var/mail, root's and the default
# profile, /usr/local, the login records), libc-bin's nsswitch.conf and readline's inputrc.
runtime_base_files() {
	local d=$1 x
	[ ! -L "$d/proc" ] || rm "$d/proc" # debootstrap --foreign in a container links it
	install -d -m 0755 "$d/proc" "$d/mnt" "$d/srv" "$d/opt" "$d/etc/opt" "$d/var/opt" "$d/media" || return 1
	install -d -m 2775 -g 8 "$d/var/mail" && ln -sfn ../mail "$d/var/spool/mail" || return 1
	install -d -m 1777 "$d/run/lock" || return 1
	for x in run:/run lock:/run/lock; do
		if [ ! -L "$d/var/${x%%:*}" ]; then
			[ ! -d "$d/var/${x%%:*}" ] || cp -a "$d/var/${x%%:*}/." "$d${x#*:}/" || return 1
			rm -rf "${d:?}/var/${x%%:*}" && ln -s "${x#*:}" "$d/var/${x%%:*}" || return 1
		fi
	done
	for x in dot.profile:root/.profile dot.bashrc:root/.bashrc profile:etc/profile motd:etc/motd; do
		cp -p "$d/usr/share/base-files/${x%%:*}" "$d/${x#*:}" || return 1
	done
	[ ! -e "$d/etc/dpkg/origins/debian" ] || ln -sfn debian "$d/etc/dpkg/origins/default"
	for x in share share/man bin games lib include sbin src etc; do
		install -d -m 0755 "$d/usr/local/$x" || return 1
	done
	ln -sfn share/man "$d/usr/local/man"
	install -m 0664 -g 43 /dev/null "$d/var/log/wtmp" && install -m 0660 -g 43 /dev/null "$d/var/log/btmp" &&
		install -m 0664 -g 43 /dev/null "$d/var/log/lastlog" || return 1
	[ ! -f "$d/usr/share/libc-bin/nsswitch.conf" ] || cp -p "$d/usr/share/libc-bin/nsswitch.conf" "$d/etc/nsswitch.conf"
	[ ! -f "$d/usr/share/readline/inputrc" ] || cp -p "$d/usr/share/readline/inputrc" "$d/etc/inputrc"
}

# runtime_ca_certificates DIR: every certificate of DIR's ca-certificates trusted (its
# configuration script's default) in DIR/etc/ca-certificates.conf, and DIR/etc/ssl/certs
# (the bundle, one link per certificate, OpenSSL's hash links) made by this machine's
# update-ca-certificates; the links it points into DIR then point into the image's /.
runtime_ca_certificates() {
	local d=$1 l t
	[ -d "$d/usr/share/ca-certificates" ] || return 0
	need update-ca-certificates "apt-get install ca-certificates"
	{
		echo '# This file lists certificates that you wish to use or to ignore to be'
		echo '# installed in /etc/ssl/certs.'
		echo '# update-ca-certificates(8) will update /etc/ssl/certs by reading this file.'
		echo '#'
		echo '# This is autogenerated by dpkg-reconfigure ca-certificates.'
		echo '# Certificates should be installed under /usr/share/ca-certificates'
		echo "# and files with extension '.crt' is recognized as available certs."
		echo '#'
		echo '# line begins with # is comment.'
		echo '# line begins with ! is certificate filename to be deselected.'
		echo '#'
		(cd "$d/usr/share/ca-certificates" && find . -name '*.crt' -printf '%P\n' | LC_ALL=C sort)
	} >"$d/etc/ca-certificates.conf"
	mkdir -p "$d/etc/ssl/certs"
	update-ca-certificates --certsconf "$d/etc/ca-certificates.conf" \
		--certsdir "$d/usr/share/ca-certificates" --localcertsdir "$d/usr/local/share/ca-certificates" \
		--etccertsdir "$d/etc/ssl/certs" --hooksdir "$d/nonexistent" >"$IMAGES_CACHE/ca-certificates.log" 2>&1 ||
		{ log "update-ca-certificates failed (log: $IMAGES_CACHE/ca-certificates.log)"; return 1; }
	while IFS= read -r -d '' l; do
		t=$(readlink "$l")
		ln -sfn "${t#"$d"}" "$l"
	done < <(find "$d/etc/ssl/certs" -type l -lname "$d/*" -print0)
	[ -s "$d/etc/ssl/certs/ca-certificates.crt" ] || { log "no CA certificate bundle"; return 1; }
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
	[ "$variant" = runtime ] || [ "$OCI_ARCH" = "$(dpkg --print-architecture 2>/dev/null || uname -m)" ] ||
		die "runtime-sci is built for this machine's architecture only (apt-get runs in the image), not $OCI_ARCH"
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
