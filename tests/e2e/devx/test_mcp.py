"""The MCP server (agent-sandbox-mcp) on the cluster of `make up`, driven by the official
MCP client over stdio and streamable HTTP: claim from the warm pool through the tool,
commands, code, files, delete; and attaching to an existing sandbox in each connection
mode of the ``sandbox`` fixture."""

from __future__ import annotations

import base64
import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import agent_sandbox_sdk
import anyio
import httpx
import pytest
from agent_sandbox_sdk import DirectConnection, PodProxyConnection, RouterConnection

pytest.importorskip("mcp", reason="the mcp package is not installed (pip install 'agent-sandbox-sdk[mcp]')")

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp_types import ImageContent

# The MCP test helpers shared with the SDK's own tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "sdk" / "python" / "tests"))
import mcp_harness
from mcp_harness import data, http_session, server_command, text_of

POOL = os.environ.get("AGENT_SANDBOX_E2E_POOL", "python-pool")
SCI_TEMPLATE = os.environ.get("AGENT_SANDBOX_E2E_SCI_TEMPLATE", "python-sci")


def kubeconfig() -> str:
    kc = os.environ.get("AGENT_SANDBOX_KUBECONFIG") or os.environ.get("KUBECONFIG")
    if not kc:
        pytest.skip("no cluster: set AGENT_SANDBOX_KUBECONFIG")
    return kc.split(os.pathsep)[0]


def connection_args(conn: agent_sandbox_sdk.Connection, tmp: Path) -> list[str]:
    """The server's flags for an SDK connection config."""
    if isinstance(conn, RouterConnection):
        args = ["--connection", "router", "--router-url", conn.url]
        if conn.token:
            tok = tmp / f"router-token-{uuid.uuid4().hex[:6]}"
            tok.write_text(conn.token)
            args += ["--router-token-file", str(tok)]
        return args
    if isinstance(conn, PodProxyConnection):
        return ["--connection", "proxy"]
    if isinstance(conn, DirectConnection):
        return ["--connection", "direct"]
    return ["--connection", "auto"]


def server_args(client: agent_sandbox_sdk.SandboxClient, tmp: Path) -> list[str]:
    return [
        "--kubeconfig",
        kubeconfig(),
        "--namespace",
        client.namespace,
        *connection_args(client.connection, tmp),
        "--default-pool",
        POOL,
        "--cleanup",
        "--max-output-bytes",
        "8192",
    ]


async def claim_and_use(s: ClientSession, client: agent_sandbox_sdk.SandboxClient) -> None:
    """An agent's session: claim from the pool, command, code, files, bounded output, delete."""
    created = data(await s.call_tool("create_sandbox", {"pool": POOL}))
    name = created["sandbox"]
    assert created["claim"] and created["from"] == f"pool {POOL}"
    try:
        listed = data(await s.call_tool("list_sandboxes", {}))
        mine = [e for e in listed["sandboxes"] if e["name"] == name]
        assert mine and mine[0]["created_here"] and mine[0]["ready"]

        r = data(await s.call_tool("run_command", {"sandbox": name, "command": "echo hi; id -u"}))
        assert r["exit_code"] == 0 and r["stdout"].split() == ["hi", "1000"]
        r = data(await s.call_tool("run_command", {"sandbox": name, "command": "seq 1 2000000"}))
        assert r["stdout_truncated"] and "output truncated" in r["stdout"] and r["stdout"].endswith("2000000\n")

        code = await s.call_tool("run_code", {"sandbox": name, "code": "21*2"})
        assert data(code)["text"] == "42"

        d = f"mcp-e2e-{uuid.uuid4().hex[:8]}"
        data(await s.call_tool("write_file", {"sandbox": name, "path": f"{d}/a.txt", "content": "alpha\n"}))
        assert data(await s.call_tool("read_file", {"sandbox": name, "path": f"{d}/a.txt"}))["content"] == "alpha\n"
        entries = data(await s.call_tool("list_files", {"sandbox": name, "path": d}))["entries"]
        assert [e["name"] for e in entries] == ["a.txt"]
        missing = await s.call_tool("read_file", {"sandbox": name, "path": f"{d}/nope"})
        assert missing.is_error and "NotFound" in text_of(missing)
    finally:
        gone = data(await s.call_tool("delete_sandbox", {"sandbox": name}))
    assert gone["claim"] == created["claim"]
    deadline = time.monotonic() + 90
    while name in [i.name for i in client.list()]:
        assert time.monotonic() < deadline, f"sandbox {name} still there after delete_sandbox"
        time.sleep(1)


def test_mcp_stdio_claim_session(sandbox_client: agent_sandbox_sdk.SandboxClient, tmp_path: Path) -> None:
    cmd = server_command()
    params = StdioServerParameters(
        command=cmd[0], args=[*cmd[1:], *server_args(sandbox_client, tmp_path)], env={**os.environ}
    )

    async def go() -> None:
        async with stdio_client(params) as (rd, wr), ClientSession(rd, wr) as s:
            await s.initialize()
            await claim_and_use(s, sandbox_client)

    anyio.run(go)


@pytest.fixture
def http_server(sandbox_client: agent_sandbox_sdk.SandboxClient, tmp_path: Path) -> Iterator[tuple[str, str]]:
    with mcp_harness.http_server(server_args(sandbox_client, tmp_path), tmp_path, 30, 60) as server:
        yield server


def test_mcp_http_claim_session(sandbox_client: agent_sandbox_sdk.SandboxClient, http_server: tuple[str, str]) -> None:
    url, token = http_server
    assert httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).status_code == 401

    async def go() -> None:
        async with http_session(url, token, timeout=300) as s:
            await claim_and_use(s, sandbox_client)

    anyio.run(go)


def test_mcp_attach_existing(sandbox: agent_sandbox_sdk.Sandbox, tmp_path: Path) -> None:
    """A sandbox made elsewhere, reached in the fixture's connection mode by name."""
    path = f"mcp-attach-{uuid.uuid4().hex[:8]}.txt"
    sandbox.files.write(path, b"from the SDK\n")
    cmd = server_command()
    args = [
        "--kubeconfig",
        kubeconfig(),
        "--namespace",
        sandbox.namespace,
        *connection_args(sandbox.client.connection, tmp_path),
        "--no-create",
        "--no-delete",
    ]
    params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], *args], env={**os.environ})

    async def go() -> None:
        async with stdio_client(params) as (rd, wr), ClientSession(rd, wr) as s:
            await s.initialize()
            f = data(await s.call_tool("read_file", {"sandbox": sandbox.name, "path": path}))
            assert f["content"] == "from the SDK\n"
            r = data(await s.call_tool("run_command", {"sandbox": sandbox.name, "command": ["cat", path]}))
            assert r["stdout"] == "from the SDK\n"
            refused = await s.call_tool("delete_sandbox", {"sandbox": sandbox.name})
            assert refused.is_error and "--no-delete" in text_of(refused)

    anyio.run(go)
    assert sandbox.files.exists(path)
    sandbox.files.delete(path)


def test_mcp_sci_plot_is_an_image(sandbox_client: agent_sandbox_sdk.SandboxClient, tmp_path: Path) -> None:
    """A fresh sandbox from the python-sci template; a matplotlib plot made with run_code
    comes back to the model as an MCP image."""
    if not hasattr(agent_sandbox_sdk.AsyncSandbox, "run_code"):
        pytest.skip("this agent_sandbox_sdk has no run_code")
    cmd = server_command()
    params = StdioServerParameters(
        command=cmd[0], args=[*cmd[1:], *server_args(sandbox_client, tmp_path)], env={**os.environ}
    )

    async def go() -> None:
        async with stdio_client(params) as (rd, wr), ClientSession(rd, wr) as s:
            await s.initialize()
            name = data(await s.call_tool("create_sandbox", {"template": SCI_TEMPLATE}))["sandbox"]
            try:
                code = (
                    "import numpy as np, matplotlib.pyplot as plt\nplt.plot(np.arange(5) ** 2)\nint(np.arange(5).sum())"
                )
                res = await s.call_tool("run_code", {"sandbox": name, "code": code, "timeout_seconds": 120})
                out = data(res)
                assert out["text"] == "10" and out["error"] is None
                images = [c for c in res.content if isinstance(c, ImageContent)]
                assert images and images[0].mime_type == "image/png"
                assert base64.b64decode(images[0].data).startswith(b"\x89PNG\r\n\x1a\n")
            finally:
                data(await s.call_tool("delete_sandbox", {"sandbox": name}))

    anyio.run(go)
