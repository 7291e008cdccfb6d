"""Large stdin against a real sandboxd (--max-body 9 MiB): a 10 MiB write() reaches the
process whole (it was answered 413); an inline stdin too large is refused up front."""

from __future__ import annotations

import pytest

import agent_sandbox_sdk
from agent_sandbox_sdk import RequestError, aio

pytestmark = pytest.mark.integration

BIG = 10 << 20


def test_sync_large_stdin(sandboxd_url: str) -> None:
    with agent_sandbox_sdk.connect(sandboxd_url) as sb:
        with sb.spawn(["wc", "-c"]) as p:
            p.write(b"x" * BIG)
            p.write("y")
            p.close_stdin()
            assert p.wait().stdout.strip() == str(BIG + 1)
        bg = sb.start_background(["wc", "-c"], stdin=True)
        bg.write(b"z" * BIG)
        bg.close_stdin()
        bg.wait(30)
        assert b"".join(e.data for e in bg.output(follow=False) if e.type == "stdout").strip() == str(BIG).encode()
        bg.remove()
        assert sb.run(["wc", "-c"], stdin=b"\x00" * (6 << 20)).stdout.strip() == str(6 << 20)
        with pytest.raises(RequestError) as ei:
            sb.run(["wc", "-c"], stdin=b"\x00" * (7 << 20))
        assert ei.value.status == 413


async def test_async_large_stdin(sandboxd_url: str) -> None:
    async with aio.connect(sandboxd_url) as sb, await sb.spawn(["wc", "-c"]) as p:
        await p.write(b"x" * BIG)
        await p.close_stdin()
        assert (await p.wait()).stdout.strip() == str(BIG)
