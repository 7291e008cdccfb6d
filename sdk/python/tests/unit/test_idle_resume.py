"""Resume on traffic (docs/idle.md): direct and pod-proxy modes resume a suspended
sandbox whose idle policy allows it before the call; otherwise SandboxSuspendedError."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import (
    AsyncSandbox,
    RouterConnection,
    Sandbox,
    SandboxClient,
    SandboxError,
    SandboxSuspendedError,
    _k8s,
    _wire,
)

from .fakes import FakeKube, FakeSandboxd, async_client, config, ready, sync_client

IDLE = "agents.x-k8s.io/idle-suspended-generation"


def suspended(policy: dict[str, Any] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"operatingMode": "Suspended"}
    if policy is not None:
        spec["idlePolicy"] = policy
    return {
        "metadata": {"name": "sb", "annotations": {IDLE: "2", "agents.x-k8s.io/pod-name": "sb-pod"}},
        "spec": spec,
        "status": {
            "conditions": [ready("False", "SandboxSuspended"), {"type": "Suspended", "status": "True"}],
        },
    }


def running() -> dict[str, Any]:
    return {
        "metadata": {"name": "sb", "annotations": {"agents.x-k8s.io/pod-name": "sb-pod"}},
        "spec": {"idlePolicy": {"timeoutSeconds": 10}},
        "status": {"podIPs": ["10.0.0.1"], "conditions": [ready()]},
    }


def controller(fake: FakeKube, resource: str, obj: dict[str, Any]) -> None:
    """A patch to Running brings a new pod: first not Ready, then Ready."""
    if resource == "sandboxes" and obj["spec"].get("operatingMode") == "Running":
        name = obj["metadata"]["name"]
        fake.update(resource, name, {"conditions": [ready("False", "DependenciesNotReady")]})
        fake.update(resource, name, {"conditions": [ready()], "podIPs": ["10.0.0.2"]})


def patches(fake: FakeKube) -> list[dict[str, Any]]:
    return [json.loads(r.content) for r in fake.calls("PATCH", r"/sandboxes/sb$")]


@pytest.mark.parametrize(
    ("policy", "action"),
    [
        ({"timeoutSeconds": 10}, "resume"),
        ({"timeoutSeconds": 10, "resumeOnTraffic": True}, "resume"),
        ({"timeoutSeconds": 10, "resumeOnTraffic": False}, "refuse"),
        (None, "refuse"),
    ],
)
def test_idle_action_suspended(policy: dict[str, Any] | None, action: str) -> None:
    assert _k8s.idle_action(suspended(policy)) == action


def test_idle_action_running() -> None:
    assert _k8s.idle_action(running()) == "none"
    starting = running()
    starting["status"] = {"conditions": [ready("False", "DependenciesNotReady")]}
    assert _k8s.idle_action(starting) == "wait"
    del starting["spec"]["idlePolicy"]
    assert _k8s.idle_action(starting) == "none"  # no policy: the call fails as before


def test_sync_resumes_suspended_sandbox() -> None:
    fake = FakeKube()
    fake.put("sandboxes", suspended({"timeoutSeconds": 10}))
    fake.on_patch = controller
    sbd = FakeSandboxd()
    fake.sandboxd = sbd
    sb = _attach(fake)
    r = sb.run("echo hi")
    assert r.stdout == "ran echo hi"
    assert patches(fake) == [_k8s.RESUME_PATCH]
    stored = fake.store[("sandboxes", "default", "sb")]
    assert stored["spec"]["operatingMode"] == "Running" and IDLE not in stored["metadata"]["annotations"]
    assert sbd.hits == [("POST", "/v1/processes/run")]
    # Later calls use the fresh object: no second resume.
    sb.run("echo again")
    assert len(patches(fake)) == 1


@pytest.mark.parametrize(
    ("policy", "has_policy"),
    [({"timeoutSeconds": 10, "resumeOnTraffic": False}, True), (None, False)],
)
def test_sync_refuses_without_resume_on_traffic(policy: dict[str, Any] | None, has_policy: bool) -> None:
    fake = FakeKube()
    fake.put("sandboxes", suspended(policy))
    sbd = FakeSandboxd()
    fake.sandboxd = sbd
    sb = _attach(fake)
    with pytest.raises(SandboxSuspendedError, match="suspended") as ei:
        sb.run("true")
    assert ei.value.has_policy is has_policy and ei.value.name == "sb"
    assert not patches(fake) and not sbd.hits


def test_sync_stale_handle_resumes_after_pod_gone() -> None:
    """A handle that read the Sandbox while Ready learns of the suspend from the pod
    proxy's "pod not found", resumes and sends the (chunked) run body again."""
    fake = FakeKube()
    fake.put("sandboxes", running())
    sbd = FakeSandboxd()
    fake.sandboxd = sbd
    sb = _attach(fake)
    sb.run("warm")  # reads and caches the Ready object
    fake.put("sandboxes", suspended({"timeoutSeconds": 10}))
    fake.on_patch = controller
    gone = {"n": 0}

    def proxy(req: httpx.Request, path: str) -> httpx.Response:
        if gone["n"] == 0:
            gone["n"] += 1
            return httpx.Response(404, json={"kind": "Status", "message": 'pods "sb-pod" not found'})
        return sbd(req, path)

    fake.sandboxd = proxy
    r = sb.run("echo hi")
    assert r.stdout == "ran echo hi" and len(patches(fake)) == 1
    assert sbd.hits[-1] == ("POST", "/v1/processes/run")


def _warm_then_suspended() -> tuple[FakeKube, FakeSandboxd, Sandbox]:
    """A handle that ran once while the Sandbox was Ready (its object cached), and the
    Sandbox suspended since, with a controller that brings it back on a resume."""
    fake = FakeKube()
    fake.put("sandboxes", running())
    sbd = FakeSandboxd()
    fake.sandboxd = sbd
    sb = _attach(fake)
    sb.run("warm")
    fake.put("sandboxes", suspended({"timeoutSeconds": 10}))
    fake.on_patch = controller
    return fake, sbd, sb


def test_sync_run_not_replayed_when_it_may_have_run() -> None:
    """A run whose pod proxy answer says the connection broke after the request went out
    (a 503 other than a failed dial) may have run: no resume, no second run."""
    fake, _, sb = _warm_then_suspended()
    hits: list[str] = []

    def proxy(req: httpx.Request, path: str) -> httpx.Response:
        hits.append(path)
        msg = "error trying to reach service: read tcp 10.0.0.1:8080: connection reset by peer"
        return httpx.Response(503, json={"kind": "Status", "message": msg})

    fake.sandboxd = proxy
    with pytest.raises(SandboxError):
        sb.run("echo once")
    assert hits == ["/v1/processes/run"] and not patches(fake)


def test_sync_run_replayed_after_failed_dial() -> None:
    """The same with a failed dial: the request never reached sandboxd, so the handle
    resumes the Sandbox and sends the run (once more)."""
    fake, sbd, sb = _warm_then_suspended()
    dialed = {"n": 0}

    def proxy(req: httpx.Request, path: str) -> httpx.Response:
        if dialed["n"] == 0:
            dialed["n"] += 1
            msg = "error trying to reach service: dial tcp 10.0.0.1:8080: connect: connection refused"
            return httpx.Response(503, json={"kind": "Status", "message": msg})
        return sbd(req, path)

    fake.sandboxd = proxy
    assert sb.run("echo hi").stdout == "ran echo hi"
    assert len(patches(fake)) == 1


@pytest.mark.parametrize(
    ("status", "body", "via_kube", "want"),
    [
        (503, {"detail": "Sandbox sb is not ready"}, False, True),  # the router's own refusal
        (502, {"detail": "Could not connect to the backend sandbox."}, False, True),
        (502, {"detail": "Could not write to the backend sandbox."}, False, False),
        (404, {"kind": "Status", "message": 'pods "p" not found'}, True, True),
        (503, {"kind": "Status", "message": "dial tcp 10.0.0.1:8080: i/o timeout"}, True, True),
        (503, {"kind": "Status", "message": "read tcp: connection reset by peer"}, True, False),
        (502, {"kind": "Status", "message": "EOF"}, True, False),
        (500, {"code": "INTERNAL"}, False, False),
    ],
)
def test_not_forwarded(status: int, body: dict[str, Any], via_kube: bool, want: bool) -> None:
    assert _wire.not_forwarded(httpx.Response(status, json=body), via_kube) is want


def test_replay_safe_needs_a_body_that_can_be_sent_again() -> None:
    refused = httpx.Response(503, json={"detail": "not ready"})
    req = httpx.Request("PUT", "http://x")
    assert _wire.Attempts(True, {"content": iter([b"a"])}).replay_safe(resp=httpx.Response(502))
    assert not _wire.Attempts(False, {"content": iter([b"a"])}).replay_safe(resp=refused)
    assert _wire.Attempts(False, {"make_content": lambda: iter([b"a"])}).replay_safe(resp=refused)
    assert _wire.Attempts(False, {"content": iter([b"a"])}).replay_safe(e=httpx.ConnectError("x", request=req))
    assert not _wire.Attempts(False, {}).replay_safe(e=httpx.ReadError("x", request=req))


def test_sync_spawn_resumes() -> None:
    fake = FakeKube()
    fake.put("sandboxes", suspended({"timeoutSeconds": 10}))
    fake.on_patch = controller
    fake.sandboxd = FakeSandboxd()
    with _attach(fake).spawn("x") as p:
        assert p.wait().exit_code == 3
    assert len(patches(fake)) == 1


def test_router_mode_leaves_resume_to_router() -> None:
    fake = FakeKube()
    fake.put("sandboxes", suspended({"timeoutSeconds": 10}))
    seen: list[httpx.Request] = []

    def router(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, json={"stdout": "held and ran", "stderr": "", "exit_code": 0})

    c = SandboxClient(config=config(), connection=RouterConnection(url="https://router.test"))
    c.kube.http = httpx.Client(base_url="https://kube.test", transport=httpx.MockTransport(fake))
    c.http = httpx.Client(transport=httpx.MockTransport(router))
    assert Sandbox(c, "default", "sb").run("true").stdout == "held and ran"
    assert not fake.requests and len(seen) == 1


async def test_async_resumes_suspended_sandbox() -> None:
    fake = FakeKube()
    fake.put("sandboxes", suspended({"timeoutSeconds": 10}))
    fake.on_patch = controller
    fake.sandboxd = FakeSandboxd()
    c = async_client(fake)
    sb = AsyncSandbox(c, "default", "sb")
    assert (await sb.run("echo hi")).stdout == "ran echo hi"
    assert patches(fake) == [_k8s.RESUME_PATCH]


async def test_async_refuses() -> None:
    fake = FakeKube()
    fake.put("sandboxes", suspended({"timeoutSeconds": 10, "resumeOnTraffic": False}))
    fake.sandboxd = FakeSandboxd()
    sb = AsyncSandbox(async_client(fake), "default", "sb")
    with pytest.raises(SandboxSuspendedError):
        await sb.run("true")
    assert not patches(fake)


def _attach(fake: FakeKube) -> Sandbox:
    return Sandbox(sync_client(fake), "default", "sb")


def test_template_idle_policy_is_copied() -> None:
    tmpl = {"spec": {"podTemplate": {"spec": {"containers": [{"name": "c"}]}}, "idlePolicy": {"timeoutSeconds": 30}}}
    assert _k8s.sandbox_body("s1", {}, template=tmpl)["spec"]["idlePolicy"] == {"timeoutSeconds": 30}
    del tmpl["spec"]["idlePolicy"]
    assert "idlePolicy" not in _k8s.sandbox_body("s1", {}, template=tmpl)["spec"]
