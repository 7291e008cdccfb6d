"""The MCP server's logic without sandboxd: output bounds, run_code's mapping of an
Execution to MCP content (a fake Sandbox.run_code), create/list/delete through the
fake API server, and the command-line checks. The MCP side runs in process through
the official client (mcp.Client on the MCPServer)."""

from __future__ import annotations

import base64
import json
import os
import signal
import tracemalloc
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("mcp", reason="the mcp package is not installed (pip install 'agent-sandbox-sdk[mcp]')")

from mcp import Client
from mcp_types import ImageContent, TextContent

from agent_sandbox_sdk.errors import NotFoundError, SandboxTimeoutError
from agent_sandbox_sdk.mcp import Limits, Options, Tools, build_server
from agent_sandbox_sdk.mcp._bounds import Capture, bound_text, marker
from agent_sandbox_sdk.mcp._cli import _serve, binds_loopback_only, is_loopback, options, parser, transport_security
from agent_sandbox_sdk.mcp._tools import ToolFailure, _connection, _seconds
from agent_sandbox_sdk.models import RouterConnection
from tests.mcp_harness import free_port, http_session

from .fakes import FakeKube, FakeSandboxd, async_client, async_sandbox
from .test_client_fake import bind_on_create
from .test_stream_bounds import EVENTS, SIZE, _asandboxd

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32

# ---- bounds -----------------------------------------------------------------------------


def test_capture_keeps_head_and_tail_with_marker() -> None:
    cap = Capture(1000)
    for _ in range(100):
        cap.add(b"a" * 100)
    cap.add(b"THE END")
    assert cap.truncated and cap.total == 10_007
    text = cap.text()
    head, rest = text.split("\n[... output truncated: ", 1)
    assert head == "a" * 750
    assert rest.startswith("9007 of 10007 bytes omitted ...]\n")
    assert text.endswith("a" * 243 + "THE END")
    assert marker(10_007, 1000) in text


def test_capture_under_the_limit_is_unchanged() -> None:
    cap = Capture(1000)
    cap.add(b"x" * 700)
    cap.add("é".encode() * 150)
    assert not cap.truncated and cap.text() == "x" * 700 + "é" * 150
    assert bound_text("short", 256) == ("short", False)


def test_seconds_refuse_nan_and_infinity() -> None:
    # NaN passed every comparison (a raw client can send it): sandboxd got invalid JSON
    # for a timeout, and a TTL failed converting it.
    lim = Limits(timeout=60.0)
    for bad in (float("nan"), float("inf"), -1.0, 0.0, 61.0):
        with pytest.raises(ToolFailure, match="ttl_seconds"):
            _seconds(bad, None, lim, "ttl_seconds")
    assert _seconds(None, 5.0, lim, "t") == 5.0
    assert _seconds(60, None, lim, "t") == 60.0


def test_bound_text_cuts_utf8_safely() -> None:
    text, cut = bound_text("€" * 1000, 300)
    assert cut and "output truncated" in text
    assert len(text.encode()) < 300 + 80
    with pytest.raises(ValueError, match="minimum"):
        Capture(10)


# ---- run_code's mapping ---------------------------------------------------------------------


@dataclass
class FakeResult:
    data: dict[str, str]
    is_main: bool = False


@dataclass
class FakeError:
    name: str
    value: str
    traceback: str


@dataclass
class FakeExecution:
    stdout: str = ""
    stderr: str = ""
    results: list[FakeResult] = field(default_factory=list)
    error: FakeError | None = None
    execution_count: int = 1
    truncated: bool = False


class FakeCodeSandbox:
    """Stands in for AsyncSandbox.run_code (the SDK's code-execution contract)."""

    def __init__(self, ex: FakeExecution) -> None:
        self.ex = ex
        self.calls: list[tuple[str, Any, Any]] = []
        self.max_output: list[Any] = []

    async def run_code(
        self, code: str, *, context: Any = None, timeout: Any = None, max_output: Any = None, **kw: Any
    ) -> FakeExecution:
        """The callbacks (on_stdout, ...) and keep_streams are left alone: the streams come
        back in the Execution, as from an SDK that keeps them."""
        self.calls.append((code, context, timeout))
        self.max_output.append(max_output)
        return self.ex


def pinned_tools(fake: object, **kw: Any) -> Tools:
    tools = Tools(Options(sandboxd_url="http://127.0.0.1:9", **kw))
    tools._pinned = fake  # type: ignore[assignment]
    return tools


async def test_run_code_maps_text_streams_error_and_images() -> None:
    png = base64.b64encode(PNG).decode()
    ex = FakeExecution(
        stdout="printed\n",
        stderr="warn\n",
        results=[
            FakeResult({"text/plain": "<Figure>", "image/png": png}),
            FakeResult({"text/plain": "42", "text/html": "<b>42</b>"}, is_main=True),
        ],
        execution_count=7,
    )
    fake = FakeCodeSandbox(ex)
    async with Client(build_server(pinned_tools(fake))) as c:
        res = await c.call_tool("run_code", {"code": "21*2", "context": "ctx1", "timeout_seconds": 5})
    assert not res.is_error
    assert fake.calls == [("21*2", "ctx1", 5.0)]
    s = res.structured_content
    assert s is not None
    assert (s["text"], s["stdout"], s["stderr"], s["execution_count"]) == ("42", "printed\n", "warn\n", 7)
    assert s["error"] is None and not s["truncated"]
    assert s["results"][0]["image"] == "attached as image 1"
    assert s["results"][1]["mime_types"] == ["text/html", "text/plain"]
    images = [b for b in res.content if isinstance(b, ImageContent)]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    assert base64.b64decode(images[0].data) == PNG
    texts = [b for b in res.content if isinstance(b, TextContent)]
    assert json.loads(texts[0].text)["text"] == "42"


async def test_run_code_error_and_bounds() -> None:
    png = base64.b64encode(PNG).decode()
    ex = FakeExecution(
        stdout="o" * 5000,
        results=[FakeResult({"image/png": png}) for _ in range(3)] + [FakeResult({"image/png": "A" * 4000})],
        error=FakeError("ZeroDivisionError", "division by zero", "Traceback...\nZeroDivisionError"),
    )
    tools = pinned_tools(FakeCodeSandbox(ex))
    tools.limits = Limits(output_bytes=1024, images=2, image_bytes=1000)
    async with Client(build_server(tools)) as c:
        res = await c.call_tool("run_code", {"code": "1/0"})
    s = res.structured_content
    assert s is not None and not res.is_error
    assert s["error"]["name"] == "ZeroDivisionError" and "Traceback" in s["error"]["traceback"]
    assert s["text"] is None and s["truncated"] and "output truncated" in s["stdout"]
    assert len(s["stdout"]) < 1024 + 100
    notes = [r["image"] for r in s["results"]]
    assert notes[:2] == ["attached as image 1", "attached as image 2"]
    assert notes[2].startswith("omitted: more than 2 images")
    assert sum(isinstance(b, ImageContent) for b in res.content) == 2


async def test_run_code_answer_is_bounded_whatever_the_results() -> None:
    """Many results, long texts, a huge error value and a flood of MIME types: the answer
    stays within a few output bounds, and the SDK is asked to collect a bounded amount."""
    lim = Limits(output_bytes=1024, images=2, image_bytes=1000)
    many = [FakeResult({"text/plain": f"r{i} " + "t" * 300}) for i in range(5000)]
    many.insert(0, FakeResult({"text/plain": "main", **{f"x/m{i}" + "m" * 500: "" for i in range(100)}}, is_main=True))
    ex = FakeExecution(results=many, error=FakeError("E" * 5000, "v" * 100_000, "tb"))
    fake = FakeCodeSandbox(ex)
    tools = pinned_tools(fake)
    tools.limits = lim
    async with Client(build_server(tools)) as c:
        res = await c.call_tool("run_code", {"code": "flood()"})
    s = res.structured_content
    assert s is not None and not res.is_error and s["truncated"]
    assert fake.max_output == [lim.code_collect()] and lim.code_collect() < 64 << 20
    assert s["text"] == "main"
    assert len(s["results"]) == lim.results and s["results_omitted"] == len(many) - lim.results
    texts = sum(len((r["text"] or "").encode()) for r in s["results"])
    assert texts <= lim.output_bytes + 256 + 100  # one budget for all, plus one marker
    assert s["results"][-1]["text"] is None  # the budget was spent before the last
    assert len(s["results"][0]["mime_types"]) == 16 and all(len(m) <= 128 for m in s["results"][0]["mime_types"])
    assert len(s["error"]["value"].encode()) < lim.output_bytes + 100 and "truncated" in s["error"]["value"]
    assert len(s["error"]["name"]) < 256 + 100
    answer = sum(len(b.text.encode()) for b in res.content if isinstance(b, TextContent))
    assert answer < 40 * lim.output_bytes, answer


async def test_run_code_timeout_returns_partial_output() -> None:
    class Timeout(SandboxTimeoutError):
        def __init__(self, execution: FakeExecution) -> None:
            super().__init__("run_code ran past 1s", reason="CodeExecutionTimeout")
            self.execution = execution

    class Slow(FakeCodeSandbox):
        async def run_code(
            self, code: str, *, context: Any = None, timeout: Any = None, max_output: Any = None, **kw: Any
        ) -> FakeExecution:
            raise Timeout(FakeExecution(stdout="tick\n"))

    async with Client(build_server(pinned_tools(Slow(FakeExecution())))) as c:
        res = await c.call_tool("run_code", {"code": "while True: pass", "timeout_seconds": 1})
    s = res.structured_content
    assert s is not None and not res.is_error
    assert s["timed_out"] and s["stdout"] == "tick\n"


async def test_run_code_creates_a_named_context_on_first_use() -> None:
    class Contexts:
        def __init__(self) -> None:
            self.ids: list[str] = []

        async def create(self, language: str = "python", cwd: str | None = None, *, id: str | None = None) -> None:
            assert id is not None
            self.ids.append(id)

    class WithContexts(FakeCodeSandbox):
        def __init__(self) -> None:
            super().__init__(FakeExecution(results=[FakeResult({"text/plain": "1"}, is_main=True)]))
            self.contexts = Contexts()

        async def run_code(
            self, code: str, *, context: Any = None, timeout: Any = None, max_output: Any = None, **kw: Any
        ) -> FakeExecution:
            if context not in (None, *self.contexts.ids):
                raise NotFoundError("run_code: not found (no such context)")
            return await super().run_code(code, context=context, timeout=timeout)

    fake = WithContexts()
    async with Client(build_server(pinned_tools(fake))) as c:
        res = await c.call_tool("run_code", {"code": "1", "context": "analysis"})
        assert not res.is_error and res.structured_content and res.structured_content["text"] == "1"
        assert fake.contexts.ids == ["analysis"]
        res = await c.call_tool("run_code", {"code": "1", "context": "analysis"})
        assert fake.contexts.ids == ["analysis"] and [ctx for _, ctx, _ in fake.calls] == ["analysis", "analysis"]


async def test_run_code_without_sdk_support_is_a_tool_error() -> None:
    async with Client(build_server(pinned_tools(object()))) as c:
        res = await c.call_tool("run_code", {"code": "1"})
        assert res.is_error and "run_code" in res.content[0].text  # type: ignore[union-attr]
        res = await c.call_tool("run_code", {"code": "1", "timeout_seconds": 10_000})
        assert res.is_error and "timeout_seconds" in res.content[0].text  # type: ignore[union-attr]


# ---- create / list / delete through the fake API server -------------------------------------


async def test_create_list_delete_and_cleanup() -> None:
    fake = FakeKube()
    fake.on_create = bind_on_create
    fake.sandboxd = FakeSandboxd()
    tools = Tools(Options(default_pool="python-pool", cleanup=True))
    tools._client = async_client(fake)
    async with Client(build_server(tools)) as c:
        res = await c.call_tool("create_sandbox", {})
        s = res.structured_content
        assert s is not None and not res.is_error, res.content
        assert s["claim"].startswith("sandbox-claim-") and s["sandbox"] == s["claim"] + "-sb"
        assert s["from"] == "pool python-pool"
        claim = fake.store[("sandboxclaims", "default", s["claim"])]
        assert claim["metadata"]["labels"]["agents.x-k8s.io/created-by"] == "mcp"
        assert claim["metadata"]["annotations"]["agents.x-k8s.io/mcp-server"] == tools.instance
        listed = (await c.call_tool("list_sandboxes", {})).structured_content
        assert listed is not None
        assert [(e["name"], e["created_here"]) for e in listed["sandboxes"]] == [(s["sandbox"], True)]
        # The only sandbox this server created is the default target.
        ran = await c.call_tool("run_command", {"command": "x"})
        run = ran.structured_content
        assert run is not None and (run["exit_code"], run["stdout"], run["stderr"]) == (3, "hello world", "warn")
        second = await c.call_tool("create_sandbox", {"template": "t", "pool": "p"})
        assert second.is_error and "not both" in second.content[0].text  # type: ignore[union-attr]
        gone = (await c.call_tool("delete_sandbox", {"sandbox": s["sandbox"]})).structured_content
        assert gone is not None and gone["deleted"] == s["claim"]
        assert ("sandboxclaims", "default", s["claim"]) not in fake.store
        again = await c.call_tool("run_command", {"command": "x"})
        assert again.is_error and "name the sandbox" in again.content[0].text  # type: ignore[union-attr]
        # --cleanup deletes what is left when the server stops.
        res = await c.call_tool("create_sandbox", {"pool": "other"})
        left = res.structured_content
        assert left is not None
    await tools.aclose()
    assert ("sandboxclaims", "default", left["claim"]) not in fake.store


async def test_delete_of_a_name_made_again_deletes_the_new_object() -> None:
    """A Sandbox the server only looked up (a handle cached by name) that was deleted and
    made again under its name: delete_sandbox reads the name again and deletes what is
    there now (before, the old handle's UID-conditioned delete did nothing and the tool
    said it was deleted); a name already gone is a tool error, not a success."""
    fake = FakeKube()
    fake.put("sandboxes", {"metadata": {"name": "dev", "uid": "uid-a"}, "spec": {}, "status": {}})
    tools = Tools(Options())
    tools._client = async_client(fake)
    async with Client(build_server(tools)) as c:
        await tools.handle("dev")  # cached with uid-a
        del fake.store[("sandboxes", "default", "dev")]
        fake.put("sandboxes", {"metadata": {"name": "dev", "uid": "uid-b"}, "spec": {}, "status": {}})
        res = await c.call_tool("delete_sandbox", {"sandbox": "dev"})
        assert not res.is_error, res.content
        assert ("sandboxes", "default", "dev") not in fake.store
        fake.put("sandboxes", {"metadata": {"name": "gone", "uid": "uid-c"}, "spec": {}, "status": {}})
        await tools.handle("gone")
        del fake.store[("sandboxes", "default", "gone")]
        res = await c.call_tool("delete_sandbox", {"sandbox": "gone"})
        assert res.is_error
    await tools.aclose()


async def test_no_create_and_only_created() -> None:
    fake = FakeKube()
    tools = Tools(Options(allow_create=False, only_created=True))
    tools._client = async_client(fake)
    async with Client(build_server(tools)) as c:
        res = await c.call_tool("create_sandbox", {"pool": "p"})
        assert res.is_error and "--no-create" in res.content[0].text  # type: ignore[union-attr]
        res = await c.call_tool("read_file", {"path": "a", "sandbox": "someone-elses"})
        assert res.is_error and "--only-created" in res.content[0].text  # type: ignore[union-attr]
    await tools.aclose()


# ---- command line ---------------------------------------------------------------------------


def test_cli_options_and_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_SANDBOX_ROUTER_URL", raising=False)
    ns = parser().parse_args(["--max-output-bytes", "1000", "--no-create", "--router-url", "http://r:1"])
    opts = options(ns)
    assert opts.limits.output_bytes == 1000 and not opts.allow_create and opts.allow_delete
    assert _connection(opts) == RouterConnection(url="http://r:1")
    with pytest.raises(SystemExit):
        options(parser().parse_args(["--max-output-bytes", "10"]))
    assert _connection(Options(connection="proxy", router_url="http://r:1")) == "proxy"
    assert _connection(Options()) == "auto"
    with pytest.raises(ValueError, match="router"):
        _connection(Options(connection="router"))
    monkeypatch.setenv("AGENT_SANDBOX_ROUTER_URL", "http://env:2")
    assert _connection(Options(connection="router", router_token_file="/t")) == RouterConnection(
        url="http://env:2", token_file="/t"
    )


def test_loopback() -> None:
    """The bind address check: loopback addresses (the SDK's rule, _proxy.is_loopback) and
    the name localhost; other names that rule takes go through the resolver and need a
    token."""
    ok = ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1")
    assert all(binds_loopback_only(h) for h in ok)
    assert all(is_loopback(h) for h in ("LOCALHOST", "localhost.", "a.localhost"))
    assert not any(binds_loopback_only(h) for h in ("LOCALHOST", "localhost.", "a.localhost"))
    assert not any(
        binds_loopback_only(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.com", "localhost.example.com")
    )
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.com", "localhost.example.com"))


async def test_run_command_holds_at_most_its_output_bound() -> None:
    # docs/mcp.md: a command printing far more than output_bytes costs the server about
    # output_bytes (its head and tail), not what the command printed.
    tools = pinned_tools(async_sandbox(_asandboxd))
    tracemalloc.start()
    try:
        out = await tools.run_command(None, "yes", None, None, None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out["exit_code"] == 0 and out["stdout_bytes"] == EVENTS * SIZE and out["stdout_truncated"]
    assert peak < 4 << 20, f"run_command peaked at {peak} bytes for {EVENTS * SIZE} of output"


# ---- the HTTP transport: stopping, DNS rebinding ------------------------------------------


async def serve_until_signalled(args: list[str], token: str | None, client: Any) -> list[str]:
    """Runs the server in process with the HTTP transport and args (pinned to a sandboxd
    URL nothing listens on), runs client(url) once it answers, then sends this process
    SIGTERM (the server's handler takes it) while the client's session may still be open.
    Returns what happened, in order: "client done", "cleaned up"."""
    events: list[str] = []
    tools = Tools(Options(sandboxd_url="http://127.0.0.1:9"))
    aclose = tools.aclose

    async def recording_aclose() -> None:
        events.append("cleaned up")
        await aclose()

    tools.aclose = recording_aclose  # type: ignore[method-assign]
    port = free_port()
    ns = parser().parse_args(["--transport", "http", "--port", str(port), *args])
    host = ns.host if ":" not in ns.host else f"[{ns.host}]"
    url = f"http://{host}:{port}/mcp"

    async def drive() -> None:
        async with httpx.AsyncClient() as h:
            for _ in range(200):
                try:
                    await h.get(url, timeout=1)
                    break
                except httpx.TransportError:
                    await anyio.sleep(0.05)
        await client(url)
        events.append("client done")
        os.kill(os.getpid(), signal.SIGTERM)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(drive)
            await _serve(ns, tools, token)
    return events


async def test_sigterm_with_a_client_connected_stops_and_cleans_up() -> None:
    """A client holding its session (and the standalone event stream the MCP client opens)
    when SIGTERM comes: the server stops within its graceful bound and runs the clean-up
    (--cleanup's deletes). uvicorn alone waited for that stream for ever."""
    held = anyio.Event()

    async def client(url: str) -> None:
        async def hold() -> None:
            try:
                async with http_session(url, "tok") as s:
                    await s.list_tools()
                    held.set()
                    await anyio.sleep_forever()
            except Exception:  # the server went away under the session: expected
                pass

        # The session lives on in the background (a task of its own), past the signal.
        tg_holder.start_soon(hold)
        await held.wait()
        await anyio.sleep(0.5)  # the client's GET stream is open

    start = anyio.current_time()
    async with anyio.create_task_group() as tg_holder:
        events = await serve_until_signalled([], "tok", client)
        tg_holder.cancel_scope.cancel()
    assert events == ["client done", "cleaned up"]
    assert anyio.current_time() - start < 15


def test_transport_security_for_token_free_binds() -> None:
    """Token-free binds (loopback only) get Host and Origin checks naming loopback and the
    bind address itself; a token leaves the MCP SDK's default."""
    assert transport_security("127.0.0.1", "tok") is None
    for host, own in (("127.0.0.2", "127.0.0.2"), ("::ffff:127.0.0.1", "[::ffff:127.0.0.1]"), ("[::1]", "[::1]")):
        t = transport_security(host, None)
        assert t is not None and t.enable_dns_rebinding_protection
        assert f"{own}:*" in t.allowed_hosts and "localhost:*" in t.allowed_hosts
        assert f"http://{own}:*" in t.allowed_origins
        assert not any("evil" in h for h in t.allowed_hosts)


async def test_dns_rebinding_refused_on_another_loopback_address() -> None:
    """Served token-free on 127.0.0.2 (a loopback address the MCP SDK does not protect by
    itself): a request whose Host or Origin names another site is refused; one naming the
    bind address passes the check."""
    seen: dict[str, int] = {}

    async def client(url: str) -> None:
        port = url.split(":")[2].split("/")[0]
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        hdrs = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        async with httpx.AsyncClient(timeout=5) as h:
            for name, extra in (
                ("evil host", {"Host": f"evil.example:{port}"}),
                ("evil origin", {"Origin": f"http://evil.example:{port}"}),
                ("own", {}),
                ("own origin", {"Origin": f"http://127.0.0.2:{port}"}),
            ):
                seen[name] = (await h.post(url, json=body, headers={**hdrs, **extra})).status_code

    await serve_until_signalled(["--host", "127.0.0.2"], None, client)
    assert seen["evil host"] == 421 and seen["evil origin"] == 403, seen
    assert seen["own"] not in (403, 421) and seen["own origin"] not in (403, 421), seen


@pytest.mark.parametrize(("n", "cut"), [(2, False), (3, True)])
async def test_list_sandboxes_stops_at_its_limit(n: int, cut: bool) -> None:
    """At most list_entries entries, and truncated only when there were more."""
    fake = FakeKube()
    for i in range(n):
        fake.put("sandboxes", {"metadata": {"name": f"s{i}"}, "spec": {}})
    tools = Tools(Options(limits=Limits(list_entries=2)))
    tools._client = async_client(fake)
    listed = await tools.list_sandboxes()
    assert [e["name"] for e in listed["sandboxes"]] == ["s0", "s1"] and listed["truncated"] is cut
