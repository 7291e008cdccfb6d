"""Bounded output for the MCP tools: a byte budget per stream that keeps the head and
the tail of what a command printed and says, in the text itself, how much was left
out. Pure functions and a small accumulator; no I/O."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024
"""Default budget of one stream (stdout, stderr, a file read, a code result)."""

MIN_OUTPUT_BYTES = 256
"""Smallest budget the server accepts: room for the marker and a little text."""

TAIL_SHARE = 4
"""One quarter of a cut stream's budget goes to its tail (the last lines often hold
the error), the rest to its head."""


def marker(total: int, shown: int) -> str:
    """The line that replaces the middle of a cut stream."""
    return f"\n[... output truncated: {total - shown} of {total} bytes omitted ...]\n"


def _decode(data: bytes) -> str:
    """UTF-8 with invalid bytes replaced; a character cut at the edge becomes U+FFFD."""
    return data.decode("utf-8", "replace")


class Capture:
    """Collects a byte stream of unknown length in bounded memory: the first
    ``limit - limit // TAIL_SHARE`` bytes and the last ``limit // TAIL_SHARE`` bytes,
    plus the total count."""

    def __init__(self, limit: int) -> None:
        if limit < MIN_OUTPUT_BYTES:
            raise ValueError(f"output limit {limit} is below the minimum of {MIN_OUTPUT_BYTES} bytes")
        self.limit = limit
        self._tail_max = limit // TAIL_SHARE
        self._head_max = limit - self._tail_max
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_max - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > self._tail_max:
                del self._tail[: len(self._tail) - self._tail_max]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        """The captured text; when more than ``limit`` bytes came, head, marker, tail."""
        if not self.truncated:
            return _decode(bytes(self._head + self._tail))
        shown = len(self._head) + len(self._tail)
        return _decode(bytes(self._head)) + marker(self.total, shown) + _decode(bytes(self._tail))


def bound_text(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to about ``limit`` UTF-8 bytes (head, marker, tail) and whether it
    was cut."""
    cap = Capture(limit)
    cap.add(text.encode("utf-8", "surrogatepass"))
    return cap.text(), cap.truncated


@dataclass(frozen=True)
class Limits:
    """The server's bounds."""

    output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    """per stream of a command or code run, per file read, per code result"""
    image_bytes: int = 2 * 1024 * 1024
    """per image returned by run_code (larger ones are replaced by a note)"""
    images: int = 8
    """images per run_code call"""
    list_entries: int = 1000
    """entries per list_files / list_sandboxes answer"""
    results: int = 64
    """results (display outputs) per run_code answer; their texts share one output_bytes"""
    timeout: float = 600.0
    """the longest timeout a caller may ask for (seconds)"""

    def code_collect(self) -> int:
        """What run_code asks the SDK to collect at most (characters of results' data; the
        streams go to bounded captures of their own): the results' texts, and the images
        with base64's growth and room for their other representations."""
        return 2 * self.output_bytes + self.images * (self.image_bytes * 4 // 3 + self.output_bytes)


__all__ = ["DEFAULT_MAX_OUTPUT_BYTES", "MIN_OUTPUT_BYTES", "Capture", "Limits", "bound_text", "marker"]
