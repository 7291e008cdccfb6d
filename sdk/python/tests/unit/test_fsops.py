"""The pure parts of the filesystem operations: paths, request bodies, parsing."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone
from typing import Any

import pytest

from agent_sandbox_sdk import _fsops
from agent_sandbox_sdk.models import FileEvent


def test_api_path_escapes_and_refuses() -> None:
    assert _fsops.api_path("/v1/stat/", "/a b/c") == "/v1/stat/a%20b/c"
    assert _fsops.api_path("/v1/watch/", "") == "/v1/watch/"
    with pytest.raises(ValueError):
        _fsops.api_path("/v1/mkdir/", "a/../../b")
    with pytest.raises(ValueError):
        _fsops.move_args("a", "b\n", False)


def test_parse_time_and_stat() -> None:
    t = _fsops.parse_time("2026-12-01T18:12:33.123456789Z")
    assert t == datetime(2026, 12, 1, 18, 12, 33, 123456, tzinfo=timezone.utc)
    assert _fsops.parse_time("2026-12-01T18:12:33Z").microsecond == 0
    st = _fsops.parse_stat(
        {"name": "l", "path": "/l", "type": "symlink", "size": 3, "mode": "0777", "mtime": "2026-01-01T00:00:00.5Z"}
        | {"symlink_target": "x"}
    )
    assert (st.is_symlink, st.symlink_target, st.mtime.microsecond) == (True, "x", 500000)


@pytest.mark.parametrize(
    ("line", "want"),
    [
        ('{"type":"create","path":"a","is_dir":false}', FileEvent("create", "a")),
        ('{"type":"move","path":"b","from":"a","to":"b","is_dir":true}', FileEvent("move", "b", True, "a", "b")),
        ('{"type":"overflow","lost":7}', FileEvent("overflow", lost=7)),
        ('{"type":"overflow","lost":null}', FileEvent("overflow")),
        ('{"type":"error","message":"m"}', FileEvent("error", message="m")),
        ('{"type":"something-new"}', None),
        ("  ", None),
    ],
)
def test_parse_event(line: str, want: FileEvent | None) -> None:
    assert _fsops.parse_event(line) == want


def test_batch_args() -> None:
    kw: dict[str, Any] = _fsops.batch_args({"a": b"\x00", "b": "é"})
    body = json.loads(kw["content"])
    assert [base64.b64decode(f["content"]) for f in body["files"]] == [b"\x00", "é".encode()]
    kw = _fsops.batch_args([("x", b"", 0o600)])
    assert json.loads(kw["content"])["files"][0]["mode"] == "0600"
    with pytest.raises(ValueError):
        _fsops.batch_args({})
    with pytest.raises(ValueError):
        _fsops.batch_args({"../x": b""})


def test_read_args() -> None:
    assert _fsops.read_args(0, None) == {}
    assert _fsops.read_args(5, 10) == {"params": {"offset": "5", "max_bytes": "10"}, "ok": (416,)}
    assert _fsops.read_args(0, 0)["params"] == {"max_bytes": "0"}
    with pytest.raises(ValueError):
        _fsops.read_args(-1, None)
    assert _fsops.watch_url("http://h", "d", True, 16) == "http://h/v1/watch/d?recursive=true&queue=16"
