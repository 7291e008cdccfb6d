#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ThreadSanitizer run: a clang build (build/tsan, -fsanitize=thread) of the whole unit
# suite (the work queue, store, informer, lease elector, event recorder, rate limiter,
# the router's auth workers and proxy pool, the HTTP server thread, sandboxd's loop
# thread under 64 concurrent clients, ...), each test run with halt_on_error. make test
# runs it with --integration. Suppressed, each for a reason given in the list below:
# races inside the uninstrumented jansson, libcurl, OpenSSL (their own atomics and locks
# are invisible to TSan), file descriptors that the uninstrumented libuv closes with a
# raw close syscall (TSan never sees the close, so the next socket() on that number
# looks like a race). Nothing in our product code. EXCLUDE (a ctest -E regex, empty now)
# is where a test would go that must be left out until its own harness race is fixed.
#
#   scripts/tsan.sh [ctest -R regex]      (default: every unit test; ~2 min on 2 cores)
#   scripts/tsan.sh --integration         also the controller manager in-process (worker
#                                         pools, informers, lease, events) against the API
#                                         server of hack/apiserver.sh (AS_KUBECONFIG or
#                                         eval "$(hack/apiserver.sh env)"): ~2 min, 2 jobs
#
# Ends with "tsan: N passed, N failed"; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
B=build/tsan
UNIT='^unit_'
# Tests left out for a race in their own harness, not in the code under test (none now).
EXCLUDE=''
INTEGRATION='^it_test_(controller_ext_all|controller_sandbox|lease|events|watch|client_mux)$'
integration=OFF
if [ "${1:-}" = --integration ]; then
	integration=ON
	TESTS="$UNIT|$INTEGRATION"
	shift
else
	TESTS=${1:-$UNIT}
fi
command -v clang >/dev/null || { echo "clang is needed (apt-get install clang)" >&2; exit 1; }

supp=$(mktemp)
trap 'rm -f "$supp"' EXIT
cat >"$supp" <<'SUPP'
# jansson's refcounts use compiler atomics inside the uninstrumented shared library
race:json_incref
race:json_decref
race:json_delete
race:libjansson.so
# libcurl's and OpenSSL's global state (initialised once, before threads start), and
# OpenSSL's SSL_SESSION reference counts (atomics inside the uninstrumented libssl: a
# session shared through curl's share interface is freed by the last handle to drop it)
called_from_lib:libcurl.so
called_from_lib:libcrypto.so
called_from_lib:libssl.so
# libuv (uninstrumented) closes descriptors with syscall(SYS_close): TSan never sees the
# close, so a test client's socket() that gets the same number from the kernel "races"
# with the pipe2()/accept() that first returned it on sandboxd's loop thread
race:test_http_connect
# the same for the TLS front: a bridge's socketpair end that the HTTP server's loop closed
# with syscall(SYS_close) is the number the acceptor's next accept4() gets
race:accept4
# the same for sandboxd's watch: it reads directories on libuv's thread pool (watch.c:
# open_child, scan_dir, and job_tree's close), whose descriptors can get the number of a
# connection that the loop thread's libuv closed with syscall(SYS_close)
race:open_child
race:scan_dir
race:job_tree
SUPP

# jansson's inline json_decref drops a reference with release order only, so the thread
# that frees an object shared between threads (a cached object two workers read) has no
# acquire that TSan can see, and the free "races" with the other thread's earlier reads;
# the frame of json_delete is a tail call, so no suppression above matches it. Through
# this header the TSan build uses jansson's __sync builtins (full barriers) instead: the
# same refcount field and layout, an ordering TSan models.
shim="$B/tsan-include"
mkdir -p "$shim"
cat >"$shim/jansson.h" <<'SHIM'
/* TSan build only (scripts/tsan.sh): jansson's refcounts through __sync builtins. */
#include <jansson_config.h>
#undef JSON_HAVE_ATOMIC_BUILTINS
#define JSON_HAVE_ATOMIC_BUILTINS 0
#include_next <jansson.h>
SHIM

CC=clang cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DAS_SANITIZE=OFF \
	-DAS_WERROR=OFF -DAS_INTEGRATION=$integration -DAS_STATIC_SANDBOXD=OFF \
	-DCMAKE_C_FLAGS="-fsanitize=thread -O1 -g -fno-omit-frame-pointer -I$PWD/$shim" \
	-DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null || exit 1
exclude=()
[ -z "$EXCLUDE" ] || exclude=(-E "$EXCLUDE")
targets=$(ctest --test-dir "$B" -N -R "$TESTS" "${exclude[@]}" | sed -n 's/^ *Test *#[0-9]*: //p')
[ -n "$targets" ] || { echo "no tests match $TESTS" >&2; exit 1; }
# shellcheck disable=SC2086 # one target per word
ninja -C "$B" $targets >"$B/build.log" 2>&1 || { tail -n 40 "$B/build.log"; exit 1; }

export TSAN_OPTIONS="suppressions=$supp halt_on_error=1 second_deadlock_stack=1 history_size=4"
out=$(mktemp)
ctest --test-dir "$B" -R "$TESTS" "${exclude[@]}" --output-on-failure -j 2 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$out" | tail -n 1)
rm -f "$out"
total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
nfail=$(sed -E 's/.*, ([0-9]+) tests? failed.*/\1/' <<<"$line")
echo
echo "tsan: $((${total:-0} - ${nfail:-0})) passed, ${nfail:-1} failed"
exit "$rc"
