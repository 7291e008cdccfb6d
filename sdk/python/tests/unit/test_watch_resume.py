"""A wait by watch outlives a failed watch: a watch is idempotent, so one refused with a
transient status (429, 500, 503), one whose connection cannot be made and one whose
connection drops while it is read are opened again, after a back-off, from the
resourceVersion read up to, until the caller's deadline; create() neither fails nor
rolls the claim back. A refusal that is not transient still ends the wait."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import AuthError, SandboxTimeoutError, _k8s

from .fakes import FakeKube, _status, httpx_async_client, httpx_sync_client
from .test_client_fake import bind_on_create

FAULTS = ["503", "429", "connect", "drop", "500"]


class FlakyWatch(FakeKube):
    """The first watches of claims fail as faults says, one fault each: refused with
    that status, no connection ("connect"), or ("drop") the first waiting event sent and
    then the connection lost (the rest stays for the next watch)."""

    def __init__(self, faults: list[str], async_body: bool = False) -> None:
        super().__init__()
        self.faults = list(faults)
        self.async_body = async_body
        self.on_create = bind_on_create

    def __call__(self, req: httpx.Request) -> httpx.Response:
        if not (req.method == "GET" and req.url.params.get("watch") and req.url.path.endswith("/sandboxclaims")):
            return super().__call__(req)
        if not self.faults:
            return super().__call__(req)
        self.requests.append(req)
        fault = self.faults.pop(0)
        if fault == "connect":
            raise httpx.ConnectError("connection refused", request=req)
        if fault != "drop":
            return _status(int(fault), "TooManyRequests" if fault == "429" else "ServiceUnavailable", "busy")
        name = req.url.params["fieldSelector"].removeprefix("metadata.name=")
        events = self.events.get(("sandboxclaims", name), [])
        first = (json.dumps({"type": events[0][0], "object": events[0][1]}) + "\n").encode()
        del events[0]
        return httpx.Response(200, content=_adrop(first, req) if self.async_body else _drop(first, req))


def _drop(first: bytes, req: httpx.Request) -> Iterator[bytes]:
    yield first
    raise httpx.ReadError("connection reset by peer", request=req)


async def _adrop(first: bytes, req: httpx.Request) -> AsyncIterator[bytes]:
    yield first
    raise httpx.ReadError("connection reset by peer", request=req)


def _watches(fake: FakeKube) -> list[httpx.Request]:
    return fake.calls("GET", r"/sandboxclaims$")


def _check_resumed(fake: FlakyWatch, claim: str) -> None:
    watches = _watches(fake)
    assert len(watches) == len(FAULTS) + 1
    dropped = watches[FAULTS.index("drop")]
    after = watches[FAULTS.index("drop") + 1]
    # the watch after the drop goes on from the event the dropped one delivered
    assert int(after.url.params["resourceVersion"]) > int(dropped.url.params["resourceVersion"])
    assert ("sandboxclaims", "default", claim) in fake.store  # not rolled back


@pytest.fixture
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_k8s, "WATCH_BACKOFF_MAX", 0.2, raising=False)


@pytest.mark.usefixtures("quick_backoff")
def test_create_outlives_failed_watches() -> None:
    fake = FlakyWatch(FAULTS)
    c = httpx_sync_client(fake)
    c.early_handout = False
    sb = c.create("pool", timeout=30)
    assert sb.name == f"{sb.claim}-sb"
    _check_resumed(fake, sb.claim)


@pytest.mark.usefixtures("quick_backoff")
async def test_async_create_outlives_failed_watches() -> None:
    fake = FlakyWatch(FAULTS, async_body=True)
    async with httpx_async_client(fake) as c:
        c.early_handout = False
        sb = await c.create("pool", timeout=30)
        assert sb.name == f"{sb.claim}-sb"
    _check_resumed(fake, sb.claim)


def _never_bound(fake: FakeKube, resource: str, obj: dict[str, Any]) -> None:
    pass


@pytest.mark.parametrize("fault", ["503", "connect"])
def test_failed_watches_end_at_the_deadline(fault: str) -> None:
    fake = FlakyWatch([fault] * 1000)
    fake.on_create = _never_bound
    c = httpx_sync_client(fake)
    c.early_handout = False
    with pytest.raises(SandboxTimeoutError, match="the last watch failed"):
        c.create("pool", timeout=1.0)
    assert 3 <= len(_watches(fake)) <= 12  # backed off, not spun


def test_a_refused_watch_still_ends_the_wait() -> None:
    fake = FlakyWatch(["403"])
    c = httpx_sync_client(fake)
    c.early_handout = False
    with pytest.raises(AuthError):
        c.create("pool", timeout=30)
    assert len(_watches(fake)) == 1
