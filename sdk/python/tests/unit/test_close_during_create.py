"""close() / aclose() while a create() waits for its sandbox: the wait ends with
SandboxError and the create deletes what it made before the client's connections close
(the rollback DELETE went on the closed client, whose RuntimeError escaped the rollback
and left the claim behind). A delete on a closed client is a SandboxError, logged by a
handle's quiet cleanup."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest

from agent_sandbox_sdk import AsyncSandbox, Sandbox, SandboxError

from .fakes import FakeKube, httpx_async_client, httpx_sync_client

pytestmark = pytest.mark.usefixtures("no_backoff")

POD = {"containers": [{"name": "c", "image": "x"}]}


def _with_uid(fake: FakeKube, resource: str, obj: dict[str, Any]) -> None:
    obj["metadata"]["uid"] = "ours"


def _watching(fake: FakeKube) -> bool:
    return any(r.url.params.get("watch") for r in list(fake.requests))


def _left(fake: FakeKube) -> list[tuple[str, str, str]]:
    return [k for k in fake.store if k[0] in ("sandboxclaims", "sandboxes")]


@pytest.mark.parametrize(
    ("what", "early_handout"),
    [("pool", True), ("pool", False), ("pod", True)],
    ids=["claim, hand-out", "claim", "sandbox"],
)
def test_close_while_create_waits_rolls_the_create_back_first(what: str, early_handout: bool) -> None:
    fake = FakeKube()  # its watches bring nothing: the sandbox never gets Ready
    fake.on_create = _with_uid
    c = httpx_sync_client(fake)
    c.early_handout = early_handout
    raised: list[BaseException] = []

    def create() -> None:
        try:
            c.create("pool", timeout=30) if what == "pool" else c.create(pod_spec=POD, timeout=30)
        except BaseException as e:
            raised.append(e)

    t = threading.Thread(target=create)
    t.start()
    deadline = time.monotonic() + 10
    while not _watching(fake) and time.monotonic() < deadline:
        time.sleep(0.01)
    c.close()
    assert _left(fake) == [], "close() returned before the create deleted what it made"
    t.join(10)
    assert not t.is_alive()
    [e] = raised
    assert type(e) is SandboxError and "the client was closed" in str(e), repr(e)
    [delete] = fake.calls("DELETE", ".")
    assert json.loads(delete.content)["preconditions"] == {"uid": "ours"}


@pytest.mark.parametrize("what", ["pool", "pod"])
async def test_aclose_while_create_waits_rolls_the_create_back_first(what: str) -> None:
    fake = FakeKube()
    fake.on_create = _with_uid
    c = httpx_async_client(fake)
    if what == "pool":
        task = asyncio.ensure_future(c.create("pool", timeout=30))
    else:
        task = asyncio.ensure_future(c.create(pod_spec=POD, timeout=30))
    for _ in range(1000):
        if _watching(fake):
            break
        await asyncio.sleep(0.01)
    await c.aclose()
    assert _left(fake) == [], "aclose() returned before the create deleted what it made"
    with pytest.raises(SandboxError, match="the client was closed") as info:
        await task
    assert type(info.value) is SandboxError
    [delete] = fake.calls("DELETE", ".")
    assert json.loads(delete.content)["preconditions"] == {"uid": "ours"}


async def test_a_cancelled_create_wait_is_still_a_cancellation() -> None:
    fake = FakeKube()
    fake.on_create = _with_uid
    async with httpx_async_client(fake) as c:
        task = asyncio.ensure_future(c.create("pool", timeout=30))
        for _ in range(1000):
            if _watching(fake):
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert _left(fake) == []


def test_a_quiet_delete_on_a_closed_client_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    """When the rollback comes too late all the same (close() gave up waiting), the
    closed client's error is a SandboxError, logged naming the claim, and the create's
    own error goes on (httpx's RuntimeError escaped the rollback)."""
    fake = FakeKube()
    fake.put("sandboxclaims", {"metadata": {"name": "job-1", "uid": "ours"}})
    c = httpx_sync_client(fake)
    c.close()
    with caplog.at_level("WARNING", logger="agent_sandbox_sdk"):
        Sandbox(c, "default", "", claim="job-1")._delete_quietly()
    assert "job-1" in caplog.text and "may be left behind" in caplog.text


async def test_async_a_quiet_delete_on_a_closed_client_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeKube()
    c = httpx_async_client(fake)
    await c.aclose()
    with caplog.at_level("WARNING", logger="agent_sandbox_sdk"):
        await AsyncSandbox(c, "default", "", claim="job-1")._delete_quietly()
    assert "job-1" in caplog.text and "may be left behind" in caplog.text


def test_close_on_the_creating_thread_does_not_wait_for_that_create() -> None:
    """close() called on the thread of the create() in flight (a signal handler's): it
    cannot wait for that create, so it does not (it waited out its bound)."""
    fake = FakeKube()
    c = httpx_sync_client(fake)
    took: list[float] = []

    def close_now(f: FakeKube, resource: str, obj: dict[str, Any]) -> None:
        start = time.monotonic()
        c.close()
        took.append(time.monotonic() - start)

    fake.on_create = close_now
    with pytest.raises(SandboxError, match="closed"):
        c.create("pool", timeout=30)
    assert took and took[0] < 1.0
