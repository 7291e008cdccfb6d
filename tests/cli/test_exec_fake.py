"""kubectl-sandbox exec against a scripted sandboxd (fakesbd.py: a local HTTP server
standing in for sandboxd's REST process API): what the CLI does with answers a real
sandboxd gives only under load. KUBECTL_SANDBOX names the binary (default:
build/release/kubectl-sandbox)."""

from __future__ import annotations

import subprocess
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fakesbd import Base, Handler, process_stream, sbd_error  # noqa: E402


class Stdin:
    """Process 1's stdin: what was written to it, and its stdin/close refused with 429
    `refusals` times (a PTY's end-of-input with sandboxd's stdin queue full), then taken;
    the process exits (code 0) once its stdin was closed."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.data = b""
        self.closes = 0

    def write(self, h: Handler, body: bytes) -> None:
        with h.server.lock:
            self.data += body
        h.answer(204)

    def close(self, h: Handler, body: bytes) -> None:
        with h.server.lock:
            self.closes += 1
            refuse = self.closes <= self.refusals
        if refuse:
            full = "stdin queue is full: the end of input was not sent"
            h.answer(429, sbd_error("RESOURCE_EXHAUSTED", full))
        else:
            h.answer(204)
            h.server.exit_now.set()


class ExecStdinEnd(Base):
    def run_exec(self, refusals: int) -> tuple[subprocess.CompletedProcess[bytes], Stdin]:
        stdin = Stdin(refusals)
        srv = self.fake(
            {
                "POST /v1/processes": process_stream(0),
                "POST /v1/processes/1/stdin": stdin.write,
                "POST /v1/processes/1/stdin/close": stdin.close,
            }
        )
        r = self.cli(srv, "exec", "x", "-i", "--", "cat", input=b"some input", timeout=25)
        return r, stdin

    def test_end_of_input_told_again_after_429(self) -> None:
        # Before, the 429 was dropped: the command never saw the end of its input and the
        # CLI waited for it for good (here: 30 s, then the fake's exit code 99).
        r, stdin = self.run_exec(3)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        self.assertEqual(stdin.data, b"some input")
        self.assertEqual(stdin.closes, 4)

    def test_end_of_input_once(self) -> None:
        r, stdin = self.run_exec(0)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        self.assertEqual(stdin.closes, 1)


if __name__ == "__main__":
    unittest.main()
