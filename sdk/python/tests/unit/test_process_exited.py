"""A control call (write, close_stdin, signal, resize) of an attached process that has
exited raises ProcessExitedError, sync and async, as a background process's does: for
sandboxd's 404 NOT_FOUND "no such process" (it forgets a process once its exit was
reported), its 409 FAILED_PRECONDITION (was a ConflictError) and 400 "process has
exited", and, once the exit event was read, its 400 "stdin is closed". Other refusals
keep their errors."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from agent_sandbox_sdk import (
    AsyncProcess,
    NotFoundError,
    Process,
    ProcessExitedError,
    RequestError,
    SandboxSuspendedError,
)

from .fakes import FakeSandboxd, Handler, async_sandbox, sync_sandbox

pytestmark = pytest.mark.usefixtures("no_backoff")


def _sbd(status: int, body: dict[str, Any]) -> tuple[Handler, list[str]]:
    """A sandboxd whose process 7 (its stream: start, output, exit) refuses every
    control call with status and body; the paths of those calls."""
    sbd = FakeSandboxd()
    seen: list[str] = []

    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.path.startswith("/v1/processes/7/"):
            seen.append(req.url.path)
            return httpx.Response(status, json=body)
        return sbd(req, req.url.path)

    return handler, seen


SYNC_CALLS: dict[str, Callable[[Process], object]] = {
    "stdin": lambda p: p.write("data"),
    "stdin/close": lambda p: p.close_stdin(),
    "signal": lambda p: p.signal("TERM"),
    "resize": lambda p: p.resize(80, 24),
}
ASYNC_CALLS: dict[str, Callable[[AsyncProcess], Awaitable[object]]] = {
    "stdin": lambda p: p.write("data"),
    "stdin/close": lambda p: p.close_stdin(),
    "signal": lambda p: p.signal("TERM"),
    "resize": lambda p: p.resize(80, 24),
}

EXITED = [
    (404, {"code": "NOT_FOUND", "message": "no such process"}),
    (409, {"code": "FAILED_PRECONDITION", "message": "process has exited"}),
    (400, {"code": "FAILED_PRECONDITION", "message": "process has exited"}),
]


@pytest.mark.parametrize(("status", "body"), EXITED)
@pytest.mark.parametrize("action", list(SYNC_CALLS))
def test_a_control_call_after_the_exit_raises_process_exited(action: str, status: int, body: dict[str, Any]) -> None:
    handler, seen = _sbd(status, body)
    p = sync_sandbox(handler).spawn("cat")
    with pytest.raises(ProcessExitedError, match="the process has exited") as ei:
        SYNC_CALLS[action](p)
    assert (ei.value.status, ei.value.code) == (status, body["code"])
    assert seen == [f"/v1/processes/7/{action}"]  # sent once


@pytest.mark.parametrize(("status", "body"), EXITED)
@pytest.mark.parametrize("action", list(ASYNC_CALLS))
async def test_async_a_control_call_after_the_exit_raises_process_exited(
    action: str, status: int, body: dict[str, Any]
) -> None:
    handler, seen = _sbd(status, body)
    p = await async_sandbox(handler).spawn("cat")
    with pytest.raises(ProcessExitedError, match="the process has exited") as ei:
        await ASYNC_CALLS[action](p)
    assert (ei.value.status, ei.value.code) == (status, body["code"])
    assert seen == [f"/v1/processes/7/{action}"]


STDIN_CLOSED = (400, {"code": "FAILED_PRECONDITION", "message": "stdin is closed"})


def test_a_closed_stdin_is_an_exit_only_once_the_exit_was_read() -> None:
    handler, _ = _sbd(*STDIN_CLOSED)
    p = sync_sandbox(handler).spawn("cat")
    with pytest.raises(RequestError) as ei:  # closed by close_stdin, say: it may still run
        p.write("x")
    assert not isinstance(ei.value, ProcessExitedError) and ei.value.status == 400
    assert p.wait().exit_code == 3
    with pytest.raises(ProcessExitedError):
        p.write("x")


async def test_async_a_closed_stdin_is_an_exit_only_once_the_exit_was_read() -> None:
    handler, _ = _sbd(*STDIN_CLOSED)
    p = await async_sandbox(handler).spawn("cat")
    with pytest.raises(RequestError) as ei:
        await p.write("x")
    assert not isinstance(ei.value, ProcessExitedError)
    assert (await p.wait()).exit_code == 3
    with pytest.raises(ProcessExitedError):
        await p.write("x")


@pytest.mark.parametrize(
    ("status", "body", "want"),
    [
        (404, {"code": "NOT_FOUND", "message": "unknown process action"}, NotFoundError),
        (404, {"detail": "Sandbox default/sb not found"}, NotFoundError),  # the router's: no sandbox
        (409, {"detail": "Sandbox default/sb is suspended and its idle policy does not resume it"}, None),
        (400, {"code": "INVALID_ARGUMENT", "message": "unknown signal"}, RequestError),
        (429, {"code": "RESOURCE_EXHAUSTED", "message": "stdin queue is full: the end of input was not sent"}, None),
    ],
)
def test_other_refusals_keep_their_errors(status: int, body: dict[str, Any], want: type[Exception] | None) -> None:
    handler, _ = _sbd(status, body)
    p = sync_sandbox(handler).spawn("cat")
    with pytest.raises(Exception) as ei:
        p.close_stdin()
    assert not isinstance(ei.value, ProcessExitedError)
    if want is not None:
        assert isinstance(ei.value, want)
    elif status == 409:
        assert isinstance(ei.value, SandboxSuspendedError)
    else:
        assert isinstance(ei.value, RequestError) and ei.value.status == 429
