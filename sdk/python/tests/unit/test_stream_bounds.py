"""What a process stream holds: stream() keeps none of the output it yields (a chatty
or long-running command costs the client no more memory than one event), and a process
stream's NDJSON lines are read with a bound, so an over-long line is an SDK error rather
than unbounded memory."""

from __future__ import annotations

import base64
import json
import tracemalloc
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from agent_sandbox_sdk import SandboxConnectionError

from .fakes import async_sandbox, sync_sandbox

EVENTS, SIZE = 256, 64 * 1024  # 16 MiB of stdout in all, 64 KiB per event (sandboxd's chunk)
START = (json.dumps({"type": "start", "id": 7, "pid": 42}) + "\n").encode()
EXIT = (json.dumps({"type": "exit", "exit_code": 0, "signal": 0, "timed_out": False}) + "\n").encode()
BIG = (json.dumps({"type": "stdout", "data": base64.b64encode(b"x" * SIZE).decode()}) + "\n").encode()
HELD = 4 << 20  # what the client may hold at most while it reads (a quarter of the output)


def _chatty() -> Iterator[bytes]:
    yield START
    for _ in range(EVENTS):
        yield BIG  # the same bytes object every time: only the client's copies cost memory
    yield EXIT


async def _achatty() -> AsyncIterator[bytes]:
    for part in _chatty():
        yield part


def _sandboxd(req: httpx.Request) -> httpx.Response:
    if req.url.path == "/v1/processes":
        return httpx.Response(200, content=_chatty())
    return httpx.Response(204)


def _asandboxd(req: httpx.Request) -> httpx.Response:
    if req.url.path == "/v1/processes":
        return httpx.Response(200, content=_achatty())
    return httpx.Response(204)


def _held_since(base: int) -> int:
    return tracemalloc.get_traced_memory()[0] - base


def test_stream_keeps_no_output() -> None:
    sb = sync_sandbox(_sandboxd)
    tracemalloc.start()
    try:
        base, held, n = tracemalloc.get_traced_memory()[0], 0, 0
        for ev in sb.stream("yes"):
            n += len(ev.data)
            held = max(held, _held_since(base))
            del ev
    finally:
        tracemalloc.stop()
    assert n == EVENTS * SIZE
    assert held < HELD, f"stream() held {held} bytes of {n}"


async def test_async_stream_keeps_no_output() -> None:
    sb = async_sandbox(_asandboxd)
    tracemalloc.start()
    try:
        base, held, n = tracemalloc.get_traced_memory()[0], 0, 0
        async for ev in sb.stream("yes"):
            n += len(ev.data)
            held = max(held, _held_since(base))
            del ev
    finally:
        tracemalloc.stop()
    assert n == EVENTS * SIZE
    assert held < HELD, f"stream() held {held} bytes of {n}"


def test_spawn_collects_unless_told_not_to() -> None:
    sb = sync_sandbox(_sandboxd)
    with sb.spawn("yes") as p:
        assert len(p.wait().stdout) == EVENTS * SIZE
    with sb.spawn("yes", collect=False) as p:
        r = p.wait()
    assert (r.stdout, r.exit_code) == ("", 0)


def _endless_line() -> Iterator[bytes]:
    yield START
    for _ in range(256):  # 16 MiB without a line end: no event of sandboxd's
        yield b"7" * SIZE
    yield b"\n" + EXIT


async def _aendless_line() -> AsyncIterator[bytes]:
    for part in _endless_line():
        yield part


def test_process_stream_refuses_an_endless_line() -> None:
    def sandboxd(req: httpx.Request) -> httpx.Response:
        if req.url.path == "/v1/processes":
            return httpx.Response(200, content=_endless_line())
        return httpx.Response(204)

    sb = sync_sandbox(sandboxd)
    tracemalloc.start()
    try:
        with pytest.raises(SandboxConnectionError, match="spawn: an event line over"):
            list(sb.stream("x"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < HELD


async def test_async_process_stream_refuses_an_endless_line() -> None:
    def sandboxd(req: httpx.Request) -> httpx.Response:
        if req.url.path == "/v1/processes":
            return httpx.Response(200, content=_aendless_line())
        return httpx.Response(204)

    sb = async_sandbox(sandboxd)
    with pytest.raises(SandboxConnectionError, match="spawn: an event line over"):
        async with await sb.spawn("x") as p:
            await p.wait()
