"""Pure logic: objects the SDK creates, readiness decisions, paths, bodies, errors."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

from agent_sandbox_sdk import (
    AuthError,
    DirectConnection,
    NotFoundError,
    PodProxyConnection,
    RequestError,
    RouterConnection,
    SandboxConnectionError,
    SandboxError,
    SandboxFailedError,
    _conn,
    _k8s,
    _kube_async,
    _kube_sync,
    _wire,
)
from agent_sandbox_sdk._kubeconfig import KubeConfig


def test_claim_body_shape() -> None:
    b = _k8s.claim_body(
        "c1",
        "pool",
        labels={"team": "a"},
        env={"A": "1"},
        pod_labels={"sandbox.users.io/x": "y"},
        pod_annotations={"n": "v"},
        shutdown="2030-01-01T00:00:00Z",
    )
    assert b["apiVersion"] == "extensions.agents.x-k8s.io/v1beta1" and b["kind"] == "SandboxClaim"
    assert b["metadata"]["labels"] == {"team": "a", "agents.x-k8s.io/created-by": "python-client"}
    ts = b["metadata"]["annotations"]["agents.x-k8s.io/client-first-requested-at"]
    assert abs(datetime.fromisoformat(ts.replace("Z", "+00:00")) - datetime.now(timezone.utc)) < timedelta(seconds=5)
    assert b["spec"]["warmPoolRef"] == {"name": "pool"}
    assert b["spec"]["env"] == [{"name": "A", "value": "1"}]
    assert b["spec"]["additionalPodMetadata"] == {"labels": {"sandbox.users.io/x": "y"}, "annotations": {"n": "v"}}
    assert b["spec"]["lifecycle"] == {"shutdownTime": "2030-01-01T00:00:00Z", "shutdownPolicy": "Delete"}


def test_sandbox_body_from_template() -> None:
    tmpl = {
        "spec": {
            "podTemplate": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "i", "env": [{"name": "A", "value": "old"}]}]},
            },
            "volumeClaimTemplates": [{"metadata": {"name": "ws"}, "spec": {}}],
            "service": True,
        }
    }
    b = _k8s.sandbox_body("s1", {}, template=tmpl, env={"A": "new", "B": "2"}, pod_labels={"p": "q"})
    spec = b["spec"]
    assert spec["podTemplate"]["spec"]["automountServiceAccountToken"] is False
    assert spec["podTemplate"]["spec"]["containers"][0]["env"] == [
        {"name": "A", "value": "new"},
        {"name": "B", "value": "2"},
    ]
    assert spec["podTemplate"]["metadata"]["labels"] == {"app": "x", "p": "q"}
    assert spec["volumeClaimTemplates"][0]["metadata"]["name"] == "ws" and spec["service"] is True
    # the template object itself is not modified
    assert tmpl["spec"]["podTemplate"]["spec"]["containers"][0]["env"] == [{"name": "A", "value": "old"}]


def test_shutdown_and_label_validation() -> None:
    t = _k8s.shutdown_at(60, None)
    assert t is not None
    when = datetime.strptime(t, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert timedelta(seconds=55) < when - datetime.now(timezone.utc) < timedelta(seconds=61)
    assert _k8s.shutdown_at(None, datetime(2030, 1, 2, 3, 4, 5)) == "2030-01-02T03:04:05Z"
    assert _k8s.shutdown_at(None, None) is None
    with pytest.raises(ValueError):
        _k8s.shutdown_at(0, None)
    with pytest.raises(ValueError):
        _k8s.shutdown_at(5, datetime.now())
    with pytest.raises(ValueError, match="invalid key"):
        _k8s.check_labels({"bad key": "v"})
    with pytest.raises(ValueError, match="invalid value"):
        _k8s.check_labels({"k": "-bad"})
    assert _k8s.check_labels({"example.com/k": ""}) == {"example.com/k": ""}


def claim(conds: list[dict[str, str]], sandbox: str = "") -> dict[str, object]:
    st: dict[str, object] = {"conditions": conds}
    if sandbox:
        st["sandbox"] = {"name": sandbox}
    return {"metadata": {"name": "c"}, "status": st}


@pytest.mark.parametrize(
    "reason",
    ["TemplateNotFound", "WarmPoolNotFound", "InvalidMetadata", "EnvVarsInjectionRejected", "ClaimTimeout"],
)
def test_claim_terminal_reasons_fail_fast(reason: str) -> None:
    w = _k8s.Wait("SandboxClaim", "c")
    with pytest.raises(SandboxFailedError) as ei:
        _k8s.on_claim_event(
            w, "MODIFIED", claim([{"type": "Ready", "status": "False", "reason": reason, "message": "m"}])
        )
    assert ei.value.reason == reason and ei.value.detail == "m" and reason in str(ei.value)


def test_claim_transient_then_ready() -> None:
    w = _k8s.Wait("SandboxClaim", "c")
    _k8s.on_claim_event(w, "ADDED", claim([{"type": "Ready", "status": "False", "reason": "SandboxNotReady"}]))
    assert not w.done and w.reason == "SandboxNotReady" and "SandboxNotReady" in w.describe()
    _k8s.on_claim_event(w, "MODIFIED", claim([{"type": "Ready", "status": "True", "reason": "Ready"}], "sb"))
    assert w.done and w.sandbox == "sb"
    w2 = _k8s.Wait("SandboxClaim", "c")
    _k8s.on_claim_event(w2, "ADDED", claim([], "sb"), need_ready=False)
    assert w2.done
    with pytest.raises(NotFoundError):
        _k8s.on_claim_event(w2, "DELETED", claim([]))


def test_sandbox_events() -> None:
    w = _k8s.Wait("Sandbox", "s")
    obj = {"spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "R"}]}}
    _k8s.on_sandbox_event(w, "MODIFIED", obj)
    assert w.done
    fin = {"status": {"conditions": [{"type": "Finished", "status": "True", "reason": "PodFailed", "message": "x"}]}}
    with pytest.raises(SandboxFailedError, match="PodFailed"):
        _k8s.on_sandbox_event(_k8s.Wait("Sandbox", "s"), "MODIFIED", fin)
    sus = {"status": {"conditions": [{"type": "Suspended", "status": "True", "reason": "S"}]}}
    w3 = _k8s.Wait("Sandbox", "s")
    _k8s.on_sandbox_event(w3, "MODIFIED", sus, "Suspended")
    assert w3.done


def test_pod_ip_selection() -> None:
    assert _k8s.select_pod_ip(["fd00::1", "10.0.0.2"]) == "10.0.0.2"
    assert _k8s.select_pod_ip(["::ffff:10.1.2.3"]) == "10.1.2.3"
    assert _k8s.select_pod_ip(["junk", "fd00::1"]) == "fd00::1"
    assert _k8s.select_pod_ip([]) is None


def test_file_paths() -> None:
    assert _wire.file_path("/a b/c%.txt") == "/v1/files/a%20b/c%25.txt"
    assert _wire.file_path("") == "/v1/files/"
    assert _wire.file_path("./x//y/") == "/v1/files/x/y"
    with pytest.raises(ValueError, match="escapes"):
        _wire.file_path("a/../../etc/passwd")
    with pytest.raises(ValueError, match="control"):
        _wire.file_path("a\x00b")


@pytest.mark.parametrize("name", ["", ".", "..", "/etc/passwd", "a/b", "a\x00b", "../x", "/"])
def test_local_child_refuses_unsafe_names(name: str, tmp_path: Path) -> None:
    # A listing comes from inside the sandbox: download_dir must not leave local.
    with pytest.raises(SandboxError, match="unsafe entry name"):
        _wire.local_child(tmp_path, name)
    assert _wire.unsafe_entry_name(name, windows=False) and _wire.unsafe_entry_name(name, windows=True)


def test_local_child_keeps_plain_names(tmp_path: Path) -> None:
    assert _wire.local_child(tmp_path, "a.txt") == tmp_path / "a.txt"
    assert _wire.local_child(tmp_path, ".hidden") == tmp_path / ".hidden"


@pytest.mark.parametrize(
    "name", ["a\\b", "\\", "..\\x", "C:x", "c:\\windows", "f.txt:stream", "...", ". .", "\\\\srv\\s"]
)
def test_backslashes_colons_and_dots_are_unsafe_only_on_windows(name: str) -> None:
    """A backslash is a separator on Windows, a colon names a drive or a stream, and
    Windows trims trailing dots and spaces; on POSIX all are ordinary characters of a
    file name (a file named "a\\b" in the sandbox is downloaded as "a\\b")."""
    assert _wire.unsafe_entry_name(name, windows=True)
    assert not _wire.unsafe_entry_name(name, windows=False)


@pytest.mark.skipif(os.name == "nt", reason="POSIX file names")
def test_local_child_keeps_backslashes_on_posix(tmp_path: Path) -> None:
    p = _wire.local_child(tmp_path, "a\\b.txt")
    assert p.parent == tmp_path and p.name == "a\\b.txt"
    assert _wire.local_child(tmp_path, "x:y") == tmp_path / "x:y"
    assert _wire.local_child(tmp_path, "...") == tmp_path / "..."


def test_exists_answer() -> None:
    assert _wire.exists_answer(httpx.Response(200, json={"type": "file"}), "x") is True
    assert _wire.exists_answer(httpx.Response(404, json={"code": "NOT_FOUND", "message": "no"}), "x") is False
    for other in (
        httpx.Response(404, json={"detail": "Sandbox sb not found"}),  # the router's
        httpx.Response(404, json={"kind": "Status", "reason": "NotFound", "code": 404}),  # the pod proxy's
        httpx.Response(404),  # no body (a HEAD)
    ):
        with pytest.raises(NotFoundError):
            _wire.exists_answer(other, "x")


def test_secrets_not_in_reprs() -> None:
    assert "s3cret" not in repr(RouterConnection(url="http://r", token="s3cret"))
    assert "s3cret" not in repr(DirectConnection(token="s3cret"))
    assert "s3cret" not in repr(KubeConfig(server="https://k", token="s3cret", password="s3cret", key_data=b"s3cret"))


def test_run_body() -> None:
    b = _wire.run_body("echo hi", env={"A": "1"}, cwd="w", timeout=5, stdin=b"\x00\x01")
    assert b == {"command": "echo hi", "env": {"A": "1"}, "cwd": "w", "timeout_seconds": 5, "stdin_b64": "AAE="}
    assert _wire.run_body(["ls", "-l"], stdin="x", pty=(80, 24)) == {
        "command": ["ls", "-l"],
        "stdin": "x",
        "pty": {"cols": 80, "rows": 24},
    }
    with pytest.raises(ValueError):
        _wire.run_body([])


def test_event_parsing_and_collector() -> None:
    col = _wire.Collector()
    for line in [
        json.dumps({"type": "stdout", "data": "aGk="}),
        "",
        json.dumps({"type": "exit", "exit_code": 0, "signal": 0, "timed_out": False}),
    ]:
        ev = _wire.parse_event(line)
        if ev:
            col.add(ev)
    assert col.result().stdout == "hi" and col.result().exit_code == 0
    with pytest.raises(RequestError):
        _wire.parse_event(json.dumps({"type": "error", "code": "INVALID_ARGUMENT", "message": "m"}))
    with pytest.raises(SandboxConnectionError):
        _wire.Collector().result()


def test_error_mapping() -> None:
    req = httpx.Request("GET", "http://x")
    assert isinstance(_wire.error(httpx.Response(404, json={"code": "NOT_FOUND"}, request=req), "r"), NotFoundError)
    assert isinstance(_wire.error(httpx.Response(401, json={"detail": "Invalid token."}, request=req), "r"), AuthError)
    e = _wire.error(httpx.Response(502, json={"detail": "Could not connect"}, request=req), "r")
    assert isinstance(e, SandboxConnectionError) and "Could not connect" in str(e)
    r = _wire.error(httpx.Response(409, json={"code": "CONFLICT", "message": "not empty"}, request=req), "r")
    assert isinstance(r, RequestError) and r.status == 409 and r.code == "CONFLICT"
    k = _k8s.api_error(httpx.Response(403, json={"message": "nope", "reason": "Forbidden"}, request=req), "x")
    assert isinstance(k, AuthError) and "RBAC" in str(k)


def test_connection_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_SANDBOX_ROUTER_URL", "http://router:8080")
    assert isinstance(_conn.resolve("auto"), RouterConnection)
    monkeypatch.delenv("AGENT_SANDBOX_ROUTER_URL")
    monkeypatch.setattr(_conn, "in_cluster", lambda: True)
    assert isinstance(_conn.resolve(None), DirectConnection)
    monkeypatch.setattr(_conn, "in_cluster", lambda: False)
    assert isinstance(_conn.resolve(None), PodProxyConnection)
    with pytest.raises(Exception, match="AGENT_SANDBOX_ROUTER_URL"):
        _conn.resolve("router")


def test_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_SANDBOX_ROUTER_TOKEN", raising=False)
    cfg = KubeConfig(server="https://api:6443", token="kube-tok")
    sb = {
        "metadata": {"name": "s", "annotations": {"agents.x-k8s.io/pod-name": "pod-1"}},
        "status": {"podIPs": ["fd00::5"]},
    }
    t = _conn.target(RouterConnection(url="https://r/"), cfg, "ns", "s", None)
    assert t.base == "https://r" and t.headers == {
        "Authorization": "Bearer kube-tok",
        "X-Sandbox-ID": "s",
        "X-Sandbox-Namespace": "ns",
        "X-Sandbox-Port": "8080",
    }
    t = _conn.target(RouterConnection(url="http://r", token="rt", style="path", port=9000), cfg, "ns", "s", None)
    assert t.base == "http://r/s/ns/s/9000" and t.headers == {"Authorization": "Bearer rt"}
    t = _conn.target(DirectConnection(), cfg, "ns", "s", sb)
    assert t.base == "http://[fd00::5]:8080" and not t.via_kube
    t = _conn.target(PodProxyConnection(port=8080), cfg, "ns", "s", sb)
    assert t.base == "https://api:6443/api/v1/namespaces/ns/pods/pod-1:8080/proxy" and t.via_kube
    with pytest.raises(Exception, match="no pod IP"):
        _conn.target(DirectConnection(), cfg, "ns", "s", {"status": {}})


UID = "3f1c2a9e-0000-4000-8000-000000000001"


def _bound(**over: object) -> dict[str, object]:
    """A Sandbox handed out to the claim UID; over replaces parts of it."""
    meta: dict[str, object] = {
        "name": "sb",
        "labels": {_k8s.LABEL_CLAIM_UID: UID},
        "ownerReferences": [{"kind": "SandboxClaim", "name": "c", "uid": UID, "controller": True}],
    }
    status: dict[str, object] = {
        "conditions": [{"type": "Ready", "status": "True", "reason": "DependenciesReady"}],
        "podIPs": ["10.0.0.9"],
    }
    obj: dict[str, object] = {"metadata": meta, "spec": {}, "status": status}
    for k, v in over.items():
        part, _, key = k.partition("__")
        target = obj[part]
        assert isinstance(target, dict)
        if v is None:
            target.pop(key, None)
        else:
            target[key] = v
    return obj


@pytest.mark.parametrize(
    ("over", "want"),
    [
        ({}, True),
        ({"spec__operatingMode": "Running"}, True),
        ({"metadata__labels": {_k8s.LABEL_CLAIM_UID: "other"}}, False),
        ({"metadata__labels": None}, False),
        ({"metadata__ownerReferences": None}, False),
        ({"metadata__ownerReferences": [{"kind": "SandboxClaim", "uid": UID}]}, False),  # not the controller
        ({"metadata__ownerReferences": [{"kind": "SandboxClaim", "uid": "x", "controller": True}]}, False),
        ({"metadata__deletionTimestamp": "2026-12-02T00:00:00Z"}, False),
        ({"spec__operatingMode": "Suspended"}, False),
        ({"status__podIPs": []}, False),
        ({"status__conditions": [{"type": "Ready", "status": "False", "reason": "X"}]}, False),
        ({"status__conditions": None}, False),
    ],
)
def test_handed_out(over: dict[str, object], want: bool) -> None:
    assert _k8s.handed_out(_bound(**over), UID) is want


def test_handout_step_and_uid() -> None:
    step = _k8s.handout_step(UID)
    w = _k8s.Wait("Sandbox", "")
    step(w, "DELETED", _bound())
    step(w, "MODIFIED", _bound(status__podIPs=[]))
    assert not w.done
    step(w, "MODIFIED", _bound())
    assert (w.done, w.ready, w.sandbox) == (True, True, "sb")
    assert _k8s.handout_uid({"metadata": {"uid": UID}, "spec": {}}) == UID
    # env is delivered after the Sandbox is bound: only the claim's Ready may end that wait
    assert _k8s.handout_uid({"metadata": {"uid": UID}, "spec": {"env": [{"name": "A", "value": "1"}]}}) == ""
    assert _k8s.handout_selector(UID) == f"agents.x-k8s.io/claim-uid={UID}"


def test_watch_call_by_selector() -> None:
    c = _k8s.watch_call("sandboxes", "ns", "", "42", 10, "a=b")
    params = c.kw["params"]
    assert params["labelSelector"] == "a=b" and "fieldSelector" not in params
    assert params["resourceVersion"] == "42" and c.what == "watch sandboxes ns (a=b)"
    c = _k8s.watch_call("sandboxes", "ns", "sb", "", 10)
    assert c.kw["params"]["fieldSelector"] == "metadata.name=sb" and "labelSelector" not in c.kw["params"]


def test_next_claim_watch_delay() -> None:
    d = _k8s.CLAIM_WATCH_DELAY
    assert _k8s.next_claim_watch_delay(True, True, 0.0) == d  # handed out: the controller labels
    assert _k8s.next_claim_watch_delay(False, True, d) == 0.0  # the claim's Ready came first
    assert _k8s.next_claim_watch_delay(False, False, 0.0) == 0.0  # a failure says nothing
    assert _k8s.next_claim_watch_delay(False, False, d) == d


def test_handout_stream_usable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_k8s, "HANDOUT_STREAM_IDLE", 30.0)
    monkeypatch.setattr(_k8s, "HANDOUT_STREAM_SECONDS", 300.0)
    hs = _k8s.HandoutStream("ns")
    assert not hs.usable(100.0)  # never opened
    hs.opening(100.0)
    assert hs.usable(100.0) and hs.usable(129.9)
    assert not hs.usable(130.0)  # unread for HANDOUT_STREAM_IDLE: its backlog is not read through
    hs.read = 365.0
    assert hs.usable(369.9)
    assert not hs.usable(370.0)  # within HANDOUT_STREAM_IDLE of the server's end of it
    hs.read = 101.0
    hs.closed()
    assert not hs.usable(101.0)


def test_handout_stream_call() -> None:
    c = _k8s.handout_stream_call("ns", "42")
    params = c.kw["params"]
    assert params["labelSelector"] == _k8s.LABEL_CLAIM_UID  # every Sandbox bound to a claim
    assert params["resourceVersion"] == "42" and params["watch"] == "1"
    assert int(params["timeoutSeconds"]) > _k8s.HANDOUT_STREAM_SECONDS
    assert c.kw["timeout"].read > _k8s.HANDOUT_STREAM_SECONDS  # the client outlasts the server's end


def _line(etype: str, obj: dict[str, object]) -> str:
    return json.dumps({"type": etype, "object": obj}, separators=(",", ":"))


def test_handout_line_fields() -> None:
    sb = _bound(metadata__resourceVersion="812")
    line = _line("MODIFIED", sb)
    assert _k8s.handout_line_uid(line) == UID and _k8s.line_resource_version(line) == "812"
    bookmark = _line("BOOKMARK", {"kind": "Sandbox", "metadata": {"resourceVersion": "900"}})
    assert _k8s.handout_line_uid(bookmark) == "" and _k8s.line_resource_version(bookmark) == "900"
    odd = '{"x":{"resourceVersion":"","y":"7"},"metadata":{"resourceVersion":"12"}}'
    assert _k8s.line_resource_version(odd) == "12" and _k8s.line_resource_version('{"resourceVersion":"3') == ""
    assert _k8s.handout_line_uid('{"' + _k8s.LABEL_CLAIM_UID + '":"u1') == ""  # cut short
    assert _k8s.handout_line_uid('{"' + _k8s.LABEL_CLAIM_UID + '":""}') == ""
    gone = _line("ERROR", {"kind": "Status", "code": 410})
    other = _line("ERROR", {"kind": "Status", "code": 500})
    assert _k8s.is_error_line(gone) and _k8s.is_gone_line(gone)
    assert _k8s.is_error_line(other) and not _k8s.is_gone_line(other)
    assert not _k8s.is_error_line(line)


def test_handout_recent_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_k8s, "HANDOUT_RECENT_MAX", 3)
    r = _k8s.HandoutRecent()
    for i in range(5):
        r.keep(f"u{i}", f"line{i}", 100.0 + i)
    assert len(r) == 3  # the oldest went first
    assert r.take("u0", 105.0) == "" and r.take("u4", 105.0) == "line4"
    r.keep("u2", "line2b", 105.0)  # the newest line of a claim's Sandbox replaces the older
    assert r.take("u2", 105.0) == "line2b"
    assert r.take("u3", 103.0 + _k8s.HANDOUT_RECENT_FOR + 1) == ""  # too old
    assert r.take("u3", 104.0) == ""  # taken once at most


def test_handout_recent_get_leaves_the_line_for_another_wait() -> None:
    r = _k8s.HandoutRecent()
    r.keep("u", "line", 100.0)
    assert r.get("u", 101.0) == "line" and r.get("u", 102.0) == "line"  # one claim waited for twice
    assert r.get("u", 100.0 + _k8s.HANDOUT_RECENT_FOR + 1) == "" and r.get("nope", 101.0) == ""
    assert r.take("u", 101.0) == "line"


def test_resource_version_order() -> None:
    assert _k8s.rv_older("99", "100") and not _k8s.rv_older("100", "99") and not _k8s.rv_older("7", "7")
    assert not _k8s.rv_older("", "5") and not _k8s.rv_older("5", "")  # "" is no known point
    assert not _k8s.rv_older("abc", "5") and not _k8s.rv_older("\u00b2", "5")  # not decimal: unknown
    assert _k8s.oldest_rv(["120", "99", "100"]) == "99"
    assert _k8s.oldest_rv([]) == "" and _k8s.oldest_rv(["x", "5"]) == "x"  # unordered: the first


def test_handout_stream_reopen_from_and_covers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_k8s, "HANDOUT_STREAM_IDLE", 30.0)
    hs = _k8s.HandoutStream("ns")
    assert hs.covers("1")  # never opened: the first stream starts from the claim's own
    assert hs.reopen_from(100.0, "50") == "50"  # never read: from the oldest waiting claim
    hs.opening(100.0)
    assert (hs.rv, hs.since) == ("50", "50")
    assert hs.covers("50") and hs.covers("60") and not hs.covers("49")  # started after claim 49
    hs.rv, hs.read = "70", 110.0
    hs.closed()  # ended, or stopped: the next leader goes on from where it was read up to
    assert hs.reopen_from(120.0, "90") == "70" and hs.since == "50"
    hs.rv = ""  # a 410 Gone: from the current state, which holds every binding
    assert hs.reopen_from(120.0, "90") == "" and hs.since == "" and hs.covers("1")
    hs.rv = "80"
    assert hs.reopen_from(140.0, "90") == "90"  # unread for HANDOUT_STREAM_IDLE: no backlog read
    assert (hs.rv, hs.since) == ("90", "90") and not hs.covers("85")


async def test_async_stream_take_hands_out_or_keeps() -> None:
    from agent_sandbox_sdk._kube_async import AsyncHandoutStream

    hs = AsyncHandoutStream("ns")
    fut, twice = asyncio.get_running_loop().create_future(), asyncio.get_running_loop().create_future()
    hs.waiters[UID] = [fut, twice]  # one claim waited for twice
    hs.take(_line("MODIFIED", _bound(status__podIPs=[])))  # bound, not Ready yet
    assert not fut.done() and UID in hs.waiters
    hs.take(_line("MODIFIED", _bound(metadata__labels={_k8s.LABEL_CLAIM_UID: "other"})))
    assert len(hs.recent) == 1 and not fut.done()  # another claim's: kept for its wait
    hs.take(_line("BOOKMARK", {"metadata": {"resourceVersion": "9"}}))
    hs.take(_line("MODIFIED", _bound()))
    assert fut.done() and fut.result()["metadata"]["name"] == "sb" and UID not in hs.waiters
    assert twice.result() is fut.result()
    late, gone = asyncio.get_running_loop().create_future(), asyncio.get_running_loop().create_future()
    hs.waiters["late"] = [late, gone]
    hs.drop("late", gone)
    assert hs.waiters["late"] == [late]
    hs.fail(SandboxError("refused"))
    assert isinstance(late.exception(), SandboxError) and not gone.done() and not hs.waiters


@pytest.mark.parametrize(
    ("call", "want"),
    [
        (
            _k8s.get_call("sandboxes", "ns", "a"),
            ("/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes/a", b"", "application/json"),
        ),
        (_k8s.list_call("sandboxclaims", "ns", "k=v"), None),  # a LIST's answer may be large: httpx
        (
            # (get_call refuses such a name: the path is escaped all the same)
            _k8s.ApiCall("GET", _k8s.path("sandboxclaims", "ns", "a b"), "x", {}),
            ("/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/ns/sandboxclaims/a%20b", b"", "application/json"),
        ),
        (
            _k8s.patch_call("sandboxes", "ns", "a", {"x": 1}),
            ("/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes/a", b'{"x":1}', _k8s.MERGE_PATCH),
        ),
        (
            _k8s.delete_call("sandboxes", "ns", "a"),
            (
                "/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes/a",
                b'{"propagationPolicy":"Background"}',
                "application/json",
            ),
        ),
        (_k8s.watch_call("sandboxes", "ns", "a", "1", 5.0), None),  # its timeout: httpx's
        (_k8s.ApiCall("GET", "/x", "x", {"headers": {"Accept": "text/plain"}}), None),
    ],
)
def test_lean_request(call: _k8s.ApiCall, want: tuple[str, bytes, str] | None) -> None:
    assert _k8s.lean_request(call) == want


@pytest.mark.parametrize(
    ("call", "want"),
    [
        (_k8s.get_call("sandboxes", "ns", "a"), "/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes/a"),
        (_k8s.list_call("sandboxes", "ns", None), "/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes?limit=500"),
        (
            _k8s.list_call("sandboxes", "ns", "a=b,c in (d)", "tok"),
            "/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes?limit=500&labelSelector=a%3Db%2Cc+in+%28d%29"
            "&continue=tok",
        ),
        (
            _k8s.watch_call("sandboxclaims", "ns", "c", "42", 9.5),
            "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/ns/sandboxclaims"
            "?watch=1&allowWatchBookmarks=true&timeoutSeconds=10&fieldSelector=metadata.name%3Dc&resourceVersion=42",
        ),
        (
            _k8s.watch_call("sandboxclaims", "ns", "", "", 0.2, selector="k=v"),
            "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/ns/sandboxclaims"
            "?watch=1&allowWatchBookmarks=true&timeoutSeconds=1&labelSelector=k%3Dv",
        ),
    ],
)
def test_call_target(call: _k8s.ApiCall, want: str) -> None:
    """The request target both the lean connections and the watches send: the path with
    its query, encoded once (_k8s.ApiCall.target)."""
    assert call.target() == want


def test_one_tls_context_per_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client makes its TLS context once and shares it with its httpx transport and its
    lean pool (each context loads certificates and may run an exec plugin; the async
    client's takes the plugin's certificate later, AsyncTLS)."""
    made: list[object] = []
    real = KubeConfig._ca_context

    def counting(self: KubeConfig) -> object:
        ctx = real(self)
        made.append(ctx)
        return ctx

    monkeypatch.setattr(KubeConfig, "_ca_context", counting)
    cfg = KubeConfig(server="https://api:6443", token="kube-tok")
    sync = _kube_sync.KubeClient(cfg)
    try:
        assert len(made) == 1 and sync._fast._ssl is made[0]
    finally:
        sync.close()

    async def main() -> None:
        aio = _kube_async.AsyncKubeClient(cfg)
        try:
            assert len(made) == 2 and aio._fast._ssl is made[1] and aio._tls.ctx is made[1]
        finally:
            await aio.aclose()

    asyncio.run(main())
