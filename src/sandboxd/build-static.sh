#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds a fully static sandboxd (glibc, libuv, jansson, nghttp2 and protobuf-c linked in)
# that an init container can copy into any image. Usage: src/sandboxd/build-static.sh [OUT]
# (default build/static/sandboxd). Needs libuv1-dev, libjansson-dev, libnghttp2-dev and
# libprotobuf-c-dev (their .a files), protobuf-c-compiler and libprotobuf-dev (protoc-c
# and google/protobuf/empty.proto; the message code is generated here, as in CMake).
set -eu
cd "$(dirname "$0")/../.."
out=${1:-build/static/sandboxd}
mkdir -p "$(dirname "$out")"
version=$(sh hack/version.sh) # the same as CMake's (docs/development.md, "Versions")
log=$(mktemp)
gen=$(mktemp -d)
trap 'rm -rf "$log" "$gen"' EXIT
# protoc-c 1.4 predates proto3 'optional' (presence only; the wire format is the same).
mkdir -p "$gen/process/v1"
printf '#define AS_VERSION "%s"\n#define AS_GIT_COMMIT "%s"\n' "$version" \
    "$(git rev-parse HEAD 2>/dev/null || echo unknown)" >"$gen/as_version.h"
sed 's/^\([[:space:]]*\)optional /\1/' api/proto/process/v1/process.proto >"$gen/process/v1/process.proto"
protoc-c --c_out="$gen" -I"$gen" -I/usr/include "$gen/process/v1/process.proto" \
    /usr/include/google/protobuf/empty.proto
sh src/sandboxd/gen-fdset.sh protoc-c api/proto /usr/include "$gen/process_fdset.c"
# Generated code is compiled without warnings (like CMake does), ours with -Werror.
for f in process/v1/process empty; do
    src=$gen/$f.pb-c.c
    [ "$f" = empty ] && src=$gen/google/protobuf/empty.pb-c.c
    ${CC:-gcc} -std=gnu11 -O2 -g0 -w -I"$gen" -c "$src" -o "$gen/$(basename "$f").o"
done
# glibc warns that getpwuid_r (referenced by libuv, never called by sandboxd) needs NSS
# libraries at run time; that warning is expected and filtered.
if ! ${CC:-gcc} -std=gnu11 -O2 -g0 -static -D_GNU_SOURCE \
    -Wall -Wextra -Werror -Wno-missing-field-initializers -Isrc -I"$gen" \
    src/sandboxd/*.c src/http/*.c src/common/*.c \
    "$gen/process_fdset.c" "$gen/process.o" "$gen/empty.o" \
    -l:libuv_a.a -l:libjansson.a -l:libnghttp2.a -l:libprotobuf-c.a -lpthread -lm \
    -o "$out" 2>"$log"; then
    cat "$log" >&2
    exit 1
fi
grep -v -e 'statically linked applications requires at runtime' -e 'in function' "$log" >&2 || true
strip "$out"
ls -l "$out"
