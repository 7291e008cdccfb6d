#!/usr/bin/env bash
# make test: build with ASan/UBSan, run the unit tests, start the local API server,
# run the integration tests (one at a time), run the repository checks, and print
# "N passed, N failed" as the last line. Exits non-zero on any failure.
#
# Then: the release build with sandboxd's component tests, the CRD freshness check and
# CRD tests, the release artifacts (make dist), the benchmark smoke, chaos, valgrind,
# the local cluster tests, `make up` and the end-to-end tests on it.
#
# Env: AS_KEEP_APISERVER=1 keeps an API server that this script started running;
# AS_TEST_CLUSTER=0 skips everything that needs the local cluster (root);
# AS_KEEP_STACK=1 leaves the stack of `make up` running afterwards; AS_TEST_CHAOS=0 skips
# the fault-injection suite at CI size (make chaos runs it at full size), AS_TEST_TSAN=0
# ThreadSanitizer, AS_TEST_VALGRIND=0 valgrind memcheck.
source "$(dirname "$0")/lib.sh"
set +e
cd "$ROOT" || exit
link_venvs # the suites' Python venvs, kept across clones (hack/lib.sh)
passed=0
failed=0
failures=()

fail() { failed=$((failed + 1)); failures+=("$1"); }

# ctest prints "NN% tests passed, F tests failed out of T"; count its tests.
run_ctest() { # label preset
	local out rc line total nfail
	out=$(mktemp)
	ctest --preset "$2" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$out" | tail -n 1)
	rm -f "$out"
	if [ -n "$line" ]; then
		total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
		nfail=$(sed -E 's/.*, ([0-9]+) tests? failed.*/\1/' <<<"$line")
		passed=$((passed + total - nfail))
		failed=$((failed + nfail))
		[ "$nfail" -eq 0 ] || failures+=("$1 tests ($nfail)")
	elif [ "$rc" -ne 0 ]; then
		fail "$1 tests (ctest exit $rc)"
	fi
}

step() { # name command...: one pass/fail unit
	log "$1"
	shift
	if "$@"; then passed=$((passed + 1)); else fail "$*"; fi
}

# suite NAME CMD...: a test program that ends with a "N passed, N failed" line counts
# its own tests; any other program counts as one pass/fail unit.
suite() {
	local name=$1 out rc line
	shift
	log "$name"
	out=$(mktemp)
	"$@" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	line=$(grep -E '^([A-Za-z-]+: )?[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
	if [ -z "$line" ]; then # pytest: "==== 48 passed, 2 skipped, 1 failed in 3.2s ===="
		line=$(grep -E '^=+ .*[0-9]+ (passed|failed).* in [0-9.]+s' "$out" | tail -n 1)
		[ -z "$line" ] || line=$(awk '{
			for (i = 2; i <= NF; i++) {
				if ($i ~ /^passed/) p += $(i - 1)
				if ($i ~ /^(failed|error)/) f += $(i - 1)
			}
		} END { printf "%d passed, %d failed", p, f }' <<<"$line")
	fi
	rm -f "$out"
	if [ -n "$line" ]; then
		local p f
		p=$(sed -E 's/^([A-Za-z-]+: )?([0-9]+) passed.*/\2/' <<<"$line")
		f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
		passed=$((passed + p))
		failed=$((failed + f))
		[ "$f" -eq 0 ] || failures+=("$name ($f)")
		[ "$rc" -eq 0 ] || [ "$f" -gt 0 ] || fail "$name (exit $rc)"
	elif [ "$rc" -eq 0 ]; then
		passed=$((passed + 1))
	else
		fail "$name (exit $rc)"
	fi
}

log "configure + build (asan preset)"
if ! cmake --preset asan >/dev/null; then
	fail "configure (asan preset)"
else
	# Keep going past a broken file: whatever did build still runs, and a test whose
	# executable is missing counts as failed.
	cmake --build --preset asan -- -k 0 || fail "build (asan preset)"
	log "unit tests"
	run_ctest unit unit
	log "starting the local API server"
	was_running=0
	hack/apiserver.sh status >/dev/null 2>&1 && was_running=1
	saved_env=$(export -p | grep -E '^declare -x (AS_APISERVER_DIR|AS_KUBECONFIG|KUBECONFIG|AS_ETCD_ENDPOINT)=' || true)
	if hack/apiserver.sh start >/dev/null; then
		eval "$(hack/apiserver.sh env)"
		hack/apiserver.sh sweep # leftovers of an earlier run that crashed
		log "integration tests"
		run_ctest integration integration
		suite "hostile HTTP suite (real sandboxd and router)" env \
			SANDBOXD_BIN="$ROOT/build/asan/sandboxd" \
			SANDBOX_ROUTER_BIN="$ROOT/build/asan/sandbox-router" \
			python3 -m unittest -v tests/hostile/test_hostile.py tests/hostile/test_tls.py
		# The unit suite and the in-process controller manager (worker pools, informers,
		# lease, events) against this API server, in a clang -fsanitize=thread build.
		[ "${AS_TEST_TSAN:-1}" = 0 ] ||
			suite "ThreadSanitizer (unit suite + controller manager)" scripts/tsan.sh --integration
		if [ "$was_running" = 0 ] && [ "${AS_KEEP_APISERVER:-0}" != 1 ]; then
			hack/apiserver.sh stop
		fi
	else
		fail "hack/apiserver.sh start"
	fi
	# The private API server's kubeconfig is for the suites above only: the SDK suites
	# below fall back to the stack's (make kubeconfig) when AS_KUBECONFIG is unset.
	unset AS_APISERVER_DIR AS_KUBECONFIG KUBECONFIG AS_ETCD_ENDPOINT
	eval "$saved_env"
fi

log "release build (the binaries make up runs; sandboxd static)"
if cmake --preset release >/dev/null && cmake --build --preset release; then
	passed=$((passed + 1))
	suite "sandboxd component tests" env SANDBOXD_BIN="$ROOT/build/release/sandboxd" \
		python3 -m unittest -v tests/sandboxd/test_component.py tests/sandboxd/test_background.py \
		tests/sandboxd/test_logs.py
	suite "sandboxd filesystem operations" env SANDBOXD_BIN="$ROOT/build/release/sandboxd" \
		python3 -m unittest -v tests/sandboxd/test_fsops.py
	suite "sandboxd gRPC conformance (grpcio)" env SANDBOXD_BIN="$ROOT/build/release/sandboxd" \
		hack/grpc-tests.sh
	suite "sandboxd code contexts (kernel driver)" env SANDBOXD_BIN="$ROOT/build/release/sandboxd" \
		python3 -m unittest -v tests/sandboxd/test_code.py
	suite "kubectl-sandbox against scripted servers (exec, port-forward, streams)" \
		env KUBECTL_SANDBOX="$ROOT/build/release/kubectl-sandbox" \
		python3 -m unittest -v tests/cli/test_exec_fake.py tests/cli/test_portforward_fake.py \
		tests/cli/test_cli_fake.py
else
	fail "build (release preset)"
fi

suite "CRDs up to date (hack/gen-crds --check)" python3 hack/gen-crds/gen_crds.py --check
suite "CRD tests" bash tests/crds/run.sh
suite "observability config (alerts, dashboard)" python3 -m unittest tests/observability/test_config.py
suite "install.yaml up to date (hack/render-install.sh --check)" hack/render-install.sh --check
suite "release artifacts (make dist, tests/dist)" bash tests/dist/run.sh
# the release preset's binaries (the same configuration as bench/run.sh's own build)
suite "benchmark smoke (small N, standalone API server)" env BENCH_BUILD=build/release \
	BENCH_TIMELINE=1 bench/run.sh --smoke
# Fault injection at CI size (make chaos runs it at 300 claims): controller SIGKILLs
# during bursts and refills, 410s, kube-apiserver and etcd restarts, hostile objects; a
# 6 s Lease, so that a SIGKILLed leader holds up its successor 6 s, not 15.
if [ "${AS_TEST_CHAOS:-1}" = 1 ]; then
	suite "chaos (fault injection, private API server)" env AS_CHAOS_CLAIMS="${AS_CHAOS_CLAIMS:-20}" \
		AS_CHAOS_KILLS="${AS_CHAOS_KILLS:-2}" AS_CHAOS_LEASE_SECONDS="${AS_CHAOS_LEASE_SECONDS:-6}" \
		bash tests/chaos/run.sh
fi
[ "${AS_TEST_VALGRIND:-1}" = 0 ] ||
	suite "valgrind memcheck (unit suite, fuzz replays)" scripts/valgrind.sh

if [ "${AS_TEST_CLUSTER:-1}" = 1 ]; then
	# The local cluster (real node + kwok) and the whole stack on it (make up). A 20 s node
	# monitor grace period (default 50 s) shortens the node loss test; cluster.sh up
	# restarts only the controller manager when its args differ, and remembers them.
	export AS_KCM_EXTRA_ARGS=${AS_KCM_EXTRA_ARGS---node-monitor-grace-period=20s}
	suite "local cluster tests" bash tests/cluster/run.sh
	suite "install: static checks (private API server)" bash tests/install/run.sh static
	suite "install: in-cluster end to end from install.yaml" bash tests/install/run.sh e2e
	suite "make up (hack/stack.sh up)" hack/stack.sh up
	suite "README quick start, verbatim" bash tests/e2e/readme.sh
	suite "upstream's SDKs in their default modes (e2e)" bash tests/e2e/dropin.sh
	suite "end-to-end tests" bash tests/e2e/run.sh
	suite "idle suspend / resume on traffic (e2e)" bash tests/e2e/idle.sh
	suite "late-bound claim configuration (e2e)" bash tests/e2e/latebind.sh
	suite "opt-in page merging (e2e)" bash tests/e2e/ksm.sh
	suite "router end to end (real pods)" bash tests/e2e/router.sh
	suite "upstream SDK over sandboxd gRPC + REST, pod-IP / pod-tunnel / sidecar (e2e)" \
		bash tests/e2e/sandboxd_grpc.sh
	suite "developer features (e2e)" bash tests/e2e/devx.sh
	suite "install: in-cluster pods beside the stack" bash tests/install/run.sh pods
	suite "Python SDK (unit, sandboxd, stack)" sdk/python/run-tests.sh
	suite "Go SDK (vet, race unit tests, stack)" sdk/go/run-tests.sh
	suite "scale: 1,000 sandboxes on kwok nodes, controller RSS/CPU" bash tests/e2e/scale.sh
	suite "node loss (kubelet stopped on the real node)" env AS_CHAOS_NODE_LOSS=1 \
		bash tests/chaos/node_loss.sh --stack-is-mine
	[ "${AS_KEEP_STACK:-0}" = 1 ] || suite "make down" hack/stack.sh down
fi

for check in scripts/check-banned.sh scripts/check-format.sh; do
	[ -x "$check" ] || [ -f "$check" ] || continue
	step "$check" bash "$check"
done

if [ "$failed" -gt 0 ]; then
	printf '\nfailed:\n' >&2
	printf '  %s\n' "${failures[@]}" >&2
fi
echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
