"""sandboxd's HTTP API without network I/O: paths, request bodies and arguments,
response parsing, error mapping (sandboxd's ``{"code","message"}`` and the router's
``{"detail"}``) and retry decisions, plus the local-file helpers of uploads. The sync
and async clients share all of it."""

from __future__ import annotations

import asyncio
import base64
import codecs
import dataclasses
import io
import json
import os
import re
import stat
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Literal
from urllib.parse import quote

import h11
import httpx

from . import _k8s
from .errors import (
    AuthError,
    ConflictError,
    NotFoundError,
    ProcessExitedError,
    RequestError,
    SandboxConnectionError,
    SandboxError,
    SandboxSuspendedError,
    TooManyProcessesError,
)
from .models import ExecResult, FileEntry, OutputEvent, ProcessEvent

CHUNK = 64 * 1024
Command = str | Sequence[str]
RETRY_STATUS = (502, 503, 504)
STREAM_READ_TIMEOUT = 300.0
"""Longest silence of a process or code stream, an output follow, a file watch or a file
write (a quiet watch gets an empty line every 15 s):
sandboxd sends a keepalive after 15 s of silence (--process-keepalive,
--code-keepalive), so five minutes without a byte is a dead connection (the node lost,
a network partition: a half-open socket never errors), not a quiet process. The call
then fails with SandboxConnectionError instead of hanging for ever."""


def process_stream_timeout() -> httpx.Timeout:
    """Timeout of process and code streams, output follows, file watches and writes (reads and
    writes bounded by STREAM_READ_TIMEOUT, read when the call is made)."""
    return httpx.Timeout(STREAM_READ_TIMEOUT, connect=10.0)


def client_options(timeout: float) -> dict[str, Any]:
    """The httpx.Client/AsyncClient arguments of the client to sandboxd (router, pod IP),
    all but the transport."""
    return dict(
        timeout=httpx.Timeout(timeout, connect=10.0),
        limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
        follow_redirects=False,
    )


def run_http_timeout(timeout: float | None) -> httpx.Timeout:
    """Read timeout of a run: the command's own timeout (or sandboxd's default 300 s) plus a
    margin, so the server's timeout fires first and is reported as timed_out."""
    return httpx.Timeout((timeout if timeout else 300.0) + 30.0, connect=10.0)


def file_path(p: str) -> str:
    """The URL path of a file under /v1/files/. Absolute paths are taken relative to the
    sandbox root (as sandboxd does); ``..`` and control characters are refused here so the
    caller gets a clear error instead of a 403."""
    if not isinstance(p, str):
        raise TypeError("path must be a str")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in p):
        raise ValueError(f"path {p!r} contains control characters")
    parts = [s for s in p.split("/") if s not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"path {p!r} escapes the sandbox root ('..')")
    return "/v1/files/" + "/".join(quote(s, safe="") for s in parts)


def names_directory(p: str) -> bool:
    """Whether p names a directory by its form: it ends with "/" or "/." (or is the root:
    "", "." or "/"). Path resolution takes such a path only to a directory (opening
    "f.txt/" fails with ENOTDIR). sandboxd drops a trailing slash like any empty
    component, so the SDK keeps that meaning itself: file_content_path refuses such a
    path, and the stat of one (_fsops.dir_only) must find a directory."""
    return p.rsplit("/", 1)[-1] in ("", ".")


def file_content_path(p: str, what: str) -> str:
    """file_path of a file that is read or written (read, iter_read, download, write,
    upload of a file, write_many). ValueError when p names a directory by its form
    (names_directory): sandboxd would read or write the file before the slash ("f.txt"
    for "f.txt/"), where the system refuses."""
    url = file_path(p)
    if names_directory(p):
        if url == "/v1/files/":
            raise ValueError(f"{what} {p!r}: the path names the sandbox root, a directory, not a file")
        raise ValueError(f"{what} {p!r}: a path that ends with '/' (or '/.') names a directory, not a file")
    return url


JSON_HEADERS = {"Content-Type": "application/json"}


def chunked_json(body: Any) -> Iterator[bytes]:
    """A JSON request body sent with chunked encoding rather than Content-Length.

    The Kubernetes API server's pod proxy (HTTP/1.1) can cut a streamed response short
    when the request carried a Content-Length body that sandboxd answered quickly (the
    proxy re-reads the already-closed request body and drops the upstream connection);
    a chunked body is read to its end before the response starts (docs/sandboxd.md)."""
    yield json.dumps(body).encode()


async def achunked_json(body: Any) -> AsyncIterator[bytes]:
    """The async twin of chunked_json."""
    yield json.dumps(body).encode()


def run_body(
    command: Command,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout: float | None = None,
    stdin: str | bytes | None = None,
    pty: bool | tuple[int, int] = False,
) -> dict[str, Any]:
    """The JSON body of POST /v1/processes[/run]. A str command runs under /bin/sh -c; a
    sequence is an argv run without a shell."""
    if isinstance(command, str):
        if not command:
            raise ValueError("command is empty")
        cmd: Any = command
    else:
        cmd = [str(a) for a in command]
        if not cmd or not cmd[0]:
            raise ValueError("command is empty")
    body: dict[str, Any] = {"command": cmd}
    if env:
        body["env"] = {str(k): str(v) for k, v in env.items()}
    if cwd is not None:
        body["cwd"] = cwd
    if timeout is not None:
        if timeout < 0:
            raise ValueError("timeout must be >= 0")
        body["timeout_seconds"] = timeout
    if isinstance(stdin, str):
        body["stdin"] = stdin
    elif stdin is not None:
        body["stdin_b64"] = base64.b64encode(stdin).decode()
    if pty:
        body["pty"] = {"cols": pty[0], "rows": pty[1]} if isinstance(pty, tuple) else True
    if stdin:
        check_body_size(body)
    return body


def parse_result(j: Mapping[str, Any]) -> ExecResult:
    return ExecResult(
        stdout=str(j.get("stdout", "")),
        stderr=str(j.get("stderr", "")),
        exit_code=int(j.get("exit_code", -1)),
        signal=int(j.get("signal", 0) or 0),
        timed_out=bool(j.get("timed_out", False)),
        stdout_truncated=bool(j.get("stdout_truncated", False)),
        stderr_truncated=bool(j.get("stderr_truncated", False)),
        duration_ms=int(j.get("duration_ms", 0) or 0),
    )


def parse_event(line: str | bytes) -> ProcessEvent | None:
    """One NDJSON line of a streamed process; None for blank lines."""
    if not line.strip():
        return None
    j = json.loads(line)
    t = j.get("type")
    if t in ("stdout", "stderr"):
        return ProcessEvent(type=t, data=base64.b64decode(j.get("data", "")))
    if t == "start":
        return ProcessEvent(type="start", process_id=int(j.get("id", 0)), pid=int(j.get("pid", 0)))
    if t == "exit":
        return ProcessEvent(
            type="exit",
            exit_code=int(j.get("exit_code", -1)),
            signal=int(j.get("signal", 0) or 0),
            timed_out=bool(j.get("timed_out", False)),
        )
    if t == "error":
        raise RequestError(f"sandboxd: {j.get('code')}: {j.get('message')}", status=400, code=str(j.get("code")))
    return None


Fd = Literal["stdout", "stderr"]


class StreamText:
    """The text of one process stream's output events: an incremental UTF-8 decoder per
    stream (stdout, stderr), so that a character split across events (sandboxd cuts them
    at byte boundaries) is decoded whole, in the event that completes it. A sequence
    still incomplete at the end of the output (the exit event; a ``dropped`` event,
    after which the bytes do not follow on) is flushed, as U+FFFD, in an event of its
    stream with empty data just before that one."""

    def __init__(self) -> None:
        self._dec: dict[Fd, codecs.IncrementalDecoder] = {}

    def _decode(self, fd: Fd, data: bytes) -> str:
        dec = self._dec.get(fd)
        if dec is None:
            dec = self._dec[fd] = codecs.getincrementaldecoder("utf-8")("replace")
        return dec.decode(data)

    def _flush(self) -> list[tuple[Fd, str]]:
        out = []
        for fd, dec in self._dec.items():
            if tail := dec.decode(b"", final=True):
                out.append((fd, tail))
            dec.reset()
        return out

    def process_events(self, ev: ProcessEvent) -> list[ProcessEvent]:
        """ev with its text, after the flush events it calls for."""
        if ev.type == "stdout" or ev.type == "stderr":
            return [dataclasses.replace(ev, _text=self._decode(ev.type, ev.data))]
        if ev.type == "exit":
            return [*(ProcessEvent(type=fd, _text=t) for fd, t in self._flush()), ev]
        return [ev]

    def output_events(self, ev: OutputEvent) -> list[OutputEvent]:
        """The twin of process_events for a background process's output."""
        if ev.type == "stdout" or ev.type == "stderr":
            return [dataclasses.replace(ev, _text=self._decode(ev.type, ev.data))]
        if ev.type == "exit" or ev.type == "dropped":
            return [*(OutputEvent(type=fd, offset=ev.offset, _text=t) for fd, t in self._flush()), ev]
        return [ev]


MAX_PROCESS_LINE = 1 << 20
"""Longest NDJSON line of a process stream read (bytes): sandboxd sends at most 64 KiB
of output in one event (about 88 KiB as base64), so a longer line is not sandboxd's."""


class LineSplitter:
    """Splits a byte stream into lines (without their ends), refusing one longer than
    limit bytes (SandboxConnectionError naming what): httpx's iter_lines would hold any
    line whole."""

    def __init__(self, limit: int, what: str) -> None:
        self.limit = limit
        self.what = what
        self.buf = bytearray()

    def feed(self, part: bytes) -> list[str]:
        """The lines part completes. Only part is searched for a line end (what was kept
        before has none), so a long line fed in many chunks costs linear time."""
        start = len(self.buf)
        self.buf += part
        end = self.buf.rfind(b"\n", start)
        lines = [] if end < 0 else self.buf[:end].decode("utf-8", "replace").split("\n")
        if end >= 0:
            del self.buf[: end + 1]
        if len(self.buf) > self.limit or any(len(ln) > self.limit for ln in lines):
            self.buf = bytearray()
            raise SandboxConnectionError(f"{self.what}: an event line over {self.limit} bytes")
        return lines

    def rest(self) -> list[str]:
        """The last line, when the stream ended without a line end."""
        tail, self.buf = self.buf.decode("utf-8", "replace"), bytearray()
        return [tail] if tail else []


def split_lines(chunks: Iterator[bytes], limit: int, what: str) -> Iterator[str]:
    """The lines of a byte stream, each at most limit bytes (LineSplitter)."""
    sp = LineSplitter(limit, what)
    for part in chunks:
        yield from sp.feed(part)
    yield from sp.rest()


async def asplit_lines(chunks: AsyncIterator[bytes], limit: int, what: str) -> AsyncIterator[str]:
    """The async twin of split_lines."""
    sp = LineSplitter(limit, what)
    async for part in chunks:
        for line in sp.feed(part):
            yield line
    for line in sp.rest():
        yield line


class ALines:
    """The lines of an async byte stream, read so that a cancelled wait for one
    (``asyncio.wait_for`` around an event, a task's cancel) loses nothing: the read goes
    on in a task of its own, and the next call takes its line. (Cancelling a read of a
    plain async generator ends the generator: the stream would read as ended.)"""

    def __init__(self, chunks: AsyncIterator[bytes], limit: int, what: str) -> None:
        self._gen = asplit_lines(chunks, limit, what)
        self._pending: asyncio.Future[str | None] | None = None
        self._closed = False

    async def _one(self) -> str | None:
        try:
            return await self._gen.__anext__()
        except StopAsyncIteration:
            return None

    async def next(self) -> str | None:
        """The next line, or None at the end of the stream (or once cancel() ran, also
        for a reader waiting in another task). Its errors are raised again by every later
        call."""
        if self._closed:
            return None
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._one())
            self._pending.add_done_callback(_retrieve)
        try:
            line = await asyncio.shield(self._pending)  # cancelled: the read stays pending
        except asyncio.CancelledError:
            if self._closed and not _cancelling():
                return None  # closed by another task: the end, not a cancel of this one
            raise
        if line is not None:
            self._pending = None
        return line

    def cancel(self) -> None:
        """Stops a read in flight (before the response is closed); a reader waiting in
        another task gets the end of the stream."""
        self._closed = True
        if self._pending is not None and not self._pending.done():
            self._pending.cancel()


def _retrieve(f: asyncio.Future[str | None]) -> None:
    """Marks a background read's error as seen (its reader may have gone: no "exception
    was never retrieved" at exit); next() raises it again when asked."""
    if not f.cancelled():
        f.exception()


def _cancelling() -> bool:
    """Whether the current task is being cancelled (Python 3.11+; 3.10 cannot tell)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return bool(cancelling()) if cancelling is not None else False


class Collector:
    """Accumulates stream events into an ExecResult. With keep False only the exit
    event is kept (a stream whose events the caller consumes: its output is not held)."""

    def __init__(self, keep: bool = True) -> None:
        self.keep = keep
        self.out = bytearray()
        self.err = bytearray()
        self.exit: ProcessEvent | None = None

    def add(self, ev: ProcessEvent) -> bool:
        """Collects ev; True when it is the exit event (the stream is over)."""
        if ev.type == "stdout":
            if self.keep:
                self.out += ev.data
        elif ev.type == "stderr":
            if self.keep:
                self.err += ev.data
        elif ev.type == "exit":
            self.exit = ev
        return ev.type == "exit"

    def result(self) -> ExecResult:
        if self.exit is None:
            raise SandboxConnectionError("the process stream ended without an exit event")
        return ExecResult(
            stdout=self.out.decode("utf-8", "replace"),
            stderr=self.err.decode("utf-8", "replace"),
            exit_code=self.exit.exit_code,
            signal=self.exit.signal,
            timed_out=self.exit.timed_out,
        )


def _when(s: str) -> datetime:
    try:
        return datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return datetime.fromtimestamp(0, timezone.utc)


def parse_listing(j: Any) -> list[FileEntry]:
    if not isinstance(j, dict) or not isinstance(j.get("entries"), list):
        raise RequestError("sandboxd: the path is not a directory listing", status=200)
    out = []
    for e in j["entries"]:
        t = e.get("type")
        out.append(
            FileEntry(
                name=str(e.get("name", "")),
                size=int(e.get("size", 0)),
                type=t if t in ("file", "directory") else "other",
                modified=_when(str(e.get("modified_at", ""))),
                mode=str(e.get("mode", "")),
            )
        )
    return out


def listing_page(resp: httpx.Response, path: str) -> tuple[list[FileEntry], str | None]:
    """The entries of one page of a directory's listing and the token of the next page
    (None after the last); SandboxError when path is a file."""
    if "json" not in resp.headers.get("content-type", ""):
        raise SandboxError(f"list {path}: not a directory")
    j = resp.json()
    token = j.get("continue") if isinstance(j, dict) else None
    return parse_listing(j), token if isinstance(token, str) and token else None


def not_a_listing(resp: httpx.Response, path: str) -> None:
    """Raises SandboxError when a read's answer is a directory's listing (sandboxd serves
    every file as application/octet-stream): its JSON is not the file's content."""
    if "json" in resp.headers.get("content-type", ""):
        raise SandboxError(f"read {path}: is a directory (list it instead)")


def listing_params(token: str | None) -> dict[str, Any]:
    """The request options of the listing page after token (the first page: None)."""
    return {"params": {"continue": token}} if token else {}


MAX_LISTING_ENTRIES = 1_000_000
"""The most entries one directory listing reads (100 of sandboxd's pages of 10,000
names): past it the listing fails (SandboxError) rather than read on without end."""


class ListingPages:
    """The paging of one directory's listing: the token of the next page (None for the
    first), and after each page whether another follows. A token seen before (a cycle
    a, b, a, b or an immediate repeat), a token after a page without entries (sandboxd
    gives one only after the last name of a page) or more than max_entries entries in
    all raise SandboxError: an answer that pages on for ever is never followed for ever
    (nor buffered)."""

    def __init__(self, path: str, max_entries: int | None = None) -> None:
        self.path = path
        self.max_entries = MAX_LISTING_ENTRIES if max_entries is None else max_entries
        self.token: str | None = None
        self.total = 0
        self._seen: set[str] = set()

    def params(self) -> dict[str, Any]:
        """The request options of the next page."""
        return listing_params(self.token)

    def more(self, entries: int, nxt: str | None) -> bool:
        """After a page of entries entries whose answer named nxt: whether to read the
        page after nxt (now self.token)."""
        self.total += entries
        if self.total > self.max_entries:
            raise SandboxError(f"list {self.path}: more than {self.max_entries} entries (MAX_LISTING_ENTRIES)")
        if nxt is None:
            return False
        if entries == 0:
            raise SandboxError(f"list {self.path}: the sandbox answered an empty page with a continue token")
        if nxt in self._seen:
            raise SandboxError(f"list {self.path}: the sandbox repeated a continue token (the listing would not end)")
        self._seen.add(nxt)
        self.token = nxt
        return True


def exists_answer(resp: httpx.Response, what: str) -> bool:
    """The answer of exists(), a stat: True on success, False on sandboxd's 404
    NOT_FOUND. Another 404 (the router's: a Sandbox it does not know yet; the pod proxy's:
    no pod) says nothing of the file, so it raises (a HEAD's answer has no body to tell
    them apart)."""
    if resp.status_code < 300:
        return True
    if resp.status_code == 404:
        try:
            j = json.loads(resp.content)
        except ValueError:
            j = None
        if isinstance(j, dict) and j.get("code") == "NOT_FOUND":
            return False
    raise error(resp, what)


_ROUTER_SUSPENDED = re.compile(r"Sandbox ([^/\s]+)/(\S+) is suspended and its idle policy does not resume it")


MAX_ERROR_BODY = 64 * 1024
"""The most bytes of a failed answer's body read (read_error): an error's text is short,
and a sandbox (or a proxy) answering an error with gigabytes is not buffered."""

MAX_ERROR_MESSAGE = 4096
"""The most characters of an error's message an exception quotes (the rest is cut)."""


def read_error(resp: httpx.Response) -> None:
    """Reads at most MAX_ERROR_BODY bytes of a failed streamed answer's body, closes it,
    and leaves them as its content (for error() and the retry checks)."""
    data = bytearray()
    try:
        for chunk in resp.iter_bytes():
            data += chunk
            if len(data) >= MAX_ERROR_BODY:
                break
    finally:
        resp.close()
    resp._content = bytes(data[:MAX_ERROR_BODY])


async def aread_error(resp: httpx.Response) -> None:
    """The async twin of read_error."""
    data = bytearray()
    try:
        async for chunk in resp.aiter_bytes():
            data += chunk
            if len(data) >= MAX_ERROR_BODY:
                break
    finally:
        await resp.aclose()
    resp._content = bytes(data[:MAX_ERROR_BODY])


def _cut(msg: str) -> str:
    if len(msg) <= MAX_ERROR_MESSAGE:
        return msg
    return f"{msg[:MAX_ERROR_MESSAGE]}... [{len(msg) - MAX_ERROR_MESSAGE} more characters cut]"


def error(resp: httpx.Response, what: str, body: bytes | None = None) -> SandboxError:
    """Maps a failed sandboxd/router/pod-proxy response to an exception (its message cut
    to MAX_ERROR_MESSAGE characters)."""
    raw = body if body is not None else resp.content
    code, msg = "", raw[:300].decode("utf-8", "replace")
    try:
        j = json.loads(raw)
        if isinstance(j, dict):
            code = _cut(str(j.get("code") or j.get("reason") or ""))[:200]
            msg = _cut(str(j.get("message") or j.get("detail") or msg))
    except ValueError:
        pass
    s = resp.status_code
    if s == 404:
        return NotFoundError(f"{what}: not found ({msg})", name=what)
    if s in (401, 403):
        return AuthError(f"{what}: HTTP {s}: {msg} (check the router token / RBAC on the sandbox)", status=s)
    if s in (502, 503, 504):
        return SandboxConnectionError(
            f"{what}: HTTP {s}: {msg} (the sandbox is not reachable: is it Ready and not suspended?)"
        )
    if s == 409 and (m := _ROUTER_SUSPENDED.match(msg)) and answer_source(resp) == "router":
        # the router's refusal for a Sandbox whose idle policy does not resume it on
        # traffic: not a conflict of the call (a FileExistsError to mkdir and move)
        return SandboxSuspendedError(f"{what}: {msg}", namespace=m[1], name=m[2], has_policy=True)
    if s == 409:
        return ConflictError(f"{what}: HTTP {s}: {code + ': ' if code else ''}{msg}", status=s, code=code)
    if s == 429 and code == "RESOURCE_EXHAUSTED" and "too many running processes" in msg:
        return TooManyProcessesError(f"{what}: HTTP {s}: {code}: {msg}", status=s, code=code)
    return RequestError(f"{what}: HTTP {s}: {code + ': ' if code else ''}{msg}", status=s, code=code)


def check(resp: httpx.Response, what: str, ok: tuple[int, ...] = ()) -> httpx.Response:
    """resp, or the mapped error of a failure whose status is not in ok."""
    if resp.status_code >= 400 and resp.status_code not in ok:
        raise error(resp, what)
    return resp


def transport_error(e: httpx.TransportError, what: str, idempotent: bool) -> SandboxConnectionError:
    """Maps a request to sandboxd that got no (complete) answer to an exception."""
    if isinstance(e, httpx.ConnectError):
        return SandboxConnectionError(f"{what}: cannot connect to the sandbox: {e!r} (is it Ready? suspended?)")
    note = "" if idempotent else "; the request may have been executed and was not retried"
    return SandboxConnectionError(f"{what}: connection to the sandbox lost: {e!r}{note}")


class Attempts:
    """The arguments and retry decisions of one request to sandboxd (kw: request()'s
    keyword arguments, with ``headers`` and ``make_content``): an idempotent call gets three
    attempts with exponential backoff on connection loss and on 502/503/504, any other
    call one (a run is never executed twice); a resume on traffic (``woke``) adds one."""

    def __init__(self, idempotent: bool, kw: dict[str, Any]) -> None:
        self.attempts = 3 if idempotent else 1
        self.idempotent = idempotent
        self.i = -1
        self.woke = False
        self.renewed = False  # sent once more with a renewed router token
        # a failed attempt may have run in sandboxd (outcome_unknown)
        self.may_have_run = False
        self._headers: dict[str, str] = kw.pop("headers", {})
        # after_loss: sandboxd's error statuses that mean success once an earlier attempt
        # may have run (a delete's 404, a mkdir's 409; the caller checks the latter).
        self._after_loss: tuple[int, ...] = kw.pop("after_loss", ())
        # make_content: a factory of a one-shot body (a chunked generator), called per attempt.
        self._make_content = kw.pop("make_content", None)
        # a body that cannot be sent twice (an iterable of chunks, a file being read)
        self._one_shot = self._make_content is None and not isinstance(kw.get("content", b""), (bytes, str))
        self._kw = kw

    def kwargs(self, headers: Mapping[str, str]) -> dict[str, Any]:
        """httpx request() arguments of this attempt: the route's headers, then the call's."""
        kw = dict(self._kw)
        if self._make_content is not None:
            kw["content"] = self._make_content()
        return {"headers": {**headers, **self._headers}, **kw}

    def next(self) -> bool:
        """Starts the next attempt; False when none is left."""
        if self.i + 1 >= self.attempts + self.woke:
            return False
        self.i += 1
        return True

    @property
    def last(self) -> bool:
        """Whether this is the last attempt of the budget (a resume aside)."""
        return self.i + 1 >= self.attempts

    @property
    def backoff(self) -> float:
        """Seconds to sleep before the next attempt."""
        return 0.2 * float(2**self.i)

    def may_wake(self) -> bool:
        """After connection loss: whether to try a resume on traffic (only once the
        retries are spent, and once)."""
        return self.last and not self.woke

    def lost(self, e: httpx.TransportError) -> None:
        """Takes an attempt that got no (complete) answer."""
        self.may_have_run = self.may_have_run or not never_sent(e)

    def answered(self, resp: httpx.Response, via_kube: bool) -> None:
        """Takes an attempt's answer."""
        self.may_have_run = self.may_have_run or outcome_unknown(resp, via_kube)

    def renew(self, renewed: bool) -> bool:
        """After a 401: whether to send this attempt once more, at once (renewed: the
        router refused the token and the token file now holds another). Once per call,
        and never with a body that cannot be sent twice."""
        if self.renewed or self._one_shot or not renewed:
            return False
        self.renewed = True
        self.i -= 1  # the same attempt again: the budget of 502/503/504 retries stays
        return True

    def ok(self, resp: httpx.Response, ok: tuple[int, ...]) -> tuple[int, ...]:
        """The statuses check() lets through: ok, plus resp's own when it is sandboxd's
        answer in after_loss and an earlier attempt may have done the work."""
        s = resp.status_code
        if self.may_have_run and s in self._after_loss and answer_source(resp) == "sandboxd":
            return (*ok, s)
        return ok

    def retry_status(self, resp: httpx.Response) -> bool:
        """Whether a 502/503/504 answer is retried: not the router's 503 after its start
        hold (held_not_ready), as the Go SDK's: each attempt would be held as long again."""
        return resp.status_code in RETRY_STATUS and not self.last and not held_not_ready(resp)

    def may_wake_on(self, resp: httpx.Response, via_kube: bool) -> bool:
        """Whether a failed answer says the pod is gone, so a resume on traffic is tried."""
        return resp.status_code >= 400 and not self.woke and _k8s.pod_gone(resp, via_kube)

    def replay_safe(
        self, e: httpx.TransportError | None = None, resp: httpx.Response | None = None, via_kube: bool = False
    ) -> bool:
        """Whether the call may be sent again after a resume on traffic: an idempotent
        one always; another only when its failure (e, or the answer resp) proves that the
        request never reached sandboxd, and (after an answer, when the body was sent) its
        body can be sent again. Otherwise a run could run twice."""
        if self.idempotent:
            return True
        if e is not None:
            return never_sent(e)
        return resp is not None and not self._one_shot and not_forwarded(resp, via_kube)


def never_sent(e: httpx.TransportError) -> bool:
    """Whether a transport failure came before the request left: no connection was made
    (a read error or timeout, by contrast, may follow a request sandboxd took)."""
    return isinstance(e, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))


# The pod proxy's 503s that say it never reached the pod (client-go's "error trying to
# reach service: dial tcp ...": others, a cut connection, may follow a sent request).
_NOT_DIALED = ("dial tcp", "connection refused", "no route to host")


def _error_body(resp: httpx.Response) -> dict[str, Any]:
    """The JSON object of an error answer (its first 4 KiB), or {}."""
    try:
        j = json.loads(resp.content[:4096])
    except ValueError:
        return {}
    return j if isinstance(j, dict) else {}


def answer_source(resp: httpx.Response) -> str:
    """Who gave a failed answer, by its body: "router" (sandbox-router's
    ``{"detail": ...}``), "apiserver" (a Kubernetes Status: the pod proxy's own),
    "sandboxd" (its ``{"code", "message"}``) or "" (anything else: another proxy, say)."""
    j = _error_body(resp)
    if isinstance(j.get("detail"), str) and j["detail"]:
        return "router"
    if j.get("kind") == "Status":
        return "apiserver"
    return "sandboxd" if "code" in j else ""


def not_forwarded(resp: httpx.Response, via_kube: bool) -> bool:
    """Whether a failed answer came from the router or the API server's pod proxy
    without the request reaching sandboxd: the router refuses with 503 before it
    forwards, and of its 502s only a failed connect ("Could not connect"); the pod
    proxy's "pod not found" (404) or a 503 from a failed dial. Only their own answers
    count (the router's ``detail`` body, the API server's Status): a 503 of sandboxd or
    of another proxy in front proves nothing."""
    s, src = resp.status_code, answer_source(resp)
    msg = str(_error_body(resp).get("detail" if src == "router" else "message", ""))
    if via_kube:
        return src == "apiserver" and (s == 404 or (s == 503 and any(t in msg for t in _NOT_DIALED)))
    return src == "router" and (s == 503 or (s == 502 and msg.startswith("Could not connect")))


def held_not_ready(resp: httpx.Response) -> bool:
    """Whether resp is the router's 503 for a Sandbox that was starting and did not turn
    Ready while the router held the request (--start-hold, 30 s by default): "Sandbox
    ns/name is not ready: <Ready reason> (waited 30.0s for it)." (docs/router.md). Its
    other 503s (no hold, a cache not synced yet) are retried."""
    if resp.status_code != 503 or answer_source(resp) != "router":
        return False
    return "(waited " in str(_error_body(resp)["detail"])


def outcome_unknown(resp: httpx.Response, via_kube: bool) -> bool:
    """Whether a failed answer leaves open if the request ran in sandboxd: a 502, 503 or
    504 of a proxy that may have forwarded it (sandboxd's own 503 included), unless
    not_forwarded proves otherwise."""
    return resp.status_code in RETRY_STATUS and not not_forwarded(resp, via_kube)


def router_refused_token(resp: httpx.Response) -> bool:
    """Whether resp is the router's own 401 (the bearer token was refused before
    forwarding, so the request may be sent again with another)."""
    return resp.status_code == 401 and answer_source(resp) == "router"


def spawn_request(base: str, headers: Mapping[str, str]) -> dict[str, Any]:
    """build_request() arguments of POST /v1/processes, but the content (a chunked JSON
    body, see chunked_json)."""
    return {
        "method": "POST",
        "url": base + "/v1/processes",
        "headers": {**headers, **JSON_HEADERS},
        "timeout": process_stream_timeout(),
    }


# ---- processes ----------------------------------------------------------------------


def not_started() -> SandboxConnectionError:
    return SandboxConnectionError("spawn: the process stream did not start")


def control_error(resp: httpx.Response, what: str, exit_seen: bool) -> SandboxError:
    """The error of sandboxd's refusal of a control call (stdin, stdin/close, signal,
    resize) of an attached process: ProcessExitedError when it says the process has
    exited, else error(). sandboxd forgets a process once its exit was reported (404
    NOT_FOUND "no such process": an id it gave is unknown only then); a background
    process's record answers 409 FAILED_PRECONDITION "process has exited", a resize 400
    FAILED_PRECONDITION "process has exited"; and after the exit event was read
    (exit_seen), 400 "stdin is closed" too (sandboxd closes it at the exit). Otherwise
    that 400 means stdin was closed (close_stdin, inline stdin) on a process that may
    still run: a RequestError, as before. Only sandboxd's own answers count: a proxy's 404
    (no such Sandbox or pod) says nothing of the process."""
    s = resp.status_code
    j = _error_body(resp)
    code, msg = str(j.get("code", "")), str(j.get("message", ""))
    exited = answer_source(resp) == "sandboxd" and (
        (s == 404 and code == "NOT_FOUND" and msg == "no such process")
        or s == 409
        or (s == 400 and code == "FAILED_PRECONDITION" and (msg == "process has exited" or exit_seen))
    )
    if exited:
        detail = f"HTTP {s}: {code}: {_cut(msg)}"
        return ProcessExitedError(f"{what}: the process has exited ({detail})", status=s, code=code)
    return error(resp, what)


def stream_lost(pid: object, e: Exception) -> SandboxConnectionError:
    return SandboxConnectionError(f"process {pid}: stream lost: {e!r}")


def stream_ended(pid: object) -> SandboxConnectionError:
    return SandboxConnectionError(f"process {pid}: stream ended before the exit event")


def stdin_content(data: str | bytes) -> bytes:
    """The bytes of stdin data: text as UTF-8; any buffer (a bytearray or memoryview
    passes for bytes in annotations) as its bytes, not iterated as ints."""
    return data.encode() if isinstance(data, str) else bytes(data)


MAX_BODY = 9 << 20
"""sandboxd's default --max-body: the largest request body it buffers (a JSON request,
one stdin write); a larger one is refused with 413."""
STDIN_CHUNK = 1 << 20
"""The most bytes of stdin one write request carries: a larger write() is sent as
several, in order."""
STDIN_QUEUE_PATIENCE = 30.0
"""How long (seconds) write() sends a part sandboxd refused because the process's stdin
queue (8 MiB) is full again, waiting for the process to read, before it gives up."""


def stdin_chunks(data: str | bytes) -> Iterator[bytes]:
    """stdin data as the bodies of its write requests (one, empty, for empty data)."""
    b = stdin_content(data)
    yield b[:STDIN_CHUNK]
    for i in range(STDIN_CHUNK, len(b), STDIN_CHUNK):
        yield b[i : i + STDIN_CHUNK]


def stdin_queue_full(e: RequestError) -> bool:
    """Whether sandboxd refused a stdin write whole because the queue is full (429)."""
    return e.status == 429 and "stdin queue is full" in str(e)


def write_stdin(send: Callable[[bytes], object], data: str | bytes) -> None:
    """Writes data to a process's stdin with send (one request per body), in parts of at
    most STDIN_CHUNK bytes (sandboxd refuses a body over --max-body). A part refused
    because the stdin queue is full is sent again once the process has read some (for up
    to STDIN_QUEUE_PATIENCE seconds). A failure raises with the parts before it written."""
    for chunk in stdin_chunks(data):
        deadline = time.monotonic() + STDIN_QUEUE_PATIENCE
        pause = 0.01
        while True:
            try:
                send(chunk)
                break
            except RequestError as e:
                if not stdin_queue_full(e) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(0.5, pause * 2)


async def awrite_stdin(send: Callable[[bytes], Awaitable[object]], data: str | bytes) -> None:
    """The async twin of write_stdin."""
    for chunk in stdin_chunks(data):
        deadline = time.monotonic() + STDIN_QUEUE_PATIENCE
        pause = 0.01
        while True:
            try:
                await send(chunk)
                break
            except RequestError as e:
                if not stdin_queue_full(e) or time.monotonic() + pause > deadline:
                    raise
            await asyncio.sleep(pause)
            pause = min(0.5, pause * 2)


def check_body_size(body: Mapping[str, Any]) -> None:
    """Refuses, before anything is sent, a process start whose inline stdin makes its
    JSON body larger than sandboxd buffers (MAX_BODY; bytes go as base64, a third more):
    it would only be answered 413 once sent."""
    size = len(json.dumps(body))
    if size > MAX_BODY:
        raw = len(body.get("stdin") or "") or len(body.get("stdin_b64") or "") * 3 // 4
        raise RequestError(
            f"stdin of about {raw} bytes makes a request body of {size} bytes, over sandboxd's"
            f" {MAX_BODY >> 20} MiB (--max-body): spawn() the command (or start_background(stdin=True))"
            " and write() the data (sent in parts of 1 MiB), then close_stdin()",
            status=413,
            code="INVALID_ARGUMENT",
        )


# ---- files --------------------------------------------------------------------------


def write_options(data: bytes | str | object, mode: int | None) -> dict[str, Any]:
    """request() arguments of a file write (PUT), but the content: the mode, no read
    timeout, and the Content-Length of a regular file object (others go chunked)."""
    params = {"mode": f"0{mode:03o}"} if mode is not None else {}
    headers = {"Content-Type": "application/octet-stream"}
    if not isinstance(data, (bytes, bytearray, memoryview, str)) and hasattr(data, "read"):
        size = file_size(data)  # type: ignore[arg-type]
        if size is not None:
            headers["Content-Length"] = str(size)
    return {"params": params, "timeout": process_stream_timeout(), "headers": headers}


def file_size(f: IO[bytes]) -> int | None:
    """Bytes left in a regular file object read as it is stored (an io.FileIO, or a
    buffered reader over one: what open(path, "rb") returns); None for pipes, sockets
    and any other file object. A gzip, bz2 or lzma file (and any wrapper) has the
    descriptor of the file beneath, whose size is not what read() gives: it goes
    chunked."""
    raw = f.raw if isinstance(f, (io.BufferedReader, io.BufferedRandom)) else f
    if not isinstance(raw, io.FileIO):
        return None
    try:
        st = os.fstat(raw.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        return max(0, st.st_size - f.tell())
    except (OSError, ValueError):
        return None


PROTOCOL_ERRORS: tuple[type[Exception], ...] = (h11.ProtocolError,)
"""What httpcore raises unmapped when a request cannot be sent as declared (h11's
protocol errors: a file object that gave more or fewer bytes than its Content-Length)."""


def protocol_error(e: Exception, what: str) -> SandboxConnectionError:
    """Maps a request that broke HTTP/1.1's framing as it was sent (PROTOCOL_ERRORS) to
    an exception: the connection is given up, the request was not (fully) sent."""
    return SandboxConnectionError(f"{what}: the request could not be sent: {e!r} (a body that changed while read?)")


def upload_files(local: str | os.PathLike[str], path: str) -> Iterator[tuple[Path, str]]:
    """(local file, sandbox path) of every regular file under a local directory."""
    root = Path(local)
    for d, _, names in os.walk(root):
        for fn in sorted(names):
            p = Path(d) / fn
            if p.is_file():
                rel = p.relative_to(root).as_posix()
                yield p, f"{path.rstrip('/')}/{rel}" if path.strip("/") else rel


def child(path: str, name: str) -> str:
    """The sandbox path of entry name of directory path."""
    return f"{path.rstrip('/')}/{name}"


WINDOWS = os.name == "nt"


def unsafe_entry_name(name: str, windows: bool = WINDOWS) -> bool:
    """Whether a listed entry name could name anything but a new entry directly under
    the local directory: empty, "." or "..", or holding "/" or NUL (an absolute name would
    replace the directory). On Windows also a backslash (a separator there), a colon (a
    drive, "C:x", or a stream), and a name of dots and spaces only, which Windows trims
    to nothing ("...", ". ."). On POSIX a backslash or a colon is an ordinary
    character of a file name, and such files are downloaded."""
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        return True
    return windows and ("\\" in name or ":" in name or not name.rstrip(". "))


def local_child(local: str | os.PathLike[str], name: str) -> Path:
    """The local path of a listed entry name under local. The listing comes from inside
    the sandbox, where untrusted code runs: an unsafe name (unsafe_entry_name) is refused."""
    if unsafe_entry_name(name):
        raise SandboxError(f"download: the sandbox listed an unsafe entry name {name!r}")
    return Path(local) / name


def delete_path(p: str) -> str:
    """The URL path of a file delete (file_path's checks). Only the explicit path "/"
    names the root: "", "." and the like, which resolve to it too, are refused with
    ValueError, so that an empty path (an unset variable) never becomes a recursive
    delete of the whole workspace."""
    url = file_path(p)
    if url == "/v1/files/" and p != "/":
        raise ValueError(f"path {p!r} names the sandbox root; pass '/' to delete the root's contents")
    return url


def delete_options(recursive: bool, missing_ok: bool) -> dict[str, Any]:
    """request() arguments of a file delete. sandboxd's 404 after an attempt that may
    have deleted the path (its answer was lost) is success."""
    return {
        "params": {"recursive": "true"} if recursive else {},
        "ok": (404,) if missing_ok else (),
        "after_loss": (404,),
    }
