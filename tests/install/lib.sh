# Helpers shared by tests/install/run.sh, static.sh and e2e.sh. Source it. The result
# counting (ok, not_ok, skip, check, poll, summary, ...) and the HTTP helpers are those
# of every shell suite: tests/e2e/lib.sh.
# shellcheck shell=bash disable=SC2034
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
WORK=${AS_INSTALL_WORK:-$ROOT/.cache/install-tests}
LEASE=a3317529.agent-sandbox.x-k8s.io
SYS_NS=agent-sandbox-system
CTRL_SA=system:serviceaccount:$SYS_NS:agent-sandbox-controller
ROUTER_SA=system:serviceaccount:$SYS_NS:sandbox-router
PIDS=()

# unpack_image ARCHIVE DIR: the root file system of a one-manifest OCI archive.
unpack_image() {
	local a=$1 d=$2 t m l
	t=$(mktemp -d)
	tar -xf "$a" -C "$t" || return 1
	m=$(jq -r '.manifests[0].digest' "$t/index.json" | cut -d: -f2)
	mkdir -p "$d"
	for l in $(jq -r '.layers[].digest' "$t/blobs/sha256/$m" | cut -d: -f2); do
		tar -xf "$t/blobs/sha256/$l" -C "$d" || return 1
	done
	rm -rf "$t"
}

# bg LOG CMD...: runs CMD in the background (own session), records its pid.
bg() {
	local log=$1
	shift
	setsid "$@" >"$log" 2>&1 </dev/null &
	PIDS+=($!)
}
# stop_bg: SIGTERM to each, SIGKILL after 40 s (the router drains for up to 30 s).
stop_bg() {
	local p t0=$SECONDS
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do
		while [ -d "/proc/$p" ] && [ $((SECONDS - t0)) -lt 40 ]; do sleep 0.1; done
		kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	[ $((SECONDS - t0)) -lt 5 ] || info "background processes took $((SECONDS - t0)) s to stop"
	PIDS=()
}

# yaml_docs FILE KIND...: the documents of FILE whose kind is (not, with -v) in KIND...
yaml_docs() {
	python3 - "$@" <<'PY'
import sys, yaml
args = sys.argv[1:]
invert = args[0] == "-v"
if invert:
    args = args[1:]
path, kinds = args[0], set(args[1:])
docs = [d for d in yaml.safe_load_all(open(path)) if d]
out = [d for d in docs if (d.get("kind") in kinds) != invert]
sys.stdout.write(yaml.safe_dump_all(out, sort_keys=False))
PY
}
