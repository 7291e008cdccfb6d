"""A directory's listing pages on sandboxd's continue tokens, and an answer that pages
on for ever is not followed for ever: a token seen before (cycling a, b, a, b, or
repeated at once), a token after an empty page and more than MAX_LISTING_ENTRIES
entries in all raise SandboxError, sync and async (the MCP server's counting listing
too)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from agent_sandbox_sdk import _wire
from agent_sandbox_sdk.errors import SandboxError

from .fakes import async_sandbox, sync_sandbox

Pager = Callable[[str | None], tuple[list[str], str | None]]


def sandboxd(pager: Pager, asked: list[str | None]) -> Callable[[httpx.Request], httpx.Response]:
    """A sandboxd whose listing of any directory is pager(continue token)."""

    def handler(req: httpx.Request) -> httpx.Response:
        token = req.url.params.get("continue")
        asked.append(token)
        if len(asked) > 1000:
            raise AssertionError("the listing did not stop")
        names, nxt = pager(token)
        entries = [
            {"name": n, "type": "file", "size": 1, "mode": "0644", "modified_at": "2024-01-01T00:00:00Z"} for n in names
        ]
        body: dict[str, object] = {"path": "/d", "entries": entries}
        if nxt is not None:
            body["continue"] = nxt
        return httpx.Response(200, json=body)

    return handler


def three_pages(token: str | None) -> tuple[list[str], str | None]:
    return {None: (["a", "b"], "t1"), "t1": (["c", "d"], "t2"), "t2": (["e"], None)}[token]


def cycling(token: str | None) -> tuple[list[str], str | None]:
    return [f"n{token}"], {None: "a", "a": "b", "b": "a"}[token]


def repeating(token: str | None) -> tuple[list[str], str | None]:
    return ["x"], "a"


def endless(token: str | None) -> tuple[list[str], str | None]:
    i = int(token or "0")
    return [f"n{i}-{j}" for j in range(10)], str(i + 1)


def empty_with_token(token: str | None) -> tuple[list[str], str | None]:
    return ([], "a") if token is None else (["x"], None)


BAD: list[tuple[str, Pager, str]] = [
    ("cycle", cycling, "repeated a continue token"),
    ("repeat", repeating, "repeated a continue token"),
    ("endless", endless, r"more than 50 entries \(MAX_LISTING_ENTRIES\)"),
    ("empty page", empty_with_token, "empty page with a continue token"),
]


@pytest.fixture
def small_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_wire, "MAX_LISTING_ENTRIES", 50, raising=False)


def test_pages_are_followed() -> None:
    asked: list[str | None] = []
    sb = sync_sandbox(sandboxd(three_pages, asked))
    assert [e.name for e in sb.files.list("d")] == ["a", "b", "c", "d", "e"]
    assert asked == [None, "t1", "t2"]


async def test_async_pages_are_followed() -> None:
    asked: list[str | None] = []
    sb = async_sandbox(sandboxd(three_pages, asked))
    assert [e.name for e in await sb.files.list("d")] == ["a", "b", "c", "d", "e"]
    entries, seen, complete = await sb.files._list_head("d", 10)
    assert [e.name for e in entries] == ["a", "b", "c", "d", "e"] and (seen, complete) == (5, True)
    # the MCP server's: stops at the page that shows more than it keeps
    asked.clear()
    entries, seen, complete = await sb.files._list_head("d", 1)
    assert [e.name for e in entries] == ["a"] and not complete and 1 < seen <= 5 and asked == [None]


@pytest.mark.usefixtures("small_cap")
@pytest.mark.parametrize(("case", "pager", "error"), BAD, ids=[b[0] for b in BAD])
def test_an_endless_listing_stops(case: str, pager: Pager, error: str) -> None:
    asked: list[str | None] = []
    sb = sync_sandbox(sandboxd(pager, asked))
    with pytest.raises(SandboxError, match=error):
        sb.files.list("d")
    assert len(asked) <= 6


@pytest.mark.usefixtures("small_cap")
@pytest.mark.parametrize(("case", "pager", "error"), BAD, ids=[b[0] for b in BAD])
async def test_an_endless_async_listing_stops(case: str, pager: Pager, error: str) -> None:
    asked: list[str | None] = []
    sb = async_sandbox(sandboxd(pager, asked))
    with pytest.raises(SandboxError, match=error):
        await sb.files.list("d")
    with pytest.raises(SandboxError, match=error):
        await sb.files._list_head("d", 1000)  # the MCP server's (keeps more than the cap)


def test_the_cap_is_a_million() -> None:
    assert _wire.MAX_LISTING_ENTRIES == 1_000_000
