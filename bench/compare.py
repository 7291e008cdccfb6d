#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Side-by-side table of a `bench/upstream.sh compare` directory: for every figure the
value of each round of ours and of upstream's controller, their means, and the ratio
(how many times better ours is: upstream / ours for costs and latencies, ours / upstream
for rates). Writes Markdown to stdout (and JSON with --json FILE).

    bench/compare.py bench/results/compare-<stamp> [--json out.json]
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys

# (section, label, path in the assembled results, better: "low" or "high")
FIGURES = [
    ("warm300", "p50 (ms)", "warm_burst_300.p50_ms", "low"),
    ("warm300", "p90 (ms)", "warm_burst_300.p90_ms", "low"),
    ("warm300", "p99 (ms)", "warm_burst_300.p99_ms", "low"),
    ("warm300", "all Ready (ms)", "warm_burst_300.all_ready_ms", "low"),
    ("warm300", "claims/s (overall)", "warm_burst_300.throughput.overall_per_s", "high"),
    ("warm300", "API writes per warm claim", "api.by_burst.300.writes_per_warm_claim", "low"),
    ("warm300", "API writes per claim, refill incl.",
     "api.by_burst.300.writes_per_claim_incl_refill", "low"),
    ("warm300", "API writes per pool member (fill)",
     "api.by_burst.300.fill_writes_per_member", "low"),
    ("warm300", "apiserver+etcd CPU per claim, refill incl. (ms)",
     "warm_burst_300.api_cpu_ms_per_claim_incl_refill", "low"),
    ("warm300", "apiserver+etcd CPU per pool member (ms)",
     "warm_burst_300.api_cpu_ms_per_member", "low"),
    ("warm300", "apiserver+etcd CPU per claim, whole run (ms)",
     "warm_burst_300.run.api_cpu_ms_per_object", "low"),
    ("warm300", "  of which the pool's fill (ms)",
     "warm_burst_300.run.api_cpu_ms_per_object_by_phase.fill", "low"),
    ("warm300", "  of which the burst and its refill (ms)",
     "warm_burst_300.run.api_cpu_ms_per_object_by_phase.burst_refill", "low"),
    ("warm300", "  of which the namespace's deletion (ms)",
     "warm_burst_300.run.api_cpu_ms_per_object_by_phase.ns_delete", "low"),
    ("warm300", "  of which the rest: start, set-up, waits (ms)",
     "warm_burst_300.run.api_cpu_ms_per_object_by_phase.rest", "low"),
    ("warm300", "controller CPU per claim, burst (ms)",
     "warm_burst_300.controller_cpu_ms_per_claim", "low"),
    ("warm300", "controller CPU per claim, whole run (ms)",
     "warm_burst_300.run.controller_cpu_ms_per_object", "low"),
    ("warm300", "controller peak RSS (MiB)", "warm_burst_300.run.controller_peak_rss_mib", "low"),
    ("claimprobe", "p50 (ms)", "claim_probe.p50_ms", "low"),
    ("claimprobe", "p90 (ms)", "claim_probe.p90_ms", "low"),
    ("claimprobe", "p99 (ms)", "claim_probe.p99_ms", "low"),
    ("sdkprobe", "Python SDK create(), early hand-out: p50 (ms)", "sdk_probe.early_handout.p50_ms", "low"),
    ("sdkprobe", "Python SDK create(), early hand-out: p99 (ms)", "sdk_probe.early_handout.p99_ms", "low"),
    ("sdkprobe", "Python SDK create(), claim's Ready: p50 (ms)", "sdk_probe.claim_ready.p50_ms", "low"),
    ("sdkprobe", "Python SDK create(), claim's Ready: p99 (ms)", "sdk_probe.claim_ready.p99_ms", "low"),
    ("sdkprobego", "Go SDK create(), early hand-out: p50 (ms)", "sdk_probe_go.early_handout.p50_ms", "low"),
    ("sdkprobego", "Go SDK create(), early hand-out: p99 (ms)", "sdk_probe_go.early_handout.p99_ms", "low"),
    ("sdkprobego", "Go SDK create(), claim's Ready: p50 (ms)", "sdk_probe_go.claim_ready.p50_ms", "low"),
    ("sdkprobego", "Go SDK create(), claim's Ready: p99 (ms)", "sdk_probe_go.claim_ready.p99_ms", "low"),
    ("sdkburst", "Python SDK, claims at once on one async client: p50 (ms)", "sdk_burst.p50_ms", "low"),
    ("sdkburst", "Python SDK, claims at once on one async client: p99 (ms)", "sdk_burst.p99_ms", "low"),
    ("sdkburst", "apiserver+etcd CPU per claim, bursts (ms)", "sdk_burst.api_cpu_ms_per_claim", "low"),
    ("sdkburst", "the SDK's own CPU per claim, bursts (ms)", "sdk_burst.client_cpu_ms_per_claim", "low"),
    ("probe", "p50 (ms)", "probe.p50_ms", "low"),
    ("probe", "p90 (ms)", "probe.p90_ms", "low"),
    ("probe", "p99 (ms)", "probe.p99_ms", "low"),
    ("probe", "API writes per Sandbox", "probe.writes_per_sandbox", "low"),
    ("probe", "apiserver+etcd CPU per Sandbox (ms)", "probe.api_cpu_ms_per_sandbox", "low"),
    ("probe", "controller CPU per Sandbox, whole run (ms)",
     "probe.run.controller_cpu_ms_per_object", "low"),
    ("cold", "p50 (ms)", "cold.p50_ms", "low"),
    ("cold", "p99 (ms)", "cold.p99_ms", "low"),
    ("cold", "Sandboxes/s", "cold.per_s", "high"),
    ("cold", "API writes per Sandbox", "cold.writes_per_sandbox", "low"),
    ("cold", "apiserver+etcd CPU per Sandbox (ms)", "cold.api_cpu_ms_per_sandbox", "low"),
    ("cold", "apiserver+etcd CPU per Sandbox, whole run (ms)",
     "cold.run.api_cpu_ms_per_object", "low"),
    ("sustained", "offered claims/s", "sustained_low.rate_per_s", "high"),
    ("sustained", "served claims/s", "sustained_low.served_per_s", "high"),
    ("sustained", "p50 (ms)", "sustained_low.p50_ms", "low"),
    ("sustained", "p99 (ms)", "sustained_low.p99_ms", "low"),
    ("sustained", "apiserver+etcd CPU per claim (ms)", "sustained_low.api_cpu_ms_per_claim",
     "low"),
    ("sweep", "highest claims/s held with p99 <= 1 s", "sweep.held_rate_per_s", "high"),
    ("sweep", "the sweep's first rate (claims/s)", "sweep.first_rate.rate_per_s", None),
    ("sweep", "  p50 (ms)", "sweep.first_rate.p50_ms", "low"),
    ("sweep", "  p99 (ms)", "sweep.first_rate.p99_ms", "low"),
    ("sweep", "  apiserver+etcd CPU per claim (ms)", "sweep.first_rate.api_cpu_ms_per_claim",
     "low"),
    ("sweep", "  API writes per claim (all clients, release incl.)",
     "sweep.first_rate.writes_per_claim", "low"),
    ("sweep", "  deleted claims' Sandboxes still there at its end",
     "sweep.first_rate_released.sandboxes_left", "low"),
    ("sweep", "    of which claims deleted 10 s or more before",
     "sweep.first_rate_released.sandboxes_left_10s", "low"),
    ("sweep", "  Pods whose Sandbox was gone", "sweep.first_rate_released.pods_left", "low"),
    ("scale", "Sandboxes", "scale_10k.count", None),
    ("scale", "controller RSS at the end (MiB)", "scale_10k.controller_rss_mib", "low"),
    ("scale", "controller peak RSS (MiB)", "scale_10k.run.controller_peak_rss_mib", "low"),
    ("scale", "controller CPU (s)", "scale_10k.controller_cpu_s", "low"),
    ("scale", "controller RSS idle (MiB)", "scale_10k.memory.rss_idle_mib", "low"),
    ("scale", "restarted on the same objects: sync (s)", "scale_10k.memory.restart_sync_s", "low"),
    ("scale", "restarted: controller CPU to sync (s)", "scale_10k.memory.restart_cpu_s", "low"),
    ("scale", "restarted: API writes while syncing", "scale_10k.memory.restart_api_writes", "low"),
    ("scale", "restarted: RSS once synced (MiB)", "scale_10k.memory.restart_rss_synced_mib", "low"),
    ("scale", "restarted: RSS idle (MiB)", "scale_10k.memory.restart_rss_idle_mib", "low"),
    ("scale", "restarted: peak RSS (MiB)", "scale_10k.memory.restart_peak_rss_mib", "low"),
    ("scale", "converged (s)", "scale_10k.converge_s", "low"),
    ("scale", "apiserver+etcd CPU per Sandbox, whole run (ms)",
     "scale_10k.run.api_cpu_ms_per_object", "low"),
]


def get(d, path):
    for part in path.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d if isinstance(d, (int, float)) and not isinstance(d, bool) else None


def rounds(directory, leg):
    files = sorted(glob.glob(os.path.join(directory, f"{leg}-*.json")),
                   key=lambda p: int(re.search(r"-(\d+)\.json$", p).group(1)))
    out = []
    for p in files:
        try:
            with open(p) as f:
                out.append(json.load(f))
        except (OSError, ValueError) as e:
            print(f"compare: skipping {p}: {e}", file=sys.stderr)
    return out


def fmt(v):
    if v is None:
        return "–"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"


def table(directory):
    ours, up = rounds(directory, "ours"), rounds(directory, "upstream")
    if not ours or not up:
        raise SystemExit(f"compare: {directory} needs ours-N.json and upstream-N.json")
    rows, data = [], []
    section = None
    for sec, label, path, better in FIGURES:
        o = [get(r, path) for r in ours]
        u = [get(r, path) for r in up]
        ov, uv = [x for x in o if x is not None], [x for x in u if x is not None]
        if not ov and not uv:
            continue
        om = statistics.mean(ov) if ov else None
        um = statistics.mean(uv) if uv else None
        ratio = None
        if om and um and better:
            ratio = um / om if better == "low" else om / um
        if sec != section:
            rows.append(f"| **{sec}** | | | |")
            section = sec
        rows.append(f"| {label} | {' / '.join(fmt(x) for x in o)} | "
                    f"{' / '.join(fmt(x) for x in u)} | "
                    f"{'–' if ratio is None else f'{ratio:.2f}×'} |")
        data.append({"section": sec, "figure": label, "path": path, "ours": o,
                     "upstream": u, "ours_mean": om, "upstream_mean": um, "ratio": ratio})
    load = [(r.get("machine") or {}).get("loadavg_start") for r in ours + up]
    head = ["| figure | ours (rounds) | upstream (rounds) | ours better by |",
            "|---|---:|---:|---:|"]
    notes = [f"Rounds: {len(ours)} of ours, {len(up)} of upstream's, alternating. "
             f"Load (1 min) at each leg's start: "
             + ", ".join(fmt(x[0]) if x else "?" for x in load) + "."]
    return "\n".join(head + rows) + "\n\n" + "\n".join(notes) + "\n", data


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--json")
    a = ap.parse_args()
    md, data = table(a.dir)
    sys.stdout.write(md)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(data, f, indent=1)


if __name__ == "__main__":
    main()
