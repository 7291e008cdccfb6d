"""Shared fixtures of the developer-feature e2e tests (tests/e2e/devx.sh runs them on the
stack of `make up`).

- ``sandbox_client`` (session): an ``agent_sandbox_sdk.SandboxClient`` on the cluster's
  kubeconfig ($AGENT_SANDBOX_KUBECONFIG, else $KUBECONFIG), namespace
  $AGENT_SANDBOX_E2E_NAMESPACE (default "default").
- ``sandbox`` (module scope, parametrized ``[router]``, ``[proxy]``, ``[direct]``): one Ready
  ``agent_sandbox_sdk.Sandbox`` per module and connection mode, claimed from the warm pool
  $AGENT_SANDBOX_E2E_POOL (default "python-pool") through a client of that mode, deleted
  when the module's tests of that mode are done. Tests share it: never assume a fresh
  sandbox (use unique paths and ids).

The router mode needs $AGENT_SANDBOX_ROUTER_URL (and $AGENT_SANDBOX_ROUTER_TOKEN unless
the kubeconfig carries a bearer token); without a URL its tests are skipped."""

from __future__ import annotations

import os
from collections.abc import Iterator

import agent_sandbox_sdk
import pytest
from agent_sandbox_sdk import DirectConnection, PodProxyConnection, RouterConnection

# the sci_sandbox fixture (template python-sci) lives in its own plugin file
pytest_plugins = ["conftest_sci"]

MODES = ("router", "proxy", "direct")
POOL = os.environ.get("AGENT_SANDBOX_E2E_POOL", "python-pool")
NAMESPACE = os.environ.get("AGENT_SANDBOX_E2E_NAMESPACE", "default")


def _kubeconfig() -> str:
    kc = os.environ.get("AGENT_SANDBOX_KUBECONFIG") or os.environ.get("KUBECONFIG")
    if not kc or not os.path.exists(kc.split(os.pathsep)[0]):
        pytest.skip("no cluster: set AGENT_SANDBOX_KUBECONFIG (tests/e2e/devx.sh does)")
    return kc


def _connection(mode: str) -> agent_sandbox_sdk.Connection:
    if mode == "router":
        url = os.environ.get("AGENT_SANDBOX_ROUTER_URL")
        if not url:
            pytest.skip("router mode needs $AGENT_SANDBOX_ROUTER_URL")
        return RouterConnection(
            url=url, token=os.environ.get("AGENT_SANDBOX_ROUTER_TOKEN") or None
        )
    if mode == "proxy":
        return PodProxyConnection()
    return DirectConnection()


@pytest.fixture(scope="session")
def sandbox_client() -> Iterator[agent_sandbox_sdk.SandboxClient]:
    with agent_sandbox_sdk.SandboxClient(
        kubeconfig=_kubeconfig(), namespace=NAMESPACE
    ) as c:
        yield c


@pytest.fixture(scope="module", params=MODES, ids=[f"{m}" for m in MODES])
def sandbox(
    request: pytest.FixtureRequest, sandbox_client: agent_sandbox_sdk.SandboxClient
) -> Iterator[agent_sandbox_sdk.Sandbox]:
    conn = _connection(request.param)
    with agent_sandbox_sdk.SandboxClient(
        config=sandbox_client.config,
        namespace=sandbox_client.namespace,
        connection=conn,
        timeout=60.0,
    ) as client:
        sb = client.create(POOL, timeout=300.0)
        try:
            yield sb
        finally:
            try:
                sb.delete()
            except agent_sandbox_sdk.SandboxError:
                pass
