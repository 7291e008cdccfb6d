# OCI image-layout builder: layers from directories, archives for `ctr images import`.
# Source it after hack/lib.sh; do not execute it.
# shellcheck shell=bash disable=SC2034,SC2154 # variables shared with images/build.sh; VAR_digest set by printf -v
#
# No registry and no Docker: an image is written as an OCI image layout (oci-layout,
# index.json, blobs/sha256/...) packed into a tar archive. Layers are uncompressed
# tars (media type ...layer.v1.tar), so a layer's digest is also its diff_id.
# Archives are deterministic for the same inputs: sorted entries, numeric owners,
# no atime/ctime, fixed timestamps for files we generate, no "created" field.

IMAGES_CACHE=${AS_IMAGES_CACHE:-$CACHE_DIR/images}
IMAGE_PREFIX=${AS_IMAGE_PREFIX:-localhost/agent-sandbox}
# The architecture images are built for (amd64 or arm64; OCI/Go names). Files given to
# oci_copy_with_libs must be built for it (cross-compiled for arm64: cmake/toolchain-aarch64.cmake).
OCI_ARCH=${OCI_ARCH:-amd64}

# oci_sha256 FILE: prints the hex sha256 of FILE.
oci_sha256() { sha256sum "$1" | cut -d' ' -f1; }

# oci_tar OUT DIR [tar options...]: deterministic tar of DIR's contents into OUT.
oci_tar() {
	local out=$1 dir=$2
	shift 2
	tar --format=pax --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
		--sort=name --numeric-owner "$@" -C "$dir" -cf "$out.tmp" . || return 1
	mv "$out.tmp" "$out"
}

# oci_layer_from_dir OUT DIR: layer of generated files (owner root, mtime 0).
oci_layer_from_dir() {
	oci_tar "$1" "$2" --owner=0 --group=0 --mtime=@0
}

# oci_rootfs_layer OUT DIR: layer of a debootstrapped root file system; keeps owners
# and mtimes, leaves out device nodes and the contents of /proc, /sys, /dev and /run.
oci_rootfs_layer() {
	oci_tar "$1" "$2" --exclude=./dev/* --exclude=./proc/* --exclude=./sys/* --exclude=./run/*
}

# oci_json_array [ITEMS...]: JSON array of strings.
oci_json_array() { jq -cn '$ARGS.positional' --args -- "$@"; }

# oci_image OUT REF ENTRYPOINT_JSON CMD_JSON ENV_JSON LAYER...: writes the OCI archive
# OUT for image REF (name:tag) with the given layers (bottom first).
oci_image() {
	local out=$1 ref=$2 entrypoint=$3 cmd=$4 env=$5
	shift 5
	local work diffs=() layers=() l d s
	work=$(mktemp -d "${out%/*}/.oci.XXXXXX") || return 1
	mkdir -p "$work/blobs/sha256"
	for l in "$@"; do
		d=$(oci_sha256 "$l")
		s=$(stat -c %s "$l")
		ln -f "$l" "$work/blobs/sha256/$d" 2>/dev/null || cp "$l" "$work/blobs/sha256/$d"
		diffs+=("sha256:$d")
		layers+=("$(jq -cn --arg d "sha256:$d" --argjson s "$s" \
			'{mediaType: "application/vnd.oci.image.layer.v1.tar", digest: $d, size: $s}')")
	done
	jq -cn --argjson ep "$entrypoint" --argjson cmd "$cmd" --argjson env "$env" \
		--arg user "${OCI_USER:-}" \
		--argjson diffs "$(oci_json_array "${diffs[@]}")" \
		--arg arch "$OCI_ARCH" \
		'{architecture: $arch, os: "linux",
		  config: ({Entrypoint: $ep, Cmd: $cmd, Env: $env, WorkingDir: "/"}
		           + (if $user == "" then {} else {User: $user} end)),
		  rootfs: {type: "layers", diff_ids: $diffs}}' >"$work/config.json"
	oci_blob_add "$work" config.json cfg
	jq -cn --arg cd "sha256:$cfg_digest" --argjson cs "$cfg_size" \
		--argjson layers "$(printf '%s\n' "${layers[@]}" | jq -cs .)" \
		'{schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
		  config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $cd, size: $cs},
		  layers: $layers}' >"$work/manifest.json"
	oci_blob_add "$work" manifest.json man
	jq -cn --arg md "sha256:$man_digest" --argjson ms "$man_size" --arg ref "$ref" \
		--arg tag "${ref##*:}" --arg arch "$OCI_ARCH" \
		'{schemaVersion: 2, manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json",
		  digest: $md, size: $ms, platform: {architecture: $arch, os: "linux"},
		  annotations: {"io.containerd.image.name": $ref, "org.opencontainers.image.ref.name": $tag}}]}' \
		>"$work/index.json"
	printf '{"imageLayoutVersion":"1.0.0"}' >"$work/oci-layout"
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work" \
		-cf "$out.tmp" oci-layout index.json blobs &&
		mv "$out.tmp" "$out" && echo "sha256:$man_digest" >"$out.digest"
	local rc=$?
	rm -rf "$work"
	return $rc
}

# oci_blob_add WORK FILE VAR: moves WORK/FILE into the blob store; sets VAR_digest, VAR_size.
oci_blob_add() {
	local d s
	d=$(oci_sha256 "$1/$2")
	s=$(stat -c %s "$1/$2")
	mv "$1/$2" "$1/blobs/sha256/$d"
	printf -v "$3_digest" %s "$d"
	printf -v "$3_size" %s "$s"
}

# oci_needed_libs FILE: the shared libraries FILE loads (absolute paths), per ldd; for
# arm64 the arm64 dynamic loader lists them under qemu-aarch64-static (multiarch libraries).
oci_needed_libs() {
	if [ "$OCI_ARCH" = arm64 ]; then
		need qemu-aarch64-static "apt-get install qemu-user-static"
		# A static binary has no interpreter: nothing to copy.
		file -L "$1" | grep -q 'dynamically linked' || return 0
		qemu-aarch64-static /lib/ld-linux-aarch64.so.1 --list "$1" 2>/dev/null |
			grep -o '/[^ ]*' | sort -u || true
		return
	fi
	ldd "$1" 2>/dev/null | grep -o '/[^ ]*' | sort -u || true
}

# oci_copy_with_libs ROOT FILE...: copies each executable to ROOT/usr/local/bin and the
# shared libraries it needs (oci_needed_libs) to the same paths under ROOT.
oci_copy_with_libs() {
	local root=$1 f lib
	shift
	mkdir -p "$root/usr/local/bin"
	for f in "$@"; do
		[ -x "$f" ] || die "not an executable: $f"
		cp -L "$f" "$root/usr/local/bin/"
		while read -r lib; do
			[ -n "$lib" ] || continue
			mkdir -p "$root$(dirname "$lib")"
			cp -L "$lib" "$root$lib"
		done < <(oci_needed_libs "$f")
	done
}

# oci_base_files ROOT: /etc/passwd, /etc/group, /tmp for a scratch image.
oci_base_files() {
	mkdir -p "$1/etc" "$1/tmp"
	chmod 1777 "$1/tmp"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n' \
		>"$1/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$1/etc/group"
}

# oci_import_changed SOCKET ARCHIVE...: imports (images/build.sh import) each archive whose
# manifest digest the containerd at SOCKET does not have under the archive's name; prints
# each image reference.
oci_import_changed() {
	local sock=$1 a ref want have
	shift
	for a in "$@"; do
		ref=$(tar -xOf "$a" index.json | jq -r '.manifests[0].annotations["io.containerd.image.name"]')
		want=$(cat "$a.digest")
		have=$(ctr --address "$sock" -n k8s.io images ls "name==$ref" 2>/dev/null |
			awk 'NR == 2 {print $3}')
		if [ "$have" != "$want" ]; then
			log "importing $ref"
			"$ROOT/images/build.sh" import "$sock" "$a"
		fi
		echo "$ref"
	done
}


# oci_index OUT REF ARCHIVE...: one archive OUT holding the images of the single-image
# ARCHIVEs (one per architecture, from oci_image) as a multi-architecture image: an image
# index blob lists each manifest with its platform; index.json names that index REF.
# `skopeo copy --all oci-archive:OUT docker://...` pushes it with every architecture.
oci_index() {
	local out=$1 ref=$2 work a
	shift 2
	work=$(mktemp -d "${out%/*}/.oci-index.XXXXXX") || return 1
	mkdir -p "$work/blobs/sha256"
	for a in "$@"; do
		tar -xf "$a" -C "$work" blobs || { rm -rf "$work"; return 1; }
		tar -xOf "$a" index.json | jq -c '.manifests[] | del(.annotations)' >>"$work/manifests" ||
			{ rm -rf "$work"; return 1; }
	done
	jq -cs '{schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json", manifests: .}' \
		"$work/manifests" >"$work/image-index.json" && rm "$work/manifests" &&
		oci_blob_add "$work" image-index.json idx &&
		jq -cn --arg d "sha256:$idx_digest" --argjson s "$idx_size" --arg ref "$ref" --arg tag "${ref##*:}" \
			'{schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
			  manifests: [{mediaType: "application/vnd.oci.image.index.v1+json", digest: $d, size: $s,
			    annotations: {"io.containerd.image.name": $ref, "org.opencontainers.image.ref.name": $tag}}]}' \
			>"$work/index.json" &&
		printf '{"imageLayoutVersion":"1.0.0"}' >"$work/oci-layout" &&
		tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work" \
			-cf "$out.tmp" oci-layout index.json blobs && mv "$out.tmp" "$out"
	local rc=$?
	rm -rf "$work"
	return $rc
}
