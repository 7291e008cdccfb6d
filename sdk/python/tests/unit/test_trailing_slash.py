"""A path that ends with "/" names a directory, sync and async, against a fake sandboxd
that drops a trailing slash as the real one does (it cleans every path lexically):
reading or writing a file through such a path is refused before any request (it read
or wrote the file before the slash: ``read("f.txt/")`` read f.txt); stat, exists,
delete and move find only a directory there."""

from __future__ import annotations

import asyncio
import json
import posixpath
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import NotFoundError, _fsops, _wire

from .fakes import async_sandbox, sync_sandbox

pytestmark = pytest.mark.usefixtures("no_backoff")


class SlashDroppingSandboxd:
    """Files and directories as sandboxd serves them: every path cleaned lexically, so
    "f.txt/" is f.txt. ``links`` maps a symlink to the directory it leads to."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {"f.txt": b"file", "d/in.txt": b"in"}
        self.dirs: set[str] = {"d"}
        self.links: dict[str, str] = {"ld": "d"}
        self.hits: list[tuple[str, str]] = []

    @staticmethod
    def clean(p: str) -> str:
        return posixpath.normpath("/" + p).lstrip("/")

    def kind(self, key: str, follow: bool) -> str | None:
        if key in self.links:
            return self.kind(self.links[key], follow) if follow else "symlink"
        return "file" if key in self.files else "directory" if key in self.dirs or key == "" else None

    def __call__(self, req: httpx.Request) -> httpx.Response:
        path = req.url.path
        self.hits.append((req.method, path))
        if path.startswith("/v1/stat/"):
            key = self.clean(path[len("/v1/stat/") :])
            kind = self.kind(key, req.url.params.get("follow") == "true")
            if kind is None:
                return httpx.Response(404, json={"code": "NOT_FOUND", "message": "stat: not found"})
            return httpx.Response(200, json={"name": posixpath.basename(key), "path": "/" + key, "type": kind})
        if path == "/v1/move":
            body = json.loads(req.content)
            src, dst = self.clean(body["from"]), self.clean(body["to"])
            if src in self.files:
                self.files[dst] = self.files.pop(src)
            elif src in self.dirs:
                self.dirs.discard(src)
                self.dirs.add(dst)
            else:
                return httpx.Response(404, json={"code": "NOT_FOUND", "message": "move: not found"})
            return httpx.Response(204)
        if path.startswith("/v1/files/"):
            key = self.clean(path[len("/v1/files/") :])
            if req.method == "PUT":
                self.files[key] = req.read()
                return httpx.Response(204)
            if req.method == "DELETE":
                if key in self.files:
                    del self.files[key]
                elif key in self.dirs:
                    self.dirs.discard(key)
                else:
                    return httpx.Response(404, json={"code": "NOT_FOUND", "message": "delete: not found"})
                return httpx.Response(204)
            if key in self.files:
                return httpx.Response(200, content=self.files[key])
            if key in self.dirs:
                return httpx.Response(200, json={"entries": []})
            return httpx.Response(404, json={"code": "NOT_FOUND", "message": "open: not found"})
        return httpx.Response(404, json={"code": "NOT_FOUND", "message": "no route"})


Files = Any


def _run(kind: str, sbd: SlashDroppingSandboxd, body: Callable[[Files], Any]) -> Any:
    """body(files) through a sync or an async handle on sbd (the async body is awaited)."""
    if kind == "sync":
        return body(sync_sandbox(sbd).files)

    async def main() -> Any:
        return await body(async_sandbox(sbd).files)

    return asyncio.run(main())


async def _drain(it: Any) -> bytes:
    return b"".join([chunk async for chunk in it])


DIR_FORMS = ["f.txt/", "f.txt//", "f.txt/.", "/f.txt/", "d/", "nothing/", "", "/", "."]


def test_names_directory() -> None:
    for p in DIR_FORMS:
        assert _wire.names_directory(p), p
    for p in ("f.txt", "/d", "a/.hidden", "a/b.", "./x"):
        assert not _wire.names_directory(p), p
    assert _fsops.dir_only("d/") and _fsops.dir_only("a/b/.")
    assert not _fsops.dir_only("/") and not _fsops.dir_only("") and not _fsops.dir_only("./")


@pytest.mark.parametrize("path", DIR_FORMS)
def test_file_content_path_refuses_directory_forms(path: str) -> None:
    with pytest.raises(ValueError, match=r"names (a directory|the sandbox root)"):
        _wire.file_content_path(path, "read")
    assert _wire.file_content_path("/a b/f.txt", "read") == "/v1/files/a%20b/f.txt"
    with pytest.raises(ValueError, match="write_many"):
        _fsops.batch_args({"ok.txt": b"", path: b"x"})


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("path", ["f.txt/", "f.txt/.", "d/", "new.txt/"])
def test_reads_and_writes_through_a_trailing_slash_are_refused(kind: str, path: str, tmp_path: Path) -> None:
    local = tmp_path / "up.txt"
    local.write_bytes(b"local")
    sbd = SlashDroppingSandboxd()
    if kind == "sync":
        calls: list[Callable[[Files], Any]] = [
            lambda f: f.read(path),
            lambda f: f.read(path, offset=1, max_bytes=2),
            lambda f: f.read_text(path),
            lambda f: b"".join(f.iter_read(path)),
            lambda f: f.download(path, tmp_path / "down"),
            lambda f: f.write(path, b"new"),
            lambda f: f.write(path, iter([b"new"])),
            lambda f: f.upload(local, path),
            lambda f: f.write_many({path: b"new"}),
        ]
    else:
        calls = [
            lambda f: f.read(path),
            lambda f: f.read(path, offset=1, max_bytes=2),
            lambda f: f.read_text(path),
            lambda f: _drain(f.iter_read(path)),
            lambda f: f.download(path, tmp_path / "down"),
            lambda f: f.write(path, b"new"),
            lambda f: f.write(path, iter([b"new"])),
            lambda f: f.upload(local, path),
            lambda f: f.write_many({path: b"new"}),
        ]
    for call in calls:
        with pytest.raises(ValueError, match="names a directory, not a file"):
            _run(kind, sbd, call)
    assert sbd.hits == []  # nothing was sent
    assert sbd.files == {"f.txt": b"file", "d/in.txt": b"in"}
    assert not (tmp_path / "down").exists()


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_root_is_no_file(kind: str) -> None:
    sbd = SlashDroppingSandboxd()
    for path in ("", "/", "."):
        with pytest.raises(ValueError, match="the sandbox root"):
            _run(kind, sbd, lambda f, p=path: f.read(p))
        with pytest.raises(ValueError, match="the sandbox root"):
            _run(kind, sbd, lambda f, p=path: f.write(p, b"x"))
    assert sbd.hits == []


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_stat_and_exists_of_a_trailing_slash_find_only_a_directory(kind: str) -> None:
    sbd = SlashDroppingSandboxd()
    with pytest.raises(NotFoundError, match="not a directory"):
        _run(kind, sbd, lambda f: f.stat("f.txt/"))
    with pytest.raises(NotFoundError, match="not a directory"):
        _run(kind, sbd, lambda f: f.stat("f.txt/", follow_symlinks=True))
    assert _run(kind, sbd, lambda f: f.stat("f.txt")).is_file  # without the slash: the file
    assert _run(kind, sbd, lambda f: f.stat("d/")).is_dir
    # the link to d is followed, as path resolution does for "ld/"
    assert _run(kind, sbd, lambda f: f.stat("ld/")).is_dir
    assert _run(kind, sbd, lambda f: f.stat("ld")).is_symlink
    assert _run(kind, sbd, lambda f: f.exists("f.txt/")) is False
    assert _run(kind, sbd, lambda f: f.exists("f.txt")) is True
    assert _run(kind, sbd, lambda f: f.exists("d/")) is True
    assert _run(kind, sbd, lambda f: f.exists("ld/")) is True
    assert _run(kind, sbd, lambda f: f.exists("none/")) is False


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_stat_of_a_trailing_slash_follows_links(kind: str) -> None:
    seen: list[tuple[str, str | None]] = []
    sbd = SlashDroppingSandboxd()

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append((req.url.path, req.url.params.get("follow")))
        return sbd(req)

    if kind == "sync":
        files = sync_sandbox(handler).files
        files.stat("ld/")
        files.stat("ld")
        files.exists("ld/")
    else:

        async def main() -> None:
            files = async_sandbox(handler).files
            await files.stat("ld/")
            await files.stat("ld")
            await files.exists("ld/")

        asyncio.run(main())
    assert seen == [("/v1/stat/ld", "true"), ("/v1/stat/ld", None), ("/v1/stat/ld", "true")]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_delete_of_a_trailing_slash_deletes_only_a_directory(kind: str) -> None:
    sbd = SlashDroppingSandboxd()
    with pytest.raises(NotFoundError, match=r"delete f\.txt/: .*not a directory"):
        _run(kind, sbd, lambda f: f.delete("f.txt/"))
    _run(kind, sbd, lambda f: f.delete("f.txt/", missing_ok=True))  # no such directory: nothing
    _run(kind, sbd, lambda f: f.delete("none/", missing_ok=True))
    with pytest.raises(NotFoundError):
        _run(kind, sbd, lambda f: f.delete("none/"))
    assert sbd.files["f.txt"] == b"file"
    assert not [h for h in sbd.hits if h[0] == "DELETE"]  # each was refused after its stat
    _run(kind, sbd, lambda f: f.delete("d/", recursive=True))
    assert "d" not in sbd.dirs
    _run(kind, sbd, lambda f: f.delete("f.txt"))  # without the slash: the file
    assert "f.txt" not in sbd.files


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_move_through_a_trailing_slash_moves_only_a_directory(kind: str) -> None:
    sbd = SlashDroppingSandboxd()
    for src, dst in (("f.txt/", "g.txt"), ("f.txt", "g/"), ("f.txt/", "g/")):
        with pytest.raises(NotFoundError, match="not a directory"):
            _run(kind, sbd, lambda f, s=src, d=dst: f.move(s, d))
    assert sbd.files["f.txt"] == b"file"
    assert ("POST", "/v1/move") not in sbd.hits
    _run(kind, sbd, lambda f: f.move("d/", "e/"))
    assert "e" in sbd.dirs and "d" not in sbd.dirs
    _run(kind, sbd, lambda f: f.move("f.txt", "g.txt"))
    assert sbd.files["g.txt"] == b"file"
