"""Writes of gzip, bz2 and lzma file objects (read() gives the uncompressed bytes; their
descriptor is the compressed file's) against a real sandboxd, sync and async."""

from __future__ import annotations

import bz2
import gzip
import lzma
from pathlib import Path

import pytest

import agent_sandbox_sdk
from agent_sandbox_sdk import aio

pytestmark = pytest.mark.integration

DATA = bytes(range(256)) * 2048  # 512 KiB: more than one chunk, compresses well


@pytest.fixture
def compressed(tmp_path: Path) -> dict[str, Path]:
    paths = {"gz": tmp_path / "d.gz", "bz2": tmp_path / "d.bz2", "xz": tmp_path / "d.xz"}
    with gzip.open(paths["gz"], "wb") as g, bz2.open(paths["bz2"], "wb") as b, lzma.open(paths["xz"], "wb") as x:
        g.write(DATA)
        b.write(DATA)
        x.write(DATA)
    return paths


def test_sync_write_compressed_file_objects(sandboxd_url: str, compressed: dict[str, Path]) -> None:
    with agent_sandbox_sdk.connect(sandboxd_url) as sb:
        for kind, opener in (("gz", gzip.open), ("bz2", bz2.open), ("xz", lzma.open)):
            with opener(compressed[kind], "rb") as f:
                sb.files.write(f"fo/sync.{kind}", f)
            assert sb.files.read(f"fo/sync.{kind}") == DATA


async def test_async_write_compressed_file_objects(sandboxd_url: str, compressed: dict[str, Path]) -> None:
    async with aio.connect(sandboxd_url) as sb:
        for kind, opener in (("gz", gzip.open), ("bz2", bz2.open), ("xz", lzma.open)):
            with opener(compressed[kind], "rb") as f:
                await sb.files.write(f"fo/async.{kind}", f)
            assert await sb.files.read(f"fo/async.{kind}") == DATA
