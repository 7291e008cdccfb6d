"""The synchronous client: SandboxClient, Sandbox, Process and Files. The I/O only: what
is sent, how answers are read and when to retry or resume are _k8s's, _wire's and
_base's (shared with agent_sandbox_sdk.aio)."""

from __future__ import annotations

import builtins
import collections
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx

from . import _base, _code, _conn, _fsops, _k8s, _localfile, _ports, _proxy, _wire
from . import background as _bg
from ._fsops import FileWatch
from ._kube_sync import KubeClient
from ._kubeconfig import KubeConfig
from .background import BackgroundProcess
from .errors import NotFoundError, SandboxError
from .models import (
    BackgroundProcessInfo,
    CodeResult,
    Connection,
    DirectConnection,
    EnvValue,
    ExecResult,
    Execution,
    FileEntry,
    FileStat,
    ProcessEvent,
    SandboxInfo,
    WriteResult,
)

RETRY_STATUS = _wire.RETRY_STATUS

CLOSE_WAIT_CALLS = 3
"""close() waits for a create() in flight for up to this many API calls' timeouts (its
POST, its rollback DELETE, a spare) plus _k8s.CLEANUP_TIMEOUT (the looks of a lost
create's rollback)."""


class SandboxClient(_base.ClientBase):
    """Creates, finds and deletes sandboxes.

    ``kubeconfig``/``context`` pick the API server (default: in-cluster, else $KUBECONFIG
    or ~/.kube/config); ``namespace`` defaults to the kubeconfig context's; ``connection``
    is a config from :mod:`agent_sandbox_sdk.models` or "auto", "router", "direct", "proxy".
    ``early_handout`` (default true): a claimed sandbox is returned as soon as a Sandbox
    bound to the claim is Ready, one API write before the claim's status says so; false
    waits for the claim's Ready. Use as a context manager, or call close()."""

    def __init__(
        self,
        *,
        namespace: str | None = None,
        kubeconfig: str | os.PathLike[str] | None = None,
        context: str | None = None,
        connection: Connection | str | None = None,
        config: KubeConfig | None = None,
        timeout: float = 30.0,
        resume_timeout: float = _k8s.RESUME_TIMEOUT,
        early_handout: bool = True,
    ) -> None:
        super().__init__(namespace, kubeconfig, context, connection, config, resume_timeout, early_handout)
        self.kube = KubeClient(self.config, timeout)
        verify = self._verify()
        opts = _wire.client_options(timeout)  # its limits go to the transport: httpx ignores them
        self.http = httpx.Client(**opts, transport=_proxy.transport(verify, limits=opts["limits"]))
        self._creates: builtins.list[int] = []  # the threads of the create() calls in flight
        self._creates_done = threading.Condition()

    def close(self) -> None:
        """Closes the HTTP connections (sandboxes keep running). A create() waiting in
        another thread is ended first (SandboxError) and close() returns once it has
        deleted what it created (bounded: CLOSE_WAIT_CALLS API calls' timeouts plus
        _k8s.CLEANUP_TIMEOUT; not for a create() of the calling thread, say one a signal
        handler interrupted to call close())."""
        self.kube.stop_waits()
        bound = CLOSE_WAIT_CALLS * self.kube.timeout + _k8s.CLEANUP_TIMEOUT
        me = threading.get_ident()
        with self._creates_done:
            self._creates_done.wait_for(lambda: all(t == me for t in self._creates), timeout=bound)
        self.http.close()
        self.kube.close()

    @contextlib.contextmanager
    def _create_in_flight(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._creates_done:
            self._creates.append(me)
        try:
            yield
        finally:
            with self._creates_done:
                self._creates.remove(me)
                self._creates_done.notify_all()

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- create --------------------------------------------------------------------

    def create(
        self,
        pool: str | None = None,
        *,
        template: str | None = None,
        pod_spec: Mapping[str, Any] | None = None,
        name: str | None = None,
        namespace: str | None = None,
        env: Mapping[str, EnvValue] | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        pod_labels: Mapping[str, str] | None = None,
        pod_annotations: Mapping[str, str] | None = None,
        ttl: float | timedelta | None = None,
        shutdown_time: datetime | None = None,
        wait: bool = True,
        timeout: float = 180.0,
        keep: bool = False,
    ) -> Sandbox:
        """Creates a sandbox from a warm pool (a SandboxClaim), a SandboxTemplate name or a
        pod spec (a Sandbox), and waits until it is Ready (by watch; ``timeout`` seconds).
        On any failure the created object is deleted again, also when close() is called
        meanwhile (it waits for that). The returned Sandbox deletes itself when used as a
        context manager unless ``keep`` is true."""
        with self._create_in_flight():
            ns = namespace or self.namespace
            plan = _k8s.plan_create(
                pool,
                template,
                pod_spec,
                name=name,
                env=env,
                labels=labels,
                annotations=annotations,
                pod_labels=pod_labels,
                pod_annotations=pod_annotations,
                ttl=ttl,
                shutdown_time=shutdown_time,
            )
            tmpl = self._get_template(ns, template) if template is not None else None
            for tries_left in range(_k8s.CREATE_NAME_TRIES - 1, -1, -1):
                resource, body = plan.body(tmpl)
                sandbox, claim = _k8s.created_names(resource, body)
                sb = Sandbox(self, ns, sandbox, claim=claim, keep=keep)
                mark = _k8s.SendMark()
                try:
                    created = self.kube.create(resource, ns, body, mark)
                    break
                except BaseException as e:
                    # Under a name drawn here (never one the caller gave, which could be
                    # someone else's object): a taken name is drawn again; a create that may
                    # have stored the object (no answer, a 5xx; not a POST never sent, e.g.
                    # Ctrl-C while it waited for a connection, nor on a client closed
                    # meanwhile) is undone by that name. After Ctrl-C by the DELETE alone,
                    # best effort: the looks for a late landing would hold it up for seconds.
                    if plan.name is None and _k8s.name_taken(e) and tries_left:
                        continue
                    if plan.name is None and _k8s.create_unsettled(e, mark) and not self.kube.http.is_closed:
                        sb._delete_lost(look=isinstance(e, Exception))
                    raise
            sb._uid = _k8s.uid_of(created)
            if wait:
                try:
                    sb._wait_created(created, timeout)
                except BaseException:
                    sb._delete_quietly()
                    raise
            return sb

    def _get_template(self, ns: str, name: str) -> dict[str, Any]:
        try:
            return self.kube.get("sandboxtemplates", ns, name)
        except NotFoundError:
            raise _k8s.template_not_found(ns, name) from None

    # ---- find ----------------------------------------------------------------------

    def get(self, name: str, *, namespace: str | None = None, timeout: float = 30.0) -> Sandbox:
        """Attaches to an existing sandbox by Sandbox name or by SandboxClaim name."""
        ns = namespace or self.namespace
        try:
            obj = self.kube.get("sandboxes", ns, name)
            return Sandbox(self, ns, name, claim=_k8s.owner_claim(obj), keep=True, obj=obj)
        except NotFoundError:
            pass
        try:
            claim = self.kube.get("sandboxclaims", ns, name)
        except NotFoundError:
            raise _k8s.no_such_sandbox(ns, name) from None
        w = _k8s.Wait("SandboxClaim", name)
        self.kube.wait("sandboxclaims", ns, name, claim, timeout, w, _k8s.on_claim_bound)
        sb = Sandbox(self, ns, w.sandbox, claim=name, keep=True)
        sb._uid = _k8s.uid_of(claim)  # delete() leaves a claim made again under the name
        return sb

    def list(self, *, namespace: str | None = None, label_selector: str | None = None) -> builtins.list[SandboxInfo]:
        """Sandboxes in the namespace (optionally filtered by a label selector)."""
        return _k8s.sandbox_infos(self.kube.list("sandboxes", namespace or self.namespace, label_selector))

    def list_claims(self, *, namespace: str | None = None, label_selector: str | None = None) -> builtins.list[str]:
        """Names of the SandboxClaims in the namespace."""
        return _k8s.item_names(self.kube.list("sandboxclaims", namespace or self.namespace, label_selector))

    def delete(self, name: str, *, namespace: str | None = None) -> bool:
        """Deletes the SandboxClaim or Sandbox called name. False if neither exists."""
        ns = namespace or self.namespace
        if self.kube.delete("sandboxclaims", ns, name):
            return True
        return self.kube.delete("sandboxes", ns, name)


class Sandbox(_base.SandboxBase[SandboxClient]):
    """A handle on one sandbox. Cheap: holds names and a cached route to sandboxd."""

    def __init__(
        self,
        client: SandboxClient,
        namespace: str,
        name: str,
        *,
        claim: str = "",
        keep: bool = False,
        obj: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(client, namespace, name, claim, keep, obj)
        self.files = Files(self)
        self.contexts = _code.Contexts(self)
        self._wake_lock = threading.Lock()
        self._lock = threading.Lock()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if not self.keep:
                self._delete_quietly()
        finally:
            self.close()

    def close(self) -> None:
        """Closes the client when the handle made it (connect()); a handle from a
        SandboxClient leaves that client open. The sandbox keeps running."""
        if self._owns_client:
            self.client.close()

    # ---- lifecycle -----------------------------------------------------------------

    def _wait_created(self, created: dict[str, Any], timeout: float) -> None:
        start = time.monotonic()
        if self.claim:
            w = _k8s.Wait("SandboxClaim", self.claim)
            kube = self.client.kube
            obj: dict[str, Any] = {}
            if self.client.early_handout:
                obj = kube.wait_claim(self.namespace, self.claim, created, timeout, w)
            else:
                kube.wait("sandboxclaims", self.namespace, self.claim, created, timeout, w, _k8s.on_claim_event)
            self._handed_out(w, obj)
            return
        w = _k8s.Wait("Sandbox", self.name)
        left = max(0.0, timeout - (time.monotonic() - start))
        self._obj = self.client.kube.wait(
            "sandboxes", self.namespace, self.name, created, left, w, _k8s.on_sandbox_event
        )

    def wait_ready(self, timeout: float = 180.0) -> None:
        """Waits (by watch) until the sandbox is Ready."""
        if not self.name and self.claim:
            self._wait_created(self.client.kube.get("sandboxclaims", self.namespace, self.claim), timeout)
            return
        w = _k8s.Wait("Sandbox", self.name)
        self._obj = self.client.kube.wait(
            "sandboxes", self.namespace, self.name, None, timeout, w, _k8s.on_sandbox_event
        )
        self._target = None

    def refresh(self) -> SandboxInfo:
        """Reads the Sandbox and returns its current state."""
        self._obj = self.client.kube.get("sandboxes", self.namespace, self._need_name())
        return _k8s.sandbox_info(self._obj, self.claim)

    def suspend(self, *, wait: bool = True, timeout: float = 120.0) -> None:
        """Deletes the pod but keeps the Sandbox, its volumes and its Service."""
        name = self._need_name()
        obj = self.client.kube.patch("sandboxes", self.namespace, name, _k8s.SUSPEND_PATCH)
        self._target = None
        if wait:
            w = _k8s.Wait("Sandbox", name)
            self.client.kube.wait("sandboxes", self.namespace, name, obj, timeout, w, _k8s.on_sandbox_suspended)

    def resume(self, *, wait: bool = True, timeout: float = 180.0) -> None:
        """Recreates the pod and (by default) waits until the sandbox is Ready again."""
        name = self._need_name()
        obj = self.client.kube.patch("sandboxes", self.namespace, name, _k8s.RUN_PATCH)
        self._target = None
        if wait:
            w = _k8s.Wait("Sandbox", name)
            self._obj = self.client.kube.wait("sandboxes", self.namespace, name, obj, timeout, w, _k8s.on_sandbox_event)

    def delete(self, *, wait: bool = False, timeout: float = 60.0) -> bool:
        """Deletes the claim (or the Sandbox when there is no claim). With wait, returns
        once the Sandbox is gone. Only the object the handle knows is deleted when it
        knows its UID (a precondition): one made again under the name by another client
        is left alone (the handle's is gone already, which is no error). Returns whether
        this call deleted it (False: it was gone already)."""
        uid = self._delete_uid()
        deleted = False
        if self.claim:
            deleted = self.client.kube.delete("sandboxclaims", self.namespace, self.claim, uid)
        elif self.name:
            deleted = self.client.kube.delete("sandboxes", self.namespace, self.name, uid)
            wait = wait and deleted  # gone already: the name may hold another client's Sandbox now
        if wait and self.name:
            self._wait_gone(timeout)
        self._target = None
        return deleted

    def _wait_gone(self, timeout: float) -> None:
        w = _k8s.Wait("Sandbox", self.name)
        try:
            self.client.kube.wait("sandboxes", self.namespace, self.name, None, timeout, w, _k8s.on_deleted)
        except NotFoundError:
            pass

    def _delete_quietly(self) -> None:
        try:
            self.delete()
        except SandboxError as e:  # the caller's error goes on; this one is logged
            _k8s.log_cleanup_failure(self.namespace, self.claim or self.name, e)

    def _delete_lost(self, *, look: bool = True) -> None:
        """Undoes a create whose answer was lost, under a name the SDK drew: deletes by
        name (the UID is unknown) and, when that found nothing, looks by name after each
        of _k8s.LOST_CREATE_LOOKS (within _k8s.CLEANUP_TIMEOUT) and deletes what landed
        meanwhile: the POST may still have been in the API server, and a claim stored
        after the DELETE would hold a warm Sandbox nobody knows of. A DELETE that found
        the object undid the create's one write: no look is needed. Errors are dropped
        (the create's own is raised)."""
        deadline = time.monotonic() + _k8s.CLEANUP_TIMEOUT
        resource, name = self._own_object()
        kube = self.client.kube
        try:
            if kube.delete(resource, self.namespace, name) or not look:
                return
            for wait in _k8s.lost_create_waits(deadline):
                time.sleep(wait)
                try:
                    obj = kube.get(resource, self.namespace, name)
                except SandboxError:
                    continue  # not there (yet), or the look failed: look again
                kube.delete(resource, self.namespace, name, _k8s.uid_of(obj))
                return
        except SandboxError as e:
            _k8s.log_cleanup_failure(self.namespace, name, e)

    def _need_name(self) -> str:
        if not self.name:
            self.wait_ready()
        return self.name

    # ---- transport -----------------------------------------------------------------

    def _lost(self) -> None:
        """As SandboxBase._lost, under the route's lock: another thread's _route may be
        between its read of the Sandbox and _new_target, which reads the object."""
        with self._lock:
            super()._lost()

    def _route(self) -> _conn.Target:
        self._wake(force=False)
        with self._lock:
            if self._target is None:
                name = self._need_name()
                if self._needs_object():
                    self._obj = self.client.kube.get("sandboxes", self.namespace, name)
                return self._new_target(name)
            return self._target

    def _wake(self, *, force: bool) -> bool:
        """Resume on traffic before a data-plane call (see _base.SandboxBase). Returns
        whether it resumed or waited."""
        if not self._may_wake(force):
            return False
        with self._wake_lock:
            if not force and not self._needs_read():
                return False
            obj = self.client.kube.get("sandboxes", self.namespace, self.name)
            action = self._woken(obj)
            if action == "none":
                return False
            if action == "resume":
                obj = self.client.kube.patch("sandboxes", self.namespace, self.name, _k8s.RESUME_PATCH)
            self._target = None
            w = _k8s.Wait("Sandbox", self.name)
            timeout = self.client.resume_timeout
            self._ready_again(
                self.client.kube.wait("sandboxes", self.namespace, self.name, obj, timeout, w, _k8s.on_sandbox_event)
            )
            return True

    # ---- ports (docs/sdk-python.md "Ports") ----------------------------------------

    def port_target(self, port: int, path: str = "/") -> _ports.PortURL:
        """The URL of path on port in the sandbox (any server listening there), with the
        headers (and bearer token) a request needs in this client's connection mode."""
        self._route()
        c = self.client
        with self._lock:
            obj = self._obj
        return _ports.port_target(c.connection, c.config, self.namespace, self.name, obj, port, path)

    def url(self, port: int, path: str = "/") -> str:
        """port_target(port, path).url: send port_target(port).headers with it."""
        return self.port_target(port, path).url

    def http_client(self, port: int, *, timeout: float = 30.0) -> httpx.Client:
        """A new httpx.Client for port (base_url, authentication and TLS set): request
        paths are relative to the port's root. Close it when done."""
        return _ports.http_client(self.port_target(port), self.client.connection, self.client.config, timeout)

    def _http(self, t: _conn.Target) -> httpx.Client:
        return self.client.kube.http if t.via_kube else self.client.http

    def request(
        self,
        method: str,
        path: str,
        *,
        idempotent: bool,
        what: str,
        ok: tuple[int, ...] = (),
        stream: bool = False,
        **kw: Any,
    ) -> httpx.Response:
        """One request to sandboxd. Idempotent calls are retried on 502/503/504 and
        connection loss; others never are (a run is never executed twice). The router's
        401 is sent again at once, once, when the token file holds a new token.
        ``after_loss``: sandboxd's error statuses that pass once an earlier attempt may
        have run (see _wire.Attempts). ``stream``: a successful answer's body is not read
        (the caller reads and closes it); a failed one's is, as always."""
        att = _wire.Attempts(idempotent, kw)
        while att.next():
            t = self._route()
            try:
                http = self._http(t)
                req = http.build_request(method, t.base + path, **att.kwargs(t.headers))
                resp = http.send(req, stream=True)
                if resp.status_code >= 400:
                    _wire.read_error(resp)  # at most MAX_ERROR_BODY bytes of it
                elif not stream:
                    resp.read()
            except httpx.TransportError as e:
                att.lost(e)
                self._lost()
                if att.may_wake() and att.replay_safe(e=e) and self._wake(force=True):
                    att.woke = True
                elif att.last:
                    raise _wire.transport_error(e, what, idempotent) from e
                else:
                    time.sleep(att.backoff)
                continue
            except _wire.PROTOCOL_ERRORS as e:  # a body that broke its framing (h11's, unmapped)
                raise _wire.protocol_error(e, what) from e
            att.answered(resp, t.via_kube)
            if att.renew(t.renew_token(resp)):
                continue
            if att.retry_status(resp):
                self._target = None
                time.sleep(att.backoff)
            elif (
                att.may_wake_on(resp, t.via_kube)
                and att.replay_safe(resp=resp, via_kube=t.via_kube)
                and self._wake(force=True)
            ):
                att.woke = True
            else:
                return _wire.check(resp, what, att.ok(resp, ok))
        raise AssertionError("unreachable")

    # ---- processes -----------------------------------------------------------------

    def run(
        self,
        command: _wire.Command,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        stdin: str | bytes | None = None,
    ) -> ExecResult:
        """Runs a command to completion. A str runs under /bin/sh -c; a list is an argv.
        ``timeout`` (seconds) kills the process group; the result says timed_out."""
        body = _wire.run_body(command, env=env, cwd=cwd, timeout=timeout, stdin=stdin)
        resp = self.request(
            "POST",
            "/v1/processes/run",
            idempotent=False,
            what="run",
            make_content=lambda: _wire.chunked_json(body),
            headers=_wire.JSON_HEADERS,
            timeout=_wire.run_http_timeout(timeout),
        )
        return _wire.parse_result(resp.json())

    def spawn(
        self,
        command: _wire.Command,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        stdin: str | bytes | None = None,
        pty: bool | tuple[int, int] = False,
        collect: bool = True,
    ) -> Process:
        """Starts a command and returns an interactive Process (iterate it for events,
        write() to its stdin, signal(), wait()). With ``collect=False`` the Process keeps
        none of the output it reads (wait()'s result then has empty stdout and stderr):
        for a caller that consumes the events itself, however much a process prints."""
        body = _wire.run_body(command, env=env, cwd=cwd, timeout=timeout, stdin=stdin, pty=pty)
        for woke in (False, True):
            t = self._route()
            http = self._http(t)
            req = http.build_request(**_wire.spawn_request(t.base, t.headers), content=_wire.chunked_json(body))
            try:
                resp = http.send(req, stream=True)
            except httpx.TransportError as e:
                self._target = None
                if not woke and _wire.never_sent(e) and self._wake(force=True):
                    continue
                raise _wire.transport_error(e, "spawn", False) from e
            if resp.status_code >= 400:
                _wire.read_error(resp)
                if not woke and _wire.not_forwarded(resp, t.via_kube) and self._wake(force=True):
                    continue
                raise _wire.error(resp, "spawn")
            break
        return Process(self, resp, collect)

    def stream(
        self,
        command: _wire.Command,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        stdin: str | bytes | None = None,
    ) -> Iterator[ProcessEvent]:
        """Runs a command and yields its stdout/stderr events as they come, then the exit
        event. Closing the iterator early kills the process."""
        with self.spawn(command, env=env, cwd=cwd, timeout=timeout, stdin=stdin, collect=False) as p:
            yield from p

    def processes(self) -> list[dict[str, Any]]:
        """The processes sandboxd is running."""
        resp = self.request("GET", "/v1/processes", idempotent=True, what="list processes")
        return list(resp.json().get("processes") or [])

    def health(self) -> dict[str, Any]:
        """sandboxd's /v1/health answer."""
        return dict(self.request("GET", "/v1/health", idempotent=True, what="health").json())

    # ---- background processes (background.py) --------------------------------------

    def start_background(
        self,
        command: _wire.Command,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bool | str | bytes = False,
        timeout: float | None = None,
        pty: bool | tuple[int, int] = False,
    ) -> BackgroundProcess:
        """Starts a command that keeps running when this client goes away. ``stdin=True``
        keeps its stdin open for write(). TooManyProcessesError when the table is full."""
        body = _bg.start_body(command, env=env, cwd=cwd, stdin=stdin, timeout=timeout, pty=pty)
        return _bg.start(self, body)

    def background_processes(self) -> list[BackgroundProcessInfo]:
        """Every background process sandboxd holds, running and exited."""
        return _bg.list_infos(self)

    def background(self, id: int) -> BackgroundProcess:
        """A handle on background process id (no request is made)."""
        return BackgroundProcess(self, id)

    def run_code(
        self,
        code: str,
        *,
        context: _code.ContextRef = None,
        timeout: float | None = None,
        on_stdout: Callable[[str], None] | None = None,
        on_stderr: Callable[[str], None] | None = None,
        on_result: Callable[[CodeResult], None] | None = None,
        max_output: int | None = None,
        keep_streams: bool = True,
    ) -> Execution:
        """Runs Python code in a code context whose state persists across calls (the
        sandbox's default context when ``context`` is None): output streams to the
        callbacks as it comes; the Execution holds it all, the last expression's value
        (``.text``) and the error if the code raised. Past ``timeout`` seconds the code
        is interrupted and CodeExecutionTimeout raised (docs/code-interpreter.md). The
        Execution keeps at most ``max_output`` characters of stdout, stderr and results'
        data in all (default _code.MAX_OUTPUT, 64 Mi); past it, it is ``truncated``.
        ``keep_streams=False``: stdout and stderr go to the callbacks only (the
        Execution's are empty and they take nothing of max_output), for a caller that
        bounds them itself. A run_code given up before its end (Ctrl-C, a callback that
        raised) interrupts its code; the next one in that context waits for the context
        to be free again, for _code.CANCEL_GRACE seconds at most."""
        body = _code.execute_body(code, context, timeout)
        return _code.run_code(
            self,
            body,
            _code.Collector(on_stdout, on_stderr, on_result, _code.check_max_output(max_output), keep_streams),
        )


class Process(_base.ProcessBase):
    """A running process: iterate for events, write()/close_stdin(), signal(), kill(),
    resize(), wait(). As a context manager, kills the process on exit if still running."""

    def __init__(self, sandbox: Sandbox, resp: httpx.Response, collect: bool = True) -> None:
        super().__init__(collect)
        self._sb = sandbox
        self._resp = resp
        self._lines = _wire.split_lines(resp.iter_bytes(), _wire.MAX_PROCESS_LINE, "spawn")
        self._text = _wire.StreamText()
        self._ahead: collections.deque[ProcessEvent] = collections.deque()  # decoded, not yet taken
        try:
            first = self._next()
        except BaseException:  # a lost stream, a bad event, Ctrl-C: the connection goes back
            resp.close()
            raise
        if not self._started(first):
            resp.close()
            raise _wire.not_started()

    def _next(self) -> ProcessEvent | None:
        if self._ahead:
            return self._ahead.popleft()
        try:
            for line in self._lines:
                ev = _wire.parse_event(line)
                if ev is not None:
                    self._ahead.extend(self._text.process_events(ev))
                    return self._ahead.popleft()
        except httpx.TransportError as e:
            raise _wire.stream_lost(self.id if hasattr(self, "id") else "?", e) from e
        return None

    def __iter__(self) -> Iterator[ProcessEvent]:
        while not self._done:
            ev = self._next()
            if ev is None:
                self._finish()
                raise _wire.stream_ended(self.id)
            if self._col.add(ev):
                self._finish()
            yield ev

    def _finish(self) -> None:
        self._done = True
        self._resp.close()

    def wait(self) -> ExecResult:
        """Reads the rest of the stream; the result holds all output (including events
        already iterated), unless the process was spawned with ``collect=False``."""
        for _ in self:
            pass
        return self._col.result()

    def _ctl(self, action: str, **kw: Any) -> None:
        self._ctl_check(self._sb.request(**self._ctl_args(action), **kw), action)

    def write(self, data: str | bytes) -> None:
        """Sends data to the process's stdin, in requests of at most 1 MiB (in order;
        see _wire.write_stdin). A failure partway leaves the parts before it written.
        ProcessExitedError after the exit (as close_stdin, signal and resize)."""
        _wire.write_stdin(lambda chunk: self._ctl("stdin", content=chunk), data)

    def close_stdin(self) -> None:
        self._ctl("stdin/close")

    def signal(self, sig: str | int) -> None:
        """Sends a signal ("SIGINT", "TERM", 9 ...) to the process group."""
        self._ctl("signal", json={"signal": sig})

    def resize(self, cols: int, rows: int) -> None:
        """Resizes the PTY of a process started with pty=..."""
        self._ctl("resize", json={"cols": cols, "rows": rows})

    def kill(self) -> None:
        """SIGKILL to the process group (no error if it already exited)."""
        try:
            self._sb.request("DELETE", f"/v1/processes/{self.id}", idempotent=True, what="kill")
        except NotFoundError:
            pass

    def close(self) -> None:
        if not self._done:
            try:
                self.kill()
            finally:  # the stream is closed even when the kill fails
                self._finish()

    def __enter__(self) -> Process:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


Content = bytes | str | IO[bytes] | Iterable[bytes]


class Files:
    """sandboxd's files under the sandbox root. Paths are relative to the root (a
    leading / is allowed); ``..`` is refused. A path that ends with "/" names a
    directory, as in the shell: reading or writing a file through one raises ValueError
    (``read("f.txt/")`` does not read f.txt); stat, exists, delete and move find only
    a directory (or a symlink to one) there, else NotFoundError (exists: False)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sb = sandbox

    def read(self, path: str, *, offset: int = 0, max_bytes: int | None = None) -> bytes:
        """A file's bytes, or at most max_bytes of them from offset (b"" past the end)."""
        kw = _fsops.read_args(offset, max_bytes)
        url = _wire.file_content_path(path, "read")
        resp = self._sb.request("GET", url, idempotent=True, what=f"read {path}", **kw)
        return _fsops.read_content(resp, path)

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding)

    def iter_read(self, path: str, chunk_size: int = _wire.CHUNK) -> Iterator[bytes]:
        """Streams a file's bytes without holding the whole file in memory. Opening it is
        retried and resumes the sandbox as other reads are (a proxy's 502/503, a lost
        connection)."""
        url = _wire.file_content_path(path, "read")
        resp = self._sb.request("GET", url, idempotent=True, what=f"read {path}", stream=True)
        try:
            _wire.not_a_listing(resp, path)
            yield from resp.iter_bytes(chunk_size)
        except httpx.TransportError as e:  # the connection dropped while the body came
            raise _wire.transport_error(e, f"read {path}", True) from e
        finally:
            resp.close()

    def download(self, path: str, dest: str | os.PathLike[str] | IO[bytes]) -> int:
        """Streams a file to a local path or binary file object. Returns the byte count."""
        n = 0
        if isinstance(dest, (str, os.PathLike)):
            # the local file is replaced only once the whole file has arrived
            with _localfile.replacing(dest) as f:
                return self.download(path, f)
        for chunk in self.iter_read(path):
            dest.write(chunk)
            n += len(chunk)
        return n

    def write(self, path: str, data: Content, *, mode: int | None = None) -> None:
        """Writes bytes, text (UTF-8), a binary file object or an iterable of chunks
        (streamed, never buffered whole). The write is atomic on the sandbox side."""
        url = _wire.file_content_path(path, "write")
        kw = _wire.write_options(data, mode)
        if isinstance(data, (bytes, bytearray, memoryview, str)):  # a buffer: sent whole
            content = data.encode() if isinstance(data, str) else bytes(data)
            self._sb.request("PUT", url, idempotent=True, what=f"write {path}", content=content, **kw)
            return
        body = _iter_file(data) if hasattr(data, "read") else data  # type: ignore[arg-type]
        self._sb.request("PUT", url, idempotent=False, what=f"write {path}", content=body, **kw)

    def upload(self, local: str | os.PathLike[str], path: str, *, mode: int | None = None) -> None:
        """Uploads a local file (streamed) or directory (recursively) to path."""
        src = Path(local)
        if src.is_dir():
            self.upload_dir(src, path)
            return
        with open(src, "rb") as f:
            self.write(path, f, mode=mode if mode is not None else src.stat().st_mode & 0o777)

    def upload_dir(self, local: str | os.PathLike[str], path: str) -> int:
        """Uploads every regular file under a local directory. Returns the file count."""
        n = 0
        for p, remote in _wire.upload_files(local, path):
            self.upload(p, remote)
            n += 1
        return n

    def download_dir(self, path: str, local: str | os.PathLike[str]) -> int:
        """Downloads a directory tree. Returns the file count."""
        n = 0
        Path(local).mkdir(parents=True, exist_ok=True)
        for e in self.list(path):
            if e.is_dir:
                n += self.download_dir(_wire.child(path, e.name), _wire.local_child(local, e.name))
            elif e.type == "file":
                self.download(_wire.child(path, e.name), _wire.local_child(local, e.name))
                n += 1
        return n

    def list(self, path: str = "") -> builtins.list[FileEntry]:
        """The directory's entries, sorted by name. A directory larger than one of
        sandboxd's listing pages (10,000 names) is read page by page, each after the last
        name of the one before: every name comes once; names created or removed meanwhile
        may or may not be seen. At most _wire.MAX_LISTING_ENTRIES (1,000,000) entries are
        read; a larger directory, or an answer whose continue tokens repeat, raises
        SandboxError."""
        out: builtins.list[FileEntry] = []
        pages = _wire.ListingPages(path)
        while True:
            kw = pages.params()
            resp = self._sb.request("GET", _wire.file_path(path), idempotent=True, what=f"list {path}", **kw)
            page, nxt = _wire.listing_page(resp, path)
            out.extend(page)
            if not pages.more(len(page), nxt):
                return out

    def exists(self, path: str) -> bool:
        """Whether path exists (a stat; see _wire.exists_answer for the 404s that raise)."""
        what = f"exists {path}"
        p, kw = _fsops.stat_request(path, False)
        resp = self._sb.request("GET", p, idempotent=True, what=what, ok=(404,), **kw)
        return _fsops.exists_answer(resp, path, what)

    def delete(self, path: str, *, recursive: bool = False, missing_ok: bool = False) -> None:
        """Deletes a file, or a directory (a non-empty one only with ``recursive``). The
        root is named by "/" alone (``delete("/", recursive=True)`` empties it); "", "."
        and other paths that resolve to it raise ValueError without a request."""
        url = _wire.delete_path(path)
        kw = _wire.delete_options(recursive, missing_ok)
        if _fsops.dir_only(path):
            try:
                self._must_be_dir(path, f"delete {path}")
            except NotFoundError:
                if missing_ok:
                    return
                raise
        self._sb.request("DELETE", url, idempotent=True, what=f"delete {path}", **kw)

    def stat(self, path: str, *, follow_symlinks: bool = False) -> FileStat:
        """Type, size, mode, mtime and symlink target of path. A symlink is described,
        not followed, unless ``follow_symlinks``: then every link (the last one too) is
        followed beneath the sandbox's root and what it leads to is described (``type``
        is never ``"symlink"``, ``symlink_target`` is None, ``path`` stays the path
        asked for). A link that leads out of the root, or a loop of links, raises
        AuthError (sandboxd's 403 PERMISSION_DENIED, as for any escape); a dangling link
        NotFoundError."""
        p, kw = _fsops.stat_request(path, follow_symlinks)
        resp = self._sb.request("GET", p, idempotent=True, what=f"stat {path}", **kw)
        return _fsops.stat_answer(resp.json(), path)

    def mkdir(self, path: str, *, parents: bool = True, mode: int | None = None) -> FileStat:
        """Creates a directory (with its parents when ``parents``; an existing directory
        is then fine). ConflictError when something else is in the way. A conflict after
        an attempt whose answer was lost is success when path is now a directory."""
        kw = _fsops.mkdir_args(parents, mode)
        what = f"mkdir {path}"
        resp = self._sb.request("POST", _fsops.api_path("/v1/mkdir/", path), idempotent=True, what=what, **kw)
        if resp.status_code == 409:
            return _fsops.made_before(resp, self._stat_or_none(path), what)
        return _fsops.parse_stat(resp.json())

    def _must_be_dir(self, path: str, what: str) -> None:
        """NotFoundError unless path is a directory (a symlink to one included): the check
        of a delete or move of a path that ends with "/" (_fsops.dir_only)."""
        p, kw = _fsops.stat_request(path, True)
        resp = self._sb.request("GET", p, idempotent=True, what=what, **kw)
        if not _fsops.parse_stat(resp.json()).is_dir:
            raise _fsops.not_a_directory(what)

    def _stat_or_none(self, path: str) -> FileStat | None:
        try:
            return self.stat(path)
        except SandboxError:
            return None

    def move(self, src: str, dst: str, *, overwrite: bool = False) -> None:
        """Renames src to dst (both under the root; dst's parent must exist). Without
        ``overwrite`` an existing dst raises ConflictError."""
        kw = _fsops.move_args(src, dst, overwrite)
        if _fsops.move_needs_dir(src, dst):
            self._must_be_dir(src, f"move {src} to {dst}")
        self._sb.request("POST", "/v1/move", idempotent=False, what=f"move {src} to {dst}", **kw)

    def write_many(self, files: Mapping[str, bytes | str] | Iterable[_fsops.BatchItem]) -> builtins.list[WriteResult]:
        """Writes several files in one request ({path: data} or (path, data[, mode])
        items), each atomically; one WriteResult per file, in order."""
        kw = _fsops.batch_args(files)
        resp = self._sb.request("POST", "/v1/files:batch", idempotent=True, what="write_many", **kw)
        return _fsops.parse_batch(resp.json())

    def watch(self, path: str = "", *, recursive: bool = False, queue: int | None = None) -> FileWatch:
        """Watches a directory: a FileWatch (iterate it; use it as a context manager) of
        create/modify/delete/move events, in order. ``queue`` bounds the events held for
        a slow reader (then an ``overflow`` event says how many were dropped)."""
        return _fsops.open_watch(self._sb, path, recursive, queue)


def _iter_file(f: IO[bytes]) -> Iterator[bytes]:
    while chunk := f.read(_wire.CHUNK):
        yield chunk


def connect(url: str, *, token: str | None = None, name: str = "local", namespace: str = "default") -> Sandbox:
    """A handle on a sandboxd at a known URL (one you run yourself, or reach through a
    port you forwarded): processes and files work, lifecycle calls do not. The handle
    owns the client made here: use it as a context manager, or call close()."""
    client = SandboxClient(
        config=KubeConfig(server="http://127.0.0.1:9"),
        namespace=namespace,
        connection=DirectConnection(url=url, token=token),
    )
    sb = Sandbox(client, namespace, name, keep=True)
    sb._owns_client = True
    return sb


__all__ = ["Files", "Process", "Sandbox", "SandboxClient", "connect"]
