"""Local files a download writes: replaced only once the whole file has arrived."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


def _umask_mode() -> int:
    """0o666 less the process's umask (what open(path, "wb") gives a new file), read
    without changing it (os.umask would, for every thread)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o644


@contextlib.contextmanager
def replacing(dest: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """A binary file to write dest's new content to: a temporary file beside it, renamed
    over dest when the block ends without an exception and removed when it raises, so a
    failed or cut-off download leaves dest as it was. A symlink dest has its target
    replaced (as open(dest, "wb") writes through it); an existing file's mode is kept."""
    target = Path(os.path.realpath(dest))
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        mode = _umask_mode()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
