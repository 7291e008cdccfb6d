"""A run_code given up before its end (its task cancelled, KeyboardInterrupt, a callback's
exception) leaves sandboxd's context busy until the kernel has stopped the interrupted
code: the next run_code in that context through the same handle is sent again while
sandboxd answers 409 "the context is executing other code", for _code.CANCEL_GRACE
seconds at most. Any other 409, a context not given up, or one given up longer ago
raise at once (sync and async)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import ConflictError, _code

from .fakes import async_sandbox, sync_sandbox

pytestmark = pytest.mark.usefixtures("no_backoff")

BUSY = {"code": "CONFLICT", "message": "the context is executing other code"}
END = [
    {"type": "start", "context": "default"},
    {"type": "result", "data": {"text/plain": "4"}, "is_main": True},
    {"type": "end", "execution_count": 2, "truncated": False, "timed_out": False},
]
LONG = [{"type": "start", "context": "default"}, {"type": "stdout", "text": "go\n"}]


def _lines(events: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(e) + "\n" for e in events).encode()


class Kernel:
    """sandboxd's /v1/code/execute for one context: an execution given up stays busy for
    ``busy_after_cancel`` more requests (409), then the context is free again."""

    def __init__(self, busy_after_cancel: int = 2, first: list[dict[str, Any]] | None = None) -> None:
        self.busy_left = 0
        self.busy_after_cancel = busy_after_cancel
        self.first = first
        self.bodies: list[dict[str, Any]] = []
        self.answers: list[int] = []

    def _answer(self, req: httpx.Request, stream: Any) -> httpx.Response:
        assert req.url.path == "/v1/code/execute"
        self.bodies.append(json.loads(req.read()))
        if self.busy_left:
            self.busy_left -= 1
            self.answers.append(409)
            return httpx.Response(409, json=BUSY)
        self.answers.append(200)
        if self.first is not None:  # the first execution: streams, then is given up
            self.first = None
            self.busy_left = self.busy_after_cancel
            return httpx.Response(200, stream=stream)
        return httpx.Response(200, content=_lines(END))

    def sync(self, req: httpx.Request) -> httpx.Response:
        return self._answer(req, _SyncBody(_lines(LONG)))

    async def async_(self, req: httpx.Request) -> httpx.Response:
        return self._answer(req, _AsyncBody(_lines(LONG)))


class _SyncBody(httpx.SyncByteStream):
    """The start of an execution's stream that ends (as a lost connection) only after
    what it holds: the caller gives it up first."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __iter__(self) -> Iterator[bytes]:
        yield self.data
        raise httpx.ReadError("lost")


class _AsyncBody(httpx.AsyncByteStream):
    def __init__(self, data: bytes) -> None:
        self.data = data

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.data
        await asyncio.sleep(3600)  # the code runs on: the caller's task is cancelled


def _interrupt(_: str) -> None:
    raise KeyboardInterrupt


def test_the_run_after_a_keyboard_interrupt_waits_for_the_context() -> None:
    k = Kernel(busy_after_cancel=2, first=LONG)
    sb = sync_sandbox(k.sync)
    with pytest.raises(KeyboardInterrupt):
        sb.run_code("import time; time.sleep(60)", on_stdout=_interrupt)
    assert "default" in sb._abandoned_code
    ex = sb.run_code("2 + 2")
    assert ex.text == "4"
    assert k.answers == [200, 409, 409, 200]
    assert [b["code"] for b in k.bodies[1:]] == ["2 + 2"] * 3  # the same request, sent again
    assert sb._abandoned_code == {}  # taken: a later 409 raises at once
    k.busy_left = 1
    with pytest.raises(ConflictError, match="executing other code"):
        sb.run_code("2 + 2")
    assert k.answers[-1] == 409 and len(k.answers) == 5


def test_a_callback_error_gives_the_execution_up_too() -> None:
    k = Kernel(busy_after_cancel=1, first=LONG)
    sb = sync_sandbox(k.sync)

    def fail(_: str) -> None:
        raise RuntimeError("callback")

    with pytest.raises(RuntimeError):
        sb.run_code("x", context="ctx-a", on_stdout=fail)
    assert set(sb._abandoned_code) == {"ctx-a"}
    # another context was not given up: its 409 raises at once
    k.busy_left = 1
    with pytest.raises(ConflictError):
        sb.run_code("y", context="ctx-b")
    assert sb.run_code("y", context="ctx-a").text == "4"


def test_a_lost_stream_gives_the_execution_up() -> None:
    k = Kernel(busy_after_cancel=1, first=LONG)
    sb = sync_sandbox(k.sync)
    with pytest.raises(Exception, match="stream lost"):
        sb.run_code("x")
    assert sb.run_code("y").text == "4"
    assert k.answers == [200, 409, 200]


def test_a_busy_context_not_given_up_raises_at_once() -> None:
    k = Kernel()
    k.busy_left = 5
    sb = sync_sandbox(k.sync)
    with pytest.raises(ConflictError, match="executing other code"):
        sb.run_code("x")
    assert k.answers == [409]


def test_the_wait_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_code, "CANCEL_GRACE", 0.3)
    k = Kernel(busy_after_cancel=10**6, first=LONG)  # interrupted code that does not stop
    sb = sync_sandbox(k.sync)
    with pytest.raises(KeyboardInterrupt):
        sb.run_code("while True: pass", on_stdout=_interrupt)
    with pytest.raises(ConflictError, match="executing other code"):
        sb.run_code("x")
    assert 3 <= k.answers.count(409) < 40
    assert sb._abandoned_code == {}
    n = len(k.answers)
    with pytest.raises(ConflictError):  # past the grace: at once
        sb.run_code("x")
    assert len(k.answers) == n + 1


def test_another_conflict_is_not_waited_for() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(409, json={"code": "CONFLICT", "message": "something else"})

    sb = sync_sandbox(handler)
    sb._abandoned_code["default"] = 1e18  # given up "now" for ever
    with pytest.raises(ConflictError, match="something else"):
        sb.run_code("x")


def test_busy_answer() -> None:
    assert _code.busy(httpx.Response(409, json=BUSY))
    assert not _code.busy(httpx.Response(409, json={"code": "CONFLICT", "message": "context exists"}))
    assert not _code.busy(httpx.Response(409, json={"detail": "the context is executing other code"}))  # a router's
    assert not _code.busy(httpx.Response(400, json=BUSY))
    assert not _code.busy(httpx.Response(409, content=b"not json"))


async def test_async_the_run_after_a_cancelled_task_waits_for_the_context() -> None:
    k = Kernel(busy_after_cancel=3, first=LONG)
    sb = async_sandbox(k.async_)
    started = asyncio.Event()
    task = asyncio.create_task(sb.run_code("import time; time.sleep(60)", on_stdout=lambda _: started.set()))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert "default" in sb._abandoned_code
    ex = await sb.run_code("2 + 2")
    assert ex.text == "4"
    assert k.answers == [200, 409, 409, 409, 200]
    assert sb._abandoned_code == {}


async def test_async_the_wait_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_code, "CANCEL_GRACE", 0.3)
    k = Kernel(busy_after_cancel=10**6, first=LONG)
    sb = async_sandbox(k.async_)

    def fail(_: str) -> None:
        raise RuntimeError("callback")

    with pytest.raises(RuntimeError):
        await sb.run_code("while True: pass", on_stdout=fail)
    with pytest.raises(ConflictError, match="executing other code"):
        await sb.run_code("x")
    assert 3 <= k.answers.count(409) < 40
