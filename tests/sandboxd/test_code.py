#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Component tests of code contexts (stateful code execution) on the real sandboxd binary
with the kernel driver from the source tree (standard library only): state across calls,
interrupt, restart, rich display, errors with tracebacks, separate contexts, timeouts,
bounded output, limits and idle kernels not counting as activity.

  SANDBOXD_BIN=build/release/sandboxd python3 -m unittest tests/sandboxd/test_code.py
"""
import base64
import http.client
import json
import os
import struct
import subprocess
import sys
import threading
import time
import unittest
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_component import BIN, Daemon  # noqa: E402

DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "sandboxd",
                      "driver", "kernel.py")

def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


RICH_PNG = (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + _chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + _chunk(b"IEND", b""))

# A class whose _repr_png_ returns a real 2x1 PNG (built with zlib in the kernel).
RICH = r'''
import struct, zlib
def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
class Pic:
    def _repr_png_(self):
        ihdr = struct.pack(">IIBBBBB", 2, 1, 8, 2, 0, 0, 0)
        raw = b"\x00" + b"\xff\x00\x00" + b"\x00\xff\x00"
        return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(raw))
                + _chunk(b"IEND", b""))
    def _repr_html_(self):
        return "<b>pic</b>"
    def _repr_json_(self):
        return {"w": 2}
'''


def execute(d, code, context=None, timeout=None, path="/v1/code/execute", http_timeout=60):
    body = {"code": code}
    if context is not None:
        body["context"] = context
    if timeout is not None:
        body["timeout"] = timeout
    c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=http_timeout)
    try:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        if r.status != 200:
            return r.status, json.loads(data)
        return 200, [json.loads(line) for line in data.splitlines() if line]
    finally:
        c.close()


def texts(events, kind):
    return "".join(e["text"] for e in events if e["type"] == kind)


def main_result(events):
    for e in events:
        if e["type"] == "result" and e["is_main"]:
            return e["data"]["text/plain"]
    return None


class CodeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon("--kernel-driver", DRIVER, "--kernel-python", sys.executable,
                       "--max-contexts", "4", "--max-code-output", str(1 << 20))

    @classmethod
    def tearDownClass(cls):
        # A clean exit: every kernel killed, nothing leaked (ASan builds check at exit).
        assert cls.d.stop() == 0

    def create(self, **body):
        st, data, _ = self.d.req("POST", "/v1/contexts", json.dumps(body))
        self.assertEqual(st, 201, data)
        ctx = json.loads(data)
        self.addCleanup(self.d.req, "DELETE", "/v1/contexts/" + ctx["id"])
        return ctx

    def wait_state(self, ctx_id, want, timeout=10):
        """Polls the context until its state is want (or timeout s); returns the last one."""
        deadline = time.monotonic() + timeout
        state = None
        while time.monotonic() < deadline:
            state = json.loads(self.d.req("GET", "/v1/contexts/" + ctx_id)[1])["state"]
            if state == want:
                break
            time.sleep(0.05)
        return state

    def execute_busy(self, code, ctx_id):
        """Runs code in a thread and waits until the context is busy: (the thread, a dict
        whose "r" gets execute's result)."""
        out = {}
        t = threading.Thread(target=lambda: out.update(r=execute(self.d, code, ctx_id)))
        t.start()
        self.wait_state(ctx_id, "busy")
        return t, out

    def test_state_kept_across_calls(self):
        st, ev = execute(self.d, "x = 21\nprint('set', x)")
        self.assertEqual(st, 200)
        self.assertEqual([e["type"] for e in ev], ["start", "stdout", "end"])
        self.assertEqual(texts(ev, "stdout"), "set 21\n")
        st, ev = execute(self.d, "x * 2")
        self.assertEqual(main_result(ev), "42")
        self.assertGreaterEqual(ev[-1]["execution_count"], 2)
        self.assertFalse(ev[-1]["truncated"])

    def test_output_of_child_processes(self):
        ctx = self.create()
        code = ("import os, subprocess, sys\n"
                "subprocess.run(['sh', '-c', 'echo child-out; echo child-err >&2'])\n"
                "os.write(1, b'raw\\n')\n"
                "print('py')")
        _, ev = execute(self.d, code, ctx["id"])
        out, err = texts(ev, "stdout"), texts(ev, "stderr")
        self.assertEqual(sorted(out.splitlines()), ["child-out", "py", "raw"])
        self.assertEqual(err, "child-err\n")
        self.assertIsNone(ev[-1].get("truncated") or None)
        # Output after the end (a background child) does not leak into the next execution.
        execute(self.d, "import subprocess\nsubprocess.Popen(['sh', '-c', 'sleep 0.3; echo late'])", ctx["id"])
        time.sleep(0.6)
        _, ev = execute(self.d, "print('next')", ctx["id"])
        self.assertEqual(texts(ev, "stdout"), "next\n")

    def test_error_with_traceback_and_context_survives(self):
        ctx = self.create()
        st, ev = execute(self.d, "def f():\n    raise ValueError('bad value')\nf()", ctx["id"])
        err = [e for e in ev if e["type"] == "error"]
        self.assertEqual(len(err), 1)
        self.assertEqual((err[0]["name"], err[0]["value"]), ("ValueError", "bad value"))
        self.assertIn("line 2, in f", err[0]["traceback"])
        self.assertIn("raise ValueError('bad value')", err[0]["traceback"])
        self.assertNotIn("kernel.py", err[0]["traceback"])
        st, ev = execute(self.d, "1 + 1", ctx["id"])
        self.assertEqual(main_result(ev), "2")

    def test_unprintable_exception_and_surrogates(self):
        # An exception whose __str__ fails is reported (it killed the kernel: state lost);
        # lone surrogates in output or in an error (a file name decoded with
        # surrogateescape) reach the client as "?" (the whole line was dropped: the error
        # of a failing cell vanished and the cell looked like a success).
        ctx = self.create()
        execute(self.d, "kept = 7", ctx["id"])
        code = "class E(Exception):\n    def __str__(self):\n        return self.missing\nraise E()"
        _, ev = execute(self.d, code, ctx["id"])
        err = [e for e in ev if e["type"] == "error"]
        self.assertEqual([(e["name"], e["value"]) for e in err],
                         [("E", "<exception str() failed: E>")])
        self.assertEqual(ev[-1]["type"], "end")
        code = "print('a\\udcffb')\nraise ValueError(b'x\\xffy'.decode('utf-8', 'surrogateescape'))"
        _, ev = execute(self.d, code, ctx["id"])
        self.assertEqual(texts(ev, "stdout"), "a?b\n")
        err = [e for e in ev if e["type"] == "error"]
        self.assertEqual([(e["name"], e["value"]) for e in err], [("ValueError", "x?y")])
        _, ev = execute(self.d, "kept", ctx["id"])
        self.assertEqual(main_result(ev), "7")  # the same kernel all along

    def test_fork_in_a_cell(self):
        # A child forked by the code (os.fork, multiprocessing's default) does not become a
        # second kernel on the same pipes: its output is the cell's stdout (through fd 1),
        # the cell has one end, and later cells all reach the one kernel (the child that
        # returned from the cell read requests meant for it, and sent a second end).
        ctx = self.create()
        code = ("import os\n"
                "kpid = os.getpid()\n"
                "pid = os.fork()\n"
                "print('child' if pid == 0 else 'parent', flush=True)\n"
                "if pid:\n"
                "    os.waitpid(pid, 0)\n"
                "n = 0")
        _, ev = execute(self.d, code, ctx["id"])
        self.assertEqual(sorted(texts(ev, "stdout").splitlines()), ["child", "parent"])
        self.assertEqual([e["type"] for e in ev].count("end"), 1)
        for i in range(1, 6):
            _, ev = execute(self.d, "n += 1\n(n, os.getpid() == kpid)", ctx["id"])
            self.assertEqual(main_result(ev), f"({i}, True)", ev)

    def test_interrupt_with_a_printing_thread(self):
        # A thread of the user's that prints all the time (a logger, a progress bar) does
        # not take the interrupt meant for the main thread (it could raise it in whichever
        # thread left the output's critical section last: a race this test rarely hits),
        # and the error comes even though the output used the whole budget (it was
        # counted as output and dropped: the client could not tell the cell failed).
        ctx = self.create()
        code = ("import threading, time, sys\n"
                "def chatter():\n"
                "    while True:\n"
                "        print('x' * 200)\n"
                "threading.Thread(target=chatter, daemon=True).start()\n"
                "time.sleep(600)")
        t, out = self.execute_busy(code, ctx["id"])
        time.sleep(0.5)
        self.assertEqual(self.d.req("POST", f"/v1/contexts/{ctx['id']}/interrupt", b"")[0], 204)
        t.join(10)
        self.assertFalse(t.is_alive())
        _, ev = out["r"]
        self.assertEqual([e["name"] for e in ev if e["type"] == "error"], ["KeyboardInterrupt"])
        self.assertFalse(ev[-1]["timed_out"])
        self.assertTrue(ev[-1]["truncated"])

    def test_two_contexts_do_not_share_state(self):
        a, b = self.create(), self.create(id="second-ctx")
        self.assertEqual(b["id"], "second-ctx")
        execute(self.d, "secret = 'a'", a["id"])
        _, ev = execute(self.d, "secret", b["id"])
        self.assertEqual([e["name"] for e in ev if e["type"] == "error"], ["NameError"])
        _, ev = execute(self.d, "secret", a["id"])
        self.assertEqual(main_result(ev), "'a'")
        self.assertEqual(self.d.req("POST", "/v1/contexts", json.dumps({"id": "second-ctx"}))[0], 409)
        st, data, _ = self.d.req("GET", "/v1/contexts")
        ids = [c["id"] for c in json.loads(data)["contexts"]]
        self.assertIn(a["id"], ids)
        self.assertIn("second-ctx", ids)

    def test_restart_clears_state(self):
        ctx = self.create()
        execute(self.d, "kept = 1", ctx["id"])
        self.assertEqual(self.d.req("POST", f"/v1/contexts/{ctx['id']}/restart", b"")[0], 200)
        _, ev = execute(self.d, "kept", ctx["id"])
        self.assertEqual([e["name"] for e in ev if e["type"] == "error"], ["NameError"])
        self.assertEqual(ev[-1]["execution_count"], 1)

    def test_interrupt_stops_a_loop(self):
        ctx = self.create()
        t, out = self.execute_busy("import time\nprint('looping', flush=True)\nwhile True:\n    pass",
                                   ctx["id"])
        time.sleep(0.3)
        # An executing kernel is activity (an idle one is not: test_cwd_and_idle_...).
        self.assertGreaterEqual(json.loads(self.d.req("GET", "/v1/activity")[1])["running_processes"], 1)
        # A second execution meanwhile is refused.
        self.assertEqual(execute(self.d, "1", ctx["id"])[0], 409)
        st, _, _ = self.d.req("POST", f"/v1/contexts/{ctx['id']}/interrupt", b"")
        self.assertEqual(st, 204)
        t.join(10)
        self.assertFalse(t.is_alive())
        _, ev = out["r"]
        self.assertEqual([e["name"] for e in ev if e["type"] == "error"], ["KeyboardInterrupt"])
        self.assertFalse(ev[-1]["timed_out"])
        _, ev = execute(self.d, "'alive'", ctx["id"])
        self.assertEqual(main_result(ev), "'alive'")

    def test_timeout_interrupts_then_restarts(self):
        ctx = self.create()
        execute(self.d, "v = 5", ctx["id"])
        _, ev = execute(self.d, "while True: pass", ctx["id"], timeout=0.5)
        self.assertTrue(ev[-1]["timed_out"])
        self.assertEqual([e["name"] for e in ev if e["type"] == "error"], ["KeyboardInterrupt"])
        _, ev = execute(self.d, "v", ctx["id"])
        self.assertEqual(main_result(ev), "5")  # interrupted, state kept
        code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"
        _, ev = execute(self.d, code, ctx["id"], timeout=0.5)
        self.assertTrue(ev[-1]["timed_out"])
        self.assertEqual([e["name"] for e in ev if e["type"] == "error"], ["TimeoutError"])
        _, ev = execute(self.d, "v", ctx["id"])  # restarted: state gone, context usable
        self.assertEqual([e["name"] for e in ev if e["type"] == "error"], ["NameError"])

    def test_rich_display(self):
        ctx = self.create()
        _, ev = execute(self.d, RICH + "display(Pic())\nPic()", ctx["id"])
        disp = [e for e in ev if e["type"] == "display"]
        res = [e for e in ev if e["type"] == "result"]
        self.assertEqual((len(disp), len(res)), (1, 1))
        self.assertTrue(res[0]["is_main"])
        for e in disp + res:
            png = base64.b64decode(e["data"]["image/png"])
            self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
            self.assertEqual(png[12:16], b"IHDR")
            self.assertEqual(struct.unpack(">II", png[16:24]), (2, 1))
            self.assertEqual(zlib.crc32(png[12:29]), struct.unpack(">I", png[29:33])[0])
            self.assertEqual(e["data"]["text/html"], "<b>pic</b>")
            self.assertEqual(json.loads(e["data"]["application/json"]), {"w": 2})
            self.assertIn("Pic object", e["data"]["text/plain"])

    def test_huge_print_is_cut(self):
        ctx = self.create()
        t0 = time.monotonic()
        _, ev = execute(self.d, "print('x' * (1 << 30))\nprint('after')", ctx["id"])
        self.assertLess(time.monotonic() - t0, 30)
        self.assertIn({"type": "truncated"}, ev)
        self.assertTrue(ev[-1]["truncated"])
        out = texts(ev, "stdout")
        self.assertGreater(len(out), 900 * 1024)
        self.assertLessEqual(len(out), 1 << 20)
        self.assertEqual(set(out), {"x"})
        # Output written to the file descriptors is captured and cut as well.
        _, ev = execute(self.d, "import os\nfor _ in range(64):\n    os.write(1, b'y' * 65536)\n'ok'",
                        ctx["id"])
        self.assertTrue(ev[-1]["truncated"])
        self.assertEqual(main_result(ev), None)  # dropped past the budget as well
        self.assertLessEqual(sum(len(json.dumps(e)) for e in ev), (1 << 20) + 4096)
        _, ev = execute(self.d, "'still here'", ctx["id"])
        self.assertEqual(main_result(ev), "'still here'")
        self.assertFalse(ev[-1]["truncated"])

    def test_limits_and_errors(self):
        d = self.d
        self.assertEqual(d.req("POST", "/v1/contexts", b'{"language":"ruby"}')[0], 400)
        self.assertEqual(d.req("POST", "/v1/contexts", b'{"cwd":"../up"}')[0], 403)
        self.assertEqual(d.req("POST", "/v1/contexts", b'{"id":"bad/id"}')[0], 400)
        self.assertEqual(d.req("POST", "/v1/contexts", b'[1]')[0], 400)
        self.assertEqual(execute(d, "1", "nope")[0], 404)
        self.assertEqual(execute(d, "1", timeout=-1)[0], 400)
        self.assertEqual(d.req("POST", "/v1/code/execute", b'{"code": 5}')[0], 400)
        self.assertEqual(d.req("DELETE", "/v1/contexts/nope")[0], 404)
        st, data, _ = d.req("GET", "/v1/contexts")
        have = len(json.loads(data)["contexts"])
        made = []
        for _ in range(4 - have):
            st, data, _ = d.req("POST", "/v1/contexts", b"")
            self.assertEqual(st, 201)
            made.append(json.loads(data)["id"])
        st, data, _ = d.req("POST", "/v1/contexts", b"")
        self.assertEqual(st, 429, data)
        for i in made:
            self.assertEqual(d.req("DELETE", "/v1/contexts/" + i)[0], 204)
        self.assertEqual(d.req("GET", "/v1/contexts/" + made[0])[0], 404)

    def test_bad_request_leaves_nothing(self):
        # A refused execute makes no default context (before, a bad body was answered 400
        # after the default context and its kernel were started), and a context field
        # that is not an id is a bad request (400), not an unknown context (404).
        d = Daemon("--kernel-driver", DRIVER, "--kernel-python", sys.executable)
        try:
            for body in (b"{}", b'{"code":"1","timeout":-1}', b'{"cod":"1"}'):
                st, data, _ = d.req("POST", "/v1/code/execute", body)
                self.assertEqual(st, 400, data)
            self.assertEqual(json.loads(d.req("GET", "/v1/contexts")[1]), {"contexts": []})
            for ctx in (5, "bad id!", ""):
                st, data = execute(d, "1", ctx)
                self.assertEqual((st, data["code"]), (400, "INVALID_ARGUMENT"), (ctx, data))
            self.assertEqual(execute(d, "1", "nope")[0], 404)
        finally:
            self.assertEqual(d.stop(), 0)

    def test_exec_timeout_zero_is_none(self):
        # --exec-timeout 0 means no timeout, as for processes (before, every execution
        # without a timeout of its own ended at once, "interrupted before it started").
        d = Daemon("--kernel-driver", DRIVER, "--kernel-python", sys.executable, "--exec-timeout", "0")
        try:
            st, ev = execute(d, "import time\ntime.sleep(1.2)\nprint('done')")
            self.assertEqual(st, 200, ev)
            self.assertEqual(texts(ev, "stdout"), "done\n", ev)
            self.assertFalse(ev[-1]["timed_out"], ev)
            st, ev = execute(d, "import time\ntime.sleep(30)", timeout=0.5)
            self.assertTrue(ev[-1]["timed_out"], ev)  # a request's own timeout still holds
        finally:
            self.assertEqual(d.stop(), 0)

    def test_cwd_and_idle_kernels_are_not_activity(self):
        os.makedirs(os.path.join(self.d.root, "work"), exist_ok=True)
        ctx = self.create(cwd="work")
        self.assertEqual(ctx["cwd"], "work")
        _, ev = execute(self.d, "import os; os.getcwd()", ctx["id"])
        self.assertEqual(main_result(ev), repr(os.path.realpath(os.path.join(self.d.root, "work"))))
        # a module written into the cwd imports, as in IPython
        with open(os.path.join(self.d.root, "work", "agentmod.py"), "w") as f:
            f.write("VALUE = 'here'\n")
        _, ev = execute(self.d, "import agentmod\nagentmod.VALUE", ctx["id"])
        self.assertEqual(main_result(ev), "'here'", ev)
        _, data, _ = self.d.req("GET", "/v1/activity")
        self.assertEqual(json.loads(data)["running_processes"], 0)

    def test_cli_run_code(self):
        cli = os.path.join(os.path.dirname(os.path.abspath(BIN)), "kubectl-sandbox")
        if not os.access(cli, os.X_OK):
            self.skipTest("no kubectl-sandbox next to sandboxd")
        ctx = self.create()
        base = [cli, "--sandboxd-url", f"http://127.0.0.1:{self.d.port}", "run-code", "sb",
                "--code-context", ctx["id"]]

        def run(*args, stdin=None):
            return subprocess.run(base + list(args), input=stdin, capture_output=True, text=True,
                                  timeout=60, check=False)

        r = run("-c", "n = 6\nprint('out')")
        self.assertEqual((r.returncode, r.stdout), (0, "out\n"), r.stderr)
        r = run("-", stdin="n * 7\n")
        self.assertEqual((r.returncode, r.stdout), (0, "42\n"), r.stderr)
        r = run("-c", "raise KeyError('k')")
        self.assertEqual(r.returncode, 1)
        self.assertIn("KeyError: 'k'", r.stderr)
        self.assertIn("Traceback", r.stderr)
        r = run("--timeout", "300ms", "-c", "while True: pass")
        self.assertEqual(r.returncode, 124)
        self.assertIn("KeyboardInterrupt", r.stderr)
        r = run("--json", "-c", "n")
        self.assertEqual(r.returncode, 0)
        types = [json.loads(line)["type"] for line in r.stdout.splitlines()]
        self.assertEqual(types, ["start", "result", "end"])
        r = subprocess.run(base[:4] + ["sb", "--code-context", "missing", "-c", "1"],
                           capture_output=True, text=True, timeout=60, check=False)
        self.assertEqual(r.returncode, 5)
        self.assertIn("no such context", r.stderr)

    def test_embedded_driver(self):
        # Without the driver file (an image that has python3 only) sandboxd sends the
        # copy compiled into it; the copy is the file's current content.
        embed = os.path.join(os.path.dirname(DRIVER), "embed.py")
        r = subprocess.run([sys.executable, embed, "--check"], capture_output=True, text=True, check=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        d = Daemon("--kernel-driver", "/nonexistent/kernel.py", "--kernel-python", sys.executable)
        try:
            # a json.py in the kernel's cwd does not replace the driver's json (the kernel
            # died starting), while the user's code imports from the cwd
            with open(os.path.join(d.root, "json.py"), "w") as f:
                f.write("raise ImportError('the user json.py')\n")
            with open(os.path.join(d.root, "mymod.py"), "w") as f:
                f.write("VALUE = 42\n")
            _, ev = execute(d, "import mymod\nmymod.VALUE")
            self.assertEqual(main_result(ev), "42", ev)
            execute(d, "x = 20")
            _, ev = execute(d, "def f():\n    return x / 0\nf()")
            err = [e for e in ev if e["type"] == "error"][0]
            self.assertEqual(err["name"], "ZeroDivisionError")
            self.assertNotIn("agent-sandbox-kernel", err["traceback"])
            self.assertIn("return x / 0", err["traceback"])
            _, ev = execute(d, "import subprocess\nsubprocess.run(['echo', 'child'])\nx + 1")
            self.assertEqual((texts(ev, "stdout"), main_result(ev)), ("child\n", "21"))
        finally:
            self.assertEqual(d.stop(), 0)

    def test_keepalive_during_silence(self):
        # A keepalive goes out after each second of silence: never two within a second, so
        # no more of them than the seconds the call took, and at least two in 3.6 s of
        # silence (unless the daemon is held up for well over a second); none in an
        # execution shorter than a second.
        d = Daemon("--kernel-driver", DRIVER, "--kernel-python", sys.executable, "--code-keepalive", "1")
        try:
            t0 = time.monotonic()
            _, ev = execute(d, "import time\ntime.sleep(3.6)\n'done'")
            took = time.monotonic() - t0
            kinds = [e["type"] for e in ev]
            self.assertEqual(kinds[0], "start")
            self.assertEqual(kinds[-2:], ["result", "end"])
            self.assertGreaterEqual(kinds.count("keepalive"), 2)
            self.assertLessEqual(kinds.count("keepalive"), int(took), kinds)
            t0 = time.monotonic()
            _, ev = execute(d, "'quick'")
            took = time.monotonic() - t0
            self.assertLessEqual([e["type"] for e in ev].count("keepalive"), int(took), ev)
        finally:
            self.assertEqual(d.stop(), 0)

    def test_kernel_death(self):
        ctx = self.create()
        execute(self.d, "lost = 1", ctx["id"])
        _, ev = execute(self.d, "import os\nprint('bye', flush=True)\nos._exit(3)", ctx["id"])
        self.assertEqual(texts(ev, "stdout"), "bye\n")
        err = [e for e in ev if e["type"] == "error"]
        self.assertEqual(err[0]["name"], "KernelDied")
        self.assertIn("exit code 3", err[0]["value"])
        self.assertEqual(json.loads(self.d.req("GET", "/v1/contexts/" + ctx["id"])[1])["state"], "dead")
        _, ev = execute(self.d, "lost", ctx["id"])  # a fresh kernel
        self.assertEqual([e["name"] for e in ev if e["type"] == "error"], ["NameError"])

    def test_client_gone_interrupts(self):
        ctx = self.create()
        c = http.client.HTTPConnection("127.0.0.1", self.d.port, timeout=10)
        c.request("POST", f"/v1/contexts/{ctx['id']}/execute",
                  json.dumps({"code": "import time\nwhile True: time.sleep(0.01)"}))
        r = c.getresponse()
        self.assertEqual(json.loads(r.readline())["type"], "start")
        c.close()
        self.assertEqual(self.wait_state(ctx["id"], "idle"), "idle")


    def test_interrupt_before_the_driver_read_the_request(self):
        """An interrupt that comes before the driver has read the request (here the kernel
        is stopped with SIGSTOP meanwhile, so it reads the request after the interrupt)
        still stops the code: sandboxd holds the SIGINT until the driver says "started".
        Before, the SIGINT met the driver between requests, was ignored, and the loop ran
        to its timeout (5 s here); a client that sent its request and went away at once
        left the code running the same way."""
        import signal
        ctx = self.create()
        self.assertEqual(self.wait_state(ctx["id"], "idle"), "idle")
        path = f"/v1/contexts/{ctx['id']}"
        pid = json.loads(self.d.req("GET", path)[1])["pid"]
        c = http.client.HTTPConnection("127.0.0.1", self.d.port, timeout=30)
        os.kill(pid, signal.SIGSTOP)
        try:
            start = time.monotonic()
            c.request("POST", path + "/execute", json.dumps({"code": "while True: pass", "timeout": 5}))
            r = c.getresponse()
            self.assertEqual(json.loads(r.readline())["type"], "start")
            st, data, _ = self.d.req("POST", path + "/interrupt")
            self.assertEqual(st, 204, data)
        finally:
            os.kill(pid, signal.SIGCONT)
        try:
            events = [json.loads(line) for line in r.read().splitlines() if line]
            took = time.monotonic() - start
        finally:
            c.close()
        self.assertEqual([e["name"] for e in events if e["type"] == "error"], ["KeyboardInterrupt"], events)
        self.assertFalse(any(e.get("name") == "TimeoutError" for e in events))
        self.assertLess(took, 3, "the interrupt waited for the timeout")
        _, ev = execute(self.d, "1 + 1", ctx["id"])  # the context serves on
        self.assertEqual(main_result(ev), "2")


class DriverTest(unittest.TestCase):
    """The driver's pieces in-process: representations and the output budget."""

    @classmethod
    def setUpClass(cls):
        import importlib.util
        spec = importlib.util.spec_from_file_location("sbd_kernel_driver", DRIVER)
        cls.k = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cls.k)

    def test_mime_bundle(self):
        k = self.k

        class Both:
            def _repr_mimebundle_(self, include=None, exclude=None):
                return {"text/html": "<i>b</i>", "image/png": b"\x89PNG", "application/json": [1]}, {}

            def _repr_html_(self):
                return "not used"

        b = k.mime_bundle(Both())
        self.assertEqual(b["text/html"], "<i>b</i>")
        self.assertEqual(base64.b64decode(b["image/png"]), b"\x89PNG")
        self.assertEqual(json.loads(b["application/json"]), [1])
        self.assertIn("Both object", b["text/plain"])
        self.assertEqual(k.mime_bundle(3), {"text/plain": "3"})
        self.assertEqual(k.mime_bundle(int), {"text/plain": "<class 'int'>"})

    def test_open_figures_are_sent_and_closed(self):
        # A stand-in for matplotlib (not installed here): the driver finds pyplot in
        # sys.modules after the cell, sends each open figure as image/png, closes them.
        import types
        k = self.k
        png = RICH_PNG

        class Figure:
            def savefig(self, out, format=None, bbox_inches=None):
                out.write(png)

        figs = {1: Figure()}
        figure_mod = types.ModuleType("matplotlib.figure")
        figure_mod.Figure = Figure
        pyplot = types.ModuleType("matplotlib.pyplot")
        pyplot.get_fignums = lambda: sorted(figs)
        pyplot.figure = lambda num: figs[num]
        pyplot.close = lambda what: figs.clear()
        package = types.ModuleType("matplotlib")
        package.pyplot, package.figure = pyplot, figure_mod
        names = ("matplotlib", "matplotlib.figure", "matplotlib.pyplot")
        saved = {n: sys.modules.get(n) for n in names}
        sys.modules.update(dict(zip(names, (package, figure_mod, pyplot))))
        r, w = os.pipe()
        try:
            kern = k.Kernel(k.Channel(w), k.Interrupts())
            kern.execute("import matplotlib.pyplot as plt\nplt.get_fignums()", 1 << 20)
            os.close(w)
            w = -1
            events = [json.loads(x) for x in os.read(r, 1 << 20).splitlines()]
            fig_bundle = k.mime_bundle(Figure())
        finally:
            for n, m in saved.items():
                if m is None:
                    sys.modules.pop(n, None)
                else:
                    sys.modules[n] = m
            os.close(r)
            if w >= 0:
                os.close(w)
        self.assertEqual([e["type"] for e in events], ["result", "display", "end"])
        self.assertEqual(events[0]["data"]["text/plain"], "[1]")
        self.assertEqual(base64.b64decode(events[1]["data"]["image/png"]), png)
        self.assertEqual(figs, {})
        # A Figure as a value is shown as image/png too.
        self.assertEqual(base64.b64decode(fig_bundle["image/png"]), png)

    def test_channel_budget(self):
        k = self.k
        r, w = os.pipe()
        try:
            ch = k.Channel(w)
            ch.reset(100)
            ch.emit({"type": "stdout", "text": "a" * 10})
            ch.emit({"type": "stdout", "text": "b" * 200})
            ch.emit({"type": "stdout", "text": "c"})
            ch.emit({"type": "end", "execution_count": 1, "truncated": ch.truncated}, counted=False)
            os.close(w)
            w = -1
            lines = [json.loads(x) for x in os.read(r, 1 << 16).splitlines()]
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)
        self.assertEqual([x["type"] for x in lines], ["stdout", "truncated", "end"])
        self.assertTrue(lines[-1]["truncated"])


if __name__ == "__main__":
    unittest.main()
