"""The MCP server: the tools of _tools registered on the official SDK's MCPServer, with
typed input schemas, output schemas and descriptions written for a model."""

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ContentBlock, ImageContent, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from agent_sandbox_sdk._kubeconfig import ConfigError
from agent_sandbox_sdk.errors import SandboxError
from agent_sandbox_sdk.mcp._bounds import bound_text
from agent_sandbox_sdk.mcp._tools import CODE_TIMEOUT, COMMAND_TIMEOUT, ToolFailure, Tools

INSTRUCTIONS = """\
Agent Sandbox: isolated Linux sandboxes (Kubernetes pods) to run commands and code in.
Start with list_sandboxes or create_sandbox; then run_command, run_code, write_file,
read_file and list_files on the sandbox by name (when this server created exactly one
sandbox the name may be left out); delete_sandbox when done. File paths are relative to
the sandbox's workspace. Outputs are cut at a size limit, with a marker saying how much
was left out: redirect large output to a file and read parts of it."""

SandboxName = Annotated[
    str | None,
    Field(description="Sandbox (or SandboxClaim) name; may be omitted when this server created exactly one."),
]


class Created(BaseModel):
    sandbox: str = Field(description="the Sandbox name, to pass to the other tools")
    claim: str = Field(description="the SandboxClaim name when claimed from a warm pool, else empty")
    namespace: str
    source: str = Field(alias="from", description="the pool or template it came from")
    ttl_seconds: float | None = Field(description="deleted automatically after this many seconds (none: no TTL)")


class SandboxEntry(BaseModel):
    name: str
    claim: str = ""
    ready: bool
    operating_mode: str = "Running"
    reason: str = ""
    created_by: str = ""
    created_here: bool = Field(description="created by this MCP server")


class SandboxList(BaseModel):
    namespace: str = ""
    sandboxes: list[SandboxEntry]
    truncated: bool


class Deleted(BaseModel):
    deleted: str = Field(description="the object deleted (claim, else Sandbox)")
    sandbox: str
    claim: str


class CommandResult(BaseModel):
    exit_code: int = Field(description="the exit status; -1 when killed by a signal")
    signal: int
    timed_out: bool
    stdout: str
    stderr: str
    stdout_bytes: int = Field(description="bytes the command wrote to stdout (before any cut)")
    stderr_bytes: int
    stdout_truncated: bool
    stderr_truncated: bool


class CodeErrorOut(BaseModel):
    name: str
    value: str
    traceback: str


class CodeResultOut(BaseModel):
    is_main: bool
    mime_types: list[str]
    text: str | None
    image: str | None = None


class CodeRun(BaseModel):
    execution_count: int
    text: str | None = Field(description="text/plain of the last expression's value")
    stdout: str
    stderr: str
    stdout_bytes: int = Field(default=0, description="bytes the code wrote to stdout (before any cut)")
    stderr_bytes: int = 0
    truncated: bool
    timed_out: bool = Field(default=False, description="interrupted at the timeout (the context keeps its state)")
    error: CodeErrorOut | None
    results: list[CodeResultOut]
    results_omitted: int = Field(default=0, description="results left out past the answer's limit")


class FileContent(BaseModel):
    path: str
    encoding: Literal["text", "base64"]
    content: str
    truncated: bool


class Written(BaseModel):
    path: str
    bytes: int


class FileEntryOut(BaseModel):
    name: str
    type: str
    size: int
    modified: str
    mode: str


class Listing(BaseModel):
    path: str
    entries: list[FileEntryOut]
    truncated: bool = Field(description="more entries than listed")
    total: int | None = Field(description="entries in the directory; null when truncated (not all were counted)")
    total_at_least: int = Field(description="entries seen: the directory's size when not truncated, else a lower bound")


log = logging.getLogger("agent_sandbox_sdk.mcp")

CONFIG_ERROR_TEXT = (
    "ConfigError: the server could not authenticate to the cluster (its kubeconfig, token "
    "or exec credential plugin failed); the details are in the server's log"
)
"""The tool error of a ConfigError: its text may name the server's credentials (a token
file, an exec plugin and what it printed), which the model is not to read."""

EXPECTED = (ToolFailure, SandboxError, ValueError, TypeError)
"""The failures a tool reports to the model as a tool error (isError)."""


def _tool_error(e: BaseException, limit: int) -> ToolError:
    """The tool error of an expected failure, its text cut to limit bytes (head, marker,
    tail: a sandbox's error message can be megabytes, and is the sandbox's to choose)."""
    if isinstance(e, ConfigError):
        log.warning("tool call failed on the cluster configuration: %s", e)
        return ToolError(CONFIG_ERROR_TEXT)
    text = f"{type(e).__name__}: {e}" if isinstance(e, SandboxError) else str(e)
    return ToolError(bound_text(text, limit)[0])


def _caller(limit: int) -> Callable[[Awaitable[dict[str, Any]]], Awaitable[dict[str, Any]]]:
    """What runs a tool body: expected failures become tool errors (isError) for the
    model, their texts within limit bytes."""

    async def call(aw: Awaitable[dict[str, Any]]) -> dict[str, Any]:
        try:
            return await aw
        except EXPECTED as e:
            raise _tool_error(e, limit) from None

    return call


def build_server(tools: Tools) -> MCPServer:
    """An MCPServer with the sandbox tools bound to ``tools``."""
    server: MCPServer = MCPServer("agent-sandbox", instructions=INSTRUCTIONS, log_level="WARNING")
    lim = tools.limits
    call = _caller(lim.output_bytes)
    ro = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
    opened = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)

    @server.tool(annotations=opened)
    async def create_sandbox(
        template: Annotated[str | None, Field(description="SandboxTemplate to start a fresh sandbox from")] = None,
        pool: Annotated[str | None, Field(description="SandboxWarmPool to claim a ready sandbox from (fast)")] = None,
        ttl_seconds: Annotated[
            float | None,
            Field(
                description="delete the sandbox automatically after this many seconds"
                + (f" (default and at most {tools.opts.default_ttl:g})" if tools.opts.default_ttl else "")
            ),
        ] = None,
    ) -> Created:
        """Creates a sandbox and waits until it is ready; returns its name. Give a warm
        pool (fast: claims a pre-started sandbox) or a template; with neither, the
        server's default is used. Delete it with delete_sandbox when done."""
        return Created.model_validate(await call(tools.create_sandbox(template, pool, ttl_seconds)))

    @server.tool(annotations=ro)
    async def list_sandboxes() -> SandboxList:
        """Lists the sandboxes of the namespace: name, readiness, the claim that owns it,
        and whether this server created it."""
        return SandboxList.model_validate(await call(tools.list_sandboxes()))

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
    async def delete_sandbox(
        sandbox: Annotated[str, Field(description="Sandbox or SandboxClaim name")],
    ) -> Deleted:
        """Deletes a sandbox (its claim when it came from a warm pool). Its files are lost."""
        return Deleted.model_validate(await call(tools.delete_sandbox(sandbox)))

    @server.tool(
        annotations=opened,
        description="Runs a command in a sandbox to completion and returns its exit code, stdout and stderr. "
        f"Each stream is cut at {lim.output_bytes} bytes (head and tail kept, a marker in between): "
        "redirect big output to a file and read parts of it.",
    )
    async def run_command(
        command: Annotated[
            str | list[str],
            Field(description="a shell command line (run by /bin/sh -c) or an argv list (no shell)"),
        ],
        sandbox: SandboxName = None,
        cwd: Annotated[str | None, Field(description="working directory, relative to the workspace")] = None,
        env: Annotated[dict[str, str] | None, Field(description="extra environment variables")] = None,
        timeout_seconds: Annotated[
            float | None,
            Field(
                description="kill the command after this many seconds "
                f"(default {min(COMMAND_TIMEOUT, lim.timeout):g}, at most {lim.timeout:g})"
            ),
        ] = None,
    ) -> CommandResult:
        return CommandResult.model_validate(await call(tools.run_command(sandbox, command, cwd, env, timeout_seconds)))

    @server.tool(annotations=opened, structured_output=True)
    async def run_code(
        code: Annotated[str, Field(description="Python source; the value of the last expression is returned")],
        sandbox: SandboxName = None,
        context: Annotated[
            str | None,
            Field(
                description="code context id: variables persist between calls in one context; a new id "
                "starts a fresh interpreter (default 'default')"
            ),
        ] = None,
        timeout_seconds: Annotated[
            float | None,
            Field(
                description="interrupt the code after this many seconds (the context survives; "
                f"default {min(CODE_TIMEOUT, lim.timeout):g}, at most {lim.timeout:g})"
            ),
        ] = None,
    ) -> Annotated[CallToolResult, CodeRun]:
        """Runs Python code in a persistent interpreter (like a notebook cell) in a
        sandbox. Returns the last expression's value as text, stdout, stderr, the error
        with its traceback, and figures (PNG) as images."""
        try:
            out = await tools.run_code(sandbox, code, context, timeout_seconds)
        except EXPECTED as e:
            raise _tool_error(e, lim.output_bytes) from None
        structured = CodeRun.model_validate(out.summary).model_dump(mode="json")
        content: list[ContentBlock] = [TextContent(type="text", text=json.dumps(structured, indent=1))]
        content += [ImageContent(type="image", data=i.data, mime_type=i.mime_type) for i in out.images]
        return CallToolResult(content=content, structured_content=structured)

    @server.tool(annotations=ro)
    async def read_file(
        path: Annotated[str, Field(description="file path, relative to the workspace")],
        sandbox: SandboxName = None,
        encoding: Annotated[
            Literal["text", "base64"], Field(description="'text' (UTF-8) or 'base64' for binary files")
        ] = "text",
        max_bytes: Annotated[
            int | None, Field(description=f"read at most this many bytes (at most {lim.output_bytes})")
        ] = None,
    ) -> FileContent:
        """Reads a file of a sandbox. Text is returned as is; a binary file needs
        encoding='base64'. Files larger than the limit come back cut, truncated=true."""
        return FileContent.model_validate(await call(tools.read_file(sandbox, path, encoding, max_bytes)))

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True, open_world_hint=False))
    async def write_file(
        path: Annotated[str, Field(description="file path, relative to the workspace; parent directories are created")],
        content: Annotated[str, Field(description="the file's content (UTF-8 text, or base64 with encoding='base64')")],
        sandbox: SandboxName = None,
        encoding: Annotated[Literal["text", "base64"], Field(description="how content is encoded")] = "text",
        mode: Annotated[str | None, Field(description="permission bits in octal, e.g. '755'")] = None,
    ) -> Written:
        """Writes (creates or replaces, atomically) a file in a sandbox."""
        return Written.model_validate(await call(tools.write_file(sandbox, path, content, encoding, mode)))

    @server.tool(annotations=ro)
    async def list_files(
        path: Annotated[str, Field(description="directory, relative to the workspace ('' for the workspace)")] = "",
        sandbox: SandboxName = None,
    ) -> Listing:
        """Lists a directory of a sandbox: name, type (file, directory, other), size,
        modification time and mode of each entry."""
        return Listing.model_validate(await call(tools.list_files(sandbox, path)))

    return server
