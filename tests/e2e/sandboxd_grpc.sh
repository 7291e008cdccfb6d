#!/usr/bin/env bash
# End-to-end tests of sandboxd's gRPC ProcessService and REST files API with upstream's
# Python SDK from PyPI (k8s-agent-sandbox[grpc] 1.0.8, in a venv under .cache/) on the
# stack of `make up`, in a namespace of their own:
#  - SandboxdInClusterConnectionConfig(mode="in-cluster-pod-ip") (the host reaches pod IPs)
#    and SandboxdPodTunnelConnectionConfig (kubectl port-forward to the pod's 8080 and
#    9090), each against the default template's runtime (sandboxd as the container's
#    command) and against config/samples/sandboxd-sidecar.yaml (sandboxd next to an
#    unmodified workload container sharing /workspace);
#  - per mode: commands.run (stdout, stderr, exit code, env, cwd, command_timeout ->
#    timed_out, stdin at EOF, a signalled process), files write/read/list/exists/delete
#    (recursive), and for the sidecar files crossing between the two containers.
# The SDK's API offers no streaming stdin or signal calls (commands.run is gRPC Execute);
# the conformance suite (hack/grpc-tests.sh) covers WriteStdin, SendSignal and ResizeTTY.
# Prints "sandboxd-grpc-e2e: N passed, N failed"; exits non-zero on failure. Needs the
# stack up.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
stack_kubeconfig || exit 1
NS=as-e2e-sandboxd-grpc-$$
SDK_VERSION=${AS_E2E_SDK_VERSION:-1.0.8}
VENV=${AS_E2E_SDK_VENV:-$ROOT/.cache/upstream-sdk-venv}
WORK=$(mktemp -d)
PY=$WORK/driver.py
# The SDK runs `kubectl port-forward` from PATH and reads KUBECONFIG.
PATH=$(dirname "$KUBECTL"):$PATH
export PATH

k() { "$KUBECTL" -n "$NS" "$@"; } # everything of this suite is in its namespace
cleanup() {
	"$KUBECTL" delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT

# ---- the SDK ------------------------------------------------------------------------
sdk_install() {
	[ -x "$VENV/bin/python" ] || python3 -m venv "$(realpath -m "$VENV")" || return 1
	"$VENV/bin/python" -c "import importlib.metadata as m, sys; \
sys.exit(m.version('k8s-agent-sandbox') != '$SDK_VERSION')" 2>/dev/null && return 0
	"$VENV/bin/python" -m pip install -q --disable-pip-version-check "k8s-agent-sandbox[grpc]==$SDK_VERSION"
}

cat >"$PY" <<'PYEOF'
"""Drives one connection mode of upstream's SDK against one warm pool; prints one JSON
object {"checks": [[name, ok, detail], ...]} (exit 0 even when checks fail)."""

import argparse
import json
import sys
import traceback

from k8s_agent_sandbox import SandboxClient
from k8s_agent_sandbox.models import (
    SandboxdInClusterConnectionConfig,
    SandboxdPodTunnelConnectionConfig,
)

checks = []


def check(name, ok, detail=""):
    checks.append([name, bool(ok), "" if ok else str(detail)[:400]])


def commands(sb):
    r = sb.commands.run("echo hello; echo oops >&2; exit 3", timeout=60)
    check("run: stdout, stderr, exit code", (r.stdout, r.stderr, r.exit_code) == ("hello\n", "oops\n", 3), r)
    r = sb.commands.run('printf %s "$GREETING"', env={"GREETING": "hi there"}, timeout=60)
    check("run: env", r.stdout == "hi there" and r.exit_code == 0, r)
    sb.files.write("cwd-test/marker.txt", b"m")
    r = sb.commands.run("pwd; cat marker.txt", cwd="cwd-test", timeout=60)
    check("run: cwd", r.stdout.endswith("/cwd-test\nm") and r.exit_code == 0, r)
    r = sb.commands.run("pwd", timeout=60)
    check("run: default cwd is the root", r.stdout.strip() == "/workspace", r)
    r = sb.commands.run("cat; echo eof", timeout=30)
    check("run: stdin is at EOF", r.stdout == "eof\n" and r.exit_code == 0, r)
    r = sb.commands.run("kill -TERM $$", timeout=30)
    check("run: a signalled process reports -1", r.exit_code == -1, r)
    r = sb.commands.run("sleep 60", command_timeout=2, timeout=30)
    check("run: command_timeout (gRPC deadline) kills and reports timed_out",
          r.timed_out and r.exit_code == 124, r)
    r = sb.commands.run("seq 1 200000 | wc -l", timeout=60)
    check("run: pipeline output", r.stdout.strip() == "200000", r)
    r = sb.commands.run("printf %s \"$SANDBOXD_GRPC_ADDR $SANDBOXD_REST_ADDR\"", timeout=30)
    check("run: endpoint discovery env", r.stdout == "localhost:9090 localhost:8080", r)


def files(sb):
    data = bytes(range(256)) * 4096  # 1 MiB, every byte value
    sb.files.write("e2e/dir/data.bin", data)
    check("files: write + read (1 MiB binary)", sb.files.read("e2e/dir/data.bin") == data)
    sb.files.write("e2e/dir/note.txt", "text")
    names = sorted(e.name for e in sb.files.list("e2e/dir"))
    check("files: list", names == ["data.bin", "note.txt"], names)
    entry = [e for e in sb.files.list("e2e/dir") if e.name == "data.bin"]
    check("files: list entry", entry and entry[0].size == len(data) and entry[0].type == "file", entry)
    check("files: exists (file, directory)", sb.files.exists("e2e/dir/note.txt") and sb.files.exists("e2e/dir"))
    check("files: exists (missing)", not sb.files.exists("e2e/nope.txt"))
    sb.files.delete("e2e/dir/note.txt")
    check("files: delete a file", not sb.files.exists("e2e/dir/note.txt"))
    try:
        sb.files.delete("e2e")
        check("files: delete of a non-empty directory is refused", False, "no error")
    except Exception as e:  # noqa: BLE001 - SandboxRequestError carries the HTTP status
        check("files: delete of a non-empty directory is refused (409)", getattr(e, "status_code", None) == 409, e)
    sb.files.delete("e2e", recursive=True)
    check("files: delete recursive", not sb.files.exists("e2e"))
    r = sb.commands.run("test -e e2e && echo present || echo gone", timeout=30)
    check("files and commands see one /workspace", r.stdout == "gone\n", r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["pod-ip", "pod-tunnel"], required=True)
    ap.add_argument("--pool", required=True)
    ap.add_argument("--ns", required=True)
    ap.add_argument("--sidecar-file", help="a file the workload container wrote")
    ap.add_argument("--pod-name-out", help="write the sandbox pod's name here")
    a = ap.parse_args()
    if a.mode == "pod-ip":
        cfg = SandboxdInClusterConnectionConfig(mode="in-cluster-pod-ip")
    else:
        cfg = SandboxdPodTunnelConnectionConfig()
    client = SandboxClient(connection_config=cfg)
    sb = None
    try:
        sb = client.create_sandbox(warmpool=a.pool, namespace=a.ns, sandbox_ready_timeout=180)
        check("create_sandbox from the warm pool", True)
        if a.pod_name_out:
            with open(a.pod_name_out, "w") as f:
                f.write(sb.get_pod_name())
        commands(sb)
        files(sb)
        if a.sidecar_file:
            sb.files.write("from-sdk.txt", b"written through sandboxd\n")
    except Exception:  # noqa: BLE001 - every failure becomes a failed check
        check("SDK session", False, traceback.format_exc())
    finally:
        if sb is not None and not a.sidecar_file:
            try:
                sb.terminate()
            except Exception as e:  # noqa: BLE001
                check("terminate", False, e)
    print(json.dumps({"checks": checks}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
PYEOF

# drive MODE POOL [SIDECAR]: runs the driver and turns its checks into results.
drive() {
	local mode=$1 pool=$2 sidecar=${3:-} out
	out=$("$VENV/bin/python" "$PY" --mode "$mode" --pool "$pool" --ns "$NS" \
		${sidecar:+--sidecar-file x --pod-name-out "$WORK/pod"} 2>"$WORK/driver-$mode-$pool.err" | tail -1)
	if ! printf '%s' "$out" | python3 -c 'import json,sys; json.load(sys.stdin)' 2>/dev/null; then
		not_ok "$mode/$pool: SDK driver" "$(tail -5 "$WORK/driver-$mode-$pool.err")"
		return
	fi
	while IFS=$'\t' read -r okv name detail; do
		if [ "$okv" = True ]; then ok "$mode/$pool: $name"; else not_ok "$mode/$pool: $name" "$detail"; fi
	done < <(printf '%s' "$out" | python3 -c '
import json, sys
for name, ok, detail in json.load(sys.stdin)["checks"]:
    print(f"{ok}\t{name}\t{detail}".replace("\n", " "))')
}

# ---- setup ---------------------------------------------------------------------------
"$KUBECTL" create namespace "$NS" >/dev/null || exit 1
if ! sdk_install >"$WORK/pip.log" 2>&1; then
	not_ok "pip install k8s-agent-sandbox[grpc]==$SDK_VERSION" "$(tail -3 "$WORK/pip.log")"
	summary sandboxd-grpc-e2e
	exit 1
fi
ok "pip install k8s-agent-sandbox[grpc]==$SDK_VERSION"

# The default template's runtime: sandboxd as the container's command (ports 8080, 9090).
k apply -f - >/dev/null <<YAML
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: runtime}
spec:
$(runtime_pod_template)
$EMPTYDIR_VOLUME
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: runtime-pool}
spec: {replicas: 2, sandboxTemplateRef: {name: runtime}}
YAML
# The sidecar sample, with the workload image swapped for one the local cluster has.
sed -e "s|image: debian:bookworm-slim|image: $RUNTIME_IMAGE\n        imagePullPolicy: Never|" \
	-e "s|image: localhost/agent-sandbox/runtime:dev|image: $RUNTIME_IMAGE|" \
	-e "s|imagePullPolicy: IfNotPresent|imagePullPolicy: Never|" \
	"$ROOT/config/samples/sandboxd-sidecar.yaml" | k apply -f - >/dev/null
have() { k get "$@" >/dev/null 2>&1; }
check "sidecar sample applied" have sandboxtemplate sandboxd-sidecar
pool_ready() { [ "$(k get sandboxwarmpool "$1" -o jsonpath='{.status.readyReplicas}')" -ge "$2" ] 2>/dev/null; }
check "runtime pool ready" poll 180 pool_ready runtime-pool 2
check "sidecar pool ready" poll 180 pool_ready sandboxd-sidecar-pool 1

# ---- the two sandboxd connection modes on the default runtime -------------------------
drive pod-ip runtime-pool
drive pod-tunnel runtime-pool

# ---- the sidecar shape -----------------------------------------------------------------
drive pod-ip sandboxd-sidecar-pool sidecar
POD=$(cat "$WORK/pod" 2>/dev/null)
if [ -n "$POD" ]; then
	check "sidecar: the workload container sees the file written through sandboxd" \
		bash -c "'$KUBECTL' -n '$NS' exec '$POD' -c workload -- cat /workspace/from-sdk.txt |
			grep -qx 'written through sandboxd'"
	k exec "$POD" -c workload -- sh -c 'echo from-workload >/workspace/from-workload.txt' >/dev/null
	check "sidecar: a sandboxd process sees the file the workload wrote" \
		bash -c "'$KUBECTL' -n '$NS' exec '$POD' -c sandboxd -- cat /workspace/from-workload.txt |
			grep -qx from-workload"
	check "sidecar: the workload's environment names sandboxd's endpoints" \
		bash -c "'$KUBECTL' -n '$NS' exec '$POD' -c workload -- printenv SANDBOXD_GRPC_ADDR |
			grep -qx localhost:9090"
else
	not_ok "sidecar: pod name" "the driver did not report it"
fi
drive pod-tunnel sandboxd-sidecar-pool

summary sandboxd-grpc-e2e
