"""agent_sandbox_sdk.mcp: an MCP server exposing sandboxes as tools for LLM agents
(create/claim, list, run a command, run code, read/write/list files, delete), over
stdio or streamable HTTP, built on the official ``mcp`` package.

Install with ``pip install 'agent-sandbox-sdk[mcp]'`` and run ``agent-sandbox-mcp --help``
(or ``python -m agent_sandbox_sdk.mcp``). See docs/mcp.md.

This package is named like the ``mcp`` distribution it uses; its modules import that
one with absolute imports (``from mcp.server...``), which always resolve to the
top-level package."""

from __future__ import annotations

from agent_sandbox_sdk.mcp._bounds import Limits
from agent_sandbox_sdk.mcp._cli import main
from agent_sandbox_sdk.mcp._server import build_server
from agent_sandbox_sdk.mcp._tools import Options, Tools

__all__ = ["Limits", "Options", "Tools", "build_server", "main"]
