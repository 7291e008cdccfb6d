"""output(follow=True) resumes when the reconnect itself fails (no connection, a proxy's
503), and counts such failures against the same budget of quick ends without news: a
sandbox out of reach for good still ends the iteration with SandboxConnectionError. A
stream that does not follow raises such a failure at once."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from agent_sandbox_sdk import SandboxConnectionError
from agent_sandbox_sdk import background as bg

from .fakes import async_sandbox, sync_sandbox


def _line(j: dict[str, object]) -> bytes:
    return (json.dumps(j) + "\n").encode()


def _out(offset: int, data: bytes) -> bytes:
    return _line({"type": "stdout", "offset": offset, "data": base64.b64encode(data).decode()})


class Sandboxd:
    """GET /v1/processes/5/output answers as script says, one entry per request:
    "cut" (output from the asked offset, then the response ends without the exit),
    "connect" (no connection), a status (a proxy's error), or "exit" (the rest, then
    the exit event)."""

    DATA = b"0123456789"

    def __init__(self, script: list[str]) -> None:
        self.script = list(script)
        self.offsets: list[int] = []

    def __call__(self, req: httpx.Request) -> httpx.Response:
        assert req.url.path == "/v1/processes/5/output"
        off = int(req.url.params.get("offset", "0"))
        self.offsets.append(off)
        step = self.script.pop(0) if self.script else "exit"
        if step == "connect":
            raise httpx.ConnectError("connection refused", request=req)
        if step.isdigit():
            return httpx.Response(int(step), json={"detail": "the sandbox is waking up"})
        if step == "cut":
            return httpx.Response(200, content=_out(off, self.DATA[off : off + 4]))
        end = len(self.DATA)
        return httpx.Response(
            200, content=_out(off, self.DATA[off:]) + _line({"type": "exit", "exit_code": 0, "offset": end})
        )


@pytest.fixture(autouse=True)
def _quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bg, "RESUME_BACKOFF", 0.01, raising=False)


SCRIPT = ["cut", "connect", "503", "cut", "502", "exit"]


def test_output_resumes_after_a_failed_reconnect() -> None:
    sbd = Sandboxd(SCRIPT)
    evs = list(sync_sandbox(sbd).background(5).output())
    assert b"".join(e.data for e in evs if e.type == "stdout") == Sandboxd.DATA
    assert evs[-1].type == "exit"
    assert sbd.offsets == [0, 4, 4, 4, 8, 8]


async def test_async_output_resumes_after_a_failed_reconnect() -> None:
    sbd = Sandboxd(SCRIPT)
    evs = [e async for e in async_sandbox(sbd).background(5).output()]
    assert b"".join(e.data for e in evs if e.type == "stdout") == Sandboxd.DATA
    assert evs[-1].type == "exit"
    assert sbd.offsets == [0, 4, 4, 4, 8, 8]


def test_output_gives_up_after_the_budget_of_failed_reconnects() -> None:
    sbd = Sandboxd(["cut"] + ["503"] * 20)
    with pytest.raises(SandboxConnectionError, match="process 5: stream lost"):
        list(sync_sandbox(sbd).background(5).output())
    assert len(sbd.offsets) == 1 + bg.MAX_RESUMES  # the first request, then MAX_RESUMES resumes


async def test_async_output_gives_up_after_the_budget_of_failed_reconnects() -> None:
    sbd = Sandboxd(["connect"] * 20)
    with pytest.raises(SandboxConnectionError, match="process 5: stream lost"):
        [e async for e in async_sandbox(sbd).background(5).output()]
    assert len(sbd.offsets) == bg.MAX_RESUMES + 1


def test_output_without_follow_raises_a_failed_request() -> None:
    with pytest.raises(SandboxConnectionError, match="HTTP 503"):
        list(sync_sandbox(Sandboxd(["503"])).background(5).output(follow=False))
