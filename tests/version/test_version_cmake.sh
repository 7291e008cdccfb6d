#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# ctest "version_cmake": cmake/AsVersion.cmake in a scratch project and git repository
# (copies of the module, hack/version.sh and as_version.h.in, a three-line
# CMakeLists.txt) built with Ninja. A build directory configured once must follow the
# repository: a new commit, a tag, a checkout of another commit or branch re-run the
# configure step on the next build and rewrite gen/as_version.h; a build with nothing new
# does not. Usage: test_version_cmake.sh SOURCE_DIR
set -u
src=$1
for tool in cmake ninja git; do
	command -v "$tool" >/dev/null 2>&1 || {
		echo "skip: no $tool"
		exit 77
	}
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repo=$work/repo build=$work/build
fail=0

g() { git -C "$repo" -c user.name=t -c user.email=t@example.com -c commit.gpgsign=false \
	-c tag.gpgsign=false -c init.defaultBranch=main "$@" >/dev/null 2>&1; }
header() { sed -n "s/^#define $1 \"\(.*\)\"$/\1/p" "$build/gen/as_version.h"; }
sha() { git -C "$repo" rev-parse "${1:-HEAD}"; }

# check DESCRIPTION RERUN(yes|no) VERSION-REGEX COMMIT: one build, then the header
check() {
	d=$1 rerun=$2 want_v=$3 want_c=$4
	out=$(ninja -C "$build" 2>&1) || {
		echo "not ok $d: ninja failed: $out"
		fail=1
		return
	}
	if printf '%s\n' "$out" | grep -q "Re-running CMake"; then ran=yes; else ran=no; fi
	v=$(header AS_VERSION) c=$(header AS_GIT_COMMIT)
	if [ "$ran" = "$rerun" ] && printf '%s\n' "$v" | grep -Eqx "$want_v" && [ "$c" = "$want_c" ]; then
		echo "ok $d: configure re-run $ran, $v, $c"
	else
		echo "not ok $d: configure re-run $ran (want $rerun), version '$v' (want /$want_v/)," \
			"commit '$c' (want $want_c)"
		fail=1
	fi
}

mkdir -p "$repo/hack" "$repo/cmake" "$repo/src/common"
cp "$src/hack/version.sh" "$repo/hack/"
cp "$src/cmake/AsVersion.cmake" "$repo/cmake/"
cp "$src/src/common/as_version.h.in" "$repo/src/common/"
printf '%s\n' 'cmake_minimum_required(VERSION 3.25)' \
	'project(demo VERSION 2.5.0 LANGUAGES NONE)' 'include(cmake/AsVersion.cmake)' \
	>"$repo/CMakeLists.txt"
g init -q && g add -A && g commit -q -m one || {
	echo "not ok git init in $work"
	exit 1
}
one=$(sha)
out=$(cmake -S "$repo" -B "$build" -G Ninja 2>&1) || {
	echo "not ok configure: $out"
	exit 1
}
v=$(header AS_VERSION)
if [ "$v" = "2.5.0-dev+g$(sha | cut -c1-12)" ] && [ "$(header AS_GIT_COMMIT)" = "$one" ]; then
	echo "ok first configure: $v"
else
	echo "not ok first configure: version '$v', commit '$(header AS_GIT_COMMIT)'"
	fail=1
fi

check "nothing new" no "2\.5\.0-dev\+g[0-9a-f]{12}" "$one"
g commit -q --allow-empty -m two
two=$(sha)
check "a new commit" yes "2\.5\.0-dev\+g$(sha | cut -c1-12)" "$two"
check "nothing new after it" no "2\.5\.0-dev\+g[0-9a-f]{12}" "$two"
g tag v2.6.0
check "a tag on HEAD" yes "2\.6\.0" "$two"
g checkout -q "$one"
check "a checkout of an older commit (detached)" yes "2\.5\.0-dev\+g$(sha | cut -c1-12)" "$one"
g checkout -q -b other
check "a new branch at it" yes "2\.5\.0-dev\+g$(sha | cut -c1-12)" "$one"
g commit -q --allow-empty -m three
check "a commit on that branch" yes "2\.5\.0-dev\+g$(sha | cut -c1-12)" "$(sha)"
g pack-refs --all
g checkout -q main
check "back to main, refs packed" yes "2\.6\.0" "$two"
g commit -q --allow-empty -m four
check "a commit on main after packing" yes "2\.6\.1-dev\.1\+g$(sha | cut -c1-12)" "$(sha)"
check "nothing new after that" no "2\.6\.1-dev\.1\+g[0-9a-f]{12}" "$(sha)"
exit $fail
