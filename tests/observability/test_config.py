#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""config/observability: the PrometheusRule and the Grafana dashboard parse, and every
metric they query is one the controller or the router exposes (a name registered in
src/, with a histogram's _bucket/_sum/_count suffix, or a standard family).

  python3 -m unittest -v tests/observability/test_config.py
"""
import glob
import json
import os
import re
import unittest

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CFG = os.path.join(ROOT, "config/observability")
STANDARD = {"up"}  # Prometheus' own
FUNCS = {"sum", "rate", "by", "histogram_quantile", "absent", "le", "launch_type", "code",
         "controller", "result", "name", "namespace", "pool", "reason", "decision", "job",
         "ready_condition", "without", "increase", "max", "min", "avg"}


def exposed():
    names = set()
    for path in glob.glob(os.path.join(ROOT, "src/**/*.c"), recursive=True):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in re.finditer(r'metrics_(counter|gauge|histogram)\(\s*[\w>.-]+,\s*"(\w+)"',
                             text):
            names.add(m.group(2))
            if m.group(1) == "histogram":
                names |= {m.group(2) + s for s in ("_bucket", "_sum", "_count")}
        names |= set(re.findall(r'metrics_write_header\(\s*\w+,\s*"(\w+)"', text))
    return names


def queried(expr):
    expr = re.sub(r'"[^"]*"', '""', expr)  # label values
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    return {w for w in re.findall(r"[a-zA-Z_][a-zA-Z0-9_]*", expr)
            if w not in FUNCS and not w.startswith("$")}


class ObservabilityConfig(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.names = exposed() | STANDARD
        assert "agent_sandbox_claim_creation_total" in cls.names  # the scan works

    def check(self, where, expr):
        unknown = queried(expr) - self.names
        self.assertFalse(unknown, f"{where}: {expr!r} queries unknown {sorted(unknown)}")

    def test_rules(self):
        with open(os.path.join(CFG, "prometheus-rule.yaml")) as f:
            rule = yaml.safe_load(f)
        self.assertEqual(rule["kind"], "PrometheusRule")
        alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
        for want in ("AgentSandboxControllerDown", "AgentSandboxReconcileErrors",
                     "AgentSandboxClaimStartupLatencyHigh", "SandboxRouterHigh5xxRate"):
            self.assertIn(want, alerts)
        for name, r in alerts.items():
            self.assertIn(r["labels"]["severity"], ("warning", "critical"), name)
            self.assertTrue(r["annotations"]["summary"], name)
            self.check(name, r["expr"])

    def test_dashboard(self):
        with open(os.path.join(CFG, "agent-sandbox-dashboard.json")) as f:
            dash = json.load(f)
        self.assertEqual(dash["uid"], "agent-sandbox")
        ids = [p["id"] for p in dash["panels"]]
        self.assertEqual(len(ids), len(set(ids)))
        self.assertGreaterEqual(len(ids), 10)
        for p in dash["panels"]:
            self.assertTrue(p["targets"], p["title"])
            for t in p["targets"]:
                self.check(p["title"], t["expr"])

    def test_secure_metrics_rbac(self):
        with open(os.path.join(CFG, "secure-metrics-rbac.yaml")) as f:
            docs = {d["metadata"]["name"] + "/" + d["kind"]: d for d in yaml.safe_load_all(f)}
        auth = docs["agent-sandbox-metrics-auth/ClusterRole"]["rules"]
        self.assertEqual({r["resources"][0] for r in auth},
                         {"tokenreviews", "subjectaccessreviews"})
        reader = docs["agent-sandbox-metrics-reader/ClusterRole"]["rules"][0]
        self.assertEqual((reader["nonResourceURLs"], reader["verbs"]), (["/metrics"], ["get"]))

    def test_kustomization_lists_files(self):
        with open(os.path.join(CFG, "kustomization.yaml")) as f:
            k = yaml.safe_load(f)
        files = set(k["resources"])
        for g in k.get("configMapGenerator", []):
            files |= set(g["files"])
        self.assertEqual(files, {"prometheus-rule.yaml", "secure-metrics-rbac.yaml",
                                 "agent-sandbox-dashboard.json"})


if __name__ == "__main__":
    unittest.main()
