"""The I/O-free core the sync and async clients share: retry decisions, the watch loop,
create() argument checks, file-write options, error mapping of the kube client."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import SandboxConnectionError, SandboxError, SandboxTimeoutError, _k8s, _wire


def _resp(status: int, body: Any = None) -> httpx.Response:
    return httpx.Response(status, json=body if body is not None else {})


def _count(att: _wire.Attempts) -> int:
    n = 0
    while att.next():
        n += 1
    return n


def test_attempts_budget() -> None:
    assert _count(_wire.Attempts(True, {})) == 3
    assert _count(_wire.Attempts(False, {})) == 1
    woke = _wire.Attempts(False, {})
    assert woke.next() and woke.may_wake()
    woke.woke = True
    assert woke.next() and not woke.may_wake() and not woke.next()


def test_attempts_retry_decisions() -> None:
    att = _wire.Attempts(True, {})
    att.next()
    assert att.retry_status(_resp(503)) and not att.retry_status(_resp(500)) and att.backoff == pytest.approx(0.2)
    assert not att.may_wake()  # retries first
    att.next()
    att.next()
    assert att.last and not att.retry_status(_resp(503)) and att.backoff == pytest.approx(0.8)
    assert att.may_wake() and att.may_wake_on(_resp(502), via_kube=False)
    assert not att.may_wake_on(_resp(404, {"kind": "Status"}), via_kube=False)
    assert att.may_wake_on(_resp(404, {"kind": "Status"}), via_kube=True)


def test_attempts_kwargs_per_attempt() -> None:
    made: list[int] = []

    def make() -> bytes:
        made.append(1)
        return b"x"

    kw: dict[str, Any] = {"headers": {"A": "call"}, "make_content": make, "timeout": 5}
    att = _wire.Attempts(True, kw)
    first = att.kwargs({"A": "route", "B": "route"})
    second = att.kwargs({})
    assert first == {"headers": {"A": "call", "B": "route"}, "content": b"x", "timeout": 5}
    assert second["headers"] == {"A": "call"} and len(made) == 2


def _loop(timeout: float = 5.0) -> tuple[_k8s.WaitLoop, _k8s.Wait]:
    w = _k8s.Wait("Sandbox", "sb")
    return _k8s.WaitLoop("sandboxes", "ns", "sb", timeout, w, _k8s.on_sandbox_event), w


def _sandbox(rv: str, ready: bool) -> dict[str, Any]:
    cond = {"type": "Ready", "status": "True" if ready else "False", "reason": "R" if ready else "Starting"}
    return {"metadata": {"name": "sb", "resourceVersion": rv}, "status": {"conditions": [cond]}}


def test_wait_loop_events() -> None:
    loop, w = _loop()
    assert not loop.first(_sandbox("1", False)) and loop.start() == "1"
    assert not loop.event("BOOKMARK", {"metadata": {"resourceVersion": "7"}}) and loop.rv == "7"
    assert w.reason == "Starting" and loop.pause() is None  # an event came: no sleep
    assert loop.event("ERROR", {"code": 410}) and loop.rv == ""  # gone: read it, then watch
    assert loop.needs_get() and not loop.refreshed(_sandbox("8", False)) and loop.rv == "8"
    assert not loop.needs_get()
    # a transient ERROR (an etcd without leader) is watched again after a back-off
    assert loop.event("ERROR", {"code": 500, "message": "boom"}) and loop.failed
    assert "boom" in str(loop.last_error)
    with pytest.raises(SandboxError, match="watch sandboxes ns/sb: forbidden"):
        loop.event("ERROR", {"code": 403, "message": "nope"})
    done = _sandbox("9", True)
    assert loop.event("MODIFIED", done) and w.done and loop.obj is done


def test_wait_loop_first_done_and_timeout() -> None:
    loop, _ = _loop()
    ready = _sandbox("3", True)
    assert loop.first(ready) and loop.obj is ready
    loop, _ = _loop(timeout=0.0)
    assert not loop.first(_sandbox("1", False))
    assert loop.left() <= 0 and loop.start() == "1" and loop.pause() == 0.0
    err = loop.timeout_error()
    assert isinstance(err, SandboxTimeoutError) and "Sandbox ns/sb not ready after 0s (last reason Starting)" in str(
        err
    )


def _plan(**kw: Any) -> _k8s.CreatePlan:
    args: dict[str, Any] = dict(
        name=None,
        env=None,
        labels=None,
        annotations=None,
        pod_labels=None,
        pod_annotations=None,
        ttl=None,
        shutdown_time=None,
    )
    args.update(kw)
    pool, template, pod_spec = args.pop("pool", None), args.pop("template", None), args.pop("pod_spec", None)
    return _k8s.plan_create(pool, template, pod_spec, **args)


def test_plan_create_checks() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        _plan(pool="p", template="t")
    with pytest.raises(ValueError, match="exactly one"):
        _plan()
    with pytest.raises(ValueError, match="pool is empty"):
        _plan(pool="")
    with pytest.raises(ValueError, match="ttl"):
        _plan(pool="p", ttl=0)


def test_plan_create_bodies() -> None:
    resource, body = _plan(pool="p", name="c1", labels={"a": "b"}).body(None)
    assert resource == "sandboxclaims" and body["spec"]["warmPoolRef"] == {"name": "p"}
    assert _k8s.created_names(resource, body) == ("", "c1")
    tmpl = {"spec": {"podTemplate": {"spec": {"containers": [{"name": "c"}]}}}}
    resource, body = _plan(template="t").body(tmpl)
    assert resource == "sandboxes" and body["metadata"]["name"].startswith("sandbox-")
    assert body["spec"]["podTemplate"]["spec"]["containers"] == [{"name": "c"}]
    assert _k8s.created_names(resource, body) == (body["metadata"]["name"], "")


def test_listing_helpers() -> None:
    owned = {"metadata": {"name": "s1", "ownerReferences": [{"kind": "SandboxClaim", "name": "c1"}]}}
    infos = _k8s.sandbox_infos({"items": [owned, {"metadata": {"name": "s2"}}]})
    assert [(i.name, i.claim) for i in infos] == [("s1", "c1"), ("s2", "")]
    assert _k8s.item_names({"items": None}) == [] and _k8s.item_names({"items": [owned]}) == ["s1"]


def test_write_options(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"12345")
    with open(f, "rb") as fh:
        fh.read(2)
        kw = _wire.write_options(fh, 0o640)
    assert kw["params"] == {"mode": "0640"} and kw["headers"]["Content-Length"] == "3"
    assert "Content-Length" not in _wire.write_options(io.BytesIO(b"x"), None)["headers"]  # no fileno: chunked
    assert _wire.write_options(b"x", None)["params"] == {}


def test_upload_files_and_child(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "d" / "b.txt").write_text("b")
    assert [r for _, r in _wire.upload_files(tmp_path, "dst/")] == ["dst/a.txt", "dst/d/b.txt"]
    assert [r for _, r in _wire.upload_files(tmp_path, "/")] == ["a.txt", "d/b.txt"]
    assert _wire.child("x/", "y") == "x/y"


def test_kube_error_mapping() -> None:
    req = httpx.Request("GET", "https://kube.test/")
    with (
        pytest.raises(SandboxConnectionError, match=r"get x: cannot reach the API server https://kube\.test"),
        _k8s.reaching("get x", "https://kube.test"),
    ):
        raise httpx.ConnectError("refused", request=req)
    with _k8s.watching("watch x", streaming=True):  # a read timeout just ends a streaming watch
        raise httpx.ReadTimeout("slow", request=req)
    with (
        pytest.raises(SandboxConnectionError, match="watch x: ReadTimeout"),
        _k8s.watching("watch x", streaming=False),
    ):
        raise httpx.ReadTimeout("slow", request=req)
    with (
        pytest.raises(SandboxConnectionError, match="watch x: RemoteProtocolError"),
        _k8s.watching("watch x", streaming=True),
    ):
        raise httpx.RemoteProtocolError("cut", request=req)
    assert _k8s.api_result(_resp(200, {"a": 1}), "x") == {"a": 1}


def test_transport_error_mapping() -> None:
    req = httpx.Request("GET", "http://sb/")
    e = _wire.transport_error(httpx.ConnectError("refused", request=req), "run", False)
    assert "cannot connect to the sandbox" in str(e)
    e = _wire.transport_error(httpx.ReadError("reset", request=req), "run", False)
    assert "connection to the sandbox lost" in str(e) and "was not retried" in str(e)
    e = _wire.transport_error(httpx.ReadError("reset", request=req), "read f", True)
    assert "not retried" not in str(e)
