"""The text of a real sandboxd's output events: it cuts them at byte boundaries (64 KiB
at most), so multi-byte characters are split; the texts still join to the whole text."""

from __future__ import annotations

import sys

import pytest

import agent_sandbox_sdk
from agent_sandbox_sdk import aio

pytestmark = pytest.mark.integration

N = 200_000  # 600,000 bytes of '€': many events, most of them cut inside a character
CMD = [sys.executable, "-c", f'import sys; sys.stdout.write("€" * {N}); sys.stderr.write("é" * {N})']


def test_sync_stream_text(sandboxd_url: str) -> None:
    with agent_sandbox_sdk.connect(sandboxd_url) as sb:
        evs = list(sb.stream(CMD))
        assert "".join(e.text for e in evs if e.type == "stdout") == "€" * N
        assert "".join(e.text for e in evs if e.type == "stderr") == "é" * N
        bg = sb.start_background(CMD)
        out = list(bg.output())
        assert "".join(e.text for e in out if e.type == "stdout") == "€" * N
        bg.remove()


async def test_async_stream_text(sandboxd_url: str) -> None:
    async with aio.connect(sandboxd_url) as sb:
        evs = [e async for e in sb.stream(CMD)]
        assert "".join(e.text for e in evs if e.type == "stdout") == "€" * N
        assert "".join(e.text for e in evs if e.type == "stderr") == "é" * N
