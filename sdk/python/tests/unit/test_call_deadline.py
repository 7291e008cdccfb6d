"""One deadline per API call: a call that waited for a lean pooled connection until none
came free goes on through httpx with what is left of its timeout, not a fresh one, so a
slow API server costs a call about its timeout, not twice it."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator

import pytest

from agent_sandbox_sdk import KubeConfig, SandboxConnectionError
from agent_sandbox_sdk._kube_async import AsyncKubeClient
from agent_sandbox_sdk._kube_sync import KubeClient

TIMEOUT = 0.6


class _Slow(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        time.sleep(3 * TIMEOUT)  # answers after the call's timeout
        out = b'{"kind":"Sandbox"}'
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
        except OSError:
            pass

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def slow_server() -> Iterator[str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, args=(0.02,), daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_call_that_waited_for_the_pool_keeps_its_deadline(slow_server: str) -> None:
    kube = KubeClient(KubeConfig(server=slow_server, token="t"), timeout=TIMEOUT)
    try:
        assert kube._fast.usable
        kube._fast._max = 0  # every lean connection busy: the call waits for one, in vain
        start = time.monotonic()
        with pytest.raises(SandboxConnectionError):
            kube.get("sandboxes", "default", "sb")
        took = time.monotonic() - start
    finally:
        kube.close()
    assert took < 1.5 * TIMEOUT, f"the call took {took:.2f}s with a {TIMEOUT}s timeout"


async def test_async_a_call_that_waited_for_the_pool_keeps_its_deadline(slow_server: str) -> None:
    kube = AsyncKubeClient(KubeConfig(server=slow_server, token="t"), timeout=TIMEOUT)
    try:
        assert kube._fast.usable
        kube._fast._max = 0
        start = time.monotonic()
        with pytest.raises(SandboxConnectionError):
            await kube.get("sandboxes", "default", "sb")
        took = time.monotonic() - start
    finally:
        await kube.aclose()
    assert took < 1.5 * TIMEOUT, f"the call took {took:.2f}s with a {TIMEOUT}s timeout"


def test_a_slow_lean_answer_keeps_the_deadline_too(slow_server: str) -> None:
    kube = KubeClient(KubeConfig(server=slow_server, token="t"), timeout=TIMEOUT)
    try:
        start = time.monotonic()
        with pytest.raises(SandboxConnectionError):
            kube.get("sandboxes", "default", "sb")
        took = time.monotonic() - start
    finally:
        kube.close()
    assert took < 1.5 * TIMEOUT
