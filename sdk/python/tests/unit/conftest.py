"""Unit tests run apart from any stack: the environment a stack run exports for the
integration tests (run-tests.sh) must not change what they test."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_stack_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AGENT_SANDBOX_ROUTER_TOKEN", "AGENT_SANDBOX_ROUTER_URL"):
        monkeypatch.delenv(name, raising=False)
