"""API calls that are idempotent (GET, DELETE, merge PATCH) are made again after a
transient refusal (429 with or without Retry-After, 5xx) or a connection lost mid-way,
within the call's timeout; a POST never is, nor a call to a server that cannot be
reached. A wait whose watch expired (410) reads the object before watching again, so a
deletion in the gap ends it; a transient ERROR event is watched again."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import NotFoundError, RequestError, SandboxConnectionError, _k8s, _wire

from .fakes import FakeKube, httpx_async_client, httpx_sync_client
from .test_client_fake import bind_on_create


class Flaky(FakeKube):
    """Answers the first request of each (method, resource) in ``faults`` with the status
    given (429 with Retry-After: 0, or a 5xx), or drops it (0: a reset connection)."""

    def __init__(self, faults: dict[tuple[str, str], list[int]]) -> None:
        super().__init__()
        self.faults = faults

    def __call__(self, req: httpx.Request) -> httpx.Response:
        for (method, part), codes in self.faults.items():
            if req.method == method and part in req.url.path and not req.url.params.get("watch") and codes:
                self.requests.append(req)
                code = codes.pop(0)
                if code == 0:
                    raise httpx.ReadError("connection reset by peer", request=req)
                headers = {"Retry-After": "0"} if code == 429 else {}
                body = {"kind": "Status", "status": "Failure", "code": code, "reason": "TooManyRequests"}
                return httpx.Response(code, json=body, headers=headers)
        return super().__call__(req)


def _claims(fake: FakeKube) -> list[Any]:
    return [k for k in fake.store if k[0] == "sandboxclaims"]


@pytest.mark.parametrize("code", [429, 503, 0], ids=["429", "503", "reset"])
def test_cleanup_delete_survives_a_transient_refusal(code: int) -> None:
    fake = Flaky({("DELETE", "sandboxclaims"): [code]})
    fake.on_create = bind_on_create
    with httpx_sync_client(fake).create("pool", timeout=5):
        pass
    assert not _claims(fake)  # left behind before: the one DELETE was refused
    assert len(fake.calls("DELETE", "sandboxclaims")) == 2


@pytest.mark.parametrize("code", [429, 500, 0], ids=["429", "500", "reset"])
async def test_async_cleanup_delete_survives_a_transient_refusal(code: int) -> None:
    fake = Flaky({("DELETE", "sandboxclaims"): [code]})
    fake.on_create = bind_on_create
    async with httpx_async_client(fake) as c, await c.create("pool", timeout=5):
        pass
    assert not _claims(fake)


def test_get_retried_post_not() -> None:
    fake = Flaky({("GET", "sandboxes/a"): [503, 429], ("POST", "sandboxclaims"): [503]})
    fake.put("sandboxes", {"metadata": {"name": "a"}})
    c = httpx_sync_client(fake)
    assert c.kube.get("sandboxes", "default", "a")["metadata"]["name"] == "a"
    assert len(fake.calls("GET", "sandboxes/a$")) == 3
    with pytest.raises(RequestError) as ei:
        c.kube.create("sandboxclaims", "default", {"metadata": {"name": "x"}, "spec": {}})
    assert ei.value.status == 503 and len(fake.calls("POST", "sandboxclaims")) == 1


def test_permanent_errors_not_retried() -> None:
    fake = Flaky({("GET", "sandboxes/a"): [400]})
    c = httpx_sync_client(fake)
    with pytest.raises(RequestError):
        c.kube.get("sandboxes", "default", "a")
    with pytest.raises(NotFoundError):
        c.kube.get("sandboxes", "default", "b")
    assert len(fake.calls("GET", "sandboxes/")) == 2


def test_retry_policy() -> None:
    get = _k8s.get_call("sandboxes", "ns", "a")
    post = _k8s.create_call("sandboxclaims", "ns", {"metadata": {"name": "x"}})
    busy = RequestError("busy", status=429, retry_after=1.5)
    assert _k8s.call_retry_delay(get, busy, 1, 10.0) == 1.5  # the server's Retry-After
    assert _k8s.call_retry_delay(get, busy, 1, 1.0) is None  # past the call's deadline
    assert _k8s.call_retry_delay(post, busy, 1, 10.0) is None  # never a POST
    assert _k8s.call_retry_delay(get, RequestError("x", status=503), 3, 10.0) == pytest.approx(0.4)
    assert _k8s.call_retry_delay(get, RequestError("x", status=409), 1, 10.0) is None
    lost = SandboxConnectionError("lost")
    lost.__cause__ = httpx.RemoteProtocolError("closed before the answer")
    refused = SandboxConnectionError("refused")
    refused.__cause__ = httpx.ConnectError("connection refused")
    assert _k8s.call_retry_delay(get, lost, 1, 10.0) == pytest.approx(0.1)
    assert _k8s.call_retry_delay(get, refused, 1, 10.0) is None  # "is the cluster up?" at once
    resp = httpx.Response(429, headers={"Retry-After": "3"}, json={"message": "slow down"})
    e = _k8s.api_error(resp, "get")
    assert isinstance(e, RequestError) and e.retry_after == 3.0


# ---- waits across a 410 Gone, and transient ERROR events ----------------------------


class ExpiredWatch(FakeKube):
    """The first watch of each name answers ERROR 410 (the resourceVersion expired);
    ``gone`` deletes the object meanwhile, without an event any later watch would show.
    ``error500`` answers the first watch with an ERROR event 500 instead."""

    def __init__(self, gone: bool = False, error500: bool = False) -> None:
        super().__init__()
        self.gone, self.error500, self.watches = gone, error500, 0

    def __call__(self, req: httpx.Request) -> httpx.Response:
        if req.method == "GET" and req.url.params.get("watch"):
            self.watches += 1
            if self.watches == 1:
                self.requests.append(req)
                code = 500 if self.error500 else 410
                if self.gone:
                    name = req.url.params["fieldSelector"].removeprefix("metadata.name=")
                    self.store.pop(("sandboxes", "default", name), None)
                    self.events.pop(("sandboxes", name), None)
                st = {"kind": "Status", "status": "Failure", "code": code, "message": "expired or busy"}
                return httpx.Response(200, content=(json.dumps({"type": "ERROR", "object": st}) + "\n").encode())
        return super().__call__(req)


def test_delete_wait_sees_a_deletion_behind_a_410() -> None:
    fake = ExpiredWatch(gone=True)
    obj = fake.put("sandboxes", {"metadata": {"name": "sb", "uid": "u"}, "spec": {}})
    c = httpx_sync_client(fake)
    w = _k8s.Wait("Sandbox", "sb")
    c.kube.wait("sandboxes", "default", "sb", obj, 3, w, _k8s.on_deleted)
    assert w.done  # timed out before: the watch from "" never showed the deletion


async def test_async_delete_wait_sees_a_deletion_behind_a_410() -> None:
    fake = ExpiredWatch(gone=True)
    obj = fake.put("sandboxes", {"metadata": {"name": "sb", "uid": "u"}, "spec": {}})
    async with httpx_async_client(fake) as c:
        w = _k8s.Wait("Sandbox", "sb")
        await c.kube.wait("sandboxes", "default", "sb", obj, 3, w, _k8s.on_deleted)
    assert w.done


def test_wait_outlives_a_transient_error_event() -> None:
    fake = ExpiredWatch(error500=True)
    obj = fake.put("sandboxes", {"metadata": {"name": "sb"}, "spec": {}})
    fake.emit("sandboxes", "sb", "DELETED", obj)
    c = httpx_sync_client(fake)
    w = _k8s.Wait("Sandbox", "sb")
    c.kube.wait("sandboxes", "default", "sb", obj, 5, w, _k8s.on_deleted)
    assert w.done and fake.watches == 2  # raised RequestError 500 before


def test_unreachable_server_fails_at_once() -> None:
    c = httpx_sync_client(FakeKube())
    c.kube.http = httpx.Client(base_url="http://127.0.0.1:9", transport=httpx.HTTPTransport())
    with pytest.raises(SandboxConnectionError):
        c.kube.get("sandboxes", "default", "a")


def test_a_cleanup_that_still_fails_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    fake = Flaky({("DELETE", "sandboxclaims"): [403]})  # not transient: not made again
    fake.on_create = bind_on_create
    with caplog.at_level("WARNING", logger="agent_sandbox_sdk"), httpx_sync_client(fake).create("pool", timeout=5):
        pass
    assert _claims(fake)  # left behind, and said so
    assert any("may be left behind" in r.getMessage() for r in caplog.records)


def test_buffers_are_written_as_bytes() -> None:
    """A bytearray or memoryview (bytes to a type checker) is written as its bytes: before,
    it was taken for an iterable of chunks and failed with a TypeError mid-request."""
    from .fakes import FakeSandboxd
    from .test_client_fake import bind_on_create as bind

    fake = FakeKube()
    fake.on_create = bind
    fake.sandboxd = sbd = FakeSandboxd()
    sb = httpx_sync_client(fake).create("pool")
    sb.files.write("a", bytearray(b"abc"))
    sb.files.write("b", memoryview(b"xyz"))
    assert sbd.files["a"] == b"abc" and sbd.files["b"] == b"xyz"
    assert _wire.stdin_content(memoryview(b"in")) == b"in"  # type: ignore[arg-type]


def test_idle_connection_check_past_fd_setsize() -> None:
    """The lean pool's staleness check works for a descriptor past FD_SETSIZE (1024):
    select() raised there, every idle connection looked closed and none was reused."""
    import resource
    import socket

    from agent_sandbox_sdk import _fasthttp

    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 1200:
        pytest.skip("the open-file limit is below 1200 descriptors")
    held = []
    try:
        while True:
            a, b = socket.socketpair()
            held += [a, b]
            if a.fileno() > 1100:
                break
        assert not _fasthttp._readable(a)  # idle, nothing to read: reusable
        b.sendall(b"x")
        assert _fasthttp._readable(a)
    finally:
        for s in held:
            s.close()


def _exec_config(tmp_path: Any) -> Any:
    """A kubeconfig whose exec plugin hands out tok-1, tok-2, ... (one per run, no expiry)."""
    import sys

    from agent_sandbox_sdk import load_kubeconfig

    runs, script = tmp_path / "runs", tmp_path / "plugin.py"
    script.write_text(
        "import json\n"
        f"with open({str(runs)!r}, 'a') as f: f.write('x')\n"
        f"n = len(open({str(runs)!r}).read())\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',"
        " 'status': {'token': f'tok-{n}'}}))\n"
    )
    kc = tmp_path / "kubeconfig"
    kc.write_text(
        json.dumps(
            {
                "current-context": "c",
                "clusters": [{"name": "k", "cluster": {"server": "https://api.test:6443"}}],
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                "users": [{"name": "u", "user": {"exec": {"command": sys.executable, "args": [str(script)]}}}],
            }
        )
    )
    return load_kubeconfig(str(kc))


def _revoking(seen: list[str]) -> Any:
    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req.headers.get("authorization", ""))
        if req.headers.get("authorization") == "Bearer tok-1":  # revoked
            return httpx.Response(401, json={"kind": "Status", "code": 401, "message": "Unauthorized"})
        return httpx.Response(200, json={"metadata": {"name": "a"}})

    return handler


def test_a_rejected_exec_credential_is_fetched_again(tmp_path: Any) -> None:
    """A 401 for an exec plugin's credential (rotated or revoked, with no expiry) runs
    the plugin again and makes the call once more: before, every later call failed with
    AuthError until the client was made anew."""
    from agent_sandbox_sdk import SandboxClient

    cfg = _exec_config(tmp_path)
    seen: list[str] = []
    c = SandboxClient(config=cfg)
    c.kube._fast.usable = False
    c.kube.http = httpx.Client(base_url=cfg.server, transport=httpx.MockTransport(_revoking(seen)), auth=cfg.auth())
    assert c.kube.get("sandboxes", "default", "a")["metadata"]["name"] == "a"
    assert seen == ["Bearer tok-1", "Bearer tok-2"]
    c.close()


async def test_async_a_rejected_exec_credential_is_fetched_again(tmp_path: Any) -> None:
    from agent_sandbox_sdk import AsyncSandboxClient

    cfg = _exec_config(tmp_path)
    seen: list[str] = []
    c = AsyncSandboxClient(config=cfg)
    c.kube._fast.usable = False
    await c.kube.http.aclose()
    c.kube.http = httpx.AsyncClient(
        base_url=cfg.server, transport=httpx.MockTransport(_revoking(seen)), auth=cfg.auth()
    )
    assert (await c.kube.get("sandboxes", "default", "a"))["metadata"]["name"] == "a"
    assert seen == ["Bearer tok-1", "Bearer tok-2"]
    await c.aclose()


class Paged(FakeKube):
    """Answers a LIST two items a page (every item without a limit), with continue
    tokens; the first ``expire`` continued pages are answered 410 (the token expired)."""

    def __init__(self, expire: int = 0) -> None:
        super().__init__()
        self.expire = expire
        self.params: list[dict[str, str]] = []

    def __call__(self, req: httpx.Request) -> httpx.Response:
        if req.method == "GET" and req.url.path.endswith("/sandboxes") and not req.url.params.get("watch"):
            self.requests.append(req)
            p = dict(req.url.params)
            self.params.append(p)
            if self.expire and p.get("continue"):
                self.expire -= 1
                return httpx.Response(410, json={"kind": "Status", "code": 410, "reason": "Expired"})
            names = sorted(n for (r, _, n) in self.store if r == "sandboxes")
            start = int(p.get("continue") or 0)
            size = 2 if p.get("limit") else len(names)
            items = [self.store[("sandboxes", "default", n)] for n in names[start : start + size]]
            more = str(start + size) if start + size < len(names) else ""
            return httpx.Response(200, json={"items": items, "metadata": {"resourceVersion": "9", "continue": more}})
        return super().__call__(req)


@pytest.mark.parametrize("expire", [0, 1], ids=["pages", "expired token"])
def test_list_is_paged(expire: int) -> None:
    fake = Paged(expire)
    for i in range(5):
        fake.put("sandboxes", {"metadata": {"name": f"s{i}"}, "spec": {}})
    c = httpx_sync_client(fake)
    got = c.kube.list("sandboxes", "default")
    assert [o["metadata"]["name"] for o in got["items"]] == [f"s{i}" for i in range(5)]
    assert all(p.get("limit") == str(_k8s.LIST_PAGE) for p in fake.params)  # before: no limit
    assert len(fake.params) == (3 if not expire else 5)


def test_list_expired_twice_is_listed_whole() -> None:
    """A token that expires again after the restart: the third try is one LIST without
    limit (before, the second 410 failed the call, whatever the list's size)."""
    fake = Paged(expire=2)
    for i in range(5):
        fake.put("sandboxes", {"metadata": {"name": f"s{i}"}, "spec": {}})
    c = httpx_sync_client(fake)
    got = c.kube.list("sandboxes", "default")
    assert [o["metadata"]["name"] for o in got["items"]] == [f"s{i}" for i in range(5)]
    assert len(fake.params) == 5 and "limit" not in fake.params[-1] and "continue" not in fake.params[-1]


async def test_async_list_is_paged() -> None:
    fake = Paged()
    for i in range(3):
        fake.put("sandboxes", {"metadata": {"name": f"s{i}"}, "spec": {}})
    async with httpx_async_client(fake) as c:
        got = await c.kube.list("sandboxes", "default")
    assert [o["metadata"]["name"] for o in got["items"]] == ["s0", "s1", "s2"] and len(fake.params) == 2


def test_a_second_401_of_the_same_credential_runs_the_plugin_once(tmp_path: Any) -> None:
    """Two calls that carried the same rejected credential: the first 401 forgets it (the
    plugin runs again), the second (generation taken before that run) keeps the fresh
    one: one run per rejected credential, not one per call that was in flight."""
    cfg = _exec_config(tmp_path)
    assert cfg.bearer_token() == "tok-1"
    gen = cfg.exec_generation()
    assert cfg.invalidate_exec(gen)
    assert cfg.bearer_token() == "tok-2"
    assert cfg.invalidate_exec(gen)  # the call may go again: with tok-2
    assert cfg.bearer_token() == "tok-2" and cfg.exec_generation() == gen + 1
