#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""N warm claims at once through one AsyncSandboxClient, as an agent harness that fans out
sees it: the time each create(pool) takes, from the call to the returned handle, when N of
them run under asyncio.gather on an idle pool of N; and the CPU of kube-apiserver and etcd
per claim over the burst (from /proc; the start of the refill it triggers included).

Runs with the SDK installed (bench/run.sh uses .cache/pysdk-venv). The pool ("pool" of
template "tpl") and the simulated kubelet are as-loadgen's (``--scenario serve-pool``
with ``--pool-size N``). Each round starts once the previous round's refill exists and
the pool is Ready at N again, then 1 s more, with a new client (its first claim opens the
client's hand-out stream). Every handle is checked: its Sandbox must be controlled by the
claim, labelled with the claim's UID and Ready.

    sdk_burst.py --kubeconfig KC --namespace NS [--count 40] [--rounds 3]
                 [--api-pids PID,PID] [--timeout 120] [--out FILE] [--records FILE]

Prints (or writes) JSON: n, p50/p90/p99/max in ms over all rounds, each round's p50, max
and wall time, api_cpu_ms_per_claim (the rounds' mean; null without --api-pids),
client_cpu_ms_per_claim (this process's CPU over each burst, the client's set-up and its
first connections included; the rounds' mean); "ok" false when a claim failed or a
handle did not check out.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from agent_sandbox_sdk import AsyncSandboxClient, SandboxClient, SandboxError
from sdk_probe import check, pct, report, wait_idle

SETTLE_S = 1.0


def proc_cpu(pids: list[int]) -> float:
    """utime + stime of the processes, in seconds."""
    total = 0
    for p in pids:
        fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


async def burst(kubeconfig: str, ns: str, n: int, timeout: float) -> tuple[list[tuple[str, str, float]], list[str]]:
    """N create(pool) at once on one client: (claim, sandbox, ms) of each that returned,
    and the errors of the others."""
    async with AsyncSandboxClient(namespace=ns, kubeconfig=kubeconfig, connection="direct") as c:

        async def one() -> tuple[str, str, float]:
            t0 = time.perf_counter()
            sb = await c.create("pool", keep=True, timeout=timeout)
            return sb.claim, sb.name, (time.perf_counter() - t0) * 1000

        got = await asyncio.gather(*(one() for _ in range(n)), return_exceptions=True)
    done = [g for g in got if isinstance(g, tuple)]
    errors = [f"{type(g).__name__}: {g}" for g in got if isinstance(g, BaseException)]
    return done, errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--count", type=int, default=40, help="claims at once (the pool's size)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--api-pids", default="", help="kube-apiserver and etcd PIDs, comma- or space-separated")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--out")
    ap.add_argument("--records", help="append round, claim, sandbox, ms as TSV")
    a = ap.parse_args()
    ns, n = a.namespace, a.count
    pids = [int(p) for p in re.split(r"[,\s]+", a.api_pids) if p]
    poller = SandboxClient(namespace=ns, kubeconfig=a.kubeconfig, connection="direct")
    times: list[float] = []
    rounds: list[dict[str, Any]] = []
    cpu_per_claim: list[float] = []
    client_cpu: list[float] = []
    errors: list[str] = []
    rows: list[str] = []
    try:
        for r in range(a.rounds):
            wait_idle(poller, ns, n, r * n, a.timeout)
            time.sleep(SETTLE_S)
            c0 = proc_cpu(pids) if pids else 0.0
            t0, own0 = time.perf_counter(), time.process_time()
            done, errs = asyncio.run(burst(a.kubeconfig, ns, n, a.timeout))
            wall = (time.perf_counter() - t0) * 1000
            client_cpu.append((time.process_time() - own0) / n * 1000)
            if pids:
                cpu_per_claim.append((proc_cpu(pids) - c0) / n * 1000)
            errors += [f"round {r}: {e}" for e in errs]
            ms = [d[2] for d in done]
            times += ms
            rounds.append(
                {
                    "n": len(ms),
                    "p50_ms": round(pct(ms, 50), 1) if ms else None,
                    "max_ms": round(max(ms), 1) if ms else None,
                    "wall_ms": round(wall, 1),
                }
            )
            for claim, sandbox, t in done:
                rows.append(f"{r}\t{claim}\t{sandbox}\t{t:.2f}")
                if why := check(poller, ns, claim, sandbox):
                    errors.append(f"round {r}: {why}")
    except (SandboxError, TimeoutError) as e:
        errors.append(f"{type(e).__name__}: {e}")
    finally:
        poller.close()
    out: dict[str, Any] = {"count": n, "rounds": rounds, "n": len(times)}
    if times:
        out.update(
            p50_ms=round(pct(times, 50), 2),
            p90_ms=round(pct(times, 90), 2),
            p99_ms=round(pct(times, 99), 2),
            max_ms=round(max(times), 2),
            mean_ms=round(statistics.fmean(times), 2),
        )
    out["api_cpu_ms_per_claim"] = round(statistics.fmean(cpu_per_claim), 2) if cpu_per_claim else None
    out["client_cpu_ms_per_claim"] = round(statistics.fmean(client_cpu), 2) if client_cpu else None
    out["ok"] = not errors and len(times) == n * a.rounds
    out["errors"] = errors[:20]
    return report(out, a.out, a.records, rows)


if __name__ == "__main__":
    sys.exit(main())
