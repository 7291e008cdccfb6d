"""Plain data types: results, events, file entries, sandbox summaries and the
connection modes."""

from __future__ import annotations

import base64
import json as _json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

DEFAULT_PORT = 8080
"""Port of sandboxd's REST API inside the sandbox pod."""


@dataclass(frozen=True)
class SecretKeyRef:
    """An env value read from key ``key`` of Secret ``name`` in the sandbox's namespace.
    On a template with ``claimConfigDelivery.mode: LateBound`` a claimed warm sandbox
    gets the value delivered in memory; otherwise the pod reads it at start."""

    name: str
    key: str


@dataclass(frozen=True)
class ConfigMapKeyRef:
    """An env value read from key ``key`` of ConfigMap ``name`` (see SecretKeyRef)."""

    name: str
    key: str


EnvValue = str | SecretKeyRef | ConfigMapKeyRef
"""A value of ``create(env=...)``: a literal or a reference to a Secret/ConfigMap key."""


@dataclass(frozen=True)
class ExecResult:
    """The outcome of a command run to completion."""

    stdout: str
    stderr: str
    exit_code: int
    signal: int = 0
    timed_out: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ms: int = 0

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0."""
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class ProcessEvent:
    """One event of a streamed process: ``start``, ``stdout``, ``stderr`` or ``exit``."""

    type: Literal["start", "stdout", "stderr", "exit"]
    data: bytes = b""
    process_id: int = 0
    pid: int = 0
    exit_code: int = -1
    signal: int = 0
    timed_out: bool = False
    _text: str | None = field(default=None, repr=False, compare=False)

    @property
    def text(self) -> str:
        """``data`` decoded as UTF-8 (invalid bytes replaced), as part of its stream: a
        character that sandboxd's events split (they are cut at byte boundaries) is in the
        text of the event that completes it, so the texts of one stream's events (stdout
        and stderr apart) join to its whole text. A sequence left incomplete at the end
        comes as U+FFFD in an event of its stream with empty ``data`` just before the
        exit event. An event made by hand decodes its own ``data``."""
        return self._text if self._text is not None else self.data.decode("utf-8", "replace")


@dataclass(frozen=True)
class CodeResult:
    """Rich output of code run with ``run_code``: the value of the last expression
    (``is_main``) or something shown with ``display()`` (a matplotlib figure, an object
    with ``_repr_png_``/``_repr_html_``/...). ``data`` maps mime types to text;
    ``image/png`` is base64."""

    data: dict[str, str]
    is_main: bool = False

    @property
    def text(self) -> str | None:
        """The ``text/plain`` representation (repr of the value)."""
        return self.data.get("text/plain")

    @property
    def html(self) -> str | None:
        return self.data.get("text/html")

    @property
    def png(self) -> bytes | None:
        """The decoded ``image/png`` bytes."""
        v = self.data.get("image/png")
        return base64.b64decode(v) if v is not None else None

    @property
    def json(self) -> Any:
        """The parsed ``application/json`` representation, or None."""
        v = self.data.get("application/json")
        return _json.loads(v) if v is not None else None


@dataclass(frozen=True)
class CodeError:
    """An exception raised by code run with ``run_code``: its class name, str() and the
    formatted traceback."""

    name: str
    value: str
    traceback: str


@dataclass(frozen=True)
class Execution:
    """The outcome of ``run_code``: output, rich results, the error if the code raised,
    the context's execution counter, and whether output was cut at sandboxd's limit."""

    stdout: str = ""
    stderr: str = ""
    results: list[CodeResult] = field(default_factory=list)
    error: CodeError | None = None
    execution_count: int = 0
    truncated: bool = False
    timed_out: bool = False

    @property
    def text(self) -> str | None:
        """The ``text/plain`` of the main result: the value of the last expression."""
        for r in self.results:
            if r.is_main:
                return r.text
        return None


@dataclass(frozen=True)
class CodeContext:
    """A code context: a Python kernel whose state lives across ``run_code`` calls.
    ``state`` is starting, idle, busy or dead (restarted by the next execution)."""

    id: str
    language: str = "python"
    cwd: str | None = None
    state: str = ""
    execution_count: int = 0


@dataclass(frozen=True)
class FileEntry:
    """One entry of a directory listing."""

    name: str
    size: int
    type: Literal["file", "directory", "other"]
    modified: datetime
    mode: str = ""

    @property
    def is_dir(self) -> bool:
        return self.type == "directory"


@dataclass(frozen=True)
class FileStat:
    """What ``files.stat`` reports about one path (lstat: a symlink is described, not
    followed; ``symlink_target`` is its target as stored). With
    ``follow_symlinks=True`` it describes what the link leads to (never a symlink, no
    ``symlink_target``; ``path`` and ``name`` are still the ones asked for)."""

    name: str
    path: str
    type: Literal["file", "directory", "symlink", "other"]
    size: int
    mode: str
    mtime: datetime
    symlink_target: str | None = None

    @property
    def is_dir(self) -> bool:
        return self.type == "directory"

    @property
    def is_file(self) -> bool:
        return self.type == "file"

    @property
    def is_symlink(self) -> bool:
        return self.type == "symlink"


FileEventType = Literal["create", "modify", "delete", "move", "move_from", "move_to", "overflow", "error"]


@dataclass(frozen=True)
class FileEvent:
    """One event of ``files.watch``. ``path`` is relative to the watched directory ("" is
    the directory itself). ``move`` has ``src``/``dst``; an unpaired ``move_from`` /
    ``move_to`` is a move out of / into the watched tree. ``overflow`` says events were
    dropped (``lost`` of them; None when the kernel's queue overflowed and the count is
    unknown); ``error`` carries ``message`` (for example: too many subdirectories)."""

    type: FileEventType
    path: str = ""
    is_dir: bool = False
    src: str | None = None
    dst: str | None = None
    lost: int | None = None
    message: str = ""


@dataclass(frozen=True)
class WriteResult:
    """The outcome of one file of ``files.write_many``: ``ok`` with the bytes written,
    or the HTTP ``status``, API ``code`` and ``message`` of its failure."""

    path: str
    ok: bool
    size: int = 0
    status: int = 0
    code: str = ""
    message: str = ""


@dataclass(frozen=True)
class SandboxInfo:
    """A summary of a Sandbox as listed by the API server."""

    name: str
    namespace: str
    ready: bool
    reason: str
    message: str
    pod_ips: tuple[str, ...]
    claim: str = ""
    operating_mode: str = "Running"
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RouterConnection:
    """Through the sandbox router.

    ``style="headers"`` sends X-Sandbox-ID/Namespace/Port; ``style="path"`` uses the
    ``/s/{namespace}/{name}/{port}/...`` form. ``token`` (or the file ``token_file``) is
    sent as ``Authorization: Bearer``; without either (and without
    ``$AGENT_SANDBOX_ROUTER_TOKEN``), the kubeconfig's credential (token, token file or
    exec plugin) is used when it has one, but only to an ``https`` URL, an ``http`` URL
    of a loopback host (a port-forward), from in-cluster configuration, or with
    ``allow_plaintext_token`` (or ``$AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN=true``);
    otherwise the route is refused (``ValueError``) before any request."""

    url: str
    token: str | None = field(default=None, repr=False)  # out of logs and tracebacks
    token_file: str | None = None
    style: Literal["headers", "path"] = "headers"
    port: int = DEFAULT_PORT
    verify: bool | str = True
    allow_plaintext_token: bool = False


@dataclass(frozen=True)
class DirectConnection:
    """Straight to the pod IP (from inside the cluster).

    ``url`` pins one base URL for every sandbox (for a sandboxd on a known address);
    ``token`` is sandboxd's own bearer token when it requires one."""

    port: int = DEFAULT_PORT
    url: str | None = None
    token: str | None = field(default=None, repr=False)  # out of logs and tracebacks


@dataclass(frozen=True)
class PodProxyConnection:
    """Through the API server's pod proxy: needs only the kubeconfig."""

    port: int = DEFAULT_PORT


@dataclass(frozen=True)
class AutoConnection:
    """Router when a router URL is configured ($AGENT_SANDBOX_ROUTER_URL), else direct to
    the pod IP when running in a cluster, else the API server's pod proxy."""

    port: int = DEFAULT_PORT


Connection = RouterConnection | DirectConnection | PodProxyConnection | AutoConnection
ConnectionMode = Literal["auto", "router", "direct", "proxy"]


@dataclass(frozen=True)
class BackgroundProcessInfo:
    """The state of a background process (``Sandbox.start_background``): still running or
    exited (with ``exit_code``, or the ``signal`` that ended it). ``output_start`` and
    ``output_end`` are the logical byte offsets sandboxd still holds of its output."""

    id: int
    pid: int
    command: tuple[str, ...]
    state: Literal["running", "exited"]
    started_at: datetime | None = None
    ended_at: datetime | None = None
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    pty: bool = False
    output_start: int = 0
    output_end: int = 0

    @property
    def running(self) -> bool:
        return self.state == "running"


@dataclass(frozen=True)
class OutputEvent:
    """One event of a background process's output: ``stdout``/``stderr`` (``data`` at
    logical byte ``offset``), ``dropped`` (``dropped`` bytes from ``offset`` on are no longer
    held: the buffer overflowed) or ``exit`` (``offset`` is the end of the output)."""

    type: Literal["stdout", "stderr", "dropped", "exit"]
    offset: int = 0
    data: bytes = b""
    dropped: int = 0
    exit_code: int = -1
    signal: int = 0
    timed_out: bool = False
    _text: str | None = field(default=None, repr=False, compare=False)

    @property
    def text(self) -> str:
        """``data`` decoded as UTF-8 (invalid bytes replaced), as part of its stream (see
        ProcessEvent.text): the texts of one output() call's stdout (or stderr) events
        join to its whole text; a sequence left incomplete before a ``dropped`` or the
        ``exit`` event comes as U+FFFD in an event with empty ``data`` at that offset."""
        return self._text if self._text is not None else self.data.decode("utf-8", "replace")
