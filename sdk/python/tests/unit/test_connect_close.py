"""A handle from connect() owns the client connect() made: leaving its with block (or
close()/aclose()) closes that client's connections. A handle from a client leaves the
client open: it is shared."""

from __future__ import annotations

from agent_sandbox_sdk import AsyncSandbox, AsyncSandboxClient, Sandbox, SandboxClient, aio, connect

from .fakes import ROUTER, config


def _closed(c: SandboxClient | AsyncSandboxClient) -> bool:
    return c.http.is_closed and c.kube.http.is_closed


def test_a_connect_handle_closes_its_client() -> None:
    with connect("http://127.0.0.1:1") as sb:
        assert not _closed(sb.client)
    assert _closed(sb.client)
    other = connect("http://127.0.0.1:1")
    other.close()
    assert _closed(other.client)


async def test_async_a_connect_handle_closes_its_client() -> None:
    async with aio.connect("http://127.0.0.1:1") as sb:
        assert not _closed(sb.client)
    assert _closed(sb.client)
    other = aio.connect("http://127.0.0.1:1")
    await other.aclose()
    assert _closed(other.client)


def test_a_client_handle_leaves_its_client_open() -> None:
    with SandboxClient(config=config(), connection=ROUTER) as c:
        with Sandbox(c, "default", "sb", keep=True) as sb:
            pass
        sb.close()
        assert not c.http.is_closed and not c.kube.http.is_closed
    assert _closed(c)


async def test_async_a_client_handle_leaves_its_client_open() -> None:
    async with AsyncSandboxClient(config=config(), connection=ROUTER) as c:
        async with AsyncSandbox(c, "default", "sb", keep=True) as sb:
            pass
        await sb.aclose()
        assert not c.http.is_closed and not c.kube.http.is_closed
    assert _closed(c)
