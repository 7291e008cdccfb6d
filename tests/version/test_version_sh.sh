#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# ctest "version_script": hack/version.sh's forms on a scratch git repository (a copy of
# the script and of CMakeLists.txt's project() line) with and without release tags.
# Usage: test_version_sh.sh SOURCE_DIR
set -u
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

expect() { # DESCRIPTION WANT ARGS...
	d=$1 want=$2
	shift 2
	got=$(sh "$work/repo/hack/version.sh" "$@" 2>&1)
	if printf '%s\n' "$got" | grep -Eqx "$want"; then
		echo "ok $d: $got"
	else
		echo "not ok $d: got '$got', want /$want/"
		fail=1
	fi
}

mkdir -p "$work/repo/hack"
cp "$src/hack/version.sh" "$work/repo/hack/"
printf 'project(demo VERSION 2.5.0 LANGUAGES C)\n' >"$work/repo/CMakeLists.txt"

expect "not a git checkout" '2\.5\.0'
expect "not a git checkout, --pep440" '2\.5\.0' --pep440

g() { git -C "$work/repo" -c user.name=t -c user.email=t@example.com -c commit.gpgsign=false \
	-c tag.gpgsign=false "$@" >/dev/null 2>&1; }
g init -q && g add -A && g commit -q -m one || {
	echo "not ok git init in $work"
	exit 1
}
sha=$(git -C "$work/repo" rev-parse --short=12 HEAD)
expect "no tag" "2\.5\.0-dev\+g$sha"
expect "no tag, --semver" "2\.5\.0-dev\+g$sha" --semver
expect "no tag, --pep440" "2\.5\.0\.dev0\+g$sha" --pep440
echo "edit" >>"$work/repo/CMakeLists.txt"
expect "no tag, dirty" "2\.5\.0-dev\+g$sha\.dirty"
expect "no tag, dirty, --pep440" "2\.5\.0\.dev0\+g$sha\.dirty" --pep440
g checkout -q -- CMakeLists.txt

g tag v1.4.9
expect "at a tag" '1\.4\.9'
expect "at a tag, --pep440" '1\.4\.9' --pep440
g tag v1.5.0-rc.1 # pre-release tags are not counted
g commit -q --allow-empty -m two && g commit -q --allow-empty -m three
sha=$(git -C "$work/repo" rev-parse --short=12 HEAD)
expect "two commits after a tag" "1\.4\.10-dev\.2\+g$sha"
expect "two commits after a tag, --pep440" "1\.4\.10\.dev2\+g$sha" --pep440
touch "$work/repo/new" && g add new
expect "after a tag, dirty" "1\.4\.10-dev\.2\+g$sha\.dirty"
g rm -q --cached new && rm "$work/repo/new"

g tag v2.0
expect "malformed tag" '.*tag v2\.0 is not vMAJOR\.MINOR\.PATCH'
g tag -d v2.0
g tag v2.0.0
expect "at a new tag" '2\.0\.0'
echo "edit" >>"$work/repo/CMakeLists.txt"
expect "at a tag, dirty" '2\.0\.0\+dirty'
expect "at a tag, dirty, --pep440" '2\.0\.0\+dirty' --pep440
expect "unknown argument" ".*unknown argument '--nope'.*" --nope
sh "$work/repo/hack/version.sh" --nope >/dev/null 2>&1
[ $? -eq 2 ] || { echo "not ok unknown argument: exit status is not 2"; fail=1; }
exit $fail
