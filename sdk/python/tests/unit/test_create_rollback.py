"""The rollback of a create under a name the SDK drew: a create that may have stored the
object without an answer saying so (a 5xx, a timeout, a cut connection, a task cancelled
or Ctrl-C once the POST may have left) is deleted again, by name; a refused create (4xx),
one under the caller's name, one whose POST was never sent (no connection, or cancelled
or interrupted while it waited to be sent) and one on a closed client are not. And which
create errors are unsettled. A create that lands after that DELETE is found by looks by
name and deleted; other deletes of what a handle created are conditioned on its UID."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import NotFoundError, RequestError, Sandbox, SandboxConnectionError, SandboxError, _k8s

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
    monkeypatch.setattr(Sandbox, "_delete_lost", lambda self, look=True: undone.append(self.claim))
    fake = FakeKube()
    c = httpx_sync_client(fake)
    c.close()
    with pytest.raises(SandboxError, match="the client is closed"):
        c.create("pool")  # (a DELETE could not go either)
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


# ---- a create that lands after its rollback's DELETE is found and deleted -------------


@pytest.fixture
def quick_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_k8s, "LOST_CREATE_LOOKS", (0.01, 0.01, 0.01))


class LandsLate(FakeKube):
    """Takes a claim's POST without an answer and stores it only once the rollback's
    DELETE has found nothing: the POST was still in the API server then."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: httpx.Request | None = None

    def post(self, req: httpx.Request) -> None:
        self.requests.append(req)
        self.pending = req

    def __call__(self, req: httpx.Request) -> httpx.Response:
        if req.method == "POST":
            self.post(req)
            raise httpx.ReadTimeout("timed out", request=req)
        resp = super().__call__(req)
        if req.method == "DELETE" and self.pending is not None:
            body = json.loads(self.pending.content)
            body["metadata"]["uid"] = "late"
            self.put("sandboxclaims", body)
            self.pending = None
        return resp

    def claims(self) -> list[tuple[str, str, str]]:
        return [k for k in self.store if k[0] == "sandboxclaims"]


@pytest.mark.usefixtures("quick_looks")
def test_a_create_landing_after_its_rollback_is_deleted() -> None:
    fake = LandsLate()
    with pytest.raises(SandboxConnectionError):
        httpx_sync_client(fake).create("pool")
    assert not fake.claims()
    first, second = fake.calls("DELETE", r"/sandboxclaims/")
    assert "preconditions" not in json.loads(first.content)  # by name: the create's UID is unknown
    assert len(fake.calls("GET", r"/sandboxclaims/")) == 1  # found at the first look
    assert json.loads(second.content)["preconditions"] == {"uid": "late"}  # what landed


@pytest.mark.usefixtures("quick_looks")
async def test_async_a_create_landing_after_its_rollback_is_deleted() -> None:
    fake = LandsLate()
    async with httpx_async_client(fake) as c:
        with pytest.raises(SandboxConnectionError):
            await c.create("pool")
        assert not fake.claims()


@pytest.mark.usefixtures("quick_looks")
def test_the_looks_for_a_late_create_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = StoredThen("504")  # the DELETE finds it: nothing can land later, no look
    with pytest.raises(RequestError):
        httpx_sync_client(fake).create("pool")
    assert not fake.calls("GET", r".")
    never = FakeKube()

    def lost(fake: FakeKube, resource: str, obj: dict[str, Any]) -> None:
        fake.store.clear()  # (so the DELETE finds nothing) and it never lands
        raise httpx.ReadError("connection reset by peer")

    never.on_create = lost
    with pytest.raises(SandboxConnectionError):
        httpx_sync_client(never).create("pool")
    assert len(never.calls("GET", r"/sandboxclaims/")) == 3  # one per LOST_CREATE_LOOKS
    monkeypatch.setattr(_k8s, "CLEANUP_TIMEOUT", 0.0)
    never.requests.clear()
    with pytest.raises(SandboxConnectionError):
        httpx_sync_client(never).create("pool")
    assert len(never.calls("DELETE", r".")) == 1 and not never.calls("GET", r".")  # no time left to look


async def test_async_a_cancelled_create_is_cleaned_up_by_aclose_after_a_second_cancel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cleanup of a cancelled create runs in a task the client keeps: a second
    cancellation ends the create's wait for it, not the cleanup, which aclose awaits."""
    monkeypatch.setattr(_k8s, "LOST_CREATE_LOOKS", (0.2, 0.01, 0.01))
    fake = LandsLate()
    posted, deleted = asyncio.Event(), asyncio.Event()

    async def handler(req: httpx.Request) -> httpx.Response:
        if req.method == "POST":  # the answer never comes
            fake.post(req)
            posted.set()
            await asyncio.Event().wait()
        resp = fake(req)
        if req.method == "DELETE":
            deleted.set()
        return resp

    c = httpx_async_client(fake)
    c.kube.http = httpx.AsyncClient(base_url=fakes.SERVER, transport=httpx.MockTransport(handler))
    async with c:
        task = asyncio.ensure_future(c.create("pool"))
        await posted.wait()
        task.cancel()
        await deleted.wait()  # the cleanup's DELETE found nothing; the claim lands now
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert fake.claims()  # the look is still to come
    assert not fake.claims() and len(fake.calls("DELETE", r"/sandboxclaims/")) == 2


# ---- deletes are conditioned on the UID of what the handle created --------------------


def _replaced(fake: FakeKube, resource: str, name: str) -> None:
    """Another client's object under the name, made after ours went."""
    fake.put(resource, {"metadata": {"name": name, "uid": "theirs"}})


def _with_uid(fake: FakeKube, resource: str, obj: dict[str, Any]) -> None:
    obj["metadata"]["uid"] = "ours"


@pytest.mark.parametrize("pool", [True, False])
def test_delete_leaves_an_object_made_again_under_the_name(pool: bool) -> None:
    fake = FakeKube()
    fake.on_create = _with_uid
    c = httpx_sync_client(fake)
    if pool:
        sb = c.create("pool", wait=False)
        key = ("sandboxclaims", sb.claim)
    else:
        sb = c.create(pod_spec={"containers": [{"name": "c", "image": "x"}]}, name="mine", wait=False)
        key = ("sandboxes", sb.name)
    _replaced(fake, *key)
    sb.delete(wait=True, timeout=0.5)  # ours is gone already: no error, nothing to wait for
    [delete] = fake.calls("DELETE", ".")
    assert json.loads(delete.content)["preconditions"] == {"uid": "ours"}
    assert fake.store[(key[0], "default", key[1])]["metadata"]["uid"] == "theirs"


async def test_async_delete_leaves_an_object_made_again_under_the_name() -> None:
    fake = FakeKube()
    fake.on_create = _with_uid
    async with httpx_async_client(fake) as c:
        sb = await c.create("pool", wait=False)
        _replaced(fake, "sandboxclaims", sb.claim)
        await sb.delete()
    assert fake.store[("sandboxclaims", "default", sb.claim)]["metadata"]["uid"] == "theirs"


def test_the_rollback_of_a_failed_wait_leaves_an_object_made_again_under_the_name() -> None:
    fake = FakeKube()

    def gone_and_replaced(f: FakeKube, resource: str, obj: dict[str, Any]) -> None:
        _with_uid(f, resource, obj)
        f.emit(resource, obj["metadata"]["name"], "DELETED", obj)  # ours went while create waited
        _replaced(f, resource, obj["metadata"]["name"])

    fake.on_create = gone_and_replaced
    with pytest.raises(NotFoundError, match="deleted while waiting"):
        httpx_sync_client(fake).create(pod_spec={"containers": [{"name": "c", "image": "x"}]}, name="mine")
    assert json.loads(fake.calls("DELETE", ".")[0].content)["preconditions"] == {"uid": "ours"}
    assert fake.store[("sandboxes", "default", "mine")]["metadata"]["uid"] == "theirs"


def _claimed(fake: FakeKube) -> None:
    """Claim job-1 (UID ours) bound to Sandbox sb-1, which its controller ownerReference
    ties to that claim."""
    fake.put("sandboxclaims", {"metadata": {"name": "job-1", "uid": "ours"}, "status": {"sandbox": {"name": "sb-1"}}})
    owner = {"kind": "SandboxClaim", "name": "job-1", "uid": "ours", "controller": True}
    fake.put("sandboxes", {"metadata": {"name": "sb-1", "uid": "sb-uid", "ownerReferences": [owner]}})


@pytest.mark.parametrize("by", ["job-1", "sb-1"], ids=["by claim", "by sandbox"])
def test_a_handle_from_get_deletes_only_the_claim_it_read(by: str) -> None:
    """get() read the claim (or its Sandbox, whose ownerReference holds the claim's UID):
    the handle's delete() is conditioned on that UID, so a claim made again under the
    name by another client is left alone (the handle's UID was "", a delete by name)."""
    fake = FakeKube()
    _claimed(fake)
    sb = httpx_sync_client(fake).get(by)
    assert sb.claim == "job-1"
    _replaced(fake, "sandboxclaims", "job-1")
    assert sb.delete() is False
    [delete] = fake.calls("DELETE", "/sandboxclaims/job-1")
    assert json.loads(delete.content)["preconditions"] == {"uid": "ours"}
    assert fake.store[("sandboxclaims", "default", "job-1")]["metadata"]["uid"] == "theirs"


@pytest.mark.parametrize("by", ["job-1", "sb-1"], ids=["by claim", "by sandbox"])
async def test_async_a_handle_from_get_deletes_only_the_claim_it_read(by: str) -> None:
    fake = FakeKube()
    _claimed(fake)
    async with httpx_async_client(fake) as c:
        sb = await c.get(by)
        _replaced(fake, "sandboxclaims", "job-1")
        assert await sb.delete() is False
    [delete] = fake.calls("DELETE", "/sandboxclaims/job-1")
    assert json.loads(delete.content)["preconditions"] == {"uid": "ours"}
    assert fake.store[("sandboxclaims", "default", "job-1")]["metadata"]["uid"] == "theirs"


def test_a_handle_from_get_deletes_its_own_claim() -> None:
    fake = FakeKube()
    _claimed(fake)
    assert httpx_sync_client(fake).get("job-1").delete() is True
    assert ("sandboxclaims", "default", "job-1") not in fake.store
