#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ctest "bench_wait_quiet": `bench/upstream.sh wait-quiet`, the wait `compare` makes
# before each leg, on a load file of the test's own (BENCH_LOADAVG) instead of
# /proc/loadavg: it returns at once on a quiet machine, waits for the load to fall, gives
# up after BENCH_QUIET_MAX and says so, and refuses a bad setting or an unreadable file.
# Usage: test_wait_quiet.sh SOURCE_DIR
set -u
script=$1/bench/upstream.sh
work=$(mktemp -d)
trap 'kill "${writer:-}" 2>/dev/null; rm -rf "$work"' EXIT
la=$work/loadavg
fail=0

# run DESCRIPTION WANT-STATUS WANT-REGEX MIN-S MAX-S [VAR=VALUE...]: one wait, its
# status, its last line of output and how long it took
run() {
	local d=$1 want_rc=$2 want=$3 lo=$4 hi=$5 t0 out rc took
	shift 5
	t0=$SECONDS
	out=$(env BENCH_LOADAVG="$la" BENCH_QUIET_POLL=0.2 "$@" bash "$script" wait-quiet 2>&1)
	rc=$? took=$((SECONDS - t0))
	out=$(printf '%s\n' "$out" | tail -1)
	if [ "$rc" = "$want_rc" ] && printf '%s\n' "$out" | grep -Eq "$want" &&
		[ "$took" -ge "$lo" ] && [ "$took" -le "$hi" ]; then
		echo "ok $d: status $rc after ${took}s: $out"
	else
		echo "not ok $d: status $rc (want $want_rc) after ${took}s (want $lo-$hi): '$out' (want /$want/)"
		fail=1
	fi
}

# An upper bound of a few seconds only catches a hang: "waited 0s" says that no poll was
# made (the wait that is asserted), whatever the machine's load.
echo "0.42 0.50 0.61 1/200 4242" >"$la"
run "a quiet machine" 0 'load 0\.42 \(waited 0s for <= 1\.0\)' 0 5

echo "3.10 2.00 1.00 3/200 4242" >"$la"
(sleep 2 && echo "0.90 2.00 1.00 1/200 4242" >"$la.new" && mv "$la.new" "$la") &
writer=$!
run "the load falls after 2 s" 0 'load 0\.90 \(waited [2-4]s for <= 1\.0\)' 2 4
wait "$writer"

echo "3.10 2.00 1.00 3/200 4242" >"$la"
run "the load stays high" 0 'load 3\.10 still above 1\.0 after 2s; starting anyway' 2 4 \
	BENCH_QUIET_MAX=2
run "BENCH_QUIET_MAX=0: no wait" 0 'load 3\.10 still above 1\.0 after 0s; starting anyway' 0 5 \
	BENCH_QUIET_MAX=0
run "a higher threshold" 0 'load 3\.10 \(waited 0s for <= 4\.5\)' 0 5 BENCH_QUIET_LOAD=4.5
run "a bad threshold" 1 "error: BENCH_QUIET_LOAD/MAX/POLL: 'high' is not a number" 0 5 \
	BENCH_QUIET_LOAD=high
run "a fractional bound" 1 "error: BENCH_QUIET_MAX: '2.5' is not a whole number" 0 5 \
	BENCH_QUIET_MAX=2.5
run "an unreadable load file" 1 "error: cannot read the load average from $work/none" 0 5 \
	BENCH_LOADAVG="$work/none"
echo "garbage" >"$la"
run "a load file without a number" 1 "error: cannot read the load average" 0 5

# The usage names the subcommand and the settings, to the header's last line.
usage=$(bash "$script" nope 2>&1)
rc=$?
if [ "$rc" = 2 ] && printf '%s\n' "$usage" | grep -q '^  *bench/upstream.sh wait-quiet ' &&
	[ "$(printf '%s\n' "$usage" | tail -1)" = "BENCH_LOADAVG names the file read instead of /proc/loadavg (tests)." ]; then
	echo "ok usage: status 2, wait-quiet and BENCH_LOADAVG listed"
else
	echo "not ok usage: status $rc, last line '$(printf '%s\n' "$usage" | tail -1)'"
	fail=1
fi
exit $fail
