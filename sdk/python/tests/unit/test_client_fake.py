"""The sync and async clients against a fake API server and a fake sandboxd (reached
through the pod-proxy path of the fake API server)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import NotFoundError, SandboxConnectionError, SandboxFailedError, SandboxTimeoutError

from .fakes import FakeKube, FakeSandboxd, async_client, ready, sync_client

POOL_CLAIMS = r"/sandboxclaims$"


def bind_on_create(fake: FakeKube, resource: str, obj: dict[str, Any]) -> None:
    """Simulates the controllers: a claim gets a sandbox, a sandbox becomes Ready."""
    name = obj["metadata"]["name"]
    if resource == "sandboxclaims":
        sb = fake.put(
            "sandboxes",
            {
                "metadata": {"name": f"{name}-sb", "annotations": {"agents.x-k8s.io/pod-name": "pod-x"}},
                "spec": {},
                "status": {"podIPs": ["10.244.0.9"], "conditions": [ready()]},
            },
        )
        del sb
        fake.update("sandboxclaims", name, {"conditions": [ready("False", "SandboxNotReady")]})
        fake.update("sandboxclaims", name, {"conditions": [ready()], "sandbox": {"name": f"{name}-sb"}})
    if resource == "sandboxes":
        fake.update("sandboxes", name, {"conditions": [ready()], "podIPs": ["10.244.0.7"]})


def fail_on_create(fake: FakeKube, resource: str, obj: dict[str, Any]) -> None:
    fake.update(
        resource,
        obj["metadata"]["name"],
        {"conditions": [ready("False", "TemplateNotFound", 'template "missing" not found')]},
    )


def test_create_from_pool_waits_by_watch() -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    c = sync_client(fake)
    sb = c.create("pool", labels={"team": "a"}, ttl=600)
    assert sb.claim.startswith("sandbox-claim-") and sb.name == f"{sb.claim}-sb"
    [post] = fake.calls("POST", POOL_CLAIMS)
    body = json.loads(post.content)
    assert body["metadata"]["labels"]["agents.x-k8s.io/created-by"] == "python-client"
    assert body["spec"]["lifecycle"]["shutdownPolicy"] == "Delete"
    watches = fake.calls("GET", POOL_CLAIMS)
    assert watches and watches[0].url.params["watch"] == "1"
    assert watches[0].url.params["resourceVersion"]  # resumes from the create's version
    assert watches[0].url.params["fieldSelector"] == f"metadata.name={sb.claim}"


def _answer_lost(fake: FakeKube, resource: str, obj: dict[str, Any]) -> None:
    raise httpx.ReadError("connection reset by peer")  # made, but the answer is lost


def test_create_without_an_answer_deletes_what_it_may_have_made() -> None:
    fake = FakeKube()
    fake.on_create = _answer_lost
    with pytest.raises(SandboxConnectionError):
        sync_client(fake).create("pool")
    assert not [k for k in fake.store if k[0] == "sandboxclaims"]
    assert len(fake.calls("DELETE", r"/sandboxclaims/sandbox-claim-")) == 1


def test_create_without_an_answer_keeps_a_named_object() -> None:
    # A name the caller gave may be someone else's object: it is not deleted.
    fake = FakeKube()
    fake.on_create = _answer_lost
    with pytest.raises(SandboxConnectionError):
        sync_client(fake).create("pool", name="mine")
    assert not fake.calls("DELETE", r"/sandboxclaims/")


async def test_async_create_without_an_answer_deletes_what_it_may_have_made() -> None:
    fake = FakeKube()
    fake.on_create = _answer_lost
    with pytest.raises(SandboxConnectionError):
        await async_client(fake).create("pool")
    assert not [k for k in fake.store if k[0] == "sandboxclaims"]


def test_failed_claim_surfaces_reason_fast_and_is_deleted() -> None:
    fake = FakeKube()
    fake.on_create = fail_on_create
    c = sync_client(fake)
    t0 = time.monotonic()
    with pytest.raises(SandboxFailedError) as ei:
        c.create("pool", timeout=30)
    assert time.monotonic() - t0 < 2
    assert ei.value.reason == "TemplateNotFound" and "missing" in str(ei.value)
    assert fake.calls("DELETE", r"/sandboxclaims/") and not [k for k in fake.store if k[0] == "sandboxclaims"]


def test_timeout_carries_last_reason() -> None:
    fake = FakeKube()

    def pending(f: FakeKube, resource: str, obj: dict[str, Any]) -> None:
        f.update(resource, obj["metadata"]["name"], {"conditions": [ready("False", "SandboxNotReady", "pod pending")]})

    fake.on_create = pending
    with pytest.raises(SandboxTimeoutError) as ei:
        sync_client(fake).create("pool", timeout=0.3)
    assert ei.value.reason == "SandboxNotReady" and "pod pending" in str(ei.value)


def test_create_from_template_and_pod_spec() -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    fake.put(
        "sandboxtemplates",
        {"metadata": {"name": "py"}, "spec": {"podTemplate": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}},
    )
    c = sync_client(fake)
    sb = c.create(template="py", env={"K": "V"}, name="direct-1")
    assert sb.name == "direct-1" and not sb.claim
    body = json.loads(fake.calls("POST", r"/sandboxes$")[0].content)
    assert body["spec"]["podTemplate"]["spec"]["containers"][0]["env"] == [{"name": "K", "value": "V"}]
    with pytest.raises(NotFoundError, match="SandboxTemplate default/nope"):
        c.create(template="nope")
    sb2 = c.create(pod_spec={"containers": [{"name": "c", "image": "x"}]})
    assert sb2.name.startswith("sandbox-")
    with pytest.raises(ValueError):
        c.create("pool", template="py")


def test_get_list_delete_and_context_manager() -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    c = sync_client(fake)
    with c.create("pool") as sb:
        again = c.get(sb.claim)
        assert again.name == sb.name and again.claim == sb.claim
        assert c.get(sb.name).name == sb.name
        infos = c.list()
        assert [i.name for i in infos] == [sb.name] and infos[0].ready
        assert c.list_claims() == [sb.claim]
    assert ("sandboxclaims", "default", sb.claim) not in fake.store
    with c.create("pool", keep=True) as kept:
        pass
    assert ("sandboxclaims", "default", kept.claim) in fake.store
    assert c.delete(kept.claim) and not c.delete("nothing")
    with pytest.raises(NotFoundError):
        c.get("nothing")


def test_suspend_resume() -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create

    def on_patch(f: FakeKube, resource: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if obj["spec"].get("operatingMode") == "Suspended":
            f.update(
                resource,
                name,
                {
                    "conditions": [
                        ready("False", "SandboxSuspended"),
                        {"type": "Suspended", "status": "True", "reason": "S"},
                    ]
                },
            )
        else:
            f.update(resource, name, {"conditions": [ready()], "podIPs": ["10.244.0.8"]})

    fake.on_patch = on_patch
    c = sync_client(fake)
    sb = c.create(pod_spec={"containers": [{"name": "c", "image": "x"}]})
    sb.suspend(timeout=2)
    assert fake.store[("sandboxes", "default", sb.name)]["spec"]["operatingMode"] == "Suspended"
    sb.resume(timeout=2)
    info = sb.refresh()
    assert info.ready and info.pod_ips == ("10.244.0.8",)


def test_processes_and_files_over_pod_proxy() -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    fake.sandboxd = sbd = FakeSandboxd()
    c = sync_client(fake)
    sb = c.create("pool")
    r = sb.run(["ls", "-l"])
    assert r.stdout == "ran ['ls', '-l']" and r.ok
    proxied = fake.calls("POST", r"/proxy/v1/processes/run$")
    assert proxied[0].url.path == "/api/v1/namespaces/default/pods/pod-x:8080/proxy/v1/processes/run"
    events = list(sb.stream("x"))
    assert [e.type for e in events] == ["stdout", "stderr", "stdout", "exit"]
    with sb.spawn("cat") as p:
        assert p.id == 7 and p.pid == 42
        p.write("in")
        p.signal("SIGINT")
        res = p.wait()
    assert (res.stdout, res.stderr, res.exit_code) == ("hello world", "warn", 3)
    assert ("POST", "/v1/processes/7/stdin") in sbd.hits and ("POST", "/v1/processes/7/signal") in sbd.hits
    sb.files.write("d/f.txt", "data")
    assert sbd.files["d/f.txt"] == b"data"
    assert sb.files.read_text("d/f.txt") == "data" and sb.files.exists("d/f.txt")
    sb.files.delete("d/f.txt")
    assert not sb.files.exists("d/f.txt")
    sb.files.delete("d/f.txt", missing_ok=True)


def test_run_is_never_retried_but_reads_are() -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    fake.sandboxd = sbd = FakeSandboxd()
    sb = sync_client(fake).create("pool")
    sbd.fail[("POST", "/v1/processes/run")] = [503]
    with pytest.raises(SandboxConnectionError):
        sb.run("touch once")
    assert sbd.hits.count(("POST", "/v1/processes/run")) == 1
    sbd.files["f"] = b"x"
    sbd.fail[("GET", "/v1/files/f")] = [503, 502]
    assert sb.files.read("f") == b"x"
    assert sbd.hits.count(("GET", "/v1/files/f")) == 3


def _process_posts(sbd: FakeSandboxd) -> list[httpx.Request]:
    return [r for r in sbd.requests if r.method == "POST" and r.url.path.endswith(("/v1/processes", "/run"))]


def test_process_bodies_are_chunked() -> None:
    # Through the API server's pod proxy a Content-Length body can get a streamed answer
    # cut short; run and spawn send theirs chunked (docs/sandboxd.md).
    fake = FakeKube()
    fake.on_create = bind_on_create
    fake.sandboxd = sbd = FakeSandboxd()
    sb = sync_client(fake).create("pool")
    assert sb.run("x").stdout == "ran x"
    with sb.spawn("cat") as p:
        p.wait()
    posts = _process_posts(sbd)
    assert len(posts) == 2
    for r in posts:
        assert r.headers.get("transfer-encoding") == "chunked"
        assert "content-length" not in r.headers
        assert r.headers["content-type"] == "application/json"


async def test_async_process_bodies_are_chunked() -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    fake.sandboxd = sbd = FakeSandboxd()
    async with async_client(fake) as c:
        sb = await c.create("pool")
        assert (await sb.run("x")).stdout == "ran x"
        async with await sb.spawn("cat") as p:
            await p.wait()
    posts = _process_posts(sbd)
    assert len(posts) == 2
    for r in posts:
        assert r.headers.get("transfer-encoding") == "chunked"
        assert "content-length" not in r.headers


async def test_async_create_run_and_cleanup() -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    fake.sandboxd = FakeSandboxd()
    async with async_client(fake) as c:
        async with await c.create("pool") as sb:
            assert (await sb.run("x")).stdout == "ran x"
            evs = [e.type async for e in sb.stream("x")]
            assert evs == ["stdout", "stderr", "stdout", "exit"]
            async with await sb.spawn("cat") as p:
                await p.write(b"z")
                assert (await p.wait()).stdout == "hello world"
            await sb.files.write("a", b"1")
            assert await sb.files.read("a") == b"1"
            assert [i.name for i in await c.list()] == [sb.name]
        assert ("sandboxclaims", "default", sb.claim) not in fake.store


async def test_async_failed_claim() -> None:
    fake = FakeKube()
    fake.on_create = fail_on_create
    async with async_client(fake) as c:
        with pytest.raises(SandboxFailedError, match="TemplateNotFound"):
            await c.create("pool", timeout=30)
    assert not [k for k in fake.store if k[0] == "sandboxclaims"]


async def test_async_timeout() -> None:
    fake = FakeKube()
    async with async_client(fake) as c:
        with pytest.raises(SandboxTimeoutError, match="no status reported yet"):
            await c.create("pool", timeout=0.3)
