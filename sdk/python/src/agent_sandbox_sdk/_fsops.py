"""sandboxd's filesystem operations beyond read/write (stat, mkdir, move, batch writes,
windowed reads, watch): request arguments, response parsing and the watch stream
objects, shared by the sync and async Files."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any, cast

import httpx

from . import _fasthttp, _wire
from .errors import NotFoundError, SandboxConnectionError, SandboxError
from .models import FileEvent, FileEventType, FileStat, WriteResult

_EVENT_TYPES = ("create", "modify", "delete", "move", "move_from", "move_to", "overflow", "error")


def api_path(prefix: str, p: str) -> str:
    """``prefix`` ("/v1/stat/") followed by p checked and escaped as file_path does."""
    return prefix + _wire.file_path(p)[len("/v1/files/") :]


def check_path(p: str) -> str:
    """p, after the checks of file_path (ValueError on '..' or control characters)."""
    _wire.file_path(p)
    return p


def dir_only(p: str) -> bool:
    """Whether p, below the root, ends with "/" (or "/."): then, as in path resolution,
    it names a directory (a symlink to one included) or nothing. sandboxd drops the slash,
    so stat, exists, delete and move check it: a stat follows the links of such a path
    (the last one too) and finds a non-directory not there (NotFoundError, as sandboxd
    answers ENOTDIR); a delete or move of one stats it first."""
    return _wire.names_directory(p) and _wire.file_path(p) != "/v1/files/"


def not_a_directory(what: str) -> NotFoundError:
    return NotFoundError(f"{what}: not found (not a directory, and the path ends with '/')", name=what)


def parse_time(s: str) -> datetime:
    """An RFC 3339 UTC time with nanoseconds (kept to microseconds)."""
    day, _, frac = s.rstrip("Z").partition(".")
    t = datetime.strptime(day, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return t.replace(microsecond=int((frac + "000000")[:6])) if frac else t


def parse_stat(j: Mapping[str, Any]) -> FileStat:
    return FileStat(
        name=str(j.get("name", "")),
        path=str(j.get("path", "")),
        type=cast(Any, str(j.get("type", "other"))),
        size=int(j.get("size", 0)),
        mode=str(j.get("mode", "")),
        mtime=parse_time(str(j.get("mtime", "1970-01-01T00:00:00Z"))),
        symlink_target=j.get("symlink_target"),
    )


def stat_request(path: str, follow_symlinks: bool) -> tuple[str, dict[str, Any]]:
    """The request path and request() arguments of a stat of path. With
    ``follow_symlinks`` (always for a path that ends with "/": dir_only) sandboxd is
    asked (``?follow=true``) to describe what a symlink leads to, resolved beneath the
    root like the parents are."""
    follow = follow_symlinks or dir_only(path)
    kw: dict[str, Any] = {"params": {"follow": "true"}} if follow else {}
    return api_path("/v1/stat/", path), kw


def stat_answer(j: Mapping[str, Any], path: str) -> FileStat:
    """The FileStat of a stat's answer j; NotFoundError when path ends with "/" and is
    not a directory (dir_only)."""
    st = parse_stat(j)
    if dir_only(path) and not st.is_dir:
        raise not_a_directory(f"stat {path}")
    return st


def exists_answer(resp: httpx.Response, path: str, what: str) -> bool:
    """_wire.exists_answer of the stat of path (stat_request's); a path that ends with
    "/" exists only as a directory (dir_only)."""
    if not _wire.exists_answer(resp, what):
        return False
    return not dir_only(path) or parse_stat(resp.json()).is_dir


def mkdir_args(parents: bool, mode: int | None) -> dict[str, Any]:
    """request() arguments of a mkdir. sandboxd's 409 after an attempt that may have
    made the directory (its answer was lost) comes back as an answer: see made_before."""
    params = {"parents": "true" if parents else "false"}
    if mode is not None:
        params["mode"] = f"0{mode:03o}"
    return {"params": params, "after_loss": (409,)}


def made_before(resp: httpx.Response, st: FileStat | None, what: str) -> FileStat:
    """mkdir's answer to a conflict (resp) that an earlier attempt may have caused: the
    path's stat st when it is a directory, else the conflict's error."""
    if st is None or not st.is_dir:
        raise _wire.error(resp, what)
    return st


def move_needs_dir(src: str, dst: str) -> bool:
    """Whether a move must first check that src is a directory: src or dst ends with "/"
    (renaming a file to or from such a path fails with ENOTDIR; sandboxd drops the
    slash and would move it)."""
    return dir_only(check_path(src)) or dir_only(check_path(dst))


def move_args(src: str, dst: str, overwrite: bool) -> dict[str, Any]:
    body = {"from": check_path(src), "to": check_path(dst), "overwrite": overwrite}
    return {"content": json.dumps(body).encode(), "headers": dict(_wire.JSON_HEADERS)}


BatchItem = tuple[str, bytes | str] | tuple[str, bytes | str, int]


def batch_args(files: Mapping[str, bytes | str] | Iterable[BatchItem]) -> dict[str, Any]:
    """The request of a batch write: {path: data} or (path, data[, mode]) items."""
    items: Iterable[Any] = files.items() if isinstance(files, Mapping) else files
    out = []
    for it in items:
        path, data = it[0], it[1]
        raw = data.encode() if isinstance(data, str) else bytes(data)
        _wire.file_content_path(path, "write_many")
        e: dict[str, Any] = {"path": path, "content": base64.b64encode(raw).decode()}
        if len(it) > 2 and it[2] is not None:
            e["mode"] = f"0{it[2]:03o}"
        out.append(e)
    if not out:
        raise ValueError("write_many needs at least one file")
    return {"content": json.dumps({"files": out}).encode(), "headers": dict(_wire.JSON_HEADERS)}


def parse_batch(j: Mapping[str, Any]) -> list[WriteResult]:
    return [
        WriteResult(
            path=str(r.get("path", "")),
            ok=bool(r.get("ok")),
            size=int(r.get("size", 0)),
            status=int(r.get("status", 0)),
            code=str(r.get("code", "")),
            message=str(r.get("message", "")),
        )
        for r in j.get("results") or []
    ]


MAX_WINDOW = (1 << 63) - 1
"""The largest offset or max_bytes sent (a file's size is an off_t): a larger one means
the same window, and sandboxd refuses numbers beyond 64 bits (400 INVALID_ARGUMENT)."""


def read_args(offset: int, max_bytes: int | None) -> dict[str, Any]:
    """request() arguments of a windowed read (none for a whole read); 416 is accepted
    (reading at or past the end gives b""). Any size is fine (sys.maxsize, 10**30):
    values past MAX_WINDOW are sent as MAX_WINDOW."""
    if offset < 0 or (max_bytes is not None and max_bytes < 0):
        raise ValueError("offset and max_bytes must not be negative")
    params: dict[str, str] = {}
    if offset:
        params["offset"] = str(min(offset, MAX_WINDOW))
    if max_bytes is not None:
        params["max_bytes"] = str(min(max_bytes, MAX_WINDOW))
    return {"params": params, "ok": (416,)} if params else {}


def read_content(resp: httpx.Response, path: str) -> bytes:
    """A read's bytes (b"" at or past the end); SandboxError for a directory."""
    if resp.status_code == 416:
        return b""
    _wire.not_a_listing(resp, path)
    return resp.content


def watch_url(base: str, path: str, recursive: bool, queue: int | None) -> str:
    q = "?recursive=" + ("true" if recursive else "false")
    if queue is not None:
        q += f"&queue={int(queue)}"
    return base + api_path("/v1/watch/", path) + q


def parse_event(line: str) -> FileEvent | None:
    """A FileEvent of one NDJSON line; None for blank lines and unknown types."""
    if not line.strip():
        return None
    j = json.loads(line)
    t = j.get("type")
    if t not in _EVENT_TYPES:
        return None
    return FileEvent(
        type=cast(FileEventType, t),
        path=str(j.get("path", "")),
        is_dir=bool(j.get("is_dir", False)),
        src=j.get("from"),
        dst=j.get("to"),
        lost=j.get("lost"),
        message=str(j.get("message", "")),
    )


def open_watch(sb: Any, path: str, recursive: bool, queue: int | None) -> FileWatch:
    """Starts a watch through the sync Sandbox sb (its request path: opening is retried,
    and resumes the sandbox, as reads are)."""
    resp = sb.request(
        "GET",
        watch_url("", path, recursive, queue),
        idempotent=True,
        what=f"watch {path}",
        stream=True,
        timeout=_wire.process_stream_timeout(),  # a quiet watch gets a line every 15 s
    )
    return FileWatch(resp, path)


async def open_async_watch(sb: Any, path: str, recursive: bool, queue: int | None) -> AsyncFileWatch:
    """Starts a watch through the AsyncSandbox sb (its request path, as open_watch)."""
    resp = await sb.request(
        "GET",
        watch_url("", path, recursive, queue),
        idempotent=True,
        what=f"watch {path}",
        stream=True,
        timeout=_wire.process_stream_timeout(),  # a quiet watch gets a line every 15 s
    )
    return await AsyncFileWatch(resp, path)._start()


def _ready(line: str | None, path: str) -> None:
    if line is None:
        raise SandboxConnectionError(f"watch {path}: the stream ended before it was ready")
    j = json.loads(line)
    if j.get("type") != "ready":
        raise SandboxError(f"watch {path}: unexpected first event {j!r}")


class FileWatch:
    """A directory watch (``files.watch``): iterate for FileEvents; close() (or leaving
    the ``with`` block) ends the stream. Events after the call returned are reported:
    the watch is in place when the object is handed out."""

    def __init__(self, resp: httpx.Response, path: str) -> None:
        self._resp = resp
        self.path = path
        self._closing = False  # close() came: a read it cut short ends the iteration quietly
        self._lines = _wire.split_lines(resp.iter_bytes(), _wire.MAX_PROCESS_LINE, f"watch of {path}")
        try:
            _ready(next(self._lines, None), path)
        except BaseException:  # Ctrl-C while waiting for "ready" too: the stream is closed
            resp.close()
            raise

    def __iter__(self) -> Iterator[FileEvent]:
        try:
            for line in self._lines:
                ev = parse_event(line)
                if ev is not None:
                    yield ev
        except httpx.TransportError as e:
            if not self._resp.is_closed and not self._closing:
                raise SandboxConnectionError(f"watch {self.path}: stream lost: {e!r}") from e

    def close(self) -> None:
        """Ends the watch, from any thread: the socket is shut down first, since closing
        it alone does not wake a read blocked on it in another thread (an iteration over
        a quiet directory waited for the next event, for ever in direct mode)."""
        self._closing = True
        stream = self._resp.extensions.get("network_stream")
        _fasthttp.shut_socket(stream.get_extra_info("socket") if stream is not None else None)
        self._resp.close()

    def __enter__(self) -> FileWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncFileWatch:
    """The async twin of FileWatch: ``async for ev in w``; ``async with`` closes it."""

    def __init__(self, resp: httpx.Response, path: str) -> None:
        self._resp = resp
        self.path = path
        self._lines = _wire.ALines(resp.aiter_bytes(), _wire.MAX_PROCESS_LINE, f"watch of {path}")

    async def _start(self) -> AsyncFileWatch:
        try:
            _ready(await self._lines.next(), self.path)
        except BaseException:
            self._lines.cancel()
            await self._resp.aclose()
            raise
        return self

    def __aiter__(self) -> AsyncFileWatch:
        return self

    async def __anext__(self) -> FileEvent:
        """The next event; StopAsyncIteration when the stream ends or was closed. A wait
        for it that is cancelled (``asyncio.wait_for``) loses nothing."""
        try:
            while (line := await self._lines.next()) is not None:
                ev = parse_event(line)
                if ev is not None:
                    return ev
        except httpx.TransportError as e:
            if not self._resp.is_closed:
                raise SandboxConnectionError(f"watch {self.path}: stream lost: {e!r}") from e
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._lines.cancel()
        await self._resp.aclose()

    async def __aenter__(self) -> AsyncFileWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = ["AsyncFileWatch", "FileWatch"]
