"""The early hand-out of create(pool) against a real API server with no controller: the
test plays the controller (binds a Sandbox to the claim, writes statuses), so it decides
exactly what the SDK sees and when."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_sandbox_sdk import AsyncSandboxClient, SandboxClient, SandboxFailedError, _k8s
from agent_sandbox_sdk._kube_sync import HandoutStream, KubeClient, _HttpxWatch, _LeanWatch

from .conftest import BareServer

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
        assert bg.done_at - t0 < 10.0  # ended by the failure, long before the 30 s timeout
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
        await asyncio.to_thread(ctl.claim_failed, claim["metadata"]["name"], "WarmPoolNotFound")
        with pytest.raises(SandboxFailedError) as ei:
            await asyncio.wait_for(task, 5)  # ended by the failure, not the 30 s timeout
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


def stream_socket(hs: HandoutStream) -> socket.socket:
    """The socket of the hand-out stream's open watch (a lean connection, else httpx's)."""
    resp = hs.resp
    if isinstance(resp, _LeanWatch):
        sock = resp.resp._conn.sock
    else:
        assert isinstance(resp, _HttpxWatch)
        sock = resp.resp.extensions["network_stream"].get_extra_info("socket")
    assert isinstance(sock, socket.socket)
    return sock


def test_a_stream_the_server_ended_is_replaced(
    bare_server: BareServer, ns: str, ctl: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    with client(bare_server, ns) as c:
        seen = Watches(c, monkeypatch)
        handed_out(c, ctl, "sb-1")
        hs = c.kube._streams[ns]
        assert isinstance(hs.resp, _LeanWatch)  # the stream is read off a lean connection
        stream_socket(hs).shutdown(socket.SHUT_RDWR)  # as when the server ends it
        handed_out(c, ctl, "sb-2")  # the stream ends at once: this claim watches on its own
        assert seen.opened == 1 and len(seen.own) == 1 and not hs.open
        handed_out(c, ctl, "sb-3")  # and the next claim opens a new stream
        assert seen.opened == 2 and len(seen.own) == 1 and hs.open
        # a stream unread for HANDOUT_STREAM_IDLE is reopened, not read through
        monkeypatch.setattr(_k8s, "HANDOUT_STREAM_IDLE", 0.0)
        old = hs.resp
        handed_out(c, ctl, "sb-4")
        assert seen.opened == 3 and hs.resp is not old and len(seen.own) == 1


def until(pred: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def waiting(c: SandboxClient, ns: str) -> list[str]:
    """The claim UIDs waited for on the client's stream in ns, the leader's first."""
    hs = c.kube._streams.get(ns)
    if hs is None:
        return []
    with hs.lock:
        lead = [hs.leader.uid] if hs.leader is not None else []
        return lead + [w.uid for ws in hs.waiters.values() for w in ws if w is not hs.leader]


def creates(c: SandboxClient, ctl: Controller, n: int) -> tuple[list[Background], list[dict[str, Any]]]:
    """n create(pool) at once from threads of their own, and their claims."""
    bgs = [Background(lambda: c.create("pool", keep=True, timeout=30)) for _ in range(n)]
    return bgs, [ctl.claim() for _ in range(n)]


def test_claims_at_once_share_the_stream(
    bare_server: BareServer, ns: str, ctl: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six claims at once from one client's threads: one stream serves them all, read by
    one waiting thread at a time, no claim watches its own Sandboxes, and each gets its
    own Sandbox; no thread is left behind."""
    threads = threading.active_count()
    with client(bare_server, ns) as c:
        seen = Watches(c, monkeypatch)
        handed_out(c, ctl, "sb-0")  # the stream is open
        bgs, claims = creates(c, ctl, 6)
        for i, cl in enumerate(claims):
            ctl.sandbox(f"sb-par-{i}", cl["metadata"]["uid"])
        got = {(sb.claim, sb.name) for sb in (bg.result() for bg in bgs)}
        assert got == {(cl["metadata"]["name"], f"sb-par-{i}") for i, cl in enumerate(claims)}
        assert (seen.opened, seen.own) == (1, [])
        assert waiting(c, ns) == [] and c.kube._streams[ns].open
    assert threading.active_count() <= threads, "a thread outlived the client"


def test_claims_at_once_open_one_stream(
    bare_server: BareServer, ns: str, ctl: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six claims at once from a client with no stream yet: the first wait opens it (from
    the oldest claim waiting then) and the others wait on it; a claim whose POST answered
    after the stream opened from a newer claim's watches its own Sandboxes. Each gets
    its own Sandbox, and the stream stays open for the next claims."""
    with client(bare_server, ns) as c:
        seen = Watches(c, monkeypatch)
        bgs, claims = creates(c, ctl, 6)
        for i, cl in enumerate(claims):
            ctl.sandbox(f"sb-cold-{i}", cl["metadata"]["uid"])
        got = {(sb.claim, sb.name) for sb in (bg.result() for bg in bgs)}
        assert got == {(cl["metadata"]["name"], f"sb-cold-{i}") for i, cl in enumerate(claims)}
        assert seen.opened == 1 and len(seen.own) < 6 and c.kube._streams[ns].open


def test_the_leader_handed_out_first_leaves_the_stream_to_a_follower(
    bare_server: BareServer, ns: str, ctl: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread reading the stream (the first wait) is handed out while two others
    wait: one of them reads on, the same stream, and both are handed out on it."""
    with client(bare_server, ns) as c:
        seen = Watches(c, monkeypatch)
        first = Background(lambda: c.create("pool", keep=True, timeout=30))
        uid = ctl.claim()["metadata"]["uid"]
        until(lambda: waiting(c, ns) == [uid] and c.kube._streams[ns].resp is not None, "the stream is not read")
        hs = c.kube._streams[ns]
        resp = hs.resp
        bgs, claims = creates(c, ctl, 2)
        others = {cl["metadata"]["uid"] for cl in claims}
        until(lambda: set(waiting(c, ns)) == {uid, *others}, "the other waits did not register")
        ctl.sandbox("sb-lead", uid)
        assert first.result().name == "sb-lead"
        until(lambda: bool(waiting(c, ns)) and waiting(c, ns)[0] in others, "no follower took the lead")
        assert all(bg.running_after(0.1) for bg in bgs)
        for i, cl in enumerate(claims):
            ctl.sandbox(f"sb-follow-{i}", cl["metadata"]["uid"])
        assert {bg.result().name for bg in bgs} == {"sb-follow-0", "sb-follow-1"}
        assert (seen.opened, seen.own) == (1, []) and hs.resp is resp and hs.open


def test_a_binding_seen_before_its_wait_registered_is_kept(
    bare_server: BareServer, ns: str, ctl: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim bound (and its Sandbox Ready) before its wait registers, while another
    wait reads the stream: the reader keeps the binding, and the late wait takes it
    without a watch (the claim's status is never written)."""
    with client(bare_server, ns) as c:
        seen = Watches(c, monkeypatch)
        reader = Background(lambda: c.create("pool", keep=True, timeout=30))
        uid = ctl.claim()["metadata"]["uid"]
        until(lambda: waiting(c, ns) == [uid], "the first wait does not read the stream")
        hs = c.kube._streams[ns]
        gate, wait_claim = threading.Event(), c.kube.wait_claim

        def late(*a: Any) -> dict[str, Any]:
            assert gate.wait(10)
            return wait_claim(*a)

        monkeypatch.setattr(c.kube, "wait_claim", late)
        bg = Background(lambda: c.create("pool", keep=True, timeout=30))
        claim = ctl.claim()
        late_uid = claim["metadata"]["uid"]
        ctl.sandbox("sb-early", late_uid)

        def kept() -> bool:
            ev = _k8s.parse_watch_line(hs.recent.get(late_uid, time.monotonic()) or "{}")
            return ev is not None and _k8s.handed_out(ev[1], late_uid)

        until(kept, "the reader did not keep the binding")
        gate.set()
        sb = bg.result()
        assert (sb.name, sb.claim) == ("sb-early", claim["metadata"]["name"])
        assert reader.running_after(0.1) and waiting(c, ns) == [uid]
        ctl.sandbox("sb-reader", uid)
        assert reader.result().name == "sb-reader"
        assert (seen.opened, seen.own) == (1, [])


def test_a_stream_the_server_ended_while_several_wait(
    bare_server: BareServer, ns: str, ctl: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream ends under its reader while four claims wait: the reader watches its
    own Sandboxes, as a single wait does; a follower reopens the stream from where it was
    read up to, and the others are handed out on it. None is lost."""
    with client(bare_server, ns) as c:
        seen = Watches(c, monkeypatch)
        handed_out(c, ctl, "sb-0")
        hs = c.kube._streams[ns]
        bgs, claims = creates(c, ctl, 4)
        until(lambda: len(waiting(c, ns)) == 4, "the waits did not register")
        assert hs.resp is not None
        stream_socket(hs).shutdown(socket.SHUT_RDWR)
        until(lambda: seen.opened == 2, "no follower reopened the stream")
        for i, cl in enumerate(claims):
            ctl.sandbox(f"sb-end-{i}", cl["metadata"]["uid"])
        got = {(sb.claim, sb.name) for sb in (bg.result() for bg in bgs)}
        assert got == {(cl["metadata"]["name"], f"sb-end-{i}") for i, cl in enumerate(claims)}
        assert (seen.opened, len(seen.own)) == (2, 1) and hs.open


def test_a_leader_the_claim_stopped_leaves_the_stream_to_a_follower(
    bare_server: BareServer, ns: str, ctl: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader's claim decides (its Ready, nothing bound): stopping its wait closes
    the stream, a follower reopens it from where it was read up to and is handed out on
    it, including a binding made while no one read."""
    with client(bare_server, ns) as c:
        seen = Watches(c, monkeypatch)
        first = Background(lambda: c.create("pool", keep=True, timeout=30))
        lead = ctl.claim()
        until(lambda: waiting(c, ns) == [lead["metadata"]["uid"]], "the first wait does not read the stream")
        bgs, claims = creates(c, ctl, 2)
        until(lambda: len(waiting(c, ns)) == 3, "the other waits did not register")
        ctl.claim_ready(lead["metadata"]["name"], "sb-from-claim")
        ctl.sandbox("sb-stop-0", claims[0]["metadata"]["uid"])
        assert first.result().name == "sb-from-claim"
        ctl.sandbox("sb-stop-1", claims[1]["metadata"]["uid"])
        got = {(sb.claim, sb.name) for sb in (bg.result() for bg in bgs)}
        assert got == {(cl["metadata"]["name"], f"sb-stop-{i}") for i, cl in enumerate(claims)}
        assert (seen.opened, seen.own) == (2, [])


def test_one_claim_waited_for_twice_at_once(
    bare_server: BareServer, ns: str, ctl: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads wait for the same claim: both are handed its Sandbox by the one
    stream, and a third wait after the binding takes it from what the stream kept."""
    with client(bare_server, ns) as c:
        seen = Watches(c, monkeypatch)
        sb = c.create("pool", wait=False, keep=True)
        uid = ctl.claim()["metadata"]["uid"]
        bgs = [Background(lambda: sb.wait_ready(timeout=30)) for _ in range(2)]
        until(lambda: waiting(c, ns) == [uid, uid], "the two waits did not register")
        ctl.sandbox("sb-twice", uid)
        for bg in bgs:
            bg.result()
        assert sb.name == "sb-twice"
        claim = c.kube.get("sandboxclaims", ns, sb.claim)
        w = _k8s.Wait("SandboxClaim", sb.claim)
        c.kube.claim_watch_delay = 30.0  # a wait that needed the claim's watch would take it
        t0 = time.monotonic()
        assert c.kube.wait_claim(ns, sb.claim, claim, 60, w)["metadata"]["name"] == "sb-twice"
        assert time.monotonic() - t0 < 10.0 and w.sandbox == "sb-twice"
        assert (seen.opened, seen.own) == (1, [])


def test_no_watch_permission_with_several_waits(bare_server: BareServer, ns: str, ctl: Controller) -> None:
    """The shared stream refused while three claims wait: each falls back to its claim."""
    grant_claims_only(ctl, ns)
    with SandboxClient(namespace=ns, kubeconfig=bare_server.alice, connection="direct") as c:
        bgs, claims = creates(c, ctl, 3)
        for i, cl in enumerate(claims):
            ctl.sandbox(f"sb-alice-{i}", cl["metadata"]["uid"])
        assert all(bg.running_after(0.2) for bg in bgs), "handed out without a Sandbox watch"
        for i, cl in enumerate(claims):
            ctl.claim_ready(cl["metadata"]["name"], f"sb-alice-{i}")
        assert {bg.result().name for bg in bgs} == {f"sb-alice-{i}" for i in range(3)}


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
        # the lean connections carried the 11 POSTs and the stream (_fasthttp_async)
        assert c.kube._fast.sent >= 12, c.kube._fast.sent
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
        c.kube.claim_watch_delay = 30.0  # a wait that needed the claim's watch would take it
        t0 = time.monotonic()
        sb.wait_ready(timeout=60)
        assert sb.name == "sb-ready"
        assert time.monotonic() - t0 < 10.0, "waited for the claim watch's delay"
