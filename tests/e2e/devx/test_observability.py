# SPDX-License-Identifier: Apache-2.0
"""Cluster e2e: the installed controller's /metrics (read through the API server's
service proxy) has upstream's metric families with their types, and the Sandbox the
`sandbox` fixture made shows up in agent_sandboxes.

Uses the `sandbox` fixture of tests/e2e/devx/conftest.py (a Ready agent_sandbox_sdk.Sandbox)
only so that a Sandbox exists; the assertions are on the controller's exposition and
hold in every connection mode.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[3]
KUBECTL = os.environ.get("KUBECTL", str(ROOT / ".cache/bin/kubectl"))
FIXTURE = ROOT / "tests/data/observability/upstream_metrics.txt"
METRICS = (
    "/api/v1/namespaces/agent-sandbox-system/services/"
    "agent-sandbox-controller:metrics/proxy/metrics"
)


def upstream_families() -> list[tuple[str, str, list[str]]]:
    out = []
    for line in FIXTURE.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, typ, labels = line.split()
        out.append((name, typ, [] if labels == "-" else labels.split(",")))
    return out


def controller_metrics() -> str:
    return subprocess.run(
        [KUBECTL, "get", "--raw", METRICS],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout


def test_controller_exposes_upstream_families(sandbox: Any) -> None:
    text = controller_metrics()
    for name, typ, _ in upstream_families():
        assert f"\n# TYPE {name} {typ}\n" in text, name


def test_agent_sandboxes_counts_the_sandbox(sandbox: Any) -> None:
    text = controller_metrics()
    samples = re.findall(r"^agent_sandboxes\{([^}]*)\} (\S+)$", text, re.MULTILINE)
    assert samples, "no agent_sandboxes sample"
    want = family_labels("agent_sandboxes")
    for labels, value in samples:
        names = [
            kv.split("=", 1)[0] for kv in re.findall(r'\w+="(?:[^"\\]|\\.)*"', labels)
        ]
        assert names == want, labels
        assert float(value) >= 1
    assert any('ready_condition="true"' in labels for labels, _ in samples)


def family_labels(family: str) -> list[str]:
    for name, _, labels in upstream_families():
        if name == family:
            return labels
    raise AssertionError(f"{family} is not in {FIXTURE}")
