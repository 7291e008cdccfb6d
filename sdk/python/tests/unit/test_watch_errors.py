"""Watch errors map to the documented types: a watch refused with 403, or one whose
ERROR event carries a 403 Status, is an AuthError while create() or get() waits (and the
claim is rolled back); watch_error maps the Status codes of ERROR events."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import AuthError, NotFoundError, RequestError, SandboxTimeoutError, _k8s

from .fakes import FakeKube, _status, httpx_async_client, httpx_sync_client

pytestmark = pytest.mark.usefixtures("no_backoff")


class ErrorEventWatch(FakeKube):
    """Every watch answers 200 with one ERROR event whose Status is a 403 (or, with
    refuse, is refused 403 outright)."""

    def __init__(self, refuse: bool = False) -> None:
        super().__init__()
        self.refuse = refuse

    def __call__(self, req: httpx.Request) -> httpx.Response:
        if req.method == "GET" and req.url.params.get("watch"):
            self.requests.append(req)
            if self.refuse:
                return _status(403, "Forbidden", "cannot watch")
            status = {"kind": "Status", "status": "Failure", "code": 403, "reason": "Forbidden", "message": "nope"}
            return httpx.Response(200, content=(json.dumps({"type": "ERROR", "object": status}) + "\n").encode())
        return super().__call__(req)


@pytest.mark.parametrize("refuse", [False, True], ids=["error event", "refused"])
@pytest.mark.parametrize("early_handout", [True, False])
def test_a_forbidden_watch_while_waiting_is_an_auth_error(refuse: bool, early_handout: bool) -> None:
    fake = ErrorEventWatch(refuse)
    c = httpx_sync_client(fake)
    c.early_handout = early_handout
    with pytest.raises(AuthError) as ei:
        c.create("pool", timeout=5)
    assert ei.value.status == 403
    assert not [k for k in fake.store if k[0] == "sandboxclaims"]  # rolled back
    fake.put("sandboxclaims", {"metadata": {"name": "cl"}, "spec": {}})
    with pytest.raises(AuthError):
        c.get("cl", timeout=5)


@pytest.mark.parametrize("refuse", [False, True], ids=["error event", "refused"])
@pytest.mark.parametrize("early_handout", [True, False])
async def test_async_a_forbidden_watch_while_waiting_is_an_auth_error(refuse: bool, early_handout: bool) -> None:
    fake = ErrorEventWatch(refuse)
    async with httpx_async_client(fake) as c:
        c.early_handout = early_handout
        with pytest.raises(AuthError):
            await c.create("pool", timeout=5)
        fake.put("sandboxclaims", {"metadata": {"name": "cl"}, "spec": {}})
        with pytest.raises(AuthError):
            await c.get("cl", timeout=5)


def test_watch_error_events_are_mapped() -> None:
    assert isinstance(_k8s.watch_error({"code": 401, "message": "m"}, "w"), AuthError)
    assert isinstance(_k8s.watch_error({"code": 404}, "w"), NotFoundError)
    e = _k8s.watch_error({"code": 500, "reason": "InternalError", "message": "boom"}, "w")
    assert isinstance(e, RequestError) and (e.status, e.code, str(e)) == (500, "InternalError", "w: boom")
    assert _k8s.watch_error({}, "w").status == 500  # type: ignore[attr-defined]


class ErrorHandoutStream(FakeKube):
    """The hand-out stream's watch (every bound Sandbox) always answers one ERROR event
    (a 500: not a refusal of the watch itself), after a turn of the event loop (as a
    network read would take); a claim's watch ends at once, empty."""

    def __init__(self) -> None:
        super().__init__()
        self.handout_watches = 0
        self.on_create = lambda fake, resource, obj: obj["metadata"].setdefault("uid", "claim-uid")

    def __call__(self, req: httpx.Request) -> Any:
        if req.method == "GET" and req.url.params.get("watch") and req.url.path.endswith("/sandboxes"):
            self.handout_watches += 1
            status = {"kind": "Status", "status": "Failure", "code": 500, "reason": "InternalError", "message": "etcd"}
            line = json.dumps({"type": "ERROR", "object": status}, separators=(",", ":")) + "\n"
            return _after_a_turn(httpx.Response(200, content=line.encode()))
        return super().__call__(req)


async def _after_a_turn(resp: httpx.Response) -> httpx.Response:
    await asyncio.sleep(0)
    return resp


async def test_async_handout_stream_backs_off_on_error_events_then_gives_up() -> None:
    # A watch that ends on an ERROR event brought "news" (a line), yet it must not be
    # opened again at once: the stream backs off, and after a few such ends it fails its
    # waits (the claim decides) instead of watching on.
    fake = ErrorHandoutStream()
    async with httpx_async_client(fake) as c:
        with pytest.raises(SandboxTimeoutError):
            await c.create("pool", timeout=1.5)
        assert 2 <= fake.handout_watches <= 8, f"{fake.handout_watches} hand-out watches in 1.5 s"
        assert not c.kube._streams["default"].running()  # it gave up
