"""sandboxd's HTTP API without I/O: paths, request bodies, response parsing and error
mapping (sandboxd's ``{"code","message"}`` and the router's ``{"detail"}``)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

import httpx

from .errors import AuthError, NotFoundError, RequestError, SandboxConnectionError, SandboxError
from .models import ExecResult, FileEntry, ProcessEvent

CHUNK = 64 * 1024
Command = str | Sequence[str]


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


class Collector:
    """Accumulates stream events into an ExecResult."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.err = bytearray()
        self.exit: ProcessEvent | None = None

    def add(self, ev: ProcessEvent) -> None:
        if ev.type == "stdout":
            self.out += ev.data
        elif ev.type == "stderr":
            self.err += ev.data
        elif ev.type == "exit":
            self.exit = ev

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


def error(resp: httpx.Response, what: str, body: bytes | None = None) -> SandboxError:
    """Maps a failed sandboxd/router/pod-proxy response to an exception."""
    raw = body if body is not None else resp.content
    code, msg = "", raw[:300].decode("utf-8", "replace")
    try:
        j = json.loads(raw)
        if isinstance(j, dict):
            code = str(j.get("code") or j.get("reason") or "")
            msg = str(j.get("message") or j.get("detail") or msg)
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
    return RequestError(f"{what}: HTTP {s}: {code + ': ' if code else ''}{msg}", status=s, code=code)
