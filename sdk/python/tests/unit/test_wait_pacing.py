"""A background process's wait() whose requests are answered "still running" at once
(a sandboxd, router or proxy that does not hold them) backs off (WAIT_BACKOFF doubling to
WAIT_BACKOFF_MAX) instead of spinning, and still returns at its deadline; a request held
as asked is followed by the next at once."""

from __future__ import annotations

import itertools
import time

import httpx
import pytest

from agent_sandbox_sdk import background as bg
from agent_sandbox_sdk.models import BackgroundProcessInfo

from .fakes import Handler, async_sandbox, sync_sandbox

RUNNING = {"id": 5, "pid": 9, "command": ["sleep", "9"], "state": "running"}


def at_once(waits: list[float]) -> Handler:
    """A sandboxd whose wait answers "running" at once, whatever the timeout asked."""

    def handler(req: httpx.Request) -> httpx.Response:
        assert req.url.path == "/v1/processes/5/wait"
        waits.append(time.monotonic())
        return httpx.Response(200, json=RUNNING)

    return handler


def info() -> BackgroundProcessInfo:
    return bg.parse_info(RUNNING)


def test_sync_wait_does_not_spin() -> None:
    waits: list[float] = []
    p = bg.BackgroundProcess(sync_sandbox(at_once(waits)), 5, info())
    t0 = time.monotonic()
    assert p.wait(timeout=1.0).running
    took = time.monotonic() - t0
    # 0.05 + 0.1 + 0.2 + 0.4 + 0.25 (the rest of the second): six requests, not thousands
    assert 2 <= len(waits) <= 8, len(waits)
    assert 0.9 <= took < 1.5
    gaps = [b - a for a, b in itertools.pairwise(waits)]
    assert gaps[0] >= bg.WAIT_BACKOFF * 0.9 and gaps[1] >= 2 * bg.WAIT_BACKOFF * 0.9


async def test_async_wait_does_not_spin() -> None:
    waits: list[float] = []
    p = bg.AsyncBackgroundProcess(async_sandbox(at_once(waits)), 5, info())
    t0 = time.monotonic()
    assert (await p.wait(timeout=1.0)).running
    assert 2 <= len(waits) <= 8, len(waits)
    assert 0.9 <= time.monotonic() - t0 < 1.5


def test_pacing() -> None:
    pace = bg.WaitPacing()
    assert [pace.after(25.0, 0.001, None) for _ in range(7)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert pace.after(25.0, 25.0, None) == 0.0  # held as asked: the next at once, the backoff reset
    assert pace.after(25.0, 0.001, None) == 0.05
    assert pace.after(25.0, 0.001, 0.03) == 0.03  # never past the deadline
    assert pace.after(0.0, 0.0, 0.0) == 0.0


@pytest.mark.parametrize("left", [None, 1.5, 600.0])
def test_wait_slice(left: float | None) -> None:
    assert bg.wait_slice(bg.wait_args(left)) == (25.0 if left is None else min(left, 25.0))
