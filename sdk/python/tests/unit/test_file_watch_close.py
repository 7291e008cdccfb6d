"""FileWatch.close() from another thread ends an iteration blocked on a quiet watch: the
socket is shut down (closing it alone does not wake a read blocked in another thread, and
a quiet directory's watch in direct mode blocked for ever)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from agent_sandbox_sdk import connect


@pytest.fixture
def quiet_watch_server() -> Iterator[str]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
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
            c.recv(65536)
            line = b'{"type":"ready"}\n'
            c.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n"
                + f"{len(line):x}\r\n".encode()
                + line
                + b"\r\n"
            )  # then nothing: the directory is quiet

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    t.join()
    for c in conns:
        c.close()
    srv.close()


def test_close_from_another_thread_ends_the_iteration(quiet_watch_server: str) -> None:
    with connect(quiet_watch_server) as sb:
        w = sb.files.watch("d")
        got: list[object] = []
        errors: list[BaseException] = []

        def iterate() -> None:
            try:
                got.extend(w)
            except BaseException as e:  # reported below
                errors.append(e)

        it = threading.Thread(target=iterate)
        it.start()
        it.join(0.3)
        assert it.is_alive()  # blocked on the quiet stream
        w.close()
        it.join(2)
        assert not it.is_alive(), "close() did not end the iteration"
        assert got == [] and errors == []  # ended quietly
