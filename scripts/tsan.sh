#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ThreadSanitizer run of the controller's concurrent parts: a clang build
# (build/tsan, -fsanitize=thread) of the unit tests of the work queue, store,
# informer, lease elector, event recorder and rate limiter, each run with
# halt_on_error. Races inside jansson's reference counting (json_incref/json_decref/
# json_delete: the library's own atomics are invisible to an uninstrumented libjansson)
# and reports from inside libcurl/libssl/libcrypto (same reason: OpenSSL's refcounts and
# locks) are suppressed; nothing in our code is.
#
#   scripts/tsan.sh [ctest -R regex]      (default: the list below; ~2 min on 2 cores)
#   scripts/tsan.sh --integration         also the controller manager in-process (worker
#                                         pools, informers, lease, events) against the API
#                                         server of hack/apiserver.sh (AS_KUBECONFIG or
#                                         eval "$(hack/apiserver.sh env)"): ~5 min
#
# Ends with "N passed, N failed"; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
B=build/tsan
UNIT='^unit_kube_test_(workqueue|store|informer_dispatch|lease_elector|events_recorder|ratelimit|watch_decode|linebuf)$'
INTEGRATION='^it_test_(controller_ext_all|controller_sandbox|lease|events|watch)$'
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
SUPP

CC=clang cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DAS_SANITIZE=OFF \
	-DAS_WERROR=OFF -DAS_INTEGRATION=$integration -DAS_STATIC_SANDBOXD=OFF \
	-DCMAKE_C_FLAGS="-fsanitize=thread -O1 -g -fno-omit-frame-pointer" \
	-DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null || exit 1
targets=$(ctest --test-dir "$B" -N -R "$TESTS" | sed -n 's/^ *Test *#[0-9]*: //p')
[ -n "$targets" ] || { echo "no tests match $TESTS" >&2; exit 1; }
# shellcheck disable=SC2086 # one target per word
ninja -C "$B" $targets >"$B/build.log" 2>&1 || { tail -n 40 "$B/build.log"; exit 1; }

export TSAN_OPTIONS="suppressions=$supp halt_on_error=1 second_deadlock_stack=1 history_size=4"
out=$(mktemp)
ctest --test-dir "$B" -R "$TESTS" --output-on-failure -j "$([ $integration = ON ] && echo 1 || echo 2)" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$out" | tail -n 1)
rm -f "$out"
total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
nfail=$(sed -E 's/.*, ([0-9]+) tests? failed.*/\1/' <<<"$line")
echo
echo "tsan: $((${total:-0} - ${nfail:-0})) passed, ${nfail:-1} failed"
exit "$rc"
