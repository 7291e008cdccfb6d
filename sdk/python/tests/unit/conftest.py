"""Unit tests run apart from any stack: the environment a stack run exports for the
integration tests (run-tests.sh) must not change what they test. And no_backoff, for
modules whose retries should not sleep (pytestmark = pytest.mark.usefixtures(...))."""

from __future__ import annotations

import pytest

from agent_sandbox_sdk import _wire


@pytest.fixture(autouse=True)
def _no_stack_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "AGENT_SANDBOX_ROUTER_TOKEN",
        "AGENT_SANDBOX_ROUTER_URL",
        "AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries of sandboxd calls without their waits."""
    monkeypatch.setattr(_wire.Attempts, "backoff", property(lambda self: 0.0))
