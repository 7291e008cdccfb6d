"""The wire helpers of background processes: start bodies, descriptions, output events,
error types."""

from __future__ import annotations

import pytest

from agent_sandbox_sdk import (
    OutputEvent,
    ProcessExitedError,
    RequestError,
    SandboxConnectionError,
    TooManyProcessesError,
)
from agent_sandbox_sdk import background as bg


def test_start_body_stdin_modes() -> None:
    assert bg.start_body("x") == {"command": "x", "background": True}
    assert bg.start_body(["a", "b"], stdin=True)["stdin_open"] is True
    b = bg.start_body("cat", stdin="hi", env={"K": "v"}, cwd="w", timeout=5)
    assert (b["stdin"], b["env"], b["cwd"], b["timeout_seconds"]) == ("hi", {"K": "v"}, "w", 5)
    assert "stdin_open" not in b
    assert bg.start_body("cat", stdin=b"\x00")["stdin_b64"] == "AA=="
    with pytest.raises(ValueError):
        bg.start_body([])


def test_parse_info_running_and_exited() -> None:
    run = bg.parse_info(
        {
            "id": 3,
            "pid": 9,
            "command": ["sleep", "1"],
            "state": "running",
            "exit_code": None,
            "signal": None,
            "started_at": "2026-01-02T03:04:05.5Z",
            "ended_at": None,
        }
    )
    assert (run.id, run.running, run.exit_code, run.signal, run.ended_at) == (3, True, None, None, None)
    assert run.started_at is not None and run.started_at.year == 2026
    ex = bg.parse_info({"id": 4, "state": "exited", "exit_code": 0, "signal": None, "output_end": 7})
    assert (ex.running, ex.exit_code, ex.output_end) == (False, 0, 7)
    with pytest.raises(RequestError):
        bg.parse_info({"code": "NOT_FOUND"})
    infos = bg.parse_infos({"processes": [{"id": 1, "background": False}, {"id": 2, "background": True}]})
    assert [i.id for i in infos] == [2]


def test_parse_output_events() -> None:
    ev = bg.parse_output('{"type":"stdout","offset":5,"data":"aGkK"}')
    assert ev is not None and (ev.type, ev.offset, ev.text) == ("stdout", 5, "hi\n")
    dr = bg.parse_output(b'{"type":"dropped","offset":0,"bytes":100}')
    assert dr is not None and (dr.type, dr.offset, dr.dropped) == ("dropped", 0, 100)
    ex = bg.parse_output('{"type":"exit","exit_code":null,"signal":9,"timed_out":false,"offset":3}')
    assert ex is not None and (ex.exit_code, ex.signal, ex.offset) == (-1, 9, 3)
    assert bg.parse_output("  ") is None
    assert bg.parse_output('{"type":"future"}') is None


def test_typed_errors_and_args() -> None:
    assert isinstance(bg.typed(RequestError("x", status=409)), ProcessExitedError)
    assert isinstance(bg.typed(RequestError("x", status=429)), TooManyProcessesError)
    e = RequestError("x", status=400)
    assert bg.typed(e) is e
    assert bg.output_params(False, 12) == {"follow": "false", "offset": "12"}
    assert bg.wait_args(1.5)["params"] == {"timeout": "1.5"}
    assert bg.wait_args(None)["params"] == {"timeout": "25"}  # long waits are sliced
    assert bg.wait_args(600)["params"] == {"timeout": "25"}
    assert bg.wait_left(None) is None and bg.wait_left(0.0) == 0.0
    with pytest.raises(ValueError):
        bg.wait_deadline(-0.5)
    with pytest.raises(ValueError):
        bg.output_params(True, -1)
    with pytest.raises(ValueError):
        bg.wait_args(-1)


def test_resume_offsets_and_budget() -> None:
    st = bg.Resume(0, True)
    st.seen(OutputEvent(type="dropped", offset=0, dropped=10))
    st.seen(OutputEvent(type="stdout", offset=10, data=b"abc"))
    assert st.params() == {"follow": "true", "offset": "13"} and not st.done
    for _ in range(bg.MAX_RESUMES):
        st.params()
        st.ended(1, None)  # quick ends without news: resumed a few times
    st.started -= bg.QUICK_END  # a long response cut by a proxy's timeout: resumed again
    st.ended(1, None)
    for _ in range(bg.MAX_RESUMES - 1):
        st.params()
        st.ended(1, None)
    st.params()
    with pytest.raises(SandboxConnectionError):
        st.ended(1, None)
    st = bg.Resume(5, True)
    st.seen(OutputEvent(type="exit", offset=9))
    st.ended(1, None)
    assert st.done and st.offset == 9
    once = bg.Resume(0, False)
    once.ended(1, None)
    assert once.done
    with pytest.raises(ValueError):
        bg.Resume(-1, True)
