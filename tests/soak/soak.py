#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Soak test: mixed traffic through the router into sandboxd for a fixed time, with the
resident memory (VmRSS) and open file descriptors of both processes sampled throughout.
Not part of make test: `make soak` runs it for an hour (SOAK_ARGS="--duration 600" for
ten minutes).

Both run as local processes on 127.0.0.1, as in tests/hostile/test_hostile.py: sandboxd
on a scratch root, the router against the standalone API server (AS_KUBECONFIG from
`hack/apiserver.sh env`), reaching sandboxd through a Sandbox whose pod IP is 127.0.0.1,
with TokenReview + SubjectAccessReview on. Traffic, each kind in its own thread:

  processes     POST /v1/processes/run (echo; now and then 1 MiB of output)
  files         PUT / GET (compared) / DELETE of 1 B to 256 KiB files
  websocket     /v1/processes/ws running cat: stdin, stdout, stdin_close, exit, close
  slow          a request head dribbled a byte a second until the router times it out
  non-reading   from clients with a 4 KiB receive buffer that never read: a WebSocket ping
                flood, a flood of control messages that each draw an error reply (to a
                running process), and a 4 MiB download; each dropped after 3 s

The run is a warm-up (10 % of it) and the rest, each followed by --quiet seconds without
traffic (35: the router keeps idle upstream connections 30 s) and a quiet sample.
Verdict: at the end, each process's RSS is within 10 % + 4 MiB and its fd count within 4
of the quiet sample after the warm-up (the API client's connections and allocator caches
are there in both), and under 0.1 % of the operations failed. Prints a sample every
--interval and writes every sample as JSON (--out).

  python3 tests/soak/soak.py [--duration SECONDS] [--interval SECONDS] [--quiet SECONDS]
      [--out FILE] [--sandboxd BIN] [--router BIN]
      (defaults: 3600, 30, 35, .cache/soak/latest.json, build/release/sandboxd,
       build/release/sandbox-router)
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "hostile"))
import test_hostile as h  # noqa: E402  (raw-socket and WebSocket helpers, kubectl)


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.ok, self.failed, self.errors = {}, {}, []

    def add(self, kind, good, detail=""):
        with self.lock:
            d = self.ok if good else self.failed
            d[kind] = d.get(kind, 0) + 1
            if not good and len(self.errors) < 20:
                self.errors.append(f"{kind}: {detail}"[:300])


class Soak:
    def __init__(self, args):
        self.a = args
        self.stats = Stats()
        self.stop = threading.Event()
        self.dir = tempfile.mkdtemp(prefix="soak-")
        self.ns = "soak-" + uuid.uuid4().hex[:8]
        self.procs = {}

    # ---- set-up ---------------------------------------------------------------------

    def start(self):
        root = os.path.join(self.dir, "root")
        self.sport = h.free_port()
        self.slog = open(os.path.join(self.dir, "sandboxd.log"), "wb")
        self.procs["sandboxd"] = subprocess.Popen(
            [self.a.sandboxd, "--host", "127.0.0.1", "--port", str(self.sport), "--legacy-port",
             "-1", "--grpc-port", "0", "--root", root, "--log-level", "warn"],
            stdout=self.slog, stderr=self.slog)
        h.wait_port(self.sport, self.procs["sandboxd"], "sandboxd")
        h.kubectl("apply", "--server-side", "--force-conflicts", "-f",
                  os.path.join(ROOT, "api/crds/agents.x-k8s.io_sandboxes.yaml"))
        h.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                  "crd/sandboxes.agents.x-k8s.io")
        h.kubectl("create", "namespace", self.ns)
        h.kubectl("label", "namespace", self.ns, "agent-sandbox.test/integration=true")
        h.kubectl("-n", self.ns, "apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
            "metadata": {"name": "box"},
            "spec": {"podTemplate": {"spec": {"containers": [{"name": "r", "image": "i"}]}}}}))
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        h.kubectl("-n", self.ns, "patch", "sandbox", "box", "--subresource=status",
                  "--type=merge", "-p", json.dumps({"status": {
                      "podIPs": ["127.0.0.1"], "conditions": [{
                          "type": "Ready", "status": "True", "reason": "DependenciesReady",
                          "message": "", "lastTransitionTime": now}]}}))
        self.port, hport = h.free_port(), h.free_port()
        self.rlog = open(os.path.join(self.dir, "router.log"), "wb")
        self.procs["router"] = subprocess.Popen(
            [self.a.router, "--http-bind-address", f"127.0.0.1:{self.port}",
             "--health-probe-bind-address", f"127.0.0.1:{hport}", "--kubeconfig",
             h.KUBECONFIG, "--namespace", self.ns, "--allow-loopback-upstreams",
             "--trust-loopback", "false", "--log-level", "warn"],
            stdout=self.rlog, stderr=self.rlog)
        h.wait_port(self.port, self.procs["router"], "router")
        self.auth = f"Bearer {h.admin_token()}"
        self.base = f"/s/{self.ns}/box/{self.sport}"
        end = time.monotonic() + 30
        while time.monotonic() < end:  # the router's cache sees the Sandbox
            try:
                if self.call("GET", "/v1/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("the router never reached sandboxd")

    def finish(self):
        rcs = {}
        for name, p in self.procs.items():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            rcs[name] = p.wait(timeout=40)
        self.slog.close()
        self.rlog.close()
        subprocess.run([h.KUBECTL, "--kubeconfig", h.KUBECONFIG, "delete", "namespace", self.ns,
                        "--wait=false"], capture_output=True)
        logs = {}
        for name in ("sandboxd", "router"):
            with open(os.path.join(self.dir, name + ".log"), "rb") as f:
                logs[name] = f.read()[-2000:]
        shutil.rmtree(self.dir, ignore_errors=True)
        return rcs, logs

    # ---- traffic ----------------------------------------------------------------------

    def call(self, method, path, body=None, conn=None, timeout=30):
        c = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, self.base + path, body=body, headers={"Authorization": self.auth})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            if conn is None:
                c.close()

    def loop(self, kind, fn, pause=0.0):
        conn = None
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                fn(conn)
            except Exception as e:  # noqa: BLE001 -- every failure is counted
                self.stats.add(kind, False, repr(e))
                if conn:
                    conn.close()
                conn = None
                time.sleep(0.5)
            if pause:
                self.stop.wait(pause)
        if conn:
            conn.close()

    def processes(self, conn):
        big = random.random() < 0.05
        cmd = ["/bin/sh", "-c", "head -c 1048576 /dev/zero"] if big else ["/bin/echo", "soak"]
        code, body = self.call("POST", "/v1/processes/run", json.dumps({"command": cmd}), conn)
        self.stats.add("processes", code == 200, f"{code} {body[:200]!r}")

    def files(self, conn):
        name = f"/v1/files/soak/f{random.randrange(64)}"
        data = os.urandom(random.choice((1, 1000, 65536, 262144)))
        code, body = self.call("PUT", name, data, conn)
        self.stats.add("files", code == 204, f"PUT {code} {body[:200]!r}")
        code, body = self.call("GET", name, None, conn)
        self.stats.add("files", code == 200 and body == data, f"GET {code} {len(body)}")
        code, body = self.call("DELETE", name, None, conn)
        self.stats.add("files", code == 204, f"DELETE {code} {body[:200]!r}")

    def websocket(self, conn):
        del conn
        s, rest = h.ws_connect(self.port, self.base + "/v1/processes/ws",
                               f"Authorization: {self.auth}\r\n".encode())
        try:
            s.sendall(h.ws_frame(1, json.dumps({"command": ["/bin/cat"]}).encode()))
            s.sendall(h.ws_frame(2, b"hello soak\n"))
            s.sendall(h.ws_frame(1, b'{"type":"stdin_close"}'))
            frames = h.ws_read_frames(s, rest, timeout=30)
            text = b"".join(p for op, p in frames if op == 1)
            good = h.close_code(frames) == 1000 and b'"exit"' in text and b'"stdout"' in text
            self.stats.add("websocket", good, repr(frames[-3:])[:200])
        finally:
            s.close()

    def slow(self, conn):
        del conn
        s = socket.create_connection(("127.0.0.1", self.port), 30)
        try:
            s.sendall(b"GET " + self.base.encode() + b"/v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            end = time.monotonic() + 30
            s.settimeout(1)
            while time.monotonic() < end and not self.stop.is_set():
                try:
                    if s.recv(4096) == b"":
                        break  # closed (after a 408): what a slow client gets
                except socket.timeout:
                    try:
                        s.sendall(b"a")
                    except OSError:
                        break
                except OSError:
                    break
        finally:
            s.close()

    def non_reading(self, conn):
        del conn
        auth = f"Authorization: {self.auth}\r\n".encode()
        sent, _ = h.ping_flood(self.port, self.base + "/v1/processes/ws", auth, seconds=3)
        self.stats.add("non-reading", sent > 0, "nothing sent")
        sent, _ = h.ping_flood(self.port, self.base + "/v1/processes/ws", auth, seconds=3,
                               first=b'{"command":["/bin/sleep","10"]}',
                               frame=h.ws_frame(1, b'{"no":"type"}'))
        self.stats.add("non-reading", sent > 0, "nothing sent")
        big = "/v1/files/soak/big"
        if not os.path.exists(os.path.join(self.dir, "root/soak/big")):
            code, _ = self.call("PUT", big, b"\0" * (4 << 20))
            self.stats.add("non-reading", code == 204, f"PUT big {code}")
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", self.port))
        s.sendall(f"GET {self.base}{big} HTTP/1.1\r\nHost: x\r\nAuthorization: {self.auth}\r\n"
                  "\r\n".encode())
        self.stop.wait(3)
        s.close()

    # ---- sampling ---------------------------------------------------------------------

    def sample(self, t0):
        row = {"t": round(time.monotonic() - t0, 1)}
        for name, p in self.procs.items():
            row[f"{name}_rss_kib"] = h.rss_kib(p.pid)
            row[f"{name}_fds"] = len(os.listdir(f"/proc/{p.pid}/fd"))
        with self.stats.lock:
            row["ops"] = sum(self.stats.ok.values()) + sum(self.stats.failed.values())
            row["failed"] = sum(self.stats.failed.values())
        return row

    def phase(self, seconds, t0, samples):
        """Traffic for seconds (a sample every --interval), then --quiet seconds without
        traffic (closed connections and exited processes are reaped, the router's idle
        pooled upstream connections time out) and a quiet sample, returned."""
        self.stop = threading.Event()
        workers = [("processes", self.processes, 0), ("processes", self.processes, 0),
                   ("files", self.files, 0), ("websocket", self.websocket, 0),
                   ("slow", self.slow, 2), ("non-reading", self.non_reading, 5)]
        threads = [threading.Thread(target=self.loop, args=w, daemon=True) for w in workers]
        for t in threads:
            t.start()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(min(self.a.interval, max(0.0, end - time.monotonic())))
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited with {p.returncode}")
            samples.append(self.sample(t0))
            print(fmt_row(samples[-1]), flush=True)
        self.stop.set()
        for t in threads:
            t.join(timeout=60)
        time.sleep(self.a.quiet)
        samples.append(dict(self.sample(t0), quiet=True))
        print(fmt_row(samples[-1]) + "  (quiet)", flush=True)
        return samples[-1]

    def run(self):
        """Warm-up (10 % of the run, at least one interval), then the rest; returns the
        samples, the quiet one after the warm-up and the quiet one at the end."""
        self.start()
        t0 = time.monotonic()
        samples = [self.sample(t0)]
        warm_s = min(self.a.duration, max(self.a.interval, self.a.duration * 0.1))
        warm = self.phase(warm_s, t0, samples)
        end = self.phase(max(0.0, self.a.duration - warm_s), t0, samples)
        return samples, warm, end


def fmt_row(r):
    return (f"{r['t']:>8.0f} s  router {r['router_rss_kib'] / 1024:7.1f} MiB {r['router_fds']:4d} fds"
            f"  sandboxd {r['sandboxd_rss_kib'] / 1024:7.1f} MiB {r['sandboxd_fds']:4d} fds"
            f"  ops {r['ops']:>8d} failed {r['failed']}")


def verdict(warm, end):
    """Quiet after the warm-up against quiet at the end: RSS within 10 % + 4 MiB, fds
    within 4."""
    problems = []
    for name in ("router", "sandboxd"):
        w, e = warm[f"{name}_rss_kib"], end[f"{name}_rss_kib"]
        if e > w * 1.10 + 4096:
            problems.append(f"{name} RSS grew {w} -> {e} KiB after warm-up")
        if end[f"{name}_fds"] > warm[f"{name}_fds"] + 4:
            problems.append(f"{name} fds {warm[f'{name}_fds']} -> {end[f'{name}_fds']}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=3600, help="seconds of traffic")
    ap.add_argument("--interval", type=float, default=30, help="seconds between samples")
    ap.add_argument("--quiet", type=float, default=35,
                    help="seconds without traffic before a quiet sample (the router keeps "
                         "idle upstream connections 30 s)")
    ap.add_argument("--out", default=os.path.join(ROOT, ".cache/soak/latest.json"))
    ap.add_argument("--sandboxd", default=os.path.join(ROOT, "build/release/sandboxd"))
    ap.add_argument("--router", default=os.path.join(ROOT, "build/release/sandbox-router"))
    a = ap.parse_args()
    if a.duration <= 0 or a.interval <= 0 or a.quiet < 0:
        ap.error("--duration and --interval must be positive, --quiet not negative")
    if not h.KUBECONFIG or not os.path.exists(h.KUBECTL):
        ap.error("needs AS_KUBECONFIG (eval \"$(hack/apiserver.sh env)\") and kubectl")
    soak = Soak(a)
    try:
        samples, warm, end = soak.run()
    finally:
        rcs, logs = soak.finish()
    problems = verdict(warm, end)
    st = soak.stats
    ops = sum(st.ok.values()) + sum(st.failed.values())
    if sum(st.failed.values()) > ops * 0.001:
        problems.append(f"{sum(st.failed.values())} of {ops} operations failed: {st.errors[:5]}")
    for name, rc in rcs.items():
        if rc != 0:
            problems.append(f"{name} exited with {rc}: {logs[name]!r}")
    report = {"duration_s": a.duration, "interval_s": a.interval, "ok": st.ok,
              "failed": st.failed, "errors": st.errors, "warm": warm, "end": end,
              "samples": samples,
              "exit_codes": rcs, "problems": problems}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(report, f, indent=1)
    print("\nstart  " + fmt_row(samples[0]))
    print("warm   " + fmt_row(warm) + "  (quiet, after the warm-up)")
    print("end    " + fmt_row(end) + "  (quiet, after the run)")
    peak = {k: max(r[k] for r in samples) for k in samples[0] if k.endswith(("_kib", "_fds"))}
    print(f"peaks under load: {peak}")
    print(f"operations by kind: {st.ok}; failed: {st.failed}")
    for p in problems:
        print("FAIL: " + p)
    print("soak: " + ("passed" if not problems else "failed") + f" (samples in {a.out})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
