"""FileWatch.close() from another thread ends an iteration blocked on a quiet watch: the
socket is shut down (closing it alone does not wake a read blocked in another thread, and
a quiet directory's watch in direct mode blocked for ever)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from agent_sandbox_sdk import connect

from .fakes import silent_after


@pytest.fixture
def quiet_watch_server() -> Iterator[str]:
    """A watch answered "ready", then quiet."""
    with silent_after(b'{"type":"ready"}\n') as url:
        yield url


def test_close_from_another_thread_ends_the_iteration(quiet_watch_server: str) -> None:
    with connect(quiet_watch_server) as sb:
        w = sb.files.watch("d")
        got: list[object] = []
        errors: list[BaseException] = []

        def iterate() -> None:
            try:
                got.extend(w)
            except BaseException as e:  # reported below
                errors.append(e)

        it = threading.Thread(target=iterate)
        it.start()
        it.join(0.3)
        assert it.is_alive()  # blocked on the quiet stream
        w.close()
        it.join(2)
        assert not it.is_alive(), "close() did not end the iteration"
        assert got == [] and errors == []  # ended quietly
