"""Stateful code execution (run_code, contexts) against a real sandboxd binary with the
kernel driver from the source tree, sync and async."""

from __future__ import annotations

import asyncio
import struct
import threading
import time

import pytest

import agent_sandbox_sdk
from agent_sandbox_sdk import CodeExecutionTimeout, CodeResult, NotFoundError, RequestError, aio

pytestmark = pytest.mark.integration

PNG_CLASS = """
import struct, zlib
def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
class Pic:
    def _repr_png_(self):
        raw = b"\\x00\\xff\\x00\\x00"
        return (b"\\x89PNG\\r\\n\\x1a\\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
                + _chunk(b"IDAT", zlib.compress(raw)) + _chunk(b"IEND", b""))
    def _repr_html_(self):
        return "<p>pic</p>"
"""


def test_sync_run_code(sandboxd_url: str) -> None:
    sb = agent_sandbox_sdk.connect(sandboxd_url)
    ctx = sb.contexts.create()
    try:
        out: list[str] = []
        ex = sb.run_code("x = 21\nprint('hello')", context=ctx, on_stdout=out.append)
        assert (ex.stdout, ex.error, ex.text) == ("hello\n", None, None)
        assert out == ["hello\n"]
        ex = sb.run_code("x * 2", context=ctx.id)
        assert ex.text == "42" and ex.execution_count == 2 and not ex.truncated
        seen: list[CodeResult] = []
        ex = sb.run_code(PNG_CLASS + "display(Pic())\nPic()", context=ctx, on_result=seen.append)
        assert len(ex.results) == 2 and len(seen) == 2 and ex.results[1].is_main
        png = ex.results[0].png
        assert png is not None and png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
        assert struct.unpack(">II", png[16:24]) == (1, 1)
        assert ex.results[0].html == "<p>pic</p>"
        ex = sb.run_code("import sys\nprint('e', file=sys.stderr)\n{'a': 1}['b']", context=ctx)
        assert ex.stderr == "e\n" and ex.error is not None
        assert ex.error.name == "KeyError" and "{'a': 1}['b']" in ex.error.traceback
        with pytest.raises(CodeExecutionTimeout) as ei:
            sb.run_code("while True: pass", context=ctx, timeout=0.5)
        assert ei.value.execution.error.name == "KeyboardInterrupt"
        assert sb.run_code("x", context=ctx).text == "21"  # interrupted, state kept
        assert ctx.id in [c.id for c in sb.contexts.list()]
        assert sb.contexts.get(ctx).state == "idle"
        sb.contexts.restart(ctx)
        assert sb.run_code("x", context=ctx).error.name == "NameError"  # type: ignore[union-attr]
    finally:
        sb.contexts.delete(ctx)
    with pytest.raises(NotFoundError):
        sb.contexts.get(ctx)
    with pytest.raises(NotFoundError):
        sb.run_code("1", context=ctx)
    with pytest.raises(RequestError) as re:
        sb.contexts.create(language="ruby")
    assert re.value.status == 400


def test_sync_default_context_and_interrupt(sandboxd_url: str) -> None:
    sb = agent_sandbox_sdk.connect(sandboxd_url)
    sb.run_code("default_var = 'kept'")
    assert sb.run_code("default_var").text == "'kept'"
    other = sb.contexts.create(id=f"other-{time.monotonic_ns()}")
    try:
        assert sb.run_code("default_var", context=other).error is not None
        res: dict[str, agent_sandbox_sdk.Execution] = {}
        started = threading.Event()

        def run() -> None:
            res["ex"] = sb.run_code(
                "print('go', flush=True)\nwhile True: pass", context=other, on_stdout=lambda s: started.set()
            )

        t = threading.Thread(target=run)
        t.start()
        assert started.wait(10)
        sb.contexts.interrupt(other)
        t.join(10)
        ex = res["ex"]
        assert ex.error is not None and ex.error.name == "KeyboardInterrupt" and not ex.timed_out
    finally:
        sb.contexts.delete(other)


def test_async_run_code(sandboxd_url: str) -> None:
    async def main() -> None:
        sb = aio.connect(sandboxd_url)
        try:
            ctx = await sb.contexts.create()
            ex = await sb.run_code("y = 2\ny ** 10", context=ctx)
            assert ex.text == "1024"
            ex = await sb.run_code("y", context=ctx)
            assert ex.text == "2"
            with pytest.raises(CodeExecutionTimeout):
                await sb.run_code("import time\nwhile True: time.sleep(0.01)", context=ctx, timeout=0.5)
            await sb.contexts.restart(ctx)
            ex = await sb.run_code("y", context=ctx)
            assert ex.error is not None and ex.error.name == "NameError"
            assert ctx.id in [c.id for c in await sb.contexts.list()]
            await sb.contexts.interrupt(ctx)
            await sb.contexts.delete(ctx)
        finally:
            await sb.client.aclose()

    asyncio.run(main())


SLEEPER = "x = 7\nprint('go', flush=True)\nimport time\ntime.sleep(60)"


def _interrupt(_: str) -> None:
    raise KeyboardInterrupt


def test_run_code_after_a_keyboard_interrupt(sandboxd_url: str) -> None:
    """Ctrl-C in a run_code gives its execution up (the connection closes: sandboxd
    interrupts the code and frees the context once the kernel has stopped it): the next
    run_code in that context, sent at once, waits for it rather than failing with 409
    "the context is executing other code". The state is kept."""
    sb = agent_sandbox_sdk.connect(sandboxd_url)
    ctx = sb.contexts.create()
    try:
        for i in range(5):
            with pytest.raises(KeyboardInterrupt):
                sb.run_code(SLEEPER, context=ctx, on_stdout=_interrupt)
            ex = sb.run_code(f"x + {i}", context=ctx)
            assert ex.text == str(7 + i)
        # the default context too
        with pytest.raises(KeyboardInterrupt):
            sb.run_code(SLEEPER, on_stdout=_interrupt)
        assert sb.run_code("x").text == "7"
    finally:
        sb.contexts.delete(ctx)
        sb.close()


def test_async_run_code_after_a_cancelled_task(sandboxd_url: str) -> None:
    """A cancelled run_code task (asyncio.wait_for, TaskGroup, an MCP call's deadline)
    does not make the next run_code in its context fail with 409."""

    async def main() -> None:
        async with aio.connect(sandboxd_url) as sb:
            ctx = await sb.contexts.create()
            try:
                for i in range(5):
                    started = asyncio.Event()
                    task = asyncio.create_task(
                        sb.run_code(SLEEPER, context=ctx, on_stdout=lambda _, s=started: s.set())
                    )
                    await asyncio.wait_for(started.wait(), 30)
                    await asyncio.sleep(0.3)  # in time.sleep: the interrupt's end comes later
                    task.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await task
                    assert (await sb.run_code(f"x * {i}", context=ctx)).text == str(7 * i)
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(sb.run_code(SLEEPER, context=ctx), 1.0)
                assert (await sb.run_code("x", context=ctx)).text == "7"
            finally:
                await sb.contexts.delete(ctx)

    asyncio.run(main())
