"""Defects a review of a549550 found: create(name="") draws a name again; get, patch and
delete refuse only names that would change the request's URL (others get the server's
404); names are matched whole ("abc\\n" is no name); LineSplitter searches only what a
chunk appended; a create whose POST was never sent is not rolled back."""

from __future__ import annotations

import json
import re
from typing import Any, SupportsIndex

import httpx
import pytest

from agent_sandbox_sdk import NotFoundError, Sandbox, SandboxConnectionError, _code, _k8s

from .fakes import FakeKube
from .test_client_fake import bind_on_create
from .test_review_fixes import INVALID_NAMES, async_client, sync_client

# ---- 1. create(name="") draws a name --------------------------------------------------


def test_create_with_an_empty_name_draws_one() -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    sb = sync_client(fake).create(pool="p", name="")
    [post] = fake.calls("POST", r"/sandboxclaims$")
    assert re.fullmatch(r"sandbox-claim-[0-9a-f]{8}", sb.claim)
    assert json.loads(post.content)["metadata"]["name"] == sb.claim


def test_an_empty_name_is_a_drawn_one_for_the_rollback() -> None:
    fake = FakeKube()

    def lost(fake: FakeKube, resource: str, obj: dict[str, Any]) -> None:
        raise httpx.ReadError("connection reset by peer")

    fake.on_create = lost
    with pytest.raises(SandboxConnectionError):
        sync_client(fake).create(pool="p", name="")
    assert len(fake.calls("DELETE", r"/sandboxclaims/sandbox-claim-")) == 1
    assert not [k for k in fake.store if k[0] == "sandboxclaims"]


async def test_async_create_with_an_empty_name_draws_one() -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    async with async_client(fake) as c:
        sb = await c.create(pool="p", name="")
    assert re.fullmatch(r"sandbox-claim-[0-9a-f]{8}", sb.claim)
    assert ("sandboxclaims", "default", sb.claim) in fake.store


# ---- 2. names only the server refuses reach it ----------------------------------------


@pytest.mark.parametrize("name", INVALID_NAMES)
def test_get_and_delete_send_a_name_only_the_server_refuses(name: str) -> None:
    fake = FakeKube()
    c = sync_client(fake)
    with pytest.raises(NotFoundError):
        c.get(name, timeout=5)
    assert c.delete(name) is False  # documented: False when nothing has that name
    assert fake.calls("GET", r"/sandboxes/") and fake.calls("DELETE", r"/sandboxclaims/")


@pytest.mark.parametrize("name", INVALID_NAMES)
async def test_async_get_and_delete_send_a_name_only_the_server_refuses(name: str) -> None:
    fake = FakeKube()
    async with async_client(fake) as c:
        with pytest.raises(NotFoundError):
            await c.get(name, timeout=5)
        assert await c.delete(name) is False


def test_patch_sends_a_name_only_the_server_refuses_and_not_an_unsafe_one() -> None:
    assert _k8s.patch_call("sandboxes", "ns", "Upper", {}).url.endswith("/sandboxes/Upper")
    for name in ("", "..", "a/b", "a?b"):
        with pytest.raises(ValueError):
            _k8s.patch_call("sandboxes", "ns", name, {})


@pytest.mark.parametrize("name", ["abc\n", "abc\r\n"])
def test_a_trailing_line_end_is_no_name(name: str) -> None:
    with pytest.raises(ValueError):
        _k8s.check_name(name)
    with pytest.raises(ValueError):
        _k8s.check_labels({"k": name})
    with pytest.raises(ValueError):
        _k8s.check_labels({name: "v"})
    with pytest.raises(ValueError):
        _k8s.check_labels({f"ex.com{name}/k": "v"})


# ---- 4. LineSplitter searches only what was appended ----------------------------------


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


# ---- 5. a POST never sent is not rolled back ------------------------------------------


class Unreachable(FakeKube):
    """Records each request, then fails a POST as exc says before anything is sent."""

    def __init__(self, exc: type[httpx.TransportError]) -> None:
        super().__init__()
        self.exc = exc

    def __call__(self, req: httpx.Request) -> httpx.Response:
        if req.method == "POST":
            self.requests.append(req)
            raise self.exc("cannot connect", request=req)
        return super().__call__(req)


NOT_SENT = [httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout]


@pytest.mark.parametrize("exc", NOT_SENT)
def test_a_create_never_sent_is_not_rolled_back(exc: type[httpx.TransportError]) -> None:
    fake = Unreachable(exc)
    with pytest.raises(SandboxConnectionError):
        sync_client(fake).create("pool")
    assert fake.calls("POST", r".") and not fake.calls("DELETE", r".")


@pytest.mark.parametrize("exc", NOT_SENT)
async def test_async_a_create_never_sent_is_not_rolled_back(exc: type[httpx.TransportError]) -> None:
    fake = Unreachable(exc)
    async with async_client(fake) as c:
        with pytest.raises(SandboxConnectionError):
            await c.create("pool")
    assert fake.calls("POST", r".") and not fake.calls("DELETE", r".")


def test_a_create_on_a_closed_client_is_not_rolled_back(monkeypatch: pytest.MonkeyPatch) -> None:
    undone: list[str] = []
    monkeypatch.setattr(Sandbox, "_delete_quietly", lambda self: undone.append(self.claim))
    fake = FakeKube()
    c = sync_client(fake)
    c.close()
    with pytest.raises(RuntimeError):
        c.create("pool")  # httpx: the client has been closed (a DELETE could not go either)
    assert fake.requests == [] and undone == []


def test_which_create_errors_are_unsettled() -> None:
    req = httpx.Request("POST", "https://kube.test/x")
    for exc in NOT_SENT:
        wrapped = SandboxConnectionError("no connection")
        wrapped.__cause__ = exc("x", request=req)
        assert not _k8s.create_unsettled(wrapped) and not _k8s.create_unsettled(exc("x", request=req))
    lost = SandboxConnectionError("no answer")
    lost.__cause__ = httpx.ReadError("reset", request=req)
    assert _k8s.create_unsettled(lost) and _k8s.create_unsettled(SandboxConnectionError("lean: reset"))
    assert _k8s.create_unsettled(httpx.WriteError("x", request=req)) and _k8s.create_unsettled(KeyboardInterrupt())
