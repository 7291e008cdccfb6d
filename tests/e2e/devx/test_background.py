"""Background processes on a real sandbox, in every connection mode of the ``sandbox``
fixture (router, API server pod proxy, pod IP): an HTTP server started in the background
outlives the SDK client that started it; a new client lists it, replays and follows its
output, reaches the server from inside the sandbox, kills it and sees it exited.

The fixtures (``sandbox``: a Ready ``agent_sandbox_sdk.Sandbox``, module-scoped and shared, so
every path and port here is unique; ``sandbox_client``) come from conftest.py."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator

import pytest

from agent_sandbox_sdk import (
    NotFoundError,
    OutputEvent,
    ProcessExitedError,
    Sandbox,
    SandboxClient,
    aio,
)


def _text(evs: list[OutputEvent]) -> bytes:
    return b"".join(e.data for e in evs if e.type in ("stdout", "stderr"))


def _fetch_cmd(port: int, path: str) -> str:
    return (
        'python3 -c "import urllib.request; '
        f"print(urllib.request.urlopen('http://127.0.0.1:{port}/{path}', timeout=5).read().decode())\""
    )


def _until_served(sb: Sandbox, port: int, path: str, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        r = sb.run(_fetch_cmd(port, path), timeout=20)
        if r.ok:
            return r.stdout
        assert time.monotonic() < deadline, (
            f"the server did not answer: {r.stderr[-500:]}"
        )
        time.sleep(0.5)


def _second_client(sandbox: Sandbox) -> SandboxClient:
    """A client of its own (same cluster, namespace and connection mode as the fixture's)."""
    c = sandbox.client
    return SandboxClient(
        namespace=sandbox.namespace, config=c.config, connection=c.connection
    )


def _until(
    events: Iterator[OutputEvent], needle: bytes, timeout: float = 60.0
) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    for ev in events:
        seen += ev.data
        if needle in seen:
            return seen
        assert ev.type != "exit", f"exited before {needle!r}: {seen[-500:]!r}"
        assert time.monotonic() < deadline, f"no {needle!r} in {seen[-500:]!r}"
    raise AssertionError(f"the output ended before {needle!r}: {seen[-500:]!r}")


def test_background_http_server_outlives_client(sandbox: Sandbox) -> None:
    tag = uuid.uuid4().hex[:12]
    site = f"bg-e2e-{tag}"
    port = random.randint(20000, 45000)
    sandbox.files.write(f"{site}/index.html", f"hello-{tag}\n")

    first = _second_client(sandbox)
    try:
        sb1 = first.get(sandbox.name, namespace=sandbox.namespace)
        p = sb1.start_background(
            ["python3", "-u", "-m", "http.server", str(port), "--bind", "127.0.0.1"],
            cwd=site,
        )
        assert p.last_info is not None and p.last_info.running and p.last_info.pid > 0
        pid = p.id
    finally:
        first.close()  # the client that started it is gone

    # A new client: the process is listed as running, with its command.
    infos = {i.id: i for i in sandbox.background_processes()}
    assert pid in infos and infos[pid].running, infos
    assert infos[pid].command[-3:] == (str(port), "--bind", "127.0.0.1")
    h = sandbox.background(pid)
    try:
        assert f"hello-{tag}" in _until_served(sandbox, port, "index.html")

        # Reattach: the replay holds the start banner and the request's log line.
        replay = list(h.output(follow=False))
        assert replay and replay[0].type != "dropped"
        assert b"Serving HTTP" in _text(replay)
        assert b"GET /index.html" in _text(replay)
        end = h.info().output_end
        assert end >= len(_text(replay))

        # Follow from the end: a new request shows up live.
        live = h.output(follow=True, offset=end)
        try:
            sandbox.run(_fetch_cmd(port, f"index.html?live-{tag}"), timeout=20)
            _until(live, f"live-{tag}".encode())
        finally:
            live.close()  # leaving the stream leaves the server running
        assert h.info().running
        assert (
            f"hello-{tag}"
            in sandbox.run(_fetch_cmd(port, "index.html"), timeout=20).stdout
        )

        # Kill it: it is listed as exited (SIGKILL), and the port no longer answers.
        h.kill()
        info = h.wait(timeout=30)
        assert (info.state, info.signal, info.exit_code) == ("exited", 9, None)
        assert info.ended_at is not None
        assert pid in [i.id for i in sandbox.background_processes() if not i.running]
        assert not sandbox.run(_fetch_cmd(port, "index.html"), timeout=20).ok
        with pytest.raises(ProcessExitedError):
            h.signal("TERM")
        tail = list(h.output(follow=True))
        assert tail[-1].type == "exit" and tail[-1].signal == 9
    finally:
        h.remove()
    with pytest.raises(NotFoundError):
        h.info()
    sandbox.files.delete(site, recursive=True, missing_ok=True)


@pytest.mark.asyncio
async def test_background_async_client_reattaches(sandbox: Sandbox) -> None:
    c = sandbox.client
    tag = uuid.uuid4().hex[:12]
    starter = aio.AsyncSandboxClient(
        namespace=sandbox.namespace, config=c.config, connection=c.connection
    )
    try:
        sb1 = await starter.get(sandbox.name, namespace=sandbox.namespace)
        p = await sb1.start_background(
            f"echo start-{tag}; read line; echo got-$line", stdin=True
        )
    finally:
        await starter.aclose()

    reader = aio.AsyncSandboxClient(
        namespace=sandbox.namespace, config=c.config, connection=c.connection
    )
    try:
        sb2 = await reader.get(sandbox.name, namespace=sandbox.namespace)
        h = sb2.background(p.id)
        assert (await h.info()).running
        await h.write(f"{tag}\n")
        info = await h.wait(timeout=60)
        assert (info.state, info.exit_code) == ("exited", 0)
        evs = [e async for e in h.output(follow=False)]
        assert _text(evs) == f"start-{tag}\ngot-{tag}\n".encode()
        assert evs[-1].type == "exit" and evs[-1].exit_code == 0
        await h.remove()
        assert p.id not in [i.id for i in await sb2.background_processes()]
    finally:
        await reader.aclose()
