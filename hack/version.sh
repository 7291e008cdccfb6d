#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Prints the project's version, one for every component (the C binaries' --version, the
# Python and Go SDKs, the chart), from `git describe --tags --match 'v*'`.
#
#   hack/version.sh [--semver]   semantic version (C binaries, Go, chart)
#   hack/version.sh --pep440     the same version in PEP 440 form (Python)
#
#   tree                          --semver              --pep440
#   at tag vX.Y.Z                 X.Y.Z                 X.Y.Z
#   N commits after vX.Y.Z        X.Y.(Z+1)-dev.N+gSHA  X.Y.(Z+1).devN+gSHA
#   no release tag                BASE-dev+gSHA         BASE.dev0+gSHA
#   not a git checkout            BASE                  BASE
#
# SHA is 12 hex digits of the commit; uncommitted changes add ".dirty" to the build part
# ("+gSHA.dirty", "X.Y.Z+dirty"). BASE is project(... VERSION) in CMakeLists.txt. Only
# tags vMAJOR.MINOR.PATCH count (pre-release tags like v1.0.0-rc.1 are skipped).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)

form=semver
case ${1:-} in
"" | --semver) ;;
--pep440) form=pep440 ;;
-h | --help)
	sed -n '3,17s/^# \{0,1\}//p' "$0"
	exit 0
	;;
*)
	echo "hack/version.sh: unknown argument '$1' (use --semver or --pep440)" >&2
	exit 2
	;;
esac

base=$(sed -n 's/^project([A-Za-z_]* VERSION \([0-9]*\.[0-9]*\.[0-9]*\).*/\1/p' "$root/CMakeLists.txt")
if [ -z "$base" ]; then
	echo "hack/version.sh: no project(... VERSION X.Y.Z) in CMakeLists.txt" >&2
	exit 1
fi

# "vX.Y.Z[-N-gSHA][-dirty]" or, without a release tag, "SHA[-dirty]".
desc=$(git -C "$root" describe --tags --match 'v[0-9]*' --exclude 'v*-*' --always \
	--abbrev=12 --dirty=-dirty 2>/dev/null) || desc=
if [ -z "$desc" ]; then
	echo "$base"
	exit 0
fi

dirty=
case $desc in *-dirty)
	dirty=dirty
	desc=${desc%-dirty}
	;;
esac

# build metadata ("+gSHA", "+gSHA.dirty", "+dirty" or nothing)
build() {
	if [ -n "$1" ] && [ -n "$dirty" ]; then
		echo "+$1.$dirty"
	elif [ -n "$1" ]; then
		echo "+$1"
	elif [ -n "$dirty" ]; then
		echo "+$dirty"
	fi
}

case $desc in
v*)
	tag=${desc%%-*}
	ver=${tag#v}
	if ! echo "$ver" | grep -Eq '^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$'; then
		echo "hack/version.sh: tag $tag is not vMAJOR.MINOR.PATCH" >&2
		exit 1
	fi
	if [ "$desc" = "$tag" ]; then
		echo "$ver$(build "")"
		exit 0
	fi
	rest=${desc#"$tag"-} # N-gSHA
	n=${rest%%-*}
	sha=${rest#*-}
	next=${ver%.*}.$((${ver##*.} + 1))
	if [ "$form" = pep440 ]; then
		echo "$next.dev$n$(build "$sha")"
	else
		echo "$next-dev.$n$(build "$sha")"
	fi
	;;
*)
	if [ "$form" = pep440 ]; then
		echo "$base.dev0$(build "g$desc")"
	else
		echo "$base-dev$(build "g$desc")"
	fi
	;;
esac
