#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""sandboxd micro-benchmark on 127.0.0.1: run-`true` round trip (p50/p99) over the HTTP API
and Execute(["true"]) over gRPC, file upload and download throughput, idle RSS. Standard
library only, plus grpcio for the gRPC row (skipped when it is not importable; bench/run.sh
runs this with the venv of hack/grpc-venv.sh).

  bench/sandboxd/bench.py [--bin build/static/sandboxd] [--runs 1000] [--mb 256] [--json out.json]
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, deadline=10.0):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/v1/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("sandboxd did not become ready")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def bench_run(port, runs):
    c = http.client.HTTPConnection("127.0.0.1", port)
    body = json.dumps({"command": ["true"]})
    lat = []
    for i in range(runs + 20):
        t0 = time.perf_counter()
        c.request("POST", "/v1/processes/run", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        dt = time.perf_counter() - t0
        if r.status != 200 or json.loads(data)["exit_code"] != 0:
            raise RuntimeError(f"run failed: {r.status} {data[:200]!r}")
        if i >= 20:  # warm-up excluded
            lat.append(dt * 1000.0)
    return {"runs": runs, "p50_ms": pct(lat, 50), "p90_ms": pct(lat, 90),
            "p99_ms": pct(lat, 99), "max_ms": max(lat)}


# ExecuteRequest{config: {command: ["true"]}} in protobuf wire format (field 1, length-
# delimited, twice), so the row needs grpcio but no generated stubs.
EXECUTE_TRUE = b"\x0a\x06\x0a\x04true"


def bench_grpc(port, runs):
    try:
        import grpc
    except ImportError:
        return {"skipped": "grpcio is not installed"}
    ch = grpc.insecure_channel(f"127.0.0.1:{port}")
    execute = ch.unary_unary("/process.v1.ProcessService/Execute")
    lat = []
    try:
        for i in range(runs + 20):
            t0 = time.perf_counter()
            resp = execute(EXECUTE_TRUE, timeout=30)
            dt = time.perf_counter() - t0
            if resp != b"":  # exit_code 0 and no output: every field at its default
                raise RuntimeError(f"Execute returned {resp[:200]!r}")
            if i >= 20:
                lat.append(dt * 1000.0)
    finally:
        ch.close()
    return {"runs": runs, "p50_ms": pct(lat, 50), "p90_ms": pct(lat, 90),
            "p99_ms": pct(lat, 99), "max_ms": max(lat)}


def bench_files(port, mb):
    payload = os.urandom(1024 * 1024) * mb
    c = http.client.HTTPConnection("127.0.0.1", port)
    t0 = time.perf_counter()
    c.request("PUT", "/v1/files/bench.bin", payload, {"Content-Type": "application/octet-stream"})
    r = c.getresponse()
    r.read()
    up = time.perf_counter() - t0
    if r.status != 204:
        raise RuntimeError(f"upload failed: {r.status}")
    t0 = time.perf_counter()
    c.request("GET", "/v1/files/bench.bin")
    r = c.getresponse()
    n = 0
    while True:
        chunk = r.read(1 << 20)
        if not chunk:
            break
        n += len(chunk)
    down = time.perf_counter() - t0
    if n != len(payload):
        raise RuntimeError(f"download got {n} bytes")
    return {"mb": mb, "upload_mb_s": mb / up, "download_mb_s": mb / down}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/static/sandboxd")
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--json")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="sbd-bench-")
    port, gport = free_port(), free_port()
    p = subprocess.Popen([a.bin, "--host", "127.0.0.1", "--port", str(port), "--legacy-port",
                          "-1", "--grpc-port", str(gport), "--root", root, "--log-level", "warn"])
    try:
        wait_ready(port)
        time.sleep(0.2)
        res = {"binary": a.bin, "idle_rss_kib": rss_kib(p.pid)}
        res["run_true"] = bench_run(port, a.runs)
        res["grpc_execute_true"] = bench_grpc(gport, a.runs)
        res["files"] = bench_files(port, a.mb)
        res["rss_after_kib"] = rss_kib(p.pid)
    finally:
        p.terminate()
        p.wait(timeout=15)
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(res, indent=2))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
