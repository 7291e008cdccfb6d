#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# ctest "version_binaries": every binary of the build prints the version CMake configured
# (AS_VERSION), and hack/version.sh prints that same version for the tree.
# Usage: test_binaries.sh BUILD_DIR SOURCE_DIR AS_VERSION AS_GIT_COMMIT OVERRIDDEN(0|1)
# The second check ignores ".dirty" (files edited since configure); it is skipped (exit
# 77) when HEAD is another commit than the one configured (re-run cmake --preset), and
# left out when the version was set by AS_VERSION_OVERRIDE.
set -u
bin=$1 src=$2 want=$3 commit=$4 overridden=$5
fail=0

check() { # NAME OUTPUT: the version is the last field of the output's first line
	got=$(printf '%s\n' "$2" | sed -n '1s/.*[ ,]//p')
	if [ "$got" = "$want" ]; then
		echo "ok $1: $got"
	else
		echo "not ok $1: printed '$2', want version '$want'"
		fail=1
	fi
}

for b in agent-sandbox-controller sandbox-router sandboxd kubectl-sandbox; do
	if [ ! -x "$bin/$b" ]; then
		echo "not ok $b: $bin/$b is not built"
		fail=1
		continue
	fi
	case $b in
	kubectl-sandbox) out=$("$bin/$b" version --client 2>&1) ;;
	*) out=$("$bin/$b" --version 2>&1) ;;
	esac || {
		echo "not ok $b: exit status $? ($out)"
		fail=1
		continue
	}
	check "$b" "$out"
done
[ $fail -eq 0 ] || exit 1

if [ "$overridden" = 1 ]; then
	echo "ok (AS_VERSION_OVERRIDE set: hack/version.sh not compared)"
	exit 0
fi
head=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
if [ "$head" != "$commit" ]; then
	echo "skip: the build was configured at commit $commit, the tree is at $head (re-run cmake --preset)"
	exit 77
fi
now=$(sh "$src/hack/version.sh") || {
	echo "not ok hack/version.sh failed"
	exit 1
}
clean() { printf '%s\n' "$1" | sed -e 's/\.dirty$//' -e 's/+dirty$//'; }
if [ "$(clean "$now")" != "$(clean "$want")" ]; then
	echo "not ok hack/version.sh prints '$now', the binaries '$want'"
	exit 1
fi
echo "ok hack/version.sh: $now"
