"""The MCP server's answers and bounds against a misbehaving cluster or sandboxd: what a
failing credential plugin's error shows the model, deadlines of the calls, the memory
and text bounds of run_code and of errors, the TTL and timeout ceilings, a huge
directory's listing and the HTTP transport's Origin check."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

pytest.importorskip("mcp", reason="the mcp package is not installed (pip install 'agent-sandbox-sdk[mcp]')")

from mcp import Client

from agent_sandbox_sdk.mcp import Options, Tools, build_server


def exec_kubeconfig(tmp: Path, script: str, *args: str) -> Path:
    """A kubeconfig whose user runs ``sh -c script args...`` as its exec credential plugin."""
    sh = shutil.which("sh") or "/bin/sh"
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "ctx",
        "clusters": [{"name": "cl", "cluster": {"server": "https://10.0.0.1:6443", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"exec": {"command": sh, "args": ["-c", script, *args]}}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "cl", "user": "u", "namespace": "team"}}],
    }
    p = tmp / "kubeconfig"
    p.write_text(yaml.safe_dump(doc))
    return p


async def test_a_failing_exec_plugin_shows_the_model_no_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The tool error of a failed exec credential plugin says the cluster's credentials
    failed and where to look, without the plugin's arguments (its secrets) or what it
    printed; the detail goes to the server's log (without the arguments either)."""
    monkeypatch.delenv("AGENT_SANDBOX_ROUTER_URL", raising=False)
    cfg = exec_kubeconfig(tmp_path, "echo 'refresh failed for S3CRET-ISH' >&2; exit 1", "--secret=XYZ")
    tools = Tools(Options(kubeconfig=str(cfg), default_pool="p"))
    texts: list[str] = []
    async with Client(build_server(tools)) as c:
        for tool, args in (
            ("list_sandboxes", {}),
            ("create_sandbox", {}),
            ("run_command", {"sandbox": "x", "command": "id"}),
        ):
            res = await c.call_tool(tool, args)
            assert res.is_error, (tool, res.content)
            texts.append(res.content[0].text)  # type: ignore[union-attr]
    await tools.aclose()
    for t in texts:
        assert "XYZ" not in t and "S3CRET" not in t, t
        assert "ConfigError" in t and "log" in t, t
    assert "refresh failed" in caplog.text and "XYZ" not in caplog.text
