#!/usr/bin/env bash
# End-to-end tests of sandbox-router on the stack of `make up` (hack/stack.sh up), against
# sandboxd in real sandbox pods: WebSocket exec (stdin, stdout, exit code, output arriving
# as it is produced), an NDJSON process stream arriving incrementally, a large upload and
# download, every routing/header error answered by the live router, SSRF targets refused,
# unauthenticated (401) and unauthorized (403, a ServiceAccount without RBAC) callers,
# a sandbox suspended and resumed into a new pod followed by the router, and concurrent
# keep-alive connections (AS_E2E_ROUTER_CONNS, default 200) with the router's RSS and fds.
# The client is python3 with the standard library only. Needs the stack up.
# Prints "router-e2e: N passed, N failed"; exits non-zero on failure.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
stack_kubeconfig || exit 1
# AS_E2E_ROUTER_URL/_PID: another router on the same cluster (e.g. a fresh build).
ROUTER=${AS_E2E_ROUTER_URL:-$("$STACK" router-url)}
TOKEN=$("$STACK" router-token) || exit 1
ROUTER_PID=${AS_E2E_ROUTER_PID:-$("$STACK" pid router 2>/dev/null)}
NS=default
CONNS=${AS_E2E_ROUTER_CONNS:-200}
CLAIM=e2e-router-$$
MOVE=e2e-router-move-$$
SA=e2e-router-norbac-$$
WORK=$(mktemp -d)
PY=$WORK/client.py

cleanup() {
	k delete sandboxclaim "$CLAIM" --ignore-not-found --wait=false >/dev/null 2>&1
	k delete sandbox "$MOVE" --ignore-not-found --wait=false >/dev/null 2>&1
	k delete serviceaccount "$SA" --ignore-not-found >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT

# ---- the client: WebSocket exec, NDJSON stream timing, concurrent keep-alive ---------
cat >"$PY" <<'PYEOF'
"""Router e2e client (standard library only). Prints one JSON object."""

import argparse
import asyncio
import base64
import hashlib
import http.client
import json
import os
import socket
import struct
import sys
import time
import urllib.parse

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def target(a: argparse.Namespace, path: str) -> tuple[str, dict[str, str]]:
    """Path and headers for the header form or the path form."""
    h = {"Authorization": "Bearer " + a.token}
    if a.form == "path":
        return f"/s/{a.ns}/{a.name}/{a.port}{path}", h
    h.update({"X-Sandbox-ID": a.name, "X-Sandbox-Namespace": a.ns, "X-Sandbox-Port": str(a.port)})
    return path, h


class WS:
    """A minimal RFC 6455 client over a blocking socket."""

    def __init__(self, sock: socket.socket, rest: bytes) -> None:
        self.sock = sock
        self.buf = bytearray(rest)

    def _need(self, n: int) -> None:
        while len(self.buf) < n:
            d = self.sock.recv(65536)
            if not d:
                raise EOFError("connection closed")
            self.buf += d

    def frame(self) -> tuple[bool, int, bytes]:
        self._need(2)
        b0, b1 = self.buf[0], self.buf[1]
        n, off = b1 & 0x7F, 2
        if n == 126:
            self._need(4)
            n, off = struct.unpack(">H", self.buf[2:4])[0], 4
        elif n == 127:
            self._need(10)
            n, off = struct.unpack(">Q", self.buf[2:10])[0], 10
        if b1 & 0x80:
            raise ValueError("masked frame from the server")
        self._need(off + n)
        data = bytes(self.buf[off : off + n])
        del self.buf[: off + n]
        return bool(b0 & 0x80), b0 & 0x0F, data

    def message(self) -> tuple[int, bytes]:
        op, data = -1, b""
        while True:
            fin, o, d = self.frame()
            if o == 9:
                self.send(10, d)
                continue
            if o in (8, 10):
                return o, d
            if o != 0:
                op = o
            data += d
            if fin:
                return op, data

    def send(self, op: int, data: bytes) -> None:
        mask = os.urandom(4)
        n = len(data)
        if n < 126:
            head = bytes([0x80 | op, 0x80 | n])
        elif n < 65536:
            head = bytes([0x80 | op, 0x80 | 126]) + struct.pack(">H", n)
        else:
            head = bytes([0x80 | op, 0x80 | 127]) + struct.pack(">Q", n)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(head + mask + body)


def ws_open(a: argparse.Namespace, path: str) -> tuple[int, bool, WS]:
    u = urllib.parse.urlsplit(a.url)
    sock = socket.create_connection((u.hostname, u.port or 80), timeout=30)
    p, h = target(a, path)
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET {p} HTTP/1.1", f"Host: {u.netloc}", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13",
             "Origin: http://elsewhere.example"]
    lines += [f"{k}: {v}" for k, v in h.items()]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            break
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    hl = head.decode("latin-1").split("\r\n")
    status = int(hl[0].split()[1]) if hl and len(hl[0].split()) > 1 else 0
    pairs = [x.split(":", 1) for x in hl[1:] if ":" in x]
    hdrs = {k.strip().lower(): v.strip() for k, v in pairs}
    want = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    return status, hdrs.get("sec-websocket-accept") == want, WS(sock, rest)


def cmd_ws(a: argparse.Namespace) -> dict:
    """Runs a.cmd over /v1/processes/ws, sends a.stdin (binary, then text JSON), closes
    stdin; reports events with arrival times, stdout, exit code and the close code."""
    t0 = time.monotonic()
    status, accept_ok, ws = ws_open(a, "/v1/processes/ws")
    out: dict = {"status": status, "accept_ok": accept_ok, "events": [], "stdout": "",
                 "stdout_t": [], "exit_code": None, "close_code": None}
    if status != 101:
        return out
    ws.send(1, json.dumps({"command": json.loads(a.cmd)}).encode())
    half = len(a.stdin) // 2
    ws.send(2, a.stdin[:half].encode())
    ws.send(1, json.dumps({"type": "stdin", "text": a.stdin[half:]}).encode())
    ws.send(1, b'{"type":"stdin_close"}')
    stdout = b""
    while True:
        op, data = ws.message()
        if op == 8:
            out["close_code"] = struct.unpack(">H", data[:2])[0] if len(data) >= 2 else 1005
            ws.send(8, data[:2])
            break
        ev = json.loads(data)
        t = round(time.monotonic() - t0, 3)
        out["events"].append(ev["type"])
        if ev["type"] == "stdout":
            stdout += base64.b64decode(ev["data"])
            out["stdout_t"].append(t)
        elif ev["type"] == "exit":
            out["exit_code"] = ev.get("exit_code")
    out["stdout"] = stdout.decode()
    ws.sock.close()
    return out


def cmd_stream(a: argparse.Namespace) -> dict:
    """POST /v1/processes (NDJSON): arrival time of each stdout event."""
    u = urllib.parse.urlsplit(a.url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=60)
    p, h = target(a, "/v1/processes")
    h["Content-Type"] = "application/json"
    t0 = time.monotonic()
    conn.request("POST", p, body=json.dumps({"command": json.loads(a.cmd)}), headers=h)
    r = conn.getresponse()
    out: dict = {"status": r.status, "type": r.getheader("content-type"), "stdout": "",
                 "stdout_t": [], "exit_code": None}
    stdout = b""
    for line in r:
        if not line.strip():
            continue
        ev = json.loads(line)
        if ev["type"] == "stdout":
            stdout += base64.b64decode(ev["data"])
            out["stdout_t"].append(round(time.monotonic() - t0, 3))
        elif ev["type"] == "exit":
            out["exit_code"] = ev.get("exit_code")
    out["stdout"] = stdout.decode()
    return out


async def one_conn(a: argparse.Namespace, host: str, port: int, res: dict) -> None:
    p, h = target(a, "/v1/health")
    req = (f"GET {p} HTTP/1.1\r\nHost: {host}:{port}\r\n"
           + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n").encode()
    try:
        r, w = await asyncio.open_connection(host, port)
        res["open"] += 1
        res["peak"] = max(res["peak"], res["open"])
        await res["barrier"].wait()
        for _ in range(a.reqs):
            w.write(req)
            head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 60)
            lines = head.decode("latin-1").split("\r\n")
            n = 0
            for x in lines[1:]:
                if x.lower().startswith("content-length:"):
                    n = int(x.split(":", 1)[1])
            body = await asyncio.wait_for(r.readexactly(n), 60)
            if lines[0].split()[1] == "200" and b'"ok"' in body:
                res["ok"] += 1
            else:
                res["bad"] += 1
                res["errors"].append(lines[0])
        res["open"] -= 1
        w.close()
    except Exception as e:  # noqa: BLE001 - every failure is counted and reported
        res["bad"] += 1
        res["errors"].append(repr(e))


async def probe(host: str, port: int, res: dict, stop: asyncio.Event) -> None:
    """The router's /healthz while the connections are busy: worst answer time."""
    while not stop.is_set():
        t = time.monotonic()
        r, w = await asyncio.open_connection(host, port)
        w.write(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        d = await r.read()
        w.close()
        res["healthz_ms_max"] = max(res["healthz_ms_max"], round((time.monotonic() - t) * 1000, 1))
        res["healthz_ok"] &= d.startswith(b"HTTP/1.1 200")
        await asyncio.sleep(0.1)


async def conc(a: argparse.Namespace) -> dict:
    u = urllib.parse.urlsplit(a.url)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    res: dict = {"ok": 0, "bad": 0, "errors": [], "open": 0, "peak": 0, "healthz_ms_max": 0.0,
                 "healthz_ok": True, "barrier": asyncio.Event()}
    tasks = [asyncio.create_task(one_conn(a, host, port, res)) for _ in range(a.conns)]
    for _ in range(600):
        if res["open"] + res["bad"] >= a.conns:
            break
        await asyncio.sleep(0.05)
    if a.pid:
        res["router_fds_all_open"] = len(os.listdir(f"/proc/{a.pid}/fd"))
    stop = asyncio.Event()
    pr = asyncio.create_task(probe(host, port, res, stop))
    t0 = time.monotonic()
    res["barrier"].set()
    await asyncio.gather(*tasks)
    res["secs"] = round(time.monotonic() - t0, 2)
    stop.set()
    await pr
    del res["barrier"]
    res["errors"] = res["errors"][:5]
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["ws", "stream", "conc"])
    ap.add_argument("--url", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--ns", default="default")
    ap.add_argument("--name", required=True)
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--form", choices=["header", "path"], default="header")
    ap.add_argument("--cmd", default='["true"]')
    ap.add_argument("--stdin", default="")
    ap.add_argument("--conns", type=int, default=200)
    ap.add_argument("--reqs", type=int, default=10)
    ap.add_argument("--pid", type=int, default=0)
    a = ap.parse_args()
    if a.mode == "ws":
        out = cmd_ws(a)
    elif a.mode == "stream":
        out = cmd_stream(a)
    else:
        out = asyncio.run(conc(a))
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
PYEOF
client() { python3 "$PY" "$1" --url "$ROUTER" --token "$TOKEN" --ns "$NS" "${@:2}"; }

# rt SANDBOX PATH [curl args...]: a request through the router (header form, port 8080).
rt() {
	local sb=$1 path=$2
	shift 2
	curl -sS -m 60 -H "Authorization: Bearer $TOKEN" -H "X-Sandbox-ID: $sb" \
		-H "X-Sandbox-Namespace: $NS" -H "X-Sandbox-Port: 8080" "$ROUTER$path" "$@"
}
# answer CODE DETAIL-SUBSTRING CURL-ARGS...: the router answers CODE with a {"detail"}
# containing DETAIL-SUBSTRING (empty: any body).
answer() {
	local code=$1 detail=$2 got
	shift 2
	got=$(curl -sS -m 60 -o "$WORK/body" -w '%{http_code}' "$@") || return 1
	if [ "$got" != "$code" ]; then
		echo "    got $got: $(head -c 300 "$WORK/body")"
		return 1
	fi
	[ -z "$detail" ] && return 0
	jq -e --arg d "$detail" '.detail | contains($d)' "$WORK/body" >/dev/null ||
		{ echo "    body: $(head -c 300 "$WORK/body")" && return 1; }
}
AUTH=(-H "Authorization: Bearer $TOKEN")
jqf() { jq -e "$1" "$2" >/dev/null 2>&1; } # FILTER FILE: FILTER is true on FILE
pod_ip() { k get sandbox "$1" -o jsonpath='{.status.podIPs[0]}'; }

# ---- sandboxes: a claim on the default warm pool, and one of our own to move ----------
cat <<YAML | k apply -f - >/dev/null
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata: {name: $CLAIM, namespace: $NS, labels: {agent-sandbox.test/e2e: "true"}}
spec:
  warmPoolRef: {name: python-pool}
---
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata: {name: $MOVE, namespace: $NS}
spec:
$(runtime_pod_template)
$EMPTYDIR_VOLUME
YAML
if poll 120 is_ready "sandboxclaim/$CLAIM"; then
	ok "a claim on python-pool becomes Ready"
else
	not_ok "a claim on python-pool becomes Ready" "$(k get sandboxclaim "$CLAIM" -o yaml | tail -15)"
fi
SB=$(claim_sandbox "$CLAIM")
IP=$(pod_ip "$SB")
check "the claimed sandbox has a pod IP ($IP)" test -n "$IP"

# ---- WebSocket exec ------------------------------------------------------------------
TICKS='import sys, time
for i in range(4):
    print("tick", i, flush=True)
    time.sleep(0.4)
sys.stdout.write(sys.stdin.read().upper())
sys.exit(3)'
WS_CMD=$(jq -cn --arg c "$TICKS" '["python3", "-c", $c]')
WS_WANT=$'tick 0\ntick 1\ntick 2\ntick 3\nHELLO THROUGH THE ROUTER\nSECOND HALF\n'
for form in header path; do
	client ws --name "$SB" --form "$form" --cmd "$WS_CMD" \
		--stdin $'hello through the router\nsecond half\n' >"$WORK/ws.json" 2>"$WORK/ws.err"
	w() { jq -e "$1" "$WORK/ws.json" >/dev/null 2>&1; }
	check "WebSocket exec ($form form): 101 with the right Sec-WebSocket-Accept" \
		w '.status == 101 and .accept_ok'
	# shellcheck disable=SC2016 # $w is jq's variable
	check "WebSocket exec ($form form): stdin in (binary and text messages), stdout out" \
		jq -e --arg w "$WS_WANT" '.stdout == $w' "$WORK/ws.json" >/dev/null
	check "WebSocket exec ($form form): exit code 3, start..exit events, close 1000" \
		w '.exit_code == 3 and .close_code == 1000 and .events[0] == "start" and .events[-1] == "exit"'
	check "WebSocket exec ($form form): output arrives as produced (ticks >= 0.9 s apart end to end)" \
		w '(.stdout_t | length) >= 4 and (.stdout_t[3] - .stdout_t[0]) >= 0.9'
	[ "$form" = header ] && echo "    ws events at (s): $(jq -c .stdout_t "$WORK/ws.json" 2>/dev/null) $(head -c 300 "$WORK/ws.err")"
done

# ---- NDJSON process stream -----------------------------------------------------------
STREAM='import time
for i in range(5):
    print("line", i, flush=True)
    time.sleep(0.3)'
client stream --name "$SB" --cmd "$(jq -cn --arg c "$STREAM" '["python3", "-c", $c]')" \
	>"$WORK/stream.json" 2>"$WORK/stream.err"
s() { jq -e "$1" "$WORK/stream.json" >/dev/null 2>&1; }
check "NDJSON stream: 200 application/x-ndjson, all lines, exit 0" \
	s '.status == 200 and (.type | startswith("application/x-ndjson")) and .exit_code == 0 and
	   .stdout == "line 0\nline 1\nline 2\nline 3\nline 4\n"'
check "NDJSON stream: events arrive incrementally (first to last >= 0.9 s)" \
	s '(.stdout_t | length) >= 4 and (.stdout_t[-1] - .stdout_t[0]) >= 0.9'
echo "    stream events at (s): $(jq -c .stdout_t "$WORK/stream.json" 2>/dev/null) $(head -c 300 "$WORK/stream.err")"

# ---- large upload and download -------------------------------------------------------
BIG_MB=${AS_E2E_ROUTER_BIG_MB:-64}
head -c $((BIG_MB << 20)) /dev/urandom >"$WORK/big.in"
t=$(date +%s.%N)
up=$(rt "$SB" /v1/files/big.bin -X PUT --data-binary "@$WORK/big.in" -o /dev/null -w '%{http_code}')
t_up=$(echo "$(date +%s.%N) - $t" | bc)
check "upload of $BIG_MB MiB through the router (HTTP $up)" test "${up:0:1}" = 2
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$1/status" 2>/dev/null; }
hwm0=$(hwm "${ROUTER_PID:-0}")
t=$(date +%s.%N)
rt "$SB" /v1/files/big.bin -o "$WORK/big.out" -D "$WORK/big.head"
t_down=$(echo "$(date +%s.%N) - $t" | bc)
hwm1=$(hwm "${ROUTER_PID:-0}")
check "download of $BIG_MB MiB through the router is byte-identical" cmp -s "$WORK/big.in" "$WORK/big.out"
check "the download keeps its length through the router (Content-Length: $((BIG_MB << 20)))" \
	grep -qi "^content-length: $((BIG_MB << 20))" "$WORK/big.head"
# Streamed, not buffered: the router's peak resident size grows by far less than the file.
if [[ -n $hwm0 && -n $hwm1 ]]; then
	check "the download is streamed, not buffered (router peak RSS +$((hwm1 - hwm0)) KiB)" \
		test $((hwm1 - hwm0)) -lt $((BIG_MB * 256))
fi
printf '    %d MiB up %.2f s, down %.2f s\n' "$BIG_MB" "$t_up" "$t_down"
rm -f "$WORK/big.in" "$WORK/big.out"

# ---- every routing / header error from the live router -------------------------------
H=(-H "X-Sandbox-ID: $SB" -H "X-Sandbox-Namespace: $NS" -H "X-Sandbox-Port: 8080")
long=$(printf 'a%.0s' $(seq 64))
check "no X-Sandbox-ID and no /s/ path: 400" \
	answer 400 "X-Sandbox-ID header is required." "${AUTH[@]}" "$ROUTER/v1/health"
check "X-Sandbox-ID not a DNS label: 400" \
	answer 400 "Invalid sandbox ID format." "${AUTH[@]}" -H "X-Sandbox-ID: Bad_Name" "$ROUTER/v1/health"
check "X-Sandbox-ID of 64 characters: 400" \
	answer 400 "Invalid sandbox ID format." "${AUTH[@]}" -H "X-Sandbox-ID: $long" "$ROUTER/v1/health"
check "X-Sandbox-Namespace invalid: 400" answer 400 "Invalid namespace format." "${AUTH[@]}" \
	-H "X-Sandbox-ID: $SB" -H "X-Sandbox-Namespace: a.b" "$ROUTER/v1/health"
for p in 0 65536 abc -1 123456; do
	check "X-Sandbox-Port $p: 400" answer 400 "Invalid port format." "${AUTH[@]}" \
		-H "X-Sandbox-ID: $SB" -H "X-Sandbox-Port: $p" "$ROUTER/v1/health"
done
check "X-Sandbox-Pod-IP not an address: 400" answer 400 "Invalid target IP address." \
	"${AUTH[@]}" "${H[@]}" -H "X-Sandbox-Pod-IP: pod.local" "$ROUTER/v1/health"
check "X-Sandbox-UID malformed: 400" answer 400 "Invalid sandbox UID format." \
	"${AUTH[@]}" "${H[@]}" -H "X-Sandbox-UID: NOT_A_UID!" "$ROUTER/v1/health"
check "path form, bad namespace: 400" answer 400 "Invalid namespace format." "${AUTH[@]}" \
	"$ROUTER/s/Bad_NS/$SB/8080/v1/health"
check "path form, bad name: 400" answer 400 "Invalid sandbox ID format." "${AUTH[@]}" \
	"$ROUTER/s/$NS/Bad_Name/8080/v1/health"
check "path form, bad port: 400" answer 400 "Invalid port format." "${AUTH[@]}" \
	"$ROUTER/s/$NS/$SB/99999/v1/health"
check "unknown sandbox: 404" answer 404 "Sandbox $NS/no-such-sandbox-$$ not found." "${AUTH[@]}" \
	-H "X-Sandbox-ID: no-such-sandbox-$$" "$ROUTER/v1/health"
uid=$(k get sandbox "$SB" -o jsonpath='{.metadata.uid}')
check "X-Sandbox-UID of the sandbox: 200" answer 200 "" "${AUTH[@]}" "${H[@]}" \
	-H "X-Sandbox-UID: $uid" "$ROUTER/v1/health"
check "X-Sandbox-UID of another object: 404" answer 404 "not found" "${AUTH[@]}" "${H[@]}" \
	-H "X-Sandbox-UID: 00000000-0000-0000-0000-000000000000" "$ROUTER/v1/health"
check "a port nothing listens on: 502" answer 502 "Could not connect to the backend sandbox: $SB" \
	"${AUTH[@]}" -H "X-Sandbox-ID: $SB" -H "X-Sandbox-Port: 9" "$ROUTER/v1/health"
check "X-Sandbox-Timeout 1 on a 3 s request: 504" \
	answer 504 "Timed out waiting for the backend sandbox: $SB" "${AUTH[@]}" "${H[@]}" \
	-H "X-Sandbox-Timeout: 1" -H 'content-type: application/json' \
	-d '{"command":["sleep","3"]}' "$ROUTER/v1/processes/run"
check "an invalid X-Sandbox-Timeout is ignored: 200" answer 200 "" "${AUTH[@]}" "${H[@]}" \
	-H "X-Sandbox-Timeout: soon" "$ROUTER/v1/health"

# ---- SSRF: never dial what the caller names ------------------------------------------
for ip in 169.254.169.254 127.0.0.1 fe80::1 ::1 0.0.0.0 ::ffff:169.254.169.254 \
	100.100.100.200 10.96.0.1 "$(echo "$IP" | awk -F. '{print $1"."$2"."$3"."($4+1)%255}')"; do
	check "X-Sandbox-Pod-IP $ip: 400" answer 400 "Invalid target IP address." \
		"${AUTH[@]}" "${H[@]}" -H "X-Sandbox-Pod-IP: $ip" "$ROUTER/v1/health"
done
check "X-Sandbox-Pod-IP equal to the sandbox's pod IP: 200" answer 200 "" \
	"${AUTH[@]}" "${H[@]}" -H "X-Sandbox-Pod-IP: $IP" "$ROUTER/v1/health"
check "a Host header naming the metadata IP does not choose the upstream" test "$(curl -sS -m 10 \
	"${AUTH[@]}" "${H[@]}" -H 'Host: 169.254.169.254' "$ROUTER/v1/health" | jq -r .status)" = ok

# ---- authentication and authorization ------------------------------------------------
check "no Authorization header: 401" answer 401 "Missing or invalid Authorization header." \
	"${H[@]}" "$ROUTER/v1/health"
check "a Basic credential: 401" answer 401 "Missing or invalid Authorization header." \
	-H "Authorization: Basic dXNlcjpwYXNz" "${H[@]}" "$ROUTER/v1/health"
check "an invalid bearer token: 401" answer 401 "Invalid token." \
	-H "Authorization: Bearer not-a-token" "${H[@]}" "$ROUTER/v1/health"
k create serviceaccount "$SA" -n "$NS" >/dev/null
SA_TOKEN=$(k create token "$SA" -n "$NS" --duration=10m)
check "a valid token of a ServiceAccount without RBAC: 403" \
	answer 403 "Not authorized to access this sandbox." -H "Authorization: Bearer $SA_TOKEN" \
	"${H[@]}" "$ROUTER/v1/health"
check "... also for an unknown sandbox (a stranger cannot probe names): 403" \
	answer 403 "Not authorized" -H "Authorization: Bearer $SA_TOKEN" \
	-H "X-Sandbox-ID: no-such-sandbox-$$" "$ROUTER/v1/health"
check "... and for a WebSocket upgrade: 403" answer 403 "Not authorized" \
	-H "Authorization: Bearer $SA_TOKEN" "${H[@]}" -H 'Connection: Upgrade' \
	-H 'Upgrade: websocket' -H 'Sec-WebSocket-Version: 13' \
	-H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' "$ROUTER/v1/processes/ws"

# ---- concurrent keep-alive connections through the router to the pod -----------------
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null; }
fds() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
rss0=$(rss "$ROUTER_PID") fds0=$(fds "$ROUTER_PID")
ulimit -n 4096 2>/dev/null
client conc --name "$SB" --conns "$CONNS" --reqs 20 --pid "${ROUTER_PID:-0}" \
	>"$WORK/conc.json" 2>"$WORK/conc.err"
c() { jq -e "$1" "$WORK/conc.json" >/dev/null 2>&1; }
check "$CONNS concurrent keep-alive connections, 20 requests each, all answered 200" \
	c ".ok == $CONNS * 20 and .bad == 0 and .peak == $CONNS"
check "the router stays responsive under them (/healthz 200, < 2 s)" \
	c '.healthz_ok and .healthz_ms_max < 2000'
rss1=$(rss "$ROUTER_PID")
echo "    $(jq -c '{ok, bad, secs, healthz_ms_max, router_fds_all_open, errors}' "$WORK/conc.json" 2>/dev/null) $(head -c 300 "$WORK/conc.err")"
echo "    router pid ${ROUTER_PID:-?}: RSS ${rss0:-?} -> ${rss1:-?} KiB, fds ${fds0:-?} idle"

# ---- a sandbox moved to a new pod (suspend, resume) is followed ----------------------
if poll 180 is_ready "sandbox/$MOVE"; then
	ok "the sandbox to move becomes Ready"
else
	not_ok "the sandbox to move becomes Ready" "$(k describe pod "$MOVE" | tail -15)"
fi
MH=(-H "X-Sandbox-ID: $MOVE" -H "X-Sandbox-Namespace: $NS" -H "X-Sandbox-Port: 8080")
run_py() { # SANDBOX CODE: stdout of python3 -c CODE, through the router
	rt "$1" /v1/processes/run -H 'content-type: application/json' \
		-d "$(py_cmd "$2")" | jq -r .stdout
}
ip1=$(pod_ip "$MOVE") uid1=$(k get pod "$MOVE" -o jsonpath='{.metadata.uid}')
check "before: the router reaches the first pod (and leaves a marker in its emptyDir)" \
	test "$(run_py "$MOVE" 'open("/workspace/marker", "w").write("x"); print("written")')" = written
k patch sandbox "$MOVE" --type=merge -p '{"spec":{"operatingMode":"Suspended"}}' >/dev/null
pod_gone() { ! k get pod "$MOVE" >/dev/null 2>&1; }
check "suspend deletes the pod" poll 60 pod_gone
suspended_503() { answer 503 "Sandbox $NS/$MOVE is not ready" "${AUTH[@]}" "${MH[@]}" "$ROUTER/v1/health"; }
check "while suspended: 503 not ready (no stale pod IP dialled)" poll 30 suspended_503
k patch sandbox "$MOVE" --type=merge -p '{"spec":{"operatingMode":"Running"}}' >/dev/null
check "resume: Ready again" poll 120 is_ready "sandbox/$MOVE"
ip2=$(pod_ip "$MOVE") uid2=$(k get pod "$MOVE" -o jsonpath='{.metadata.uid}')
check "resume made a new pod (uid $uid1 -> $uid2, IP $ip1 -> $ip2)" \
	test -n "$uid2" -a "$uid2" != "$uid1" -a -n "$ip2"
check "after: the router reaches the new pod (fresh emptyDir: no marker)" test "$(run_py "$MOVE" \
	'import os, socket; print(socket.gethostname(), os.path.exists("/workspace/marker"))')" = "$MOVE False"
if [ "$ip1" != "$ip2" ]; then
	check "the old pod IP is refused in X-Sandbox-Pod-IP: 400" answer 400 "Invalid target IP address." \
		"${AUTH[@]}" "${MH[@]}" -H "X-Sandbox-Pod-IP: $ip1" "$ROUTER/v1/health"
fi
check "the new pod IP is accepted in X-Sandbox-Pod-IP: 200" answer 200 "" \
	"${AUTH[@]}" "${MH[@]}" -H "X-Sandbox-Pod-IP: $ip2" "$ROUTER/v1/health"
client ws --name "$MOVE" --cmd '["sh", "-c", "cat; exit 5"]' --stdin 'moved' >"$WORK/ws2.json" 2>&1
check "WebSocket exec reaches the new pod" \
	jqf '.stdout == "moved" and .exit_code == 5 and .close_code == 1000' "$WORK/ws2.json"

summary router-e2e
