"""A file read whose connection drops while the body comes (iter_read, download) raises
the SDK's SandboxConnectionError, as every other lost stream does, not httpx's error."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from agent_sandbox_sdk import SandboxConnectionError, SandboxError

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


def _not_found(req: httpx.Request) -> httpx.Response:
    return httpx.Response(404, json={"code": "NOT_FOUND", "message": "no such file"})


def _whole(req: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=b"new content")


@pytest.mark.parametrize("handler", [_not_found, lambda req: httpx.Response(200, content=_cut(req))])
def test_a_failed_download_leaves_the_local_file(tmp_path: Path, handler: object) -> None:
    """The local file is replaced only once the whole file arrived (before: emptied by the
    download's open before the read failed, or left with the part that came)."""
    dest = tmp_path / "important.txt"
    dest.write_bytes(b"keep")
    sb = sync_sandbox(handler)  # type: ignore[arg-type]
    with pytest.raises(SandboxError):  # NotFoundError or SandboxConnectionError
        sb.files.download("f", dest)
    assert dest.read_bytes() == b"keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["important.txt"]  # no temporary left


def test_a_download_replaces_the_file_keeping_its_mode(tmp_path: Path) -> None:
    dest = tmp_path / "d" / "x.sh"
    dest.parent.mkdir()
    dest.write_bytes(b"old")
    dest.chmod(0o750)
    link = tmp_path / "link"
    link.symlink_to(dest)
    sb = sync_sandbox(_whole)
    assert sb.files.download("f", link) == len(b"new content")
    assert link.is_symlink()  # written through, as open(link, "wb") does
    assert dest.read_bytes() == b"new content"
    assert dest.stat().st_mode & 0o777 == 0o750
    assert sb.files.download("f", tmp_path / "new" / "file") == len(b"new content")
    assert (tmp_path / "new" / "file").read_bytes() == b"new content"


async def test_async_a_failed_download_leaves_the_local_file(tmp_path: Path) -> None:
    dest = tmp_path / "important.txt"
    dest.write_bytes(b"keep")
    for handler in (_not_found, lambda req: httpx.Response(200, content=_acut(req))):
        sb = async_sandbox(handler)
        with pytest.raises(SandboxError):
            await sb.files.download("f", dest)
        assert dest.read_bytes() == b"keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["important.txt"]
