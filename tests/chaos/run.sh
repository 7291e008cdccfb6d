#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make chaos: the fault-injection suite at full size on a PRIVATE etcd + kube-apiserver
# (its own state dir and ports, so the shared API server and the local cluster are
# never touched): controller SIGKILLs during a claim burst, pool fill and refill, etcd
# compaction (410) under load, kube-apiserver and etcd restarts mid-burst, the router
# serving through an API server restart, pod failure / eviction / PVC loss, malformed and
# malicious objects, the replica cap, and leader hand-over between two controller replicas. Figures: .cache/chaos/report.jsonl; controller logs beside it.
#
# Env: AS_CHAOS_CLAIMS (default 300), AS_CHAOS_KILLS (default 5), AS_CHAOS_LEASE_SECONDS
# (the controllers' Lease, default 15), AS_CHAOS_DIR (state,
# default .cache/chaos), AS_CHAOS_APISERVER_PORT / AS_CHAOS_ETCD_PORT (first ports to
# try, default 36443 / 32379), AS_KEEP_APISERVER=1 keeps the private API server running,
# AS_BUILD_DIR (default build/asan, built with the asan preset when it is that).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
DIR=${AS_CHAOS_DIR:-$ROOT/.cache/chaos}
B=${AS_BUILD_DIR:-$ROOT/build/asan}
mkdir -p "$DIR/logs"
# One run per state dir: a second one would share (and at its end stop) the API server.
# flock -o: the lock stays with flock itself, never with the daemons started below.
if [ -z "${AS_CHAOS_LOCKED:-}" ]; then
	AS_CHAOS_LOCKED=1 flock -n -o -E 75 "$DIR/.run.lock" "$ROOT/tests/chaos/run.sh" "$@"
	rc=$?
	[ "$rc" != 75 ] || echo "another chaos run is using $DIR" >&2
	exit "$rc"
fi
rm -f "$DIR/logs/"*.log "$DIR/report.jsonl"

if [ "$B" = "$ROOT/build/asan" ]; then
	cmake --preset asan >/dev/null && cmake --build --preset asan --target \
		agent-sandbox-controller sandbox-router sandboxd it_test_chaos_controller || exit 1
fi

export AS_APISERVER_DIR=$DIR/apiserver
AS_APISERVER_PORT=${AS_CHAOS_APISERVER_PORT:-36443} AS_ETCD_PORT=${AS_CHAOS_ETCD_PORT:-32379} \
	hack/apiserver.sh start >/dev/null || exit 1
eval "$(hack/apiserver.sh env)"
export AS_KUBECONFIG=$AS_APISERVER_DIR/kubeconfig
stop() { [ "${AS_KEEP_APISERVER:-0}" = 1 ] || hack/apiserver.sh stop >/dev/null; }
trap stop EXIT

export AS_CHAOS_APISERVER=1 AS_CHAOS_CLAIMS=${AS_CHAOS_CLAIMS:-300} AS_CHAOS_KILLS=${AS_CHAOS_KILLS:-5}
export AS_CHAOS_LOG_DIR=$DIR/logs AS_CHAOS_REPORT=$DIR/report.jsonl
export AS_BIN_DIR=$B AS_SOURCE_DIR=$ROOT AS_TEST_DATA=$ROOT/tests/data
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
timeout 3000 "$B/tests/it_test_chaos_controller"
rc=$?
echo "report: $DIR/report.jsonl; controller logs: $DIR/logs"
# A controller that crashed leaves a sanitizer report or a signal line in its log.
if grep -lE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$DIR/logs/"*.log 2>/dev/null; then
	echo "sanitizer reports in the controller logs above" >&2
	rc=1
fi
exit $rc
