"""The sync client's shared hand-out stream without I/O (_kube_sync.HandoutStream): the
waiting threads take turns reading it (leader/follower), and the leader hands each line
to the waits of its claim or keeps it for a wait to come."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pytest

from agent_sandbox_sdk import SandboxError, _k8s
from agent_sandbox_sdk._kube_sync import HandoutStream, HandoutWaiter, WatchStop

from .test_logic import UID, _bound

OTHER = "3f1c2a9e-0000-4000-8000-000000000002"


def _line(etype: str, obj: dict[str, object]) -> str:
    return json.dumps({"type": etype, "object": obj}, separators=(",", ":"))


def _waiters(hs: HandoutStream, *specs: tuple[str, str]) -> list[HandoutWaiter]:
    out = [HandoutWaiter(uid, rv, hs.lock) for uid, rv in specs]
    with hs.lock:
        for w in out:
            hs.join(w)
    return out


def _in_thread(fn: Callable[[], None]) -> threading.Thread:
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


def _lead_and_follow(
    hs: HandoutStream, lead_stop: WatchStop, stop: WatchStop
) -> tuple[HandoutWaiter, HandoutWaiter, threading.Thread]:
    """OTHER's wait takes the lead; UID's wait follows (asleep) on a thread of its own."""
    lead, follower = _waiters(hs, (OTHER, "10"), (UID, "11"))
    with hs.lock:
        hs.await_turn(lead, lead_stop, time.monotonic() + 5)

    def follow() -> None:
        with hs.lock:
            hs.await_turn(follower, stop, time.monotonic() + 5)

    t = _in_thread(follow)
    time.sleep(0.05)
    return lead, follower, t


def test_the_first_waiter_leads_and_hands_the_lead_on() -> None:
    hs = HandoutStream("ns")
    a, b = _waiters(hs, (UID, "10"), (OTHER, "11"))
    stop = WatchStop()
    with hs.lock:
        hs.await_turn(a, stop, time.monotonic() + 5)
        assert hs.leader is a
        hs.await_turn(b, stop, time.monotonic())  # a leads: b's deadline passes asleep
        assert hs.leader is a
        assert hs.oldest_rv() == "10"
        hs.leave(a)
        assert hs.leader is None and list(hs.waiters) == [OTHER]
        hs.await_turn(b, stop, time.monotonic() + 5)
        assert hs.leader is b


def test_take_hands_out_to_every_wait_of_the_claim_and_keeps_the_rest() -> None:
    hs = HandoutStream("ns")
    a, twice, other = _waiters(hs, (UID, "10"), (UID, "10"), (OTHER, "12"))
    assert hs.take(_line("MODIFIED", _bound(status__podIPs=[], metadata__resourceVersion="20")), 1.0)
    assert a.obj is None and UID in hs.waiters  # bound, not Ready yet
    assert hs.rv == "20" and hs.read == 1.0
    late = _bound(metadata__labels={_k8s.LABEL_CLAIM_UID: "late"}, metadata__resourceVersion="21")
    assert hs.take(_line("MODIFIED", late), 2.0)
    assert hs.recent.get("late", 2.0)  # no wait for it yet: kept
    assert hs.take(_line("BOOKMARK", {"metadata": {"resourceVersion": "22"}}), 3.0) and hs.rv == "22"
    assert hs.take(_line("MODIFIED", _bound(metadata__resourceVersion="23")), 4.0)
    assert a.obj is not None and a.obj["metadata"]["name"] == "sb" and twice.obj is a.obj
    assert other.obj is None and list(hs.waiters) == [OTHER]
    assert hs.recent.get(UID, 4.0)  # for a third wait of the claim, registered late
    assert not hs.take(_line("ERROR", {"kind": "Status", "code": 500}), 5.0) and hs.rv == "23"
    assert not hs.take(_line("ERROR", {"kind": "Status", "code": 410}), 5.0) and hs.rv == ""


def test_a_follower_sleeps_until_the_leader_hands_it_out() -> None:
    hs = HandoutStream("ns")
    stop = WatchStop()
    lead, follower, t = _lead_and_follow(hs, stop, stop)
    assert t.is_alive()
    hs.take(_line("MODIFIED", _bound()), time.monotonic())  # by the leader's thread
    t.join(2)
    assert not t.is_alive() and follower.obj is not None and hs.leader is lead


def test_a_follower_takes_the_lead_when_the_leader_leaves() -> None:
    hs = HandoutStream("ns")
    stop = WatchStop()
    lead, follower, t = _lead_and_follow(hs, stop, stop)
    with hs.lock:
        hs.leave(lead)  # handed out, stopped or fallen back: wakes a follower
    t.join(2)
    assert not t.is_alive() and hs.leader is follower and follower.obj is None


def test_stopping_a_follower_just_wakes_it() -> None:
    hs = HandoutStream("ns")
    lead_stop, stop = WatchStop(), WatchStop()
    lead, follower, t = _lead_and_follow(hs, lead_stop, stop)
    assert stop.on_stop(lambda: hs.notify(follower))
    stop.stop()  # the claim decided
    t.join(2)
    assert not t.is_alive() and hs.leader is lead and not lead_stop.stopped
    assert not stop.on_stop(lambda: None)  # stopped: stays stopped


def test_watch_stop_calls_its_wake_once() -> None:
    woke: list[int] = []
    stop = WatchStop()
    assert stop.on_stop(lambda: woke.append(1))
    stop.on_stop(None)  # cleared: nothing to wake
    stop.stop()
    assert woke == []
    stop = WatchStop()
    stop.on_stop(lambda: woke.append(2))
    stop.stop()
    stop.stop()
    assert woke == [2]


def test_fail_and_close_end_every_wait() -> None:
    hs = HandoutStream("ns")
    a, b = _waiters(hs, (UID, "10"), (OTHER, "11"))
    with hs.lock:
        hs.fail(SandboxError("refused"))
    assert str(a.error) == "refused" and b.error is a.error and not hs.waiters
    (c,) = _waiters(hs, (UID, "12"))
    hs.close()  # no leader, no response: nothing to shut down
    assert isinstance(c.error, SandboxError) and not hs.waiters and not hs.open
    with hs.lock, pytest.raises(SandboxError):
        hs.join(HandoutWaiter(UID, "13", hs.lock))
