"""Defects a review of the Go SDK found, checked in this SDK: the root of a recursive
delete, watch errors, names checked before any request, the rollback of a create under
a drawn name, run_code's output bound, huge read windows, and kill and context delete
after a lost answer (sync and async)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import (
    AsyncSandbox,
    AsyncSandboxClient,
    AuthError,
    NotFoundError,
    RequestError,
    RouterConnection,
    Sandbox,
    SandboxClient,
    SandboxConnectionError,
    _code,
    _k8s,
    _wire,
)

from . import fakes
from .fakes import FakeKube, FakeSandboxd, _status, config
from .test_client_fake import bind_on_create

CONN = RouterConnection(url="http://router.test", token="t")
Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_wire.Attempts, "backoff", property(lambda self: 0.0))


def sync_client(fake: FakeKube) -> SandboxClient:
    """fakes.sync_client without the lean connections (the fake answers only httpx: a
    lean connection would first look up the fake's host name)."""
    c = fakes.sync_client(fake)
    c.kube._fast.usable = False
    return c


def async_client(fake: FakeKube) -> AsyncSandboxClient:
    c = fakes.async_client(fake)
    c.kube._fast.usable = False
    return c


def sync_sandbox(handler: Handler) -> Sandbox:
    c = SandboxClient(config=config(), connection=CONN)
    c.http = httpx.Client(transport=httpx.MockTransport(handler))
    return Sandbox(c, "default", "sb")


def async_sandbox(handler: Handler) -> AsyncSandbox:
    c = AsyncSandboxClient(config=config(), connection=CONN)
    c.http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return AsyncSandbox(c, "default", "sb")


def sandboxd() -> tuple[FakeSandboxd, Handler]:
    sbd = FakeSandboxd()
    return sbd, lambda req: sbd(req, req.url.path)


# ---- 1. a recursive delete of "" or "." ----------------------------------------------

ROOT_ALIASES = ["", ".", "./", "//", "/.", "/./"]


@pytest.mark.parametrize("recursive", [True, False])
@pytest.mark.parametrize("path", ROOT_ALIASES)
def test_delete_of_a_path_that_resolves_to_the_root_is_refused(path: str, recursive: bool) -> None:
    sbd, handler = sandboxd()
    sb = sync_sandbox(handler)
    sb.files.write("keep.txt", b"x")
    with pytest.raises(ValueError, match="root"):
        sb.files.delete(path, recursive=recursive)
    assert sbd.hits == [("PUT", "/v1/files/keep.txt")]  # no DELETE was sent
    assert sb.files.read("keep.txt") == b"x"


@pytest.mark.parametrize("path", ROOT_ALIASES)
async def test_async_delete_of_a_path_that_resolves_to_the_root_is_refused(path: str) -> None:
    sbd, handler = sandboxd()
    sb = async_sandbox(handler)
    await sb.files.write("keep.txt", b"x")
    with pytest.raises(ValueError, match="root"):
        await sb.files.delete(path, recursive=True)
    assert sbd.hits == [("PUT", "/v1/files/keep.txt")]
    assert await sb.files.read("keep.txt") == b"x"


def test_the_root_is_deleted_recursively_only_as_slash() -> None:
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(204)

    sync_sandbox(handler).files.delete("/", recursive=True)
    [req] = seen
    assert (req.method, req.url.path, req.url.params.get("recursive")) == ("DELETE", "/v1/files/", "true")


# ---- 2. watch errors map to the documented types -------------------------------------


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
    c = sync_client(fake)
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
    async with async_client(fake) as c:
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


# ---- 3. names are checked before any request -----------------------------------------

UNSAFE_NAMES = ["", "a/b", "a b", ".", "..", "a?b", "a#b", "a%2Fb", "a\\b", "a\tb", "a\x00b", "abc\n"]
INVALID_NAMES = ["Upper", "a_b", "-a", "a" * 254]


@pytest.mark.parametrize("name", UNSAFE_NAMES)
def test_get_and_delete_with_an_unsafe_name_make_no_request(name: str) -> None:
    fake = FakeKube()
    fake.put("sandboxclaims", {"metadata": {"name": "cl"}, "spec": {}})
    c = sync_client(fake)
    with pytest.raises(ValueError):
        c.get(name, timeout=5)
    with pytest.raises(ValueError):
        c.delete(name)  # "" was a DELETE of the collection: every claim of the namespace
    if name:  # create(name="") draws a name (test_name_and_rollback_fixes)
        with pytest.raises(ValueError):
            c.create("pool", name=name)
    assert fake.requests == []
    assert ("sandboxclaims", "default", "cl") in fake.store


@pytest.mark.parametrize("name", UNSAFE_NAMES)
async def test_async_get_and_delete_with_an_unsafe_name_make_no_request(name: str) -> None:
    fake = FakeKube()
    async with async_client(fake) as c:
        with pytest.raises(ValueError):
            await c.get(name, timeout=5)
        with pytest.raises(ValueError):
            await c.delete(name)
    assert fake.requests == []


@pytest.mark.parametrize("name", INVALID_NAMES)
def test_create_refuses_an_invalid_name(name: str) -> None:
    fake = FakeKube()
    with pytest.raises(ValueError):
        sync_client(fake).create("pool", name=name)
    assert fake.requests == []


def test_valid_names() -> None:
    for name in ("a", "sandbox-claim-1f2e", "a.b-c", "0" * 253):
        assert _k8s.check_name(name) == name


# ---- 4. a create under a drawn name ------------------------------------------------


class StoredThen(FakeKube):
    """Stores each POSTed object, then answers as fault says: an API server's 504 or 500,
    a read timeout (no answer), or a 422 refusal (and then stores nothing)."""

    def __init__(self, fault: str) -> None:
        super().__init__()
        self.fault = fault

    def __call__(self, req: httpx.Request) -> httpx.Response:
        if req.method != "POST":
            return super().__call__(req)
        if self.fault == "422":
            self.requests.append(req)
            return _status(422, "Invalid", "spec: invalid")
        resp = super().__call__(req)
        assert resp.status_code == 201
        if self.fault == "timeout":
            raise httpx.ReadTimeout("timed out", request=req)
        return _status(int(self.fault), "Timeout" if self.fault == "504" else "InternalError", "etcd slow")


@pytest.mark.parametrize("fault", ["504", "500", "timeout"])
def test_a_create_stored_but_not_answered_is_rolled_back(fault: str) -> None:
    fake = StoredThen(fault)
    with pytest.raises((RequestError, SandboxConnectionError)):
        sync_client(fake).create("pool")
    assert not [k for k in fake.store if k[0] == "sandboxclaims"]  # the claim is gone
    [post] = fake.calls("POST", r"/sandboxclaims$")
    [delete] = fake.calls("DELETE", r"/sandboxclaims/")
    assert delete.url.path == f"{post.url.path}/{json.loads(post.content)['metadata']['name']}"  # by name


@pytest.mark.parametrize("fault", ["504", "timeout"])
async def test_async_a_create_stored_but_not_answered_is_rolled_back(fault: str) -> None:
    fake = StoredThen(fault)
    async with async_client(fake) as c:
        with pytest.raises((RequestError, SandboxConnectionError)):
            await c.create("pool")
    assert not [k for k in fake.store if k[0] == "sandboxclaims"]


def test_a_refused_create_or_a_named_one_is_not_deleted() -> None:
    fake = StoredThen("422")
    with pytest.raises(RequestError):
        sync_client(fake).create("pool")
    assert not fake.calls("DELETE", r".")  # a 4xx stored nothing
    fake = StoredThen("504")
    with pytest.raises(RequestError):
        sync_client(fake).create("pool", name="mine")  # the caller's name: maybe not ours
    assert not fake.calls("DELETE", r".") and ("sandboxclaims", "default", "mine") in fake.store


def drawn(monkeypatch: pytest.MonkeyPatch, suffixes: list[str]) -> None:
    it: Iterator[str] = iter(suffixes)
    monkeypatch.setattr(_k8s.secrets, "token_hex", lambda n: next(it))


def test_a_taken_name_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    theirs = fake.put("sandboxclaims", {"metadata": {"name": "sandbox-claim-taken"}, "spec": {}})
    drawn(monkeypatch, ["taken", "fresh"])
    sb = sync_client(fake).create("pool")
    assert sb.claim == "sandbox-claim-fresh" and sb.name == "sandbox-claim-fresh-sb"
    assert fake.store[("sandboxclaims", "default", "sandbox-claim-taken")] == theirs
    assert len(fake.calls("POST", r"/sandboxclaims$")) == 2 and not fake.calls("DELETE", r".")


async def test_async_a_taken_name_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    fake.put("sandboxclaims", {"metadata": {"name": "sandbox-claim-taken"}, "spec": {}})
    drawn(monkeypatch, ["taken", "fresh"])
    async with async_client(fake) as c:
        sb = await c.create("pool")
    assert sb.claim == "sandbox-claim-fresh" and ("sandboxclaims", "default", "sandbox-claim-taken") in fake.store


def test_names_are_drawn_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeKube()
    fake.put("sandboxclaims", {"metadata": {"name": "sandbox-claim-taken"}, "spec": {}})
    drawn(monkeypatch, ["taken"] * 10)
    with pytest.raises(RequestError) as ei:
        sync_client(fake).create("pool")
    assert (ei.value.status, ei.value.code) == (409, "AlreadyExists")
    assert len(fake.calls("POST", r"/sandboxclaims$")) == _k8s.CREATE_NAME_TRIES
    assert not fake.calls("DELETE", r".") and ("sandboxclaims", "default", "sandbox-claim-taken") in fake.store


# ---- 6. run_code's output is bounded -------------------------------------------------


def _execute_answer(lines: list[Any]) -> Handler:
    body = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines).encode()

    def handler(req: httpx.Request) -> httpx.Response:
        assert req.url.path == "/v1/code/execute"
        return httpx.Response(200, content=body)

    return handler


CHATTY = [
    {"type": "stdout", "text": "0123456789"},
    {"type": "stderr", "text": "abcdef"},
    {"type": "stdout", "text": "ABCDEFGHIJ"},
    {"type": "result", "data": {"text/plain": "42"}, "is_main": True},
    {"type": "end", "execution_count": 1, "truncated": False, "timed_out": False},
]


def test_run_code_keeps_at_most_max_output() -> None:
    out: list[str] = []
    results: list[object] = []
    sb = sync_sandbox(_execute_answer(CHATTY))
    ex = sb.run_code("x", max_output=12, on_stdout=out.append, on_result=results.append)
    assert (ex.stdout, ex.stderr, ex.results, ex.truncated) == ("0123456789", "ab", [], True)
    assert out == ["0123456789", "ABCDEFGHIJ"] and len(results) == 1  # the callbacks get it all
    ex = sb.run_code("x")  # the default bound keeps all of it
    assert (ex.stdout, ex.stderr, ex.text, ex.truncated) == ("0123456789ABCDEFGHIJ", "abcdef", "42", False)
    with pytest.raises(ValueError):
        sb.run_code("x", max_output=-1)


async def test_async_run_code_keeps_at_most_max_output() -> None:
    sb = async_sandbox(_execute_answer(CHATTY))
    ex = await sb.run_code("x", max_output=28)
    assert (ex.stdout, ex.stderr, ex.text, ex.truncated) == ("0123456789ABCDEFGHIJ", "abcdef", None, True)


def test_run_code_refuses_an_endless_event_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_code, "MAX_EVENT_LINE", 100)
    line = json.dumps({"type": "stdout", "text": "x" * 200})
    with pytest.raises(SandboxConnectionError, match="over 100 bytes"):
        sync_sandbox(_execute_answer([line])).run_code("x")


def test_line_splitter() -> None:
    sp = _code.LineSplitter(8)
    assert sp.feed(b"ab") == [] and sp.feed(b"c\r\nd\n\ne") == ["abc\r", "d", ""] and sp.rest() == ["e"]
    with pytest.raises(SandboxConnectionError):
        sp.feed(b"123456789")  # no line end yet, and over the limit
    with pytest.raises(SandboxConnectionError):
        _code.LineSplitter(8).feed(b"123456789\n")


# ---- 7. huge read windows ------------------------------------------------------------

U64_MAX = (1 << 64) - 1


def window_sandboxd(data: bytes) -> Handler:
    """A file read as sandboxd answers it: offset and max_bytes must be 64-bit unsigned
    numbers (400 otherwise); at or past the end 416."""

    def handler(req: httpx.Request) -> httpx.Response:
        q = req.url.params
        nums = {k: q[k] for k in ("offset", "max_bytes") if k in q}
        if any(not v.isdigit() or int(v) > U64_MAX for v in nums.values()):
            return httpx.Response(400, json={"code": "INVALID_ARGUMENT", "message": "must be non-negative integers"})
        start = int(nums.get("offset", 0))
        if start >= len(data):
            return httpx.Response(416, json={"code": "OUT_OF_RANGE", "message": "past the end"})
        end = start + int(nums.get("max_bytes", len(data)))
        return httpx.Response(200, content=data[start:end])

    return handler


@pytest.mark.parametrize("big", [sys.maxsize, U64_MAX, 10**30])
def test_reads_with_a_huge_window(big: int) -> None:
    files = sync_sandbox(window_sandboxd(b"hello")).files
    assert files.read("f", max_bytes=big) == b"hello"
    assert files.read("f", offset=2, max_bytes=big) == b"llo"
    assert files.read("f", offset=big) == b""
    assert files.read("f", offset=1, max_bytes=2) == b"el"


async def test_async_reads_with_a_huge_window() -> None:
    files = async_sandbox(window_sandboxd(b"hello")).files
    assert await files.read("f", max_bytes=10**30) == b"hello"
    assert await files.read("f", offset=10**30, max_bytes=10**30) == b""


# ---- 8. kill and context delete after a lost answer -----------------------------------


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
