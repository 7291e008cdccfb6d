#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Hostile-input suite against the real binaries on 127.0.0.1 (standard library only).

sandboxd directly, and the router in front of that sandboxd (a Sandbox object whose pod
IP is 127.0.0.1, TokenReview + SubjectAccessReview on), get the same raw-socket attacks:
oversized and too many headers, request smuggling (Content-Length with
Transfer-Encoding, duplicate lengths, obfuscated codings, pipelined requests behind a
rejected one), chunk-size overflow, NUL bytes, absolute-form targets at the metadata
address, oversized bodies announced up front, and slow clients holding connections.
After every attack the server must still answer a plain request. sandboxd also gets
path escapes (.., encoded .., absolute, symlinks out of the root, NUL) on both APIs,
FIFO and socket targets (directly and through symlinks) on every file endpoint, bad
first WebSocket messages under LeakSanitizer and close-frame edge cases; the router gets
routing escapes, SSRF headers (6to4 and NAT64 forms too) and repeated X-Sandbox-*
headers. Both get a WebSocket ping flood from a client that never reads: the resident
memory of every process on the path must stay bounded.

  SANDBOXD_BIN=build/asan/sandboxd SANDBOX_ROUTER_BIN=build/asan/sandbox-router \\
    AS_KUBECONFIG=.cache/apiserver/kubeconfig python3 -m unittest -v tests/hostile/test_hostile.py

The router half runs when SANDBOX_ROUTER_BIN and an API server (AS_KUBECONFIG, with
hack/apiserver.sh's tokens.csv beside it) are available, and is skipped otherwise.
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import stat
import struct
import subprocess
import tempfile
import threading
import time
import unittest
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SBD = os.environ.get("SANDBOXD_BIN", os.path.join(ROOT, "build/asan/sandboxd"))
ROUTER = os.environ.get("SANDBOX_ROUTER_BIN", os.path.join(ROOT, "build/asan/sandbox-router"))
KUBECONFIG = os.environ.get("AS_KUBECONFIG", "")
KUBECTL = os.environ.get("KUBECTL", os.path.join(ROOT, ".cache/bin/kubectl"))
SECRET = b"root:x:0:0"  # /etc/passwd: must never come back
ENV = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=1",
           UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what):
    end = time.monotonic() + 20
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not start")


def http_body(raw):
    """The body of the one HTTP/1.1 response in raw, de-chunked when it is chunked."""
    head, _, body = raw.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" not in head.lower():
        return body
    out = b""
    while True:
        size, _, body = body.partition(b"\r\n")
        n = int(size.split(b";")[0], 16)
        if n == 0:
            return out
        out, body = out + body[:n], body[n + 2:]


def exchange(port, data, timeout=10, close_write=False):
    """Sends raw bytes; returns everything received until the peer closes or times out."""
    s = socket.create_connection(("127.0.0.1", port), timeout)
    try:
        s.sendall(data)
        if close_write:
            s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        s.close()


def statuses(raw):
    """HTTP status codes of every response head in raw (pipelined answers included)."""
    out = []
    for part in raw.split(b"HTTP/1.1 ")[1:]:
        code = part[:3]
        if code.isdigit():
            out.append(int(code))
    return out


def still_waiting(s):
    """True when socket s is open and nothing arrived on it yet (does not wait)."""
    s.setblocking(False)
    try:
        s.recv(1, socket.MSG_PEEK)  # data or the end: answered or closed already
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        s.setblocking(True)


# ---- WebSocket client helpers --------------------------------------------------------

WS_KEY = b"dGhlIHNhbXBsZSBub25jZQ=="


def ws_frame(opcode, payload=b"", fin=True, mask=b"\x00\x00\x00\x00"):
    """A masked client frame (the zero mask keeps the payload readable)."""
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + n.to_bytes(8, "big")
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def ws_connect(port, path, headers=b"", rcvbuf=None, timeout=10):
    """Upgrades a raw socket on path; returns (socket, bytes received after the 101)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
              "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n".encode() +
              b"Sec-WebSocket-Key: " + WS_KEY + b"\r\n" + headers + b"\r\n")
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = s.recv(4096)
        if not chunk:
            raise AssertionError(f"no upgrade: {raw[:300]!r}")
        raw += chunk
    head, rest = raw.split(b"\r\n\r\n", 1)
    if not head.startswith(b"HTTP/1.1 101"):
        s.close()
        raise AssertionError(f"no upgrade: {raw[:300]!r}")
    return s, rest


def ws_read_frames(s, pending=b"", until_close=True, timeout=10):
    """Reads server frames until a close frame (or EOF); returns [(opcode, payload)]."""
    s.settimeout(timeout)
    buf, frames = pending, []
    while True:
        while len(buf) >= 2:
            n, h = buf[1] & 0x7f, 2
            if n == 126:
                if len(buf) < 4:
                    break
                n, h = int.from_bytes(buf[2:4], "big"), 4
            elif n == 127:
                if len(buf) < 10:
                    break
                n, h = int.from_bytes(buf[2:10], "big"), 10
            if len(buf) < h + n:
                break
            frames.append((buf[0] & 0x0f, buf[h:h + n]))
            buf = buf[h + n:]
            if frames[-1][0] == 8 and until_close:
                return frames
        try:
            chunk = s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            return frames
        if not chunk:
            return frames
        buf += chunk


def close_code(frames):
    """The status code of the close frame among frames (None without one)."""
    for op, payload in frames:
        if op == 8:
            return int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
    return None


def assert_flat(case, who, before, mid, end):
    """RSS (KiB) before a flood, half-way through and at its end: once the queues and the
    kernel's buffers are full nothing more may arrive, so the second half adds (almost)
    nothing; the whole rise stays well under what an unbounded queue takes (ASan's
    quarantine of freed write requests included)."""
    case.assertLess(end - mid, 8 * 1024, f"{who} RSS still growing: {before} {mid} {end} KiB")
    case.assertLess(end - before, 96 * 1024, f"{who} RSS grew {before} -> {end} KiB")


def cpu_ticks(pid):
    """User + system CPU time of pid in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def ping_flood(port, path, headers=b"", seconds=6.0, probe=None, first=None, frame=None,
               settled=None):
    """Sends 125-byte pings (or frame) as fast as the peer takes them from a client with a
    4 KiB receive buffer that never reads, after the message first (optional). probe()
    (optional) runs every half second while the socket is open. The flood lasts seconds;
    with settled(earlier, now) given it goes on (up to 2.5 times as long) until that holds
    for the probes half the flood apart, so a loaded machine that fills the queues late
    is not mistaken for one that never stops taking. Returns (bytes sent, [the probe half
    the flood before the end, the last probe])."""
    s, _ = ws_connect(port, path, headers, rcvbuf=4096)
    if first:
        s.sendall(ws_frame(1, first))
    ping = (frame or ws_frame(9, b"A" * 125)) * 64
    start = time.monotonic()
    step, back = 0.5, max(1, round(seconds / 2 / 0.5))
    sent, due, probes = 0, start + 0.5, []
    s.settimeout(0.25)
    try:
        while True:
            now = time.monotonic()
            if probe and now >= due:
                due += step
                probes.append(probe())
                if now - start >= seconds and (
                        settled is None or now - start >= seconds * 2.5
                        or settled(probes[max(0, len(probes) - 1 - back)], probes[-1])):
                    break
                continue
            if not probe and now - start >= seconds:
                break
            try:
                sent += s.send(ping)
            except socket.timeout:
                pass  # the peer stopped reading us: what it must do
            except (BrokenPipeError, ConnectionResetError):
                break  # closing a flooding client is fine too
    finally:
        s.close()
    return sent, (probes[max(0, len(probes) - 1 - back)], probes[-1]) if probes else ()


def rss_settled(earlier, now):
    """ping_flood's settled() for probes of one RSS or a tuple of them (KiB): none rose
    by 2 MiB or more (a quarter of assert_flat's bound)."""
    pairs = zip(earlier, now) if isinstance(now, tuple) else [(earlier, now)]
    return all(b - a < 2 * 1024 for a, b in pairs)


class Target:
    """One server under attack: its port, a request prefix and extra headers."""

    def __init__(self, port, health_path, headers=b""):
        self.port, self.health, self.headers = port, health_path, headers

    def head(self, method, path, extra=b""):
        return (f"{method} {path} HTTP/1.1\r\nHost: x\r\n".encode() + self.headers + extra)

    def healthy(self, case):
        raw = exchange(self.port, self.head("GET", self.health, b"Connection: close\r\n\r\n"))
        case.assertEqual(statuses(raw)[:1], [200], raw[:300])


class HttpAttacks:
    """Attacks every HTTP front end must survive. Subclasses set self.t (a Target) and
    self.post_path (a path that accepts a body)."""

    def rejected(self, data, allowed=(400,), close_write=True):
        raw = exchange(self.t.port, data, close_write=close_write)
        codes = statuses(raw)
        self.assertTrue(codes, f"no response to {data[:120]!r}")
        self.assertIn(codes[0], allowed, raw[:300])
        self.assertNotIn(SECRET, raw)
        self.t.healthy(self)
        return codes

    def test_oversized_header(self):
        self.rejected(self.t.head("GET", self.t.health, b"X-Big: " + b"a" * 80000 + b"\r\n\r\n"),
                      (431, 400))

    def test_too_many_headers(self):
        many = b"".join(b"X-H%d: v\r\n" % i for i in range(300))
        self.rejected(self.t.head("GET", self.t.health, many + b"\r\n"), (431, 400))

    def test_smuggling_cl_te(self):
        # A rejected request must not let the bytes behind it run as a second request.
        body = b"0\r\n\r\nGET " + self.t.health.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n"
        for first, second in ((b"Content-Length: %d\r\n" % len(body),
                               b"Transfer-Encoding: chunked\r\n"),
                              (b"Transfer-Encoding: chunked\r\n",
                               b"Content-Length: %d\r\n" % len(body))):
            codes = self.rejected(self.t.head("POST", self.post_path, first + second + b"\r\n") +
                                  body)
            self.assertEqual(codes, [400])

    def test_smuggling_duplicate_lengths(self):
        codes = self.rejected(self.t.head("POST", self.post_path,
                                          b"Content-Length: 3\r\nContent-Length: 40\r\n\r\n") +
                              b"abc")
        self.assertEqual(len(codes), 1)

    def test_obfuscated_transfer_encoding(self):
        for te in (b"Transfer-Encoding: xchunked\r\n", b"Transfer-Encoding: chunked, gzip\r\n",
                   b"Transfer-Encoding : chunked\r\n", b"Transfer-Encoding:\x0bchunked\r\n"):
            self.rejected(self.t.head("POST", self.post_path, te + b"\r\n") + b"0\r\n\r\n",
                          (400, 501))

    def test_bad_content_length(self):
        for cl in (b"-1", b"1e3", b"0x10", b"99999999999999999999999", b"+5"):
            self.rejected(self.t.head("POST", self.post_path, b"Content-Length: " + cl +
                                      b"\r\n\r\n"), (400, 413))

    def test_chunk_size_overflow(self):
        self.rejected(self.t.head("POST", self.post_path, b"Transfer-Encoding: chunked\r\n\r\n") +
                      b"fffffffffffffffffffff\r\nx\r\n0\r\n\r\n", (400, 413))

    def test_nul_and_control_bytes(self):
        self.rejected(self.t.head("GET", self.t.health, b"X-A: a\x00b\r\n\r\n"))
        self.rejected(self.t.head("GET", self.t.health, b"X-A\x01: v\r\n\r\n"))

    def test_absolute_form_at_metadata(self):
        raw = exchange(self.t.port, b"GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\n"
                       b"Host: 169.254.169.254\r\n" + self.t.headers + b"Connection: close\r\n\r\n",
                       close_write=True)
        codes = statuses(raw)
        self.assertTrue(codes)
        # refused or not found at once: a 502/504 would be an attempt to reach it
        self.assertIn(codes[0], (400, 403, 404), raw[:300])
        self.t.healthy(self)

    def test_oversized_body_announced(self):
        self.rejected(self.t.head("POST", self.post_path, b"Content-Type: application/json\r\n"
                                  b"Content-Length: 10737418240\r\n\r\n") + b"{",
                      (413,), close_write=False)

    def test_slow_clients_do_not_starve(self):
        """40 connections that never finish their request head do not hold up a plain
        request: it is answered while every one of them is still open and unanswered (a
        server they starved would answer it only once their header timeout freed it, 10 s
        on; the order is the check, not a clock). Then each slow connection gets its 408
        or is closed."""
        slow = []
        try:
            for _ in range(40):
                s = socket.create_connection(("127.0.0.1", self.t.port), 5)
                s.sendall(b"GET / HTTP/1.1\r\nX-Slow: ")
                slow.append(s)
            self.t.healthy(self)
            for i, s in enumerate(slow):
                self.assertTrue(still_waiting(s), f"slow connection {i} was already ended")
            for s in slow:
                s.settimeout(self.header_timeout + 30)
                data = s.recv(4096)
                self.assertTrue(data == b"" or b" 408 " in data.split(b"\r\n")[0], data[:200])
        finally:
            for s in slow:
                s.close()


class SandboxdHostile(HttpAttacks, unittest.TestCase):
    # The default (LIMIT_HTTP_HEADER_TIMEOUT), as the router's: test_slow_clients_do_not_starve
    # needs its slow heads to outlast the plain request by far.
    header_timeout = 10

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="hostile-sbd-")
        cls.root = os.path.join(cls.dir, "root")
        os.makedirs(os.path.join(cls.root, "sub"))
        os.symlink("/etc", os.path.join(cls.root, "etc-link"))
        os.symlink("../../../../../../etc/passwd", os.path.join(cls.root, "sub", "pw"))
        os.symlink("/proc/self/root/etc/passwd", os.path.join(cls.root, "magic"))
        # Special files the sandbox user can make: a FIFO and a socket, and links to them.
        os.mkfifo(os.path.join(cls.root, "fifo"))
        os.symlink("fifo", os.path.join(cls.root, "link-fifo"))
        cls.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        cls.unix.bind(os.path.join(cls.root, "sock"))
        os.symlink("sock", os.path.join(cls.root, "link-sock"))
        cls.special = ["fifo", "link-fifo", "sock", "link-sock"]
        try:  # a device node as well where we may make one (root in CI)
            os.mknod(os.path.join(cls.root, "null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            cls.special.append("null")
        except PermissionError:
            pass
        cls.port, cls.lport = free_port(), free_port()
        cls.log = open(os.path.join(cls.dir, "sandboxd.log"), "wb")
        cls.p = subprocess.Popen([SBD, "--host", "127.0.0.1", "--port", str(cls.port),
                                  "--legacy-port", str(cls.lport), "--grpc-port", "0",
                                  "--root", cls.root,
                                  "--header-timeout", str(cls.header_timeout),
                                  "--max-body", "65536", "--log-level", "warn"],
                                 env=ENV, stdout=cls.log, stderr=cls.log)
        wait_port(cls.port, cls.p, "sandboxd")
        wait_port(cls.lport, cls.p, "sandboxd legacy port")
        cls.t = Target(cls.port, "/v1/health")
        cls.post_path = "/v1/processes/run"

    @classmethod
    def tearDownClass(cls):
        if cls.p.poll() is None:
            cls.p.send_signal(signal.SIGTERM)
        rc = cls.p.wait(timeout=30)
        cls.log.close()
        cls.unix.close()
        with open(os.path.join(cls.dir, "sandboxd.log"), "rb") as f:
            log = f.read()
        shutil.rmtree(cls.dir, ignore_errors=True)
        assert rc == 0, f"sandboxd exited with {rc}: {log[-2000:]!r}"

    def get(self, port, path):
        raw = exchange(port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                       .encode(), close_write=True)
        return (statuses(raw) or [0])[0], raw

    def test_path_escapes(self):
        paths = ["/v1/files/../../../../etc/passwd", "/v1/files/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
                 "/v1/files/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd", "/v1/files//etc/passwd",
                 "/v1/files/etc-link/passwd", "/v1/files/sub/pw", "/v1/files/magic",
                 "/v1/files/sub/..%2f..%2f..%2fetc/passwd", "/v1/files/a%00/../../etc/passwd",
                 "/v1/files/..\\..\\etc\\passwd", "/v1/files/%252e%252e/etc/passwd"]
        for path in paths:
            code, raw = self.get(self.port, path)
            self.assertNotIn(SECRET, raw, path)
            self.assertIn(code, (400, 403, 404), (path, raw[:200]))
        for path in ["/download/../../etc/passwd", "/download/%2e%2e/%2e%2e/etc/passwd",
                     "/download/etc-link/passwd", "/exists/etc-link/passwd",
                     "/list/etc-link", "/list/../.."]:
            code, raw = self.get(self.lport, path)
            self.assertIn(code, (400, 403, 404), (path, raw[:200]))
            self.assertNotIn(SECRET, raw, path)
            self.assertNotIn(b"passwd", raw, path)
        self.t.healthy(self)

    def test_write_escapes(self):
        victim = os.path.join(self.dir, "escaped")
        for path in ["/v1/files/../escaped", "/v1/files/%2e%2e/escaped",
                     "/v1/files/sub/../../escaped"]:
            raw = exchange(self.port, f"PUT {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                           "Connection: close\r\n\r\nbad".encode(), close_write=True)
            self.assertFalse(os.path.exists(victim), path)
            self.assertIn((statuses(raw) or [0])[0], (400, 403, 404), (path, raw[:200]))
        # Through a symlink that points out of the root: refused, nothing written.
        raw = exchange(self.port, b"PUT /v1/files/etc-link/hostile-x HTTP/1.1\r\nHost: x\r\n"
                       b"Content-Length: 3\r\nConnection: close\r\n\r\nbad", close_write=True)
        self.assertFalse(os.path.exists("/etc/hostile-x"))
        self.assertIn((statuses(raw) or [0])[0], (400, 403, 404), raw[:200])


    def request(self, port, method, path, headers=b"", body=b"", timeout=10):
        raw = exchange(port, f"{method} {path} HTTP/1.1\r\nHost: x\r\n".encode() + headers +
                       b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body,
                       timeout=timeout, close_write=True)
        return (statuses(raw) or [0])[0], raw

    def test_special_file_targets(self):
        """FIFOs, sockets and a device, directly and through links, on every file
        endpoint: each request is answered at once with a refusal, nothing is replaced,
        and the daemon stays responsive (a blocking open froze every connection)."""
        boundary = b"hostileBOUNDARY"
        for name in self.special:
            mp = (b"--" + boundary + b"\r\nContent-Disposition: form-data; name=\"file\"; "
                  b"filename=\"" + name.encode() + b"\"\r\n\r\nbad\r\n--" + boundary + b"--\r\n")
            mp_head = b"Content-Type: multipart/form-data; boundary=" + boundary + b"\r\n"
            cases = [(self.port, "PUT", f"/v1/files/{name}", b"", b"bad"),
                     (self.port, "PUT", f"/v1/files/{name}?mode=0600", b"", b"bad"),
                     (self.port, "PUT", f"/v1/files/{name}", mp_head, mp),
                     (self.lport, "POST", "/upload", mp_head, mp),
                     (self.port, "GET", f"/v1/files/{name}", b"", b""),
                     (self.port, "HEAD", f"/v1/files/{name}", b"", b""),
                     (self.lport, "GET", f"/download/{name}", b"", b"")]
            for port, method, path, head, body in cases:
                # a blocking open is never answered: it would end in the read timeout
                code, raw = self.request(port, method, path, head, body, timeout=30)
                what = (name, method, path, port == self.lport)
                self.assertIn(code, (400, 403, 404), (what, raw[:300]))
                self.t.healthy(self)
            self.assertTrue(stat.S_ISFIFO(os.lstat(os.path.join(self.root, "fifo")).st_mode))
            self.assertTrue(stat.S_ISSOCK(os.lstat(os.path.join(self.root, "sock")).st_mode))
        for name in ("fifo", "sock"):  # listings and existence checks do not open them
            code, raw = self.get(self.port, "/v1/files/")
            self.assertEqual(code, 200, raw[:300])
            self.assertIn(name.encode(), raw)
            code, raw = self.get(self.lport, f"/exists/{name}")
            self.assertEqual(code, 200, raw[:300])
        # DELETE removes a FIFO without opening it.
        os.mkfifo(os.path.join(self.root, "fifo-del"))
        code, raw = self.request(self.port, "DELETE", "/v1/files/fifo-del", timeout=5)
        self.assertEqual(code, 204, raw[:300])
        self.assertFalse(os.path.lexists(os.path.join(self.root, "fifo-del")))

    def test_ws_ping_flood_bounded(self):
        """Pings from a client that never reads: sandboxd stops reading it while the pongs
        are queued (unpatched, its RSS went from 10 MB to 443 MB in 8 s)."""
        before = rss_kib(self.p.pid)
        sent, (mid, end) = ping_flood(self.port, "/v1/processes/ws",
                                      probe=lambda: rss_kib(self.p.pid), settled=rss_settled)
        print(f"\n  sandboxd ping flood: {sent >> 10} KiB sent, "
              f"RSS {before >> 10} -> {mid >> 10} -> {end >> 10} MiB", flush=True)
        assert_flat(self, "sandboxd", before, mid, end)
        self.assertLess(sent, 64 << 20)  # the flood was throttled, not absorbed
        self.t.healthy(self)

    def test_ws_error_reply_flood_bounded(self):
        """The same with control messages that each draw an error reply, sent to a running
        process by a client that never reads. Each message churns far more memory than a
        ping, which ASan's quarantine (256 MB) would keep resident, so this runs on a
        private sandboxd with an 8 MB quarantine; its CPU time must stop growing too."""
        port = free_port()
        env = dict(ENV, ASAN_OPTIONS=ENV["ASAN_OPTIONS"] + ":quarantine_size_mb=8")
        with open(os.path.join(self.dir, "sandboxd-flood.log"), "wb") as log:
            p = subprocess.Popen([SBD, "--host", "127.0.0.1", "--port", str(port),
                                  "--legacy-port", "-1", "--grpc-port", "0", "--root",
                                  self.root, "--log-level", "warn"], env=env, stdout=log, stderr=log)
            try:
                wait_port(port, p, "sandboxd")
                before = (rss_kib(p.pid), cpu_ticks(p.pid))
                sent, (mid, end) = ping_flood(port, "/v1/processes/ws",
                                              probe=lambda: (rss_kib(p.pid), cpu_ticks(p.pid)),
                                              first=b'{"command":["/bin/sleep","30"]}',
                                              frame=ws_frame(1, b'{"no":"type"}'),
                                              seconds=10)
            finally:
                p.send_signal(signal.SIGTERM)
                rc = p.wait(timeout=30)
        print(f"\n  sandboxd error-reply flood: {sent >> 10} KiB sent, RSS {before[0] >> 10} "
              f"-> {mid[0] >> 10} -> {end[0] >> 10} MiB, CPU ticks {before[1]} -> {mid[1]} -> "
              f"{end[1]}", flush=True)
        assert_flat(self, "sandboxd", before[0], mid[0], end[0])
        self.assertLess(end[1] - mid[1], (mid[1] - before[1]) / 3 + 5,
                        "still handling messages in the second half")
        self.assertEqual(rc, 0)

    def test_ws_close_frames(self):
        cases = [(b"\x03", 1002), (b"\x03\xed", 1002), (b"\x03\xee", 1002), (b"\x00\x00", 1002),
                 (b"\x03\xe8bye", 1000), (b"\x0f\xa0", 4000), (b"\x03\xe8\xff", 1002), (b"", 1000)]
        for payload, want in cases:
            s, rest = ws_connect(self.port, "/v1/processes/ws")
            try:
                s.sendall(ws_frame(8, payload))
                self.assertEqual(close_code(ws_read_frames(s, rest)), want, payload)
            finally:
                s.close()
        self.t.healthy(self)

    def test_ws_bad_first_messages_do_not_leak(self):
        """Refused first messages on a private sandboxd, then a clean exit under
        LeakSanitizer (the ASan build reports leaks at exit and fails it)."""
        port = free_port()
        log_path = os.path.join(self.dir, "sandboxd-leak.log")
        with open(log_path, "wb") as log:
            p = subprocess.Popen([SBD, "--host", "127.0.0.1", "--port", str(port),
                                  "--legacy-port", "-1", "--grpc-port", "0", "--root",
                                  self.root, "--log-level", "warn"], env=ENV, stdout=log, stderr=log)
            try:
                wait_port(port, p, "sandboxd")
                bad = [b'{"command":["/bin/true","x"],"env":{"A":"b"},"pty":7}',
                       b'{"command":["/bin/true"],"env":{"A":1}}',
                       b'{"command":["/bin/true"],"cwd":"../.."}',
                       b'{"command":["/bin/true"],"stdin":"' + b"x" * 200000 + b'","pty":"no"}',
                       b'{"command":[]}', b'{"command":"true"', b"[1,2]", b"not json"]
                for i in range(50):
                    s, rest = ws_connect(port, "/v1/processes/ws")
                    try:
                        s.sendall(ws_frame(1, bad[i % len(bad)]))
                        frames = ws_read_frames(s, rest)
                        self.assertEqual(close_code(frames), 1008, bad[i % len(bad)][:80])
                        self.assertIn(b'"error"', frames[0][1])
                    finally:
                        s.close()
                s, rest = ws_connect(port, "/v1/processes/ws")
                s.sendall(ws_frame(2, b"binary first"))
                self.assertEqual(close_code(ws_read_frames(s, rest)), 1008)
                s.close()
            finally:
                p.send_signal(signal.SIGTERM)
                rc = p.wait(timeout=30)
        with open(log_path, "rb") as f:
            out = f.read()
        self.assertNotIn(b"LeakSanitizer", out, out[:1500])
        self.assertEqual(rc, 0, out[-3000:])


def kubectl(*args, stdin=None):
    return subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, *args], input=stdin,
                          capture_output=True, check=True, text=True).stdout


def admin_token():
    path = os.path.join(os.path.dirname(KUBECONFIG), "tokens.csv")
    with open(path) as f:
        for line in f:
            tok, user = line.split(",")[:2]
            if user == "admin":
                return tok
    raise RuntimeError("no admin token in " + path)


def router_available():
    return (os.path.exists(ROUTER) and os.path.exists(KUBECTL) and KUBECONFIG and
            os.path.exists(os.path.join(os.path.dirname(KUBECONFIG), "tokens.csv")))


def new_namespace(prefix):
    """A new labelled namespace (the Sandbox CRD applied first); returns its name."""
    ns = prefix + uuid.uuid4().hex[:8]
    kubectl("apply", "--server-side", "--force-conflicts", "-f",
            os.path.join(ROOT, "api/crds/agents.x-k8s.io_sandboxes.yaml"))
    kubectl("wait", "--for=condition=Established", "--timeout=60s",
            "crd/sandboxes.agents.x-k8s.io")
    kubectl("create", "namespace", ns)
    kubectl("label", "namespace", ns, "agent-sandbox.test/integration=true")
    return ns


def start_router(workdir, ns, *extra):
    """Starts the router for ns (TokenReview on, loopback upstreams allowed), logging to
    workdir/router.log; returns (process, port, log file)."""
    port, hport = free_port(), free_port()
    log = open(os.path.join(workdir, "router.log"), "wb")
    p = subprocess.Popen([ROUTER, "--http-bind-address", f"127.0.0.1:{port}",
                          "--health-probe-bind-address", f"127.0.0.1:{hport}",
                          "--kubeconfig", KUBECONFIG, "--namespace", ns,
                          "--allow-loopback-upstreams", "--trust-loopback", "false",
                          "--log-level", "warn", *extra],
                         env=ENV, stdout=log, stderr=log)
    wait_port(port, p, "router")
    return p, port, log


def stop_router(procs, logs, workdir, ns):
    """Ends procs (SIGTERM), closes logs, deletes ns and workdir; returns (exit codes,
    the end of router.log)."""
    rcs = []
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        rcs.append(p.wait(timeout=40))
    for f in logs:
        f.close()
    with open(os.path.join(workdir, "router.log"), "rb") as f:
        log = f.read()
    subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, "delete", "namespace", ns,
                    "--wait=false"], capture_output=True)
    shutil.rmtree(workdir, ignore_errors=True)
    return rcs, log[-2000:]


@unittest.skipUnless(router_available(), "needs SANDBOX_ROUTER_BIN, kubectl and AS_KUBECONFIG")
class RouterHostile(HttpAttacks, unittest.TestCase):
    header_timeout = 10  # LIMIT_HTTP_HEADER_TIMEOUT

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="hostile-router-")
        cls.ns = new_namespace("hostile-")
        # The upstream: a sandboxd on loopback, reached through a Sandbox's status.
        cls.sroot = os.path.join(cls.dir, "root")
        cls.sport = free_port()
        cls.slog = open(os.path.join(cls.dir, "sandboxd.log"), "wb")
        cls.sbd = subprocess.Popen([SBD, "--host", "127.0.0.1", "--port", str(cls.sport),
                                    "--legacy-port", "-1", "--grpc-port", "0", "--root", cls.sroot,
                                    "--max-body", "65536", "--log-level", "warn"],
                                   env=ENV, stdout=cls.slog, stderr=cls.slog)
        wait_port(cls.sport, cls.sbd, "sandboxd")
        for name, ip in (("box", "127.0.0.1"), ("meta", "169.254.169.254")):
            kubectl("-n", cls.ns, "apply", "-f", "-", stdin=json.dumps({
                "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
                "metadata": {"name": name},
                "spec": {"podTemplate": {"spec": {"containers": [{"name": "r", "image": "i"}]}}}}))
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            kubectl("-n", cls.ns, "patch", "sandbox", name, "--subresource=status",
                    "--type=merge", "-p", json.dumps({"status": {
                        "podIPs": [ip], "conditions": [{
                            "type": "Ready", "status": "True", "reason": "DependenciesReady",
                            "message": "", "lastTransitionTime": now}]}}))
        cls.p, cls.port, cls.log = start_router(cls.dir, cls.ns)
        auth = f"Authorization: Bearer {admin_token()}\r\n".encode()
        cls.base = f"/s/{cls.ns}/box/{cls.sport}"
        cls.t = Target(cls.port, cls.base + "/v1/health", auth)
        cls.post_path = cls.base + "/v1/processes/run"
        end = time.monotonic() + 30
        while time.monotonic() < end:  # the router's cache sees the Sandbox
            raw = exchange(cls.port, cls.t.head("GET", cls.t.health,
                                                b"Connection: close\r\n\r\n"))
            if statuses(raw)[:1] == [200]:
                break
            time.sleep(0.2)

    @classmethod
    def tearDownClass(cls):
        rcs, log = stop_router((cls.p, cls.sbd), (cls.log, cls.slog), cls.dir, cls.ns)
        assert rcs == [0, 0], f"exit codes {rcs}: {log!r}"

    def test_routing_escapes(self):
        auth = self.t.headers
        for path in [f"/s/{self.ns}/../kube-system/x/80/", f"/s/{self.ns}/box/0/",
                     f"/s/{self.ns}/box/99999/", f"/s/{self.ns}/box%2f..%2fmeta/80/",
                     "/s/kube-system/box/80/", f"/s/{self.ns}/BOX/80/", "//s//x"]:
            raw = exchange(self.port, f"GET {path} HTTP/1.1\r\nHost: x\r\n".encode() + auth +
                           b"Connection: close\r\n\r\n", close_write=True)
            code = (statuses(raw) or [0])[0]
            self.assertIn(code, (400, 403, 404), (path, raw[:200]))

    def test_ssrf(self):
        auth = self.t.headers
        cases = [  # (extra headers, path): none may reach a forbidden address
            (f"X-Sandbox-ID: box\r\nX-Sandbox-Namespace: {self.ns}\r\nX-Sandbox-Port: 80\r\n"
             "X-Sandbox-Pod-IP: 169.254.169.254\r\n", "/latest/meta-data/"),
            (f"X-Sandbox-ID: box\r\nX-Sandbox-Namespace: {self.ns}\r\nX-Sandbox-Port: 80\r\n"
             "X-Sandbox-Pod-IP: 10.0.0.1\r\n", "/"),
            ("", f"/s/{self.ns}/meta/80/latest/meta-data/"),
        ] + [(f"X-Sandbox-ID: box\r\nX-Sandbox-Namespace: {self.ns}\r\nX-Sandbox-Port: 80\r\n"
              f"X-Sandbox-Pod-IP: {ip}\r\n", "/latest/meta-data/")
             for ip in ("2002:a9fe:a9fe::1", "64:ff9b:1::a9fe:a9fe", "64:ff9b:1:a9fe:a9:fe00::",
                        "2001:0:a00:1::5601:5601")]
        for extra, path in cases:
            raw = exchange(self.port, f"GET {path} HTTP/1.1\r\nHost: x\r\n{extra}".encode() +
                           auth + b"Connection: close\r\n\r\n", close_write=True)
            code = (statuses(raw) or [0])[0]
            if extra:  # a pod IP in a header: refused while the request is read
                self.assertEqual(code, 400, (extra, raw[:200]))
                self.assertIn(b"Invalid target IP address", raw)
                continue
            # a Sandbox whose pod IP is the metadata address: refused before any dial (a
            # failed dial would answer the same 502, so the router's log tells them apart)
            self.assertEqual(code, 502, raw[:200])
            self.assert_logged(b"refusing to dial a forbidden pod IP",
                               b"ip=169.254.169.254")

    def assert_logged(self, *parts):
        """Waits for a line of router.log that holds every part (written as the request
        is refused, before its answer: the 20 s bound is only reached if it never is)."""
        end = time.monotonic() + 20
        while True:
            with open(os.path.join(self.dir, "router.log"), "rb") as f:
                if any(all(p in line for p in parts) for line in f):
                    return
            self.assertLess(time.monotonic(), end, f"no router log line with {parts}")
            time.sleep(0.05)

    def test_duplicate_sandbox_headers(self):
        auth = self.t.headers
        for extra in (f"X-Sandbox-ID: box\r\nX-Sandbox-ID: meta\r\nX-Sandbox-Namespace: {self.ns}"
                      f"\r\nX-Sandbox-Port: {self.sport}\r\n",
                      f"X-Sandbox-ID: box\r\nX-Sandbox-Namespace: {self.ns}\r\n"
                      f"x-sandbox-namespace: kube-system\r\nX-Sandbox-Port: {self.sport}\r\n",
                      f"X-Sandbox-ID: box\r\nX-Sandbox-Namespace: {self.ns}\r\n"
                      f"X-Sandbox-Port: {self.sport}\r\nX-Sandbox-Port: 80\r\n"):
            raw = exchange(self.port, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n" + extra.encode() +
                           auth + b"Connection: close\r\n\r\n", close_write=True)
            self.assertEqual((statuses(raw) or [0])[0], 400, raw[:300])
            self.assertIn(b"Duplicate X-Sandbox-", raw)
        self.t.healthy(self)

    def test_ws_ping_flood_bounded(self):
        """The same flood through the router: its tunnel stops reading sandboxd at 1 MiB,
        sandboxd stops reading the tunnel; neither process grows."""
        def both():
            return rss_kib(self.p.pid), rss_kib(self.sbd.pid)
        before = both()
        sent, (mid, end) = ping_flood(self.port, self.base + "/v1/processes/ws",
                                      self.t.headers, probe=both, settled=rss_settled)
        print(f"\n  ping flood through the router: {sent >> 10} KiB sent, RSS router "
              f"{before[0] >> 10} -> {mid[0] >> 10} -> {end[0] >> 10} MiB, sandboxd "
              f"{before[1] >> 10} -> {mid[1] >> 10} -> {end[1] >> 10} MiB", flush=True)
        for i, who in enumerate(("router", "sandboxd")):
            assert_flat(self, who, before[i], mid[i], end[i])
        self.assertLess(sent, 64 << 20)
        self.t.healthy(self)

    def test_no_token_no_proxy(self):
        for token in (b"not-a-token", b"\xff\xfe-not-utf-8"):  # the second was a 500
            raw = exchange(self.port, f"GET {self.t.health} HTTP/1.1\r\nHost: x\r\n".encode() +
                           b"Authorization: Bearer " + token + b"\r\nConnection: close\r\n\r\n",
                           close_write=True)
            self.assertEqual((statuses(raw) or [0])[0], 401, (token, raw[:200]))
        self.t.healthy(self)

    def test_upstream_reset_cuts_close_delimited_body(self):
        """An upstream body delimited by its connection's close is complete only when that
        close is clean: after a reset the client must not get the chunked body's end."""
        for reset in (False, True):
            port, th = upstream_once(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\npartial-body", reset)
            raw = exchange(self.port, f"GET /s/{self.ns}/box/{port}/x HTTP/1.1\r\nHost: x\r\n"
                           .encode() + self.t.headers + b"Connection: close\r\n\r\n")
            th.join(10)
            self.assertEqual(statuses(raw)[:1], [200], raw[:300])
            self.assertIn(b"partial-body", raw)
            self.assertEqual(raw.endswith(b"\r\n0\r\n\r\n"), not reset, (reset, raw[-80:]))
        self.t.healthy(self)

    def router_req(self, method, port, path, extra=b""):
        return (f"{method} /s/{self.ns}/box/{port}{path} HTTP/1.1\r\nHost: x\r\n".encode()
                + self.t.headers + extra + b"\r\n")

    def test_post_not_replayed_on_a_reused_connection(self):
        """A body-less request on a pooled upstream connection that fails before any
        answer is sent again on a new one only when it may run twice (GET, not POST)."""
        ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        up = RecordingUpstream(lambda conn, nth, head: ok if nth == 0 else None)
        try:
            got = one_at_a_time(self.port, [
                self.router_req("GET", up.port, "/a"), self.router_req("POST", up.port, "/run"),
                self.router_req("GET", up.port, "/b"), self.router_req("GET", up.port, "/c")])
        finally:
            up.close()
        self.assertEqual([statuses(g)[:1] for g in got], [[200], [502], [200], [200]], got)
        posts = [h for _, h in up.heads if h.startswith(b"POST ")]
        self.assertEqual(len(posts), 1, up.heads)  # not replayed
        gets_c = [h for _, h in up.heads if h.startswith(b"GET /c ")]
        self.assertEqual(len(gets_c), 2, up.heads)  # replayed once on a new connection
        self.t.healthy(self)

    def test_tunnel_both_half_closed_delivers_its_end(self):
        """A tunnel whose client half-closed and whose upstream then sends a long reply and
        closes: the client still gets the whole reply (the tunnel closed at the second
        EOF, which cancelled up to a queue's worth of writes to a slow client)."""
        total = 8 << 20
        blob = bytes(range(256)) * (total // 256)
        def serve(c):
            if c is None:
                return
            c.settimeout(20)
            got = b""
            while b"\r\n\r\n" not in got:
                got += c.recv(4096)
            c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n"
                      b"Connection: Upgrade\r\n\r\n")
            while c.recv(4096):  # until the client's half-close comes through
                pass
            c.sendall(blob)

        port, th = loopback_upstream(serve)
        cli = socket.socket()
        cli.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        cli.settimeout(20)
        try:
            cli.connect(("127.0.0.1", self.port))
            cli.sendall(self.router_req("GET", port, "/t",
                                        b"Connection: Upgrade\r\nUpgrade: x\r\n"))
            got = b""
            while b"\r\n\r\n" not in got:
                chunk = cli.recv(4096)
                self.assertTrue(chunk, got)
                got += chunk
            self.assertEqual(statuses(got)[:1], [101], got[:200])
            body = got.partition(b"\r\n\r\n")[2]
            cli.shutdown(socket.SHUT_WR)
            time.sleep(1)  # the reply piles up in the router for the slow client
            while True:  # which stays slow: the router's queue is not empty at the EOF
                chunk = cli.recv(65536)
                if not chunk:
                    break
                body += chunk
                time.sleep(0.005)
        finally:
            cli.close()
            th.join(20)
        self.assertEqual(len(body), total)
        self.assertEqual(body, blob)
        self.t.healthy(self)

    def test_zero_length_spelled_00_keeps_the_upstream_pooled(self):
        """A request whose Content-Length is "00" has no body, as "0": its upstream
        connection goes back to the pool (it stayed marked as sending a body and was
        closed instead)."""
        ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        up = RecordingUpstream(lambda conn, nth, head: ok)
        try:
            got = one_at_a_time(self.port, [
                self.router_req("POST", up.port, "/a", b"Content-Length: 00\r\n"),
                self.router_req("GET", up.port, "/b")])
        finally:
            up.close()
        self.assertEqual([statuses(g)[:1] for g in got], [[200], [200]], got)
        self.assertEqual([c for c, _ in up.heads], [0, 0], up.heads)  # one connection

    def test_head_passes_the_content_length_on(self):
        """A HEAD's answer keeps the upstream's Content-Length (it said 0)."""
        up = RecordingUpstream(lambda conn, nth, head: b"HTTP/1.1 200 OK\r\nContent-Length: 12345\r\n\r\n")
        try:
            got = one_at_a_time(self.port, [self.router_req("HEAD", up.port, "/f")])
        finally:
            up.close()
        self.assertEqual(statuses(got[0])[:1], [200], got)
        self.assertRegex(got[0], rb"(?i)\r\ncontent-length: 12345\r\n")

    def test_client_half_close_passed_on(self):
        """A client's EOF (a half-close, or a client that went away: they look the same)
        reaches sandboxd as if the client spoke to it directly: a silent run whose client
        gave up is killed there, while a GET (a 3 MiB download included) still gets its
        answer."""
        raw = exchange(self.port, self.t.head("GET", self.t.health, b"Connection: close\r\n\r\n"),
                       close_write=True)
        self.assertEqual(statuses(raw)[:1], [200], raw[:300])
        # a download larger than sandboxd sends at once (it streams it with a length)
        data = bytes(range(256)) * (3 << 12)
        c = http.client.HTTPConnection("127.0.0.1", self.sport, timeout=10)
        c.request("PUT", "/v1/files/half-closed.bin", data)
        self.assertLess(c.getresponse().status, 300)
        c.close()
        raw = exchange(self.port, self.t.head("GET", self.base + "/v1/files/half-closed.bin",
                                              b"Connection: close\r\n\r\n"),
                       timeout=20, close_write=True)
        self.assertEqual(statuses(raw)[:1], [200], raw[:300])
        self.assertEqual(http_body(raw), data)
        body = json.dumps({"command": ["sleep", "47"]}).encode()
        head = (f"POST {self.post_path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n").encode() + self.t.headers + b"\r\n"
        # The socket stays open (half-closed) until the run is seen gone: a write to a
        # closed one would end the request in the router any way.
        cli = socket.create_connection(("127.0.0.1", self.port), 20)
        cli.sendall(head + body)
        cli.shutdown(socket.SHUT_WR)

        def sleeping():
            c = http.client.HTTPConnection("127.0.0.1", self.sport, timeout=10)
            c.request("GET", "/v1/processes")
            procs = json.loads(c.getresponse().read())["processes"]
            c.close()
            return [p for p in procs if "47" in json.dumps(p.get("command"))]

        try:
            cli.settimeout(10)
            try:  # the run's end: sandboxd closes, the router answers (502) and closes
                while cli.recv(4096):
                    pass
            except OSError:
                pass
            end = time.monotonic() + 10
            while sleeping() and time.monotonic() < end:
                time.sleep(0.1)
            self.assertEqual(sleeping(), [])  # without the EOF passed on: running for 47 s
        finally:
            cli.close()
        self.t.healthy(self)

    def test_upgrade_half_closed_before_101_goes(self):
        """An upgrade whose client half-closes before the upstream's answer cannot become a
        tunnel: the router lets it go and closes its upstream connection, instead of
        holding both (and a tunnel's room) until an answer or the timeouts."""
        seen = []

        def serve(c):
            if c is None:
                seen.append("no connection")
                return
            c.settimeout(15)
            got = b""
            try:
                while True:
                    chunk = c.recv(4096)
                    if not chunk:
                        seen.append("closed" if b"\r\n\r\n" in got else "cut")
                        return
                    got += chunk
            except OSError:
                seen.append("still open")  # the router held it

        port, th = loopback_upstream(serve)
        raw = exchange(self.port, self.router_req(
            "GET", port, "/ws", b"Connection: Upgrade\r\nUpgrade: websocket\r\n"),
            timeout=20, close_write=True)
        th.join(20)
        self.assertEqual(raw, b"")
        # closed after the request was forwarded, or before (the EOF came first), or
        # never dialled: anything but held
        self.assertEqual(len(seen), 1, seen)
        self.assertIn(seen[0], ("closed", "cut", "no connection"))
        self.t.healthy(self)

    def test_every_connection_field_names_hop_by_hop_headers(self):
        """Fields named in any Connection field, not just the first, stay on their hop,
        both ways."""
        up = RecordingUpstream(lambda conn, nth, head: (
            b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nConnection: X-Up-Secret\r\n"
            b"X-Up-Secret: u\r\nContent-Length: 2\r\n\r\nok"))
        try:
            got = one_at_a_time(self.port, [self.router_req(
                "GET", up.port, "/h", b"Connection: keep-alive\r\nConnection: X-Secret\r\nX-Secret: s\r\n")])
        finally:
            up.close()
        self.assertEqual(statuses(got[0])[:1], [200], got)
        self.assertEqual(len(up.heads), 1, up.heads)
        self.assertNotIn(b"x-secret", up.heads[0][1].lower())
        self.assertNotIn(b"x-up-secret", got[0].lower())

class RecordingUpstream:
    """An upstream on loopback that records every request head it reads (as
    (connection number, head bytes)) and answers each with answer(conn, nth, head): the
    bytes to send, or None to reset the connection unanswered."""

    def __init__(self, answer):
        self.answer = answer
        self.heads = []
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(8)
        self.srv.settimeout(0.2)
        self.port = self.srv.getsockname()[1]
        self.done = threading.Event()
        self.th = threading.Thread(target=self._accept, daemon=True)
        self.th.start()

    def _accept(self):
        n = 0
        while not self.done.is_set():
            try:
                c, _ = self.srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c, n), daemon=True).start()
            n += 1

    def _serve(self, c, conn):
        with c:
            c.settimeout(10)
            buf, nth = b"", 0
            try:
                while True:
                    while b"\r\n\r\n" not in buf:
                        chunk = c.recv(4096)
                        if not chunk:
                            return
                        buf += chunk
                    head, _, buf = buf.partition(b"\r\n\r\n")
                    self.heads.append((conn, head))
                    out = self.answer(conn, nth, head)
                    nth += 1
                    if out is None:
                        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        return
                    c.sendall(out)
            except OSError:
                return

    def close(self):
        self.done.set()
        self.srv.close()


def one_at_a_time(port, requests, timeout=10):
    """Sends each request on one connection after the answer to the one before it;
    returns the answers' heads and bodies as raw bytes, one per request (b"" when the
    connection ended first)."""
    s = socket.create_connection(("127.0.0.1", port), timeout)
    out = []
    try:
        for req in requests:
            s.sendall(req)
            raw = b""
            while True:
                head, sep, rest = raw.partition(b"\r\n\r\n")
                if sep:
                    m = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
                    want = int(m.group(1)) if m and not req.startswith(b"HEAD ") else 0
                    if len(rest) >= want:
                        break
                try:
                    chunk = s.recv(65536)
                except (socket.timeout, ConnectionResetError):
                    chunk = b""
                if not chunk:
                    break
                raw += chunk
            out.append(raw)
    finally:
        s.close()
    return out



def loopback_upstream(serve, accept_timeout=10):
    """A one-connection upstream on loopback: on a thread, serve(conn) for the first
    connection, which is closed after it (serve(None) when none came within
    accept_timeout). Returns (port, thread)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(accept_timeout)

    def run():
        try:
            c, _ = srv.accept()
        except OSError:
            serve(None)
            return
        finally:
            srv.close()
        with c:
            serve(c)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return srv.getsockname()[1], th


def upstream_once(answer, reset, linger=0.3):
    """A one-shot upstream on loopback: reads one request head, sends answer, waits linger
    seconds (so the router has read it all) and closes, with a reset if asked. Returns
    (port, thread)."""
    def serve(c):
        if c is not None:
            c.settimeout(10)
            buf = b""
            while b"\r\n\r\n" not in buf:
                chunk = c.recv(4096)
                if not chunk:
                    return
                buf += chunk
            c.sendall(answer)
            time.sleep(linger)
            if reset:
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    return loopback_upstream(serve)


@unittest.skipUnless(router_available(), "needs SANDBOX_ROUTER_BIN and an API server")
class RouterHold(unittest.TestCase):
    """A request held while its Sandbox resumes (spec.idlePolicy) sends and receives no
    byte: the router's idle timeout (1 s here) must not end it before the resume does."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hostile-hold-")
        self.ns = new_namespace("hold-")
        self.p, self.port, self.log = start_router(self.dir, self.ns, "--idle-timeout", "1s")
        self.auth = f"Authorization: Bearer {admin_token()}\r\n".encode()

    def tearDown(self):
        rcs, log = stop_router((self.p,), (self.log,), self.dir, self.ns)
        self.assertEqual(rcs, [0], log)

    def sandbox(self, name, mode):
        kubectl("-n", self.ns, "apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
            "metadata": {"name": name},
            "spec": {"operatingMode": mode, "idlePolicy": {"timeoutSeconds": 600},
                     "podTemplate": {"spec": {"containers": [{"name": "r", "image": "i"}]}}}}))

    def ready(self, name):
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        kubectl("-n", self.ns, "patch", "sandbox", name, "--subresource=status",
                "--type=merge", "-p", json.dumps({"status": {
                    "podIPs": ["127.0.0.1"], "conditions": [{
                        "type": "Ready", "status": "True", "reason": "DependenciesReady",
                        "message": "", "lastTransitionTime": now}]}}))

    def get(self, name, port):
        return exchange(self.port, f"GET /s/{self.ns}/{name}/{port}/x HTTP/1.1\r\nHost: x\r\n"
                        .encode() + self.auth + b"Connection: close\r\n\r\n", timeout=30)

    def test_held_request_outlives_idle_timeout(self):
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nheld-ok"
        self.sandbox("sleepy", "Suspended")
        self.sandbox("awake", "Running")  # seen by the router after sleepy
        self.ready("awake")
        end = time.monotonic() + 30
        while True:
            port, th = upstream_once(answer, False, linger=0)
            raw = self.get("awake", port)
            if statuses(raw)[:1] == [200] or time.monotonic() > end:
                break
            with socket.create_connection(("127.0.0.1", port), 1):
                pass  # ends the upstream's wait
            time.sleep(0.2)
        self.assertEqual(statuses(raw)[:1], [200], raw[:300])
        port, th = upstream_once(answer, False, linger=0)
        out = {}
        t0 = time.monotonic()
        client = threading.Thread(target=lambda: out.update(raw=self.get("sleepy", port)))
        client.start()
        end = time.monotonic() + 20  # the router's resume patch
        while json.loads(kubectl("-n", self.ns, "get", "sandbox", "sleepy", "-o", "json"))[
                "spec"]["operatingMode"] != "Running":
            self.assertLess(time.monotonic(), end, "the router did not resume the Sandbox")
            time.sleep(0.1)
        time.sleep(max(0.0, t0 + 2.5 - time.monotonic()))  # held past the 1 s idle timeout
        self.assertTrue(client.is_alive(), out.get("raw", b"")[:300])  # not answered yet
        self.ready("sleepy")
        client.join(30)
        th.join(10)
        self.assertEqual(statuses(out.get("raw", b""))[:1], [200], out.get("raw", b"")[:300])
        self.assertTrue(out["raw"].endswith(b"held-ok"))

    def test_long_run_outlives_idle_timeout(self):
        # A run through the router that prints nothing for longer than the router's idle
        # timeout (1 s here; 60 s by default): sandboxd's keepalives (--process-keepalive,
        # 0.3 s here) start the answer and send spaces, so the router passes it on to
        # the end instead of answering 504. A background process's output follow and
        # wait the same.
        sport = free_port()
        root = os.path.join(self.dir, "root")
        slog = open(os.path.join(self.dir, "sandboxd.log"), "wb")
        sbd = subprocess.Popen([SBD, "--host", "127.0.0.1", "--port", str(sport),
                                "--legacy-port", "-1", "--grpc-port", "0", "--root", root,
                                "--process-keepalive", "0.3", "--log-level", "warn"],
                               env=ENV, stdout=slog, stderr=slog)
        try:
            wait_port(sport, sbd, "sandboxd")
            self.sandbox("runner", "Running")
            self.ready("runner")
            base = f"/s/{self.ns}/runner/{sport}"
            end = time.monotonic() + 30
            while True:  # the router's cache sees the Sandbox
                raw = exchange(self.port, f"GET {base}/v1/health HTTP/1.1\r\nHost: x\r\n"
                               .encode() + self.auth + b"Connection: close\r\n\r\n")
                if statuses(raw)[:1] == [200] or time.monotonic() > end:
                    break
                time.sleep(0.2)
            self.assertEqual(statuses(raw)[:1], [200], raw[:300])
            body = json.dumps({"command": ["sh", "-c", "sleep 2.5; echo ok"]}).encode()
            raw = exchange(self.port, f"POST {base}/v1/processes/run HTTP/1.1\r\nHost: x\r\n"
                           f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                           .encode() + self.auth + b"Connection: close\r\n\r\n" + body,
                           timeout=30)
            self.assertEqual(statuses(raw)[:1], [200], raw[:300])
            self.assertIn(b'"stdout":"ok\\n"', raw)
            # A background process's output follow and its wait, silent as long: the
            # follow gets keepalive lines, the wait's answer spaces, and both reach the end.
            body = json.dumps({"command": ["sh", "-c", "sleep 2.5; echo ok"],
                               "background": True}).encode()
            raw = exchange(self.port, f"POST {base}/v1/processes HTTP/1.1\r\nHost: x\r\n"
                           f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                           .encode() + self.auth + b"Connection: close\r\n\r\n" + body)
            self.assertEqual(statuses(raw)[:1], [201], raw[:300])
            pid = json.loads(raw.split(b"\r\n\r\n", 1)[1])["id"]
            for path, want in (("output?follow=true", b'"data":"b2sK"'),
                               ("wait?timeout=20", b'"exit_code":0')):
                raw = exchange(self.port, f"GET {base}/v1/processes/{pid}/{path} HTTP/1.1\r\n"
                               "Host: x\r\n".encode() + self.auth + b"Connection: close\r\n\r\n",
                               timeout=30)
                self.assertEqual(statuses(raw)[:1], [200], raw[:300])
                self.assertIn(want, raw)
        finally:
            sbd.send_signal(signal.SIGTERM)
            self.assertEqual(sbd.wait(timeout=30), 0)
            slog.close()


@unittest.skipUnless(router_available(), "needs SANDBOX_ROUTER_BIN and an API server")
class RouterShutdown(unittest.TestCase):
    """SIGTERM: one --shutdown-timeout for everything, from the signal."""

    def test_tunnels_get_what_remains_of_the_grace(self):
        """A request in flight that never ends takes the whole grace of the request drain;
        an open tunnel then gets what remains of it (nothing), not a grace of its own: the
        router is gone within one --shutdown-timeout (3 s here), as the Pod's
        terminationGracePeriodSeconds expects (before: 3 s more for the tunnel)."""
        d = tempfile.mkdtemp(prefix="hostile-shutdown-")
        ns = new_namespace("shut-")
        p, port, log = start_router(d, ns, "--shutdown-timeout", "3s")
        auth = f"Authorization: Bearer {admin_token()}\r\n".encode()
        kubectl("-n", ns, "apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
            "metadata": {"name": "box"},
            "spec": {"podTemplate": {"spec": {"containers": [{"name": "r", "image": "i"}]}}}}))
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        kubectl("-n", ns, "patch", "sandbox", "box", "--subresource=status", "--type=merge",
                "-p", json.dumps({"status": {"podIPs": ["127.0.0.1"], "conditions": [{
                    "type": "Ready", "status": "True", "reason": "DependenciesReady",
                    "message": "", "lastTransitionTime": now}]}}))

        def req(up_port, path, extra=b""):
            return (f"GET /s/{ns}/box/{up_port}{path} HTTP/1.1\r\nHost: x\r\n".encode() + auth
                    + extra + b"\r\n")

        ok = RecordingUpstream(lambda conn, nth, head: b"HTTP/1.1 200 OK\r\n"
                               b"Content-Length: 2\r\n\r\nok")
        heads = threading.Semaphore(0)

        def hold(c, answer):
            if c is None:
                return
            c.settimeout(30)
            got = b""
            try:
                while b"\r\n\r\n" not in got:
                    got += c.recv(4096)
                c.sendall(answer)
                heads.release()
                while c.recv(4096):
                    pass
            except OSError:
                pass

        clients = []
        try:
            end = time.monotonic() + 30
            while True:  # the router's cache sees the Sandbox
                raw = one_at_a_time(port, [req(ok.port, "/")])[0]
                if statuses(raw)[:1] == [200] or time.monotonic() > end:
                    break
                time.sleep(0.2)
            self.assertEqual(statuses(raw)[:1], [200], raw[:300])
            tport, tth = loopback_upstream(lambda c: hold(
                c, b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n"))
            hport, hth = loopback_upstream(lambda c: hold(c, b""))
            tun = socket.create_connection(("127.0.0.1", port), 10)
            clients.append(tun)
            tun.sendall(req(tport, "/t", b"Connection: Upgrade\r\nUpgrade: x\r\n"))
            got = b""
            while b"\r\n\r\n" not in got:
                chunk = tun.recv(4096)
                self.assertTrue(chunk, got)
                got += chunk
            self.assertEqual(statuses(got)[:1], [101], got[:200])
            slow = socket.create_connection(("127.0.0.1", port), 10)
            clients.append(slow)
            slow.sendall(req(hport, "/never"))
            self.assertTrue(heads.acquire(timeout=10) and heads.acquire(timeout=10))
            t0 = time.monotonic()
            p.send_signal(signal.SIGTERM)
            rc = p.wait(timeout=30)
            took = time.monotonic() - t0
        finally:
            for c in clients:
                c.close()
            ok.close()
            rcs, tail = stop_router((p,), (log,), d, ns)
        self.assertEqual(rc, 0, tail)
        self.assertGreater(took, 2.5)  # the request had its grace
        self.assertLess(took, 5.5, tail)  # and the tunnel no second one (before: 6-7 s)


if __name__ == "__main__":
    unittest.main()
