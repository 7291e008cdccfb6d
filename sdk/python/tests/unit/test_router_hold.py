"""The router's 503 after its start hold ("... is not ready: <reason> (waited 30.0s for
it).", docs/router.md) is not retried, as the Go SDK's: the router already waited, and
each attempt would be held as long again. Its other 503s still are."""

from __future__ import annotations

import httpx
import pytest

from agent_sandbox_sdk import SandboxConnectionError, _wire

from .fakes import async_sandbox, sync_sandbox

pytestmark = pytest.mark.usefixtures("no_backoff")

HELD = {"detail": "Sandbox default/sb is not ready: DependenciesNotReady (waited 30.0s for it)."}
NOT_HELD = {"detail": "Sandbox default/sb is not ready: DependenciesNotReady."}


class Router:
    """Answers every request with the router's 503 (body)."""

    def __init__(self, body: dict[str, str]) -> None:
        self.body = body
        self.hits = 0

    def __call__(self, req: httpx.Request) -> httpx.Response:
        self.hits += 1
        return httpx.Response(503, json=self.body)


@pytest.mark.parametrize(("body", "attempts"), [(HELD, 1), (NOT_HELD, 3)], ids=["held", "not-held"])
def test_a_router_503_after_its_start_hold_is_not_retried(body: dict[str, str], attempts: int) -> None:
    router = Router(body)
    with pytest.raises(SandboxConnectionError, match="is not ready: DependenciesNotReady"):
        sync_sandbox(router).files.read("x")  # idempotent: three attempts for another 503
    assert router.hits == attempts


@pytest.mark.parametrize(("body", "attempts"), [(HELD, 1), (NOT_HELD, 3)], ids=["held", "not-held"])
async def test_async_a_router_503_after_its_start_hold_is_not_retried(body: dict[str, str], attempts: int) -> None:
    router = Router(body)
    with pytest.raises(SandboxConnectionError, match="is not ready: DependenciesNotReady"):
        await async_sandbox(router).files.read("x")
    assert router.hits == attempts


def test_which_answers_are_held_not_ready() -> None:
    assert _wire.held_not_ready(httpx.Response(503, json=HELD))
    assert not _wire.held_not_ready(httpx.Response(503, json=NOT_HELD))
    assert not _wire.held_not_ready(httpx.Response(502, json=HELD))  # only the router's 503
    sandboxd = {"code": "UNAVAILABLE", "message": "not ready (waited 1s for it)"}
    assert not _wire.held_not_ready(httpx.Response(503, json=sandboxd))  # not the router's
