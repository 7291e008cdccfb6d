"""A file read whose connection drops while the body comes (iter_read, download) raises
the SDK's SandboxConnectionError, as every other lost stream does, not httpx's error."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from agent_sandbox_sdk import SandboxConnectionError

from .fakes import async_sandbox, sync_sandbox


def _cut(req: httpx.Request) -> Iterator[bytes]:
    yield b"x" * 1000
    raise httpx.RemoteProtocolError("peer closed connection without sending complete message body", request=req)


async def _acut(req: httpx.Request) -> AsyncIterator[bytes]:
    yield b"x" * 1000
    raise httpx.ReadError("connection reset by peer", request=req)


def test_a_read_cut_short_is_a_connection_error(tmp_path: Path) -> None:
    sb = sync_sandbox(lambda req: httpx.Response(200, content=_cut(req)))
    with pytest.raises(SandboxConnectionError, match="read f: connection to the sandbox lost"):
        list(sb.files.iter_read("f"))
    with pytest.raises(SandboxConnectionError, match="read f: connection to the sandbox lost"):
        sb.files.download("f", io.BytesIO())
    with pytest.raises(SandboxConnectionError):
        sb.files.download("f", tmp_path / "f")


async def test_async_a_read_cut_short_is_a_connection_error(tmp_path: Path) -> None:
    sb = async_sandbox(lambda req: httpx.Response(200, content=_acut(req)))
    with pytest.raises(SandboxConnectionError, match="read f: connection to the sandbox lost"):
        async for _ in sb.files.iter_read("f"):
            pass
    with pytest.raises(SandboxConnectionError, match="read f: connection to the sandbox lost"):
        await sb.files.download("f", io.BytesIO())
    with pytest.raises(SandboxConnectionError):
        await sb.files.download("f", tmp_path / "f")
