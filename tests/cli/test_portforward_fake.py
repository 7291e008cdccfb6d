"""kubectl-sandbox port-forward against a scripted API server (a local HTTP server that
answers the Sandbox's GET and the pod port-forward's WebSocket upgrade): the error
channel's text and the data sent before it. KUBECTL_SANDBOX names the binary (default:
build/release/kubectl-sandbox)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fakesbd import CLI, needs_cli  # noqa: E402

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PORT = 8080


def frame(payload: bytes) -> bytes:
    """One unmasked binary WebSocket frame (server to client)."""
    n = len(payload)
    if n < 126:
        return bytes([0x82, n]) + payload
    return bytes([0x82, 126]) + n.to_bytes(2, "big") + payload


def channel(ch: int, data: bytes, first: bool) -> bytes:
    prefix = PORT.to_bytes(2, "little") if first else b""
    return frame(bytes([ch]) + prefix + data)


SANDBOX = {
    "apiVersion": "agents.x-k8s.io/v1beta1",
    "kind": "Sandbox",
    "metadata": {"name": "sb", "namespace": "ns", "uid": "u-1"},
    "status": {"conditions": [{"type": "Ready", "status": "True"}]},
}


class FakeAPI:
    """Answers GET of Sandbox ns/sb, then each port-forward upgrade with: the data
    `before` on channel 0, then the error text `error` on channel 1, then a close."""

    def __init__(self, before: bytes, error: bytes) -> None:
        self.before, self.error = before, error
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.upgrades = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn: socket.socket) -> None:
        with conn:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, _, buf = buf.partition(b"\r\n\r\n")
                text = head.decode("latin-1")
                if "/portforward" in text.split("\r\n", 1)[0]:
                    self.upgrade(conn, text)
                    return
                if "/sandboxes/sb " in text.split("\r\n", 1)[0]:
                    body = json.dumps(SANDBOX).encode()
                    status = "200 OK"
                else:
                    body = b'{"kind":"Status","code":404,"reason":"NotFound"}'
                    status = "404 Not Found"
                conn.sendall(
                    f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )

    def upgrade(self, conn: socket.socket, head: str) -> None:
        self.upgrades += 1
        m = re.search(r"(?im)^sec-websocket-key:\s*(\S+)", head)
        assert m is not None
        accept = base64.b64encode(
            hashlib.sha1((m.group(1) + WS_GUID).encode()).digest()
        )
        conn.sendall(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n"
            b"Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n"
        )
        conn.sendall(
            channel(0, self.before, True)
            + channel(1, b"", True)
            + channel(1, self.error, False)
            + bytes([0x88, 2, 0x03, 0xE8])
        )
        time.sleep(1)

    def close(self) -> None:
        self.sock.close()


@needs_cli
class PortForwardErrorChannel(unittest.TestCase):
    def test_data_before_error_delivered_and_error_escaped(self) -> None:
        # Before: the error ended the connection at once, dropping the data the server
        # had sent ahead of it, and its text went to the terminal as it was (an escape
        # sequence included).
        api = FakeAPI(b"hello before the error", b"\x1b]0;owned\x07 lost the pod")
        self.addCleanup(api.close)
        with tempfile.TemporaryDirectory() as d:
            kc = Path(d) / "kubeconfig"
            kc.write_text(
                "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                f"clusters:\n- name: k\n  cluster: {{server: 'http://127.0.0.1:{api.port}'}}\n"
                "contexts:\n- name: c\n  context: {cluster: k, user: u, namespace: ns}\n"
                "users:\n- name: u\n  user: {token: t0k}\n"
            )
            p = subprocess.Popen(
                [CLI, "--kubeconfig", str(kc), "port-forward", "sb", f":{PORT}"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            try:
                assert p.stdout is not None
                line = p.stdout.readline().decode()
                m = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> 8080", line)
                self.assertIsNotNone(m, line)
                assert m is not None
                with socket.create_connection(
                    ("127.0.0.1", int(m.group(1))), timeout=10
                ) as c:
                    got = b""
                    while chunk := c.recv(4096):
                        got += chunk
                self.assertEqual(got, b"hello before the error")
            finally:
                p.terminate()
                _, err = p.communicate(timeout=20)
        text = err.decode(errors="replace")
        self.assertEqual(api.upgrades, 1)
        self.assertIn("lost the pod", text)
        self.assertNotIn("\x1b", text)
        self.assertIn("\\x1b", text)


if __name__ == "__main__":
    unittest.main()
