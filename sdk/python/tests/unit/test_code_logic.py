"""The shared run_code logic without I/O: request bodies, event folding, timeouts."""

from __future__ import annotations

import base64
import json

import pytest

from agent_sandbox_sdk import CodeContext, CodeExecutionTimeout, SandboxConnectionError, SandboxTimeoutError, _code


def test_execute_body() -> None:
    assert _code.execute_body("1", None, None) == {"code": "1"}
    assert _code.execute_body("1", "c1", 2.5) == {"code": "1", "context": "c1", "timeout": 2.5}
    assert _code.execute_body("1", CodeContext(id="c2"), None) == {"code": "1", "context": "c2"}
    with pytest.raises(ValueError):
        _code.execute_body("1", None, 0)
    with pytest.raises(TypeError):
        _code.execute_body(b"1", None, None)  # type: ignore[arg-type]
    assert _code.context_path(CodeContext(id="a"), "restart") == "/v1/contexts/a/restart"
    with pytest.raises(ValueError):
        _code.context_path("a/b")


def test_collector_folds_events() -> None:
    out: list[str] = []
    res: list[object] = []
    col = _code.Collector(out.append, None, res.append)
    png = base64.b64encode(b"\x89PNG").decode()
    lines = [
        {"type": "start", "context": "default"},
        {"type": "stdout", "text": "a"},
        {"type": "stderr", "text": "w"},
        {"type": "stdout", "text": "b\n"},
        {"type": "display", "data": {"image/png": png, "application/json": "[1]"}},
        {"type": "result", "data": {"text/plain": "42", "text/html": "<b>"}, "is_main": True},
        {"type": "error", "name": "E", "value": "v", "traceback": "tb"},
        {"type": "truncated"},
        {"type": "end", "execution_count": 7, "truncated": True, "timed_out": False},
    ]
    done = [col.add_line(json.dumps(x)) for x in lines]
    assert done == [False] * 8 + [True]
    ex = col.result()
    assert (ex.stdout, ex.stderr, ex.execution_count, ex.truncated) == ("ab\n", "w", 7, True)
    assert out == ["a", "b\n"] and len(res) == 2
    assert ex.text == "42" and ex.results[1].html == "<b>"
    assert ex.results[0].png == b"\x89PNG" and ex.results[0].json == [1] and ex.results[0].text is None
    assert ex.error is not None and (ex.error.name, ex.error.traceback) == ("E", "tb")


def test_collector_timeout_and_early_end() -> None:
    col = _code.Collector(None, None, None)
    col.add({"type": "error", "name": "KeyboardInterrupt", "value": "", "traceback": ""})
    col.add({"type": "end", "execution_count": 1, "truncated": False, "timed_out": True})
    with pytest.raises(CodeExecutionTimeout) as ei:
        col.result()
    assert isinstance(ei.value, SandboxTimeoutError)
    assert ei.value.execution.timed_out
    col = _code.Collector(None, None, None)
    col.add({"type": "stdout", "text": "x"})
    with pytest.raises(SandboxConnectionError):
        col.result()
    with pytest.raises(SandboxConnectionError):
        col.add_line("not json")


def test_parse_context() -> None:
    c = _code.parse_context({"id": "x", "language": "python", "cwd": "w", "state": "idle", "execution_count": 3})
    assert c == CodeContext(id="x", language="python", cwd="w", state="idle", execution_count=3)
