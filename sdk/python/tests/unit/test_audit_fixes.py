"""Answers the SDK maps to its own errors and bounds it keeps, found by a read-only
audit: the router's 409 for a Sandbox that may not resume is SandboxSuspendedError (not
a FileExistsError), sandboxd's 429 for a full process table is TooManyProcessesError on
run too, a background replay cut short raises, an endless output line is refused, closing
stdin is sent once on a PTY (a ^D each time), context ids cannot name another path, and
tokens stay out of reprs."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Iterator

import httpx
import pytest

from agent_sandbox_sdk import (
    SandboxConnectionError,
    SandboxSuspendedError,
    SandboxTimeoutError,
    TooManyProcessesError,
    _code,
)
from agent_sandbox_sdk import background as bg
from agent_sandbox_sdk._conn import Target
from agent_sandbox_sdk._ports import PortURL
from agent_sandbox_sdk.errors import SandboxError
from agent_sandbox_sdk.models import BackgroundProcessInfo

from .fakes import async_sandbox, sync_sandbox

SUSPENDED = (
    "Sandbox default/sb is suspended and its idle policy does not resume it on traffic "
    "(spec.idlePolicy.resumeOnTraffic is false); set spec.operatingMode to Running to resume it."
)


def _suspended(req: httpx.Request) -> httpx.Response:
    return httpx.Response(409, json={"detail": SUSPENDED})


def test_router_409_for_a_suspended_sandbox() -> None:
    sb = sync_sandbox(_suspended)
    with pytest.raises(SandboxSuspendedError) as ei:
        sb.files.mkdir("d", parents=False)
    assert not isinstance(ei.value, FileExistsError)
    assert (ei.value.namespace, ei.value.name, ei.value.has_policy) == ("default", "sb", True)


async def test_router_409_for_a_suspended_sandbox_async() -> None:
    with pytest.raises(SandboxSuspendedError):
        await async_sandbox(_suspended).files.mkdir("d", parents=False)


def test_sandboxd_409_stays_a_conflict() -> None:
    def exists(req: httpx.Request) -> httpx.Response:
        return httpx.Response(409, json={"code": "ALREADY_EXISTS", "message": "mkdir: file exists"})

    with pytest.raises(FileExistsError):
        sync_sandbox(exists).files.mkdir("d", parents=False)


def test_run_429_is_too_many_processes() -> None:
    def full(req: httpx.Request) -> httpx.Response:
        return httpx.Response(429, json={"code": "RESOURCE_EXHAUSTED", "message": "too many running processes"})

    with pytest.raises(TooManyProcessesError):
        sync_sandbox(full).run("true")


class _CutStream(httpx.SyncByteStream):
    """One output event, then the connection breaks."""

    def __init__(self, first: bytes) -> None:
        self.first = first

    def __iter__(self) -> Iterator[bytes]:
        yield self.first
        raise httpx.ReadError("connection reset")


def _event(offset: int, data: bytes) -> bytes:
    return (json.dumps({"type": "stdout", "offset": offset, "data": base64.b64encode(data).decode()}) + "\n").encode()


def test_replay_cut_short_raises() -> None:
    """output(follow=False) whose body breaks after one event: an error, not a replay
    that looks complete."""

    def cut(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=_CutStream(_event(0, b"half")))

    seen: list[bytes] = []
    with pytest.raises(SandboxConnectionError, match="stream lost"):
        for ev in sync_sandbox(cut).background(5).output(follow=False):
            seen.append(ev.data)
    assert seen == [b"half"]


def test_endless_output_line_refused() -> None:
    """A line of output events without an end (2 MiB, no newline) is refused, not held."""

    def endless(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"x" * (2 << 20))

    with pytest.raises(SandboxConnectionError):
        list(sync_sandbox(endless).background(5).output(follow=False))


@pytest.mark.parametrize(("pty", "requests", "fails"), [(True, 1, True), (False, 2, False), (None, 1, True)])
def test_close_stdin_once_on_a_pty(pty: bool | None, requests: int, fails: bool) -> None:
    """The first close's answer is lost (a proxy's 502): sent again only for a process
    known not to be on a PTY."""
    n = 0

    def lossy(req: httpx.Request) -> httpx.Response:
        nonlocal n
        n += 1
        assert req.url.path == "/v1/processes/5/stdin/close"
        if n == 1:
            return httpx.Response(502, json={"detail": "Could not read from the backend sandbox."})
        return httpx.Response(204)

    sb = sync_sandbox(lossy)
    info = None if pty is None else BackgroundProcessInfo(id=5, pid=9, command=("sh",), state="running", pty=pty)
    p = bg.BackgroundProcess(sb, 5, info)
    if fails:
        with pytest.raises(SandboxError):
            p.close_stdin()
    else:
        p.close_stdin()
    assert n == requests


@pytest.mark.parametrize("cid", ["main#x", "a?b", "50%", "a/b", ".", "..", ""])
def test_context_ids_that_name_another_path(cid: str) -> None:
    with pytest.raises(ValueError):
        _code.context_path(cid)


def test_context_id_escaped() -> None:
    assert _code.context_path("my ctx", "execute") == "/v1/contexts/my%20ctx/execute"


def test_tokens_out_of_reprs() -> None:
    t = Target(base="http://10.0.0.1:8888", fixed={"Authorization": "Bearer s3cret"})
    u = PortURL(url="http://r/x", base_url="http://r/", headers={"Authorization": "Bearer s3cret"}, token="s3cret")
    assert "s3cret" not in repr(t) and "s3cret" not in repr(u)


class _Endless(httpx.AsyncByteStream):
    """A process stream: its start event, then nothing until closed."""

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        yield b'{"type":"start","id":7,"pid":9}\n'
        await asyncio.Event().wait()


async def test_async_wait_timeout_stays_the_error_when_the_kill_fails() -> None:
    """AsyncProcess.wait(timeout) whose kill fails (sandboxd's 500): the error is still
    the timeout, with the kill's failure as its cause (the kill's error replaced it)."""

    def sbd(req: httpx.Request) -> httpx.Response:
        if req.method == "DELETE":
            return httpx.Response(500, json={"code": "INTERNAL", "message": "cannot kill"})
        return httpx.Response(200, stream=_Endless())

    p = await async_sandbox(sbd).spawn("sleep 100")
    with pytest.raises(SandboxTimeoutError, match="the kill failed") as ei:
        await p.wait(timeout=0.2)
    assert isinstance(ei.value.__cause__, SandboxError)


def _flaky(
    body: bytes, ctype: str = "application/octet-stream"
) -> tuple[list[str], Callable[[httpx.Request], httpx.Response]]:
    """A router whose first answer is its own 503 (the cache not synced yet), then body."""
    seen: list[str] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req.url.path)
        if len(seen) == 1:
            return httpx.Response(503, json={"detail": "Sandbox default/sb is not ready: DependenciesNotReady."})
        return httpx.Response(200, content=body, headers={"content-type": ctype})

    return seen, handler


def test_streamed_reads_retried_like_reads() -> None:
    """iter_read and watch open through the request path: the router's 503 is retried
    (they failed at once before, unlike read())."""
    seen, h = _flaky(b"file bytes")
    assert b"".join(sync_sandbox(h).files.iter_read("a.txt")) == b"file bytes"
    assert len(seen) == 2
    seen, h = _flaky(b'{"type":"ready"}\n', "application/x-ndjson")
    with sync_sandbox(h).files.watch("d") as w:
        assert w.path == "d"
    assert len(seen) == 2 and seen[0].startswith("/v1/watch/")


async def test_streamed_reads_retried_like_reads_async() -> None:
    seen, h = _flaky(b"file bytes")
    got = [c async for c in async_sandbox(h).files.iter_read("a.txt")]
    assert b"".join(got) == b"file bytes" and len(seen) == 2
