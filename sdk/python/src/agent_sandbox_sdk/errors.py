"""Exceptions raised by the SDK.

Every exception derives from :class:`SandboxError`. The subclasses also derive from
the matching builtin (``TimeoutError``, ``ConnectionError``, ``PermissionError``,
``LookupError``) so generic handlers keep working.
"""

from __future__ import annotations

from typing import Any


class SandboxError(Exception):
    """Base class of every error raised by agent_sandbox_sdk."""


class NotFoundError(SandboxError, LookupError):
    """A sandbox, claim, template, pool, file or process does not exist."""

    def __init__(self, message: str, *, kind: str = "", name: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.name = name


class SandboxTimeoutError(SandboxError, TimeoutError):
    """A wait ran out of time. ``reason``/``message`` hold the last observed state."""

    def __init__(self, message: str, *, reason: str = "", detail: str = "") -> None:
        super().__init__(message)
        self.reason = reason
        self.detail = detail


class CodeExecutionTimeout(SandboxTimeoutError):
    """``run_code`` ran past its timeout. The kernel was interrupted (or, when the
    interrupt did not stop it, restarted); ``execution`` holds what it produced."""

    def __init__(self, message: str, *, execution: Any) -> None:
        super().__init__(message, reason="CodeExecutionTimeout")
        self.execution = execution


class SandboxFailedError(SandboxError):
    """The claim or sandbox reached a state it will not leave (terminal reason)."""

    def __init__(self, message: str, *, kind: str, name: str, reason: str, detail: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.name = name
        self.reason = reason
        self.detail = detail


class AuthError(SandboxError, PermissionError):
    """The API server, router or sandboxd refused the credentials (401/403)."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class SandboxConnectionError(SandboxError, ConnectionError):
    """The API server, router or sandbox could not be reached or dropped the connection."""


class SandboxSuspendedError(SandboxError):
    """The sandbox is suspended and its idle policy does not resume it on traffic
    (``has_policy``: it has one, with ``resumeOnTraffic: false``); resume it explicitly."""

    def __init__(self, message: str, *, namespace: str, name: str, has_policy: bool) -> None:
        super().__init__(message)
        self.namespace = namespace
        self.name = name
        self.has_policy = has_policy


class RequestError(SandboxError):
    """Any other refused request: ``status`` is the HTTP status, ``code`` the API code,
    ``retry_after`` the server's ``Retry-After`` (seconds) when it sent one."""

    def __init__(self, message: str, *, status: int, code: str = "", retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.retry_after = retry_after
        """The server's ``Retry-After`` in seconds (a 429 or 503), when it sent one."""


class ProcessExitedError(RequestError):
    """The process has exited: stdin, signals and resizes no longer apply (a background
    process's 409; an attached process's 404 "no such process": sandboxd forgets it once
    its exit was reported)."""


class TooManyProcessesError(RequestError):
    """sandboxd's process table is full (429 RESOURCE_EXHAUSTED): wait for, kill or remove
    a background process (or raise --max-bg-procs / --max-procs)."""


class ConflictError(RequestError, FileExistsError):
    """A 409: the target exists (move without overwrite, mkdir without parents), a
    non-directory is in the way, or a directory is not empty."""


__all__ = [
    "AuthError",
    "CodeExecutionTimeout",
    "ConflictError",
    "NotFoundError",
    "ProcessExitedError",
    "RequestError",
    "SandboxConnectionError",
    "SandboxError",
    "SandboxFailedError",
    "SandboxSuspendedError",
    "SandboxTimeoutError",
    "TooManyProcessesError",
]
