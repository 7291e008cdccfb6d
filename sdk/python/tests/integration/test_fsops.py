"""Filesystem operations (stat, mkdir, move, batch writes, windowed reads, watch)
against a real sandboxd binary, sync and async."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest

import agent_sandbox_sdk
from agent_sandbox_sdk import AuthError, ConflictError, FileEvent, NotFoundError, RequestError, aio

pytestmark = pytest.mark.integration


def _d() -> str:
    return "fs-" + uuid.uuid4().hex[:8]


def test_sync_stat_mkdir_move(sandboxd_url: str) -> None:
    sb = agent_sandbox_sdk.connect(sandboxd_url)
    d = _d()
    st = sb.files.mkdir(f"{d}/a/b", mode=0o750)
    assert (st.type, st.path, st.mode, st.is_dir) == ("directory", f"/{d}/a/b", "0750", True)
    assert sb.files.mkdir(f"{d}/a/b").is_dir  # parents=True accepts an existing directory
    with pytest.raises(ConflictError):
        sb.files.mkdir(f"{d}/a/b", parents=False)
    with pytest.raises(NotFoundError):
        sb.files.mkdir(f"{d}/x/y", parents=False)
    sb.files.write(f"{d}/f.txt", b"12345")
    st = sb.files.stat(f"{d}/f.txt")
    assert (st.name, st.type, st.size, st.is_file, st.symlink_target) == ("f.txt", "file", 5, True, None)
    assert st.mtime.tzinfo is not None
    with pytest.raises(NotFoundError):
        sb.files.stat(f"{d}/none")
    sb.files.move(f"{d}/f.txt", f"{d}/a/g.txt")
    assert sb.files.read(f"{d}/a/g.txt") == b"12345"
    sb.files.write(f"{d}/h.txt", b"h")
    with pytest.raises(ConflictError) as ei:
        sb.files.move(f"{d}/h.txt", f"{d}/a/g.txt")
    assert ei.value.status == 409 and isinstance(ei.value, RequestError)
    sb.files.move(f"{d}/h.txt", f"{d}/a/g.txt", overwrite=True)
    assert sb.files.read(f"{d}/a/g.txt") == b"h"
    with pytest.raises(RequestError) as e2:
        sb.files.move(f"{d}/a", f"{d}/a/b/c")
    assert e2.value.status == 400
    sb.run(f"ln -s / {d}/out")  # a symlink out of the root: nothing goes through it
    with pytest.raises(AuthError):
        sb.files.move(f"{d}/a/g.txt", f"{d}/out/tmp/escaped")
    with pytest.raises(AuthError):
        sb.files.mkdir(f"{d}/out/tmp/escaped-dir")
    with pytest.raises(AuthError):
        sb.files.stat(f"{d}/out/etc/passwd")
    assert sb.files.stat(f"{d}/out").symlink_target == "/"
    with pytest.raises(AuthError):
        sb.files.watch(f"{d}/out")
    with pytest.raises(ValueError):
        sb.files.move(f"{d}/a/g.txt", "../escaped")
    sb.files.delete(d, recursive=True)
    assert not sb.files.exists(d)


def test_sync_batch_and_ranges(sandboxd_url: str) -> None:
    sb = agent_sandbox_sdk.connect(sandboxd_url)
    d = _d()
    res = sb.files.write_many({f"{d}/a.bin": b"\x00\x01\x02", f"{d}/deep/b.txt": "text"})
    assert [(r.ok, r.size) for r in res] == [(True, 3), (True, 4)]
    res = sb.files.write_many([(f"{d}/m.sh", "#!/bin/sh\n", 0o755), (f"{d}", b"x")])
    assert res[0].ok and not res[1].ok and res[1].status == 400
    assert sb.files.stat(f"{d}/m.sh").mode == "0755"
    data = bytes(range(256)) * 10
    sb.files.write(f"{d}/r.bin", data)
    assert sb.files.read(f"{d}/r.bin", offset=10, max_bytes=5) == data[10:15]
    assert sb.files.read(f"{d}/r.bin", max_bytes=7) == data[:7]
    assert sb.files.read(f"{d}/r.bin", offset=2550) == data[2550:]
    assert sb.files.read(f"{d}/r.bin", offset=len(data)) == b""
    with pytest.raises(ValueError):
        sb.files.read(f"{d}/r.bin", offset=-1)


def test_sync_watch(sandboxd_url: str) -> None:
    sb = agent_sandbox_sdk.connect(sandboxd_url)
    d = _d()
    sb.files.mkdir(d)
    with sb.files.watch(d, recursive=True) as w:
        sb.files.write_many({f"{d}/f{i:03d}": b"x" for i in range(200)})
        sb.files.move(f"{d}/f000", f"{d}/moved")
        evs: list[FileEvent] = []
        it = iter(w)
        while not any(e.type == "move" and e.src == "f000" for e in evs):
            evs.append(next(it))
    # API writes are atomic: a temporary file, then a move onto the name.
    moved_in = [e.dst for e in evs if e.type == "move" and e.src and e.src.startswith(".sandboxd-tmp-")]
    assert moved_in == [f"f{i:03d}" for i in range(200)]
    last = evs[-1]
    assert (last.type, last.src, last.dst, last.is_dir) == ("move", "f000", "moved", False)
    with pytest.raises(NotFoundError):
        sb.files.watch(f"{d}/none")
    with pytest.raises(RequestError):
        sb.files.watch(f"{d}/moved")


def test_sync_watch_1000_in_order(sandboxd_url: str) -> None:
    sb = agent_sandbox_sdk.connect(sandboxd_url)
    d = _d()
    sb.files.mkdir(d)
    with sb.files.watch(d) as w:
        t = threading.Thread(target=lambda: sb.run(f"cd {d} && for i in $(seq 1000 1999); do : > f$i; done"))
        t.start()
        got = []
        for e in w:
            got.append((e.type, e.path))
            if len(got) == 1000:
                break
        t.join()
    assert got == [("create", f"f{i}") for i in range(1000, 2000)]


async def test_async_fsops(sandboxd_url: str) -> None:
    sb = aio.connect(sandboxd_url)
    try:
        d = _d()
        assert (await sb.files.mkdir(f"{d}/sub")).is_dir
        async with await sb.files.watch(d) as w:
            await sb.files.write(f"{d}/one", b"1")
            await sb.files.move(f"{d}/one", f"{d}/two")
            evs: list[FileEvent] = []
            async for e in w:
                evs.append(e)
                if e.type == "move" and e.src == "one":
                    break
        assert evs[-1].dst == "two"
        assert (await sb.files.stat(f"{d}/two")).size == 1
        res = await sb.files.write_many({f"{d}/a": "a", f"{d}/b": "bb"})
        assert [r.size for r in res] == [1, 2]
        assert await sb.files.read(f"{d}/b", offset=1) == b"b"
        with pytest.raises(ConflictError):
            await sb.files.move(f"{d}/a", f"{d}/b")
        await asyncio.sleep(0)
    finally:
        await sb.client.aclose()


async def test_async_watch_wait_cancelled_loses_nothing(sandboxd_url: str) -> None:
    """A wait for a watch event that is cancelled (asyncio.wait_for running out) leaves
    the watch open: the next wait gets the next event. Before, the cancel ended the
    stream and the next ``async for`` stopped at once, as if the watch had ended."""
    sb = aio.connect(sandboxd_url)
    try:
        d = _d()
        await sb.files.mkdir(d)
        async with await sb.files.watch(d) as w:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(anext(aiter(w)), 0.2)
            await sb.files.mkdir(f"{d}/late")

            async def first() -> FileEvent | None:
                async for e in w:
                    return e
                return None

            e = await asyncio.wait_for(first(), 10)
            assert e is not None
            assert (e.type, e.path, e.is_dir) == ("create", "late", True)
    finally:
        await sb.client.aclose()


async def test_async_watch_closed_by_another_task_ends_quietly(sandboxd_url: str) -> None:
    """A task iterating a watch that another task closes ends its loop (no
    CancelledError in a task nobody cancelled)."""
    sb = aio.connect(sandboxd_url)
    try:
        d = _d()
        await sb.files.mkdir(d)
        w = await sb.files.watch(d)

        async def read_all() -> int:
            return len([e async for e in w])

        reader = asyncio.create_task(read_all())
        await asyncio.sleep(0.2)
        await w.aclose()
        assert await asyncio.wait_for(reader, 10) == 0
    finally:
        await sb.client.aclose()


def test_list_pages_sync_and_async(sandboxd_url: str) -> None:
    """A directory larger than one of sandboxd's listing pages (10,000 names) is listed
    whole, in order, by both clients (they follow the pages' continue tokens)."""
    sb = agent_sandbox_sdk.connect(sandboxd_url)
    d = _d()
    sb.files.mkdir(d)
    r = sb.run(["sh", "-c", f"cd {d} && seq -f n%05g 0 10049 | xargs touch"])
    assert r.exit_code == 0, r.stderr
    want = [f"n{i:05d}" for i in range(10_050)]
    assert [e.name for e in sb.files.list(d)] == want

    async def alist() -> list[str]:
        async with aio.connect(sandboxd_url) as asb:
            return [e.name for e in await asb.files.list(d)]

    assert asyncio.run(alist()) == want
    sb.files.delete(d, recursive=True)


def test_read_of_a_directory_raises(sandboxd_url: str) -> None:
    """Reading a directory raises instead of returning its listing's JSON as the file's
    bytes (read, iter_read and download; sync and async)."""
    sb = agent_sandbox_sdk.connect(sandboxd_url)
    d = _d()
    sb.files.mkdir(d)
    for read in (lambda: sb.files.read(d), lambda: b"".join(sb.files.iter_read(d))):
        with pytest.raises(agent_sandbox_sdk.SandboxError, match="is a directory"):
            read()

    async def aread() -> None:
        async with aio.connect(sandboxd_url) as asb:
            with pytest.raises(agent_sandbox_sdk.SandboxError, match="is a directory"):
                await asb.files.read(d)
            with pytest.raises(agent_sandbox_sdk.SandboxError, match="is a directory"):
                async for _ in asb.files.iter_read(d):
                    pass

    asyncio.run(aread())
    sb.files.delete(d, recursive=True)


def test_a_trailing_slash_names_a_directory(sandboxd_url: str) -> None:
    """sandboxd drops a trailing slash (GET /v1/files/f.txt/ serves f.txt): the SDK keeps
    its meaning. Reading or writing a file through "f.txt/" is refused (ValueError, no
    request); stat, exists, delete and move of "f.txt/" find no directory there
    (NotFoundError, False) and leave f.txt as it was; "d/" still names the directory d
    (sync and async)."""
    sb = agent_sandbox_sdk.connect(sandboxd_url)
    d = _d()
    sb.files.mkdir(f"{d}/sub")
    sb.files.write(f"{d}/f.txt", b"file")
    sb.run(f"ln -s sub {d}/link")
    f = f"{d}/f.txt/"
    for call in (
        lambda: sb.files.read(f),
        lambda: b"".join(sb.files.iter_read(f)),
        lambda: sb.files.write(f, b"changed"),
        lambda: sb.files.write_many({f: b"changed"}),
    ):
        with pytest.raises(ValueError, match="names a directory"):
            call()
    with pytest.raises(NotFoundError, match="not a directory"):
        sb.files.stat(f)
    assert not sb.files.exists(f)
    with pytest.raises(NotFoundError, match="not a directory"):
        sb.files.delete(f)
    with pytest.raises(NotFoundError, match="not a directory"):
        sb.files.move(f"{d}/f.txt", f"{d}/g/")
    assert sb.files.read(f"{d}/f.txt") == b"file"
    assert sb.files.stat(f"{d}/sub/").is_dir and sb.files.exists(f"{d}/link/")
    assert sb.files.stat(f"{d}/link/").is_dir  # followed, as path resolution does

    async def acheck() -> None:
        async with aio.connect(sandboxd_url) as asb:
            with pytest.raises(ValueError, match="names a directory"):
                await asb.files.read(f)
            with pytest.raises(ValueError, match="names a directory"):
                await asb.files.write(f, b"changed")
            with pytest.raises(NotFoundError, match="not a directory"):
                await asb.files.stat(f)
            assert not await asb.files.exists(f)
            with pytest.raises(NotFoundError, match="not a directory"):
                await asb.files.delete(f)
            with pytest.raises(NotFoundError, match="not a directory"):
                await asb.files.move(f, f"{d}/g")
            assert await asb.files.read(f"{d}/f.txt") == b"file"
            await asb.files.move(f"{d}/sub/", f"{d}/moved/")
            assert (await asb.files.stat(f"{d}/moved")).is_dir

    asyncio.run(acheck())
    assert sb.files.read(f"{d}/f.txt") == b"file"
    sb.files.delete(f"{d}/", recursive=True)
    assert not sb.files.exists(d)
