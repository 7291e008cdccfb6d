"""The pure parts of the filesystem operations: paths, request bodies, parsing; and
through the sync and async clients against a fake sandboxd: stat's follow_symlinks, a
delete of a path that resolves to the root (refused before any request; only "/" deletes
the root, recursively) and reads with a huge window (offset, max_bytes past 64 bits)."""

from __future__ import annotations

import base64
import json
import sys
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import NotFoundError, _fsops
from agent_sandbox_sdk.models import FileEvent

from .fakes import (
    FakeKube,
    FakeSandboxd,
    Handler,
    async_client,
    async_sandbox,
    ready,
    sync_client,
    sync_sandbox,
)

pytestmark = pytest.mark.usefixtures("no_backoff")


def test_api_path_escapes_and_refuses() -> None:
    assert _fsops.api_path("/v1/stat/", "/a b/c") == "/v1/stat/a%20b/c"
    assert _fsops.api_path("/v1/watch/", "") == "/v1/watch/"
    with pytest.raises(ValueError):
        _fsops.api_path("/v1/mkdir/", "a/../../b")
    with pytest.raises(ValueError):
        _fsops.move_args("a", "b\n", False)


def test_parse_time_and_stat() -> None:
    t = _fsops.parse_time("2026-12-01T18:12:33.123456789Z")
    assert t == datetime(2026, 12, 1, 18, 12, 33, 123456, tzinfo=timezone.utc)
    assert _fsops.parse_time("2026-12-01T18:12:33Z").microsecond == 0
    st = _fsops.parse_stat(
        {"name": "l", "path": "/l", "type": "symlink", "size": 3, "mode": "0777", "mtime": "2026-01-01T00:00:00.5Z"}
        | {"symlink_target": "x"}
    )
    assert (st.is_symlink, st.symlink_target, st.mtime.microsecond) == (True, "x", 500000)


@pytest.mark.parametrize(
    ("line", "want"),
    [
        ('{"type":"create","path":"a","is_dir":false}', FileEvent("create", "a")),
        ('{"type":"move","path":"b","from":"a","to":"b","is_dir":true}', FileEvent("move", "b", True, "a", "b")),
        ('{"type":"overflow","lost":7}', FileEvent("overflow", lost=7)),
        ('{"type":"overflow","lost":null}', FileEvent("overflow")),
        ('{"type":"error","message":"m"}', FileEvent("error", message="m")),
        ('{"type":"something-new"}', None),
        ("  ", None),
    ],
)
def test_parse_event(line: str, want: FileEvent | None) -> None:
    assert _fsops.parse_event(line) == want


def test_batch_args() -> None:
    kw: dict[str, Any] = _fsops.batch_args({"a": b"\x00", "b": "é"})
    body = json.loads(kw["content"])
    assert [base64.b64decode(f["content"]) for f in body["files"]] == [b"\x00", "é".encode()]
    kw = _fsops.batch_args([("x", b"", 0o600)])
    assert json.loads(kw["content"])["files"][0]["mode"] == "0600"
    with pytest.raises(ValueError):
        _fsops.batch_args({})
    with pytest.raises(ValueError):
        _fsops.batch_args({"../x": b""})


def test_read_args() -> None:
    assert _fsops.read_args(0, None) == {}
    assert _fsops.read_args(5, 10) == {"params": {"offset": "5", "max_bytes": "10"}, "ok": (416,)}
    assert _fsops.read_args(0, 0)["params"] == {"max_bytes": "0"}
    with pytest.raises(ValueError):
        _fsops.read_args(-1, None)
    assert _fsops.watch_url("http://h", "d", True, 16) == "http://h/v1/watch/d?recursive=true&queue=16"


def test_stat_request() -> None:
    assert _fsops.stat_request("/a b/l", False) == ("/v1/stat/a%20b/l", {})
    assert _fsops.stat_request("a b/l", True) == ("/v1/stat/a%20b/l", {"params": {"follow": "true"}})
    assert _fsops.stat_request("", True) == ("/v1/stat/", {"params": {"follow": "true"}})
    with pytest.raises(ValueError):
        _fsops.stat_request("a/../../b", True)


def _fake_with_links() -> tuple[FakeKube, FakeSandboxd]:
    """A Ready Sandbox "sb" whose sandboxd holds d/f.txt, the link d/l to it, a link to
    that link and a dangling link."""
    fake = FakeKube()
    fake.put(
        "sandboxes",
        {
            "metadata": {"name": "sb", "annotations": {"agents.x-k8s.io/pod-name": "sb-pod"}},
            "spec": {},
            "status": {"podIPs": ["10.0.0.1"], "conditions": [ready()]},
        },
    )
    fake.sandboxd = sbd = FakeSandboxd()
    sbd.files["d/f.txt"] = b"12345"
    sbd.links.update({"d/l": "f.txt", "d/chain": "../d/l", "d/dangling": "nope"})
    return fake, sbd


def _follow_params(sbd: FakeSandboxd) -> list[tuple[str, str | None]]:
    """(path, follow parameter or None) of every stat sandboxd got, in order."""
    stats = [r for r in sbd.requests if "/v1/stat/" in r.url.path]
    return [(r.url.path.split("/v1/stat/", 1)[1], r.url.params.get("follow")) for r in stats]


def test_stat_follow_symlinks_sync() -> None:
    fake, sbd = _fake_with_links()
    files = sync_client(fake).get("sb").files
    st = files.stat("d/l")
    assert (st.type, st.symlink_target) == ("symlink", "f.txt")
    st = files.stat("d/l", follow_symlinks=True)
    assert (st.type, st.size, st.path, st.symlink_target) == ("file", 5, "/d/l", None)
    assert files.stat("d/chain", follow_symlinks=True).size == 5
    assert files.stat("d/f.txt", follow_symlinks=False).is_file
    with pytest.raises(NotFoundError):
        files.stat("d/dangling", follow_symlinks=True)
    assert files.exists("d/dangling")  # exists() describes the link itself
    assert _follow_params(sbd) == [
        ("d/l", None),
        ("d/l", "true"),
        ("d/chain", "true"),
        ("d/f.txt", None),
        ("d/dangling", "true"),
        ("d/dangling", None),
    ]


async def test_stat_follow_symlinks_async() -> None:
    fake, sbd = _fake_with_links()
    async with async_client(fake) as c:
        files = (await c.get("sb")).files
        st = await files.stat("d/l")
        assert (st.type, st.symlink_target) == ("symlink", "f.txt")
        st = await files.stat("d/l", follow_symlinks=True)
        assert (st.type, st.size, st.path, st.symlink_target) == ("file", 5, "/d/l", None)
        assert (await files.stat("d/chain", follow_symlinks=True)).size == 5
        with pytest.raises(NotFoundError):
            await files.stat("d/dangling", follow_symlinks=True)
    assert _follow_params(sbd) == [("d/l", None), ("d/l", "true"), ("d/chain", "true"), ("d/dangling", "true")]


# ---- a delete of a path that resolves to the root ------------------------------------

ROOT_ALIASES = ["", ".", "./", "//", "/.", "/./"]


def sandboxd() -> tuple[FakeSandboxd, Handler]:
    sbd = FakeSandboxd()
    return sbd, lambda req: sbd(req, req.url.path)


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


# ---- reads with a huge window ---------------------------------------------------------

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
