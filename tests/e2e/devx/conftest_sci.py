"""pytest plugin of the scientific-image e2e tests (register it with
``pytest_plugins = ["conftest_sci"]``; it uses the ``sandbox_client`` fixture of
conftest.py).

- ``sci_sandbox`` (module scope): a Ready ``agent_sandbox_sdk.Sandbox`` created from the
  SandboxTemplate "python-sci" (image localhost/agent-sandbox/runtime-sci:dev, which
  `make up` builds and config/local/sci.yaml installs; no warm pool) and reached through
  the router ($AGENT_SANDBOX_ROUTER_URL, token $AGENT_SANDBOX_ROUTER_TOKEN or the
  kubeconfig's). Deleted when the module is done."""

from __future__ import annotations

import os
from collections.abc import Iterator

import agent_sandbox_sdk
import pytest
from agent_sandbox_sdk import RouterConnection

SCI_TEMPLATE = os.environ.get("AGENT_SANDBOX_E2E_SCI_TEMPLATE", "python-sci")


@pytest.fixture(scope="module")
def sci_sandbox(sandbox_client: agent_sandbox_sdk.SandboxClient) -> Iterator[agent_sandbox_sdk.Sandbox]:
    url = os.environ.get("AGENT_SANDBOX_ROUTER_URL")
    if not url:
        pytest.skip("sci_sandbox goes through the router: set $AGENT_SANDBOX_ROUTER_URL")
    conn = RouterConnection(url=url, token=os.environ.get("AGENT_SANDBOX_ROUTER_TOKEN") or None)
    with agent_sandbox_sdk.SandboxClient(
        config=sandbox_client.config, namespace=sandbox_client.namespace, connection=conn, timeout=60.0
    ) as client:
        # A cold start from the template (the image is imported, not pulled): give it time.
        sb = client.create(template=SCI_TEMPLATE, timeout=300.0)
        try:
            yield sb
        finally:
            try:
                sb.delete()
            except agent_sandbox_sdk.SandboxError:
                pass
