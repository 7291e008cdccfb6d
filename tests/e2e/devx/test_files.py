# SPDX-License-Identifier: Apache-2.0
"""Filesystem operations on a real sandbox in every connection mode (the ``sandbox``
fixture of conftest.py: router, API server pod proxy, pod IP): a watch that sees 1,000
file events in order, escapes through a symlink out of the root refused by stat, mkdir,
move, batch writes and watch, windowed reads, batch writes, stat/mkdir/move."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from agent_sandbox_sdk import (
    AuthError,
    ConflictError,
    NotFoundError,
    RequestError,
    Sandbox,
)


def _dir(sandbox: Sandbox) -> str:
    d = "e2e-files-" + uuid.uuid4().hex[:10]
    sandbox.files.mkdir(d)
    return d


def test_watch_sees_1000_events_in_order(sandbox: Sandbox) -> None:
    d = _dir(sandbox)
    with sandbox.files.watch(d) as w:
        # The watch is in place when watch() returns; one process creates the files.
        res = sandbox.run(f"cd {d} && i=1000; while [ $i -lt 2000 ]; do : > f$i; i=$((i+1)); done")
        assert res.ok, res.stderr
        got = []
        for ev in w:
            assert ev.type != "overflow", ev
            got.append((ev.type, ev.path))
            if len(got) == 1000:
                break
    assert got == [("create", f"f{i}") for i in range(1000, 2000)]
    sandbox.files.delete(d, recursive=True)


def test_watch_reports_moves_and_recursive_subdirs(sandbox: Sandbox) -> None:
    d = _dir(sandbox)
    with sandbox.files.watch(d, recursive=True) as w:
        sandbox.files.mkdir(f"{d}/sub")
        sandbox.run(f"echo x > {d}/sub/a && mv {d}/sub/a {d}/b && rm {d}/b")
        seen = []
        for ev in w:
            seen.append((ev.type, ev.path, ev.src, ev.dst))
            if ev.type == "delete" and ev.path == "b":
                break
    assert ("create", "sub", None, None) in seen
    assert ("create", "sub/a", None, None) in seen
    assert ("move", "b", "sub/a", "b") in seen
    sandbox.files.delete(d, recursive=True)


def test_escapes_refused(sandbox: Sandbox) -> None:
    d = _dir(sandbox)
    assert sandbox.run(f"ln -s / {d}/out && echo ok > {d}/in.txt").ok
    st = sandbox.files.stat(f"{d}/out")  # the link itself: described, not followed
    assert (st.type, st.symlink_target) == ("symlink", "/")
    calls = [
        lambda: sandbox.files.stat(f"{d}/out/etc/passwd"),
        lambda: sandbox.files.mkdir(f"{d}/out/tmp/e2e-escape"),
        lambda: sandbox.files.move(f"{d}/in.txt", f"{d}/out/tmp/e2e-escape"),
        lambda: sandbox.files.move(f"{d}/out/etc/hostname", f"{d}/stolen"),
        lambda: sandbox.files.watch(f"{d}/out/tmp"),
        lambda: sandbox.files.read(f"{d}/out/etc/hostname", offset=0, max_bytes=10),
    ]
    for call in calls:
        with pytest.raises(AuthError) as ei:
            call()
        assert ei.value.status == 403
    res = sandbox.files.write_many({f"{d}/out/tmp/e2e-escape": b"x", f"{d}/fine": b"y"})
    assert [(r.ok, r.status) for r in res] == [(False, 403), (True, 0)]
    for bad in ("../x", f"{d}/../../x"):
        with pytest.raises(ValueError):
            sandbox.files.stat(bad)
    assert not sandbox.run("test -e /tmp/e2e-escape").ok
    sandbox.files.delete(d, recursive=True)


def test_ranges(sandbox: Sandbox) -> None:
    d = _dir(sandbox)
    data = bytes(range(256)) * 64
    sandbox.files.write(f"{d}/r.bin", data)
    assert sandbox.files.read(f"{d}/r.bin", offset=100, max_bytes=50) == data[100:150]
    assert sandbox.files.read(f"{d}/r.bin", max_bytes=1) == data[:1]
    assert sandbox.files.read(f"{d}/r.bin", offset=len(data) - 3) == data[-3:]
    assert sandbox.files.read(f"{d}/r.bin", offset=len(data)) == b""
    assert sandbox.files.read(f"{d}/r.bin") == data
    sandbox.files.delete(d, recursive=True)


def test_batch_and_basic_ops(sandbox: Sandbox) -> None:
    d = _dir(sandbox)
    files = {f"{d}/batch/f{i:02d}.txt": f"content {i}" for i in range(50)}
    res = sandbox.files.write_many(files)
    assert all(r.ok for r in res) and len(res) == 50
    assert sandbox.files.read_text(f"{d}/batch/f07.txt") == "content 7"
    assert len(sandbox.files.list(f"{d}/batch")) == 50
    st = sandbox.files.mkdir(f"{d}/m/n", mode=0o750)
    assert (st.type, st.mode) == ("directory", "0750")
    with pytest.raises(ConflictError):
        sandbox.files.mkdir(f"{d}/m/n", parents=False)
    sandbox.files.move(f"{d}/batch/f00.txt", f"{d}/m/n/moved.txt")
    assert sandbox.files.stat(f"{d}/m/n/moved.txt").size == len("content 0")
    with pytest.raises(ConflictError):
        sandbox.files.move(f"{d}/batch/f01.txt", f"{d}/m/n/moved.txt")
    with pytest.raises(RequestError):
        sandbox.files.move(f"{d}/m", f"{d}/m/n/inside")
    with pytest.raises(NotFoundError):
        sandbox.files.stat(f"{d}/none")
    sandbox.files.delete(d, recursive=True)
    assert not sandbox.files.exists(d)


def test_watch_streams_close_with_the_client(sandbox: Sandbox) -> None:
    # More watches than sandboxd allows at once (16), opened and closed one after the
    # other: each close frees its slot (a proxy on the way may take a moment to pass the
    # close on, hence the short retry on 429).
    d = _dir(sandbox)
    for _ in range(20):
        deadline = time.monotonic() + 10
        while True:
            try:
                with sandbox.files.watch(d):
                    break
            except RequestError as e:
                if e.status != 429 or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    done = threading.Event()
    with sandbox.files.watch(d) as w:
        sandbox.files.write(f"{d}/last", b"x")
        for ev in w:
            if ev.type == "move" and ev.dst == "last":
                done.set()
                break
    assert done.is_set()
    sandbox.files.delete(d, recursive=True)
