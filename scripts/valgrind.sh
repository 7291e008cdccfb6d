#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Valgrind memcheck over the unit suite and the fuzz corpus replays: a plain build
# without sanitizers (build/valgrind), every test executable run under memcheck with
# --error-exitcode, definite and indirect leaks counted as errors. Child processes
# (sandboxd's spawned commands) are not traced. One-time allocations of libcurl,
# OpenSSL and libuv's threadpool that stay reachable at exit are not leaks.
# sandboxd's tests are left out: Debian 12's valgrind 3.19 does not know openat2
# (syscall 437), which sandboxd requires for path confinement and never emulates; they
# run under ASan/UBSan in every build instead. Death tests (a forked child that must
# abort) show up in ctest's "Defects" count; only valgrind's exit code fails a test.
#
#   scripts/valgrind.sh [ctest -R regex]     (default: label unit minus sandboxd and the
#                                            version, bench, flags and hack scripts, which are shell
#                                            (memcheck would check bash); ~2 min)
#
# Ends with "N passed, N failed"; exits non-zero on any failure. Logs per test in
# build/valgrind/memcheck/.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
B=build/valgrind
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }

cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DAS_SANITIZE=OFF -DAS_INTEGRATION=OFF \
	-DAS_STATIC_SANDBOXD=OFF >/dev/null || exit 1
ninja -C "$B" >"$B/build.log" 2>&1 || { tail -n 40 "$B/build.log"; exit 1; }

supp=$(mktemp)
trap 'rm -f "$supp"' EXIT
cat >"$supp" <<'SUPP'
{
   openssl-init-reachable
   Memcheck:Leak
   match-leak-kinds: reachable,possible
   ...
   obj:*libcrypto.so*
}
{
   curl-global-init
   Memcheck:Leak
   match-leak-kinds: reachable,possible
   ...
   fun:curl_global_init*
}
{
   dlopen-reachable
   Memcheck:Leak
   match-leak-kinds: reachable,possible
   ...
   fun:_dl_open
}
SUPP

mkdir -p "$B/memcheck"
rm -f "$B/memcheck"/*.log
# ctest runs each test through valgrind (its environment and arguments kept).
args=(-T memcheck --output-on-failure -j 2 --timeout 600)
if [ $# -gt 0 ]; then args+=(-R "$1"); else args+=(-L unit -E '^(unit_sandboxd_|version_|bench_|flags_|hack_)'); fi
out=$(mktemp)
ctest --test-dir "$B" "${args[@]}" \
	--overwrite MemoryCheckCommand="$(command -v valgrind)" \
	--overwrite MemoryCheckCommandOptions="--tool=memcheck --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect --track-fds=no --trace-children=no --num-callers=30" \
	--overwrite MemoryCheckSuppressionFile="$supp" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$out" | tail -n 1)
rm -f "$out"
total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
nfail=$(sed -E 's/.*, ([0-9]+) tests? failed.*/\1/' <<<"$line")
echo
echo "valgrind: $((${total:-0} - ${nfail:-0})) passed, ${nfail:-1} failed"
exit "$rc"
