"""Large stdin: write() sends it in requests of at most 1 MiB, in order (sandboxd buffers
a body up to --max-body, 9 MiB by default, and answered a larger write 413); a part
refused because the stdin queue is full is sent again; an inline stdin too large for
one request is refused before anything is sent."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import httpx
import pytest

from agent_sandbox_sdk import RequestError, _wire

from .fakes import async_sandbox, sync_sandbox

DATA = bytes(range(256)) * (40 * 1024 + 3)  # 10 MiB and a bit, no two parts alike
START = (json.dumps({"type": "start", "id": 7, "pid": 42}) + "\n").encode()
FULL = {"code": "RESOURCE_EXHAUSTED", "message": "stdin queue is full"}


class Stdin:
    """A sandboxd that takes stdin writes, refusing the first `refuse` of them as a
    full queue (429), and records the rest."""

    def __init__(self, refuse: int = 0, answer: tuple[int, dict[str, str]] = (429, FULL)) -> None:
        self.bodies: list[bytes] = []
        self.refuse = refuse
        self.answer = answer
        self.requests = 0

    def __call__(self, req: httpx.Request) -> httpx.Response:
        self.requests += 1
        if req.url.path == "/v1/processes":
            return httpx.Response(200, content=START)
        if req.url.path in ("/v1/processes/7/stdin", "/v1/processes/7"):
            if req.url.path.endswith("/stdin") and self.refuse > 0 and len(self.bodies) == 2:
                self.refuse -= 1
                return httpx.Response(self.answer[0], json=self.answer[1])
            if req.url.path.endswith("/stdin"):
                self.bodies.append(req.read())
            return httpx.Response(204)
        return httpx.Response(404, json={"code": "NOT_FOUND", "message": req.url.path})

    def check(self) -> None:
        assert all(len(b) <= 1 << 20 for b in self.bodies)
        assert len(self.bodies) == 11
        assert b"".join(self.bodies) == DATA


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_wire, "STDIN_QUEUE_PATIENCE", 0.3, raising=False)


def test_process_write_in_parts(quick: None) -> None:
    fake = Stdin(refuse=3)
    p = sync_sandbox(fake).spawn("cat")
    p.write(DATA)
    fake.check()
    p.write(b"")  # one empty write, as before
    assert fake.bodies[-1] == b""


async def test_async_process_write_in_parts(quick: None) -> None:
    fake = Stdin(refuse=3)
    p = await async_sandbox(fake).spawn("cat")
    await p.write(DATA)
    fake.check()


def test_background_write_in_parts(quick: None) -> None:
    fake = Stdin(refuse=1)
    sync_sandbox(fake).background(7).write(DATA)
    fake.check()


async def test_async_background_write_in_parts(quick: None) -> None:
    fake = Stdin(refuse=1)
    await async_sandbox(fake).background(7).write(DATA)
    fake.check()


@pytest.mark.parametrize(
    "answer", [(429, FULL), (400, {"code": "FAILED_PRECONDITION", "message": "stdin is closed"})], ids=str
)
def test_write_gives_up(quick: None, answer: tuple[int, dict[str, str]]) -> None:
    """A full queue that stays full past the patience, or any other refusal, raises."""
    fake = Stdin(refuse=1000, answer=answer)
    p = sync_sandbox(fake).spawn("cat")
    with pytest.raises(RequestError) as ei:
        p.write(DATA)
    assert ei.value.status == answer[0]
    assert len(fake.bodies) == 2
    tries = fake.requests - 3  # the spawn and the two parts taken
    assert tries > 1 if answer[0] == 429 else tries == 1


def _calls(fake: Stdin) -> list[Callable[[], object]]:
    sb = sync_sandbox(fake)
    big = b"\x00" * (7 << 20)  # 9.3 MiB as base64
    return [
        lambda: sb.run("cat", stdin=big),
        lambda: sb.spawn("cat", stdin=big),
        lambda: sb.start_background("cat", stdin=big),
        lambda: sb.run("cat", stdin="\u20ac" * (2 << 20)),  # 2 Mi characters, 12 MiB as JSON
    ]


def test_inline_stdin_too_large_is_refused_before_sending() -> None:
    fake = Stdin()
    for call in _calls(fake):
        with pytest.raises(RequestError, match=r"over sandboxd's 9 MiB \(--max-body\): spawn\(\)") as ei:
            call()
        assert (ei.value.status, ei.value.code) == (413, "INVALID_ARGUMENT")
    assert fake.requests == 0
    body = _wire.run_body("cat", stdin=b"\x00" * (6 << 20))  # 8 MiB as base64: fits
    assert len(base64.b64decode(body["stdin_b64"])) == 6 << 20
