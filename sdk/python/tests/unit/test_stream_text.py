"""The text of output events: sandboxd cuts them at byte boundaries, so a UTF-8
character may be split across events; each stream's (stdout's, stderr's) texts join to
its whole text, the bytes stay exact, and a sequence left incomplete at the end comes as
U+FFFD just before the exit (or dropped) event. Process, stream() and a background
process's output(), sync and async."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator

import httpx

from agent_sandbox_sdk import OutputEvent, ProcessEvent

from .fakes import async_sandbox, sync_sandbox

OUT = ("€" * 40 + "é-x" + "𝄞" * 9).encode()
ERR = ("ü" * 33 + "字").encode()
CUT = 7  # no multiple of 2, 3 or 4: every kind of character gets split


def _line(j: dict[str, object]) -> bytes:
    return (json.dumps(j) + "\n").encode()


def _events(offsets: bool) -> list[bytes]:
    """stdout and stderr interleaved in CUT-byte events; stdout ends in half a '€'."""
    out, err = OUT + "€".encode()[:2], ERR
    lines, off = [], 0
    for i in range(0, max(len(out), len(err)), CUT):
        for fd, b in (("stdout", out[i : i + CUT]), ("stderr", err[i : i + CUT])):
            if b:
                ev: dict[str, object] = {"type": fd, "data": base64.b64encode(b).decode()}
                if offsets:
                    ev["offset"] = off
                    off += len(b)
                lines.append(_line(ev))
    lines.append(_line({"type": "exit", "exit_code": 0, "offset": off}))
    return lines


def _process() -> Iterator[bytes]:
    yield _line({"type": "start", "id": 7, "pid": 42})
    yield from _events(False)


async def _aprocess() -> AsyncIterator[bytes]:
    for part in _process():
        yield part


def _sandboxd(req: httpx.Request) -> httpx.Response:
    if req.url.path == "/v1/processes":
        return httpx.Response(200, content=_process())
    if req.url.path == "/v1/processes/7/output":
        return httpx.Response(200, content=b"".join(_events(True)))
    return httpx.Response(204)


def _asandboxd(req: httpx.Request) -> httpx.Response:
    if req.url.path == "/v1/processes":
        return httpx.Response(200, content=_aprocess())
    return _sandboxd(req)


def _check(evs: list[ProcessEvent] | list[OutputEvent]) -> None:
    for fd, want in (("stdout", OUT), ("stderr", ERR)):
        mine = [e for e in evs if e.type == fd]
        assert b"".join(e.data for e in mine) == want + (b"\xe2\x82" if fd == "stdout" else b"")
        assert "".join(e.text for e in mine) == want.decode() + ("\ufffd" if fd == "stdout" else "")
    # the flush of the incomplete '€': an event without data, just before the exit
    assert (evs[-2].type, evs[-2].data, evs[-2].text) == ("stdout", b"", "\ufffd")
    assert evs[-1].type == "exit"


def test_process_and_stream_text() -> None:
    sb = sync_sandbox(_sandboxd)
    _check(list(sb.stream("x")))
    with sb.spawn("x") as p:
        evs = list(p)
        _check(evs)
        assert p.wait().stdout == (OUT + b"\xe2\x82").decode("utf-8", "replace")


async def test_async_process_and_stream_text() -> None:
    sb = async_sandbox(_asandboxd)
    _check([ev async for ev in sb.stream("x")])
    async with await sb.spawn("x") as p:
        _check([ev async for ev in p])
        assert (await p.wait()).stderr == ERR.decode()


def test_background_output_text() -> None:
    evs = list(sync_sandbox(_sandboxd).background(7).output(follow=False))
    _check(evs)
    assert evs[-2].offset == evs[-1].offset == len(OUT) + 2 + len(ERR)


async def test_async_background_output_text() -> None:
    _check([ev async for ev in async_sandbox(_asandboxd).background(7).output(follow=False)])


def test_dropped_output_flushes_the_incomplete_sequence() -> None:
    lines = [
        _line({"type": "stdout", "offset": 0, "data": base64.b64encode(b"a\xe2\x82").decode()}),
        _line({"type": "dropped", "offset": 3, "bytes": 10}),
        _line({"type": "stdout", "offset": 13, "data": base64.b64encode(b"\xacb").decode()}),
        _line({"type": "exit", "exit_code": 0, "offset": 15}),
    ]
    sb = sync_sandbox(lambda req: httpx.Response(200, content=b"".join(lines)))
    evs = list(sb.background(7).output(follow=False))
    assert [(e.type, e.offset, e.text) for e in evs] == [
        ("stdout", 0, "a"),
        ("stdout", 3, "\ufffd"),
        ("dropped", 3, ""),
        ("stdout", 13, "\ufffdb"),  # the rest of a character whose start is gone
        ("exit", 15, ""),
    ]


def test_events_made_by_hand_decode_their_own_data() -> None:
    assert ProcessEvent(type="stdout", data="é".encode()).text == "é"
    assert OutputEvent(type="stderr", data=b"\xe2\x82").text == "\ufffd"
    assert ProcessEvent(type="stdout", data=b"a") == ProcessEvent(type="stdout", data=b"a", _text="a")
