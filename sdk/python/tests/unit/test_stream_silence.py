"""A process stream whose connection goes silent without closing (the node lost, a
network partition: a half-open socket never errors) ends with SandboxConnectionError
after _wire.STREAM_READ_TIMEOUT of silence instead of hanging for ever; sandboxd's
keepalives (every 15 s) keep a quiet process's stream from ever being that silent."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from agent_sandbox_sdk import SandboxConnectionError, _wire, aio, connect


@pytest.fixture
def silent_sandboxd() -> Iterator[str]:
    """A server that answers a spawn with its start event, then says nothing more and
    keeps the connection open."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            conns.append(c)
            c.recv(65536)  # the request (small enough for one read)
            line = b'{"type":"start","id":7,"pid":42}\n'
            c.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n"
                + f"{len(line):x}\r\n".encode()
                + line
                + b"\r\n"
            )

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    t.join()
    for c in conns:
        c.close()
    srv.close()


def test_silent_stream_ends(monkeypatch: pytest.MonkeyPatch, silent_sandboxd: str) -> None:
    monkeypatch.setattr(_wire, "STREAM_READ_TIMEOUT", 0.5)
    t0 = time.monotonic()
    with connect(silent_sandboxd) as sb, pytest.raises(SandboxConnectionError):
        sb.spawn("sleep 1000").wait()
    assert time.monotonic() - t0 < 10  # before: for ever


async def test_async_silent_stream_ends(monkeypatch: pytest.MonkeyPatch, silent_sandboxd: str) -> None:
    monkeypatch.setattr(_wire, "STREAM_READ_TIMEOUT", 0.5)
    t0 = time.monotonic()
    async with aio.connect(silent_sandboxd) as sb:
        p = await sb.spawn("sleep 1000")
        with pytest.raises(SandboxConnectionError):
            await p.wait()
    assert time.monotonic() - t0 < 10
