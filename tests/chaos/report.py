#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Renders the JSON lines of a chaos run (.cache/chaos/report.jsonl) as a markdown table
and the totals that docs/reliability.md quotes.

  python3 tests/chaos/report.py [.cache/chaos/report.jsonl]
"""
import json
import sys

path = sys.argv[1] if len(sys.argv) > 1 else ".cache/chaos/report.jsonl"
with open(path) as f:
    rows = [json.loads(line) for line in f if line.strip()]
cols = ["scenario", "seconds", "claims", "ready", "failed", "lost", "pool", "replicas",
        "over_created", "double_bound", "orphans", "controller_kills", "crashes"]
print("| " + " | ".join(cols) + " |")
print("|" + "---|" * len(cols))
for r in rows:
    if "claims" in r:
        print("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
for r in rows:
    if r["scenario"] == "leader-handover-gap":
        print(f"\nworst claim latency across a hand-over: {r['sigterm_s']} s (SIGTERM), "
              f"{r['sigkill_s']} s (SIGKILL)")
released = 0
for r in rows:
    if r["scenario"] == "claim-release-kept":
        released += r["released"]
        print(f"\nclaims released through kills: {r['released']} ({r['orphan']} with "
              f"propagationPolicy=Orphan): their Sandboxes kept {r['kept_sandboxes']}/"
              f"{r['orphan']}, their Pods kept {r['kept_pods']}/{r['orphan']}")
audits = [r for r in rows if "claims" in r]
if audits:
    last = audits[-1]
    # Released claims are gone from the last audit's count; the total counts them.
    print(f"\ntotals: {len(audits)} audits, {last['claims'] + released} claims, "
          f"{last['controller_kills']} controller SIGKILLs, "
          f"lost {sum(r['lost'] for r in audits)}, "
          f"over-created {sum(r['over_created'] for r in audits)}, "
          f"double-bound {sum(r['double_bound'] for r in audits)}, "
          f"orphans {sum(r['orphans'] for r in audits)}, crashes {last['crashes']}")
