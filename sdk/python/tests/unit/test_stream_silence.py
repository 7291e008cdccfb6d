"""A process stream whose connection goes silent without closing (the node lost, a
network partition: a half-open socket never errors) ends with SandboxConnectionError
after _wire.STREAM_READ_TIMEOUT of silence instead of hanging for ever; sandboxd's
keepalives (every 15 s) keep a quiet process's stream from ever being that silent."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from agent_sandbox_sdk import SandboxConnectionError, _wire, aio, connect

from .fakes import silent_after


@pytest.fixture
def silent_sandboxd() -> Iterator[str]:
    """A server that answers a spawn with its start event, then stays silent."""
    with silent_after(b'{"type":"start","id":7,"pid":42}\n') as url:
        yield url


def test_silent_stream_ends(monkeypatch: pytest.MonkeyPatch, silent_sandboxd: str) -> None:
    monkeypatch.setattr(_wire, "STREAM_READ_TIMEOUT", 0.5)
    t0 = time.monotonic()
    with connect(silent_sandboxd) as sb, pytest.raises(SandboxConnectionError):
        sb.spawn("sleep 1000").wait()
    assert time.monotonic() - t0 < 10  # before: for ever


async def test_async_silent_stream_ends(monkeypatch: pytest.MonkeyPatch, silent_sandboxd: str) -> None:
    monkeypatch.setattr(_wire, "STREAM_READ_TIMEOUT", 0.5)
    t0 = time.monotonic()
    async with aio.connect(silent_sandboxd) as sb:
        p = await sb.spawn("sleep 1000")
        with pytest.raises(SandboxConnectionError):
            await p.wait()
    assert time.monotonic() - t0 < 10


@pytest.fixture
def silent_watch() -> Iterator[str]:
    """A server that answers a watch with its ready line, then stays silent (sandboxd
    sends an empty line every 15 s on a quiet watch: this is a dead connection)."""
    with silent_after(b'{"type":"ready"}\n') as url:
        yield url


def test_silent_watch_ends(monkeypatch: pytest.MonkeyPatch, silent_watch: str) -> None:
    monkeypatch.setattr(_wire, "STREAM_READ_TIMEOUT", 0.5)
    t0 = time.monotonic()
    with connect(silent_watch) as sb, pytest.raises(SandboxConnectionError):
        list(sb.files.watch("d"))
    assert time.monotonic() - t0 < 10  # before: for ever (no read timeout)


async def test_async_silent_watch_ends(monkeypatch: pytest.MonkeyPatch, silent_watch: str) -> None:
    monkeypatch.setattr(_wire, "STREAM_READ_TIMEOUT", 0.5)
    t0 = time.monotonic()
    async with aio.connect(silent_watch) as sb:
        w = await sb.files.watch("d")
        with pytest.raises(SandboxConnectionError):
            async for _ in w:
                pass
    assert time.monotonic() - t0 < 10
