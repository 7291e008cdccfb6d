#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# ctest "flags_controller": agent-sandbox-controller refuses a bad value of the flags
# checked here (exit status 2, the flag named) and accepts the good ones: with a
# kubeconfig that does not exist, an accepted command line gets as far as loading it.
# Usage: test_controller_flags.sh BUILD_DIR
set -u
bin=$1/agent-sandbox-controller
fail=0
[ -x "$bin" ] || { echo "not ok: $bin is not built"; exit 1; }
common="--kubeconfig=/nonexistent/kubeconfig --leader-elect=false --metrics-bind-address=0 --health-probe-bind-address=0"

refused() { # FLAG VALUE
	out=$("$bin" "$1=$2" $common 2>&1)
	st=$?
	case "$st:$out" in
	2:*"bad value \"$2\" for $1"*) echo "ok $1=$2 refused" ;;
	*) echo "not ok $1=$2: status $st, printed: $out"; fail=1 ;;
	esac
}

accepted() { # FLAG VALUE
	out=$("$bin" "$1=$2" $common 2>&1)
	case "$out" in
	*"cannot load the client configuration"*) echo "ok $1=$2 accepted" ;;
	*) echo "not ok $1=$2: printed: $out"; fail=1 ;;
	esac
}

for v in bogus -1s 2h 5 1x; do refused --dependent-deletion-delay "$v"; done
for v in 0 off 5s 250ms 1h; do accepted --dependent-deletion-delay "$v"; done

help=$("$bin" --help 2>&1)
case "$help" in
*"--dependent-deletion-delay D|off"*"(default 5s)"*) echo "ok --help names it with its default" ;;
*) echo "not ok: --help does not name --dependent-deletion-delay with its default"; fail=1 ;;
esac
[ $fail -eq 0 ] || exit 1
