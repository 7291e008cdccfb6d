#!/usr/bin/env bash
# gVisor (runsc) on this machine, without Kubernetes or containerd: runs the sandbox
# runtime image under runsc directly and checks what deep hibernation would rest on.
#
#   tests/gvisor/standalone.sh [RUNTIME-IMAGE-ARCHIVE]
#
# RUNTIME-IMAGE-ARCHIVE defaults to $AS_IMAGES_CACHE/runtime.oci.tar (images/build.sh
# runtime). Needs root. Builds runsc with hack/cluster/build-gvisor.sh (cached). Checks:
#   - runsc run on the systrap and ptrace platforms: /proc/version inside is gVisor's;
#   - sandboxd (uid 1000) in a sandbox whose network namespace is one of two this test
#     creates (a veth pair, 10.251.0.0/30): /v1/health answers from the peer namespace and
#     a process it runs sees gVisor's kernel;
#   - runsc checkpoint / restore of a Python counter loop: after restore the counter goes
#     on from where it stopped, a random value drawn before the checkpoint is the same,
#     and a file written outside any volume (root overlay) is still there.
# Touches no cluster and no containerd; everything lives in a temporary directory and
# the two network namespaces, removed on exit (KEEP_GVISOR_TMP=1 keeps the directory,
# with runsc's debug logs). Prints "gvisor: N passed, N failed"; exits non-zero on failure.
set -uo pipefail
# shellcheck source=tests/install/lib.sh
source "$(dirname "$0")/../install/lib.sh"
[ "$(id -u)" = 0 ] || {
	echo "tests/gvisor/standalone.sh needs root (runsc, network namespaces)" >&2
	exit 2
}
for c in jq ip curl tar timeout python3; do
	command -v "$c" >/dev/null || {
		echo "$c not found (hack/deps.sh --cluster)" >&2
		exit 2
	}
done
IMAGE=${1:-${AS_IMAGES_CACHE:-$ROOT/.cache/images}/runtime.oci.tar}
[ -f "$IMAGE" ] || {
	echo "no runtime image archive at $IMAGE (images/build.sh runtime)" >&2
	exit 2
}
dir=$("$ROOT/hack/cluster/build-gvisor.sh") || exit 2
RUNSC_BIN=$dir/runsc
GV=$(mktemp -d /tmp/as-gvisor.XXXXXX)
NS_C=as-gv-c-$$ # the sandbox's network namespace
NS_P=as-gv-p-$$ # its peer (the client)
IDS=()   # containers to delete at exit
X=-$$    # suffix of every container id of this run

# rs ARGS...: runsc with this test's state root and debug logs, at most 60 s.
rs() { timeout 60 "$RUNSC_BIN" --root="$GV/state" --debug-log="$GV/logs/" "$@"; }

cleanup() {
	local id m
	for id in "${IDS[@]}"; do rs delete -force "$id" >/dev/null 2>&1; done
	# A sandbox that fails to start leaves an empty cgroup named by its container id in
	# every v1 hierarchy.
	for id in version-systrap version-ptrace sandboxd counter restored; do
		for m in /sys/fs/cgroup/*/"$id$X"; do
			[ ! -d "$m" ] || find "$m" -depth -type d -exec rmdir {} + 2>/dev/null
		done
	done
	ip netns del "$NS_C" 2>/dev/null
	ip netns del "$NS_P" 2>/dev/null
	# runsc may leave a bind mount (its null network namespace) under its root.
	while read -r m; do umount "$m" 2>/dev/null; done < <(awk -v d="$GV/" \
		'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r)
	if [ -n "${KEEP_GVISOR_TMP:-}" ]; then info "kept $GV"; else rm -rf "$GV"; fi
}
trap cleanup EXIT

# bundle DIR USER NETNS ARGS...: an OCI bundle in DIR on the unpacked image; USER uid:gid;
# NETNS a network namespace path or "" for a new one.
bundle() {
	local d=$1 user=$2 netns=$3
	shift 3
	mkdir -p "$d"
	(cd "$d" && "$RUNSC_BIN" spec -- "$@") || return 1
	jq --arg root "$GV/rootfs" --arg ns "$netns" --argjson uid "${user%%:*}" \
		--argjson gid "${user##*:}" '
		.process.terminal = false | .process.user = {uid: $uid, gid: $gid} |
		.process.env = ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"] |
		.root = {path: $root, readonly: false} |
		.linux.namespaces |= map(if .type == "network" and $ns != "" then .path = $ns else . end)' \
		"$d/config.json" >"$d/config.json.tmp" && mv "$d/config.json.tmp" "$d/config.json"
}

unpack_image "$IMAGE" "$GV/rootfs" || {
	not_ok "unpack $IMAGE"
	summary gvisor
	exit 1
}
mkdir -p "$GV/state" "$GV/logs"
info "$("$RUNSC_BIN" --version 2>/dev/null | head -1), kernel $(uname -r)"

# --- runsc run on both platforms ---------------------------------------------------------
bundle "$GV/b-version" 1000:1000 "" cat /proc/version
for p in systrap ptrace; do
	rs --platform="$p" --network=none run --bundle "$GV/b-version" "version-$p$X" \
		>"$GV/version-$p.out" 2>&1 </dev/null
	rc=$?
	if grep -q gvisor "$GV/version-$p.out"; then
		ok "runsc run ($p): /proc/version is gVisor's"
	else
		not_ok "runsc run ($p)" "exit $rc: $(head -c 300 "$GV/version-$p.out")"
	fi
done

# --- sandboxd in a sandbox, reached from a peer network namespace ------------------------
ip netns add "$NS_C" && ip netns add "$NS_P" &&
	ip link add as-gvp0 netns "$NS_P" type veth peer name as-gvc0 netns "$NS_C" &&
	ip -n "$NS_P" addr add 10.251.0.1/30 dev as-gvp0 &&
	ip -n "$NS_C" addr add 10.251.0.2/30 dev as-gvc0 &&
	ip -n "$NS_P" link set as-gvp0 up && ip -n "$NS_C" link set as-gvc0 up &&
	ip -n "$NS_P" link set lo up && ip -n "$NS_C" link set lo up
check "two network namespaces with a veth pair" test $? = 0
bundle "$GV/b-sandboxd" 1000:1000 "/var/run/netns/$NS_C" \
	/usr/local/bin/sandboxd --root /tmp --port 8080
rs run --detach --bundle "$GV/b-sandboxd" "sandboxd$X" >"$GV/sandboxd.out" 2>&1 </dev/null
IDS+=("sandboxd$X")
peer() { ip netns exec "$NS_P" curl -sf --max-time 5 "$@"; }
health() { peer http://10.251.0.2:8080/v1/health | grep -q '"ok"'; }
check "sandboxd under runsc answers /v1/health from the peer namespace" poll 30 health
out=$(peer -X POST -H 'content-type: application/json' \
	-d '{"command":["sh","-c","cat /proc/version; id -u"]}' \
	http://10.251.0.2:8080/v1/processes/run | jq -r .stdout)
check "a process sandboxd runs sees gVisor's kernel, as uid 1000" \
	test "$(printf '%s\n' "$out" | grep -c gvisor)-$(printf '%s\n' "$out" | tail -1)" = 1-1000
rs kill "sandboxd$X" KILL >/dev/null 2>&1

# --- checkpoint / restore of a Python counter loop -----------------------------------------
read -r -d '' COUNTER <<'PY'
import random, time
secret = random.randrange(10**12)
open("/tmp/outside-volumes", "w").write("written before the checkpoint\n")
i = 0
while True:
    i += 1
    print(i, secret, flush=True)
    time.sleep(0.2)
PY
bundle "$GV/b-counter" 1000:1000 "" python3 -u -c "$COUNTER"
rs --network=none run --detach --bundle "$GV/b-counter" "counter$X" >"$GV/counter1.out" 2>&1 </dev/null
IDS+=("counter$X")
# last_line FILE: the last complete "N SECRET" line (the restored sandbox writes its
# stdout at the old offset: the new file starts with a hole of NUL bytes).
last_line() { tr -d '\0' <"$1" | grep -E '^[0-9]+ [0-9]+$' | tail -1; }
counted() { [ "$(last_line "$1" | cut -d' ' -f1)" -ge "$2" ] 2>/dev/null; }
check "the counter runs under runsc" poll 30 counted "$GV/counter1.out" 3
t0=$(date +%s%N)
rs checkpoint --image-path="$GV/image" "counter$X" >"$GV/checkpoint.out" 2>&1
rc=$?
t_ck=$((($(date +%s%N) - t0) / 1000000))
check "runsc checkpoint succeeds (exit $rc)" test "$rc" = 0
before=$(last_line "$GV/counter1.out")
sleep 1
# same NONEMPTY OTHER: both equal and not empty.
same() { [ -n "$1" ] && [ "$1" = "$2" ]; }
check "the checkpointed sandbox has stopped (its output stopped)" \
	same "$before" "$(last_line "$GV/counter1.out")"
[ ! -d "$GV/image" ] ||
	info "checkpoint: ${t_ck} ms, image $(du -sh "$GV/image" | cut -f1) ($(ls "$GV/image" | tr '\n' ' '))"
rs delete -force "counter$X" >/dev/null 2>&1
t0=$(date +%s%N)
rs --network=none restore --detach --image-path="$GV/image" --bundle "$GV/b-counter" "restored$X" \
	>"$GV/counter2.out" 2>&1 </dev/null
rc=$?
t_rs=$((($(date +%s%N) - t0) / 1000000))
IDS+=("restored$X")
check "runsc restore succeeds (exit $rc)" test "$rc" = 0
[ "$rc" != 0 ] || info "restore: ${t_rs} ms"
n_before=${before%% *}
n_before=${n_before:-0}
check "after restore the counter goes on" poll 30 counted "$GV/counter2.out" $((n_before + 2))
first=$(tr -d '\0' <"$GV/counter2.out" | grep -E '^[0-9]+ [0-9]+$' | head -1)
check "it continues at $((n_before + 1)), not from 1 (got '$first')" \
	test "${first%% *}" = $((n_before + 1))
check "the random value drawn before the checkpoint is the same" \
	same "${first#* }" "${before#* }"
check "a file written outside any volume before the checkpoint is there" \
	test "$(rs exec "restored$X" cat /tmp/outside-volumes 2>/dev/null)" = "written before the checkpoint"

summary gvisor
