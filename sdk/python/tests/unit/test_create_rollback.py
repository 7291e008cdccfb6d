"""The rollback of a create under a name the SDK drew: a create that may have stored the
object without an answer saying so (a 5xx, a timeout, a cut connection, a task cancelled
or Ctrl-C once the POST may have left) is deleted again, by name; a refused create (4xx),
one under the caller's name, one whose POST was never sent (no connection, or cancelled
or interrupted while it waited to be sent) and one on a closed client are not. And which
create errors are unsettled."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import RequestError, Sandbox, SandboxConnectionError, _k8s

from . import fakes
from .fakes import FakeKube, _status, httpx_async_client, httpx_sync_client

pytestmark = pytest.mark.usefixtures("no_backoff")


# ---- a create stored but not answered is rolled back --------------------------------


class StoredThen(FakeKube):
    """Stores each POSTed object, then answers as fault says: an API server's 504 or 500,
    a read timeout (no answer), or a 422 refusal (and then stores nothing)."""

    def __init__(self, fault: str) -> None:
        super().__init__()
        self.fault = fault

    def __call__(self, req: httpx.Request) -> httpx.Response:
        if req.method != "POST":
            return super().__call__(req)
        if self.fault == "422":
            self.requests.append(req)
            return _status(422, "Invalid", "spec: invalid")
        resp = super().__call__(req)
        assert resp.status_code == 201
        if self.fault == "timeout":
            raise httpx.ReadTimeout("timed out", request=req)
        return _status(int(self.fault), "Timeout" if self.fault == "504" else "InternalError", "etcd slow")


@pytest.mark.parametrize("fault", ["504", "500", "timeout"])
def test_a_create_stored_but_not_answered_is_rolled_back(fault: str) -> None:
    fake = StoredThen(fault)
    with pytest.raises((RequestError, SandboxConnectionError)):
        httpx_sync_client(fake).create("pool")
    assert not [k for k in fake.store if k[0] == "sandboxclaims"]  # the claim is gone
    [post] = fake.calls("POST", r"/sandboxclaims$")
    [delete] = fake.calls("DELETE", r"/sandboxclaims/")
    assert delete.url.path == f"{post.url.path}/{json.loads(post.content)['metadata']['name']}"  # by name


@pytest.mark.parametrize("fault", ["504", "timeout"])
async def test_async_a_create_stored_but_not_answered_is_rolled_back(fault: str) -> None:
    fake = StoredThen(fault)
    async with httpx_async_client(fake) as c:
        with pytest.raises((RequestError, SandboxConnectionError)):
            await c.create("pool")
    assert not [k for k in fake.store if k[0] == "sandboxclaims"]


def test_a_refused_create_or_a_named_one_is_not_deleted() -> None:
    fake = StoredThen("422")
    with pytest.raises(RequestError):
        httpx_sync_client(fake).create("pool")
    assert not fake.calls("DELETE", r".")  # a 4xx stored nothing
    fake = StoredThen("504")
    with pytest.raises(RequestError):
        httpx_sync_client(fake).create("pool", name="mine")  # the caller's name: maybe not ours
    assert not fake.calls("DELETE", r".") and ("sandboxclaims", "default", "mine") in fake.store


def test_an_empty_name_is_a_drawn_one_for_the_rollback() -> None:
    fake = FakeKube()

    def lost(fake: FakeKube, resource: str, obj: dict[str, Any]) -> None:
        raise httpx.ReadError("connection reset by peer")

    fake.on_create = lost
    with pytest.raises(SandboxConnectionError):
        httpx_sync_client(fake).create(pool="p", name="")
    assert len(fake.calls("DELETE", r"/sandboxclaims/sandbox-claim-")) == 1
    assert not [k for k in fake.store if k[0] == "sandboxclaims"]


# ---- a POST never sent is not rolled back ------------------------------------------


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
        httpx_sync_client(fake).create("pool")
    assert fake.calls("POST", r".") and not fake.calls("DELETE", r".")


@pytest.mark.parametrize("exc", NOT_SENT)
async def test_async_a_create_never_sent_is_not_rolled_back(exc: type[httpx.TransportError]) -> None:
    fake = Unreachable(exc)
    async with httpx_async_client(fake) as c:
        with pytest.raises(SandboxConnectionError):
            await c.create("pool")
    assert fake.calls("POST", r".") and not fake.calls("DELETE", r".")


def test_a_create_on_a_closed_client_is_not_rolled_back(monkeypatch: pytest.MonkeyPatch) -> None:
    undone: list[str] = []
    monkeypatch.setattr(Sandbox, "_delete_quietly", lambda self: undone.append(self.claim))
    fake = FakeKube()
    c = httpx_sync_client(fake)
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


# ---- a create cancelled (or interrupted) before or after its POST left ----------------


class Once:
    """An awaitable step of a call that blocks, the first time only, until the task is
    cancelled (started is set once it blocks); later calls return then at once."""

    def __init__(self, then: Any = None) -> None:
        self.started = asyncio.Event()
        self.then = then
        self.calls = 0

    async def __call__(self, *args: Any) -> Any:  # (the lean pool's _take gets the call's deadline)
        self.calls += 1
        if self.calls == 1:
            self.started.set()
            await asyncio.Event().wait()  # until cancelled
        return self.then


async def cancel_when(started: asyncio.Event, coro: Any) -> None:
    task = asyncio.ensure_future(coro)
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("waiting_for", ["tls", "lean connection"])
async def test_async_a_create_cancelled_before_its_post_left_is_not_rolled_back(waiting_for: str) -> None:
    fake = FakeKube()
    if waiting_for == "tls":  # an exec plugin's client certificate, before httpx sends
        c = httpx_async_client(fake)
        step = Once()
        c.kube._tls.ready = step  # type: ignore[method-assign]
    else:  # every lean connection busy; None after: httpx sends (a DELETE would reach fake)
        c = fakes.async_client(fake)
        step = Once(then=None)
        c.kube._fast._take = step  # type: ignore[method-assign]
    async with c:
        await cancel_when(step.started, c.create("pool"))
    assert fake.requests == [] and step.calls == 1  # neither the POST nor a rollback DELETE


async def test_async_a_create_cancelled_after_its_post_left_is_rolled_back() -> None:
    fake = FakeKube()
    posted = asyncio.Event()

    async def handler(req: httpx.Request) -> httpx.Response:
        resp = fake(req)
        if req.method == "POST":  # stored; the answer never comes
            posted.set()
            await asyncio.Event().wait()
        return resp

    c = httpx_async_client(fake)
    c.kube.http = httpx.AsyncClient(base_url=fakes.SERVER, transport=httpx.MockTransport(handler))
    async with c:
        await cancel_when(posted, c.create("pool"))
    [post] = fake.calls("POST", r"/sandboxclaims$")
    [delete] = fake.calls("DELETE", r"/sandboxclaims/")
    assert delete.url.path == f"{post.url.path}/{json.loads(post.content)['metadata']['name']}"
    assert not [k for k in fake.store if k[0] == "sandboxclaims"]


def test_a_create_interrupted_before_its_post_left_is_not_rolled_back() -> None:
    fake = FakeKube()
    c = fakes.sync_client(fake)  # with lean connections: Ctrl-C while it waits for one
    takes: list[int] = []

    def take(deadline: float) -> None:
        takes.append(1)
        if len(takes) == 1:
            raise KeyboardInterrupt
        return None  # then httpx sends (a DELETE would reach fake)

    c.kube._fast._take = take  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        c.create("pool")
    assert fake.requests == [] and takes == [1]


def test_a_create_interrupted_after_its_post_left_is_rolled_back() -> None:
    fake = FakeKube()

    def handler(req: httpx.Request) -> httpx.Response:
        resp = fake(req)
        if req.method == "POST":  # stored; Ctrl-C before the answer was read
            raise KeyboardInterrupt
        return resp

    c = httpx_sync_client(fake)
    c.kube.http = httpx.Client(base_url=fakes.SERVER, transport=httpx.MockTransport(handler))
    with pytest.raises(KeyboardInterrupt):
        c.create("pool")
    assert len(fake.calls("DELETE", r"/sandboxclaims/sandbox-claim-")) == 1
    assert not [k for k in fake.store if k[0] == "sandboxclaims"]
