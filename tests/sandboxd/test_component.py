#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Component tests of the real sandboxd binary on 127.0.0.1 (standard library only):
flags (durations in Go syntax or seconds), token file auth, slow-client header timeout, upload and body limits, a process
stream started by a chunked request body, SIGTERM killing every process group, legacy
defaults from SANDBOX_BASE_DIR, metadata hygiene, and an upstream-SDK-style session
(write/read/list/exists/execute) against the legacy port.

  SANDBOXD_BIN=build/sandboxd/sandboxd python3 -m unittest tests/sandboxd/test_component.py
"""
import base64
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

BIN = os.environ.get("SANDBOXD_BIN", "build/sandboxd/sandboxd")
DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "sandboxd",
                      "driver", "kernel.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pending(s):
    """Everything the peer already sent on socket s, without waiting (b"" if nothing)."""
    s.setblocking(False)
    got = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    except (BlockingIOError, ConnectionResetError):
        pass
    return got


def answered_by_then(d, s, timeout_seconds=None):
    """Runs `sleep 120` on another connection until its timeout ends it (timeout_seconds,
    or without it the daemon's --exec-timeout); returns (the run's exit description, what
    socket s had received by then). A deadline on sandboxd's one loop that falls before the
    run's has fired by then, however loaded the machine: due timers run in order, and the
    run's answer needs its timer, the kill and the exit to be seen after that. The order is
    the check, not a clock."""
    body = {"command": ["sleep", "120"]}
    if timeout_seconds is not None:
        body["timeout_seconds"] = timeout_seconds
    st, data, _ = d.req("POST", "/v1/processes/run", json.dumps(body), timeout=90)
    assert st == 200, (st, data[:300])
    return json.loads(data), pending(s)


def raw_exchange(port, data, timeout=3):
    """Sends data (pipelined requests) on one connection and returns all it got until the
    server closed it, or until timeout passed without a byte."""
    c = socket.create_connection(("127.0.0.1", port), timeout)
    c.sendall(data)
    got = b""
    try:
        while True:
            chunk = c.recv(65536)
            if not chunk:
                break
            got += chunk
    except socket.timeout:
        pass
    c.close()
    return got


class Daemon:
    def __init__(self, *args, env=None):
        self.dir = tempfile.mkdtemp(prefix="sbd-comp-")
        self.root = os.path.join(self.dir, "root")
        self.port, self.lport = free_port(), free_port()
        e = dict(os.environ)
        e.update(env or {})
        e.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1")
        self.p = subprocess.Popen(
            [BIN, "--host", "127.0.0.1", "--port", str(self.port), "--legacy-port",
             str(self.lport), "--grpc-port", "0", "--root", self.root, "--log-level", "warn", *args], env=e)
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                socket.create_connection(("127.0.0.1", self.lport), 0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("sandboxd did not start")

    def req(self, method, path, body=None, headers=None, port=None, timeout=10):
        c = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=timeout)
        c.request(method, path, body, headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data, r

    def stop(self, sig=signal.SIGTERM):
        if self.p.poll() is None:
            self.p.send_signal(sig)
        rc = self.p.wait(timeout=20)
        shutil.rmtree(self.dir, ignore_errors=True)
        return rc


class ComponentTest(unittest.TestCase):
    def test_empty_file_write(self):
        # An empty body with Content-Length: 0 completes (it once hung) and leaves no
        # temporary file behind.
        d = Daemon()
        try:
            st, _, _ = d.req("PUT", "/v1/files/empty.txt", b"", {"Content-Length": "0"}, timeout=5)
            self.assertIn(st, (200, 201, 204))
            st, data, _ = d.req("GET", "/v1/files/empty.txt")
            self.assertEqual((st, data), (200, b""))
            self.assertEqual(sorted(os.listdir(d.root)), ["empty.txt"])
        finally:
            d.stop()

    def test_start_errors_mapped(self):
        """A start that execve refuses for the request's own reason is the client's error,
        not sandboxd's: an argument over 128 KiB (a script sent inline) is 413
        INVALID_ARGUMENT with a hint, a file that is no executable 400 (both were 500
        INTERNAL)."""
        d = Daemon()
        try:
            st, data, _ = d.req("POST", "/v1/processes/run",
                                json.dumps({"command": ["true", "x" * 200000]}))
            self.assertEqual(st, 413, data[:300])
            err = json.loads(data)
            self.assertEqual(err.get("code"), "INVALID_ARGUMENT", err)
            self.assertIn("stdin", err.get("message", ""))
            with open(os.path.join(d.root, "notexec"), "wb") as f:
                f.write(b"\x00\x01\x02 not a program")
            os.chmod(os.path.join(d.root, "notexec"), 0o755)
            st, data, _ = d.req("POST", "/v1/processes/run",
                                json.dumps({"command": ["./notexec"], "cwd": "."}))
            self.assertEqual(st, 400, data[:300])
        finally:
            d.stop()

    def test_stdin_without_input_is_dev_null(self):
        """A run without stdin (and a background process without stdin nor stdin_open,
        and the legacy /execute) gets /dev/null as its stdin, as upstream's Execute: an
        empty pipe made tools that read a piped stdin (rg) read it instead of their
        usual input. A run given stdin, even empty, still reads it from a pipe."""
        probe = "readlink /proc/self/fd/0; [ -p /dev/stdin ] && echo pipe || echo notpipe"
        d = Daemon()
        try:
            st, data, _ = d.req("POST", "/v1/processes/run", json.dumps({"command": probe}))
            self.assertEqual(st, 200, data)
            self.assertEqual(json.loads(data)["stdout"], "/dev/null\nnotpipe\n")
            for given in ({"stdin": ""}, {"stdin": "x"}, {"stdin_b64": ""}):
                st, data, _ = d.req("POST", "/v1/processes/run",
                                    json.dumps({"command": "[ -p /dev/stdin ] && echo pipe", **given}))
                self.assertEqual((st, json.loads(data)["stdout"]), (200, "pipe\n"), given)
            st, data, _ = d.req("POST", "/v1/processes", json.dumps(
                {"command": probe, "background": True}))
            self.assertEqual(st, 201, data)
            pid = json.loads(data)["id"]
            st, data, _ = d.req("POST", f"/v1/processes/{pid}/wait?timeout=10")
            st, data, _ = d.req("GET", f"/v1/processes/{pid}/output?follow=false")
            out = b"".join(base64.b64decode(e["data"]) for e in map(json.loads, data.splitlines())
                           if e["type"] == "stdout")
            self.assertEqual(out, b"/dev/null\nnotpipe\n")
            st, data, _ = d.req("POST", "/execute", json.dumps({"command": "readlink /proc/self/fd/0"}),
                                {"Content-Type": "application/json"}, port=d.lport)
            self.assertEqual((st, json.loads(data)["stdout"]), (200, "/dev/null\n"))
        finally:
            d.stop()

    def test_large_download_sized_and_whole_to_half_closed_client(self):
        # A download larger than one read (streamed as the connection drains) carries its
        # Content-Length, and a client that half-closes right after its request (or a
        # proxy passing such a client's EOF on) still gets all of it: a chunked,
        # open-ended stream would be cut at the EOF.
        d = Daemon()
        try:
            data = os.urandom(3 << 20)
            st, _, _ = d.req("PUT", "/v1/files/big.bin", data)
            self.assertLess(st, 300)
            st, got, r = d.req("GET", "/v1/files/big.bin")
            self.assertEqual((st, r.getheader("Content-Length"), r.getheader("Transfer-Encoding")),
                             (200, str(len(data)), None))
            self.assertEqual(got, data)
            for _ in range(5):
                s = socket.create_connection(("127.0.0.1", d.port), 10)
                s.sendall(b"GET /v1/files/big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
                s.shutdown(socket.SHUT_WR)
                raw = b""
                while chunk := s.recv(1 << 16):
                    raw += chunk
                s.close()
                head, _, body = raw.partition(b"\r\n\r\n")
                self.assertIn(f"content-length: {len(data)}".encode(), head.lower())
                self.assertEqual(len(body), len(data))
                self.assertEqual(body, data)
        finally:
            d.stop()

    def test_stream_with_chunked_request_body(self):
        # The framing clients use behind the API server's pod proxy: the Go proxy loses
        # a streamed response when its post-body read of a Content-Length request races
        # the response head, but not with a chunked request body (docs/sandboxd.md). A
        # chunked spawn body streams to the end; stdin arrives on a second keep-alive
        # connection; the stream's connection is reused afterwards.
        d = Daemon()
        a = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
        b = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
        try:
            for _ in range(3):
                a.request("POST", "/v1/processes", iter([b'{"command":', b' ["cat"]}']),
                          {"Content-Type": "application/json"}, encode_chunked=True)
                r = a.getresponse()
                self.assertEqual((r.status, r.getheader("Transfer-Encoding")), (200, "chunked"))
                start = json.loads(r.readline())
                self.assertEqual(start["type"], "start")
                for path, body in ((f"/v1/processes/{start['id']}/stdin", b"in\n"),
                                   (f"/v1/processes/{start['id']}/stdin/close", b"")):
                    b.request("POST", path, body)
                    rb = b.getresponse()
                    self.assertEqual((rb.status, rb.read()), (204, b""))
                events = [json.loads(line) for line in r.read().splitlines() if line]
                self.assertEqual([e["type"] for e in events], ["stdout", "exit"])
                self.assertEqual(events[0]["data"], "aW4K")  # base64 of "in\n"
                self.assertEqual(events[1]["exit_code"], 0)
            a.request("GET", "/v1/processes")
            r = a.getresponse()
            self.assertEqual((r.status, json.loads(r.read())["processes"]), (200, []))
        finally:
            a.close()
            b.close()
            d.stop()

    def test_quiet_stream_client_gone_kills_process(self):
        # A client that goes away while its process prints nothing: sandboxd sees the
        # EOF (no write would ever fail) and kills the process group.
        d = Daemon()
        try:
            c = socket.create_connection(("127.0.0.1", d.port), 5)
            body = b'{"command": ["sleep", "30"]}'
            c.sendall(b"POST /v1/processes HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            got = b""
            while b'"start"' not in got:
                chunk = c.recv(4096)
                self.assertTrue(chunk, "stream ended before its start event")
                got += chunk
            st, data, _ = d.req("GET", "/v1/processes")
            self.assertEqual(len(json.loads(data)["processes"]), 1)
            c.close()
            end = time.monotonic() + 30  # a bound only a hang reaches: it takes milliseconds
            while time.monotonic() < end:
                st, data, _ = d.req("GET", "/v1/processes")
                if not json.loads(data)["processes"]:
                    break
                time.sleep(0.05)
            self.assertEqual(json.loads(data)["processes"], [])
        finally:
            d.stop()

    def test_process_keepalives(self):
        # Proxies cut connections idle for a minute (the router, load balancers). A run
        # whose answer has not come after --process-keepalive starts its answer (200,
        # chunked) and sends a space each period before the JSON result; a process
        # stream sends {"type":"keepalive"} lines. The order, not a clock, is the check:
        # the keepalive timer (0.2 s) is due on sandboxd's loop before the 1 s sleep can
        # end. The legacy /execute does the same. A run that ends before the first period
        # is answered as before, with Content-Length and no space (checked with the
        # default 15 s, which no `true` takes).
        d = Daemon()
        try:
            st, data, r = d.req("POST", "/v1/processes/run", json.dumps({"command": ["true"]}))
            self.assertEqual(st, 200)
            self.assertIsNotNone(r.getheader("Content-Length"))
            self.assertEqual(data[:1], b"{")
        finally:
            self.assertEqual(d.stop(), 0)
        d = Daemon("--process-keepalive", "0.2")
        try:
            body = {"command": ["sh", "-c", "sleep 1; echo done"]}
            st, data, r = d.req("POST", "/v1/processes/run", json.dumps(body))
            self.assertEqual((st, r.getheader("Transfer-Encoding")), (200, "chunked"))
            self.assertEqual(data[:1], b" ")
            res = json.loads(data)
            self.assertEqual((res["exit_code"], res["stdout"]), (0, "done\n"))
            st, data, r = d.req("POST", "/v1/processes", json.dumps(body))
            self.assertEqual(st, 200)
            types = [json.loads(line)["type"] for line in data.splitlines() if line]
            self.assertEqual([t for t in types if t != "keepalive"], ["start", "stdout", "exit"])
            self.assertEqual(types[1], "keepalive")  # during the silent second
            # the legacy /execute, whose answer also comes only at the end
            st, data, r = d.req("POST", "/execute",
                                json.dumps({"command": "sh -c 'sleep 1; echo done'"}),
                                port=d.lport)
            self.assertEqual((st, r.getheader("Transfer-Encoding")), (200, "chunked"))
            self.assertEqual(data[:1], b" ")
            self.assertEqual(json.loads(data), {"stdout": "done\n", "stderr": "", "exit_code": 0})
        finally:
            self.assertEqual(d.stop(), 0)

    def test_exit_reaches_a_slow_reader(self):
        # The leader exits while a descendant it left writes to the stream's stdout
        # faster than the client reads. The 2 s drain after the exit used to start over
        # at each resume of the paused output, so the exit never came; now the output
        # the pipes held when the drain ran out is still read, and the exit follows (in
        # about 7 s at this pace: the queued lines go first). The bound is the reader's
        # patience, not a measurement.
        d = Daemon()
        s = socket.socket()
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
            s.connect(("127.0.0.1", d.port))
            body = json.dumps({"command": ["sh", "-c", "yes & sleep 0.2; exit 0"]})
            s.sendall(f"POST /v1/processes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
            s.settimeout(10)
            end, tail = time.monotonic() + 60, b""
            while b'"type":"exit"' not in tail and time.monotonic() < end:
                chunk = s.recv(32768)
                self.assertTrue(chunk, "the stream ended without the exit event")
                tail = (tail + chunk)[-4096:]
                time.sleep(0.01)
            self.assertIn(b'"type":"exit"', tail)
            self.assertIn(b'"exit_code":0', tail)
        finally:
            s.close()
            self.assertEqual(d.stop(), 0)

    def test_background_keepalives(self):
        # A background process's output follow and a long wait on it get keepalives too:
        # the follow a {"type":"keepalive"} line during the silent second, the wait's
        # answer starts (200, chunked) with spaces before its JSON. As above, the order is
        # the check, not a clock. A follow without follow=true, and a wait of a process
        # that exited, are answered as before.
        d = Daemon("--process-keepalive", "0.2")
        try:
            body = {"command": ["sh", "-c", "sleep 1; echo done"], "background": True}
            st, data, _ = d.req("POST", "/v1/processes", json.dumps(body))
            self.assertEqual(st, 201, data)
            pid = json.loads(data)["id"]
            st, data, r = d.req("GET", f"/v1/processes/{pid}/output?follow=true")
            self.assertEqual(st, 200)
            types = [json.loads(line)["type"] for line in data.splitlines() if line]
            self.assertEqual([t for t in types if t != "keepalive"], ["stdout", "exit"])
            self.assertEqual(types[0], "keepalive")  # during the silent second
            self.assertEqual(json.loads(data.splitlines()[0])["offset"], 0)  # no output yet
            st, data, r = d.req("GET", f"/v1/processes/{pid}/output?follow=false")
            types = [json.loads(line)["type"] for line in data.splitlines() if line]
            self.assertEqual(types, ["stdout", "exit"])

            st, data, _ = d.req("POST", "/v1/processes", json.dumps(body))
            pid = json.loads(data)["id"]
            st, data, r = d.req("POST", f"/v1/processes/{pid}/wait")
            self.assertEqual((st, r.getheader("Transfer-Encoding")), (200, "chunked"))
            self.assertEqual(data[:1], b" ")
            res = json.loads(data)
            self.assertEqual((res["state"], res["exit_code"]), ("exited", 0))
            st, data, r = d.req("GET", f"/v1/processes/{pid}/wait?timeout=30")
            self.assertEqual(st, 200)
            self.assertIsNotNone(r.getheader("Content-Length"))
            self.assertEqual(json.loads(data)["exit_code"], 0)

            # a wait that times out after the keepalives started answers the running state
            body["command"] = ["sleep", "5"]
            st, data, _ = d.req("POST", "/v1/processes", json.dumps(body))
            pid = json.loads(data)["id"]
            st, data, r = d.req("GET", f"/v1/processes/{pid}/wait?timeout=0.7")
            self.assertEqual((st, data[:1]), (200, b" "))
            self.assertEqual(json.loads(data)["state"], "running")
            # a follower that goes away while it is kept alive is let go
            s = socket.create_connection(("127.0.0.1", d.port))
            s.sendall(f"GET /v1/processes/{pid}/output HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            s.settimeout(10)
            got = b""
            while b"keepalive" not in got:
                chunk = s.recv(4096)
                self.assertTrue(chunk, got)
                got += chunk
            s.close()
            st, _, _ = d.req("DELETE", f"/v1/processes/{pid}")
            self.assertIn(st, (200, 204))
        finally:
            self.assertEqual(d.stop(), 0)

    def test_token_file_and_metadata(self):
        tf = tempfile.NamedTemporaryFile("w", delete=False)
        tf.write("tok-123\n")
        tf.close()
        d = Daemon("--token-file", tf.name,
                   env={"SANDBOX_REGION": "eu", "SANDBOX_AUTH_HEADER": "x", "SANDBOX_CERT": "y"})
        try:
            st, body, _ = d.req("GET", "/v1/metadata")
            self.assertEqual(st, 401)
            self.assertEqual(json.loads(body)["code"], "UNAUTHENTICATED")
            st, body, _ = d.req("GET", "/v1/metadata", headers={"Authorization": "Bearer tok-123"})
            self.assertEqual(st, 200)
            self.assertEqual(json.loads(body), {"env": {"SANDBOX_REGION": "eu"}})
            st, _, _ = d.req("GET", "/v1/health")
            self.assertEqual(st, 200)
            st, _, _ = d.req("GET", "/", port=d.lport)
            self.assertEqual(st, 200)
            st, _, _ = d.req("POST", "/execute", '{"command":"true"}', port=d.lport)
            self.assertEqual(st, 401)
        finally:
            self.assertEqual(d.stop(), 0)
            os.unlink(tf.name)

    def test_slow_client_and_limits(self):
        d = Daemon("--header-timeout", "1", "--max-upload", "1000", "--max-body", "2000")
        try:
            s = socket.create_connection(("127.0.0.1", d.port))
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")  # never finished
            # The 1 s header timeout answers it before a 3 s run started after it ends (the
            # default, 10 s, would not).
            done, data = answered_by_then(d, s, timeout_seconds=3)
            self.assertTrue(done["timed_out"], done)
            self.assertIn(b" 408 ", data.split(b"\r\n")[0], data[:200])
            s.close()
            st, body, _ = d.req("PUT", "/v1/files/big", b"x" * 5000)
            self.assertEqual(st, 413)
            st, _, _ = d.req("PUT", "/v1/files/ok", b"x" * 1000)
            self.assertEqual(st, 204)
            st, _, _ = d.req("POST", "/v1/processes/run", json.dumps(
                {"command": ["cat"], "stdin": "y" * 5000}))
            self.assertEqual(st, 413)
            st, body, _ = d.req("GET", "/v1/files/")
            self.assertNotIn(b"sandboxd-tmp", body)
        finally:
            self.assertEqual(d.stop(), 0)

    def test_upload_over_limit_refused_at_head(self):
        # A PUT whose Content-Length is over --max-upload is answered 413 at its head: no
        # 100 Continue, no temporary file, the body unread and the connection closed.
        # Before, it got 100 Continue and a temporary file, and 413 only once 1000 bytes
        # had come.
        d = Daemon("--max-upload", "1000")
        try:
            c = socket.create_connection(("127.0.0.1", d.port), 3)
            c.sendall(b"PUT /v1/files/big HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n"
                      b"Expect: 100-continue\r\n\r\n")
            got = b""
            try:
                while True:
                    chunk = c.recv(65536)
                    if not chunk:
                        break  # closed after the answer
                    got += chunk
            except socket.timeout:
                pass
            names = os.listdir(d.root)  # while the request's connection is still open
            c.close()
            head, _, body = got.partition(b"\r\n\r\n")
            self.assertTrue(head.startswith(b"HTTP/1.1 413 "), got[:200])
            self.assertEqual(json.loads(body)["code"], "INVALID_ARGUMENT")
            self.assertEqual(names, [])
            # A chunked body keeps the counted limit, and so does a multipart one (its
            # length counts the framing: a 1000-byte file in it is within the limit).
            got = raw_exchange(d.port, b"PUT /v1/files/big HTTP/1.1\r\nHost: t\r\n"
                               b"Transfer-Encoding: chunked\r\n\r\n5dc\r\n" + b"x" * 1500 +
                               b"\r\n0\r\n\r\n")
            self.assertTrue(got.startswith(b"HTTP/1.1 413 "), got[:200])
            form = (b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\n" +
                    b"y" * 1000 + b"\r\n--b--\r\n")
            st, _, _ = d.req("PUT", "/v1/files/form", form,
                             {"Content-Type": "multipart/form-data; boundary=b"})
            self.assertEqual(st, 204)
            self.assertEqual(os.path.getsize(os.path.join(d.root, "form")), 1000)
            self.assertEqual(sorted(os.listdir(d.root)), ["form"])
        finally:
            self.assertEqual(d.stop(), 0)

    def test_duration_flags(self):
        # The shared grammar (src/common/duration.h): Go syntax or bare seconds, each value
        # seen in what it sets, by order rather than by a clock: --exec-timeout 2s ends a
        # run of `sleep 120` (not the default 300 s), and by then the 300ms --header-timeout
        # has answered an unfinished request head with a 408 (not the default 10 s); the
        # 0.5 s --code-keepalive sends keepalives during a 1.6 s silence (the default 15 s
        # would send none). --shutdown-timeout=1m30s is accepted and the stop is clean.
        d = Daemon("--header-timeout", "300ms", "--shutdown-timeout=1m30s",
                   "--exec-timeout", "2s", "--code-keepalive", "0.5",
                   "--kernel-driver", DRIVER, "--kernel-python", sys.executable)
        try:
            s = socket.create_connection(("127.0.0.1", d.port))
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")  # never finished
            done, data = answered_by_then(d, s)
            self.assertTrue(done["timed_out"], done)
            self.assertEqual(done["signal"], signal.SIGKILL, done)
            self.assertIn(b" 408 ", data.split(b"\r\n")[0], data[:200])
            s.close()
            c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
            c.request("POST", "/v1/code/execute",
                      json.dumps({"code": "import time\ntime.sleep(1.6)\n'done'"}),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            events = [json.loads(line) for line in r.read().splitlines() if line]
            c.close()
            kinds = [e["type"] for e in events]
            self.assertEqual((r.status, kinds[0], kinds[-2:]), (200, "start", ["result", "end"]),
                             events)
            self.assertGreaterEqual(kinds.count("keepalive"), 1, kinds)
        finally:
            self.assertEqual(d.stop(), 0)
        root = tempfile.mkdtemp(prefix="sbd-flags-")
        try:
            for args, why in ((["--idle-timeout", "1m30"], b"not a duration: 1m30"),
                              (["--body-timeout=-1s"], b"not a duration: -1s"),
                              (["--exec-timeout", "1.5"], b"takes whole seconds: 1.5"),
                              (["--code-keepalive", "0"], b"usage:"),
                              (["--process-keepalive", "0"], b"usage:")):
                r = subprocess.run([BIN, "--root", root, "--port", "0", *args],
                                   check=False, capture_output=True, timeout=10)
                self.assertNotEqual(r.returncode, 0, args)
                self.assertIn(why, r.stderr, args)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def test_orphans_reaped(self):
        # A command that leaves a background child behind: the child is reparented to
        # sandboxd (the child subreaper, as it is PID 1 in its container) and, once it
        # exits, reaped rather than left a zombie. The child lives until this test kills
        # it, so nothing depends on how soon the request returns.
        d = Daemon()
        orphan = None
        try:
            pidfile = os.path.join(d.dir, "orphan")
            st, data, _ = d.req("POST", "/v1/processes", json.dumps(
                {"command": f"sleep 1000 >/dev/null 2>&1 & echo $! > {pidfile}"}))
            self.assertEqual(st, 200)
            self.assertIn(b'"exit"', data)
            with open(pidfile) as f:
                orphan = int(f.read())

            def stat():
                try:
                    with open(f"/proc/{orphan}/stat") as f:
                        fields = f.read().rsplit(") ", 1)[1].split()
                    return fields[0], int(fields[1])  # state, ppid
                except FileNotFoundError:
                    return None

            st0 = stat()
            self.assertIsNotNone(st0, "the background child is gone")
            self.assertEqual(st0[1], d.p.pid)  # reparented to sandboxd
            os.kill(orphan, signal.SIGKILL)
            end = time.monotonic() + 30  # a bound only a hang reaches
            while stat() is not None and time.monotonic() < end:
                time.sleep(0.05)
            self.assertIsNone(stat(), f"the orphan is still there (a zombie?): {stat()}")
        finally:
            if orphan is not None:
                try:
                    os.kill(orphan, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            d.stop()

    def test_sigterm_kills_process_groups(self):
        # A process group that ignores SIGTERM is killed on SIGTERM to sandboxd after its
        # short kill grace (LIMIT_SBD_KILL_GRACE, 2 s), not after the shutdown timeout: that
        # is 120 s here, past the 20 s Daemon.stop waits, so the stop would fail rather
        # than merely be slow.
        d = Daemon("--shutdown-timeout", "120")
        pidfile = os.path.join(d.dir, "pids")
        c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
        c.request("POST", "/v1/processes", json.dumps(
            {"command": f"sleep 100 & echo $! > {pidfile}; trap '' TERM; sleep 100"}))
        r = c.getresponse()
        first = json.loads(r.readline())
        self.assertEqual(first["type"], "start")
        leader = first["pid"]
        end = time.monotonic() + 30
        while not (os.path.exists(pidfile) and os.path.getsize(pidfile)):
            self.assertLess(time.monotonic(), end, "the command never wrote its pid file")
            time.sleep(0.01)
        with open(pidfile) as f:
            bg = int(f.read())
        self.assertEqual(d.stop(), 0)
        c.close()
        for pid in (leader, bg):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    self.assertIn(") Z ", f.read())  # at most a zombie awaiting its reaper
            except OSError:  # gone (ENOENT, or ESRCH between the open and the read)
                pass

    def test_signal_after_the_leader_exited_reaches_its_group(self):
        # An attached stream whose shell exited while "sleep 30 &" holds its output: the
        # stream waits for the output (up to the 2 s drain) and a signal in that time goes
        # to the rest of the group, whose end closes the output (before: 204 and nothing
        # sent; the exit came after the drain and the sleep ran on).
        def alive(pid):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    return ") Z " not in f.read()  # a zombie awaits its reaper
            except OSError:  # gone: ENOENT, or ESRCH when it went between open and read
                return False

        d = Daemon()
        pid = None
        try:
            c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
            c.request("POST", "/v1/processes", json.dumps({"command": "sleep 30 & echo $!"}))
            r = c.getresponse()
            first = json.loads(r.readline())
            self.assertEqual(first["type"], "start")
            out = json.loads(r.readline())
            self.assertEqual(out["type"], "stdout", out)
            pid = int(base64.b64decode(out["data"]))
            time.sleep(0.3)
            self.assertFalse(alive(first["pid"]))  # the leader exited
            st, data, _ = d.req("POST", f"/v1/processes/{first['id']}/signal",
                                json.dumps({"signal": "SIGTERM"}))
            self.assertEqual(st, 204, data)
            rest = [json.loads(line) for line in r.read().splitlines() if line]
            c.close()
            self.assertEqual((rest[-1]["type"], rest[-1]["exit_code"]), ("exit", 0))
            self.assertFalse(alive(pid), "the sleep was not signalled")
        finally:
            if pid and alive(pid):
                os.kill(pid, signal.SIGKILL)
            d.stop()

    def test_legacy_sdk_session(self):
        base = tempfile.mkdtemp(prefix="sbd-legacy-")
        d = Daemon(env={"SANDBOX_BASE_DIR": base})
        try:
            boundary = "----sdk"
            body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
                    f"filename=\"notes/hello.txt\"\r\nContent-Type: text/plain\r\n\r\n"
                    f"hi there\r\n--{boundary}--\r\n").encode()
            st, out, _ = d.req("POST", "/upload", body, {
                "Content-Type": f"multipart/form-data; boundary={boundary}"}, port=d.lport)
            self.assertEqual((st, out), (200, b'{"message":"File \'notes/hello.txt\' uploaded '
                                              b'successfully."}'))
            self.assertTrue(os.path.exists(os.path.join(base, "notes", "hello.txt")))
            q = urllib.parse.quote("notes/hello.txt", safe="")
            st, out, _ = d.req("GET", f"/download/{q}", port=d.lport)
            self.assertEqual((st, out), (200, b"hi there"))
            st, out, _ = d.req("GET", f"/exists/{q}", port=d.lport)
            self.assertEqual(out, b'{"path":"notes/hello.txt","exists":true}')
            st, out, _ = d.req("GET", "/list/notes", port=d.lport)
            entries = json.loads(out)
            self.assertEqual([e["name"] for e in entries], ["hello.txt"])
            self.assertIsInstance(entries[0]["mod_time"], float)
            st, out, _ = d.req("POST", "/execute", json.dumps({"command": "pwd"}), port=d.lport)
            self.assertEqual(json.loads(out), {"stdout": os.path.realpath(base) + "\n",
                                               "stderr": "", "exit_code": 0})
        finally:
            self.assertEqual(d.stop(), 0)
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
