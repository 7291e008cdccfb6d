#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One warm claim at a time through the Python SDK, as an agent sees it: the time
SandboxClient.create(pool) takes, from the call to the returned handle, on an idle pool.

Runs with the SDK installed (bench/run.sh uses .cache/pysdk-venv). The pool ("pool" of
template "tpl") and the simulated kubelet are as-loadgen's
(``--scenario serve-pool``). Before each claim the probe waits, as the claim probe does,
until the previous claim's refill exists and the pool is Ready at its size again, then
200 ms more. Claims alternate between two clients: one with the early hand-out (the
default: done once a Sandbox bound to the claim is Ready) and one that waits for the
claim's own Ready (``early_handout=False``), so both are measured on the same cluster
in the same minutes. Every handle is checked: its Sandbox must be controlled by the
claim, labelled with the claim's UID and Ready.

    sdk_probe.py --kubeconfig KC --namespace NS [--count 20] [--pool-size 2]
                 [--timeout 60] [--out FILE] [--records FILE]

Prints (or writes) JSON: per mode n, p50/p90/p99/max in ms; "ok" false when a claim
failed or a handle did not check out.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from agent_sandbox_sdk import SandboxClient, SandboxError, _k8s

GAP_S = 0.2
POLL_S = 0.02
POOL = "pool"


def pct(xs: list[float], p: float) -> float:
    """Nearest rank."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))]


def summary(xs: list[float]) -> dict[str, Any]:
    if not xs:
        return {"n": 0}
    return {
        "n": len(xs),
        "p50_ms": round(pct(xs, 50), 2),
        "p90_ms": round(pct(xs, 90), 2),
        "p99_ms": round(pct(xs, 99), 2),
        "max_ms": round(max(xs), 2),
        "mean_ms": round(statistics.fmean(xs), 2),
    }


def wait_idle(c: SandboxClient, ns: str, size: int, done: int, timeout: float) -> None:
    """The previous claim's refill exists and the pool is Ready at its size, then GAP_S."""
    deadline = time.monotonic() + timeout
    have = ready = 0
    while time.monotonic() < deadline:
        have = len(c.kube.list("sandboxes", ns).get("items") or [])
        pool = c.kube.get("sandboxwarmpools", ns, POOL)
        ready = int((pool.get("status") or {}).get("readyReplicas") or 0)
        if have >= size + done and ready >= size:
            time.sleep(GAP_S)
            return
        time.sleep(POLL_S)
    raise TimeoutError(
        f"pool {ns}/{POOL} not back to {size} Ready members in {timeout:g} s after {done} claims"
        f" ({have} Sandboxes, {ready} Ready in the pool's status)"
    )


def check(c: SandboxClient, ns: str, claim: str, sandbox: str) -> str:
    """Why the handle is wrong: its Sandbox is not bound to the claim and Ready ("" if it is)."""
    cl = c.kube.get("sandboxclaims", ns, claim)
    uid = str(cl["metadata"]["uid"])
    sb = c.kube.get("sandboxes", ns, sandbox)
    if not _k8s.handed_out(sb, uid):
        return f"claim {claim}: Sandbox {sandbox} is not bound to it and Ready"
    return ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--count", type=int, default=20, help="claims per mode")
    ap.add_argument("--pool-size", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--out")
    ap.add_argument("--records", help="append mode, claim, sandbox, ms as TSV")
    a = ap.parse_args()
    ns = a.namespace
    clients = {
        "early_handout": SandboxClient(namespace=ns, kubeconfig=a.kubeconfig, connection="direct"),
        "claim_ready": SandboxClient(namespace=ns, kubeconfig=a.kubeconfig, connection="direct", early_handout=False),
    }
    times: dict[str, list[float]] = {m: [] for m in clients}
    errors: list[str] = []
    rows: list[str] = []
    try:
        for i in range(2 * a.count):
            mode = list(clients)[i % 2]
            c = clients[mode]
            try:
                wait_idle(c, ns, a.pool_size, i, a.timeout)
            except (TimeoutError, SandboxError) as e:  # reported with what was measured so far
                errors.append(str(e))
                break
            t0 = time.perf_counter()
            try:
                sb = c.create(POOL, keep=True, timeout=a.timeout)
            except SandboxError as e:  # reported; the probe goes on
                errors.append(f"{mode} claim {i}: {e}")
                continue
            ms = (time.perf_counter() - t0) * 1000
            times[mode].append(ms)
            rows.append(f"{mode}\t{sb.claim}\t{sb.name}\t{ms:.2f}")
            if why := check(c, ns, sb.claim, sb.name):
                errors.append(f"{mode}: {why}")
    finally:
        for c in clients.values():
            c.close()
    out: dict[str, Any] = {m: summary(xs) for m, xs in times.items()}
    out["ok"] = not errors and all(len(xs) == a.count for xs in times.values())
    out["errors"] = errors[:20]
    return report(out, a.out, a.records, rows)


def report(out: dict[str, Any], path: str | None, records: str | None, rows: list[str]) -> int:
    """Writes the result (to path, else stdout) and appends the record rows; the exit
    status of the result's "ok"."""
    text = json.dumps(out, indent=1, sort_keys=True)
    if path:
        Path(path).write_text(text + "\n")
    else:
        print(text)
    if records:
        with open(records, "a") as f:
            f.writelines(r + "\n" for r in rows)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
