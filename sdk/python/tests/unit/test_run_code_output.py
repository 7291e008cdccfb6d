"""run_code's output is bounded: it keeps at most max_output characters (the callbacks
still get all of it) and refuses an endless event line; and the line splitter of its
event stream (lines across chunks, each byte searched once)."""

from __future__ import annotations

import json
from typing import Any, SupportsIndex

import httpx
import pytest

from agent_sandbox_sdk import SandboxConnectionError, _code

from .fakes import Handler, async_sandbox, sync_sandbox

pytestmark = pytest.mark.usefixtures("no_backoff")


# ---- max_output and the event line bound --------------------------------------------


def _execute_answer(lines: list[Any]) -> Handler:
    body = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines).encode()

    def handler(req: httpx.Request) -> httpx.Response:
        assert req.url.path == "/v1/code/execute"
        return httpx.Response(200, content=body)

    return handler


CHATTY = [
    {"type": "stdout", "text": "0123456789"},
    {"type": "stderr", "text": "abcdef"},
    {"type": "stdout", "text": "ABCDEFGHIJ"},
    {"type": "result", "data": {"text/plain": "42"}, "is_main": True},
    {"type": "end", "execution_count": 1, "truncated": False, "timed_out": False},
]


def test_run_code_keeps_at_most_max_output() -> None:
    out: list[str] = []
    results: list[object] = []
    sb = sync_sandbox(_execute_answer(CHATTY))
    ex = sb.run_code("x", max_output=12, on_stdout=out.append, on_result=results.append)
    assert (ex.stdout, ex.stderr, ex.results, ex.truncated) == ("0123456789", "ab", [], True)
    assert out == ["0123456789", "ABCDEFGHIJ"] and len(results) == 1  # the callbacks get it all
    ex = sb.run_code("x")  # the default bound keeps all of it
    assert (ex.stdout, ex.stderr, ex.text, ex.truncated) == ("0123456789ABCDEFGHIJ", "abcdef", "42", False)
    with pytest.raises(ValueError):
        sb.run_code("x", max_output=-1)


async def test_async_run_code_keeps_at_most_max_output() -> None:
    sb = async_sandbox(_execute_answer(CHATTY))
    ex = await sb.run_code("x", max_output=28)
    assert (ex.stdout, ex.stderr, ex.text, ex.truncated) == ("0123456789ABCDEFGHIJ", "abcdef", None, True)


def test_results_without_data_are_bounded_too() -> None:
    """Each kept result costs RESULT_OVERHEAD of the budget beyond its data: a flood of
    display events without data is cut (it cost nothing and was all kept)."""
    n = 100_000
    flood: list[Any] = [{"type": "display"}] * n + [{"type": "end", "execution_count": 1}]
    seen: list[object] = []
    sb = sync_sandbox(_execute_answer(flood))
    ex = sb.run_code("x", max_output=100 * _code.RESULT_OVERHEAD, on_result=seen.append)
    assert len(ex.results) == 100 and ex.truncated
    assert len(seen) == n  # the callback still gets every one
    ex = sb.run_code("x")  # the default budget: 64 Mi / 64 = 1 Mi results
    assert len(ex.results) == n and not ex.truncated


async def test_async_results_without_data_are_bounded_too() -> None:
    flood: list[Any] = [{"type": "result", "data": {}}] * 1000 + [{"type": "end", "execution_count": 1}]
    ex = await async_sandbox(_execute_answer(flood)).run_code("x", max_output=10 * _code.RESULT_OVERHEAD + 5)
    assert len(ex.results) == 10 and ex.truncated


def test_run_code_refuses_an_endless_event_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_code, "MAX_EVENT_LINE", 100)
    line = json.dumps({"type": "stdout", "text": "x" * 200})
    with pytest.raises(SandboxConnectionError, match="over 100 bytes"):
        sync_sandbox(_execute_answer([line])).run_code("x")


# ---- the line splitter ----------------------------------------------------------------


def test_line_splitter() -> None:
    sp = _code.LineSplitter(8)
    assert sp.feed(b"ab") == [] and sp.feed(b"c\r\nd\n\ne") == ["abc\r", "d", ""] and sp.rest() == ["e"]
    with pytest.raises(SandboxConnectionError):
        sp.feed(b"123456789")  # no line end yet, and over the limit
    with pytest.raises(SandboxConnectionError):
        _code.LineSplitter(8).feed(b"123456789\n")


class CountingBuf(bytearray):
    """A bytearray that adds up how many bytes its searches for a line end look at."""

    scanned = 0

    def rfind(self, sub: Any, start: SupportsIndex | None = None, end: SupportsIndex | None = None) -> int:
        lo = 0 if start is None else int(start)
        CountingBuf.scanned += len(self) - max(0, lo)
        return super().rfind(sub, start, end)

    def find(self, sub: Any, start: SupportsIndex | None = None, end: SupportsIndex | None = None) -> int:
        lo = 0 if start is None else int(start)
        CountingBuf.scanned += len(self) - max(0, lo)
        return super().find(sub, start, end)


def test_line_splitter_splits_across_chunks() -> None:
    sp = _code.LineSplitter(1 << 20)
    out: list[str] = []
    long = b"x" * 10_000
    data = b"first\n" + long + b"\nA\nB\n\nC" + b"\nlast"
    for i in range(0, len(data), 7):  # a line over many chunks; chunks with several lines
        out += sp.feed(data[i : i + 7])
    out += sp.rest()
    assert out == ["first", "x" * 10_000, "A", "B", "", "C", "last"]
    sp = _code.LineSplitter(100)
    assert sp.feed(b"a\nb\nc") == ["a", "b"] and sp.feed(b"d\ne\nf\n") == ["cd", "e", "f"] and sp.rest() == []


def test_line_splitter_feed_is_linear() -> None:
    sp = _code.LineSplitter(1 << 20)
    sp.buf = CountingBuf()
    CountingBuf.scanned = 0
    chunk, n = b"y" * 1000, 500
    for _ in range(n):
        assert sp.feed(chunk) == []
    assert sp.feed(b"\n") == ["y" * (n * 1000)]
    assert isinstance(sp.buf, CountingBuf)  # the searches were counted
    assert CountingBuf.scanned <= n * len(chunk) + 1  # each byte looked at once, not n/2 times


async def test_run_code_without_keep_streams_gives_the_streams_to_the_callbacks_only() -> None:
    """keep_streams=False: stdout and stderr reach the callbacks only and take nothing of
    max_output, which the results have to themselves (sync and async alike)."""
    got: list[str] = []
    sb = sync_sandbox(_execute_answer(CHATTY))
    ex = sb.run_code("x", on_stdout=got.append, on_stderr=got.append, max_output=76, keep_streams=False)
    assert (ex.stdout, ex.stderr, [r.text for r in ex.results], ex.truncated) == ("", "", ["42"], False)
    assert got == ["0123456789", "abcdef", "ABCDEFGHIJ"]
    asb = async_sandbox(_execute_answer(CHATTY))
    aex = await asb.run_code("x", on_stdout=got.append, max_output=76, keep_streams=False)
    assert (aex.stdout, aex.stderr, [r.text for r in aex.results], aex.truncated) == ("", "", ["42"], False)
