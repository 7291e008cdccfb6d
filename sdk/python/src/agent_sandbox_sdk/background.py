"""Background processes: commands that keep running after the client that started them
is gone (a dev server, a training job). sandboxd keeps each one's output in a bounded
buffer that any later client can replay and follow, and keeps an exited one listed with
its exit status until it is removed (or evicted when the table is full).

``Sandbox.start_background`` / ``background_processes`` / ``background`` return the
types here; ``AsyncSandbox`` has the same methods returning the async twins."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import httpx

from . import _wire
from .errors import NotFoundError, ProcessExitedError, RequestError, SandboxConnectionError, TooManyProcessesError
from .models import BackgroundProcessInfo, OutputEvent

if TYPE_CHECKING:
    from .aio import AsyncSandbox
    from .client import Sandbox

# ---- wire (shared by the sync and async classes) -------------------------------------


def start_body(
    command: _wire.Command,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stdin: bool | str | bytes = False,
    timeout: float | None = None,
    pty: bool | tuple[int, int] = False,
) -> dict[str, Any]:
    """The JSON body of POST /v1/processes for a background start. ``stdin=True`` keeps
    stdin open for write(); str/bytes are written to it, then it is closed; False closes
    it at once."""
    data: str | bytes | None = None
    if isinstance(stdin, str):
        data = stdin
    elif isinstance(stdin, (bytes, bytearray, memoryview)):  # any buffer, as its bytes
        data = bytes(stdin)
    body = _wire.run_body(command, env=env, cwd=cwd, timeout=timeout, stdin=data, pty=pty)
    body["background"] = True
    if stdin is True:
        body["stdin_open"] = True
    return body


def _time(v: Any) -> datetime | None:
    if not isinstance(v, str) or not v:
        return None
    try:
        return datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return None


def _opt_int(v: Any) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


def parse_info(j: Any) -> BackgroundProcessInfo:
    """A background process's JSON description (start, get, list, wait)."""
    if not isinstance(j, dict) or not isinstance(j.get("id"), int):
        raise RequestError("sandboxd: not a process description", status=200)
    return BackgroundProcessInfo(
        id=int(j["id"]),
        pid=int(j.get("pid") or 0),
        command=tuple(str(a) for a in j.get("command") or ()),
        state="exited" if j.get("state") == "exited" else "running",
        started_at=_time(j.get("started_at")),
        ended_at=_time(j.get("ended_at")),
        exit_code=_opt_int(j.get("exit_code")),
        signal=_opt_int(j.get("signal")),
        timed_out=bool(j.get("timed_out", False)),
        pty=bool(j.get("pty", False)),
        output_start=int(j.get("output_start") or 0),
        output_end=int(j.get("output_end") or 0),
    )


def parse_infos(j: Any) -> list[BackgroundProcessInfo]:
    """The background entries of GET /v1/processes."""
    procs = j.get("processes") if isinstance(j, dict) else None
    return [parse_info(p) for p in procs or () if isinstance(p, dict) and p.get("background")]


def parse_output(line: str | bytes) -> OutputEvent | None:
    """One NDJSON line of GET /v1/processes/{id}/output; None for blank or unknown lines."""
    if not line.strip():
        return None
    j = json.loads(line)
    t, off = j.get("type"), int(j.get("offset") or 0)
    if t in ("stdout", "stderr"):
        return OutputEvent(type=t, offset=off, data=base64.b64decode(j.get("data", "")))
    if t == "dropped":
        return OutputEvent(type="dropped", offset=off, dropped=int(j.get("bytes") or 0))
    if t == "exit":
        return OutputEvent(
            type="exit",
            offset=off,
            exit_code=int(j["exit_code"]) if j.get("exit_code") is not None else -1,
            signal=int(j.get("signal") or 0),
            timed_out=bool(j.get("timed_out", False)),
        )
    return None


def _close_repeatable(info: BackgroundProcessInfo | None) -> bool:
    """Whether closing the stdin of a process last seen as info may be sent twice: not on
    a PTY (a ^D each time), nor when it is not known (a handle made by id)."""
    return info is not None and not info.pty


def typed(e: RequestError) -> RequestError:
    """The specific error of a refused background-process request."""
    if e.status == 409:
        return ProcessExitedError(str(e), status=e.status, code=e.code)
    if e.status == 429:
        return TooManyProcessesError(str(e), status=e.status, code=e.code)
    return e


def output_params(follow: bool, offset: int) -> dict[str, str]:
    if offset < 0:
        raise ValueError("offset must be >= 0")
    return {"follow": "true" if follow else "false", "offset": str(offset)}


KILL = {"signal": "SIGKILL"}
"""The body of a kill (POST .../signal): idempotent, so retried, unlike other signals."""

WAIT_SLICE = 25.0
"""Longest single wait request (seconds): the router and proxies cut requests that send no
byte for a minute, so a longer wait is a loop of these."""

MAX_RESUMES = 3
"""Output streams that end (or break) before the exit event are resumed from the last
offset (a proxy cuts a quiet stream after a minute, any stream after a few); this many
quick ends in a row without any new event end the iteration with an error."""

QUICK_END = 5.0
"""A response that ended sooner than this (seconds) without a new event counts against
MAX_RESUMES; a longer one was cut by a timeout and is simply resumed. So does a resume
whose request fails (no connection, a 502/503/504): it is tried again after
RESUME_BACKOFF seconds, doubled at each such failure in a row."""

RESUME_BACKOFF = 0.2


WAIT_BACKOFF = 0.05
"""A wait request answered "still running" well before its slice (in under half of it: a
sandboxd, router or proxy that does not hold it) is followed by a pause of this many
seconds, doubled at each such answer in a row up to WAIT_BACKOFF_MAX (never past the
wait's deadline), so wait() does not spin on such answers."""

WAIT_BACKOFF_MAX = 1.0


class WaitPacing:
    """The pause before a wait's next request (WAIT_BACKOFF): after(slice, elapsed) of
    an attempt that still saw the process running."""

    def __init__(self) -> None:
        self.delay = 0.0

    def after(self, asked: float, elapsed: float, left: float | None) -> float:
        """Seconds to pause after an attempt that asked for asked seconds, took elapsed
        and saw the process running (left: seconds to the deadline, None: none)."""
        if elapsed >= asked / 2:
            self.delay = 0.0  # held as asked: the next request at once
            return 0.0
        self.delay = WAIT_BACKOFF if self.delay == 0.0 else min(self.delay * 2, WAIT_BACKOFF_MAX)
        return self.delay if left is None else min(self.delay, left)


def wait_args(left: float | None) -> dict[str, Any]:
    """request() arguments of one GET .../wait of at most WAIT_SLICE seconds (left: the
    seconds still to wait, None: no limit)."""
    if left is not None and left < 0:
        raise ValueError("timeout must be >= 0")
    t = WAIT_SLICE if left is None else min(left, WAIT_SLICE)
    return {"params": {"timeout": f"{t:g}"}, "timeout": httpx.Timeout(t + 30.0, connect=10.0)}


def wait_slice(args: dict[str, Any]) -> float:
    """The seconds a wait request of wait_args asked sandboxd to hold it."""
    return float(args["params"]["timeout"])


def wait_deadline(timeout: float | None) -> float | None:
    """The time.monotonic() deadline of a wait of timeout seconds (None: no limit)."""
    if timeout is None:
        return None
    if timeout < 0:
        raise ValueError("timeout must be >= 0")
    return time.monotonic() + timeout


def wait_left(deadline: float | None) -> float | None:
    """Seconds left until deadline (time.monotonic()), never negative; None without one."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


class Resume:
    """Where an output stream stands: the offset to ask for next, whether it is over, and
    the budget of resumes without progress."""

    def __init__(self, offset: int, follow: bool) -> None:
        if offset < 0:
            raise ValueError("offset must be >= 0")
        self.offset = offset
        self.follow = follow
        self.done = False
        self.idle = 0
        self.started = 0.0

    def params(self) -> dict[str, str]:
        """The query of the next request (which starts now)."""
        self.started = time.monotonic()
        return output_params(self.follow, self.offset)

    def seen(self, ev: OutputEvent) -> None:
        """Advances past ev."""
        self.idle = 0
        if ev.type in ("stdout", "stderr"):
            self.offset = ev.offset + len(ev.data)
        elif ev.type == "dropped":
            self.offset = ev.offset + ev.dropped
        elif ev.type == "exit":
            self.offset = ev.offset
            self.done = True

    def ended(self, pid: int, err: Exception | None) -> float:
        """The response ended (err: how it broke, or why the request for it failed).
        Sets done, or raises when resuming is pointless; else returns the seconds to
        wait before the resume (a back-off after a failed request, else 0)."""
        if not self.done and not self.follow and err is not None:
            # a replay cut short must not look complete
            raise _wire.stream_lost(pid, err) from err
        if self.done or not self.follow:
            self.done = True
            return 0.0
        if time.monotonic() - self.started >= QUICK_END:
            self.idle = 0
        self.idle += 1
        if self.idle > MAX_RESUMES:
            if err is not None:
                raise _wire.stream_lost(pid, err) from err
            raise _wire.stream_ended(pid)
        return RESUME_BACKOFF * 2.0 ** (self.idle - 1) if isinstance(err, SandboxConnectionError) else 0.0

    def failed(self, e: SandboxConnectionError) -> None:
        """A request for the stream failed (no connection; a proxy's 502/503/504): it is
        raised unless the stream follows (it then ends as a stream that broke at once)."""
        if not self.follow:
            raise e


def _path(pid: int, action: str = "") -> str:
    return f"/v1/processes/{pid}" + (f"/{action}" if action else "")


# ---- sync ----------------------------------------------------------------------------


def start(sb: Sandbox, body: dict[str, Any]) -> BackgroundProcess:
    """POST /v1/processes of a start_body; never retried (it would start a second one)."""
    try:
        resp = sb.request(
            "POST",
            "/v1/processes",
            idempotent=False,
            what="start background process",
            make_content=lambda: _wire.chunked_json(body),
            headers=_wire.JSON_HEADERS,
        )
    except RequestError as e:
        raise typed(e) from None
    info = parse_info(resp.json())
    return BackgroundProcess(sb, info.id, info)


def list_infos(sb: Sandbox) -> list[BackgroundProcessInfo]:
    resp = sb.request("GET", "/v1/processes", idempotent=True, what="list processes")
    return parse_infos(resp.json())


class BackgroundProcess:
    """A handle on a background process by id: cheap, holds no connection. Leaving a
    ``with`` block does not stop the process (use kill())."""

    def __init__(self, sandbox: Sandbox, id: int, info: BackgroundProcessInfo | None = None) -> None:
        self._sb = sandbox
        self.id = int(id)
        self.last_info = info
        """The state seen by the last start, info() or wait() (None before any)."""

    def __repr__(self) -> str:
        return f"BackgroundProcess(id={self.id})"

    def _call(self, method: str, action: str, *, idempotent: bool, **kw: Any) -> httpx.Response:
        try:
            return self._sb.request(
                method, _path(self.id, action), idempotent=idempotent, what=f"process {self.id}", **kw
            )
        except RequestError as e:
            raise typed(e) from None

    def info(self) -> BackgroundProcessInfo:
        """The current state (NotFoundError once removed or evicted)."""
        self.last_info = parse_info(self._call("GET", "", idempotent=True).json())
        return self.last_info

    def output(self, *, follow: bool = True, offset: int = 0) -> Iterator[OutputEvent]:
        """The output still held from byte ``offset`` on (a ``dropped`` event first when
        some of it is gone), then, with ``follow``, live output until the exit event. A
        stream cut by a proxy's timeout is resumed from where it stopped. Closing the
        iterator early leaves the process running."""
        st = Resume(offset, follow)
        text = _wire.StreamText()  # across resumes: the bytes go on where they stopped
        while not st.done:
            err: Exception | None = None
            try:
                for ev in self._output_once(st.params()):
                    st.seen(ev)
                    yield from text.output_events(ev)
            except httpx.TransportError as e:
                err = e
            except SandboxConnectionError as e:  # the resume itself failed
                st.failed(e)
                err = e
            if pause := st.ended(self.id, err):
                time.sleep(pause)

    def _output_once(self, params: dict[str, str]) -> Iterator[OutputEvent]:
        what = f"process {self.id} output"
        t = self._sb._route()
        http = self._sb._http(t)
        req = http.build_request(
            "GET",
            t.base + _path(self.id, "output"),
            params=params,
            headers=t.headers,
            timeout=_wire.process_stream_timeout(),
        )
        try:
            resp = http.send(req, stream=True)
        except httpx.TransportError as e:
            raise _wire.transport_error(e, what, True) from e
        try:
            if resp.status_code >= 400:
                _wire.read_error(resp)
                err = _wire.error(resp, what)
                raise typed(err) if isinstance(err, RequestError) else err
            for line in _wire.split_lines(resp.iter_bytes(), _wire.MAX_PROCESS_LINE, what):
                ev = parse_output(line)
                if ev is not None:
                    yield ev
        finally:
            resp.close()

    def write(self, data: str | bytes) -> None:
        """Sends data to stdin (started with ``stdin=True``); ProcessExitedError after
        the exit. Sent in requests of at most 1 MiB, in order (see Process.write)."""
        _wire.write_stdin(lambda chunk: self._call("POST", "stdin", idempotent=False, content=chunk), data)

    def close_stdin(self) -> None:
        """Closes stdin once the queued data is written. Retried after a lost answer only
        for a process known not to run on a PTY: there each close is a ^D, and a second
        one would end the shell under the program that read the first."""
        self._call("POST", "stdin/close", idempotent=_close_repeatable(self.last_info))

    def signal(self, sig: str | int) -> None:
        """Sends a signal ("SIGTERM", "INT", 9 ...) to the process group;
        ProcessExitedError after the exit."""
        self._call("POST", "signal", idempotent=False, json={"signal": sig})

    def kill(self) -> None:
        """SIGKILL to the process group; no error when it already exited (the entry stays
        listed: see remove()). Retried like a read: a second SIGKILL changes nothing, and
        after an attempt whose answer was lost the process has exited (409: no error)."""
        try:
            self._call("POST", "signal", idempotent=True, json=KILL)
        except ProcessExitedError:
            pass

    def wait(self, timeout: float | None = None) -> BackgroundProcessInfo:
        """Waits until the process exits or ``timeout`` seconds pass, and returns its state
        (check ``.running`` after a timeout). Long waits are a series of short requests."""
        deadline = wait_deadline(timeout)
        pacing = WaitPacing()
        while True:
            args = wait_args(wait_left(deadline))
            t0 = time.monotonic()
            info = parse_info(self._call("GET", "wait", idempotent=True, **args).json())
            self.last_info = info
            left = wait_left(deadline)
            if not info.running or (left is not None and left <= 0):
                return info
            pause = pacing.after(wait_slice(args), time.monotonic() - t0, left)
            if pause > 0:
                time.sleep(pause)

    def remove(self) -> None:
        """Kills the process if it still runs, waits for it and forgets its entry (and its
        output). No error when it is already gone."""
        try:
            if self.info().running:
                self.kill()
                self.wait()
            self._call("DELETE", "", idempotent=True, ok=(404,))
        except NotFoundError:
            pass


# ---- async ---------------------------------------------------------------------------


async def astart(sb: AsyncSandbox, body: dict[str, Any]) -> AsyncBackgroundProcess:
    try:
        resp = await sb.request(
            "POST",
            "/v1/processes",
            idempotent=False,
            what="start background process",
            make_content=lambda: _wire.achunked_json(body),
            headers=_wire.JSON_HEADERS,
        )
    except RequestError as e:
        raise typed(e) from None
    info = parse_info(resp.json())
    return AsyncBackgroundProcess(sb, info.id, info)


async def alist_infos(sb: AsyncSandbox) -> list[BackgroundProcessInfo]:
    resp = await sb.request("GET", "/v1/processes", idempotent=True, what="list processes")
    return parse_infos(resp.json())


class AsyncBackgroundProcess:
    """The async twin of BackgroundProcess (same methods, as coroutines; output() is an
    async iterator)."""

    def __init__(self, sandbox: AsyncSandbox, id: int, info: BackgroundProcessInfo | None = None) -> None:
        self._sb = sandbox
        self.id = int(id)
        self.last_info = info

    def __repr__(self) -> str:
        return f"AsyncBackgroundProcess(id={self.id})"

    async def _call(self, method: str, action: str, *, idempotent: bool, **kw: Any) -> httpx.Response:
        try:
            return await self._sb.request(
                method, _path(self.id, action), idempotent=idempotent, what=f"process {self.id}", **kw
            )
        except RequestError as e:
            raise typed(e) from None

    async def info(self) -> BackgroundProcessInfo:
        self.last_info = parse_info((await self._call("GET", "", idempotent=True)).json())
        return self.last_info

    async def output(self, *, follow: bool = True, offset: int = 0) -> AsyncIterator[OutputEvent]:
        st = Resume(offset, follow)
        text = _wire.StreamText()  # across resumes: the bytes go on where they stopped
        while not st.done:
            err: Exception | None = None
            try:
                async for ev in self._output_once(st.params()):
                    st.seen(ev)
                    for out in text.output_events(ev):
                        yield out
            except httpx.TransportError as e:
                err = e
            except SandboxConnectionError as e:  # the resume itself failed
                st.failed(e)
                err = e
            if pause := st.ended(self.id, err):
                await asyncio.sleep(pause)

    async def _output_once(self, params: dict[str, str]) -> AsyncIterator[OutputEvent]:
        what = f"process {self.id} output"
        t = await self._sb._route()
        http = self._sb._http(t)
        req = http.build_request(
            "GET",
            t.base + _path(self.id, "output"),
            params=params,
            headers=t.headers,
            timeout=_wire.process_stream_timeout(),
        )
        try:
            resp = await http.send(req, stream=True)
        except httpx.TransportError as e:
            raise _wire.transport_error(e, what, True) from e
        try:
            if resp.status_code >= 400:
                await _wire.aread_error(resp)
                err = _wire.error(resp, what)
                raise typed(err) if isinstance(err, RequestError) else err
            async for line in _wire.asplit_lines(resp.aiter_bytes(), _wire.MAX_PROCESS_LINE, what):
                ev = parse_output(line)
                if ev is not None:
                    yield ev
        finally:
            await resp.aclose()

    async def write(self, data: str | bytes) -> None:
        await _wire.awrite_stdin(lambda chunk: self._call("POST", "stdin", idempotent=False, content=chunk), data)

    async def close_stdin(self) -> None:
        await self._call("POST", "stdin/close", idempotent=_close_repeatable(self.last_info))

    async def signal(self, sig: str | int) -> None:
        await self._call("POST", "signal", idempotent=False, json={"signal": sig})

    async def kill(self) -> None:
        try:
            await self._call("POST", "signal", idempotent=True, json=KILL)
        except ProcessExitedError:
            pass

    async def wait(self, timeout: float | None = None) -> BackgroundProcessInfo:
        deadline = wait_deadline(timeout)
        pacing = WaitPacing()
        while True:
            args = wait_args(wait_left(deadline))
            t0 = time.monotonic()
            resp = await self._call("GET", "wait", idempotent=True, **args)
            info = parse_info(resp.json())
            self.last_info = info
            left = wait_left(deadline)
            if not info.running or (left is not None and left <= 0):
                return info
            pause = pacing.after(wait_slice(args), time.monotonic() - t0, left)
            if pause > 0:
                await asyncio.sleep(pause)

    async def remove(self) -> None:
        try:
            if (await self.info()).running:
                await self.kill()
                await self.wait()
            await self._call("DELETE", "", idempotent=True, ok=(404,))
        except NotFoundError:
            pass


__all__ = ["AsyncBackgroundProcess", "BackgroundProcess"]
