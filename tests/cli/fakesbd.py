"""A scripted sandboxd for the kubectl-sandbox tests: a local HTTP server whose answers
each test sets, for what a real sandboxd, proxy or router does only under load or on
failure. KUBECTL_SANDBOX names the binary (default: build/release/kubectl-sandbox).

The test modules import it by name, with this folder put first on sys.path (they are run
as `python3 -m unittest tests/cli/test_*.py` from the repository's root)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import unittest
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = os.environ.get("KUBECTL_SANDBOX", str(ROOT / "build/release/kubectl-sandbox"))

# Named by KUBECTL_SANDBOX (as make test does), the binary must be there; else skipped
# when no release build exists.
needs_cli = unittest.skipUnless(
    "KUBECTL_SANDBOX" in os.environ or os.access(CLI, os.X_OK), f"no {CLI}"
)

Route = Callable[["Handler", bytes], None]


class Fake(ThreadingHTTPServer):
    """Routes "METHOD /path" (the path without its query) to a function of the handler and
    the request body; anything else is sandboxd's 404. `seen` lists the requests in the
    order they came; `exit_now` is for the routes that wait for the test. A route that
    answers a client gone meanwhile ends quietly."""

    daemon_threads = True

    def __init__(self, routes: dict[str, Route]) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.routes = routes
        self.lock = threading.Lock()
        self.seen: list[str] = []
        self.exit_now = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def wait_seen(self, key: str, timeout: float = 10) -> bool:
        """Whether the request key came (waiting for it up to timeout seconds)."""
        end = time.monotonic() + timeout
        while key not in self.seen and time.monotonic() < end:
            time.sleep(0.05)
        return key in self.seen


class Handler(BaseHTTPRequestHandler):
    server: Fake
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def answer(self, status: int, body: bytes = b"") -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def event(self, ev: dict[str, object]) -> None:
        data = json.dumps(ev).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True

    def _route(self, method: str) -> None:
        body = self._body()
        key = f"{method} {self.path.split('?')[0]}"
        with self.server.lock:
            self.server.seen.append(key)
        fn = self.server.routes.get(key)
        if fn:
            try:
                fn(self, body)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client left (a CLI that was interrupted)
        else:
            self.answer(404, sbd_error("NOT_FOUND", "no such thing"))

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_DELETE(self) -> None:
        self._route("DELETE")


def start(routes: dict[str, Route]) -> Fake:
    """A Fake serving routes on a thread of its own, until stop."""
    srv = Fake(routes)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def stop(srv: Fake) -> None:
    """Lets the routes that wait go on, then ends the server."""
    srv.exit_now.set()
    srv.shutdown()
    srv.server_close()


def sbd_error(code: str, message: str) -> bytes:
    """sandboxd's own error body."""
    return json.dumps({"code": code, "message": message}).encode()


def answer(status: int, body: bytes = b"") -> Route:
    """The route's answer: status and body, always the same."""

    def run(h: Handler, b: bytes) -> None:
        h.answer(status, body)

    return run


def process_stream(exit_code: int, wait: float = 30) -> Route:
    """POST /v1/processes: the start event, then the exit (exit_code) once the fake's
    exit_now is set (or after wait seconds: 99)."""

    def run(h: Handler, body: bytes) -> None:
        h.start_stream()
        h.event({"type": "start", "id": 1})
        done = h.server.exit_now.wait(wait)
        h.event({"type": "exit", "exit_code": exit_code if done else 99})
        h.end_stream()

    return run


def end(p: subprocess.Popen[bytes]) -> None:
    p.kill()
    p.wait()
    for f in (p.stdout, p.stderr):
        if f:
            f.close()


@needs_cli
class Base(unittest.TestCase):
    """A test case of the CLI against Fakes it starts (each stopped at its end)."""

    def fake(self, routes: dict[str, Route]) -> Fake:
        srv = start(routes)
        self.addCleanup(stop, srv)
        return srv

    def cli(
        self, srv: Fake, *args: str, input: bytes = b"", timeout: float = 30
    ) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [CLI, "--sandboxd-url", srv.url, *args],
            input=input,
            capture_output=True,
            timeout=timeout,
            check=False,
        )

    def popen(self, srv: Fake, *args: str) -> subprocess.Popen[bytes]:
        """The CLI running against srv (no input; killed and its pipes closed at the
        test's end)."""
        p = subprocess.Popen(
            [CLI, "--sandboxd-url", srv.url, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.addCleanup(end, p)
        return p

    def interrupt(
        self,
        srv: Fake,
        args: tuple[str, ...],
        request: str,
        started: threading.Event | None = None,
        settle: float = 0.5,
    ) -> subprocess.Popen[bytes]:
        """The CLI running args against srv, given one Ctrl-C (SIGINT) once it is under
        way (started set, if given, then settle seconds), and the request that Ctrl-C
        makes (request: "METHOD /path") seen by srv."""
        p = self.popen(srv, *args)
        if started is not None:
            self.assertTrue(started.wait(10))
        time.sleep(settle)
        p.send_signal(signal.SIGINT)
        srv.wait_seen(request, 10)
        self.assertIn(request, srv.seen)
        return p
