"""kubectl-sandbox exec against a scripted sandboxd (a local HTTP server standing in for
sandboxd's REST process API): what the CLI does with answers a real sandboxd gives only
under load. KUBECTL_SANDBOX names the binary (default: build/release/kubectl-sandbox)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = os.environ.get("KUBECTL_SANDBOX", str(ROOT / "build/release/kubectl-sandbox"))


class FakeSandboxd(ThreadingHTTPServer):
    """One process (id 1) whose stdin/close is refused with 429 `close_refusals` times
    (a PTY's end-of-input with sandboxd's stdin queue full), then taken; the process
    exits (code 0) once its stdin was closed."""

    daemon_threads = True

    def __init__(self, close_refusals: int) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.close_refusals = close_refusals
        self.closes = 0
        self.stdin = b""
        self.closed = threading.Event()
        self.lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    server: FakeSandboxd
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _answer(self, status: int, body: bytes = b"") -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_POST(self) -> None:
        body = self._body()
        s = self.server
        if self.path == "/v1/processes":
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._chunk(json.dumps({"type": "start", "id": 1}).encode() + b"\n")
            exited = s.closed.wait(30)
            end = {"type": "exit", "exit_code": 0 if exited else 9}
            self._chunk(json.dumps(end).encode() + b"\n")
            self._chunk(b"")
            self.close_connection = True
        elif self.path == "/v1/processes/1/stdin":
            with s.lock:
                s.stdin += body
            self._answer(204)
        elif self.path == "/v1/processes/1/stdin/close":
            with s.lock:
                s.closes += 1
                refuse = s.closes <= s.close_refusals
            if refuse:
                err = {
                    "error": {
                        "code": "RESOURCE_EXHAUSTED",
                        "message": "stdin queue is full: the end of input was not sent",
                    }
                }
                self._answer(429, json.dumps(err).encode())
            else:
                self._answer(204)
                s.closed.set()
        else:
            self._answer(404, b'{"error":{"code":"NOT_FOUND","message":"no"}}')


# Named by KUBECTL_SANDBOX (as make test does), the binary must be there; else skipped
# when no release build exists.
@unittest.skipUnless(
    "KUBECTL_SANDBOX" in os.environ or os.access(CLI, os.X_OK), f"no {CLI}"
)
class ExecStdinEnd(unittest.TestCase):
    def run_exec(
        self, refusals: int
    ) -> tuple[subprocess.CompletedProcess[bytes], FakeSandboxd]:
        srv = FakeSandboxd(refusals)
        t = threading.Thread(target=srv.serve_forever, daemon=True)
        t.start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        r = subprocess.run(
            [CLI, "--sandboxd-url", url, "exec", "x", "-i", "--", "cat"],
            input=b"some input",
            capture_output=True,
            timeout=25,
            check=False,
        )
        return r, srv

    def test_end_of_input_told_again_after_429(self) -> None:
        # Before, the 429 was dropped: the command never saw the end of its input and the
        # CLI waited for it for good (here: 30 s, then the fake's exit code 9).
        r, srv = self.run_exec(3)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        self.assertEqual(srv.stdin, b"some input")
        self.assertEqual(srv.closes, 4)

    def test_end_of_input_once(self) -> None:
        r, srv = self.run_exec(0)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        self.assertEqual(srv.closes, 1)


if __name__ == "__main__":
    unittest.main()
