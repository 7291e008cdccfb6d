"""Shared helpers of the MCP server tests (the SDK's integration tests and the e2e tests
in tests/e2e/devx): how to start agent-sandbox-mcp, an HTTP-transport server with a
bearer token, a client session over it, and reading tool results."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent


def server_command() -> list[str]:
    """The command line of the MCP server: the venv's script, one on PATH, or the module."""
    exe = Path(sys.executable).parent / "agent-sandbox-mcp"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("agent-sandbox-mcp")
    return [found] if found else [sys.executable, "-m", "agent_sandbox_sdk.mcp"]


def free_port() -> int:
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return int(sk.getsockname()[1])


def text_of(res: CallToolResult) -> str:
    return "".join(c.text for c in res.content if isinstance(c, TextContent))


def data(res: CallToolResult) -> dict[str, Any]:
    """The structured result of a tool call that must have succeeded."""
    assert not res.is_error, text_of(res)
    assert res.structured_content is not None
    return res.structured_content


@contextmanager
def http_server(
    args: list[str], tmp_path: Path, start_timeout: float = 20, stop_timeout: float = 15
) -> Iterator[tuple[str, str]]:
    """Runs the server with the HTTP transport on a free loopback port, behind a new
    bearer token, with the extra flags args; yields (url, token). The server must start
    within start_timeout seconds and exit cleanly within stop_timeout after SIGTERM (its
    log is shown when not)."""
    token = uuid.uuid4().hex
    tok = tmp_path / "token"
    tok.write_text(token + "\n")
    port = free_port()
    log_path = tmp_path / "mcp.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [*server_command(), *args, "--transport", "http", "--port", str(port), "--auth-token-file", str(tok)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    proc.wait()
                    pytest.fail(f"agent-sandbox-mcp did not start: {log_path.read_text()}")
                time.sleep(0.1)
        try:
            yield url, token
        finally:
            proc.terminate()
            assert proc.wait(stop_timeout) == 0, log_path.read_text()


@asynccontextmanager
async def http_session(url: str, token: str, timeout: float = 60) -> AsyncIterator[ClientSession]:
    """An initialised MCP client session over streamable HTTP with the bearer token."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as (rd, wr),
        ClientSession(rd, wr) as s,
    ):
        await s.initialize()
        yield s
