"""Writes of file objects: a Content-Length only for a real file (not for a gzip, bz2 or
lzma file, whose descriptor is the compressed file beneath), and a file object whose
length lies fails with the SDK's error, not h11's."""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import lzma
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agent_sandbox_sdk
from agent_sandbox_sdk import SandboxConnectionError, SandboxError, _wire, aio

DATA = b"0123456789abcdef" * 4096  # 64 KiB: compresses to far less


def _compressed(tmp_path: Path) -> dict[str, Any]:
    for name, mod in (("d.gz", gzip), ("d.bz2", bz2), ("d.xz", lzma)):
        with mod.open(tmp_path / name, "wb") as f:  # type: ignore[attr-defined]
            f.write(DATA)
    return {"gz": gzip.open(tmp_path / "d.gz"), "bz2": bz2.open(tmp_path / "d.bz2"), "xz": lzma.open(tmp_path / "d.xz")}


def test_compressed_file_objects_go_chunked(tmp_path: Path) -> None:
    files = _compressed(tmp_path)
    try:
        for f in files.values():
            assert _wire.file_size(f) is None
            assert "Content-Length" not in _wire.write_options(f, None)["headers"]
    finally:
        for f in files.values():
            f.close()


def test_real_files_keep_their_length(tmp_path: Path) -> None:
    p = tmp_path / "plain"
    p.write_bytes(DATA)
    with open(p, "rb") as f:  # a BufferedReader over a FileIO
        f.read(10)  # positioned: what is left is sent
        assert _wire.write_options(f, None)["headers"]["Content-Length"] == str(len(DATA) - 10)
    with open(p, "r+b") as f:  # BufferedRandom
        assert _wire.file_size(f) == len(DATA)
    with open(p, "rb", buffering=0) as raw:  # FileIO
        raw.seek(6)
        assert _wire.file_size(raw) == len(DATA) - 6
    assert _wire.file_size(io.BytesIO(DATA)) is None


class _LyingFile(io.FileIO):
    """A real file that gives more bytes than it holds."""

    def read(self, size: int = -1) -> bytes:
        data = super().read(size)
        return data + b"more" if data else data


@contextlib.contextmanager
def _sink() -> Iterator[str]:
    """A server that reads whatever it gets and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        conns = []
        while not stop.is_set():
            with contextlib.suppress(OSError):
                c, _ = srv.accept()
                c.settimeout(0.05)
                conns.append(c)
            for c in conns:
                with contextlib.suppress(OSError):
                    c.recv(1 << 16)
        for c in conns:
            c.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        t.join()
        srv.close()


def test_lying_file_object_is_an_sdk_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(DATA)
    with (
        _sink() as url,
        agent_sandbox_sdk.connect(url) as sb,
        _LyingFile(tmp_path / "f") as f,
        pytest.raises(SandboxConnectionError, match="write x: the request could not be sent"),
    ):
        sb.files.write("x", f)


async def test_lying_file_object_is_an_sdk_error_async(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(DATA)
    with _sink() as url, _LyingFile(tmp_path / "f") as f:
        async with aio.connect(url) as sb:
            with pytest.raises(SandboxError, match="write x: the request could not be sent"):
                await sb.files.write("x", f)
