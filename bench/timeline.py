#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A per-second timeline of a benchmark run: CPU seconds of kube-apiserver, etcd,
kube-controller-manager, the controller and the load generator (from /proc), and the API
server's write requests by verb and resource (apiserver_request_total through kubectl:
$KUBECTL, default kubectl on PATH, with the usual KUBECONFIG).

    bench/timeline.py record OUT.json [--stop FILE] [--interval S]
        samples until FILE exists (default OUT.json.stop) or SIGINT/SIGTERM
    bench/timeline.py show OUT.json [--top N]
        one line per sample: CPU per process and the N busiest write kinds
    bench/timeline.py check OUT.json...
        exits 1 unless each file holds two samples or more, kube-apiserver's CPU and
        at least one write (bench/run.sh --smoke checks its timelines with it)

It is how a whole run's API CPU is placed in its phases (fill, burst, refill, the
namespace's deletion); see docs/performance.md, "Namespace deletion without a write
storm". Counts are taken when a request finishes, so a long request (a
deletecollection) shows up at its end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from typing import Any

PROCS = ("kube-apiserver", "etcd", "kube-controller-manager", "agent-sandbox-controller", "as-loadgen")
SHORT = {
    "kube-apiserver": "api",
    "etcd": "etcd",
    "kube-controller-manager": "kcm",
    "agent-sandbox-controller": "ctrl",
    "as-loadgen": "lg",
}
READS = ("WATCH", "GET", "LIST")
LINE = re.compile(r"apiserver_request_total\{(.*)\} (\S+)")
LABEL = re.compile(r'(\w+)="([^"]*)"')


def pids() -> dict[str, list[str]]:
    """The running processes of PROCS by name (any user; a vanished one is skipped)."""
    out: dict[str, list[str]] = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                exe = f.read().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        name = os.path.basename(exe)
        if name in PROCS:
            out.setdefault(name, []).append(p)
    return out


def cpu_seconds(ps: list[str]) -> float:
    """utime + stime of the processes, in seconds."""
    tck = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in ps:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / tck


def writes() -> dict[str, float]:
    """apiserver_request_total of the write verbs, keyed "VERB resource/subresource"."""
    try:
        text = subprocess.run(
            [os.environ.get("KUBECTL", "kubectl"), "get", "--raw", "/metrics"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        lab = dict(LABEL.findall(m.group(1)))
        if lab.get("verb") in READS:
            continue
        key = f"{lab.get('verb')} {lab.get('resource')}/{lab.get('subresource', '')}"
        out[key] = out.get(key, 0.0) + float(m.group(2))
    return out


def record(out: str, stop: str, interval: float) -> int:
    rows: list[dict[str, Any]] = []
    done = False

    def finish(_sig: int, _frame: object) -> None:
        nonlocal done
        done = True

    signal.signal(signal.SIGINT, finish)
    signal.signal(signal.SIGTERM, finish)
    while not done and not os.path.exists(stop):
        t = time.time()
        rows.append({"t": t, "cpu": {k: cpu_seconds(v) for k, v in pids().items()}, "req": writes()})
        time.sleep(max(0.0, interval - (time.time() - t)))
    with open(out, "w") as f:
        json.dump(rows, f)
    return 0


def show(path: str, top: int) -> int:
    with open(path) as f:
        rows: list[dict[str, Any]] = json.load(f)
    if len(rows) < 2:
        print("fewer than two samples", file=sys.stderr)
        return 1
    t0, prev = rows[0]["t"], rows[0]
    for r in rows[1:]:
        # a process that exited (or was replaced) between samples counts 0, not negative
        cpu = " ".join(f"{SHORT[k]}={max(0.0, r['cpu'].get(k, 0) - prev['cpu'].get(k, 0)):4.2f}" for k in PROCS)
        req = {k: v - prev["req"].get(k, 0) for k, v in r["req"].items()}
        busiest = sorted(((k, v) for k, v in req.items() if v > 0), key=lambda kv: -kv[1])[:top]
        print(f"{r['t'] - t0:5.0f} {cpu} | " + " ".join(f"{k}={v:.0f}" for k, v in busiest))
        prev = r
    return 0


def check(paths: list[str]) -> int:
    bad = 0
    for path in paths:
        try:
            with open(path) as f:
                rows: list[dict[str, Any]] = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{path}: unreadable: {e}", file=sys.stderr)
            bad += 1
            continue
        why = ""
        if len(rows) < 2:
            why = f"{len(rows)} sample(s)"
        elif not any(r["cpu"].get("kube-apiserver") for r in rows):
            why = "no kube-apiserver CPU"
        elif rows[-1]["req"] == rows[0]["req"] or not rows[-1]["req"]:
            why = "no API write counted"
        if why:
            print(f"{path}: {why}", file=sys.stderr)
            bad += 1
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("out")
    rec.add_argument("--stop", default="")
    rec.add_argument("--interval", type=float, default=1.0)
    sh = sub.add_parser("show")
    sh.add_argument("path")
    sh.add_argument("--top", type=int, default=6)
    ck = sub.add_parser("check")
    ck.add_argument("paths", nargs="+")
    a = ap.parse_args()
    if a.cmd == "record":
        if a.interval <= 0:
            ap.error("--interval must be positive")
        return record(a.out, a.stop or a.out + ".stop", a.interval)
    if a.cmd == "check":
        return check(a.paths)
    try:
        return show(a.path, a.top)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
