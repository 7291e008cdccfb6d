"""Stateful code execution (code contexts, docs/code-interpreter.md): what the sync and
async clients share. sandboxd keeps one Python kernel per context; ``run_code`` posts
the code and reads the NDJSON events (stdout, stderr, result, display, error, end) as
they come."""

from __future__ import annotations

import asyncio
import builtins
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from . import _wire
from .errors import CodeExecutionTimeout, SandboxConnectionError
from .models import CodeContext, CodeError, CodeResult, Execution

if TYPE_CHECKING:
    from .aio import AsyncSandbox
    from .client import Sandbox

ContextRef = str | CodeContext | None
"""A context: its id, the CodeContext, or None for the sandbox's default context."""

EXECUTE_PATH = "/v1/code/execute"

DEFAULT_CONTEXT = "default"
"""The context sandboxd runs code in when the request names none."""

CANCEL_GRACE = 5.0
"""How long (seconds) after a run_code given up before its end (the caller's task
cancelled, KeyboardInterrupt, a callback's exception, a lost stream) the next run_code in
that context through the same handle sends its request again while sandboxd answers 409
"the context is executing other code". sandboxd interrupts the abandoned code once it
sees the connection close and frees the context when the kernel has stopped (usually
within milliseconds): until then the context is busy with it."""

MAX_OUTPUT = 64 << 20
"""Default bound (characters) of what run_code collects: stdout, stderr and results'
data together. sandboxd cuts an execution at --max-code-output (16 MiB of event lines by
default); this bounds the client's memory whatever the sandbox sends."""

RESULT_OVERHEAD = 64
"""Characters of the output budget (max_output) each kept result costs beyond its data:
results without data (``{"type": "display"}``) are bounded by the budget too."""

MAX_EVENT_LINE = 40 << 20
"""Longest event line read (bytes; a display event carries a whole image): sandboxd's
driver sends at most 32 MiB in one."""


def context_id(ctx: ContextRef) -> str | None:
    if ctx is None:
        return None
    return ctx.id if isinstance(ctx, CodeContext) else str(ctx)


def context_path(ctx: str | CodeContext, action: str = "") -> str:
    cid = context_id(ctx) or ""
    # "/", "?", "#" and "%" would name another path (a delete of "main#x" deleted "main");
    # "." and ".." are normalised away by URL handling (as in the Go SDK)
    if not cid or any(ch in cid for ch in "/?#%") or cid in (".", ".."):
        raise ValueError(f"invalid context id {cid!r}")
    return f"/v1/contexts/{quote(cid, safe='')}" + (f"/{action}" if action else "")


DELETE_ARGS: dict[str, Any] = {"idempotent": True, "what": "delete context", "after_loss": (404,)}
"""request() arguments of a context delete (as files.delete's: see _wire.Attempts)."""


def parse_context(j: Mapping[str, Any]) -> CodeContext:
    return CodeContext(
        id=str(j.get("id", "")),
        language=str(j.get("language") or "python"),
        cwd=j.get("cwd"),
        state=str(j.get("state") or ""),
        execution_count=int(j.get("execution_count") or 0),
    )


def create_body(language: str, cwd: str | None, id: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"language": language}
    if cwd is not None:
        body["cwd"] = cwd
    if id is not None:
        body["id"] = id
    return body


def execute_body(code: str, context: ContextRef, timeout: float | None) -> dict[str, Any]:
    if not isinstance(code, str):
        raise TypeError("code must be a str")
    if timeout is not None and timeout <= 0:
        raise ValueError("timeout must be positive")
    body: dict[str, Any] = {"code": code}
    cid = context_id(context)
    if cid is not None:
        body["context"] = cid
    if timeout is not None:
        body["timeout"] = timeout
    return body


def busy(resp: httpx.Response) -> bool:
    """Whether sandboxd refused an execution because the context runs other code."""
    if resp.status_code != 409 or _wire.answer_source(resp) != "sandboxd":
        return False
    try:
        j = json.loads(resp.content)
    except ValueError:
        return False
    return isinstance(j, dict) and "executing other code" in str(j.get("message", ""))


class Abandoned:
    """The executions of a handle given up before their end, by context (the handle's
    ``_abandoned_code``: context id -> time.monotonic() then): a run_code in such a
    context refused as busy is sent again until CANCEL_GRACE seconds after that, with a
    short back-off. A genuine conflict (another caller's code running) still raises,
    after the grace at most; one in a context given up long ago at once."""

    def __init__(self, marks: dict[str, float], body: Mapping[str, Any]) -> None:
        self.marks = marks
        self.cid = str(body.get("context") or DEFAULT_CONTEXT)
        self.pause = 0.01

    def abandon(self) -> None:
        """Marks the context's execution given up (its request was sent, or may have been)."""
        self.marks[self.cid] = time.monotonic()

    def started(self) -> None:
        """The context took this execution: whatever was given up there has ended."""
        self.marks.pop(self.cid, None)

    def retry_after(self, resp: httpx.Response) -> float | None:
        """The pause before sending again an execution answered resp, or None when the
        answer is to be raised: it is no busy answer, or the context was not given up
        (through this handle) less than CANCEL_GRACE seconds ago."""
        at = self.marks.get(self.cid)
        if at is None or not busy(resp):
            return None
        left = at + CANCEL_GRACE - time.monotonic()
        if left <= 0:
            self.marks.pop(self.cid, None)
            return None
        pause = min(self.pause, left)
        self.pause = min(self.pause * 2, 0.2)
        return pause


def execute_request(base: str, headers: Mapping[str, str]) -> dict[str, Any]:
    """build_request() arguments of POST /v1/code/execute but the (chunked) content."""
    return {
        "method": "POST",
        "url": base + EXECUTE_PATH,
        "headers": {**headers, **_wire.JSON_HEADERS},
        "timeout": _wire.process_stream_timeout(),
    }


def check_max_output(max_output: int | None) -> int:
    if max_output is None:
        return MAX_OUTPUT
    if isinstance(max_output, bool) or not isinstance(max_output, int) or max_output < 0:
        raise ValueError("max_output must be a non-negative int")
    return max_output


class Collector:
    """Folds execution events into an Execution, calling the callbacks as they come.
    It keeps at most ``max_output`` characters of stdout, stderr and results' data in
    all, each result costing RESULT_OVERHEAD more (the callbacks still get everything);
    beyond that the Execution is truncated. Without ``keep_streams`` stdout and stderr
    go to the callbacks only: they are not kept and cost nothing of max_output."""

    def __init__(
        self,
        on_stdout: Callable[[str], None] | None,
        on_stderr: Callable[[str], None] | None,
        on_result: Callable[[CodeResult], None] | None,
        max_output: int = MAX_OUTPUT,
        keep_streams: bool = True,
    ) -> None:
        self.on_stdout, self.on_stderr, self.on_result = on_stdout, on_stderr, on_result
        self.room = max_output  # characters still kept
        self.keep_streams = keep_streams
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.results: list[CodeResult] = []
        self.error: CodeError | None = None
        self.count = 0
        self.truncated = False
        self.timed_out = False
        self.ended = False

    def add(self, ev: Mapping[str, Any]) -> bool:
        """Takes one event; True once the end event arrived."""
        t = ev.get("type")
        if t in ("stdout", "stderr"):
            text = str(ev.get("text", ""))
            if self.keep_streams and (kept := self._take(len(text))):
                (self.stdout if t == "stdout" else self.stderr).append(text[:kept])
            cb = self.on_stdout if t == "stdout" else self.on_stderr
            if cb is not None:
                cb(text)
        elif t in ("result", "display"):
            data = ev.get("data")
            r = CodeResult(
                data={str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {},
                is_main=bool(ev.get("is_main", False)),
            )
            size = RESULT_OVERHEAD + sum(len(k) + len(v) for k, v in r.data.items())
            if size <= self.room:  # a result is kept whole or not at all
                self.room -= size
                self.results.append(r)
            else:
                self.truncated = True
            if self.on_result is not None:
                self.on_result(r)
        elif t == "error":
            self.error = CodeError(str(ev.get("name", "")), str(ev.get("value", "")), str(ev.get("traceback", "")))
        elif t == "truncated":
            self.truncated = True
        elif t == "end":
            self.count = int(ev.get("execution_count") or 0)
            self.truncated = self.truncated or bool(ev.get("truncated"))
            self.timed_out = bool(ev.get("timed_out"))
            self.ended = True
        return self.ended

    def _take(self, size: int) -> int:
        """How many characters of a text of this size are kept (the rest marks the
        Execution truncated)."""
        kept = min(size, self.room)
        if kept < size:
            self.truncated = True
        self.room -= kept
        return kept

    def add_line(self, line: str) -> bool:
        if not line.strip():
            return self.ended
        try:
            ev = json.loads(line)
        except ValueError as e:
            raise SandboxConnectionError(f"run_code: bad event line {line[:80]!r}") from e
        return self.add(ev) if isinstance(ev, dict) else self.ended

    def result(self) -> Execution:
        """The Execution; raises if the stream ended early or the timeout hit."""
        if not self.ended:
            raise SandboxConnectionError("run_code: the event stream ended before the end event")
        ex = Execution(
            stdout="".join(self.stdout),
            stderr="".join(self.stderr),
            results=self.results,
            error=self.error,
            execution_count=self.count,
            truncated=self.truncated,
            timed_out=self.timed_out,
        )
        if ex.timed_out:
            what = ex.error.name if ex.error else "interrupted"
            raise CodeExecutionTimeout(f"run_code: timed out ({what})", execution=ex)
        return ex


class LineSplitter(_wire.LineSplitter):
    """_wire.LineSplitter with run_code's bound (MAX_EVENT_LINE unless told)."""

    def __init__(self, limit: int | None = None) -> None:
        super().__init__(MAX_EVENT_LINE if limit is None else limit, "run_code")


def _lines(chunks: Iterator[bytes]) -> Iterator[str]:
    return _wire.split_lines(chunks, MAX_EVENT_LINE, "run_code")


def _alines(chunks: AsyncIterator[bytes]) -> AsyncIterator[str]:
    return _wire.asplit_lines(chunks, MAX_EVENT_LINE, "run_code")


# ---- sync ---------------------------------------------------------------------------


def run_code(sb: Sandbox, body: dict[str, Any], col: Collector) -> Execution:
    """Posts the execution and reads its events into col. Sent once, but again after a
    resume on traffic that proves it never reached sandboxd, and while sandboxd refuses
    it because the context still runs an execution this handle gave up (Abandoned)."""
    ab = Abandoned(sb._abandoned_code, body)
    woke = False
    while True:
        t = sb._route()
        http = sb._http(t)
        req = http.build_request(**execute_request(t.base, t.headers), content=_wire.chunked_json(body))
        try:
            resp = http.send(req, stream=True)
        except httpx.TransportError as e:
            sb._target = None
            if not woke and _wire.never_sent(e) and sb._wake(force=True):
                woke = True
                continue
            if not _wire.never_sent(e):
                ab.abandon()
            raise _wire.transport_error(e, "run_code", False) from e
        except BaseException:  # Ctrl-C while sending: the code may be running
            ab.abandon()
            raise
        pause = None
        try:
            if resp.status_code >= 400:
                _wire.read_error(resp)
                if not woke and _wire.not_forwarded(resp, t.via_kube) and sb._wake(force=True):
                    woke = True
                    continue
                pause = ab.retry_after(resp)
                if pause is None:
                    raise _wire.error(resp, "run_code")
            else:
                ab.started()
                try:
                    _read(_lines(resp.iter_bytes()), col)
                except BaseException:
                    if not col.ended:
                        ab.abandon()
                    raise
        finally:
            resp.close()
        if pause is None:
            return col.result()
        time.sleep(pause)


def _read(lines: Iterator[str], col: Collector) -> None:
    try:
        for line in lines:
            if col.add_line(line):
                return
    except httpx.TransportError as e:
        raise SandboxConnectionError(f"run_code: stream lost: {e!r}") from e


class Contexts:
    """``sandbox.contexts``: create, list, restart, interrupt and delete code contexts."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sb = sandbox

    def create(self, language: str = "python", cwd: str | None = None, *, id: str | None = None) -> CodeContext:
        """Starts a new context (a fresh kernel); ``cwd`` is relative to sandboxd's root."""
        resp = self._sb.request(
            "POST", "/v1/contexts", idempotent=False, what="create context", json=create_body(language, cwd, id)
        )
        return parse_context(resp.json())

    def list(self) -> builtins.list[CodeContext]:
        resp = self._sb.request("GET", "/v1/contexts", idempotent=True, what="list contexts")
        return [parse_context(c) for c in resp.json().get("contexts") or []]

    def get(self, ctx: str | CodeContext) -> CodeContext:
        resp = self._sb.request("GET", context_path(ctx), idempotent=True, what="get context")
        return parse_context(resp.json())

    def restart(self, ctx: str | CodeContext) -> CodeContext:
        """Kills and restarts the kernel: its state is lost."""
        resp = self._sb.request("POST", context_path(ctx, "restart"), idempotent=False, what="restart context")
        return parse_context(resp.json())

    def interrupt(self, ctx: str | CodeContext) -> None:
        """Interrupts the running code (KeyboardInterrupt); the state is kept."""
        self._sb.request("POST", context_path(ctx, "interrupt"), idempotent=True, what="interrupt context")

    def delete(self, ctx: str | CodeContext) -> None:
        """Kills the kernel and forgets the context. sandboxd's 404 on a retry after an
        attempt whose answer was lost is success: that attempt deleted it."""
        self._sb.request("DELETE", context_path(ctx), **DELETE_ARGS)


# ---- async --------------------------------------------------------------------------


async def arun_code(sb: AsyncSandbox, body: dict[str, Any], col: Collector) -> Execution:
    """The async twin of run_code (a cancelled task gives its execution up)."""
    ab = Abandoned(sb._abandoned_code, body)
    woke = False
    while True:
        t = await sb._route()
        http = sb._http(t)
        req = http.build_request(**execute_request(t.base, t.headers), content=_wire.achunked_json(body))
        try:
            resp = await http.send(req, stream=True)
        except httpx.TransportError as e:
            sb._target = None
            if not woke and _wire.never_sent(e) and await sb._wake(force=True):
                woke = True
                continue
            if not _wire.never_sent(e):
                ab.abandon()
            raise _wire.transport_error(e, "run_code", False) from e
        except BaseException:  # cancelled while sending: the code may be running
            ab.abandon()
            raise
        pause = None
        try:
            if resp.status_code >= 400:
                await _wire.aread_error(resp)
                if not woke and _wire.not_forwarded(resp, t.via_kube) and await sb._wake(force=True):
                    woke = True
                    continue
                pause = ab.retry_after(resp)
                if pause is None:
                    raise _wire.error(resp, "run_code")
            else:
                ab.started()
                try:
                    await _aread(_alines(resp.aiter_bytes()), col)
                except BaseException:
                    if not col.ended:
                        ab.abandon()
                    raise
        finally:
            await resp.aclose()
        if pause is None:
            return col.result()
        await asyncio.sleep(pause)


async def _aread(lines: AsyncIterator[str], col: Collector) -> None:
    try:
        async for line in lines:
            if col.add_line(line):
                return
    except httpx.TransportError as e:
        raise SandboxConnectionError(f"run_code: stream lost: {e!r}") from e


class AsyncContexts:
    """``sandbox.contexts`` of an AsyncSandbox (coroutines of Contexts' methods)."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._sb = sandbox

    async def create(self, language: str = "python", cwd: str | None = None, *, id: str | None = None) -> CodeContext:
        resp = await self._sb.request(
            "POST", "/v1/contexts", idempotent=False, what="create context", json=create_body(language, cwd, id)
        )
        return parse_context(resp.json())

    async def list(self) -> builtins.list[CodeContext]:
        resp = await self._sb.request("GET", "/v1/contexts", idempotent=True, what="list contexts")
        return [parse_context(c) for c in resp.json().get("contexts") or []]

    async def get(self, ctx: str | CodeContext) -> CodeContext:
        resp = await self._sb.request("GET", context_path(ctx), idempotent=True, what="get context")
        return parse_context(resp.json())

    async def restart(self, ctx: str | CodeContext) -> CodeContext:
        resp = await self._sb.request("POST", context_path(ctx, "restart"), idempotent=False, what="restart context")
        return parse_context(resp.json())

    async def interrupt(self, ctx: str | CodeContext) -> None:
        await self._sb.request("POST", context_path(ctx, "interrupt"), idempotent=True, what="interrupt context")

    async def delete(self, ctx: str | CodeContext) -> None:
        await self._sb.request("DELETE", context_path(ctx), **DELETE_ARGS)
