"""The early hand-out of create(pool) against a real API server with no controller: the
test plays the controller (binds a Sandbox to the claim, writes statuses), so it decides
exactly what the SDK sees and when."""

from __future__ import annotations

import asyncio
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_sandbox_sdk import AsyncSandboxClient, SandboxClient, SandboxFailedError, _k8s
from agent_sandbox_sdk._kube_sync import KubeClient

from .conftest import BareServer

NS_LABEL = {"agent-sandbox.test/integration": "true"}
MERGE = {"Content-Type": "application/merge-patch+json"}
POD_SPEC = {"containers": [{"name": "c", "image": "registry.local/none:1"}]}


class Controller:
    """The test's stand-in for the claim controller, on the admin client."""

    def __init__(self, kube: KubeClient, ns: str) -> None:
        self.kube, self.ns = kube, ns
        self.seen: set[str] = set()

    def claim(self, timeout: float = 10.0) -> dict[str, Any]:
        """The next claim the SDK created (waits for it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for c in self.kube.list("sandboxclaims", self.ns).get("items") or []:
                if c["metadata"]["uid"] not in self.seen:
                    self.seen.add(c["metadata"]["uid"])
                    return dict(c)
            time.sleep(0.02)
        raise AssertionError("the SDK created no claim")

    def sandbox(self, name: str, uid: str, *, owner_uid: str | None = None, ready: bool = True) -> dict[str, Any]:
        """A Sandbox labelled with the claim's UID, controlled by owner_uid (default: the
        claim), Ready with a pod IP when ready."""
        owner = owner_uid if owner_uid is not None else uid
        meta: dict[str, Any] = {"name": name, "labels": {_k8s.LABEL_CLAIM_UID: uid}}
        if owner:
            meta["ownerReferences"] = [
                {
                    "apiVersion": "extensions.agents.x-k8s.io/v1beta1",
                    "kind": "SandboxClaim",
                    "name": "owner",
                    "uid": owner,
                    "controller": True,
                }
            ]
        body = {"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": meta}
        body["spec"] = {"podTemplate": {"spec": POD_SPEC}}
        self.kube.create("sandboxes", self.ns, body)
        status = "True" if ready else "False"
        return self.status("sandboxes", name, self._ready(status, ["10.1.2.3"] if ready else []))

    def claim_ready(self, claim: str, sandbox: str) -> dict[str, Any]:
        st = self._ready("True", [])
        st["status"]["sandbox"] = {"name": sandbox}
        return self.status("sandboxclaims", claim, st)

    def claim_failed(self, claim: str, reason: str) -> dict[str, Any]:
        st = {"status": {"conditions": [self._cond("False", reason)]}}
        return self.status("sandboxclaims", claim, st)

    def status(self, resource: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        url = _k8s.path(resource, self.ns, name) + "/status"
        resp = self.kube.http.patch(url, json=patch, headers=MERGE)
        assert resp.status_code == 200, resp.text
        return dict(resp.json())

    @staticmethod
    def _cond(status: str, reason: str) -> dict[str, Any]:
        now = _k8s.now_rfc3339()
        return {"type": "Ready", "status": status, "reason": reason, "message": "", "lastTransitionTime": now}

    def _ready(self, status: str, ips: list[str]) -> dict[str, Any]:
        st: dict[str, Any] = {"conditions": [self._cond(status, "DependenciesReady" if status == "True" else "X")]}
        if ips:
            st["podIPs"] = ips
        return {"status": st}


@pytest.fixture
def ns(bare_server: BareServer) -> Iterator[str]:
    kube = KubeClient(bare_server.cfg, timeout=10)
    name = "sdk-handout-" + secrets.token_hex(4)
    resp = kube.http.post("/api/v1/namespaces", json={"metadata": {"name": name, "labels": NS_LABEL}})
    assert resp.status_code == 201, resp.text
    try:
        yield name
    finally:
        kube.http.delete(f"/api/v1/namespaces/{name}")
        kube.close()


@pytest.fixture
def ctl(bare_server: BareServer, ns: str) -> Iterator[Controller]:
    kube = KubeClient(bare_server.cfg, timeout=10)
    try:
        yield Controller(kube, ns)
    finally:
        kube.close()


class Background:
    """Runs fn on a thread; result() re-raises what it raised."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.value: Any = None
        self.error: BaseException | None = None
        self.done_at = 0.0
        self.t = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.t.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.value = fn()
        except BaseException as e:  # re-raised by result()
            self.error = e
        self.done_at = time.monotonic()

    def running_after(self, seconds: float) -> bool:
        self.t.join(seconds)
        return self.t.is_alive()

    def result(self, timeout: float = 10.0) -> Any:
        self.t.join(timeout)
        assert not self.t.is_alive(), "create() did not return"
        if self.error is not None:
            raise self.error
        return self.value


def client(bare: BareServer, ns: str, **kw: Any) -> SandboxClient:
    return SandboxClient(namespace=ns, kubeconfig=bare.kubeconfig, connection="direct", **kw)


def only_the_claim_ends_it(c: SandboxClient, ctl: Controller, sandbox: str, **create: Any) -> None:
    """create() with a Sandbox bound to its claim and Ready does not return before the
    claim's Ready, then returns that Sandbox."""
    bg = Background(lambda: c.create("pool", keep=True, timeout=30, **create))
    claim = ctl.claim()
    ctl.sandbox(sandbox, claim["metadata"]["uid"])
    assert bg.running_after(0.5), "handed out, but only the claim's Ready may end this wait"
    ctl.claim_ready(claim["metadata"]["name"], sandbox)
    assert bg.result().name == sandbox


def test_handed_out_before_the_claim_is_ready(bare_server: BareServer, ns: str, ctl: Controller) -> None:
    threads = threading.active_count()
    with client(bare_server, ns) as c:
        bg = Background(lambda: c.create("pool", keep=True, timeout=30))
        claim = ctl.claim()
        uid = claim["metadata"]["uid"]
        assert bg.running_after(0.3), "returned before anything was bound"
        ctl.sandbox("sb-bound", uid)
        sb = bg.result()
        assert (sb.name, sb.claim) == ("sb-bound", claim["metadata"]["name"])
        # the claim's status was never written: the hand-out alone ended the wait
        assert not (c.kube.get("sandboxclaims", ns, sb.claim).get("status") or {}).get("conditions")
        # the handle holds the Sandbox as handed out: its pod IP without another read
        assert sb._target_ok()
        assert c.kube.claim_watch_delay == _k8s.CLAIM_WATCH_DELAY
    assert threading.active_count() <= threads + 1  # only bg's own thread may still be ending


def test_unbound_or_unready_sandboxes_are_not_handed_out(bare_server: BareServer, ns: str, ctl: Controller) -> None:
    with client(bare_server, ns) as c:
        bg = Background(lambda: c.create("pool", keep=True, timeout=30))
        claim = ctl.claim()
        uid, name = claim["metadata"]["uid"], claim["metadata"]["name"]
        ctl.sandbox("sb-other-owner", uid, owner_uid="00000000-0000-0000-0000-000000000000")
        ctl.sandbox("sb-no-owner", uid, owner_uid="")
        ctl.sandbox("sb-not-ready", uid, ready=False)
        assert bg.running_after(0.5), "handed out a Sandbox the claim does not control, or not Ready"
        ctl.claim_ready(name, "sb-from-claim")
        assert bg.result().name == "sb-from-claim"
        # the claim's Ready, not a hand-out, ended it: this client's next claim is watched at once
        assert c.kube.claim_watch_delay == 0.0
        bg = Background(lambda: c.create("pool", keep=True, timeout=30))
        claim = ctl.claim()
        ctl.claim_ready(claim["metadata"]["name"], "sb-next")
        assert bg.result().name == "sb-next"


def test_claim_with_env_waits_for_the_claims_ready(bare_server: BareServer, ns: str, ctl: Controller) -> None:
    with client(bare_server, ns) as c:
        only_the_claim_ends_it(c, ctl, "sb-env", env={"A": "1"})  # env is delivered after the binding


def test_early_handout_off_waits_for_the_claims_ready(bare_server: BareServer, ns: str, ctl: Controller) -> None:
    with client(bare_server, ns, early_handout=False) as c:
        only_the_claim_ends_it(c, ctl, "sb-late")


def test_claim_failure_still_ends_the_wait(bare_server: BareServer, ns: str, ctl: Controller) -> None:
    threads = threading.active_count()
    with client(bare_server, ns) as c:
        bg = Background(lambda: c.create("pool", timeout=30))
        claim = ctl.claim()
        time.sleep(0.2)
        t0 = time.monotonic()
        ctl.claim_failed(claim["metadata"]["name"], "WarmPoolNotFound")
        with pytest.raises(SandboxFailedError) as ei:
            bg.result()
        assert bg.done_at - t0 < 2.0
        assert ei.value.reason == "WarmPoolNotFound"
    bg.t.join(2)
    assert threading.active_count() <= threads, "the hand-out watch outlived create()"


def grant_claims_only(ctl: Controller, ns: str) -> None:
    """alice may create and watch claims and read Sandboxes, not watch them."""
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/" + ns
    role = {
        "metadata": {"name": "claims-only"},
        "rules": [
            {
                "apiGroups": ["extensions.agents.x-k8s.io"],
                "resources": ["sandboxclaims"],
                "verbs": ["create", "get", "list", "watch", "delete"],
            },
            {"apiGroups": ["agents.x-k8s.io"], "resources": ["sandboxes"], "verbs": ["get"]},
        ],
    }
    binding = {
        "metadata": {"name": "alice-claims-only"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "claims-only"},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}],
    }
    for kind, body in (("roles", role), ("rolebindings", binding)):
        resp = ctl.kube.http.post(f"{rbac}/{kind}", json=body)
        assert resp.status_code == 201, resp.text


def test_no_watch_permission_falls_back_to_the_claim(bare_server: BareServer, ns: str, ctl: Controller) -> None:
    """The hand-out watch is refused and the claim's Ready decides."""
    grant_claims_only(ctl, ns)
    with SandboxClient(namespace=ns, kubeconfig=bare_server.alice, connection="direct") as c:
        only_the_claim_ends_it(c, ctl, "sb-alice")


async def test_async_handed_out_before_the_claim_is_ready(bare_server: BareServer, ns: str, ctl: Controller) -> None:
    async with AsyncSandboxClient(namespace=ns, kubeconfig=bare_server.kubeconfig, connection="direct") as c:
        task = asyncio.ensure_future(c.create("pool", keep=True, timeout=30))
        claim = await asyncio.to_thread(ctl.claim)
        await asyncio.sleep(0.3)
        assert not task.done()
        await asyncio.to_thread(ctl.sandbox, "sb-async", claim["metadata"]["uid"])
        sb = await asyncio.wait_for(task, 10)
        assert sb.name == "sb-async"
        assert not (await c.kube.get("sandboxclaims", ns, sb.claim)).get("status", {}).get("conditions")


async def test_async_claim_with_env_then_a_failure(bare_server: BareServer, ns: str, ctl: Controller) -> None:
    async with AsyncSandboxClient(namespace=ns, kubeconfig=bare_server.kubeconfig, connection="direct") as c:
        task = asyncio.ensure_future(c.create("pool", env={"A": "1"}, keep=True, timeout=30))
        claim = await asyncio.to_thread(ctl.claim)
        await asyncio.to_thread(ctl.sandbox, "sb-async-env", claim["metadata"]["uid"])
        await asyncio.sleep(0.5)
        assert not task.done(), "a claim with env must wait for the claim's Ready"
        await asyncio.to_thread(ctl.claim_ready, claim["metadata"]["name"], "sb-async-env")
        assert (await asyncio.wait_for(task, 5)).name == "sb-async-env"

        task = asyncio.ensure_future(c.create("pool", timeout=30))
        claim = await asyncio.to_thread(ctl.claim)
        await asyncio.sleep(0.2)
        t0 = time.monotonic()
        await asyncio.to_thread(ctl.claim_failed, claim["metadata"]["name"], "WarmPoolNotFound")
        with pytest.raises(SandboxFailedError) as ei:
            await asyncio.wait_for(task, 5)
        assert time.monotonic() - t0 < 2.0
        assert ei.value.reason == "WarmPoolNotFound"
        streams = {hs.task for hs in c.kube._streams.values()}  # the client's, until aclose()
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and t not in streams]
        assert not pending, f"tasks left behind: {pending}"
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert not pending, f"tasks left behind after aclose(): {pending}"


class Watches:
    """Counts, on one client, the hand-out stream's opens and the watches of one claim's
    own Sandboxes (the fallback)."""

    def __init__(self, c: SandboxClient, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened = 0
        self.own: list[str] = []
        kube = c.kube
        stream_open, watch_loop = kube._stream_open, kube._watch_loop

        def count_open(*a: Any) -> None:
            self.opened += 1
            stream_open(*a)

        def count_own(loop: _k8s.WaitLoop, selector: str, *a: Any) -> dict[str, Any]:
            if selector.startswith(_k8s.LABEL_CLAIM_UID + "="):
                self.own.append(selector)
            return watch_loop(loop, selector, *a)

        monkeypatch.setattr(kube, "_stream_open", count_open)
        monkeypatch.setattr(kube, "_watch_loop", count_own)


def handed_out(c: SandboxClient, ctl: Controller, sandbox: str, before: Callable[[], None] | None = None) -> str:
    """create(pool) handed out the Sandbox the test binds to its claim; before() runs
    once the claim exists and before the binding. Returns the claim's name."""
    bg = Background(lambda: c.create("pool", keep=True, timeout=30))
    claim = ctl.claim()
    if before is not None:
        before()
    ctl.sandbox(sandbox, claim["metadata"]["uid"])
    sb = bg.result()
    assert (sb.name, sb.claim) == (sandbox, claim["metadata"]["name"])
    return str(claim["metadata"]["name"])


def test_next_claims_are_handed_out_on_the_open_stream(
    bare_server: BareServer, ns: str, ctl: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first claim opens the namespace's hand-out stream, and it stays open: the next
    claims need no watch of their own, and another claim's binding on the stream (in the
    backlog, or while the claim waits) hands nothing out to them."""
    with client(bare_server, ns) as c:
        seen = Watches(c, monkeypatch)
        handed_out(c, ctl, "sb-1")
        hs = c.kube._streams[ns]
        assert hs.open and seen.opened == 1
        resp = hs.resp
        ctl.sandbox("sb-stranger-1", "11111111-1111-1111-1111-111111111111")  # read later, as backlog
        handed_out(c, ctl, "sb-2", lambda: ctl.sandbox("sb-stranger-2", "22222222-2222-2222-2222-222222222222"))
        handed_out(c, ctl, "sb-3")
        assert (seen.opened, seen.own) == (1, [])
        assert hs.resp is resp and hs.open
        # unbound but its claim's Ready ended the wait: the claim's watch stopped the stream
        bg = Background(lambda: c.create("pool", keep=True, timeout=30))
        claim = ctl.claim()
        ctl.claim_ready(claim["metadata"]["name"], "sb-from-claim")
        assert bg.result().name == "sb-from-claim"
        assert not hs.open and hs.resp is None
        handed_out(c, ctl, "sb-4")  # opens it again
        assert seen.opened == 2 and hs.open
    assert not hs.open, "close() left the stream open"


def test_a_stream_the_server_ended_is_replaced(
    bare_server: BareServer, ns: str, ctl: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    with client(bare_server, ns) as c:
        seen = Watches(c, monkeypatch)
        handed_out(c, ctl, "sb-1")
        hs = c.kube._streams[ns]
        assert hs.resp is not None
        sock = hs.resp.extensions["network_stream"].get_extra_info("socket")
        sock.shutdown(socket.SHUT_RDWR)  # as when the server ends it
        handed_out(c, ctl, "sb-2")  # the stream ends at once: this claim watches on its own
        assert seen.opened == 1 and len(seen.own) == 1 and not hs.open
        handed_out(c, ctl, "sb-3")  # and the next claim opens a new stream
        assert seen.opened == 2 and len(seen.own) == 1 and hs.open
        # a stream unread for HANDOUT_STREAM_IDLE is reopened, not read through
        monkeypatch.setattr(_k8s, "HANDOUT_STREAM_IDLE", 0.0)
        old = hs.resp
        handed_out(c, ctl, "sb-4")
        assert seen.opened == 3 and hs.resp is not old and len(seen.own) == 1


def test_concurrent_claims_of_one_client(bare_server: BareServer, ns: str, ctl: Controller) -> None:
    """Two claims at once from one client's threads: one reads the stream, the other
    watches its own Sandboxes; each gets its own Sandbox."""
    with client(bare_server, ns) as c:
        handed_out(c, ctl, "sb-0")  # the stream is open
        bgs = [Background(lambda: c.create("pool", keep=True, timeout=30)) for _ in range(2)]
        claims = [ctl.claim(), ctl.claim()]
        for i, cl in enumerate(claims):
            ctl.sandbox(f"sb-par-{i}", cl["metadata"]["uid"])
        got = {(sb.claim, sb.name) for sb in (bg.result() for bg in bgs)}
        assert got == {(cl["metadata"]["name"], f"sb-par-{i}") for i, cl in enumerate(claims)}


async def test_async_claims_share_one_stream(
    bare_server: BareServer, ns: str, ctl: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The async client's hand-out stream is shared: claims in a row and eight at once
    are each handed out their own Sandbox by one watch; a wait the claim's Ready ends
    leaves it running; it stops once idle and the next claim starts it again."""
    async with AsyncSandboxClient(namespace=ns, kubeconfig=bare_server.kubeconfig, connection="direct") as c:

        async def handed(sandbox: str) -> None:
            task = asyncio.ensure_future(c.create("pool", keep=True, timeout=30))
            claim = await asyncio.to_thread(ctl.claim)
            await asyncio.to_thread(ctl.sandbox, sandbox, claim["metadata"]["uid"])
            sb = await asyncio.wait_for(task, 10)
            assert (sb.name, sb.claim) == (sandbox, claim["metadata"]["name"])

        await handed("sb-a1")
        hs = c.kube._streams[ns]
        assert hs.running() and hs.opened == 1
        await asyncio.to_thread(ctl.sandbox, "sb-a-stranger", "33333333-3333-3333-3333-333333333333")
        await handed("sb-a2")
        # the claim's Ready decides: its hand-out wait is cancelled, the stream runs on
        task = asyncio.ensure_future(c.create("pool", keep=True, timeout=30))
        claim = await asyncio.to_thread(ctl.claim)
        await asyncio.to_thread(ctl.claim_ready, claim["metadata"]["name"], "sb-a-claim")
        assert (await asyncio.wait_for(task, 10)).name == "sb-a-claim"
        assert hs.running() and not hs.waiters
        tasks = [asyncio.ensure_future(c.create("pool", keep=True, timeout=30)) for _ in range(8)]
        claims = [await asyncio.to_thread(ctl.claim) for _ in range(8)]
        for i, cl in enumerate(claims):
            await asyncio.to_thread(ctl.sandbox, f"sb-par-{i}", cl["metadata"]["uid"])
        got = {(sb.claim, sb.name) for sb in await asyncio.wait_for(asyncio.gather(*tasks), 10)}
        assert got == {(cl["metadata"]["name"], f"sb-par-{i}") for i, cl in enumerate(claims)}
        assert hs.opened == 1, "claims at once opened watches of their own"
        monkeypatch.setattr(_k8s, "HANDOUT_STREAM_IDLE", 0.05)
        await handed("sb-a3")  # arms the idle stop with the short delay
        for _ in range(100):
            if not hs.running():
                break
            await asyncio.sleep(0.02)
        assert not hs.running(), "the stream outlived its idle delay"
        await handed("sb-a4")
        assert hs.opened == 2
    assert not hs.running()
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert not pending, f"tasks left behind: {pending}"


async def test_async_no_watch_permission_falls_back_to_the_claim(
    bare_server: BareServer, ns: str, ctl: Controller
) -> None:
    """The shared stream refused: every wait on it falls back to its claim."""
    grant_claims_only(ctl, ns)
    async with AsyncSandboxClient(namespace=ns, kubeconfig=bare_server.alice, connection="direct") as c:
        tasks = [asyncio.ensure_future(c.create("pool", keep=True, timeout=30)) for _ in range(2)]
        claims = [await asyncio.to_thread(ctl.claim) for _ in range(2)]
        for i, cl in enumerate(claims):
            await asyncio.to_thread(ctl.sandbox, f"sb-alice-{i}", cl["metadata"]["uid"])
        await asyncio.sleep(0.5)
        assert not any(t.done() for t in tasks), "handed out without a Sandbox watch"
        for i, cl in enumerate(claims):
            await asyncio.to_thread(ctl.claim_ready, cl["metadata"]["name"], f"sb-alice-{i}")
        got = {sb.name for sb in await asyncio.wait_for(asyncio.gather(*tasks), 10)}
        assert got == {"sb-alice-0", "sb-alice-1"}


def test_wait_ready_on_a_claim_ready_already_returns_at_once(bare_server: BareServer, ns: str, ctl: Controller) -> None:
    """The claim as read is evaluated before any watch: no claim-watch delay for it."""
    with client(bare_server, ns) as c:
        sb = c.create("pool", wait=False, keep=True)
        claim = ctl.claim()
        ctl.sandbox("sb-ready", claim["metadata"]["uid"])
        ctl.claim_ready(claim["metadata"]["name"], "sb-ready")
        t0 = time.monotonic()
        sb.wait_ready(timeout=10)
        assert sb.name == "sb-ready"
        assert time.monotonic() - t0 < _k8s.CLAIM_WATCH_DELAY, "waited for the claim watch's delay"
