#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Kernel driver of sandboxd's code contexts (docs/code-interpreter.md).

One process per context, started by sandboxd as ``python3 kernel.py``. It keeps one
namespace alive across executions. Standard library only.

Protocol (NDJSON, one JSON object per line):

* sandboxd -> driver on stdin: ``{"type": "execute", "code": "...", "max_output": N}``.
* driver -> sandboxd on the stdout it was started with: ``{"type": "ready"}`` once, then
  per execution any number of ``stdout`` / ``stderr`` (``text``), ``display`` / ``result``
  (``data``: mime type -> text, ``image/png`` in base64; ``is_main`` for the value of the
  last expression), ``error`` (``name``, ``value``, ``traceback``) and ``truncated``
  events, and last ``{"type": "end", "execution_count": n, "truncated": bool}``.

The driver moves its protocol channel off file descriptors 0 and 1: fd 0 becomes
/dev/null (``input()`` sees end of file), and fds 1 and 2 become pipes read by threads,
so output written straight to the descriptors (child processes, C extensions) arrives as
stdout and stderr events instead of corrupting the protocol. The driver's own messages go
to the stderr it was started with. SIGINT interrupts the running code
(KeyboardInterrupt) and is ignored between executions.
"""

from __future__ import annotations

import ast
import base64
import builtins
import codecs
import io
import json
import linecache
import os
import signal
import sys
import threading
import traceback
import types
import warnings
from typing import Any, BinaryIO

CHUNK = 64 * 1024  # largest text of one stdout/stderr event
DEFAULT_MAX_OUTPUT = 16 * 1024 * 1024
TEXT_REPRS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("text/latex", "_repr_latex_"),
    ("image/svg+xml", "_repr_svg_"),
)
BINARY_REPRS = (("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"))


class Channel:
    """The protocol writer: whole lines, one writer at a time, and an output budget per
    execution (bytes of event lines) past which events are dropped."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.Lock()
        self.budget = DEFAULT_MAX_OUTPUT
        self.used = 0
        self.truncated = False

    def reset(self, budget: int) -> None:
        with self.lock:
            self.budget = budget
            self.used = 0
            self.truncated = False

    def _write(self, line: bytes) -> None:
        view = memoryview(line)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]

    def emit(self, event: dict[str, Any], counted: bool = True) -> None:
        line = (json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "surrogatepass")
        with self.lock:
            if counted:
                if self.truncated or self.used + len(line) > self.budget:
                    if not self.truncated:
                        self.truncated = True
                        self._write(b'{"type":"truncated"}\n')
                    return
                self.used += len(line)
            self._write(line)

    def room(self) -> int:
        """Budget left, in bytes of event lines."""
        return self.budget - self.used

    def full(self) -> bool:
        return self.truncated


class Interrupts:
    """SIGINT raises KeyboardInterrupt only while user code runs and not while the
    driver writes a protocol line (a half-written line would break the stream)."""

    def __init__(self) -> None:
        self.user = False
        self.armed = False  # a request was read: a SIGINT now is meant for it
        self.critical = 0
        self.pending = False

    def handler(self, signum: int, frame: types.FrameType | None) -> None:
        if self.user and self.critical == 0 and threading.current_thread() is threading.main_thread():
            raise KeyboardInterrupt
        if self.user or self.armed:
            self.pending = True

    def enter(self) -> None:
        self.critical += 1

    def leave(self) -> None:
        self.critical -= 1
        if self.critical == 0 and self.pending and self.user:
            self.pending = False
            raise KeyboardInterrupt


class Stream(io.TextIOBase):
    """sys.stdout / sys.stderr of user code: line-buffered events on the channel."""

    def __init__(self, name: str, chan: Channel, intr: Interrupts) -> None:
        super().__init__()
        self.name = name
        self.chan = chan
        self.intr = intr
        self.buf: list[str] = []
        self.size = 0
        self.lock = threading.RLock()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        n = len(s)
        if self.chan.full():
            return n  # over the budget: drop without copying (a 1 GB print stays cheap)
        room = self.chan.room() - self.size
        if n > room:
            s = s[: max(room, 0) + 1]  # only what can still be sent (plus one to cut at)
        with self.lock:
            self.buf.append(s)
            self.size += n
            if self.size >= CHUNK or "\n" in s:
                self._flush()
        return n

    def flush(self) -> None:
        with self.lock:
            self._flush()

    def _flush(self) -> None:
        if not self.buf:
            return
        text = "".join(self.buf)
        self.buf, self.size = [], 0
        self.intr.enter()
        try:
            i = 0
            while i < len(text) and not self.chan.full():
                # Cut at the budget so that the output up to it still arrives.
                n = max(1, min(CHUNK, self.chan.room() - 64))
                self.chan.emit({"type": self.name, "text": text[i : i + n]})
                i += n
        finally:
            self.intr.leave()


class FdCapture:
    """Output written straight to a file descriptor (1 or 2: child processes, C
    extensions, os.write) goes through a pipe that a thread reads and sends as stdout or
    stderr events while an execution runs; what arrives between executions is dropped.
    sync() waits until everything written before it has been sent (a marker written to
    the descriptor comes back through the pipe), so that it precedes the end event."""

    def __init__(self, fd: int, name: str, chan: Channel) -> None:
        r, w = os.pipe()
        os.dup2(w, fd)
        os.close(w)
        self.fd, self.r, self.name, self.chan = fd, r, name, chan
        self.active = False
        self.token = b"\x00sbd-sync-" + os.urandom(8).hex().encode() + b"\x00"
        self.synced = threading.Event()
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        threading.Thread(target=self._loop, name=f"capture-{name}", daemon=True).start()

    def sync(self, timeout: float = 2.0) -> None:
        self.synced.clear()
        try:
            os.write(self.fd, self.token)
        except OSError:
            return
        self.synced.wait(timeout)

    def _send(self, data: bytes, final: bool = False) -> None:
        if not self.active or self.chan.full():
            return  # between executions, or over the budget: dropped without decoding
        text = self.decoder.decode(data, final)
        if text:
            self.chan.emit({"type": self.name, "text": text})

    def _held(self, pending: bytes) -> int:
        """Length of the end of pending that may be the start of the marker."""
        for k in range(min(len(self.token) - 1, len(pending)), 0, -1):
            if self.token.startswith(pending[-k:]):
                return k
        return 0

    def _loop(self) -> None:
        pending = b""
        while True:
            try:
                data = os.read(self.r, CHUNK)
            except OSError:
                return
            if not data:
                return
            pending += data
            while self.token in pending:
                before, _, pending = pending.partition(self.token)
                self._send(before, final=True)
                self.synced.set()
            keep = self._held(pending)
            self._send(pending[: len(pending) - keep])
            pending = pending[len(pending) - keep :]


def _png_text(v: Any) -> str | None:
    if isinstance(v, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, str):
        return v
    return None


def _figure_png(obj: Any) -> str | None:
    """PNG (base64) of a matplotlib Figure, or None for anything else."""
    mod = sys.modules.get("matplotlib.figure")
    if mod is None or not isinstance(obj, mod.Figure):
        return None
    out = io.BytesIO()
    obj.savefig(out, format="png", bbox_inches="tight")
    return base64.b64encode(out.getvalue()).decode("ascii")


def mime_bundle(obj: Any) -> dict[str, str]:
    """The representations of obj, IPython-style: _repr_mimebundle_, the _repr_*_
    methods, a matplotlib Figure as image/png, and repr() as text/plain."""
    data: dict[str, str] = {}
    fn = getattr(obj, "_repr_mimebundle_", None)
    if callable(fn) and not isinstance(obj, type):
        got = fn(include=None, exclude=None)
        if isinstance(got, tuple):
            got = got[0]
        if isinstance(got, dict):
            for k, v in got.items():
                if k in ("image/png", "image/jpeg"):
                    v = _png_text(v)
                elif k == "application/json" and not isinstance(v, str):
                    v = json.dumps(v)
                if isinstance(k, str) and isinstance(v, str):
                    data[k] = v
    if not isinstance(obj, type):
        for mime, name in TEXT_REPRS:
            fn = getattr(obj, name, None)
            if mime not in data and callable(fn):
                v = fn()
                if isinstance(v, str):
                    data[mime] = v
        for mime, name in BINARY_REPRS:
            fn = getattr(obj, name, None)
            if mime not in data and callable(fn):
                v = _png_text(fn())
                if v is not None:
                    data[mime] = v
        fn = getattr(obj, "_repr_json_", None)
        if "application/json" not in data and callable(fn):
            v = fn()
            if v is not None:
                data["application/json"] = json.dumps(v)
    if "image/png" not in data:
        png = _figure_png(obj)
        if png is not None:
            data["image/png"] = png
    data.setdefault("text/plain", repr(obj))
    return data


class Kernel:
    def __init__(self, chan: Channel, intr: Interrupts, captures: tuple[FdCapture, ...] = ()) -> None:
        self.chan = chan
        self.intr = intr
        self.captures = captures
        self.count = 0
        self.stdout = Stream("stdout", chan, intr)
        self.stderr = Stream("stderr", chan, intr)
        main = types.ModuleType("__main__")  # user code's module (pickle finds its classes)
        sys.modules["__main__"] = main
        self.ns: dict[str, Any] = main.__dict__
        self.ns["__builtins__"] = builtins
        self.ns["display"] = self.display

    def display(self, *objs: Any) -> None:
        """Shows each object as rich output (a display event)."""
        for obj in objs:
            self._emit_data("display", mime_bundle(obj))

    def _emit_data(self, kind: str, data: dict[str, str], main: bool = False) -> None:
        self.stdout.flush()
        self.stderr.flush()
        event: dict[str, Any] = {"type": kind, "data": data}
        if kind == "result":
            event["is_main"] = main
        self.intr.enter()
        try:
            self.chan.emit(event)
        finally:
            self.intr.leave()

    def _figures(self) -> None:
        """Sends every open matplotlib figure as image/png and closes them."""
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            for num in plt.get_fignums():
                fig = plt.figure(num)
                self._emit_data("display", {"image/png": _figure_png(fig) or "", "text/plain": repr(fig)})
            plt.close("all")
        except Exception as e:  # noqa: BLE001 - a broken figure must not break the kernel
            self.chan.emit({"type": "stderr", "text": f"cannot render figures: {e!r}\n"})

    def _error(self, e: BaseException) -> None:
        te = traceback.TracebackException(type(e), e, e.__traceback__)
        # The driver's own frames (the exec call, the SIGINT handler) are not the user's.
        te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename != __file__])
        text = "".join(te.format())
        self.stdout.flush()
        self.stderr.flush()
        self.chan.emit({"type": "error", "name": type(e).__name__, "value": str(e), "traceback": text})

    def _run(self, code: str, filename: str) -> None:
        tree = ast.parse(code, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, filename, "exec"), self.ns)  # noqa: S102 - running the user's code is the point
        if last is not None:
            value = eval(compile(last, filename, "eval"), self.ns)
            if value is not None:
                self.ns["_"] = value
                self._emit_data("result", mime_bundle(value), main=True)

    def execute(self, code: str, budget: int) -> None:
        self.count += 1
        self.chan.reset(budget)
        filename = f"<cell-{self.count}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = self.stdout, self.stderr
        for cap in self.captures:
            cap.active = True
        try:
            self.intr.user = True
            try:
                if self.intr.pending:  # interrupted between the request and the code
                    self.intr.pending = False
                    raise KeyboardInterrupt
                self._run(code, filename)
            finally:
                self.intr.user = False
        except BaseException as e:  # noqa: BLE001 - everything the code raises is reported
            self.intr.user = False
            self._error(e)
        finally:
            self.intr.user = False
            sys.stdout, sys.stderr = saved
        self.stdout.flush()
        self.stderr.flush()
        self._figures()
        for cap in self.captures:
            cap.sync()
            cap.active = False
        self.chan.emit(
            {"type": "end", "execution_count": self.count, "truncated": self.chan.truncated},
            counted=False,
        )


def handle(kernel: Kernel, line: bytes) -> None:
    try:
        req = json.loads(line)
    except ValueError:
        kernel.chan.emit({"type": "error", "name": "ProtocolError", "value": "bad request", "traceback": ""})
        return
    if not isinstance(req, dict) or req.get("type") != "execute" or not isinstance(req.get("code"), str):
        kernel.chan.emit({"type": "error", "name": "ProtocolError", "value": "bad request", "traceback": ""})
        return
    budget = req.get("max_output")
    kernel.execute(req["code"], budget if isinstance(budget, int) and budget > 0 else DEFAULT_MAX_OUTPUT)


def setup_fds() -> tuple[BinaryIO, int]:
    """Moves the protocol off fds 0 and 1 (fd 0 becomes /dev/null) and keeps the
    original stderr for the driver's own messages. Returns (requests, events fd); fds 1
    and 2 are then free for FdCapture."""
    req_fd = os.dup(0)
    ev_fd = os.dup(1)
    err_fd = os.dup(2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives as long as the kernel
    sys.stderr = sys.__stderr__ = open(err_fd, "w", encoding="utf-8", errors="replace", buffering=1)  # noqa: SIM115
    return os.fdopen(req_fd, "rb", buffering=1 << 16), ev_fd


def main() -> int:
    os.environ.setdefault("MPLBACKEND", "Agg")
    # plt.show() on Agg warns that it cannot show; the figures are sent after the cell.
    warnings.filterwarnings("ignore", message=".*non-interactive, and thus cannot be shown")
    requests, ev_fd = setup_fds()
    intr = Interrupts()
    signal.signal(signal.SIGINT, intr.handler)
    chan = Channel(ev_fd)
    kernel = Kernel(chan, intr, (FdCapture(1, "stdout", chan), FdCapture(2, "stderr", chan)))
    kernel.chan.emit({"type": "ready", "pid": os.getpid()}, counted=False)
    while True:
        try:
            line = requests.readline()
        except KeyboardInterrupt:
            continue
        if not line:
            return 0
        intr.armed, intr.pending = True, False
        try:
            handle(kernel, line)
        except KeyboardInterrupt:  # a late SIGINT after the code finished
            continue
        finally:
            intr.armed, intr.pending = False, False


if __name__ == "__main__":
    sys.exit(main())
