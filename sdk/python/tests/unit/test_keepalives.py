"""sandboxd's keepalives on long silences: a process stream's {"type":"keepalive"}
events (and any other event type the SDK does not know) are skipped, before the start
event as after it; a run's JSON answer preceded by the spaces sandboxd sends while the
command runs parses as the answer alone."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator

import httpx

from agent_sandbox_sdk import _wire

from .fakes import async_sandbox, sync_sandbox

KEEPALIVE = b'{"type":"keepalive"}\n'


def _line(j: dict[str, object]) -> bytes:
    return (json.dumps(j) + "\n").encode()


def _stream() -> Iterator[bytes]:
    yield KEEPALIVE  # a silence before the process even started
    yield _line({"type": "start", "id": 7, "pid": 42})
    yield KEEPALIVE
    yield _line({"type": "stdout", "data": base64.b64encode(b"hi").decode()})
    yield KEEPALIVE + b'{"type":"future","x":1}\n' + KEEPALIVE
    yield _line({"type": "exit", "exit_code": 0, "signal": 0, "timed_out": False})


RESULT = {"stdout": "done\n", "stderr": "", "exit_code": 0, "duration_ms": 90000}


def _run_answer() -> Iterator[bytes]:
    for _ in range(3):
        yield b" "  # one space per keepalive period while the command runs
    yield json.dumps(RESULT).encode()


async def _aiter(parts: Iterator[bytes]) -> AsyncIterator[bytes]:
    for p in parts:
        yield p


def _sandboxd(req: httpx.Request) -> httpx.Response:
    if req.url.path == "/v1/processes":
        return httpx.Response(200, content=_stream(), headers={"content-type": "application/x-ndjson"})
    if req.url.path == "/v1/processes/run":
        return httpx.Response(200, content=_run_answer(), headers={"content-type": "application/json"})
    return httpx.Response(204)


def _asandboxd(req: httpx.Request) -> httpx.Response:
    if req.url.path == "/v1/processes":
        return httpx.Response(200, content=_aiter(_stream()), headers={"content-type": "application/x-ndjson"})
    if req.url.path == "/v1/processes/run":
        return httpx.Response(200, content=_aiter(_run_answer()), headers={"content-type": "application/json"})
    return httpx.Response(204)


def test_parse_event_skips_unknown_types() -> None:
    assert _wire.parse_event(KEEPALIVE) is None
    assert _wire.parse_event('{"type":"keepalive"}') is None
    assert _wire.parse_event('{"type":"future","data":"eA=="}') is None


def test_process_stream_skips_keepalives() -> None:
    sb = sync_sandbox(_sandboxd)
    assert [(e.type, e.data) for e in sb.stream("x")] == [("stdout", b"hi"), ("exit", b"")]
    with sb.spawn("x") as p:
        assert (p.id, p.pid) == (7, 42)
        r = p.wait()
    assert (r.stdout, r.exit_code) == ("hi", 0)


async def test_async_process_stream_skips_keepalives() -> None:
    sb = async_sandbox(_asandboxd)
    assert [(e.type, e.data) async for e in sb.stream("x")] == [("stdout", b"hi"), ("exit", b"")]
    async with await sb.spawn("x") as p:
        assert (p.id, p.pid) == (7, 42)
        r = await p.wait()
    assert (r.stdout, r.exit_code) == ("hi", 0)


def test_run_answer_after_keepalive_spaces() -> None:
    r = sync_sandbox(_sandboxd).run("sleep 90; echo done")
    assert (r.stdout, r.exit_code, r.duration_ms) == ("done\n", 0, 90000)


async def test_async_run_answer_after_keepalive_spaces() -> None:
    r = await async_sandbox(_asandboxd).run("sleep 90; echo done")
    assert (r.stdout, r.exit_code, r.duration_ms) == ("done\n", 0, 90000)
