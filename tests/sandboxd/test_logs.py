#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""sandboxd --log-format=json against the real binary: every line on stderr parses as
one JSON object with ts, level, logger and msg, even when logged values carry quotes,
newlines and control bytes (here: a root directory named with them).

  SANDBOXD_BIN=build/release/sandboxd python3 -m unittest tests/sandboxd/test_logs.py
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

BIN = os.environ.get("SANDBOXD_BIN", "build/sandboxd/sandboxd")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipUnless(os.path.exists(BIN), "needs SANDBOXD_BIN")
class JsonLogs(unittest.TestCase):
    def run_daemon(self, fmt, root):
        port = free_port()
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=1")
        p = subprocess.Popen([BIN, "--host", "127.0.0.1", "--port", str(port), "--legacy-port",
                              "-1", "--grpc-port", "0", "--root", root, "--log-level", "debug",
                              "--log-format", fmt], env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            end = time.monotonic() + 10
            while time.monotonic() < end:
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                except OSError:
                    time.sleep(0.02)
            for path in ("/v1/health", "/v1/files/%22quoted%22%0Aname", "/nope%01"):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5).read()
                except OSError:
                    pass
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=20)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        self.assertEqual(p.returncode, 0, err[-2000:])
        return err.decode("utf-8")

    def test_every_line_is_json(self):
        d = tempfile.mkdtemp(prefix="sbd-logs-")
        try:
            root = os.path.join(d, 'we"ird\nroot\x1b[31m \\ dir')
            lines = self.run_daemon("json", root).splitlines()
        finally:
            shutil.rmtree(d, ignore_errors=True)
        self.assertGreaterEqual(len(lines), 2)  # listening ... shutting down
        msgs = []
        for line in lines:
            obj = json.loads(line)
            self.assertTrue({"ts", "level", "logger", "msg"} <= obj.keys(), line)
            self.assertEqual(obj["logger"], "sandboxd")
            self.assertRegex(obj["ts"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$")
            msgs.append(obj["msg"])
        self.assertIn("listening", msgs)
        self.assertIn("shutting down", msgs)

    def test_text_is_the_default_format(self):
        d = tempfile.mkdtemp(prefix="sbd-logs-")
        try:
            err = self.run_daemon("text", os.path.join(d, "root"))
        finally:
            shutil.rmtree(d, ignore_errors=True)
        self.assertIn('msg="listening"', err)
        self.assertFalse(err.lstrip().startswith("{"))


if __name__ == "__main__":
    unittest.main()
