#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds a fully static sandboxd (glibc, libuv and jansson linked in) that an init
# container can copy into any image. Usage: src/sandboxd/build-static.sh [OUT]
# (default build/static/sandboxd). Needs libuv1-dev and libjansson-dev (their .a files).
set -eu
cd "$(dirname "$0")/../.."
out=${1:-build/static/sandboxd}
mkdir -p "$(dirname "$out")"
version=$(sed -n 's/^project(agent_sandbox VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# glibc warns that getpwuid_r (referenced by libuv, never called by sandboxd) needs NSS
# libraries at run time; that warning is expected and filtered.
if ! ${CC:-gcc} -std=gnu11 -O2 -g0 -static -D_GNU_SOURCE -DAS_VERSION="\"${version:-0}\"" \
    -Wall -Wextra -Werror -Wno-missing-field-initializers -Isrc \
    src/sandboxd/*.c src/http/*.c src/common/*.c \
    -l:libuv_a.a -l:libjansson.a -lpthread -lm -o "$out" 2>"$log"; then
    cat "$log" >&2
    exit 1
fi
grep -v -e 'statically linked applications requires at runtime' -e 'in function' "$log" >&2 || true
strip "$out"
ls -l "$out"
