#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Assembles one benchmark run (the per-scenario JSON files of bench/run.sh) into
bench/results/<timestamp>.json, and checks a smoke run (--check)."""
import argparse
import json
import os
import platform
import re
import subprocess
import sys


def run_phases(raw, run):
    """A whole run's API server + etcd CPU per object split into its phases, from the load
    generator's samples: the pool's fill, the burst with its refill, the namespace's
    deletion, and the rest (controller start and sync, the scenario's set-up, the settle
    waits, /metrics scrapes). None unless the scenario measured all three."""
    api, n = raw.get("api") or {}, raw.get("count")
    parts = {"fill": (api.get("fill_cpu") or {}).get("s"),
             "burst_refill": (api.get("burst_cpu") or {}).get("s"),
             "ns_delete": (raw.get("ns_delete_cpu") or {}).get("s")}
    if not n or any(v is None for v in parts.values()):
        return None
    parts["rest"] = run["api_cpu_s"] - sum(parts.values())
    return {k: round(v / n * 1000, 1) for k, v in parts.items()}


def load(d, name):
    p = os.path.join(d, name)
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def pick(d, *keys):
    return {k: d.get(k) for k in keys} if d else None


def router(d):
    try:
        text = open(os.path.join(d, "router.md")).read()
    except OSError:
        return None
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) >= 4 and re.match(r"^[0-9.]+$", cells[1] or "x"):
            rows[cells[0]] = {"rps": float(cells[1]), "p50": cells[2], "p99": cells[3]}
    def row(prefix, avoid="access log"):
        for name, r in rows.items():
            if name.startswith(prefix) and avoid not in name:
                return r
        return None

    direct = row("direct")
    via = row("router --auth=none")
    if not direct or not via:
        return {"table": text}

    def ms(s):
        m = re.match(r"([0-9.]+)(us|ms|s)", s)
        return float(m.group(1)) * {"us": 1e-3, "ms": 1, "s": 1e3}[m.group(2)] if m else None

    added = None
    if ms(via["p50"]) is not None and ms(direct["p50"]) is not None:
        added = round(ms(via["p50"]) - ms(direct["p50"]), 3)
    return {"direct_rps": direct["rps"], "router_rps": via["rps"], "added_p50_ms": added,
            "router_vs_direct": round(via["rps"] / direct["rps"], 3) if direct["rps"] else None,
            "rows": rows}


def sandboxd(d):
    s = load(d, "sandboxd.json")
    if not s:
        return None
    rt = s.get("run_true", {})
    g = s.get("grpc_execute_true", {})
    return {"true_p50_ms": rt.get("p50_ms"), "true_p99_ms": rt.get("p99_ms"),
            "grpc_true_p50_ms": g.get("p50_ms"), "grpc_true_p99_ms": g.get("p99_ms"),
            "files": s.get("files"), "raw": s}


def machine():
    def cmd(*a):
        try:
            return subprocess.run(a, capture_output=True, text=True, timeout=10).stdout.strip()
        except OSError:
            return None
    cpu = None
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        mem = int(open("/proc/meminfo").readline().split()[1]) // 1024
    except (OSError, ValueError):
        pass
    return {"cpus": os.cpu_count(), "cpu_model": cpu, "mem_mib": mem,
            "kernel": platform.release(), "loadavg_start": os.getloadavg(),
            "hostname": platform.node()}, {
        "git": cmd("git", "describe", "--always", "--dirty"),
        "kube_apiserver": cmd(".cache/bin/kube-apiserver", "--version"),
        "cc": (cmd("cc", "--version") or "").splitlines()[0:1]}


def assemble(a):
    d = a.dir
    res = {"timestamp": os.path.basename(d), "target": a.target, "smoke": a.smoke == "1"}
    res["machine"], res["versions"] = machine()
    res["flags"] = {"build": a.build, "controller": "--sandbox-claim-concurrent-workers 300 "
                    "--sandbox-warm-pool-concurrent-workers 4" if a.target == "apiserver"
                    else "the stack's"}
    w3, w1 = load(d, "warm_burst_300.json"), load(d, "warm_burst_1000.json")
    keys = ("count", "ready", "warm", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms",
            "all_ready_ms", "create_span_ms", "throughput", "samples_ms", "ready_per_s",
            "loadavg_start", "loadavg_end", "ok")
    res["warm_burst_300"] = pick(w3, *keys)
    res["warm_burst_1000"] = pick(w1, *keys)
    for name in ("sustained", "sustained_low"):
        s = load(d, name + ".json")
        res[name] = pick(s, "rate_per_s", "offered_per_s", "planned", "count", "ready", "p50_ms",
                         "p90_ms", "p99_ms", "max_ms", "throughput", "ready_per_s", "samples_ms",
                         "saturated", "saturated_after_s", "max_backlog", "arrival_lag_max_ms",
                         "create_span_ms", "released", "loadavg_start", "loadavg_end", "ok")
        if res[name]:
            res[name]["served_per_s"] = (s.get("throughput") or {}).get("overall_per_s")
            span = (s.get("create_span_ms") or 0) / 1000
            res[name]["issued_per_s"] = round(s["count"] / span, 1) if span > 0 else None
    for name in ("cold", "probe"):
        c = load(d, name + ".json")
        if c:
            res[name] = pick(c, "count", "ready", "p50_ms", "p90_ms", "p99_ms", "max_ms",
                             "samples_ms", "loadavg_start", "loadavg_end", "ok")
            res[name]["per_s"] = c.get("throughput", {}).get("overall_per_s")
            api = c.get("api") or {}
            res[name]["writes_per_sandbox"] = api.get("writes_per_sandbox")
            res[name]["api_cpu_ms_per_sandbox"] = (api.get("cpu") or {}).get("per_sandbox_ms")
    cp = load(d, "claim_probe.json")
    if cp:
        res["claim_probe"] = pick(cp, "count", "ready", "warm", "min_ms", "p50_ms", "p90_ms",
                                  "p99_ms", "max_ms", "samples_ms", "loadavg_start",
                                  "loadavg_end", "ok")
        res["claim_probe"]["api_cpu_ms_per_claim_incl_refill"] = (
            ((cp.get("api") or {}).get("probe_cpu") or {}).get("per_claim_incl_refill_ms"))
    for key in ("sdk_probe", "sdk_probe_go"):  # the same probe through the Python and Go SDKs
        sp = load(d, key + ".json")
        if not sp:
            continue
        res[key] = pick(sp, "early_handout", "claim_ready", "ok", "errors")
        run = load(d, key + ".run.json")
        n = sum((sp.get(m) or {}).get("n") or 0 for m in ("early_handout", "claim_ready"))
        if run and n:
            run["api_cpu_ms_per_object"] = round(run["api_cpu_s"] / n * 1000, 1)
            res[key]["run"] = run
    sb = load(d, "sdk_burst.json")
    if sb:
        res["sdk_burst"] = pick(sb, "count", "n", "rounds", "p50_ms", "p90_ms", "p99_ms", "max_ms",
                                "mean_ms", "api_cpu_ms_per_claim", "client_cpu_ms_per_claim", "ok", "errors")
        run = load(d, "sdk_burst.run.json")
        if run and sb.get("n"):
            run["api_cpu_ms_per_object"] = round(run["api_cpu_s"] / sb["n"] * 1000, 1)
            res["sdk_burst"]["run"] = run
    sc = load(d, "scale_10k.json")
    res["scale_10k"] = pick(sc, "count", "ready", "controller_rss_mib", "controller_cpu_s",
                            "converge_s", "p50_ms", "p99_ms", "rss_series", "loadavg_start",
                            "loadavg_end", "ok")
    mem = load(d, "scale_10k.memory.json")  # idle, then restarted on the same objects
    if res["scale_10k"] is not None and mem:
        res["scale_10k"]["memory"] = mem
    # apiserver_request_total has no namespace label: anything else the API server serves
    # during a run counts too. The 1,000 burst dilutes that most, so it is preferred.
    api_keys = ("writes_per_warm_claim", "requests_per_warm_claim", "writes_per_claim_incl_refill",
                "fill_writes_per_member", "burst_delta")
    by = {n: pick((w or {}).get("api"), *api_keys) for n, w in (("300", w3), ("1000", w1))
          if (w or {}).get("api")}
    res["api"] = dict(by.get("1000") or by.get("300") or {}) or None
    if res["api"]:
        res["api"]["burst"] = "1000" if "1000" in by else "300"
        res["api"]["by_burst"] = {n: {k: v for k, v in a.items() if k != "burst_delta"}
                                  for n, a in by.items()}
    for name, key in (("warm_burst_300", "warm_burst_300"), ("warm_burst_1000", "warm_burst_1000"),
                      ("sustained", "sustained"), ("sustained_low", "sustained_low"),
                      ("cold", "cold"), ("probe", "probe"), ("claim_probe", "claim_probe"),
                      ("scale_10k", "scale_10k")):
        raw = load(d, name + ".json") or {}
        if not res.get(key):
            continue
        api = raw.get("api") or {}
        if name.startswith("warm"):
            res[key]["api_cpu_ms_per_warm_claim"] = api.get("cpu_ms_per_warm_claim")
            res[key]["api_cpu_ms_per_claim_incl_refill"] = (api.get("burst_cpu") or {}).get(
                "per_claim_incl_refill_ms")
            res[key]["api_cpu_ms_per_member"] = (api.get("fill_cpu") or {}).get("per_member_ms")
            cb, ca = raw.get("controller_before") or {}, raw.get("controller_after") or {}
            if "cpu_s" in cb and "cpu_s" in ca and raw.get("count"):
                res[key]["controller_cpu_ms_per_claim"] = round(
                    (ca["cpu_s"] - cb["cpu_s"]) / raw["count"] * 1000, 2)
                res[key]["controller_rss_mib"] = ca.get("rss_mib")
        elif name.startswith("sustained"):
            res[key]["api_cpu_ms_per_claim"] = (raw.get("api_cpu") or {}).get("per_claim_ms")
        run = load(d, name + ".run.json")
        mem = load(d, name + ".memory.json") or {}
        if run and "ns_delete_api_cpu_s" in mem:  # scale: deleted after the restart, added back
            run["api_cpu_s"] = round(run["api_cpu_s"] + mem["ns_delete_api_cpu_s"], 2)
        if run and raw.get("count"):
            # the whole run (fill, burst, refill, cleanup) divided by N, as the issue measures
            run["api_cpu_ms_per_object"] = round(run["api_cpu_s"] / raw["count"] * 1000, 1)
            run["controller_cpu_ms_per_object"] = round(
                run["controller_cpu_s"] / raw["count"] * 1000, 1)
            res[key]["run"] = run
            phases = run_phases(raw, run)
            if phases:
                res[key]["run"]["api_cpu_ms_per_object_by_phase"] = phases
    sweep = []
    for p in sorted(os.listdir(d)):
        m = re.match(r"sweep_(\d+)\.json$", p)
        s = load(d, p) if m else None
        if s:
            held = bool(s.get("ok")) and not s.get("saturated") and (s.get("p99_ms") or 1e9) <= 1000
            sweep.append({"rate_per_s": float(m.group(1)), "p50_ms": s.get("p50_ms"),
                          "p99_ms": s.get("p99_ms"), "count": s.get("count"),
                          "served_per_s": (s.get("throughput") or {}).get("overall_per_s"),
                          "saturated": s.get("saturated"), "held": held,
                          "api_cpu_ms_per_claim": (s.get("api_cpu") or {}).get("per_claim_ms"),
                          "writes_per_claim": s.get("writes_per_claim"),
                          "released": s.get("released"),
                          "loadavg_start": s.get("loadavg_start")})
    if sweep:
        sweep.sort(key=lambda x: x["rate_per_s"])
        held = [x["rate_per_s"] for x in sweep if x["held"]]
        res["sweep"] = {"rates": sweep, "held_rate_per_s": max(held) if held else 0}
        # what the deleted claims left at the end of the sweep's first rate (the one both
        # legs of a comparison run): Sandboxes not being deleted, those of them whose claim
        # went 10 s or more before, and Pods whose Sandbox is gone
        # the sweep's first rate is the one rate both legs of a comparison surely ran (the
        # sweep stops at the first rate missed): what one claim costs there
        res["sweep"]["first_rate"] = {k: sweep[0].get(k) for k in (
            "rate_per_s", "p50_ms", "p99_ms", "api_cpu_ms_per_claim", "writes_per_claim")}
        if sweep[0].get("released"):
            res["sweep"]["first_rate_released"] = dict(sweep[0]["released"],
                                                       rate_per_s=sweep[0]["rate_per_s"])
    res["router"] = router(d)
    res["sandboxd"] = sandboxd(d)
    # assembled at the end: the run's start load is its first scenario's (a sweep's lowest
    # rate when the sweep ran alone; else this process's, at the end of the run)
    starts = [(res.get(k) or {}).get("loadavg_start") for k in (
        "warm_burst_300", "warm_burst_1000", "sustained", "sustained_low", "cold", "probe",
        "scale_10k")] + [x.get("loadavg_start") for x in sweep]
    starts = [x for x in starts if x]
    if starts:
        res["machine"]["loadavg_start"] = starts[0]
    res["machine"]["loadavg_end"] = os.getloadavg()
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)


def check(path):
    r = json.load(open(path))
    checks = []

    def ok(name, cond):
        checks.append((name, bool(cond)))
        print(f"{'PASS' if cond else 'FAIL'} {name}")

    for k in ("warm_burst_300", "sustained", "cold", "probe", "claim_probe", "scale_10k"):
        s = r.get(k) or {}
        ok(f"{k}: every object Ready ({s.get('ready')}/{s.get('count')})",
           s.get("ok") and s.get("count") and s.get("ready") == s.get("count"))
    rel = (r.get("sustained") or {}).get("released") or {}
    ok(f"sustained: what deleted claims left counted ({rel.get('deleted_claims')} deleted, "
       f"{rel.get('sandboxes_left')} Sandboxes, {rel.get('pods_left')} Pods left)",
       (rel.get("deleted_claims") or 0) > 0 and rel.get("sandboxes_left") is not None
       and rel.get("pods_left") is not None)
    w = r.get("warm_burst_300") or {}
    ok(f"warm_burst_300: claims served warm ({w.get('warm')})", (w.get("warm") or 0) >= (w.get("count") or 1) * 0.9)
    cp = r.get("claim_probe") or {}
    ok(f"claim_probe: claims served warm ({cp.get('warm')}/{cp.get('count')})",
       (cp.get("warm") or 0) == (cp.get("count") or -1))
    sp = r.get("sdk_probe") or {}
    ok(f"sdk_probe: every SDK claim handed out and checked ({(sp.get('early_handout') or {}).get('n')}"
       f" + {(sp.get('claim_ready') or {}).get('n')}; {'; '.join(sp.get('errors') or []) or 'no errors'})",
       sp.get("ok"))
    spg = r.get("sdk_probe_go") or {}
    ok(f"sdk_probe_go: every Go SDK claim handed out and checked ({(spg.get('early_handout') or {}).get('n')}"
       f" + {(spg.get('claim_ready') or {}).get('n')}; {'; '.join(spg.get('errors') or []) or 'no errors'})",
       spg.get("ok"))
    sb = r.get("sdk_burst") or {}
    ok(f"sdk_burst: every claim of the bursts handed out and checked ({sb.get('n')}/"
       f"{(sb.get('count') or 0) * len(sb.get('rounds') or [])}; "
       f"{'; '.join(sb.get('errors') or []) or 'no errors'})", sb.get("ok"))
    api = r.get("api") or {}
    wpc = api.get("writes_per_warm_claim")
    ok(f"api: writes per warm claim measured ({wpc})", wpc is not None and wpc > 0)
    if r.get("target") == "apiserver":
        cpu = (r.get("warm_burst_300") or {}).get("api_cpu_ms_per_claim_incl_refill")
        ok(f"warm_burst_300: API server CPU per claim measured ({cpu} ms)", (cpu or 0) > 0)
        pr = r.get("probe") or {}
        ok(f"probe: writes and API CPU per Sandbox measured ({pr.get('writes_per_sandbox')}, "
           f"{pr.get('api_cpu_ms_per_sandbox')} ms)",
           (pr.get("writes_per_sandbox") or 0) > 0 and (pr.get("api_cpu_ms_per_sandbox") or 0) > 0)
    sc = r.get("scale_10k") or {}
    ok(f"scale: controller RSS sampled ({sc.get('controller_rss_mib')} MiB)",
       r.get("target") != "apiserver" or (sc.get("controller_rss_mib") or 0) > 0)
    mem = sc.get("memory") or {}
    ok(f"scale: RSS idle and after a restart on the same objects ({mem.get('rss_idle_mib')}, "
       f"{mem.get('restart_rss_synced_mib')} MiB; synced in {mem.get('restart_sync_s')} s)",
       r.get("target") != "apiserver" or
       ((mem.get("rss_idle_mib") or 0) > 0 and (mem.get("restart_rss_synced_mib") or 0) > 0))
    p, f = sum(c for _, c in checks), sum(not c for _, c in checks)
    print(f"{p} passed, {f} failed")
    return 0 if f == 0 else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir")
    ap.add_argument("--target", default="apiserver")
    ap.add_argument("--smoke", default="0")
    ap.add_argument("--build", default="")
    ap.add_argument("--out")
    ap.add_argument("--check")
    a = ap.parse_args()
    if a.check:
        sys.exit(check(a.check))
    assemble(a)


if __name__ == "__main__":
    main()
