"""The sync client's timer (_kube_sync.Later): jobs start on threads of their own at
their due time unless cancelled first."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from agent_sandbox_sdk import SandboxError, _kube_sync
from agent_sandbox_sdk._kube_sync import Later


@pytest.fixture
def later() -> Iterator[Later]:
    t = Later()
    try:
        yield t
    finally:
        t.close()


def recorder() -> tuple[list[tuple[str, float, str]], Callable[[str], Callable[[], None]]]:
    ran: list[tuple[str, float, str]] = []

    def fn(tag: str) -> Callable[[], None]:
        return lambda: ran.append((tag, time.monotonic(), threading.current_thread().name))

    return ran, fn


def test_a_job_starts_on_its_own_thread_when_due(later: Later) -> None:
    ran, fn = recorder()
    t0 = time.monotonic()
    job = later.schedule(fn("a"), 0.05)
    time.sleep(0.3)
    assert [r[0] for r in ran] == ["a"]
    assert ran[0][1] - t0 >= 0.05
    assert ran[0][2] == "agent-sandbox-claim-wait"
    assert job.cancel() is True  # it had started
    job.join()


def test_a_job_cancelled_in_time_never_starts(later: Later) -> None:
    ran, fn = recorder()
    job = later.schedule(fn("a"), 0.05)
    assert job.cancel() is False
    job.start()  # no-op once cancelled
    time.sleep(0.2)
    assert ran == []
    job.join()  # nothing to wait for


def test_started_at_once_by_its_owner(later: Later) -> None:
    ran, fn = recorder()
    job = later.schedule(fn("a"), 60)
    job.start()
    assert job.cancel() is True
    job.join()
    assert [r[0] for r in ran] == ["a"]
    job.start()  # twice: still once
    job.join()
    assert len(ran) == 1


def test_no_delay_starts_at_once(later: Later) -> None:
    ran, fn = recorder()
    job = later.schedule(fn("a"), 0)
    assert job.cancel() is True
    job.join()
    assert [r[0] for r in ran] == ["a"]


def test_jobs_start_by_due_time(later: Later) -> None:
    ran, fn = recorder()
    jobs = [later.schedule(fn("late"), 0.25), later.schedule(fn("soon"), 0.05)]
    time.sleep(0.5)
    for j in jobs:
        j.join()
    assert [r[0] for r in ran] == ["soon", "late"]


def test_close_drops_jobs_not_started_and_ends_the_timer() -> None:
    ran, fn = recorder()
    later = Later()
    later.schedule(fn("a"), 0.05)
    timer = later._thread
    assert timer is not None and timer.is_alive() and timer.name == "agent-sandbox-timer"
    later.close()
    time.sleep(0.15)
    assert ran == []
    assert not timer.is_alive()
    with pytest.raises(SandboxError):
        later.schedule(fn("b"), 0.05)
    later.close()  # twice is fine


def test_the_timer_thread_ends_when_idle_and_comes_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_kube_sync, "LATER_IDLE", 0.1)
    ran, fn = recorder()
    later = Later()
    try:
        later.schedule(fn("a"), 0.02)
        first = later._thread
        assert first is not None
        first.join(2)
        assert not first.is_alive() and later._thread is None  # idle: it ended
        assert [r[0] for r in ran] == ["a"]
        later.schedule(fn("b"), 0.02)
        second = later._thread
        assert second is not None and second is not first
        second.join(2)
        assert [r[0] for r in ran] == ["a", "b"]
    finally:
        later.close()
