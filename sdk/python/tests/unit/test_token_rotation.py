"""The router's bearer token on long-lived handles: a token file is followed as it
rotates (looked at once per TOKEN_RECHECK, read again when it changed), and the
router's 401 re-reads it at once and sends the request once more when it changed."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_sandbox_sdk import (
    AsyncSandbox,
    AsyncSandboxClient,
    AuthError,
    ConfigError,
    KubeConfig,
    RouterConnection,
    Sandbox,
    SandboxClient,
    _conn,
    _ports,
    _wire,
)

from .fakes import config

STAT = {"name": "f", "path": "/f", "type": "file", "size": 1, "mode": "0644"}


class FakeRouter:
    """Accepts only the token now in the file (the router's TokenReview of a rotated
    token); refuses others with its own 401. Records the Authorization headers."""

    def __init__(self, tok: Path) -> None:
        self.tok = tok
        self.seen: list[str] = []

    def __call__(self, req: httpx.Request) -> httpx.Response:
        auth = req.headers.get("authorization", "")
        self.seen.append(auth.removeprefix("Bearer "))
        if auth != "Bearer " + self.tok.read_text().strip():
            return httpx.Response(401, json={"detail": "Invalid token."})
        if req.method == "PUT":
            req.read()
            return httpx.Response(204)
        return httpx.Response(200, json=STAT)


@pytest.fixture
def tok(tmp_path: Path) -> Path:
    p = tmp_path / "token"
    p.write_text("old\n")
    return p


@pytest.fixture
def recheck_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_conn, "TOKEN_RECHECK", 0.0, raising=False)


@pytest.fixture
def recheck_never(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_conn, "TOKEN_RECHECK", 3600.0, raising=False)


def sync_handle(conn: RouterConnection, router: FakeRouter, cfg: KubeConfig | None = None) -> Sandbox:
    c = SandboxClient(config=cfg or config(), connection=conn)
    c.http = httpx.Client(transport=httpx.MockTransport(router))
    return Sandbox(c, "default", "sb")


def async_handle(conn: RouterConnection, router: FakeRouter) -> AsyncSandbox:
    c = AsyncSandboxClient(config=config(), connection=conn)
    c.http = httpx.AsyncClient(transport=httpx.MockTransport(router))
    return AsyncSandbox(c, "default", "sb")


def rotate(tok: Path, new: str) -> None:
    tok.write_text(new + "\n")


@pytest.mark.usefixtures("recheck_now")
def test_sync_handle_follows_a_rotated_token_file(tok: Path) -> None:
    router = FakeRouter(tok)
    sb = sync_handle(RouterConnection(url="http://router.test", token_file=str(tok)), router)
    assert sb.files.stat("f").size == 1
    rotate(tok, "new")
    assert sb.files.stat("f").size == 1
    assert router.seen == ["old", "new"]


@pytest.mark.usefixtures("recheck_now")
def test_sync_handle_follows_the_kubeconfig_token_file(tok: Path) -> None:
    router = FakeRouter(tok)
    cfg = KubeConfig(server="https://kube.test", token_file=str(tok))
    sb = sync_handle(RouterConnection(url="https://router.test"), router, cfg)
    sb.files.stat("f")
    rotate(tok, "new")
    sb.files.stat("f")
    assert router.seen == ["old", "new"]


@pytest.mark.usefixtures("recheck_now")
async def test_async_handle_follows_a_rotated_token_file(tok: Path) -> None:
    router = FakeRouter(tok)
    sb = async_handle(RouterConnection(url="http://router.test", token_file=str(tok)), router)
    assert (await sb.files.stat("f")).size == 1
    rotate(tok, "new")
    assert (await sb.files.stat("f")).size == 1
    assert router.seen == ["old", "new"]


@pytest.mark.usefixtures("recheck_never")
def test_sync_router_401_rereads_the_file_and_sends_once_more(tok: Path) -> None:
    router = FakeRouter(tok)
    sb = sync_handle(RouterConnection(url="http://router.test", token_file=str(tok)), router)
    sb.files.stat("f")
    rotate(tok, "new")  # not looked at again before the next call: the router says 401
    sb.files.stat("f")
    sb.files.write("f", b"x")
    assert router.seen == ["old", "old", "new", "new"]


@pytest.mark.usefixtures("recheck_never")
async def test_async_router_401_rereads_the_file_and_sends_once_more(tok: Path) -> None:
    router = FakeRouter(tok)
    sb = async_handle(RouterConnection(url="http://router.test", token_file=str(tok)), router)
    await sb.files.stat("f")
    rotate(tok, "new")
    await sb.files.stat("f")
    assert router.seen == ["old", "old", "new"]


@pytest.mark.usefixtures("recheck_never")
def test_401_with_an_unchanged_token_is_not_sent_again(tok: Path) -> None:
    router = FakeRouter(tok)
    sb = sync_handle(RouterConnection(url="http://router.test", token_file=str(tok)), router)
    sb.files.stat("f")
    router.tok = tok.with_name("other")
    router.tok.write_text("other")
    with pytest.raises(AuthError):
        sb.files.stat("f")
    assert router.seen == ["old", "old"]


def test_literal_token_stays_as_given(tok: Path) -> None:
    router = FakeRouter(tok)
    sb = sync_handle(RouterConnection(url="http://router.test", token="lit"), router)
    with pytest.raises(AuthError):
        sb.files.stat("f")
    assert router.seen == ["lit"]


@pytest.mark.usefixtures("recheck_never")
def test_streamed_body_is_not_sent_again_after_401(tok: Path) -> None:
    router = FakeRouter(tok)
    sb = sync_handle(RouterConnection(url="http://router.test", token_file=str(tok)), router)
    sb.files.stat("f")
    rotate(tok, "new")

    def chunks() -> Iterator[bytes]:
        yield b"once"

    with pytest.raises(AuthError):
        sb.files.write("g", chunks())
    assert router.seen == ["old", "old"]
    sb.files.stat("f")  # the 401 renewed the token for the next call
    assert router.seen[-1] == "new"


@pytest.mark.usefixtures("recheck_now")
def test_port_client_follows_a_rotated_token_file(tok: Path) -> None:
    conn = RouterConnection(url="http://router.test", token_file=str(tok))
    router = FakeRouter(tok)
    opts = _ports.client_options(_ports.port_target(conn, None, "ns", "sb", None, 5000), conn, None, 5.0)
    opts.pop("verify")
    with httpx.Client(**opts, transport=httpx.MockTransport(router)) as c:
        assert c.get("x").status_code == 200
        rotate(tok, "new")
        assert c.get("x").status_code == 200
    assert router.seen == ["old", "new"]


def test_token_file_is_looked_at_once_per_recheck(tok: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_conn, "TOKEN_RECHECK", 3600.0, raising=False)
    f = _conn.TokenFile(str(tok))
    assert f.token() == "old"
    rotate(tok, "new")
    assert f.token() == "old"  # not looked at again yet
    assert f.renew() and f.token() == "new"
    assert not f.renew()  # unchanged
    tok.write_text("")
    assert not f.renew() and f.token() == "new"  # an empty file keeps the last token
    monkeypatch.setattr(_conn, "TOKEN_RECHECK", 0.0, raising=False)
    rotate(tok, "newer")
    assert f.token() == "newer"


def test_token_file_is_thread_safe(tok: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_conn, "TOKEN_RECHECK", 0.0, raising=False)
    f = _conn.TokenFile(str(tok))
    # Read once before the rotations: rotate() truncates then writes, and a first read
    # that met the empty file had no earlier token to keep (None, a flake of the test,
    # not a case of a mounted token: those are swapped whole).
    assert f.token() == "old"
    got: set[str | None] = set()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            for _ in range(200):
                got.add(f.token())
                f.renew()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(50):
        rotate(tok, f"t{i}")
    for t in threads:
        t.join()
    assert not errors and None not in got and f.token() == "t49"


def test_unreadable_token_file(tmp_path: Path) -> None:
    f = _conn.TokenFile(str(tmp_path / "missing"))
    assert f.token("fallback") == "fallback"
    with pytest.raises(ConfigError):
        f.token()


def test_router_401_is_the_routers_own() -> None:
    router = httpx.Response(401, json={"detail": "Invalid token."})
    other = httpx.Response(401, content=json.dumps({"code": "UNAUTHENTICATED", "message": "no"}).encode())
    assert _conn.Target("http://r", token=None).renew_token(router) is False
    assert _conn.TokenSource(literal="x").renew() is False
    assert _wire.router_refused_token(router) and not _wire.router_refused_token(other)
    assert not _wire.router_refused_token(httpx.Response(401, text="<html>401</html>"))
