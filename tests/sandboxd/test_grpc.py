#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Conformance tests of sandboxd's gRPC ProcessService (api/proto/process/v1/process.proto)
with grpcio against the real binary on 127.0.0.1: every RPC, every error code, deadlines,
cancellation, 64 MiB of streamed output, PTY resize, 1,000 concurrent Execute calls, a
client that stops reading (sandboxd's RSS stays bounded), auth, the SIGTERM drain and
server reflection.

The Python stubs are generated at test time into a temporary directory with grpcio-tools.
hack/grpc-tests.sh makes the venv (.cache/grpc-venv) and runs this file:

  SANDBOXD_BIN=build/asan/sandboxd hack/grpc-tests.sh
"""
import base64
import http.client
import json
import urllib.request
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from concurrent import futures

import grpc
from google.protobuf import empty_pb2
from grpc_tools import protoc

BIN = os.environ.get("SANDBOXD_BIN", "build/asan/sandboxd")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_ROOT = os.path.join(REPO, "api", "proto")
MIB = 1024 * 1024


def load_stubs():
    out = tempfile.mkdtemp(prefix="sbd-grpc-stubs-")
    inc = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    rc = protoc.main(["protoc", f"-I{PROTO_ROOT}", f"-I{inc}", f"--python_out={out}",
                      f"--grpc_python_out={out}", "process/v1/process.proto"])
    if rc != 0:
        raise RuntimeError("protoc failed")
    sys.path.insert(0, out)
    from process.v1 import process_pb2, process_pb2_grpc  # noqa: E402
    return process_pb2, process_pb2_grpc


pb, pbg = load_stubs()

# grpc/reflection/v1/reflection.proto's messages (v1alpha has the same), compiled at test
# time like the process stubs, to speak to the reflection service as grpcurl does.
REFLECTION_PROTO = """
syntax = "proto3";
package grpc.reflection.v1;
message ServerReflectionRequest {
  string host = 1;
  oneof message_request {
    string file_by_filename = 3;
    string file_containing_symbol = 4;
    ExtensionRequest file_containing_extension = 5;
    string all_extension_numbers_of_type = 6;
    string list_services = 7;
  }
}
message ExtensionRequest { string containing_type = 1; int32 extension_number = 2; }
message ServerReflectionResponse {
  string valid_host = 1;
  ServerReflectionRequest original_request = 2;
  oneof message_response {
    FileDescriptorResponse file_descriptor_response = 4;
    ExtensionNumberResponse all_extension_numbers_response = 5;
    ListServiceResponse list_services_response = 6;
    ErrorResponse error_response = 7;
  }
}
message FileDescriptorResponse { repeated bytes file_descriptor_proto = 1; }
message ExtensionNumberResponse { string base_type_name = 1; repeated int32 extension_number = 2; }
message ListServiceResponse { repeated ServiceResponse service = 1; }
message ServiceResponse { string name = 1; }
message ErrorResponse { int32 error_code = 1; string error_message = 2; }
"""


def load_reflection_stubs():
    out = tempfile.mkdtemp(prefix="sbd-grpc-reflection-")
    os.makedirs(os.path.join(out, "sbd_reflection"))
    with open(os.path.join(out, "sbd_reflection", "reflection.proto"), "w") as f:
        f.write(REFLECTION_PROTO)
    if protoc.main(["protoc", f"-I{out}", f"--python_out={out}", "sbd_reflection/reflection.proto"]) != 0:
        raise RuntimeError("protoc failed")
    sys.path.insert(0, out)
    from sbd_reflection import reflection_pb2  # noqa: E402
    return reflection_pb2


rpb = load_reflection_stubs()


H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def h2_frame(typ, flags, stream, payload):
    return len(payload).to_bytes(3, "big") + bytes([typ, flags]) + stream.to_bytes(4, "big") + payload


def hpack_literal(name, value):
    """One header as an HPACK literal without indexing (names and values under 127 bytes)."""
    n, v = name.encode(), value.encode()
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


def raw_call_head(token=None, content_type="application/grpc", method="Execute"):
    """A gRPC request head for method (Execute), as one HEADERS block (content_type None:
    none)."""
    hs = [(":method", "POST"), (":scheme", "http"), (":authority", "127.0.0.1"),
          (":path", f"/process.v1.ProcessService/{method}"), ("te", "trailers")]
    if content_type:
        hs.append(("content-type", content_type))
    if token:
        hs.append(("authorization", f"Bearer {token}"))
    return b"".join(hpack_literal(n, v) for n, v in hs)


def read_frames(s, until):
    """Reads frames as (type, flags, stream, payload) until `until(frame)` is true."""
    buf = b""
    while True:
        while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
            n = int.from_bytes(buf[:3], "big")
            f = (buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF, buf[9:9 + n])
            buf = buf[9 + n:]
            if until(f):
                return f
        chunk = s.recv(65536)
        if not chunk:
            raise AssertionError("connection closed")
        buf += chunk


def no_window_conn(port):
    """A raw HTTP/2 connection whose client grants its streams no flow-control window
    (SETTINGS_INITIAL_WINDOW_SIZE 0): answers stay queued in sandboxd."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(20)
    no_window = (4).to_bytes(2, "big") + (0).to_bytes(4, "big")
    s.sendall(H2_PREFACE + h2_frame(4, 0, 0, no_window))
    return s


def raw_execute(s, sid, req, method="Execute"):
    """Starts the call req (an ExecuteRequest, or the request of method) as stream sid of a
    raw connection."""
    body = req.SerializeToString()
    s.sendall(
        h2_frame(1, 4, sid, raw_call_head(method=method))
        + h2_frame(0, 1, sid, b"\x00" + len(body).to_bytes(4, "big") + body)
    )


def answer_heads(s, sids):
    """Reads until each of the streams sids got the HEADERS of its answer (flow control
    does not hold those back). Returns {sid: whether they ended the stream (trailers-only:
    a refusal)}."""
    ends = {}

    def head(f):
        if f[0] == 1 and f[2] in sids:
            ends[f[2]] = bool(f[1] & 1)
        return len(ends) == len(sids)

    read_frames(s, head)
    return ends


def take_all(s, sids):
    """Opens the windows of a no_window_conn (the connection's and those of the streams
    sids) and reads until each of sids ended. Returns {sid: the DATA bytes it got}."""
    if not sids:
        return {}
    grow = (2**31 - 1 - 65535).to_bytes(4, "big")
    s.sendall(h2_frame(8, 0, 0, grow) + b"".join(h2_frame(8, 0, sid, (2**31 - 1).to_bytes(4, "big")) for sid in sids))
    data = {sid: bytearray() for sid in sids}
    ended = set()

    def take(f):
        typ, flags, sid, payload = f
        if sid in data and typ == 0:
            data[sid] += payload
            s.sendall(h2_frame(8, 0, 0, len(payload).to_bytes(4, "big")) if payload else b"")
        if sid in data and typ in (0, 1) and flags & 1:
            ended.add(sid)
        return len(ended) == len(sids)

    read_frames(s, take)
    return {sid: bytes(b) for sid, b in data.items()}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def wchar(pid):
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    return 0


def wait_gone(pid, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


def read_pid(path, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(path) as f:
                s = f.read().strip()
            if s:
                return int(s)
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"no pid in {path}")


class Daemon:
    def __init__(self, *args, env=None, preexec_fn=None):
        self.dir = tempfile.mkdtemp(prefix="sbd-grpc-")
        self.root = os.path.join(self.dir, "root")
        self.port, self.gport = free_port(), free_port()
        env = dict(os.environ, **(env or {}))
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1")
        self.p = subprocess.Popen(
            [BIN, "--host", "127.0.0.1", "--port", str(self.port), "--legacy-port", "-1",
             "--grpc-port", str(self.gport), "--root", self.root, "--log-level", "warn", *args],
            env=env, preexec_fn=preexec_fn)
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                socket.create_connection(("127.0.0.1", self.gport), 0.2).close()
                break
            except OSError:
                time.sleep(0.02)
        else:
            raise RuntimeError("sandboxd did not start")
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.gport}")
        self.stub = pbg.ProcessServiceStub(self.channel)

    def stop(self, sig=signal.SIGTERM):
        self.channel.close()
        if self.p.poll() is None:
            self.p.send_signal(sig)
        rc = self.p.wait(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)
        return rc


def cfg(*command, env=None, cwd=None):
    c = pb.ProcessConfig(command=list(command), env_vars=env or {})
    if cwd is not None:
        c.cwd = cwd
    return c


class GrpcTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon("--max-procs", "256")
        cls.stub = cls.d.stub

    @classmethod
    def tearDownClass(cls):
        rc = cls.d.stop()
        assert rc == 0, f"sandboxd exited with {rc}"

    def code_of(self, fn, *a, **kw):
        with self.assertRaises(grpc.RpcError) as cm:
            r = fn(*a, **kw)
            if hasattr(r, "__iter__") and not isinstance(r, (bytes, str)):
                list(r)
        return cm.exception.code(), cm.exception.details()

    # ---- Execute ---------------------------------------------------------------------

    def test_execute(self):
        os.makedirs(os.path.join(self.d.root, "sub"), exist_ok=True)
        r = self.stub.Execute(pb.ExecuteRequest(config=cfg(
            "sh", "-c", 'echo "$GREETING"; pwd; echo oops >&2; exit 3', env={"GREETING": "hi"},
            cwd="sub")), timeout=10)
        self.assertEqual(r.exit_code, 3)
        self.assertEqual(r.stdout, f"hi\n{os.path.join(self.d.root, 'sub')}\n".encode())
        self.assertEqual(r.stderr, b"oops\n")

    def test_execute_default_cwd_is_root(self):
        r = self.stub.Execute(pb.ExecuteRequest(config=cfg("pwd")), timeout=10)
        self.assertEqual(r.stdout.decode().strip(), self.d.root)

    def test_execute_signal_exit_code(self):
        r = self.stub.Execute(pb.ExecuteRequest(config=cfg("sh", "-c", "kill -9 $$")), timeout=10)
        self.assertEqual(r.exit_code, -1)

    def test_execute_stdin_is_dev_null(self):
        """Execute's command has /dev/null as stdin, as upstream's: it was an empty pipe,
        so a tool that reads a piped stdin instead of its usual input (rg searches stdin
        rather than the directory when it is a pipe) found nothing."""
        r = self.stub.Execute(pb.ExecuteRequest(config=cfg(
            "sh", "-c", "readlink /proc/self/fd/0; [ -p /dev/stdin ] && echo pipe || echo notpipe")),
            timeout=10)
        self.assertEqual((r.exit_code, r.stdout), (0, b"/dev/null\nnotpipe\n"))
        # Start keeps its pipe, for WriteStdin.
        it = self.stub.Start(pb.StartRequest(config=cfg(
            "sh", "-c", "[ -p /dev/stdin ] && echo pipe || echo notpipe")), timeout=10)
        out = b"".join(ev.stdout for ev in it)
        self.assertEqual(out, b"pipe\n")

    def test_late_output_of_descendants(self):
        """Output a background descendant writes after the command exited is waited for as
        upstream waits: 10 s for Execute (its WaitDelay), 5 s for Start; it was 2 s, so a
        line 3 s late was lost."""
        t0 = time.monotonic()
        r = self.stub.Execute(pb.ExecuteRequest(config=cfg(
            "sh", "-c", "(sleep 3; echo late) & echo early")), timeout=30)
        self.assertEqual((r.exit_code, r.stdout), (0, b"early\nlate\n"))
        self.assertGreaterEqual(time.monotonic() - t0, 2.9)
        it = self.stub.Start(pb.StartRequest(config=cfg(
            "sh", "-c", "(sleep 3; echo late) & echo early")), timeout=30)
        out = b"".join(ev.stdout for ev in it)
        self.assertEqual(out, b"early\nlate\n")

    def test_invalid_argument_empty_command(self):
        code, _ = self.code_of(self.stub.Execute, pb.ExecuteRequest(config=cfg()), timeout=5)
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)
        code, _ = self.code_of(self.stub.Execute, pb.ExecuteRequest(), timeout=5)
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)
        code, _ = self.code_of(self.stub.Start, pb.StartRequest(config=cfg()), timeout=5)
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)

    def test_permission_denied_cwd_escape(self):
        code, msg = self.code_of(self.stub.Execute,
                                 pb.ExecuteRequest(config=cfg("true", cwd="../../..")), timeout=5)
        self.assertEqual(code, grpc.StatusCode.PERMISSION_DENIED, msg)
        os.symlink("/", os.path.join(self.d.root, "escape"))
        code, msg = self.code_of(self.stub.Execute,
                                 pb.ExecuteRequest(config=cfg("true", cwd="escape")), timeout=5)
        self.assertEqual(code, grpc.StatusCode.PERMISSION_DENIED, msg)

    def test_start_errors_as_upstream(self):
        """A command that cannot start: NOT_FOUND for a missing binary or cwd,
        PERMISSION_DENIED for one that may not be run, as upstream's sandboxd answers
        (both were INTERNAL), for Execute and Start alike."""
        with open(os.path.join(self.d.root, "plain.txt"), "w") as f:
            f.write("not a program\n")
        cases = [
            (cfg("no-such-command-xyz"), grpc.StatusCode.NOT_FOUND),
            (cfg("/no/such/dir/prog"), grpc.StatusCode.NOT_FOUND),
            (cfg("true", cwd="no-such-dir"), grpc.StatusCode.NOT_FOUND),
            (cfg(os.path.join(self.d.root, "plain.txt")), grpc.StatusCode.PERMISSION_DENIED),
        ]
        for c, want in cases:
            code, msg = self.code_of(self.stub.Execute, pb.ExecuteRequest(config=c), timeout=5)
            self.assertEqual(code, want, (list(c.command), c.cwd, msg))
            self.assertIn("failed to start command", msg)
            with self.assertRaises(grpc.RpcError) as cm:
                for _ in self.stub.Start(pb.StartRequest(config=c), timeout=5):
                    pass
            self.assertEqual(cm.exception.code(), want, (list(c.command), c.cwd))

    def test_header_list_bound(self):
        """Request headers over the advertised SETTINGS_MAX_HEADER_LIST_SIZE (16 KiB) are
        refused with RESOURCE_EXHAUSTED (nghttp2 only advertises it: a 90 KB header list
        ran the command); under it they are served."""
        big = [(f"x-pad-{i}", "a" * 15000) for i in range(6)]
        code, msg = self.code_of(self.stub.Execute, pb.ExecuteRequest(config=cfg("true")),
                                 timeout=5, metadata=big)
        self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED, msg)
        self.assertIn("headers over 16 KiB", msg)
        small = [(f"x-pad-{i}", "a" * 1000) for i in range(6)]
        r = self.stub.Execute(pb.ExecuteRequest(config=cfg("true")), timeout=5, metadata=small)
        self.assertEqual(r.exit_code, 0)

    def test_not_found_unknown_process(self):
        for call, req in [
            (self.stub.WriteStdin, pb.WriteStdinRequest(process_id=999999, input=b"x")),
            (self.stub.SendSignal, pb.SendSignalRequest(process_id=999999,
                                                        signal=pb.SIGNAL_SIGTERM)),
            (self.stub.ResizeTTY, pb.ResizeTTYRequest(process_id=999999, cols=80, rows=24)),
            (self.stub.WriteStdin, pb.WriteStdinRequest(process_id=0, input=b"x")),
        ]:
            code, _ = self.code_of(call, req, timeout=5)
            self.assertEqual(code, grpc.StatusCode.NOT_FOUND)

    def test_unimplemented_unknown_method(self):
        m = self.d.channel.unary_unary("/process.v1.ProcessService/Nope")
        code, _ = self.code_of(m, b"", timeout=5)
        self.assertEqual(code, grpc.StatusCode.UNIMPLEMENTED)
        m = self.d.channel.unary_unary("/other.Service/Execute")
        code, _ = self.code_of(m, b"", timeout=5)
        self.assertEqual(code, grpc.StatusCode.UNIMPLEMENTED)

    def test_undecodable_request(self):
        m = self.d.channel.unary_unary("/process.v1.ProcessService/Execute")
        code, _ = self.code_of(m, b"\xff\xff\xff", timeout=5)
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)

    def test_nul_in_strings_refused(self):
        """A NUL byte in an argument, a variable's name or value, or the cwd is refused
        (INVALID_ARGUMENT), not cut short: `echo a<NUL>b` must not run as `echo a`."""
        marker = os.path.join(self.d.root, "nul-ran")
        configs = [
            cfg("sh", "-c", f"touch {marker}", "a\x00b"),
            cfg("sh\x00x", "-c", f"touch {marker}"),
            cfg("sh", "-c", f"touch {marker}", env={"X": "a\x00b"}),
            cfg("sh", "-c", f"touch {marker}", env={"X\x00Y": "v"}),
            cfg("sh", "-c", f"touch {marker}", cwd="sub\x00dir"),
        ]
        for c in configs:
            for call, req in ((self.stub.Execute, pb.ExecuteRequest(config=c)),
                              (self.stub.Start, pb.StartRequest(config=c))):
                code, msg = self.code_of(call, req, timeout=5)
                self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT, (c, msg))
                self.assertIn("NUL", msg)
        self.assertFalse(os.path.exists(marker))

    def test_non_utf8_argument_listed(self):
        """An argument that is not UTF-8 (grpcio's Python refuses to send one; another
        client need not) runs, and the REST listing of the processes still encodes: it
        answered 500 for every client while such a process was there."""
        raw = pb.StartRequest(config=cfg("sh", "-c", "sleep 30", "ARGUMENT-X")).SerializeToString()
        raw = raw.replace(b"ARGUMENT-X", b"ARGUMENT-\xff")
        start = self.d.channel.unary_stream("/process.v1.ProcessService/Start",
                                            response_deserializer=pb.StartResponse.FromString)
        it = start(raw, timeout=30)
        try:
            pid = next(it).init.process_id
            with urllib.request.urlopen(f"http://127.0.0.1:{self.d.port}/v1/processes",
                                        timeout=10) as r:
                self.assertEqual(r.status, 200)
                listed = json.loads(r.read())
            self.assertIn(pid, [p["id"] for p in listed["processes"]])
        finally:
            it.cancel()

    def test_connections_have_keepalive(self):
        """An accepted gRPC connection has TCP keepalive on: a client gone without a FIN or
        RST (a partition, a laptop asleep) ends its calls and their processes, where a
        silent Start held its process (and kept the Sandbox from idling) for ever. The
        kernel shows the keepalive timer of the idle server side (/proc/net/tcp: tr 2)."""
        self.assertEqual(self.stub.Execute(pb.ExecuteRequest(config=cfg("true")), timeout=10).exit_code, 0)
        local = "0100007F:%04X" % self.d.gport
        end = time.monotonic() + 2  # until the client's ACKs, a timer may be the retransmission's
        while True:
            timers = []
            with open("/proc/net/tcp") as f:
                for line in f.readlines()[1:]:
                    fields = line.split()
                    if fields[1] == local and fields[3] == "01":
                        timers.append(fields[5].split(":")[0])
            if (timers and set(timers) == {"02"}) or time.monotonic() > end:
                break
            time.sleep(0.02)
        self.assertTrue(timers, "no established connection to the gRPC port")
        self.assertEqual(set(timers), {"02"})

    def test_duplicate_env_last_wins(self):
        """A map entry sent twice (two messages merged on the wire) keeps the last value,
        as protobuf's map semantics and Go's os/exec do."""
        first = pb.ExecuteRequest(config=cfg("env", env={"X": "first"}))
        last = pb.ExecuteRequest(config=pb.ProcessConfig(env_vars={"X": "last"}))
        m = self.d.channel.unary_unary("/process.v1.ProcessService/Execute",
                                       response_deserializer=pb.ExecuteResponse.FromString)
        r = m(first.SerializeToString() + last.SerializeToString(), timeout=10)
        # one X in the child's environment (getenv would read the first of two)
        self.assertEqual([v for v in r.stdout.split(b"\n") if v.startswith(b"X=")], [b"X=last"])

    def test_request_too_large(self):
        ch = grpc.insecure_channel(f"127.0.0.1:{self.d.gport}",
                                   options=[("grpc.max_send_message_length", 64 * MIB)])
        try:
            stub = pbg.ProcessServiceStub(ch)
            code, _ = self.code_of(stub.Execute,
                                   pb.ExecuteRequest(config=cfg("true", "x" * (5 * MIB))), timeout=20)
            self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED)
            # The connection still serves calls afterwards.
            self.assertEqual(stub.Execute(pb.ExecuteRequest(config=cfg("true")), timeout=10).exit_code, 0)
        finally:
            ch.close()

    def test_running_calls_release_their_request(self):
        """Four Starts of nearly 4 MiB each (padded with an unknown field) stay running;
        a small call on the same channel is still served: a running call's request leaves
        the connection's 16 MiB budget once the handler has unpacked it (it was held until
        the call ended, and the WriteStdin got RESOURCE_EXHAUSTED)."""
        def varint(n):
            out = b""
            while True:
                b, n = n & 0x7F, n >> 7
                out += bytes([b | (0x80 if n else 0)])
                if not n:
                    return out
        base = pb.StartRequest(config=cfg("sleep", "60")).SerializeToString()
        pad = 4 * MIB - 8 - len(base) - len(varint(99 << 3 | 2)) - len(varint(4 * MIB))
        req = base + varint(99 << 3 | 2) + varint(pad) + b"\0" * pad  # 8 bytes under 4 MiB
        ch = grpc.insecure_channel(f"127.0.0.1:{self.d.gport}",
                                   options=[("grpc.max_send_message_length", 64 * MIB)])
        its = []
        try:
            start = ch.unary_stream("/process.v1.ProcessService/Start",
                                    response_deserializer=pb.StartResponse.FromString)
            pids = []
            for _ in range(4):
                it = start(req, timeout=60)
                its.append(it)
                pids.append(next(it).init.process_id)
            stub = pbg.ProcessServiceStub(ch)
            stub.WriteStdin(pb.WriteStdinRequest(process_id=pids[0], input=b"x"), timeout=10)
            self.assertEqual(stub.Execute(pb.ExecuteRequest(config=cfg("true")), timeout=10).exit_code, 0)
        finally:
            for it in its:
                it.cancel()
            ch.close()

    def test_raw_refusals_and_connection_window(self):
        """On a raw HTTP/2 connection: the server opens the connection's receive window to
        its 16 MiB budget (a WINDOW_UPDATE on stream 0; it stayed at 64 KiB); a request
        without a content-type is refused with 415, as gRPC asks; a body declaring more
        than 4 MiB is answered RESOURCE_EXHAUSTED and its stream reset (NO_ERROR), so the
        client stops sending the rest."""
        s = socket.create_connection(("127.0.0.1", self.d.gport))
        try:
            s.settimeout(10)
            s.sendall(H2_PREFACE + h2_frame(4, 0, 0, b""))
            wu = read_frames(s, lambda f: f[0] == 8 and f[2] == 0)
            self.assertEqual(int.from_bytes(wu[3], "big") & 0x7FFFFFFF, 16 * MIB - 65535)
            # no content-type: 415, trailers-only (END_STREAM on the HEADERS)
            s.sendall(h2_frame(1, 5, 1, raw_call_head(content_type=None)))
            f = read_frames(s, lambda f: f[0] == 1 and f[2] == 1)
            self.assertIn(b"415", f[3])  # :status, a literal (not in HPACK's static table)
            self.assertTrue(f[1] & 1)
            # a declared 5 MiB message: refused while its body arrives, then reset
            s.sendall(h2_frame(1, 4, 3, raw_call_head()) +
                      h2_frame(0, 0, 3, b"\x00" + (5 * MIB).to_bytes(4, "big") + b"x" * 1000))
            seen = []  # one read: frames after the one looked for are dropped
            rst = read_frames(s, lambda f: seen.append(f[0]) or (f[0] == 3 and f[2] == 3))
            self.assertIn(1, seen[:-1])  # the answer (trailers-only) came first
            self.assertEqual(rst[3], b"\x00\x00\x00\x00")  # NO_ERROR
        finally:
            s.close()

    def test_execute_large_output(self):
        """Execute's output over grpc's 4 MiB default no longer kills the command part-way:
        it runs to its end and its answer carries all of the output, as upstream's, which
        a client that raised its receive limit gets (one with the default refuses it,
        RESOURCE_EXHAUSTED on its side). Past 16 MiB the command still runs to its end
        and the call answers RESOURCE_EXHAUSTED with its exit code."""
        done = os.path.join(self.d.root, "large-output-done")
        code, msg = self.code_of(self.stub.Execute, pb.ExecuteRequest(config=cfg(
            "sh", "-c", f"head -c 5000000 /dev/zero; sleep .5; touch {done}")), timeout=20)
        self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED, msg)
        self.assertTrue(os.path.exists(done), "the command was killed part-way")
        ch = grpc.insecure_channel(f"127.0.0.1:{self.d.gport}",
                                   options=[("grpc.max_receive_message_length", 64 * MIB)])
        try:
            stub = pbg.ProcessServiceStub(ch)
            r = stub.Execute(pb.ExecuteRequest(config=cfg(
                "sh", "-c", "head -c 5000000 /dev/zero; head -c 1000 /dev/zero >&2; exit 4")),
                timeout=20)
            self.assertEqual((r.exit_code, len(r.stdout), len(r.stderr)), (4, 5000000, 1000))
            os.unlink(done)
            code, msg = self.code_of(stub.Execute, pb.ExecuteRequest(config=cfg(
                "sh", "-c", f"head -c {17 * MIB} /dev/zero; touch {done}; exit 5")), timeout=30)
            self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED, msg)
            self.assertIn(f"output of {17 * MIB} bytes", msg)
            self.assertIn("exit code 5", msg)
            self.assertTrue(os.path.exists(done))
        finally:
            ch.close()

    def test_server_reflection(self):
        """Server reflection, v1 and v1alpha, as upstream registers it (grpcurl's examples
        in upstream's guide use it): on one stream, each request answered before the next
        is sent, as grpcurl does, list_services names the ProcessService; the file that
        defines it, with its import, describes it well enough to call Execute from the
        descriptors alone; an unknown symbol or file is an ErrorResponse NOT_FOUND."""
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        import queue
        for pkg in ("grpc.reflection.v1", "grpc.reflection.v1alpha"):
            info = self.d.channel.stream_stream(
                f"/{pkg}.ServerReflection/ServerReflectionInfo",
                request_serializer=rpb.ServerReflectionRequest.SerializeToString,
                response_deserializer=rpb.ServerReflectionResponse.FromString)
            reqs = queue.Queue()
            answers = info(iter(reqs.get, None), timeout=20)

            def ask(**kw):
                reqs.put(rpb.ServerReflectionRequest(**kw))
                return next(answers)

            r = ask(list_services="")
            self.assertIn("process.v1.ProcessService", [s.name for s in r.list_services_response.service])
            self.assertIn(pkg + ".ServerReflection", [s.name for s in r.list_services_response.service])
            r = ask(host="h", file_containing_symbol="process.v1.ProcessService")
            self.assertEqual((r.valid_host, r.original_request.file_containing_symbol),
                             ("h", "process.v1.ProcessService"))
            files = [descriptor_pb2.FileDescriptorProto.FromString(b)
                     for b in r.file_descriptor_response.file_descriptor_proto]
            self.assertEqual([f.name for f in files],
                             ["process/v1/process.proto", "google/protobuf/empty.proto"])
            pool = descriptor_pool.DescriptorPool()
            for f in reversed(files):
                pool.Add(f)
            method = pool.FindServiceByName("process.v1.ProcessService").methods_by_name["Execute"]
            req_cls = message_factory.GetMessageClass(method.input_type)
            resp_cls = message_factory.GetMessageClass(method.output_type)
            req = req_cls()
            req.config.command.extend(["echo", "reflected"])
            execute = self.d.channel.unary_unary("/process.v1.ProcessService/Execute",
                                                 request_serializer=req_cls.SerializeToString,
                                                 response_deserializer=resp_cls.FromString)
            self.assertEqual(execute(req, timeout=10).stdout, b"reflected\n")
            for sym in ("process.v1.ExecuteRequest", "process.v1.ProcessService.Start",
                        "process.v1.SIGNAL_SIGTERM", "process.v1.ProcessConfig.cwd"):
                r = ask(file_containing_symbol=sym)
                self.assertEqual(r.WhichOneof("message_response"), "file_descriptor_response", sym)
            r = ask(file_by_filename="google/protobuf/empty.proto")
            self.assertEqual(len(r.file_descriptor_response.file_descriptor_proto), 1)
            for kw in ({"file_containing_symbol": "process.v1.Nope"},
                       {"file_by_filename": "nope.proto"},
                       {"file_containing_extension": rpb.ExtensionRequest(
                           containing_type="process.v1.ExecuteRequest", extension_number=5)}):
                r = ask(**kw)
                self.assertEqual(r.error_response.error_code, grpc.StatusCode.NOT_FOUND.value[0], kw)
            reqs.put(None)  # the client's end ends the call, OK
            self.assertEqual(list(answers), [])
            self.assertEqual(answers.code(), grpc.StatusCode.OK)

    # ---- Start, stdin, signals, PTY --------------------------------------------------

    def test_start_stream_and_stdin(self):
        it = self.stub.Start(pb.StartRequest(config=cfg("sh", "-c", "cat; echo done >&2")), timeout=20)
        first = next(it)
        self.assertEqual(first.WhichOneof("event"), "init")
        pid = first.init.process_id
        self.assertGreater(pid, 0)
        self.stub.WriteStdin(pb.WriteStdinRequest(process_id=pid, input=b"hello "), timeout=5)
        self.stub.WriteStdin(pb.WriteStdinRequest(process_id=pid, input=b"world"), timeout=5)
        self.stub.WriteStdin(pb.WriteStdinRequest(process_id=pid, eof=empty_pb2.Empty()), timeout=5)
        out, err, exit_code = b"", b"", None
        for ev in it:
            kind = ev.WhichOneof("event")
            if kind == "stdout":
                out += ev.stdout
            elif kind == "stderr":
                err += ev.stderr
            elif kind == "exit":
                exit_code = ev.exit.exit_code
        self.assertEqual((out, err, exit_code), (b"hello world", b"done\n", 0))
        # The process is gone: its id is unknown now.
        code, _ = self.code_of(self.stub.WriteStdin, pb.WriteStdinRequest(process_id=pid, input=b"x"),
                               timeout=5)
        self.assertEqual(code, grpc.StatusCode.NOT_FOUND)

    def test_write_stdin_waits_for_the_reader(self):
        """WriteStdin answers once the process's stdin took the input, as upstream's
        blocking write: 16 MiB written 1 MiB at a time into a command that reads only
        after 3 s all succeed, the first call held until it reads (past 8 MiB queued they
        were refused with RESOURCE_EXHAUSTED)."""
        it = self.stub.Start(pb.StartRequest(config=cfg("sh", "-c", "sleep 3; wc -c")), timeout=60)
        pid = next(it).init.process_id
        t0 = time.monotonic()
        for _ in range(16):
            self.stub.WriteStdin(pb.WriteStdinRequest(process_id=pid, input=b"a" * MIB), timeout=20)
        self.assertGreater(time.monotonic() - t0, 2.0)
        self.stub.WriteStdin(pb.WriteStdinRequest(process_id=pid, eof=empty_pb2.Empty()), timeout=5)
        events = list(it)
        self.assertEqual(b"".join(ev.stdout for ev in events).strip(), str(16 * MIB).encode())
        self.assertEqual(events[-1].exit.exit_code, 0)

    def test_write_stdin_nobody_reads(self):
        """Input for a process whose stdin nobody reads any more (the leader exited, a
        descendant holds its output open) is refused, FAILED_PRECONDITION as after EOF
        (upstream: INTERNAL, broken pipe); it was answered OK and dropped. A client that
        gives up on a write the process does not take leaves sandboxd sound."""
        it = self.stub.Start(pb.StartRequest(config=cfg(
            "sh", "-c", "exec 0<&-; (sleep 1.5) & exit 0")), timeout=30)
        pid = next(it).init.process_id
        time.sleep(0.5)
        code, msg = self.code_of(self.stub.WriteStdin,
                                 pb.WriteStdinRequest(process_id=pid, input=b"x"), timeout=5)
        self.assertEqual(code, grpc.StatusCode.FAILED_PRECONDITION, msg)
        list(it)
        it = self.stub.Start(pb.StartRequest(config=cfg("sleep", "30")), timeout=30)
        pid = next(it).init.process_id
        code, _ = self.code_of(self.stub.WriteStdin,
                               pb.WriteStdinRequest(process_id=pid, input=b"a" * MIB), timeout=0.5)
        self.assertEqual(code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.stub.SendSignal(pb.SendSignalRequest(process_id=pid, signal=pb.SIGNAL_SIGKILL), timeout=5)
        self.assertEqual(list(it)[-1].exit.exit_code, -1)
        self.assertEqual(self.stub.Execute(pb.ExecuteRequest(config=cfg("true")), timeout=5).exit_code, 0)

    def test_signals(self):
        it = self.stub.Start(pb.StartRequest(config=cfg("sleep", "100")), timeout=20)
        pid = next(it).init.process_id
        code, _ = self.code_of(self.stub.SendSignal, pb.SendSignalRequest(process_id=pid), timeout=5)
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)
        self.stub.SendSignal(pb.SendSignalRequest(process_id=pid, signal=pb.SIGNAL_SIGTERM), timeout=5)
        events = list(it)
        self.assertEqual(events[-1].WhichOneof("event"), "exit")
        self.assertEqual(events[-1].exit.exit_code, -1)

    def test_resize_without_pty(self):
        it = self.stub.Start(pb.StartRequest(config=cfg("sleep", "100")), timeout=20)
        pid = next(it).init.process_id
        code, _ = self.code_of(self.stub.ResizeTTY, pb.ResizeTTYRequest(process_id=pid, cols=80, rows=24),
                               timeout=5)
        self.assertEqual(code, grpc.StatusCode.FAILED_PRECONDITION)
        self.stub.SendSignal(pb.SendSignalRequest(process_id=pid, signal=pb.SIGNAL_SIGKILL), timeout=5)
        list(it)

    def test_pty_and_resize(self):
        it = self.stub.Start(pb.StartRequest(
            config=cfg("sh", "-c", "stty size; tty; read x; stty size"), pty=pb.PTY(cols=80, rows=24)),
            timeout=20)
        pid = next(it).init.process_id
        out = b""
        while b"/dev/pts/" not in out:
            ev = next(it)
            out += ev.stdout
        self.stub.ResizeTTY(pb.ResizeTTYRequest(process_id=pid, cols=100, rows=30), timeout=5)
        self.stub.WriteStdin(pb.WriteStdinRequest(process_id=pid, input=b"\n"), timeout=5)
        exit_code = None
        for ev in it:
            if ev.WhichOneof("event") == "stdout":
                out += ev.stdout
            elif ev.WhichOneof("event") == "exit":
                exit_code = ev.exit.exit_code
        self.assertEqual(exit_code, 0)
        self.assertIn(b"24 80", out)
        self.assertIn(b"30 100", out)

    def test_64mib_output(self):
        it = self.stub.Start(pb.StartRequest(config=cfg("head", "-c", str(64 * MIB), "/dev/zero")),
                             timeout=120)
        total, exit_code = 0, None
        for ev in it:
            if ev.WhichOneof("event") == "stdout":
                total += len(ev.stdout)
            elif ev.WhichOneof("event") == "exit":
                exit_code = ev.exit.exit_code
        self.assertEqual((total, exit_code), (64 * MIB, 0))

    # ---- deadlines and cancellation --------------------------------------------------

    def test_deadline_kills_process_group(self):
        # The call is cut at its 1 s deadline (not before: the command would run 100 s),
        # and the whole process group goes with it.
        pidfile = os.path.join(self.d.root, "deadline.pid")
        t0 = time.monotonic()
        code, _ = self.code_of(self.stub.Execute, pb.ExecuteRequest(config=cfg(
            "sh", "-c", f"sleep 100 & echo $! > {pidfile}; wait")), timeout=1)
        self.assertEqual(code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertGreaterEqual(time.monotonic() - t0, 0.95)
        self.assertTrue(wait_gone(read_pid(pidfile)), "the grandchild survived the deadline")

    def test_deadline_start(self):
        pidfile = os.path.join(self.d.root, "deadline-start.pid")
        it = self.stub.Start(pb.StartRequest(config=cfg("sh", "-c", f"echo $$ > {pidfile}; exec sleep 100")),
                             timeout=1)
        code, _ = self.code_of(lambda: list(it))
        self.assertEqual(code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertTrue(wait_gone(read_pid(pidfile)))

    def test_cancellation_kills_process(self):
        pidfile = os.path.join(self.d.root, "cancel.pid")
        it = self.stub.Start(pb.StartRequest(config=cfg("sh", "-c", f"echo $$ > {pidfile}; exec sleep 100")),
                             timeout=60)
        self.assertEqual(next(it).WhichOneof("event"), "init")
        pid = read_pid(pidfile)
        it.cancel()
        self.assertTrue(wait_gone(pid), "cancelled call left its process running")

    def test_connection_close_kills_process(self):
        pidfile = os.path.join(self.d.root, "close.pid")
        ch = grpc.insecure_channel(f"127.0.0.1:{self.d.gport}")
        it = pbg.ProcessServiceStub(ch).Start(pb.StartRequest(
            config=cfg("sh", "-c", f"echo $$ > {pidfile}; exec sleep 100")), timeout=60)
        next(it)
        pid = read_pid(pidfile)
        ch.close()
        self.assertTrue(wait_gone(pid), "closing the connection left the process running")

    # ---- load and flow control -------------------------------------------------------

    def test_1000_concurrent_execute(self):
        with futures.ThreadPoolExecutor(max_workers=64) as pool:
            fs = [self.stub.Execute.future(pb.ExecuteRequest(config=cfg("sh", "-c", f"echo {i}")), timeout=120)
                  for i in range(1000)]
            res = [f.result() for f in fs]
        self.assertEqual([r.stdout for r in res], [f"{i}\n".encode() for i in range(1000)])
        self.assertTrue(all(r.exit_code == 0 for r in res))

    def test_slow_reader_memory_bounded(self):
        # BDP probing off: the client's window stays small, so a client that does not
        # read stops the stream within a few hundred KiB.
        ch = grpc.insecure_channel(f"127.0.0.1:{self.d.gport}",
                                   options=[("grpc.http2.bdp_probe", 0)])
        pidfile = os.path.join(self.d.root, "slow.pid")
        try:
            stub = pbg.ProcessServiceStub(ch)
            before = rss_kib(self.d.p.pid)
            it = stub.Start(pb.StartRequest(config=cfg("sh", "-c", f"echo $$ > {pidfile}; exec cat /dev/zero")),
                            timeout=60)
            self.assertEqual(next(it).WhichOneof("event"), "init")
            pid = read_pid(pidfile)
            time.sleep(1.0)
            w1, mid = wchar(pid), rss_kib(self.d.p.pid)
            time.sleep(2.0)
            w2, after = wchar(pid), rss_kib(self.d.p.pid)
            # The producer is blocked (sandboxd stopped reading its pipe), and sandboxd's
            # memory did not follow the output.
            self.assertEqual(w1, w2, "the process kept writing while the client did not read")
            self.assertLess(w2, 64 * MIB)
            self.assertLess(after - mid, 4 * 1024, f"RSS grew {before} -> {mid} -> {after} KiB")
            self.assertLess(after - before, 48 * 1024, f"RSS grew {before} -> {after} KiB")
            # Reading again resumes the stream, nothing lost: all zero bytes, in order.
            got = 0
            for ev in it:
                self.assertEqual(ev.stdout.count(0), len(ev.stdout))
                got += len(ev.stdout)
                if got > w2 + 8 * MIB:
                    break
            self.assertGreater(wchar(pid), w2)
            it.cancel()
            self.assertTrue(wait_gone(pid))
        finally:
            ch.close()

    def test_stalled_stream_loses_nothing(self):
        # The process exits while its stream is stalled (its output fills the client's
        # window, the call's queue and part of the pipe); the rest still arrives once the
        # client reads again, later than Start's 5 s output drain after an exit.
        # Sizes around that sum, each on its own connection, in parallel.
        def one(size):
            ch = grpc.insecure_channel(f"127.0.0.1:{self.d.gport}",
                                       options=[("grpc.http2.bdp_probe", 0)])
            try:
                it = pbg.ProcessServiceStub(ch).Start(
                    pb.StartRequest(config=cfg("head", "-c", str(size), "/dev/zero")), timeout=60)
                next(it)
                time.sleep(5.5)
                got, code = 0, None
                for ev in it:
                    got += len(ev.stdout)
                    if ev.WhichOneof("event") == "exit":
                        code = ev.exit.exit_code
                return size, got, code
            finally:
                ch.close()

        sizes = range(180 * 1024, 300 * 1024, 8 * 1024)
        with futures.ThreadPoolExecutor(max_workers=len(sizes)) as pool:
            res = list(pool.map(one, sizes))
        self.assertEqual(res, [(s, s, 0) for s in sizes])

    def test_ping_answered(self):
        ch = grpc.insecure_channel(f"127.0.0.1:{self.d.gport}", options=[
            ("grpc.keepalive_time_ms", 100), ("grpc.keepalive_timeout_ms", 1000),
            ("grpc.keepalive_permit_without_calls", 1), ("grpc.http2.max_pings_without_data", 0)])
        try:
            stub = pbg.ProcessServiceStub(ch)
            r = stub.Execute(pb.ExecuteRequest(config=cfg("sleep", "2")), timeout=10)
            self.assertEqual(r.exit_code, 0)
        finally:
            ch.close()

    def test_unread_replies_bounded_per_connection(self):
        # A client that opens no flow-control window for its replies: the connection keeps
        # at most 32 MiB of them; the Execute calls past that end with RESOURCE_EXHAUSTED
        # (a trailers-only HEADERS, no DATA) instead of each keeping its 4 MB reply.
        req = pb.ExecuteRequest(config=cfg("sh", "-c", "head -c 4000000 /dev/zero"))
        n = 12
        s = no_window_conn(self.d.gport)
        try:
            for i in range(n):
                raw_execute(s, 1 + 2 * i, req)
                time.sleep(0.4)  # each reply is queued before the next call starts
            # now take everything: the streams' windows and the connection's
            data = {sid: len(got) for sid, got in take_all(s, [1 + 2 * i for i in range(n)]).items()}
        finally:
            s.close()
        full = [sid for sid, got in data.items() if got >= 4000000]
        empty = [sid for sid, got in data.items() if got == 0]
        self.assertEqual(len(full) + len(empty), n, data)
        self.assertLessEqual(len(full), 9, data)
        self.assertGreaterEqual(len(empty), 3, data)

    def test_ping_flood_without_reading_is_cut_off(self):
        # A peer that sends PINGs and never reads the acknowledgements: sandboxd stops
        # reading it and nghttp2 drops it once too many acknowledgements are queued.
        s = socket.create_connection(("127.0.0.1", self.d.gport))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(5)
        before = rss_kib(self.d.p.pid)
        cut = False
        try:
            s.sendall(H2_PREFACE + h2_frame(4, 0, 0, b""))
            end = time.monotonic() + 10
            while time.monotonic() < end:
                s.sendall(h2_frame(6, 0, 0, b"12345678") * 1000)
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            cut = True
        finally:
            s.close()
        self.assertTrue(cut, "a PING flood was absorbed for 10 s")
        self.assertLess(rss_kib(self.d.p.pid) - before, 8 * 1024)

    def test_http1_on_grpc_port(self):
        s = socket.create_connection(("127.0.0.1", self.d.gport))
        s.settimeout(5)
        try:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        finally:
            s.close()
        # Our SETTINGS (sent on accept), then the connection closes: no HTTP/1.1 answer.
        self.assertEqual(data[3], 4)
        self.assertNotIn(b"HTTP/1.1", data)
        self.assertEqual(self.stub.Execute(pb.ExecuteRequest(config=cfg("echo", "ok")), timeout=5).stdout, b"ok\n")

    def test_one_engine_two_fronts(self):
        it = self.stub.Start(pb.StartRequest(config=cfg("sleep", "100")), timeout=20)
        pid = next(it).init.process_id
        c = http.client.HTTPConnection("127.0.0.1", self.d.port, timeout=5)
        c.request("GET", "/v1/processes")
        procs = json.loads(c.getresponse().read())
        self.assertIn(pid, [p["id"] for p in (procs["processes"] if isinstance(procs, dict) else procs)])
        c.request("POST", f"/v1/processes/{pid}/signal", json.dumps({"signal": "KILL"}),
                  {"Content-Type": "application/json"})
        self.assertLess(c.getresponse().status, 300)
        self.assertEqual(list(it)[-1].exit.exit_code, -1)
        c.close()

    def test_background_process_by_id(self):
        # A background process started over REST: WriteStdin and SendSignal reach it by
        # the id REST gave it; once it exited they answer NOT_FOUND.
        c = http.client.HTTPConnection("127.0.0.1", self.d.port, timeout=10)
        c.request("POST", "/v1/processes", json.dumps({
            "command": "read x; echo got-$x; exec sleep 100", "background": True,
            "stdin_open": True}), {"Content-Type": "application/json"})
        r = c.getresponse()
        self.assertEqual(r.status, 201)
        pid = json.loads(r.read())["id"]
        self.stub.WriteStdin(pb.WriteStdinRequest(process_id=pid, input=b"grpc\n"), timeout=5)
        c.request("GET", f"/v1/processes/{pid}/output?follow=true")
        r = c.getresponse()
        first = json.loads(r.readline())
        self.assertEqual(base64.b64decode(first["data"]), b"got-grpc\n")
        self.stub.SendSignal(pb.SendSignalRequest(process_id=pid, signal=pb.SIGNAL_SIGTERM), timeout=5)
        rest = [json.loads(line) for line in r.read().splitlines() if line]
        self.assertEqual((rest[-1]["type"], rest[-1]["signal"]), ("exit", 15))
        code, _ = self.code_of(self.stub.SendSignal,
                               pb.SendSignalRequest(process_id=pid, signal=pb.SIGNAL_SIGKILL), timeout=5)
        self.assertEqual(code, grpc.StatusCode.NOT_FOUND)
        c.request("DELETE", f"/v1/processes/{pid}")
        self.assertEqual(c.getresponse().status, 204)
        c.close()


class GrpcDaemonTest(unittest.TestCase):
    def test_auth(self):
        tok = tempfile.NamedTemporaryFile("w", delete=False)
        tok.write("s3cret\n")
        tok.close()
        d = Daemon("--token-file", tok.name)
        try:
            with self.assertRaises(grpc.RpcError) as cm:
                d.stub.Execute(pb.ExecuteRequest(config=cfg("true")), timeout=5)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            r = d.stub.Execute(pb.ExecuteRequest(config=cfg("true")), timeout=5,
                               metadata=[("authorization", "Bearer s3cret")])
            self.assertEqual(r.exit_code, 0)
        finally:
            self.assertEqual(d.stop(), 0)
            os.unlink(tok.name)

    def test_out_of_descriptors_is_internal(self):
        """A start that fails for want of descriptors (EMFILE) is INTERNAL, as upstream
        answers it: it was UNAVAILABLE, on which upstream's SDK throws its channel away.
        The daemon runs with 48 descriptors at most (a hard limit it cannot raise)."""
        import resource
        d = Daemon(preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48)))
        its = []
        try:
            failed = None
            for _ in range(40):
                its.append(d.stub.Start(pb.StartRequest(config=cfg("sleep", "30")), timeout=30))
                try:
                    next(its[-1])
                except grpc.RpcError as e:
                    failed = (e.code(), e.details())
                    break
            self.assertIsNotNone(failed, "40 processes started within 48 descriptors")
            self.assertEqual(failed[0], grpc.StatusCode.INTERNAL, failed)
            self.assertIn("out of descriptors", failed[1])
        finally:
            for it in its:
                it.cancel()
            self.assertEqual(d.stop(), 0)

    def test_default_host_is_dual_stack(self):
        """Without --host, the gRPC and REST ports take IPv6 and IPv4 (upstream's Go
        listener on 0.0.0.0 is dual-stack; sandboxd's took IPv4 only), so a client that
        resolves a name to ::1 (localhost in SANDBOXD_GRPC_ADDR) reaches it. An
        explicit --host is kept: 127.0.0.1 takes no IPv6."""
        try:
            with socket.socket(socket.AF_INET6) as s:
                s.bind(("::1", 0))
        except OSError:
            self.skipTest("no IPv6 on this host")
        dirs = tempfile.mkdtemp(prefix="sbd-grpc-")
        port, gport = free_port(), free_port()
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1")
        p = subprocess.Popen([BIN, "--port", str(port), "--legacy-port", "-1", "--grpc-port",
                              str(gport), "--root", os.path.join(dirs, "root"), "--log-level",
                              "warn"], env=env)
        chans = []
        try:
            end = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("::1", gport), 0.2).close()
                    break
                except OSError:
                    if time.monotonic() > end or p.poll() is not None:
                        raise
                    time.sleep(0.02)
            for host in ("::1", "127.0.0.1"):
                socket.create_connection((host, port), 2).close()
            for target, word in ((f"ipv6:[::1]:{gport}", "v6"), (f"127.0.0.1:{gport}", "v4")):
                chans.append(grpc.insecure_channel(target))
                r = pbg.ProcessServiceStub(chans[-1]).Execute(
                    pb.ExecuteRequest(config=cfg("echo", word)), timeout=10)
                self.assertEqual(r.stdout, f"{word}\n".encode())
        finally:
            for ch in chans:
                ch.close()
            p.send_signal(signal.SIGTERM)
            self.assertEqual(p.wait(timeout=30), 0)
            shutil.rmtree(dirs, ignore_errors=True)
        d = Daemon()  # --host 127.0.0.1
        try:
            with self.assertRaises(OSError):
                socket.create_connection(("::1", d.gport), 2).close()
        finally:
            self.assertEqual(d.stop(), 0)

    def test_unread_answer_does_not_hold_the_connection(self):
        """A client that grants no flow-control window (SETTINGS_INITIAL_WINDOW_SIZE 0)
        and whose call has finished, its answer queued: past the idle timeout the
        connection gets GOAWAY and goes, its queued bytes with it. Before, the finished
        call kept it busy (and up to 32 MiB of answers per connection) for ever."""
        d = Daemon("--idle-timeout", "1s")
        try:
            s = socket.create_connection(("127.0.0.1", d.gport))
            s.settimeout(10)
            window0 = (4).to_bytes(2, "big") + (0).to_bytes(4, "big")
            msg = pb.ExecuteRequest(config=cfg("head", "-c", "300000", "/dev/zero")).SerializeToString()
            s.sendall(H2_PREFACE + h2_frame(4, 0, 0, window0) + h2_frame(1, 4, 1, raw_call_head()) +
                      h2_frame(0, 1, 1, b"\x00" + len(msg).to_bytes(4, "big") + msg))
            try:
                read_frames(s, lambda f: f[0] == 7)  # GOAWAY, after the idle timeout
            except OSError:
                self.fail("no GOAWAY: the connection is still held")
            s.close()
        finally:
            self.assertEqual(d.stop(), 0)

    def test_unread_replies_bounded_for_all_connections(self):
        """Replies that no client takes (no flow-control window) are bounded for all
        connections together, not only per connection: with the budget at 2.5 MB
        ($SANDBOXD_GRPC_MAX_UNSENT; 128 MiB by default), three connections of two 1 MB
        Execute replies each, far under the 32 MiB of one connection, get two replies
        queued; the other four calls end with RESOURCE_EXHAUSTED (a trailers-only
        HEADERS, no DATA) instead of each keeping its reply. Once the clients read, the
        queued replies arrive whole, and the budget is free again."""
        size = 1000000
        d = Daemon(env={"SANDBOXD_GRPC_MAX_UNSENT": "2500000"})
        conns = []
        try:
            expect = {}
            for c in range(3):
                s = no_window_conn(d.gport)
                conns.append(s)
                for sid in (1, 3):
                    tag = f"conn{c}-stream{sid}\n"
                    expect[c, sid] = (tag * (size // len(tag) + 1))[:size].encode()
                    raw_execute(
                        s, sid, pb.ExecuteRequest(config=cfg("sh", "-c", f"yes {tag.strip()} | head -c {size}"))
                    )
            # Each call's answer starts (its HEADERS need no window): a refused call's
            # ends the stream, a queued reply's does not.
            queued = [
                (c, sid) for c, s in enumerate(conns) for sid, ended in answer_heads(s, (1, 3)).items() if not ended
            ]
            self.assertEqual(len(queued), 2, queued)
            for c, s in enumerate(conns):
                sids = [sid for cc, sid in queued if cc == c]
                for sid, got in take_all(s, sids).items():
                    self.assertEqual(got[:5], b"\x00" + (len(got) - 5).to_bytes(4, "big"))
                    r = pb.ExecuteResponse.FromString(got[5:])
                    self.assertEqual(r.exit_code, 0)
                    self.assertTrue(r.stdout == expect[c, sid], f"conn {c} stream {sid}: output differs")
            # nothing is held now: a reply as large is queued (and taken) again
            r = d.stub.Execute(pb.ExecuteRequest(config=cfg("head", "-c", str(size), "/dev/zero")), timeout=20)
            self.assertEqual(len(r.stdout), size)
        finally:
            for s in conns:
                s.close()
            self.assertEqual(d.stop(), 0)

    def test_small_unread_replies_bounded_for_all_connections(self):
        """The budget of answers no client takes counts every unary reply, not only those
        over 128 KiB: with it at 250 kB, four Execute replies of 100 kB on a connection
        that grants no window get two queued; the other two calls end with
        RESOURCE_EXHAUSTED. Before, all four were kept (a reply under 128 KiB was never
        refused, so 128 calls on each of 256 connections could hold 4 GiB)."""
        size = 100000
        d = Daemon(env={"SANDBOXD_GRPC_MAX_UNSENT": "250000"})
        s = no_window_conn(d.gport)
        try:
            sids = (1, 3, 5, 7)
            for sid in sids:
                raw_execute(s, sid, pb.ExecuteRequest(config=cfg("head", "-c", str(size), "/dev/zero")))
            heads = answer_heads(s, sids)
            queued = [sid for sid, ended in heads.items() if not ended]
            self.assertEqual(len(queued), 2, heads)
            for sid, got in take_all(s, queued).items():
                r = pb.ExecuteResponse.FromString(got[5:])
                self.assertEqual(len(r.stdout), size)
        finally:
            s.close()
            self.assertEqual(d.stop(), 0)

    def test_calls_refused_while_over_budget(self):
        """A Start stream's queue is bounded by its process pausing, not refused; but while
        the answers no client takes are over the budget, new calls (on any connection) are
        refused with RESOURCE_EXHAUSTED at their start, so finished streams' queues cannot
        pile up past it. Once that client goes, calls are served again."""
        d = Daemon(env={"SANDBOXD_GRPC_MAX_UNSENT": "100000"})
        try:
            s = no_window_conn(d.gport)
            try:
                # its output fills its queue (about 128 KiB, over the budget) and pauses it
                raw_execute(s, 1, pb.StartRequest(config=cfg("head", "-c", "1000000", "/dev/zero")), method="Start")
                refused = None
                end = time.monotonic() + 20
                while refused is None and time.monotonic() < end:
                    try:
                        d.stub.Execute(pb.ExecuteRequest(config=cfg("true")), timeout=10)
                        time.sleep(0.1)
                    except grpc.RpcError as e:
                        refused = e
                self.assertIsNotNone(refused, "no call was refused while over the budget")
                self.assertEqual(refused.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
                self.assertIn("not read", refused.details())
            finally:
                s.close()
            # the stream's queue goes with its connection: served again
            end = time.monotonic() + 20
            while True:
                try:
                    r = d.stub.Execute(pb.ExecuteRequest(config=cfg("echo", "ok")), timeout=10)
                    break
                except grpc.RpcError:
                    if time.monotonic() > end:
                        raise
                    time.sleep(0.1)
            self.assertEqual(r.stdout, b"ok\n")
        finally:
            self.assertEqual(d.stop(), 0)

    def test_token_checked_before_the_body(self):
        # A request without the token is refused once its head is in: its body is never
        # waited for nor buffered. With the token the same head waits for its message.
        tok = tempfile.NamedTemporaryFile("w", delete=False)
        tok.write("s3cret\n")
        tok.close()
        d = Daemon("--token-file", tok.name)
        ends = lambda f: f[2] == 1 and f[0] == 1 and f[1] & 1  # noqa: E731
        try:
            s = socket.create_connection(("127.0.0.1", d.gport))
            s.settimeout(5)
            s.sendall(H2_PREFACE + h2_frame(4, 0, 0, b"") + h2_frame(1, 4, 1, raw_call_head()))
            seen = []  # the answer, then the stream reset with NO_ERROR (stop sending)
            f = read_frames(s, lambda f: bool(seen.append(f)) or (f[2] == 1 and f[0] == 3))
            answer = [g for g in seen if ends(g)]
            self.assertTrue(answer and seen.index(answer[0]) < seen.index(f), seen)
            self.assertIn(b"\x0216", answer[0][3], "grpc-status 16 (UNAUTHENTICATED) expected")
            self.assertEqual(f[3], b"\x00\x00\x00\x00")
            s.close()

            s = socket.create_connection(("127.0.0.1", d.gport))
            s.settimeout(0.5)
            s.sendall(H2_PREFACE + h2_frame(4, 0, 0, b"") + h2_frame(1, 4, 1, raw_call_head("s3cret")))
            with self.assertRaises(socket.timeout):
                read_frames(s, ends)
            msg = pb.ExecuteRequest(config=cfg("true")).SerializeToString()
            s.settimeout(10)
            s.sendall(h2_frame(0, 1, 1, b"\x00" + len(msg).to_bytes(4, "big") + msg))
            f = read_frames(s, ends)
            self.assertIn(b"\x010", f[3], "grpc-status 0 expected")
            s.close()
        finally:
            self.assertEqual(d.stop(), 0)
            os.unlink(tok.name)

    def test_sigterm_drains(self):
        # A drain budget of five minutes: the drain ends when nothing is left to drain, not
        # when its budget runs out.
        d = Daemon("--shutdown-timeout", "300")
        try:
            it = d.stub.Start(pb.StartRequest(config=cfg("sleep", "100")), timeout=30)
            next(it)
            events = []
            t = threading.Thread(target=lambda: events.extend(it))
            t.start()
            time.sleep(0.2)
            d.p.send_signal(signal.SIGTERM)
            # The drain ends the stream, then the daemon. Without it the 100 s sleep would
            # outlast the call's 30 s deadline, and a daemon that waited out its budget the
            # 60 s waits below, which otherwise only bound a hang.
            t.join(60)
            self.assertFalse(t.is_alive())
            # The process got SIGTERM and its exit reached the client before the close:
            # killed by a signal, exit_code -1 (as upstream reports it).
            self.assertEqual(events[-1].WhichOneof("event"), "exit")
            self.assertEqual(events[-1].exit.exit_code, -1)
            self.assertEqual(d.p.wait(timeout=60), 0)
        finally:
            d.stop()

    def test_idle_connections_closed(self):
        d = Daemon("--idle-timeout", "1")
        try:
            self.assertEqual(d.stub.Execute(pb.ExecuteRequest(config=cfg("true")), timeout=5).exit_code, 0)
            # A raw connection that never starts a call is told GOAWAY (NO_ERROR) and closed,
            # once idle for the idle timeout and not before (the socket timeout only bounds
            # a hang: without the idle close nothing would come).
            t0 = time.monotonic()
            s = socket.create_connection(("127.0.0.1", d.gport))
            s.settimeout(30)
            s.sendall(H2_PREFACE + h2_frame(4, 0, 0, b""))
            goaway = read_frames(s, lambda f: f[0] == 7)
            self.assertGreaterEqual(time.monotonic() - t0, 0.95)
            self.assertEqual(goaway[3][4:8], b"\x00\x00\x00\x00")  # error code NO_ERROR
            while s.recv(4096):
                pass
            s.close()
            # PINGs alone (no token needed) do not keep a connection: it is told GOAWAY all
            # the same.
            t0 = time.monotonic()
            s = socket.create_connection(("127.0.0.1", d.gport))
            s.settimeout(0.2)
            s.sendall(H2_PREFACE + h2_frame(4, 0, 0, b""))
            seen = b""
            while time.monotonic() - t0 < 10 and b"\x07\x00\x00\x00\x00\x00" not in seen:
                try:
                    s.sendall(h2_frame(6, 0, 0, b"12345678"))
                    seen = (seen + s.recv(65536))[-65536:]
                except socket.timeout:
                    pass
                except (BrokenPipeError, ConnectionResetError):
                    break
            self.assertLess(time.monotonic() - t0, 10, "PINGs kept an idle connection open")
            s.close()
            # Nor does a HEADERS frame cut short (100 bytes declared, 1 sent): nghttp2 begins
            # a call at its first byte, before the token can be checked, and that call held
            # the connection (and one of the 256 slots) for ever.
            t0 = time.monotonic()
            s = socket.create_connection(("127.0.0.1", d.gport))
            s.settimeout(15)
            s.sendall(H2_PREFACE + h2_frame(4, 0, 0, b"") +
                      (100).to_bytes(3, "big") + bytes([1, 4]) + (1).to_bytes(4, "big") + b"\x82")
            goaway = read_frames(s, lambda f: f[0] == 7)
            self.assertLess(time.monotonic() - t0, 10, "a cut HEADERS frame kept the connection")
            s.close()
            # A long call is not idle; the channel's idle connection was replaced
            # transparently for the next call.
            self.assertEqual(d.stub.Execute(pb.ExecuteRequest(config=cfg("sleep", "3")), timeout=10).exit_code, 0)
            time.sleep(2.5)
            self.assertEqual(d.stub.Execute(pb.ExecuteRequest(config=cfg("true")), timeout=5).exit_code, 0)
        finally:
            self.assertEqual(d.stop(), 0)

    def test_port_must_differ(self):
        p = subprocess.run([BIN, "--port", "18080", "--grpc-port", "18080", "--root", "/tmp"],
                           capture_output=True, timeout=10)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(b"--grpc-port must differ", p.stderr)


if __name__ == "__main__":
    unittest.main()
