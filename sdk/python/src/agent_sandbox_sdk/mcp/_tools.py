"""What the MCP tools do, on top of the async SDK: finding sandbox handles, creating
and deleting sandboxes, commands, code, files; every answer bounded (see _bounds).
Nothing here speaks MCP: _server registers these methods as tools."""

from __future__ import annotations

import base64
import binascii
import contextlib
import math
import os
import secrets
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast

import anyio

from agent_sandbox_sdk import _k8s
from agent_sandbox_sdk._conn import ENV_ROUTER_URL
from agent_sandbox_sdk.aio import AsyncSandbox, AsyncSandboxClient
from agent_sandbox_sdk.aio import connect as aconnect
from agent_sandbox_sdk.errors import NotFoundError, SandboxError, SandboxTimeoutError
from agent_sandbox_sdk.mcp._bounds import MIN_OUTPUT_BYTES, Capture, Limits, bound_text
from agent_sandbox_sdk.models import Connection, RouterConnection

CREATED_BY = "mcp"
"""Value of the agents.x-k8s.io/created-by label on what this server creates."""

LOCAL_NAME = "local"
"""The name of the one sandbox of a server pinned to a sandboxd URL."""

DEFAULT_CONTEXT = "default"
"""The code context run_code uses when given none (the SDK's default)."""

MAX_MIME_TYPES = 16
"""MIME types listed per run_code result (each name cut to 128 characters)."""

COMMAND_TIMEOUT = 60.0
"""run_command's timeout when the model gives none (at most --max-timeout)."""

CODE_TIMEOUT = 300.0
"""run_code's timeout when the model gives none (at most --max-timeout): sandboxd's own
default (--exec-timeout), sent so that --max-timeout bounds it too."""

MAX_TTL = 7 * 86400.0
"""The longest ttl_seconds create_sandbox takes without --ttl (with it: --ttl)."""

DEADLINE_MARGIN = 30.0
"""Seconds past a run's timeout after which run_command and run_code stop waiting for
sandboxd's answer and return what came (timed_out: true). sandboxd's keepalives keep the
SDK's read timeout from firing, so a sandbox that never ends a run (or its stream) held
the call for ever."""

HANDLE_CACHE = 256
"""Sandbox handles kept between calls (each is a few names and a cached route)."""


class ToolFailure(Exception):
    """A failure to report to the model as a tool error (its text is the message)."""


@dataclass
class Options:
    """The server's configuration (command-line flags, see _cli)."""

    namespace: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    connection: str = "auto"
    router_url: str | None = None
    router_token_file: str | None = None
    sandboxd_url: str | None = None
    sandboxd_token: str | None = None
    default_template: str | None = None
    default_pool: str | None = None
    allow_create: bool = True
    allow_delete: bool = True
    only_created: bool = False
    cleanup: bool = False
    create_timeout: float = 180.0
    default_ttl: float | None = None
    limits: Limits = field(default_factory=Limits)


# ---- the code-execution API of the SDK, as this module uses it --------------------------


class CodeResultLike(Protocol):
    @property
    def data(self) -> Mapping[str, str]: ...
    @property
    def is_main(self) -> bool: ...


class CodeErrorLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def traceback(self) -> str: ...


class ExecutionLike(Protocol):
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...
    @property
    def results(self) -> Sequence[CodeResultLike]: ...
    @property
    def error(self) -> CodeErrorLike | None: ...
    @property
    def execution_count(self) -> int: ...
    @property
    def truncated(self) -> bool: ...


@dataclass
class Image:
    mime_type: str
    data: str
    """base64"""


@dataclass
class CodeOutput:
    """run_code's answer: the JSON part and the images."""

    summary: dict[str, Any]
    images: list[Image]


@dataclass
class Streams:
    """The bounded captures of run_code's stdout and stderr, fed by the SDK's callbacks."""

    out: Capture
    err: Capture

    def stdout(self, text: str) -> None:
        self.out.add(text.encode("utf-8", "surrogatepass"))

    def stderr(self, text: str) -> None:
        self.err.add(text.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class _NoExecution:
    """The execution of a run_code whose answer did not come in time."""

    stdout: str = ""
    stderr: str = ""
    results: tuple[CodeResultLike, ...] = ()
    error: CodeErrorLike | None = None
    execution_count: int = 0
    truncated: bool = False


NO_EXECUTION: ExecutionLike = _NoExecution()


def _deadline(timeout: float | None) -> float:
    """How long run_command and run_code wait for a run of this timeout."""
    return (timeout or 0.0) + DEADLINE_MARGIN


def _seconds(value: float | None, default: float | None, limits: Limits, what: str) -> float | None:
    if value is None:
        return default
    if not math.isfinite(value) or value <= 0 or value > limits.timeout:
        raise ToolFailure(f"{what} must be > 0 and at most {limits.timeout:g} seconds")
    return float(value)


class Tools:
    """The server's state: one SDK client (none when pinned to a sandboxd URL), the
    handles of sandboxes in use and the names of those this server created."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.limits = opts.limits
        self.instance = secrets.token_hex(4)
        self.created: dict[str, AsyncSandbox] = {}
        self._handles: dict[str, AsyncSandbox] = {}
        self._client: AsyncSandboxClient | None = None
        self._pinned: AsyncSandbox | None = None
        if opts.sandboxd_url:
            self._pinned = aconnect(opts.sandboxd_url, token=opts.sandboxd_token, name=LOCAL_NAME)

    @property
    def pinned(self) -> bool:
        return self._pinned is not None

    def client(self) -> AsyncSandboxClient:
        """The SDK client, built on first use (inside the server's event loop)."""
        if self._pinned is not None:
            raise ToolFailure("this server is pinned to one sandboxd (--sandboxd-url): there is no cluster")
        if self._client is None:
            self._client = AsyncSandboxClient(
                namespace=self.opts.namespace,
                kubeconfig=self.opts.kubeconfig,
                context=self.opts.context,
                connection=_connection(self.opts),
            )
        return self._client

    async def aclose(self) -> None:
        """Deletes what this server created when --cleanup is on, then closes the clients."""
        if self.opts.cleanup:
            for sb in {id(sb): sb for sb in self.created.values()}.values():
                try:
                    await sb.delete()
                except SandboxError:
                    pass
            self.created.clear()
        if self._client is not None:
            await self._client.aclose()
        if self._pinned is not None:
            await self._pinned.client.aclose()

    # ---- handles ---------------------------------------------------------------------

    async def handle(self, name: str | None) -> AsyncSandbox:
        """The handle of sandbox ``name`` (a Sandbox or SandboxClaim name). Without a
        name: the pinned sandbox, else the only sandbox this server created."""
        if self._pinned is not None:
            if name not in (None, "", LOCAL_NAME):
                raise ToolFailure(f"this server serves one sandbox, {LOCAL_NAME!r}; there is no {name!r}")
            return self._pinned
        if not name:
            mine = {id(sb): sb for sb in self.created.values()}
            if len(mine) == 1:
                return next(iter(mine.values()))
            raise ToolFailure("name the sandbox: call list_sandboxes, or create_sandbox for a new one")
        if self.opts.only_created and name not in self.created:
            raise ToolFailure(f"sandbox {name!r} was not created by this server (--only-created)")
        sb = self.created.get(name) or self._handles.get(name)
        if sb is None:
            sb = await self.client().get(name)
            if len(self._handles) >= HANDLE_CACHE:
                self._handles.pop(next(iter(self._handles)))
            self._handles[name] = sb
        return sb

    def _forget(self, sb: AsyncSandbox) -> None:
        for d in (self.created, self._handles):
            for k in [k for k, v in d.items() if v is sb]:
                del d[k]

    # ---- lifecycle -------------------------------------------------------------------

    async def create_sandbox(self, template: str | None, pool: str | None, ttl_seconds: float | None) -> dict[str, Any]:
        if not self.opts.allow_create:
            raise ToolFailure("creating sandboxes is disabled on this server (--no-create)")
        if self._pinned is not None:
            raise ToolFailure(f"this server serves one sandbox, {LOCAL_NAME!r}, and cannot create others")
        if template and pool:
            raise ToolFailure("give a template or a pool, not both")
        if not template and not pool:
            pool, template = self.opts.default_pool, self.opts.default_template
            if pool and template:
                template = None
            if not pool and not template:
                raise ToolFailure("give a template or a pool (this server has no default)")
        ceiling = self.opts.default_ttl
        if ceiling is not None and ttl_seconds is not None and ttl_seconds > ceiling:
            raise ToolFailure(f"ttl_seconds {ttl_seconds:g} is above this server's --ttl of {ceiling:g} seconds")
        ttl = _seconds(ttl_seconds, ceiling, Limits(timeout=ceiling or MAX_TTL), "ttl_seconds")
        sb = await self.client().create(
            pool,
            template=template,
            labels={_k8s.LABEL_CREATED_BY: CREATED_BY},
            annotations={"agents.x-k8s.io/mcp-server": self.instance},
            ttl=ttl,
            timeout=self.opts.create_timeout,
            keep=True,
        )
        key = sb.claim or sb.name
        self.created[key] = sb
        if sb.claim:
            self.created[sb.name] = sb
        return {
            "sandbox": sb.name,
            "claim": sb.claim,
            "namespace": sb.namespace,
            "from": f"pool {pool}" if pool else f"template {template}",
            "ttl_seconds": ttl,
        }

    async def list_sandboxes(self) -> dict[str, Any]:
        if self._pinned is not None:
            return {"sandboxes": [{"name": LOCAL_NAME, "ready": True, "created_here": False}], "truncated": False}
        infos = await self.client().list()
        mine = {sb.name for sb in self.created.values()}
        out: list[dict[str, Any]] = []
        cut = False
        for info in infos:
            if self.opts.only_created and info.name not in mine:
                continue
            if len(out) == self.limits.list_entries:
                cut = True  # one more than the limit: no entry is built past it
                break
            out.append(
                {
                    "name": info.name,
                    "claim": info.claim,
                    "ready": info.ready,
                    "operating_mode": info.operating_mode,
                    "reason": info.reason,
                    "created_by": info.labels.get(_k8s.LABEL_CREATED_BY, ""),
                    "created_here": info.name in mine,
                }
            )
        return {"namespace": self.client().namespace, "sandboxes": out, "truncated": cut}

    async def delete_sandbox(self, name: str) -> dict[str, Any]:
        if not self.opts.allow_delete:
            raise ToolFailure("deleting sandboxes is disabled on this server (--no-delete)")
        if self._pinned is not None:
            raise ToolFailure(f"the pinned sandbox {LOCAL_NAME!r} cannot be deleted through this server")
        sb = await self.handle(name)
        if sb not in self.created.values():
            # a cached handle of a name: read it again, since the name may hold another
            # Sandbox now (the old handle's delete, conditioned on its UID, did nothing)
            self._forget(sb)
            sb = await self.handle(name)
        deleted = await sb.delete()
        self._forget(sb)
        if not deleted:
            raise ToolFailure(f"sandbox {name or sb.name!r} was already gone: nothing was deleted")
        return {"deleted": sb.claim or sb.name, "sandbox": sb.name, "claim": sb.claim}

    # ---- processes -------------------------------------------------------------------

    async def run_command(
        self,
        sandbox: str | None,
        command: str | list[str],
        cwd: str | None,
        env: dict[str, str] | None,
        timeout_seconds: float | None,
    ) -> dict[str, Any]:
        if isinstance(command, list) and not command:
            raise ToolFailure("command: an empty argv")
        timeout = _seconds(timeout_seconds, min(COMMAND_TIMEOUT, self.limits.timeout), self.limits, "timeout_seconds")
        sb = await self.handle(sandbox)
        out, err = Capture(self.limits.output_bytes), Capture(self.limits.output_bytes)
        exit_code, sig, timed_out = -1, 0, False
        with anyio.move_on_after(_deadline(timeout)) as scope:
            async for ev in sb.stream(command, cwd=cwd, env=env, timeout=timeout):
                if ev.type == "stdout":
                    out.add(ev.data)
                elif ev.type == "stderr":
                    err.add(ev.data)
                elif ev.type == "exit":
                    exit_code, sig, timed_out = ev.exit_code, ev.signal, ev.timed_out
        if scope.cancelled_caught:
            timed_out = True  # no exit came within the timeout and the margin
        return {
            "exit_code": exit_code,
            "signal": sig,
            "timed_out": timed_out,
            "stdout": out.text(),
            "stderr": err.text(),
            "stdout_bytes": out.total,
            "stderr_bytes": err.total,
            "stdout_truncated": out.truncated,
            "stderr_truncated": err.truncated,
        }

    async def run_code(
        self, sandbox: str | None, code: str, context: str | None, timeout_seconds: float | None
    ) -> CodeOutput:
        timeout = _seconds(timeout_seconds, min(CODE_TIMEOUT, self.limits.timeout), self.limits, "timeout_seconds")
        sb = await self.handle(sandbox)
        runner = getattr(sb, "run_code", None)
        if runner is None:
            raise ToolFailure("code execution needs an agent_sandbox_sdk SDK with Sandbox.run_code")
        # stdout and stderr go to two bounded captures as they come (as run_command's):
        # the SDK keeps only the results (keep_streams=False), within max_output
        streams = Streams(Capture(self.limits.output_bytes), Capture(self.limits.output_bytes))
        kw: dict[str, Any] = {
            "timeout": timeout,
            "max_output": self.limits.code_collect(),
            "on_stdout": streams.stdout,
            "on_stderr": streams.stderr,
            "keep_streams": False,
        }
        ex: ExecutionLike = NO_EXECUTION
        try:
            with anyio.move_on_after(_deadline(timeout)) as scope:
                try:
                    ex = cast(ExecutionLike, await runner(code, context=context or None, **kw))
                except NotFoundError:
                    # A context the model named for the first time: create it, run once more.
                    if not context or context == DEFAULT_CONTEXT or not await self._new_context(sb, context):
                        raise
                    ex = cast(ExecutionLike, await runner(code, context=context, **kw))
            if scope.cancelled_caught:
                # no end event within the timeout and the margin: what was printed
                out = self.code_output(NO_EXECUTION, streams)
                out.summary["timed_out"] = True
                return out
        except SandboxTimeoutError as e:
            # CodeExecutionTimeout: the kernel was interrupted; what it printed comes along.
            partial = getattr(e, "execution", None)
            if partial is None:
                raise
            out = self.code_output(cast(ExecutionLike, partial), streams)
            out.summary["timed_out"] = True
            return out
        return self.code_output(ex, streams)

    async def _new_context(self, sb: AsyncSandbox, context: str) -> bool:
        """Creates code context ``context``; False when the SDK cannot name contexts."""
        contexts = getattr(sb, "contexts", None) or getattr(sb, "code_contexts", None)
        if contexts is None:
            return False
        try:
            await contexts.create(id=context)
        except TypeError:
            return False
        return True

    def code_output(self, ex: ExecutionLike, streams: Streams | None = None) -> CodeOutput:
        """The bounded answer of one execution: text of the main result, stdout, stderr
        (from streams, the captures the run fed; else the Execution's), the error, other
        results' text (at most limits.results of them, their texts within one
        output_bytes), and PNG/JPEG images (at most limits.images)."""
        lim = self.limits
        if streams is None:
            streams = Streams(Capture(lim.output_bytes), Capture(lim.output_bytes))
        # an SDK that kept the streams itself (no keep_streams): its texts
        if not streams.out.total and ex.stdout:
            streams.stdout(ex.stdout)
        if not streams.err.total and ex.stderr:
            streams.stderr(ex.stderr)
        out, err = streams.out, streams.err
        summary: dict[str, Any] = {
            "execution_count": ex.execution_count,
            "text": None,
            "stdout": out.text(),
            "stderr": err.text(),
            "stdout_bytes": out.total,
            "stderr_bytes": err.total,
            "truncated": ex.truncated or out.truncated or err.truncated,
            "timed_out": bool(getattr(ex, "timed_out", False)),
            "error": None,
            "results": [],
            "results_omitted": 0,
        }
        images: list[Image] = []
        room = lim.output_bytes  # the results' texts, together
        for r in ex.results:
            if len(summary["results"]) >= lim.results:
                summary["results_omitted"] += 1
                summary["truncated"] = True
                continue
            entry, used = self._result_entry(r, room, images)
            room -= used
            summary["truncated"] = summary["truncated"] or entry.pop("cut")
            if r.is_main and summary["text"] is None:
                summary["text"] = entry["text"]
            summary["results"].append(entry)
        if ex.error is not None:
            tb, cut = bound_text(ex.error.traceback, lim.output_bytes)
            value, vcut = bound_text(ex.error.value, lim.output_bytes)
            name, ncut = bound_text(ex.error.name, MIN_OUTPUT_BYTES)
            summary["error"] = {"name": name, "value": value, "traceback": tb}
            summary["truncated"] = summary["truncated"] or cut or vcut or ncut
        return CodeOutput(summary, images)

    def _result_entry(self, r: CodeResultLike, room: int, images: list[Image]) -> tuple[dict[str, Any], int]:
        """One result's entry (with "cut": whether anything of it was left out) and the
        bytes of text it took from room."""
        mimes = sorted(r.data)
        cut = len(mimes) > MAX_MIME_TYPES
        text = r.data.get("text/plain")
        used = 0
        if text is not None:
            if room < MIN_OUTPUT_BYTES and len(text.encode("utf-8", "surrogatepass")) > room:
                text, cut = None, True  # the answer's text budget is spent
            else:
                text, tcut = bound_text(text, max(room, MIN_OUTPUT_BYTES))
                used = len(text.encode("utf-8", "surrogatepass"))
                cut = cut or tcut
        entry: dict[str, Any] = {"is_main": r.is_main, "mime_types": [m[:128] for m in mimes[:MAX_MIME_TYPES]]}
        entry["text"] = text
        for mime in ("image/png", "image/jpeg"):
            if mime in r.data:
                entry["image"] = self._image(mime, r.data[mime], images)
                break
        entry["cut"] = cut
        return entry, used

    def _image(self, mime: str, b64: str, images: list[Image]) -> str:
        """Adds an image to the answer when it fits; returns what happened to it."""
        size = len(b64) * 3 // 4
        if len(images) >= self.limits.images:
            return f"omitted: more than {self.limits.images} images"
        if size > self.limits.image_bytes:
            return f"omitted: {size} bytes, over the {self.limits.image_bytes} byte limit"
        images.append(Image(mime, b64))
        return f"attached as image {len(images)}"

    # ---- files -----------------------------------------------------------------------

    async def read_file(
        self, sandbox: str | None, path: str, encoding: Literal["text", "base64"], max_bytes: int | None
    ) -> dict[str, Any]:
        limit = self.limits.output_bytes if max_bytes is None else min(max_bytes, self.limits.output_bytes)
        if limit <= 0:
            raise ToolFailure("max_bytes must be positive")
        sb = await self.handle(sandbox)
        data = bytearray()
        stream = cast(AsyncGenerator[bytes, None], sb.files.iter_read(path))
        try:
            with self._file_deadline(f"read_file {path}"):
                async for chunk in stream:
                    data += chunk
                    if len(data) > limit:
                        break
        finally:
            with anyio.CancelScope(shield=True):
                await stream.aclose()
        cut = len(data) > limit
        body = bytes(data[:limit])
        if encoding == "base64":
            return {"path": path, "encoding": "base64", "content": base64.b64encode(body).decode(), "truncated": cut}
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as e:
            if not cut or e.start < len(body) - 3:
                raise ToolFailure(
                    f"{path} is not UTF-8 text (byte {e.start}); read it with encoding='base64'"
                ) from None
            text = body[: e.start].decode("utf-8")
        if cut:
            text += f"\n[... file truncated after {len(body)} bytes; pass a larger max_bytes or use run_command ...]"
        return {"path": path, "encoding": "text", "content": text, "truncated": cut}

    @contextlib.contextmanager
    def _file_deadline(self, what: str) -> Iterator[None]:
        """Bounds a file read or listing by --max-timeout (a sandbox that sends a byte now
        and then, or never ends the answer, held it for ever): past it, a tool error."""
        try:
            with anyio.fail_after(self.limits.timeout):
                yield
        except TimeoutError:
            raise ToolFailure(
                f"{what}: the sandbox did not answer completely within {self.limits.timeout:g} s (--max-timeout)"
            ) from None

    async def write_file(
        self, sandbox: str | None, path: str, content: str, encoding: Literal["text", "base64"], mode: str | None
    ) -> dict[str, Any]:
        if encoding == "base64":
            try:
                data = base64.b64decode(content, validate=True)
            except (binascii.Error, ValueError) as e:
                raise ToolFailure(f"content is not valid base64: {e}") from None
        else:
            data = content.encode("utf-8")
        perm = None
        if mode is not None:
            try:
                perm = int(mode, 8)
            except ValueError:
                raise ToolFailure(f"mode {mode!r}: an octal string such as '644' or '0755'") from None
            if not 0 <= perm <= 0o7777:
                raise ToolFailure(f"mode {mode!r} is out of range")
        sb = await self.handle(sandbox)
        await sb.files.write(path, data, mode=perm)
        return {"path": path, "bytes": len(data)}

    async def list_files(self, sandbox: str | None, path: str) -> dict[str, Any]:
        sb = await self.handle(sandbox)
        n = self.limits.list_entries
        # the first n entries; the listing stops at the page that shows more: a directory
        # of a million files costs one page request and one page of memory
        with self._file_deadline(f"list_files {path}"):
            entries, seen, complete = await sb.files._list_head(path, n)
        return {
            "path": path,
            "entries": [
                {"name": e.name, "type": e.type, "size": e.size, "modified": e.modified.isoformat(), "mode": e.mode}
                for e in entries
            ],
            "truncated": not complete,
            "total": seen if complete else None,
            "total_at_least": seen,
        }


def _connection(opts: Options) -> Connection | str:
    """The SDK connection config for the server's flags."""
    mode = opts.connection
    if mode not in ("auto", "router", "proxy", "direct"):
        raise ValueError(f"--connection {mode!r}: auto, router, proxy or direct")
    if mode in ("auto", "router"):
        url = opts.router_url or os.environ.get(ENV_ROUTER_URL)
        if url:
            return RouterConnection(url=url, token_file=opts.router_token_file)
        if mode == "router":
            raise ValueError(f"--connection router needs --router-url or ${ENV_ROUTER_URL}")
    return mode
