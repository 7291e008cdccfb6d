"""API answers read through httpx (the lean pool's fallback: a proxy applies, or no lean
connection came free) are bounded as the lean pool bounds them: one watch event at most
MAX_LINE bytes, one object's answer at most MAX_ANSWER; past that SandboxConnectionError
(httpx read a 64 MiB watch line, or answer, whole)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from agent_sandbox_sdk import SandboxConnectionError, _fasthttp, _k8s

from . import fakes
from .fakes import FakeKube, httpx_async_client, httpx_sync_client

OVER = _fasthttp.MAX_LINE + (1 << 20)  # bytes of one annotation: past either bound
CHUNK = b"A" * (1 << 16)
HEAD = b'{"type":"MODIFIED","object":{"metadata":{"name":"x","resourceVersion":"6","annotations":{"a":"'
TAIL = b'"}}}}\n'
SMALL = b'{"type":"MODIFIED","object":{"metadata":{"name":"x","resourceVersion":"7"}}}\n'


def _big() -> Iterator[bytes]:
    yield HEAD
    for _ in range(OVER // len(CHUNK)):
        yield CHUNK
    yield TAIL


async def _abig() -> AsyncIterator[bytes]:
    for part in _big():
        yield part


def _answer(req: httpx.Request, body: object) -> httpx.Response:
    if req.url.params.get("watch"):
        return httpx.Response(200, content=body)  # type: ignore[arg-type]
    return httpx.Response(200, json={"metadata": {"name": "x", "resourceVersion": "5"}})


def test_a_watch_line_through_httpx_is_bounded() -> None:
    c = httpx_sync_client(FakeKube())
    c.kube.http = httpx.Client(base_url=fakes.SERVER, transport=httpx.MockTransport(lambda r: _answer(r, _big())))
    with pytest.raises(SandboxConnectionError, match="longer than"):
        list(c.kube.watch("sandboxes", "default", "x", "5", 5))


def test_watch_lines_through_httpx_are_split_as_before() -> None:
    body = SMALL + SMALL.replace(b'"7"', b'"8"').rstrip(b"\n")  # the last without a line end
    c = httpx_sync_client(FakeKube())
    c.kube.http = httpx.Client(base_url=fakes.SERVER, transport=httpx.MockTransport(lambda r: _answer(r, body)))
    got = [o["metadata"]["resourceVersion"] for _, o in c.kube.watch("sandboxes", "default", "x", "5", 5)]
    assert got == ["7", "8"]


async def test_async_a_watch_line_through_httpx_is_bounded() -> None:
    c = httpx_async_client(FakeKube())
    c.kube.http = httpx.AsyncClient(base_url=fakes.SERVER, transport=httpx.MockTransport(lambda r: _answer(r, _abig())))
    with pytest.raises(SandboxConnectionError, match="longer than"):
        async for _ in c.kube.watch("sandboxes", "default", "x", "5", 5):
            pass
    await c.aclose()


def _huge_object(req: httpx.Request) -> httpx.Response:
    obj = {"metadata": {"name": "x", "annotations": {"a": "A" * OVER}}}
    return httpx.Response(200, content=json.dumps(obj).encode())


@pytest.fixture
def no_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_k8s, "call_retry_delay", lambda *a: None)


@pytest.mark.usefixtures("no_retry")
def test_one_object_through_httpx_is_bounded() -> None:
    c = httpx_sync_client(FakeKube())
    c.kube.http = httpx.Client(base_url=fakes.SERVER, transport=httpx.MockTransport(_huge_object))
    with pytest.raises(SandboxConnectionError, match="larger than"):
        c.kube.get("sandboxes", "default", "x")


@pytest.mark.usefixtures("no_retry")
async def test_async_one_object_through_httpx_is_bounded() -> None:
    c = httpx_async_client(FakeKube())
    c.kube.http = httpx.AsyncClient(base_url=fakes.SERVER, transport=httpx.MockTransport(_huge_object))
    with pytest.raises(SandboxConnectionError, match="larger than"):
        await c.kube.get("sandboxes", "default", "x")
    await c.aclose()
