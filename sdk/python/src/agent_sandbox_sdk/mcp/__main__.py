"""python -m agent_sandbox_sdk.mcp: the same as the agent-sandbox-mcp command."""

from agent_sandbox_sdk.mcp._cli import main

main()
