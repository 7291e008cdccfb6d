#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ctest "bench_compare": a sweep's per-rate files assembled (bench/assemble.py) into a
run's results, and two such runs set side by side (bench/compare.py): the highest rate
held, and what one claim costs at the sweep's first rate (p50, p99, API server CPU and
API writes per claim) with the ratio in the direction that says how much better ours is.

Usage: test_compare.py SOURCE_DIR
"""

import json
import os
import subprocess
import sys
import tempfile


def rate_file(rate: int, p50: float, p99: float, cpu: float, writes: float) -> dict:
    return {
        "ok": True,
        "saturated": False,
        "p50_ms": p50,
        "p99_ms": p99,
        "count": rate * 30,
        "throughput": {"overall_per_s": rate},
        "api_cpu": {"per_claim_ms": cpu},
        "writes_per_claim": writes,
        "loadavg_start": [0.5, 0.5, 0.5],
        "released": {
            "deleted_claims": rate * 25,
            "sandboxes_left": 1,
            "sandboxes_left_10s": 0,
            "pods_left": 0,
        },
    }


def assemble(src: str, work: str, leg: str, rates: dict) -> None:
    d = os.path.join(work, leg)
    os.mkdir(d)
    for rate, figures in rates.items():
        with open(os.path.join(d, f"sweep_{rate}.json"), "w") as f:
            json.dump(rate_file(rate, *figures), f)
    out = os.path.join(work, "cmp", f"{leg}-1.json")
    subprocess.run(
        [sys.executable, os.path.join(src, "bench", "assemble.py"), "--dir", d, "--out", out],
        check=True,
    )


def row(md: str, label: str) -> list:
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells and cells[0] == label:
            return cells
    raise AssertionError(f"no row {label!r} in:\n{md}")


def main() -> int:
    src = sys.argv[1]
    with tempfile.TemporaryDirectory() as work:
        os.mkdir(os.path.join(work, "cmp"))
        # ours: 16/s costs 9 ms p50, 60 ms p99, 40 ms of API CPU, 11 writes; 48/s misses
        assemble(
            src, work, "ours", {16: (9, 60, 40, 11), 40: (50, 300, 35, 11), 48: (100, 1500, 31, 11)}
        )
        # upstream: 16/s at 90 / 600 ms, 80 ms, 16.5 writes; 20/s missed
        assemble(src, work, "upstream", {16: (90, 600, 80, 16.5), 20: (400, 1700, 85, 16)})
        with open(os.path.join(work, "cmp", "ours-1.json")) as f:
            first = json.load(f)["sweep"]["first_rate"]
        assert first == {
            "rate_per_s": 16.0,
            "p50_ms": 9,
            "p99_ms": 60,
            "api_cpu_ms_per_claim": 40,
            "writes_per_claim": 11,
        }, first
        md = subprocess.run(
            [sys.executable, os.path.join(src, "bench", "compare.py"), os.path.join(work, "cmp")],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    want = {
        "highest claims/s held with p99 <= 1 s": ("40.0", "16.0", "2.50×"),
        "the sweep's first rate (claims/s)": ("16.0", "16.0", "–"),
        "p50 (ms)": ("9", "90.0", "10.00×"),
        "p99 (ms)": ("60.0", "600", "10.00×"),
        "apiserver+etcd CPU per claim (ms)": ("40.0", "80.0", "2.00×"),
        "API writes per claim (all clients, release incl.)": ("11.0", "16.5", "1.50×"),
        "deleted claims' Sandboxes still there at its end": ("1", "1", "1.00×"),
    }
    bad = 0
    for label, cells in want.items():
        got = tuple(row(md, label)[1:4])
        if got != cells:
            print(f"not ok {label}: {got}, want {cells}")
            bad += 1
        else:
            print(f"ok {label}: {' / '.join(got)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
