"""Background processes against a real sandboxd binary (connection pinned to its URL),
sync and async: a process outlives the client that started it, a new client lists it,
replays and follows its output, writes stdin, signals, waits, kills and removes it."""

from __future__ import annotations

import time

import pytest

import agent_sandbox_sdk
from agent_sandbox_sdk import (
    BackgroundProcessInfo,
    NotFoundError,
    OutputEvent,
    ProcessExitedError,
    aio,
)

pytestmark = pytest.mark.integration


def _stdout(evs: list[OutputEvent]) -> bytes:
    return b"".join(e.data for e in evs if e.type == "stdout")


def test_sync_background_lifecycle(sandboxd_url: str) -> None:
    first = agent_sandbox_sdk.connect(sandboxd_url)
    p = first.start_background("echo ready; read x; echo got $x; exit 3", stdin=True)
    assert p.last_info is not None and p.last_info.running and p.last_info.pid > 0
    first.client.close()  # the client that started it is gone; the process is not

    sb = agent_sandbox_sdk.connect(sandboxd_url)
    listed = {i.id: i for i in sb.background_processes()}
    assert p.id in listed and listed[p.id].running
    assert listed[p.id].command == ("/bin/sh", "-c", "echo ready; read x; echo got $x; exit 3")
    h = sb.background(p.id)
    it = h.output()  # follow
    ev = next(it)
    assert (ev.type, ev.offset, ev.data) == ("stdout", 0, b"ready\n")
    h.write("stdin-data\n")
    rest = list(it)
    assert _stdout(rest) == b"got stdin-data\n"
    assert rest[-1].type == "exit" and rest[-1].exit_code == 3 and rest[-1].offset == 21
    info = h.wait(timeout=10)
    assert isinstance(info, BackgroundProcessInfo)
    assert (info.state, info.exit_code, info.signal, info.output_end) == ("exited", 3, None, 21)
    assert info.ended_at is not None and info.started_at is not None
    # replay from an offset, without following
    again = list(h.output(follow=False, offset=6))
    assert _stdout(again) == b"got stdin-data\n" and again[0].offset == 6
    with pytest.raises(ProcessExitedError):
        h.write("late")
    with pytest.raises(ProcessExitedError):
        h.signal("TERM")
    h.kill()  # no error after the exit
    h.remove()
    with pytest.raises(NotFoundError):
        h.info()
    assert p.id not in [i.id for i in sb.background_processes()]


def test_sync_background_signal_wait_timeout_and_remove(sandboxd_url: str) -> None:
    sb = agent_sandbox_sdk.connect(sandboxd_url)
    p = sb.start_background(["sleep", "60"])
    t0 = time.monotonic()
    assert p.wait(timeout=0.3).running
    assert time.monotonic() - t0 >= 0.25
    p.signal("SIGTERM")
    info = p.wait(timeout=10)
    assert (info.state, info.signal, info.exit_code) == ("exited", 15, None)
    q = sb.start_background("sleep 60")
    q.remove()  # kills, waits and forgets a running one
    with pytest.raises(NotFoundError):
        q.info()
    p.remove()


async def test_async_background(sandboxd_url: str) -> None:
    sb = aio.connect(sandboxd_url)
    try:
        p = await sb.start_background("for i in 1 2 3; do echo $i; done; echo e >&2; sleep 60")
        seen: list[OutputEvent] = []
        async for ev in sb.background(p.id).output():
            seen.append(ev)
            if ev.type == "stderr":
                break
        assert _stdout(seen) == b"1\n2\n3\n" and seen[-1].data == b"e\n"
        assert (await p.info()).running  # leaving the stream left it running
        assert p.id in [i.id for i in await sb.background_processes()]
        await p.kill()
        info = await p.wait(timeout=10)
        assert (info.state, info.signal) == ("exited", 9)
        evs = [e async for e in p.output(follow=True)]
        assert evs[-1].type == "exit" and evs[-1].signal == 9
        await p.remove()
        with pytest.raises(NotFoundError):
            await p.info()
    finally:
        await sb.client.aclose()
