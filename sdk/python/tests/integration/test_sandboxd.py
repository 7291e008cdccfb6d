"""Processes and files against a real sandboxd binary (connection pinned to its URL),
sync and async."""

from __future__ import annotations

import asyncio
import io
import os
import time
from pathlib import Path

import pytest

import agent_sandbox_sdk
from agent_sandbox_sdk import NotFoundError, ProcessExitedError, RequestError, aio

pytestmark = pytest.mark.integration


def test_sync_processes(sandboxd_url: str) -> None:
    sb = agent_sandbox_sdk.connect(sandboxd_url)
    r = sb.run("echo out; echo err >&2; exit 4", env={"X": "1"})
    assert (r.stdout, r.stderr, r.exit_code) == ("out\n", "err\n", 4)
    assert sb.run(["sh", "-c", 'printf "%s" "$X"'], env={"X": "v"}).stdout == "v"
    assert sb.run(["cat"], stdin=b"\x00bin").stdout == "\x00bin"
    t = sb.run("sleep 10", timeout=0.3)
    assert t.timed_out and not t.ok
    sb.files.write("wd/.keep", b"k")
    assert sb.run("pwd", cwd="wd").stdout.strip().endswith("/wd")
    evs = list(sb.stream("for i in 1 2 3; do echo $i; done; echo e >&2"))
    assert b"".join(e.data for e in evs if e.type == "stdout") == b"1\n2\n3\n"
    assert evs[-1].type == "exit" and evs[-1].exit_code == 0
    with sb.spawn(["cat"]) as p:
        p.write("line1\n")
        p.write(b"line2\n")
        p.close_stdin()
        assert p.wait().stdout == "line1\nline2\n"
    with sb.spawn("sleep 30") as p:
        p.signal("SIGTERM")
        res = p.wait()
        assert res.signal == 15 and p.exit_code == -1
    with sb.spawn("sleep 30") as p:
        assert p.id in [x.get("id") for x in sb.processes()]
    # leaving the block killed it: it leaves the list once reaped
    deadline = time.monotonic() + 10
    while p.id in [x.get("id") for x in sb.processes()]:
        assert time.monotonic() < deadline, "killed process still listed"
        time.sleep(0.02)


def test_sync_files(sandboxd_url: str, tmp_path: Path) -> None:
    sb = agent_sandbox_sdk.connect(sandboxd_url)
    sb.files.write("/sync/a b.txt", "hé")
    assert sb.files.read_text("sync/a b.txt") == "hé"
    assert sb.files.exists("sync/a b.txt") and not sb.files.exists("sync/none")
    sb.files.write("sync/big.bin", io.BytesIO(b"x" * 5_000_000), mode=0o600)
    assert sum(len(c) for c in sb.files.iter_read("sync/big.bin")) == 5_000_000
    entries = {e.name: e for e in sb.files.list("sync")}
    assert entries["big.bin"].size == 5_000_000 and entries["big.bin"].mode == "0600"
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "one.txt").write_text("1")
    (src / "d" / "two.txt").write_text("2")
    assert sb.files.upload_dir(src, "tree") == 2
    assert sb.files.download_dir("tree", tmp_path / "back") == 2
    assert (tmp_path / "back" / "d" / "two.txt").read_text() == "2"
    with pytest.raises(RequestError) as ei:
        sb.files.delete("tree")
    assert ei.value.status == 409
    sb.files.delete("tree", recursive=True)
    with pytest.raises(NotFoundError):
        sb.files.read("tree/one.txt")
    with pytest.raises(ValueError):
        sb.files.read("../etc/passwd")


async def test_async_processes_and_files(sandboxd_url: str) -> None:
    sb = aio.connect(sandboxd_url)
    try:
        rs = await asyncio.gather(*(sb.run(f"echo {i}") for i in range(20)))
        assert sorted(int(r.stdout) for r in rs) == list(range(20))
        out = [e.data async for e in sb.stream("echo a; echo b") if e.type == "stdout"]
        assert b"".join(out) == b"a\nb\n"
        async with await sb.spawn(["cat"]) as p:
            await p.write("hi")
            await p.close_stdin()
            assert (await p.wait()).stdout == "hi"
        async with await sb.spawn("sleep 30") as p:
            with pytest.raises(TimeoutError):
                await p.wait(0.3)

        async def chunks():  # type: ignore[no-untyped-def]
            for _ in range(50):
                yield b"y" * 1000

        await sb.files.write("async/f.bin", chunks())
        assert len(await sb.files.read("async/f.bin")) == 50_000
        assert await sb.files.exists("async/f.bin")
        assert [e.name for e in await sb.files.list("async")] == ["f.bin"]
        await sb.files.delete("async", recursive=True)
        assert not await sb.files.exists("async")
    finally:
        await sb.client.aclose()


async def test_async_process_wait_cancelled_loses_nothing(sandboxd_url: str) -> None:
    """Waiting for an event with a timeout (asyncio.wait_for) that runs out cancels the
    wait, not the stream: the next wait gets the event, and the output is whole. Before,
    the cancel ended the line reader and the next read said the stream had ended."""
    sb = aio.connect(sandboxd_url)
    try:
        async with await sb.spawn("read x; echo got $x; echo done") as p:
            it = aiter(p)
            for _ in range(3):
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(anext(it), 0.2)
            await p.write("hello\n")
            evs = [ev async for ev in p]
            assert evs[-1].type == "exit" and evs[-1].exit_code == 0
            assert b"".join(e.data for e in evs if e.type == "stdout") == b"got hello\ndone\n"
            assert (await p.wait()).stdout == "got hello\ndone\n"
    finally:
        await sb.client.aclose()


def test_control_calls_after_the_exit_raise_process_exited(sandboxd_url: str) -> None:
    """write, close_stdin, signal and resize of an attached process that has exited raise
    ProcessExitedError (sandboxd answers 404 NOT_FOUND "no such process" once it has
    reported the exit), whether or not the exit event was read, sync and async."""
    sb = agent_sandbox_sdk.connect(sandboxd_url)
    with sb.spawn(["cat"]) as p:
        p.write("in\n")
        p.close_stdin()
        assert p.wait().stdout == "in\n"
        for call in (lambda: p.write("late"), p.close_stdin, lambda: p.signal("TERM")):
            with pytest.raises(ProcessExitedError, match="the process has exited"):
                call()
    with sb.spawn("exit 3", pty=True) as p:  # the exit not read: sandboxd has forgotten it
        deadline = time.monotonic() + 10
        while p.id in [x.get("id") for x in sb.processes()]:
            assert time.monotonic() < deadline, "exited process still listed"
            time.sleep(0.02)
        with pytest.raises(ProcessExitedError) as ei:
            p.write("late")
        assert (ei.value.status, ei.value.code) == (404, "NOT_FOUND")
        with pytest.raises(ProcessExitedError):
            p.resize(100, 30)
        assert p.wait().exit_code == 3

    async def main() -> None:
        async with aio.connect(sandboxd_url) as asb, await asb.spawn(["cat"]) as ap:
            await ap.close_stdin()
            assert (await ap.wait()).exit_code == 0
            with pytest.raises(ProcessExitedError):
                await ap.write("late")
            with pytest.raises(ProcessExitedError):
                await ap.signal("KILL")

    asyncio.run(main())


@pytest.mark.skipif(os.name == "nt", reason="POSIX file names")
def test_download_dir_keeps_backslashes_in_names(sandboxd_url: str, tmp_path: Path) -> None:
    """On POSIX a backslash (or a colon) is an ordinary character of a file name:
    download_dir fetches such files under the same names (it refused the whole tree),
    sync and async; a name that would leave the local directory is still refused."""
    sb = agent_sandbox_sdk.connect(sandboxd_url)
    d = f"bs-{time.monotonic_ns()}"
    sb.files.write(f"{d}/a\\b.txt", b"1")
    sb.files.write(f"{d}/sub\\dir/c:d\\..\\e", b"2")
    assert sorted(e.name for e in sb.files.list(d)) == ["a\\b.txt", "sub\\dir"]
    assert sb.files.download_dir(d, tmp_path / "sync") == 2
    assert (tmp_path / "sync" / "a\\b.txt").read_bytes() == b"1"
    assert (tmp_path / "sync" / "sub\\dir" / "c:d\\..\\e").read_bytes() == b"2"

    async def main() -> int:
        async with aio.connect(sandboxd_url) as asb:
            return await asb.files.download_dir(d, tmp_path / "async")

    assert asyncio.run(main()) == 2
    assert (tmp_path / "async" / "sub\\dir" / "c:d\\..\\e").read_bytes() == b"2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["async", "sync"]  # nothing beside them
    sb.files.delete(d, recursive=True)
