"""The MCP server (agent-sandbox-mcp) driven by the official MCP client over stdio and
streamable HTTP, against a real sandboxd binary (the server pinned to its URL with
--sandboxd-url): a whole tool session, bounded output, tool errors, bearer auth."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

mcp = pytest.importorskip("mcp", reason="the mcp package is not installed (pip install 'agent-sandbox-sdk[mcp]')")

from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

from agent_sandbox_sdk.aio import AsyncSandbox  # noqa: E402
from tests import mcp_harness  # noqa: E402
from tests.mcp_harness import data, http_session, server_command, text_of  # noqa: E402

pytestmark = pytest.mark.integration

LIMIT = 4096
TOOLS = {
    "create_sandbox",
    "list_sandboxes",
    "delete_sandbox",
    "run_command",
    "run_code",
    "read_file",
    "write_file",
    "list_files",
}


async def session_walkthrough(s: ClientSession) -> None:
    """One agent's session: list tools, run commands, files, bounded output, errors."""
    tools = {t.name: t for t in (await s.list_tools()).tools}
    assert set(tools) >= TOOLS
    props = tools["run_command"].input_schema["properties"]
    assert {"command", "sandbox", "cwd", "env", "timeout_seconds"} <= set(props)
    assert tools["run_command"].input_schema["required"] == ["command"]
    assert tools["run_command"].description and "bytes" in tools["run_command"].description

    listed = data(await s.call_tool("list_sandboxes", {}))
    assert [e["name"] for e in listed["sandboxes"]] == ["local"]

    r = data(await s.call_tool("run_command", {"command": "echo out; echo err >&2; exit 3"}))
    assert (r["exit_code"], r["stdout"], r["stderr"]) == (3, "out\n", "err\n")
    assert not r["stdout_truncated"] and not r["timed_out"]
    r = data(await s.call_tool("run_command", {"command": ["printf", "%s", "$X"], "env": {"X": "1"}}))
    assert r["stdout"] == "$X"  # an argv runs without a shell
    r = data(await s.call_tool("run_command", {"command": "sleep 5", "timeout_seconds": 0.3}))
    assert r["timed_out"]

    d = f"mcp-{uuid.uuid4().hex[:8]}"
    w = data(await s.call_tool("write_file", {"path": f"{d}/hello.txt", "content": "héllo\n"}))
    assert w["bytes"] == len("héllo\n".encode())
    assert data(await s.call_tool("read_file", {"path": f"{d}/hello.txt"}))["content"] == "héllo\n"
    data(await s.call_tool("write_file", {"path": f"{d}/bin.dat", "content": "AAEC/w==", "encoding": "base64"}))
    r = data(await s.call_tool("run_command", {"command": "od -An -tx1 bin.dat", "cwd": d}))
    assert r["stdout"].split() == ["00", "01", "02", "ff"]
    bad = await s.call_tool("read_file", {"path": f"{d}/bin.dat"})
    assert bad.is_error and "base64" in text_of(bad)
    assert data(await s.call_tool("read_file", {"path": f"{d}/bin.dat", "encoding": "base64"}))["content"] == "AAEC/w=="
    listing = data(await s.call_tool("list_files", {"path": d}))
    names = {e["name"]: e for e in listing["entries"]}
    assert set(names) == {"hello.txt", "bin.dat"} and names["bin.dat"]["size"] == 4
    assert (listing["total"], listing["truncated"]) == (2, False)

    # 10 MB of output comes back cut to the bound with the marker; the server lives on.
    r = data(await s.call_tool("run_command", {"command": "head -c 10000000 /dev/zero | tr '\\0' x; echo; echo END"}))
    assert r["exit_code"] == 0 and r["stdout_truncated"] and r["stdout_bytes"] == 10_000_005
    assert "[... output truncated: " in r["stdout"] and r["stdout"].endswith("END\n")
    assert len(r["stdout"].encode()) < LIMIT + 200
    big = "y" * (3 * LIMIT)
    data(await s.call_tool("write_file", {"path": f"{d}/big.txt", "content": big}))
    f = data(await s.call_tool("read_file", {"path": f"{d}/big.txt"}))
    assert f["truncated"] and f["content"].startswith("y" * LIMIT) and "truncated" in f["content"]
    assert len(f["content"]) < LIMIT + 200

    # Code: with the SDK's code execution for real, else a clear tool error.
    if hasattr(AsyncSandbox, "run_code"):
        ctx = f"mcp-{uuid.uuid4().hex[:6]}"
        data(await s.call_tool("run_code", {"code": "x = 21", "context": ctx}))
        c = data(await s.call_tool("run_code", {"code": "print('half'); x * 2", "context": ctx}))
        assert (c["text"], c["stdout"], c["error"]) == ("42", "half\n", None)
        c = data(await s.call_tool("run_code", {"code": "1/0", "context": ctx}))
        assert c["error"]["name"] == "ZeroDivisionError" and "Traceback" in c["error"]["traceback"]
    else:
        res = await s.call_tool("run_code", {"code": "21*2"})
        assert res.is_error and "run_code" in text_of(res)

    # Failures are tool errors (isError) with a message, never a dead server.
    for name, args, words in [
        ("read_file", {"path": f"{d}/missing"}, "NotFoundError"),
        ("read_file", {"path": "../etc/passwd"}, ".."),
        ("run_command", {"command": "true", "sandbox": "other"}, "one sandbox"),
        ("run_command", {"command": "true", "timeout_seconds": -1}, "timeout_seconds"),
        ("read_file", {"path": d}, "is a directory"),
        ("run_command", {"command": []}, "empty"),
        ("write_file", {"path": "x", "content": "%%%", "encoding": "base64"}, "base64"),
        ("create_sandbox", {"pool": "p"}, "cannot create"),
        ("delete_sandbox", {"sandbox": "local"}, "cannot be deleted"),
        ("run_command", {}, "command"),
    ]:
        res = await s.call_tool(name, args)
        assert res.is_error, (name, args)
        assert words in text_of(res), (name, text_of(res))
    r = data(await s.call_tool("run_command", {"command": "echo alive"}))
    assert r["stdout"] == "alive\n"
    data(await s.call_tool("run_command", {"command": ["rm", "-rf", d]}))


def test_stdio_session(sandboxd_url: str) -> None:
    import anyio

    async def go() -> None:
        params = StdioServerParameters(
            command=server_command()[0],
            args=[*server_command()[1:], "--sandboxd-url", sandboxd_url, "--max-output-bytes", str(LIMIT)],
            env={**os.environ},
        )
        async with stdio_client(params) as (rd, wr), ClientSession(rd, wr) as s:
            init = await s.initialize()
            assert init.server_info.name == "agent-sandbox"
            await session_walkthrough(s)

    anyio.run(go)


@pytest.fixture
def http_server(sandboxd_url: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    with mcp_harness.http_server(
        ["--sandboxd-url", sandboxd_url, "--max-output-bytes", str(LIMIT)], tmp_path
    ) as server:
        yield server


def test_http_session(http_server: tuple[str, str]) -> None:
    import anyio

    url, token = http_server
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    for hdrs in ({}, {"Authorization": "Bearer wrong"}):
        resp = httpx.post(url, json=body, headers=hdrs, timeout=5)
        assert resp.status_code == 401 and resp.headers["www-authenticate"] == "Bearer"

    async def go() -> None:
        async with http_session(url, token) as s:
            await session_walkthrough(s)
        # A second client session on the same server.
        async with http_session(url, token) as s:
            r = data(await s.call_tool("run_command", {"command": "echo again"}))
            assert r["stdout"] == "again\n"

    anyio.run(go)


def test_refuses_open_bind_without_token() -> None:
    env = {k: v for k, v in os.environ.items() if k != "AGENT_SANDBOX_MCP_TOKEN"}
    p = subprocess.run(
        [*server_command(), "--transport", "http", "--host", "0.0.0.0", "--sandboxd-url", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert p.returncode != 0 and "refusing" in p.stderr, p.stderr
