"""Watch errors map to the documented types: a watch refused with 403, or one whose
ERROR event carries a 403 Status, is an AuthError while create() or get() waits (and the
claim is rolled back); watch_error maps the Status codes of ERROR events."""

from __future__ import annotations

import json

import httpx
import pytest

from agent_sandbox_sdk import AuthError, NotFoundError, RequestError, _k8s

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
