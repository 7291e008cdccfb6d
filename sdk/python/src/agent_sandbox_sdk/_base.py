"""What the sync and async clients share without I/O: a client's configuration, a
sandbox handle's cached object, route and resume-on-traffic decisions (docs/idle.md),
and a process's collected events. client.py and aio.py add the I/O."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from . import _conn, _k8s, _wire
from ._kubeconfig import KubeConfig, load_config
from .models import Connection, ProcessEvent

if TYPE_CHECKING:
    import httpx

CTL_REFUSALS = (400, 404, 409)
"""sandboxd's refusals of a process's control call that _wire.control_error maps."""

STALE_AFTER = 1.0  # seconds: an older cached Sandbox object is read again before a call


class ClientBase:
    """The configuration of a SandboxClient / AsyncSandboxClient."""

    def __init__(
        self,
        namespace: str | None,
        kubeconfig: str | os.PathLike[str] | None,
        context: str | None,
        connection: Connection | str | None,
        config: KubeConfig | None,
        resume_timeout: float,
        early_handout: bool = True,
    ) -> None:
        self.config = config or load_config(kubeconfig, context)
        self.namespace = namespace or self.config.namespace
        self.connection = _conn.resolve(connection)
        self.resume_timeout = resume_timeout
        # create(pool) returns once a Sandbox bound to the claim is Ready, before the
        # claim's status says so (docs/sdk-python.md, "Hand-out")
        self.early_handout = early_handout

    def _verify(self) -> Any:
        """TLS verification of the connection to sandboxd (a router's CA, or True)."""
        return getattr(self.connection, "verify", True)


C = TypeVar("C", bound=ClientBase)


class SandboxBase(Generic[C]):
    """The state of a Sandbox / AsyncSandbox handle: names, the cached Sandbox object
    and the route to sandboxd computed from it.

    Resume on traffic (``_wake``, docs/idle.md): before a data-plane call the Sandbox is
    read when the cached object is old (or always with ``force``); a suspended Sandbox
    whose idle policy allows it is resumed (merge patch operatingMode Running, idle
    annotation cleared) and waited for by watch (``resume_timeout`` seconds); one that
    may not be resumed raises SandboxSuspendedError."""

    def __init__(
        self, client: C, namespace: str, name: str, claim: str, keep: bool, obj: dict[str, Any] | None
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.claim = claim
        self.keep = keep
        self._obj = obj
        self._target: _conn.Target | None = None
        self._read_at = 0.0  # time.monotonic() of the last read of _obj (resume on traffic)
        # The UID of the claim (or, without one, the Sandbox) the handle stands for, once
        # known (create's answer, get's read): delete() is conditioned on it. With a
        # claim, obj is its Sandbox, whose ownerReference to the claim holds the claim's.
        self._uid = _k8s.owner_claim_uid(obj, claim) if claim else _k8s.uid_of(obj)
        # The handle made its client (connect()): closing the handle closes it.
        self._owns_client = False
        # Code contexts whose execution the handle gave up before its end (a cancelled
        # run_code): context id -> time.monotonic() then (_code.Abandoned).
        self._abandoned_code: dict[str, float] = {}

    def __repr__(self) -> str:
        return f"Sandbox({self.namespace}/{self.name or '?'}, claim={self.claim or None})"

    def _own_object(self) -> tuple[str, str]:
        """(resource, name) of what delete() deletes: the claim, else the Sandbox."""
        return ("sandboxclaims", self.claim) if self.claim else ("sandboxes", self.name)

    def _delete_uid(self) -> str:
        """The UID delete() is conditioned on: the one known of the claim or Sandbox, else
        that of the Sandbox object last read (when it is the handle's), else "" (by name
        only)."""
        if self._uid or self.claim:
            return self._uid
        return _k8s.uid_of(self._obj) if (self._obj or {}).get("metadata", {}).get("name") == self.name else ""

    def _auto_resume(self) -> bool:
        """Direct (pod IP) and pod-proxy modes resume a suspended sandbox themselves;
        through the router nothing is needed (it holds requests and resumes)."""
        return _conn.needs_sandbox_object(self.client.connection)

    def _needs_read(self) -> bool:
        return (
            self._obj is None or time.monotonic() - self._read_at > STALE_AFTER or _k8s.idle_action(self._obj) != "none"
        )

    def _may_wake(self, force: bool) -> bool:
        """Whether a data-plane call must first read the Sandbox (and maybe resume it)."""
        return self._auto_resume() and bool(self.name) and (force or self._needs_read())

    def _woken(self, obj: dict[str, Any]) -> str:
        """Takes a fresh read of the Sandbox before a data-plane call and returns its
        idle action: "none" (go ahead), "resume" or "wait". Raises SandboxSuspendedError
        when it is suspended and may not be resumed."""
        self._obj, self._read_at = obj, time.monotonic()
        action = _k8s.idle_action(obj)
        if action == "refuse":
            raise _k8s.suspended_error(self.namespace, self.name, obj)
        return action

    def _handed_out(self, w: _k8s.Wait, obj: dict[str, Any]) -> None:
        """Takes the end of a claim's wait: its Sandbox's name and, when the hand-out
        ended it, the Sandbox as read then (no read before the first call)."""
        self.name = w.sandbox
        if obj:
            self._obj, self._read_at = obj, time.monotonic()

    def _ready_again(self, obj: dict[str, Any]) -> None:
        """Takes the Ready Sandbox after a resume on traffic."""
        self._obj = obj
        self._read_at = time.monotonic()
        self._target = None

    def _target_ok(self) -> bool:
        return bool((self._obj or {}).get("status", {}).get("podIPs"))

    def _needs_object(self) -> bool:
        """Whether computing the route needs a (new) read of the Sandbox."""
        return _conn.needs_sandbox_object(self.client.connection) and (self._obj is None or not self._target_ok())

    def _new_target(self, name: str) -> _conn.Target:
        self._target = _conn.target(self.client.connection, self.client.config, self.namespace, name, self._obj)
        return self._target

    def _lost(self) -> None:
        """Forgets the route and the cached object after connection loss."""
        self._target = None
        self._obj = None


class ProcessBase:
    """The events of a Process / AsyncProcess collected so far."""

    id: int
    pid: int

    def __init__(self, collect: bool = True) -> None:
        self._col = _wire.Collector(collect)
        self._done = False

    def _started(self, first: ProcessEvent | None) -> bool:
        """Takes the first event of the stream; False when it is not the start event."""
        if first is None or first.type != "start":
            return False
        self.id, self.pid = first.process_id, first.pid
        return True

    @property
    def exit_code(self) -> int | None:
        """The exit code once the exit event was read, else None."""
        return self._col.exit.exit_code if self._col.exit else None

    def _ctl_args(self, action: str) -> dict[str, Any]:
        """request() arguments of a control call (stdin, stdin/close, signal, resize);
        its refusals come back as answers, for _ctl_check."""
        return {
            "method": "POST",
            "path": f"/v1/processes/{self.id}/{action}",
            "idempotent": False,
            "what": f"process {action}",
            "ok": CTL_REFUSALS,
        }

    def _ctl_check(self, resp: httpx.Response, action: str) -> None:
        """Raises the error of a refused control call: ProcessExitedError once the
        process has exited (_wire.control_error), whether or not its exit event was read."""
        if resp.status_code >= 400:
            raise _wire.control_error(resp, f"process {action}", self._col.exit is not None)
