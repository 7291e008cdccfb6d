"""python -m agent_sandbox.mcp: the same as the agent-sandbox-mcp command."""

from agent_sandbox.mcp._cli import main

main()
