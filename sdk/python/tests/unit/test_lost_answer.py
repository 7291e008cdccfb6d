"""files.delete and files.mkdir after a lost answer: when an earlier attempt may have
done the work (the connection was cut after the request went out, a proxy's 502), a
retry's 404 (delete) or 409 on a directory (mkdir) is success; a 404 or 409 that no
earlier attempt can have caused is still an error. And which failed answers prove the
request never reached sandboxd (_wire.not_forwarded). Likewise a background process's
kill (a SIGKILL is sent again; a retry's 409 "exited" is success; other signals are sent
once) and a code context's delete (a retry's 404 is success) after a lost answer."""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import (
    AsyncSandbox,
    AsyncSandboxClient,
    ConflictError,
    NotFoundError,
    RouterConnection,
    Sandbox,
    SandboxClient,
    SandboxConnectionError,
    _wire,
)

from .fakes import async_sandbox, config, sync_sandbox

# what the fake sandboxd does to the first request
NO_FAULT = "none"
CUT_AFTER = "cut"  # does the operation, then cuts the connection without an answer
BAD_GATEWAY = "502"  # does the operation, then the router's 502: the answer was lost
SANDBOXD_503 = "sbd503"  # does the operation, then answers sandboxd's own 503
NOT_REACHED = "503"  # the router's 503 before forwarding: nothing done


class FakeFS:
    """A sandboxd behind the router that keeps paths ("/x") and their types."""

    def __init__(self, paths: dict[str, str], first: str) -> None:
        self.paths = dict(paths)
        self.first = first
        self.n = 0
        self.lock = threading.Lock()

    def __call__(self, req: httpx.Request) -> httpx.Response:
        with self.lock:
            self.n += 1
            n = self.n
        if n == 1 and self.first == NOT_REACHED:
            return httpx.Response(503, json={"detail": "Sandbox default/sb is not ready: x."})
        status, body = self.apply(req)
        if n > 1 or self.first == NO_FAULT:
            return httpx.Response(status, json=body)
        if self.first == CUT_AFTER:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=req)
        if self.first == SANDBOXD_503:
            return httpx.Response(503, json={"code": "UNAVAILABLE", "message": "shutting down"})
        return httpx.Response(502, json={"detail": "Could not read from the backend sandbox."})

    def apply(self, req: httpx.Request) -> tuple[int, Any]:
        op, _, p = req.url.path.removeprefix("/v1/").partition("/")
        p = "/" + p
        with self.lock:
            typ = self.paths.get(p)
            if op == "files" and req.method == "DELETE" and typ:
                del self.paths[p]
                return 204, None
            if op == "mkdir" and req.method == "POST" and typ:
                return 409, {"code": "ALREADY_EXISTS", "message": "mkdir: file exists"}
            if op == "mkdir" and req.method == "POST":
                self.paths[p] = typ = "directory"
            elif not typ:
                return 404, {"code": "NOT_FOUND", "message": "no such file or directory"}
        return 200, {"name": p[1:], "path": p, "type": typ, "mode": "0755"}


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_wire.Attempts, "backoff", property(lambda self: 0.0))


CONN = RouterConnection(url="http://router.test", token="t")


def sync_op(fs: FakeFS, op: str) -> None:
    c = SandboxClient(config=config(), connection=CONN)
    c.http = httpx.Client(transport=httpx.MockTransport(fs))
    files = Sandbox(c, "default", "sb").files
    if op == "delete":
        files.delete("x")
        return
    st = files.mkdir("x", parents=False)
    assert st.is_dir and st.path == "/x"


async def async_op(fs: FakeFS, op: str) -> None:
    c = AsyncSandboxClient(config=config(), connection=CONN)
    c.http = httpx.AsyncClient(transport=httpx.MockTransport(fs))
    files = AsyncSandbox(c, "default", "sb").files
    if op == "delete":
        await files.delete("x")
        return
    st = await files.mkdir("x", parents=False)
    assert st.is_dir and st.path == "/x"


FILE, DIR = {"/x": "file"}, {"/x": "directory"}

CASES = [
    # name, paths before, first fault, op, error, type of /x after, requests
    ("delete, cut after deleting", FILE, CUT_AFTER, "delete", None, None, 2),
    ("delete, 502 after deleting", FILE, BAD_GATEWAY, "delete", None, None, 2),
    ("delete, sandboxd 503 after deleting", FILE, SANDBOXD_503, "delete", None, None, 2),
    ("delete, missing", {}, NO_FAULT, "delete", NotFoundError, None, 1),
    ("delete, missing after a 503 before forwarding", {}, NOT_REACHED, "delete", NotFoundError, None, 2),
    ("delete, present", FILE, NO_FAULT, "delete", None, None, 1),
    ("mkdir, cut after creating", {}, CUT_AFTER, "mkdir", None, "directory", 3),
    ("mkdir, 502 after creating", {}, BAD_GATEWAY, "mkdir", None, "directory", 3),
    ("mkdir, existing", DIR, NO_FAULT, "mkdir", ConflictError, "directory", 1),
    ("mkdir, existing after a 503 before forwarding", DIR, NOT_REACHED, "mkdir", ConflictError, "directory", 2),
    ("mkdir, cut, a file in the way", FILE, CUT_AFTER, "mkdir", ConflictError, "file", 3),
]


def _check(fs: FakeFS, after: str | None, reqs: int) -> None:
    assert fs.paths.get("/x") == after
    assert fs.n == reqs


@pytest.mark.parametrize(("name", "paths", "first", "op", "want", "after", "reqs"), CASES, ids=[c[0] for c in CASES])
def test_sync_lost_answer(
    name: str, paths: dict[str, str], first: str, op: str, want: type[Exception] | None, after: str | None, reqs: int
) -> None:
    fs = FakeFS(paths, first)
    if want is None:
        sync_op(fs, op)
    else:
        with pytest.raises(want):
            sync_op(fs, op)
    _check(fs, after, reqs)


@pytest.mark.parametrize(("name", "paths", "first", "op", "want", "after", "reqs"), CASES, ids=[c[0] for c in CASES])
async def test_async_lost_answer(
    name: str, paths: dict[str, str], first: str, op: str, want: type[Exception] | None, after: str | None, reqs: int
) -> None:
    fs = FakeFS(paths, first)
    run: Callable[[], Awaitable[None]] = lambda: async_op(fs, op)  # noqa: E731
    if want is None:
        await run()
    else:
        with pytest.raises(want):
            await run()
    _check(fs, after, reqs)


def test_missing_ok_delete_is_unchanged() -> None:
    fs = FakeFS({}, NO_FAULT)
    c = SandboxClient(config=config(), connection=CONN)
    c.http = httpx.Client(transport=httpx.MockTransport(fs))
    Sandbox(c, "default", "sb").files.delete("x", missing_ok=True)
    assert fs.n == 1


def _resp(status: int, body: Any) -> httpx.Response:
    if isinstance(body, str):
        return httpx.Response(status, text=body)
    return httpx.Response(status, json=body)


DIAL = "error trying to reach service: dial tcp 10.0.0.1:8080: connect: connection refused"


NOT_FORWARDED = [
    ("router 503", 503, {"detail": "Sandbox ns/sb is not ready: x."}, False, True),
    ("sandboxd 503", 503, {"code": "UNAVAILABLE", "message": "shutting down"}, False, False),
    ("other proxy 503", 503, "<html><body>503 Service Temporarily Unavailable</body></html>", False, False),
    ("empty 503", 503, "", False, False),
    ("other JSON 503", 503, {"message": "upstream connect error"}, False, False),
    ("router 502 connect", 502, {"detail": "Could not connect to the backend sandbox: sb"}, False, True),
    ("router 502 read", 502, {"detail": "Could not read from the backend sandbox."}, False, False),
    ("sandboxd 502", 502, {"code": "BAD_GATEWAY", "message": "Could not connect to the backend"}, False, False),
    ("text 502", 502, "Could not connect", False, False),
    ("router 504", 504, {"detail": "Timed out"}, False, False),
    ("pod proxy 503 dial", 503, {"kind": "Status", "message": DIAL}, True, True),
    ("pod proxy 503 EOF", 503, {"kind": "Status", "message": "error trying to reach service: EOF"}, True, False),
    ("text 503 dial", 503, DIAL, True, False),
    ("sandboxd 503 via pod proxy", 503, {"code": "UNAVAILABLE", "message": DIAL}, True, False),
    ("router body via pod proxy", 503, {"detail": "Sandbox ns/sb is not ready: x."}, True, False),
    ("pod proxy 404", 404, {"kind": "Status", "message": 'pods "p" not found'}, True, True),
    ("sandboxd 404 via pod proxy", 404, {"code": "NOT_FOUND", "message": "no such file"}, True, False),
]


@pytest.mark.parametrize(
    ("name", "status", "body", "via_kube", "want"), NOT_FORWARDED, ids=[c[0] for c in NOT_FORWARDED]
)
def test_which_answers_prove_not_forwarded(name: str, status: int, body: Any, via_kube: bool, want: bool) -> None:
    resp = _resp(status, body)
    assert _wire.not_forwarded(resp, via_kube) is want
    if status in _wire.RETRY_STATUS:
        assert _wire.outcome_unknown(resp, via_kube) is not want


# ---- a background kill and a context delete after a lost answer ---------------------


class LostOnce:
    """A sandboxd behind the router whose first answer to a request of path is lost after
    the work was done (the router's 502 "Could not read", or a cut connection): a
    background process that a SIGKILL ends, and code contexts."""

    def __init__(self, path: str, how: str) -> None:
        self.path, self.how = path, how
        self.exited = False
        self.contexts = {"c1"}
        self.hits: list[tuple[str, str]] = []

    def __call__(self, req: httpx.Request) -> httpx.Response:
        self.hits.append((req.method, req.url.path))
        status, body = self.apply(req)
        if req.url.path == self.path and self.hits.count((req.method, self.path)) == 1:
            if self.how == "cut":
                raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=req)
            if self.how == "502":
                return httpx.Response(502, json={"detail": "Could not read from the backend sandbox."})
        return httpx.Response(status, json=body)

    def apply(self, req: httpx.Request) -> tuple[int, Any]:
        p = req.url.path
        if p == "/v1/processes/5/signal":
            if self.exited:
                return 409, {"code": "FAILED_PRECONDITION", "message": "process has exited"}
            self.exited = json.loads(req.content)["signal"] in ("SIGKILL", 9)
            return 204, None
        if p.startswith("/v1/contexts/") and req.method == "DELETE":
            cid = p.rsplit("/", 1)[1]
            if cid not in self.contexts:
                return 404, {"code": "NOT_FOUND", "message": "no such context"}
            self.contexts.discard(cid)
            return 204, None
        return 404, {"code": "NOT_FOUND", "message": "no route"}


SIGNAL = "/v1/processes/5/signal"


@pytest.mark.parametrize("how", ["502", "cut"])
def test_a_background_kill_is_retried_after_a_lost_answer(how: str) -> None:
    sbd = LostOnce(SIGNAL, how)
    sync_sandbox(sbd).background(5).kill()
    assert sbd.exited and sbd.hits == [("POST", SIGNAL)] * 2


@pytest.mark.parametrize("how", ["502", "cut"])
async def test_async_a_background_kill_is_retried_after_a_lost_answer(how: str) -> None:
    sbd = LostOnce(SIGNAL, how)
    await async_sandbox(sbd).background(5).kill()
    assert sbd.exited and sbd.hits == [("POST", SIGNAL)] * 2


def test_other_signals_are_still_sent_once() -> None:
    sbd = LostOnce(SIGNAL, "502")
    with pytest.raises(SandboxConnectionError):
        sync_sandbox(sbd).background(5).signal("SIGTERM")
    assert sbd.hits == [("POST", SIGNAL)]


CONTEXT = "/v1/contexts/c1"


@pytest.mark.parametrize("how", ["502", "cut"])
def test_a_context_delete_whose_answer_was_lost_is_success(how: str) -> None:
    sbd = LostOnce(CONTEXT, how)
    sb = sync_sandbox(sbd)
    sb.contexts.delete("c1")
    assert not sbd.contexts and sbd.hits == [("DELETE", CONTEXT)] * 2
    with pytest.raises(NotFoundError):  # a 404 on the first attempt is still an error
        sb.contexts.delete("c2")


@pytest.mark.parametrize("how", ["502", "cut"])
async def test_async_a_context_delete_whose_answer_was_lost_is_success(how: str) -> None:
    sbd = LostOnce(CONTEXT, how)
    sb = async_sandbox(sbd)
    await sb.contexts.delete("c1")
    assert not sbd.contexts and sbd.hits == [("DELETE", CONTEXT)] * 2
    with pytest.raises(NotFoundError):
        await sb.contexts.delete("c2")
