"""kubectl-sandbox (exec, watch, logs --process, run-code, ps, kill) against a scripted
sandboxd (fakesbd.py): a local HTTP server whose answers each test sets, for what a real
sandboxd, proxy or router does only under load or on failure (an empty error body, a
refusal of stdin after the command exited, a server that stops answering).
KUBECTL_SANDBOX names the binary (default: build/release/kubectl-sandbox)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import unittest
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fakesbd import Base, Fake, Handler, Route, answer, process_stream, sbd_error  # noqa: E402


class ExecStdinRefused(Base):
    """The command stops taking input: its own exit code, not 5 ("stdin was cut")."""

    def refuse_second(self, status: int, body: bytes, exit_code: int, delay: float) -> Fake:
        """Takes the first stdin chunk; refuses the next ones with status/body, and the
        command's exit is reported delay seconds after the first refusal (the race of
        a command that exited: its stdin refused before the exit event is read)."""
        chunks = [0]

        def stdin(h: Handler, b: bytes) -> None:
            with h.server.lock:
                chunks[0] += 1
                first = chunks[0] == 1
            if first:
                h.answer(204)
                return
            h.answer(status, body)
            threading.Timer(delay, h.server.exit_now.set).start()

        return self.fake(
            {
                "POST /v1/processes": process_stream(exit_code),
                "POST /v1/processes/1/stdin": stdin,
                "POST /v1/processes/1/stdin/close": answer(204),
            }
        )

    def run_exec(self, srv: Fake) -> subprocess.CompletedProcess[bytes]:
        # more than one chunk (64 KiB) of input, given at once through a pipe
        return self.cli(srv, "exec", "x", "-i", "--", "head", "-c", "2", input=b"y\n" * 200000)

    def test_process_gone(self) -> None:
        # before: exit 5, "did not take the command's input (HTTP 404): stdin was cut"
        srv = self.refuse_second(404, sbd_error("NOT_FOUND", "no such process"), 3, 0.3)
        r = self.run_exec(srv)
        self.assertEqual(r.returncode, 3, r.stderr.decode(errors="replace"))
        self.assertNotIn(b"stdin was cut", r.stderr)

    def test_stdin_closed(self) -> None:
        srv = self.refuse_second(400, sbd_error("FAILED_PRECONDITION", "stdin is closed"), 0, 0.3)
        r = self.run_exec(srv)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        self.assertEqual(r.stderr, b"")

    def test_proxy_404_is_a_loss(self) -> None:
        # not sandboxd's answer (a pod proxy's "pods not found"): the input was lost
        body = json.dumps({"kind": "Status", "code": 404, "message": "pods \"x\" not found"})
        srv = self.refuse_second(404, body.encode(), 0, 0.3)
        r = self.run_exec(srv)
        self.assertEqual(r.returncode, 5, r.stderr.decode(errors="replace"))
        self.assertIn(b"stdin was cut", r.stderr)

    def test_unavailable_is_a_loss(self) -> None:
        srv = self.refuse_second(503, b"upstream connect error", 0, 0.3)
        r = self.run_exec(srv)
        self.assertEqual(r.returncode, 5, r.stderr.decode(errors="replace"))
        self.assertIn(b"stdin was cut", r.stderr)


class EmptyRefusal(Base):
    """An HTTP error with no body (a proxy's 503): exit 5 and the status, never 0."""

    def check(self, route: str, *args: str) -> None:
        srv = self.fake({route: answer(503)})
        r = self.cli(srv, *args)
        err = r.stderr.decode(errors="replace")
        self.assertEqual(r.returncode, 5, err)
        self.assertIn("HTTP 503", err)
        self.assertEqual(srv.seen, [route])

    def test_watch(self) -> None:
        self.check("GET /v1/watch/d", "watch", "x", "d")  # before: exit 0, nothing said

    def test_logs_process(self) -> None:
        self.check("GET /v1/processes/1/output", "logs", "x", "--process", "1")  # before: 0

    def test_exec(self) -> None:
        # before: exit 5 but "cannot reach ...: No error"
        self.check("POST /v1/processes", "exec", "x", "--", "true")

    def test_run_code(self) -> None:
        self.check("POST /v1/code/execute", "run-code", "x", "-c", "1")


EXEC_SLEEP = ("exec", "x", "--", "sleep", "100")
SIGNAL = "POST /v1/processes/1/signal"


class ExecInterrupt(Base):
    """A sandboxd that takes the signal request and never answers: the second Ctrl-C
    still leaves at once with 130 (before: each Ctrl-C waited out a 60 s request)."""

    def test_second_ctrl_c_leaves(self) -> None:
        started = threading.Event()

        def stream(h: Handler, body: bytes) -> None:
            started.set()
            process_stream(0)(h, body)

        def hang(h: Handler, body: bytes) -> None:
            h.server.exit_now.wait(120)
            h.answer(204)

        srv = self.fake(
            {
                "POST /v1/processes": stream,
                "POST /v1/processes/1/stdin/close": answer(204),
                SIGNAL: hang,
            }
        )
        p = self.interrupt(srv, EXEC_SLEEP, SIGNAL, started)
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        _out, err = p.communicate(timeout=15)
        self.assertEqual(p.returncode, 130, err.decode(errors="replace"))
        self.assertLess(time.monotonic() - t0, 3)
        self.assertEqual(srv.seen.count(SIGNAL), 1)

    def test_control_request_gives_up(self) -> None:
        # one Ctrl-C, the signal request unanswered: it gives up after 5 s, the session goes
        # on and the command's exit code comes back
        def hang(h: Handler, body: bytes) -> None:
            time.sleep(30)
            h.answer(204)

        srv = self.fake(
            {
                "POST /v1/processes": process_stream(7),
                "POST /v1/processes/1/stdin/close": answer(204),
                SIGNAL: hang,
            }
        )
        p = self.interrupt(srv, EXEC_SLEEP, SIGNAL, settle=1)
        t0 = time.monotonic()
        time.sleep(5.5)  # past the 5 s of a control request
        srv.exit_now.set()
        _out, err = p.communicate(timeout=40)
        self.assertEqual(p.returncode, 7, err.decode(errors="replace"))
        self.assertLess(time.monotonic() - t0, 15)


class RunCodeInterrupt(Base):
    """run-code's Ctrl-C asks sandboxd to interrupt the code; a sandboxd that takes that
    request and never answers does not hold the second Ctrl-C (130 at once; before, it
    waited out the request: up to a minute), nor the session past 5 s."""

    def serve(self, started: threading.Event) -> Fake:
        release = threading.Event()  # the interrupt request's answer: only at the end

        def execute(h: Handler, body: bytes) -> None:
            h.start_stream()
            h.event({"type": "start", "context": "c1"})
            started.set()
            done = h.server.exit_now.wait(60)
            try:
                h.event({"type": "end", "status": "ok" if done else "timeout"})
                h.end_stream()
            except OSError:
                pass  # the client left

        def hang(h: Handler, body: bytes) -> None:
            release.wait(120)
            try:
                h.answer(204)
            except OSError:
                pass

        self.addCleanup(release.set)

        return self.fake({"POST /v1/code/execute": execute, "POST /v1/contexts/c1/interrupt": hang})

    def start(self, srv: Fake, started: threading.Event) -> subprocess.Popen[bytes]:
        args = ("run-code", "x", "-c", "1")
        return self.interrupt(srv, args, "POST /v1/contexts/c1/interrupt", started, 0.3)

    def test_second_ctrl_c_leaves(self) -> None:
        started = threading.Event()
        srv = self.serve(started)
        p = self.start(srv, started)
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        _out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 130, err.decode(errors="replace"))
        self.assertLess(time.monotonic() - t0, 3)

    def test_interrupt_request_gives_up(self) -> None:
        started = threading.Event()
        srv = self.serve(started)
        p = self.start(srv, started)
        t0 = time.monotonic()
        # the stream is read again once the request gives up (5 s): its end comes through
        time.sleep(5.5)
        srv.exit_now.set()
        _out, err = p.communicate(timeout=40)
        self.assertEqual(p.returncode, 0, err.decode(errors="replace"))
        self.assertLess(time.monotonic() - t0, 15)


def endless(make: Callable[[int], dict[str, object]]) -> Route:
    """A stream of events make(i), one every 5 ms, for up to 20 s."""

    def run(h: Handler, body: bytes) -> None:
        h.start_stream()
        try:
            for i in range(4000):
                h.event(make(i))
                time.sleep(0.005)
            h.end_stream()
        except OSError:
            pass

    return run


class ReaderGone(Base):
    """A reader of the output that goes away (| head): exit 0, not death by SIGPIPE."""

    def check(self, route: str, make: Callable[[int], dict[str, object]], *args: str) -> None:
        srv = self.fake({route: endless(make)})
        p = self.popen(srv, *args)
        assert p.stdout is not None
        self.assertTrue(p.stdout.readline())
        p.stdout.close()  # head -1 is done
        err = p.stderr.read() if p.stderr else b""
        p.wait(timeout=30)
        self.assertEqual(p.returncode, 0, err.decode(errors="replace"))  # before: -13
        self.assertEqual(err, b"")

    def test_watch(self) -> None:
        self.check(
            "GET /v1/watch/d",
            lambda i: {"type": "created", "path": f"d/f{i}", "is_dir": False},
            "watch", "x", "d", "-o", "json",
        )

    def test_logs_process(self) -> None:
        self.check(
            "GET /v1/processes/1/output",
            lambda i: {"type": "stdout", "data": "bGluZQo=", "offset": 5 * i},
            "logs", "x", "--process", "1",
        )


POD_GONE = json.dumps(
    {"kind": "Status", "status": "Failure", "message": 'pods "s1" not found',
     "reason": "NotFound", "code": 404}
).encode()


class NotFound(Base):
    """Only sandboxd's own 404 is "no such process" (1); the pod proxy's 404 (the pod is
    gone) means sandboxd was not reached (5)."""

    def test_ps_pod_gone(self) -> None:
        srv = self.fake({"GET /v1/processes": answer(404, POD_GONE)})
        r = self.cli(srv, "ps", "x")
        self.assertEqual(r.returncode, 5, r.stderr.decode(errors="replace"))  # before: 1

    def test_kill_pod_gone(self) -> None:
        srv = self.fake({"POST /v1/processes/1/signal": answer(404, POD_GONE)})
        r = self.cli(srv, "kill", "x", "1")
        self.assertEqual(r.returncode, 5, r.stderr.decode(errors="replace"))  # before: 1

    def test_logs_pod_gone(self) -> None:
        srv = self.fake({"GET /v1/processes/1/output": answer(404, POD_GONE)})
        r = self.cli(srv, "logs", "x", "--process", "1")
        self.assertEqual(r.returncode, 5, r.stderr.decode(errors="replace"))  # before: 1

    def test_kill_no_such_process(self) -> None:
        srv = self.fake({})  # sandboxd's own 404 for everything
        r = self.cli(srv, "kill", "x", "1")
        self.assertEqual(r.returncode, 1, r.stderr.decode(errors="replace"))
        r = self.cli(srv, "logs", "x", "--process", "1")
        self.assertEqual(r.returncode, 1, r.stderr.decode(errors="replace"))


if __name__ == "__main__":
    unittest.main()
