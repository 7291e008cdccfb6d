#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer binaries with clang (build/fuzz, -DAS_FUZZ=ON, ASan+UBSan) and
# runs each target for a while on a scratch copy of its corpus; new inputs that add
# coverage are merged back into fuzz/corpus/<target>/ with --merge.
#
#   fuzz/run.sh [-t SECONDS] [--merge] [target...]    (default: every target, 60 s each)
#
# A crash leaves crash-*/leak-*/timeout-* files in build/fuzz/artifacts/<target>/ and
# makes the script exit 1. Replays of the checked-in corpora run in every `make test`
# (ctest -L fuzz) without clang.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=60
merge=0
targets=()
while [ $# -gt 0 ]; do
	case $1 in
	-t) secs=$2; shift 2 ;;
	--merge) merge=1; shift ;;
	-h | --help) sed -n '3,11s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) targets+=("$1"); shift ;;
	esac
done
if [ ${#targets[@]} -eq 0 ]; then
	for f in fuzz/fuzz_*.c; do
		t=${f#fuzz/fuzz_}
		targets+=("${t%.c}")
	done
fi
B=build/fuzz
CC=clang cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DAS_SANITIZE=ON -DAS_FUZZ=ON \
	-DAS_INTEGRATION=OFF -DAS_STATIC_SANDBOXD=OFF -DAS_WERROR=OFF >/dev/null
ninja -C "$B" "${targets[@]/#/fuzz_}" >"$B/build.log" 2>&1 || { tail -n 30 "$B/build.log"; exit 1; }
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
rc=0
for t in "${targets[@]}"; do
	work=$B/corpus-run/$t art=$B/artifacts/$t/
	rm -rf "$work"
	mkdir -p "$work" "$art" "fuzz/corpus/$t"
	cp -r "fuzz/corpus/$t/." "$work/"
	dict=()
	[ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
	echo "== $t: ${secs}s"
	if ! "$B/fuzz/fuzz_$t" "$work" "${dict[@]}" -max_total_time="$secs" -max_len=8192 \
		-timeout=10 -rss_limit_mb=2048 -artifact_prefix="$art" -print_final_stats=1 \
		>"$B/$t.log" 2>&1; then
		echo "   FAILED: see $B/$t.log and $art"
		tail -n 30 "$B/$t.log"
		rc=1
		continue
	fi
	grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' "$B/$t.log" | sed 's/^/   /'
	if [ "$merge" = 1 ]; then
		"$B/fuzz/fuzz_$t" -merge=1 "fuzz/corpus/$t" "$work" -max_len=8192 >>"$B/$t.log" 2>&1
		echo "   corpus: $(find "fuzz/corpus/$t" -type f | wc -l) files"
	fi
done
exit $rc
