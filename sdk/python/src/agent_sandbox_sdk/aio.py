"""The asyncio client: AsyncSandboxClient, AsyncSandbox, AsyncProcess and AsyncFiles
(the same surface as agent_sandbox_sdk.client, with coroutines). The I/O only: what is
sent, how answers are read and when to retry or resume are _k8s's, _wire's and
_base's (shared with agent_sandbox_sdk.client)."""

from __future__ import annotations

import asyncio
import builtins
import collections
import os
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Coroutine, Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx

from . import _base, _code, _conn, _fsops, _k8s, _localfile, _ports, _proxy, _wire
from . import background as _bg
from ._fsops import AsyncFileWatch
from ._kube_async import AsyncKubeClient
from ._kubeconfig import KubeConfig
from .background import AsyncBackgroundProcess
from .errors import NotFoundError, SandboxError, SandboxTimeoutError
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
    PodProxyConnection,
    ProcessEvent,
    SandboxInfo,
    WriteResult,
)

RETRY_STATUS = _wire.RETRY_STATUS

CLOSE_WAIT_CALLS = 3
"""aclose() awaits a create() in flight for up to this many API calls' timeouts (its POST,
its rollback DELETE, a spare) plus _k8s.CLEANUP_TIMEOUT (the looks of a lost create's
rollback)."""


def _cancel_requested() -> bool:
    """Whether the current task was asked to cancel (Python 3.11+; False before)."""
    cancelling = getattr(asyncio.current_task(), "cancelling", None)
    return bool(cancelling is not None and cancelling())


class AsyncSandboxClient(_base.ClientBase):
    """Creates, finds and deletes sandboxes.

    ``kubeconfig``/``context`` pick the API server (default: in-cluster, else $KUBECONFIG
    or ~/.kube/config); ``namespace`` defaults to the kubeconfig context's; ``connection``
    is a config from :mod:`agent_sandbox_sdk.models` or "auto", "router", "direct", "proxy".
    ``early_handout`` (default true): a claimed sandbox is returned as soon as a Sandbox
    bound to the claim is Ready, one API write before the claim's status says so; false
    waits for the claim's Ready. Use as an async context manager, or await aclose()."""

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
        self.kube = AsyncKubeClient(self.config, timeout)
        verify = self._verify()
        opts = _wire.client_options(timeout)  # its limits go to the transport: httpx ignores them
        self.http = httpx.AsyncClient(**opts, transport=_proxy.async_transport(verify, limits=opts["limits"]))
        self._cleanups: set[asyncio.Task[None]] = set()
        self._closing = False
        self._creates: set[asyncio.Future[None]] = set()  # one per create() in flight
        self._waits: set[asyncio.Task[None]] = set()  # their waits, which aclose() ends
        self._closed_waits: set[asyncio.Task[None]] = set()  # the waits aclose() cancelled

    async def aclose(self) -> None:
        """Closes the HTTP connections (sandboxes keep running), once the deletes still
        running for failed creates are done (see _cleanup). A create() waiting in another
        task is ended first (SandboxError) and deletes what it created before the client
        is closed (awaited for up to CLOSE_WAIT_CALLS API calls' timeouts plus
        _k8s.CLEANUP_TIMEOUT)."""
        self._closing = True
        for task in list(self._waits):
            self._closed_waits.add(task)
            task.cancel()
        if self._creates:
            await asyncio.wait(set(self._creates), timeout=CLOSE_WAIT_CALLS * self.kube.timeout + _k8s.CLEANUP_TIMEOUT)
        while self._cleanups:
            await asyncio.gather(*self._cleanups, return_exceptions=True)
        await self.http.aclose()
        await self.kube.aclose()

    async def _cleanup(self, coro: Coroutine[Any, Any, None]) -> None:
        """Runs coro, a delete that must not be cut short by the caller's cancellation
        (a create cancelled once its POST may have left is the common case of a lost
        answer): in a task, shielded. The caller waits for it (bounded: every API call by
        the client's timeout, the looks of _delete_lost by _k8s.CLEANUP_TIMEOUT), as
        the sync client and the Go SDK do; a further cancellation ends only that wait.
        The task is kept in _cleanups until it ends (the event loop holds tasks weakly:
        it must not be garbage-collected mid-way) and aclose() awaits it."""
        task = asyncio.ensure_future(coro)
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)
        await asyncio.shield(task)

    async def _closable_wait(self, coro: Coroutine[Any, Any, None], what: str) -> None:
        """Awaits coro, a create's wait, in a task that aclose() may cancel: the wait then
        raises SandboxError, and the create deletes what it created before aclose()
        closes the client. The caller's own cancellation goes to the task as before."""
        if self._closing:
            coro.close()
            raise SandboxError(f"{what}: the client is closed")
        task = asyncio.ensure_future(coro)
        self._waits.add(task)
        try:
            await task
        except asyncio.CancelledError:
            if task in self._closed_waits and task.cancelled() and not _cancel_requested():
                raise SandboxError(f"{what}: the client was closed") from None
            raise
        finally:
            self._waits.discard(task)
            self._closed_waits.discard(task)

    async def __aenter__(self) -> AsyncSandboxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ---- create --------------------------------------------------------------------

    async def create(
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
    ) -> AsyncSandbox:
        """Creates a sandbox from a warm pool (a SandboxClaim), a SandboxTemplate name or a
        pod spec (a Sandbox), and waits until it is Ready (by watch; ``timeout`` seconds).
        On any failure the created object is deleted again. The returned Sandbox deletes
        itself when used as a context manager unless ``keep`` is true. On any failure
        the created object is deleted again, also when aclose() is called meanwhile (it
        waits for that)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._creates.add(done)  # aclose() waits for it
        try:
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
            tmpl = await self._get_template(ns, template) if template is not None else None
            for tries_left in range(_k8s.CREATE_NAME_TRIES - 1, -1, -1):
                resource, body = plan.body(tmpl)
                sandbox, claim = _k8s.created_names(resource, body)
                sb = AsyncSandbox(self, ns, sandbox, claim=claim, keep=keep)
                mark = _k8s.SendMark()
                try:
                    created = await self.kube.create(resource, ns, body, mark)
                    break
                except BaseException as e:
                    # Under a name drawn here (never one the caller gave): a taken name is
                    # drawn again; a create that may have stored the object is undone (not
                    # a POST never sent, e.g. a task cancelled while it waited for a
                    # connection, nor on a client closed meanwhile).
                    if plan.name is None and _k8s.name_taken(e) and tries_left:
                        continue
                    if plan.name is None and _k8s.create_unsettled(e, mark) and not self.kube.http.is_closed:
                        await self._cleanup(sb._delete_lost())
                    raise
            sb._uid = _k8s.uid_of(created)
            if wait:
                try:
                    what = f"waiting for SandboxClaim {claim}" if claim else f"waiting for Sandbox {sandbox}"
                    await self._closable_wait(sb._wait_created(created, timeout), what)
                except BaseException:
                    await self._cleanup(sb._delete_quietly())
                    raise
            return sb
        finally:
            self._creates.discard(done)
            done.set_result(None)

    async def _get_template(self, ns: str, name: str) -> dict[str, Any]:
        try:
            return await self.kube.get("sandboxtemplates", ns, name)
        except NotFoundError:
            raise _k8s.template_not_found(ns, name) from None

    # ---- find ----------------------------------------------------------------------

    async def get(self, name: str, *, namespace: str | None = None, timeout: float = 30.0) -> AsyncSandbox:
        """Attaches to an existing sandbox by Sandbox name or by SandboxClaim name."""
        ns = namespace or self.namespace
        try:
            obj = await self.kube.get("sandboxes", ns, name)
            return AsyncSandbox(self, ns, name, claim=_k8s.owner_claim(obj), keep=True, obj=obj)
        except NotFoundError:
            pass
        try:
            claim = await self.kube.get("sandboxclaims", ns, name)
        except NotFoundError:
            raise _k8s.no_such_sandbox(ns, name) from None
        w = _k8s.Wait("SandboxClaim", name)
        await self.kube.wait("sandboxclaims", ns, name, claim, timeout, w, _k8s.on_claim_bound)
        sb = AsyncSandbox(self, ns, w.sandbox, claim=name, keep=True)
        sb._uid = _k8s.uid_of(claim)  # delete() leaves a claim made again under the name
        return sb

    async def list(
        self, *, namespace: str | None = None, label_selector: str | None = None
    ) -> builtins.list[SandboxInfo]:
        """Sandboxes in the namespace (optionally filtered by a label selector)."""
        return _k8s.sandbox_infos(await self.kube.list("sandboxes", namespace or self.namespace, label_selector))

    async def list_claims(
        self, *, namespace: str | None = None, label_selector: str | None = None
    ) -> builtins.list[str]:
        """Names of the SandboxClaims in the namespace."""
        return _k8s.item_names(await self.kube.list("sandboxclaims", namespace or self.namespace, label_selector))

    async def delete(self, name: str, *, namespace: str | None = None) -> bool:
        """Deletes the SandboxClaim or Sandbox called name. False if neither exists."""
        ns = namespace or self.namespace
        if await self.kube.delete("sandboxclaims", ns, name):
            return True
        return await self.kube.delete("sandboxes", ns, name)


class AsyncSandbox(_base.SandboxBase[AsyncSandboxClient]):
    """A handle on one sandbox. Cheap: holds names and a cached route to sandboxd."""

    def __init__(
        self,
        client: AsyncSandboxClient,
        namespace: str,
        name: str,
        *,
        claim: str = "",
        keep: bool = False,
        obj: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(client, namespace, name, claim, keep, obj)
        self.files = AsyncFiles(self)
        self.contexts = _code.AsyncContexts(self)
        self._wake_lock = asyncio.Lock()
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if not self.keep:
                await self.client._cleanup(self._delete_quietly())
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Closes the client when the handle made it (connect()); a handle from an
        AsyncSandboxClient leaves that client open. The sandbox keeps running."""
        if self._owns_client:
            await self.client.aclose()

    # ---- lifecycle -----------------------------------------------------------------

    async def _wait_created(self, created: dict[str, Any], timeout: float) -> None:
        start = time.monotonic()
        kube = self.client.kube
        if self.claim:
            w = _k8s.Wait("SandboxClaim", self.claim)
            obj: dict[str, Any] = {}
            if self.client.early_handout:
                obj = await kube.wait_claim(self.namespace, self.claim, created, timeout, w)
            else:
                await kube.wait("sandboxclaims", self.namespace, self.claim, created, timeout, w, _k8s.on_claim_event)
            self._handed_out(w, obj)
            return
        w = _k8s.Wait("Sandbox", self.name)
        left = max(0.0, timeout - (time.monotonic() - start))
        self._obj = await kube.wait("sandboxes", self.namespace, self.name, created, left, w, _k8s.on_sandbox_event)

    async def wait_ready(self, timeout: float = 180.0) -> None:
        """Waits (by watch) until the sandbox is Ready."""
        kube = self.client.kube
        if not self.name and self.claim:
            await self._wait_created(await kube.get("sandboxclaims", self.namespace, self.claim), timeout)
            return
        w = _k8s.Wait("Sandbox", self.name)
        self._obj = await kube.wait("sandboxes", self.namespace, self.name, None, timeout, w, _k8s.on_sandbox_event)
        self._target = None

    async def refresh(self) -> SandboxInfo:
        """Reads the Sandbox and returns its current state."""
        self._obj = await self.client.kube.get("sandboxes", self.namespace, await self._need_name())
        return _k8s.sandbox_info(self._obj, self.claim)

    async def suspend(self, *, wait: bool = True, timeout: float = 120.0) -> None:
        """Deletes the pod but keeps the Sandbox, its volumes and its Service."""
        name = await self._need_name()
        obj = await self.client.kube.patch("sandboxes", self.namespace, name, _k8s.SUSPEND_PATCH)
        self._target = None
        if wait:
            w = _k8s.Wait("Sandbox", name)
            await self.client.kube.wait("sandboxes", self.namespace, name, obj, timeout, w, _k8s.on_sandbox_suspended)

    async def resume(self, *, wait: bool = True, timeout: float = 180.0) -> None:
        """Recreates the pod and (by default) waits until the sandbox is Ready again."""
        name = await self._need_name()
        obj = await self.client.kube.patch("sandboxes", self.namespace, name, _k8s.RUN_PATCH)
        self._target = None
        if wait:
            w = _k8s.Wait("Sandbox", name)
            kube = self.client.kube
            self._obj = await kube.wait("sandboxes", self.namespace, name, obj, timeout, w, _k8s.on_sandbox_event)

    async def delete(self, *, wait: bool = False, timeout: float = 60.0) -> bool:
        """Deletes the claim (or the Sandbox when there is no claim). With wait, returns
        once the Sandbox is gone. Conditioned on the UID the handle knows (see
        Sandbox.delete). Returns whether this call deleted it (False: gone already)."""
        uid = self._delete_uid()
        kube = self.client.kube
        deleted = False
        if self.claim:
            deleted = await kube.delete("sandboxclaims", self.namespace, self.claim, uid)
        elif self.name:
            deleted = await kube.delete("sandboxes", self.namespace, self.name, uid)
            wait = wait and deleted  # gone already: the name may hold another client's Sandbox now
        if wait and self.name:
            await self._wait_gone(timeout)
        self._target = None
        return deleted

    async def _wait_gone(self, timeout: float) -> None:
        w = _k8s.Wait("Sandbox", self.name)
        try:
            await self.client.kube.wait("sandboxes", self.namespace, self.name, None, timeout, w, _k8s.on_deleted)
        except NotFoundError:
            pass

    async def _delete_quietly(self) -> None:
        try:
            await self.delete()
        except SandboxError as e:  # the caller's error goes on; this one is logged
            _k8s.log_cleanup_failure(self.namespace, self.claim or self.name, e)

    async def _delete_lost(self) -> None:
        """Undoes a create whose answer was lost: the DELETE by name, then the looks for
        a late landing (see Sandbox._delete_lost)."""
        deadline = time.monotonic() + _k8s.CLEANUP_TIMEOUT
        resource, name = self._own_object()
        kube = self.client.kube
        try:
            if await kube.delete(resource, self.namespace, name):
                return
            for wait in _k8s.lost_create_waits(deadline):
                await asyncio.sleep(wait)
                try:
                    obj = await kube.get(resource, self.namespace, name)
                except SandboxError:
                    continue  # not there (yet), or the look failed: look again
                await kube.delete(resource, self.namespace, name, _k8s.uid_of(obj))
                return
        except SandboxError as e:
            _k8s.log_cleanup_failure(self.namespace, name, e)

    async def _need_name(self) -> str:
        if not self.name:
            await self.wait_ready()
        return self.name

    # ---- transport -----------------------------------------------------------------

    async def _route(self) -> _conn.Target:
        await self._wake(force=False)
        if _conn.router_needs_exec(self.client.connection, self.client.config):
            # The router takes the kubeconfig's exec credential: a due one is fetched off
            # the event loop (at once when fresh); the Target reads it per request.
            await self.client.config.exec_credential_async()
        async with self._lock:
            if self._target is None:
                name = await self._need_name()
                if self._needs_object():
                    self._obj = await self.client.kube.get("sandboxes", self.namespace, name)
                return self._new_target(name)
            return self._target

    async def _wake(self, *, force: bool) -> bool:
        """Resume on traffic before a data-plane call (see _base.SandboxBase). Returns
        whether it resumed or waited."""
        if not self._may_wake(force):
            return False
        async with self._wake_lock:
            if not force and not self._needs_read():
                return False
            kube = self.client.kube
            obj = await kube.get("sandboxes", self.namespace, self.name)
            action = self._woken(obj)
            if action == "none":
                return False
            if action == "resume":
                obj = await kube.patch("sandboxes", self.namespace, self.name, _k8s.RESUME_PATCH)
            self._target = None
            w = _k8s.Wait("Sandbox", self.name)
            timeout = self.client.resume_timeout
            self._ready_again(
                await kube.wait("sandboxes", self.namespace, self.name, obj, timeout, w, _k8s.on_sandbox_event)
            )
            return True

    # ---- ports (docs/sdk-python.md "Ports") ----------------------------------------

    async def port_target(self, port: int, path: str = "/") -> _ports.PortURL:
        """The URL of path on port in the sandbox (any server listening there), with the
        headers (and bearer token) a request needs in this client's connection mode."""
        await self._route()
        c = self.client
        # A due exec credential is fetched off the event loop; the sync helpers then read
        # it. Only where the port's token is the kubeconfig's: the router's when its token
        # source is the kubeconfig, the pod proxy's (a direct port takes none).
        if isinstance(c.connection, PodProxyConnection) or _conn.router_needs_exec(c.connection, c.config):
            await c.config.exec_credential_async()
        return _ports.port_target(c.connection, c.config, self.namespace, self.name, self._obj, port, path)

    async def url(self, port: int, path: str = "/") -> str:
        """(await port_target(port, path)).url: send its headers with it."""
        return (await self.port_target(port, path)).url

    async def http_client(self, port: int, *, timeout: float = 30.0) -> httpx.AsyncClient:
        """A new httpx.AsyncClient for port (base_url, authentication and TLS set):
        request paths are relative to the port's root. Close it when done."""
        t = await self.port_target(port)
        return _ports.async_http_client(t, self.client.connection, self.client.config, timeout)

    def _http(self, t: _conn.Target) -> httpx.AsyncClient:
        return self.client.kube.http if t.via_kube else self.client.http

    async def request(
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
            t = await self._route()
            try:
                http = self._http(t)
                req = http.build_request(method, t.base + path, **att.kwargs(t.headers))
                resp = await http.send(req, stream=True)
                if resp.status_code >= 400:
                    await _wire.aread_error(resp)  # at most MAX_ERROR_BODY bytes of it
                elif not stream:
                    await resp.aread()
            except httpx.TransportError as e:
                att.lost(e)
                self._lost()
                if att.may_wake() and att.replay_safe(e=e) and await self._wake(force=True):
                    att.woke = True
                elif att.last:
                    raise _wire.transport_error(e, what, idempotent) from e
                else:
                    await asyncio.sleep(att.backoff)
                continue
            except _wire.PROTOCOL_ERRORS as e:  # a body that broke its framing (h11's, unmapped)
                raise _wire.protocol_error(e, what) from e
            att.answered(resp, t.via_kube)
            if att.renew(t.renew_token(resp)):
                continue
            if att.retry_status(resp):
                self._target = None
                await asyncio.sleep(att.backoff)
            elif (
                att.may_wake_on(resp, t.via_kube)
                and att.replay_safe(resp=resp, via_kube=t.via_kube)
                and await self._wake(force=True)
            ):
                att.woke = True
            else:
                return _wire.check(resp, what, att.ok(resp, ok))
        raise AssertionError("unreachable")

    # ---- processes -----------------------------------------------------------------

    async def run(
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
        resp = await self.request(
            "POST",
            "/v1/processes/run",
            idempotent=False,
            what="run",
            make_content=lambda: _wire.achunked_json(body),
            headers=_wire.JSON_HEADERS,
            timeout=_wire.run_http_timeout(timeout),
        )
        return _wire.parse_result(resp.json())

    async def spawn(
        self,
        command: _wire.Command,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        stdin: str | bytes | None = None,
        pty: bool | tuple[int, int] = False,
        collect: bool = True,
    ) -> AsyncProcess:
        """Starts a command and returns an interactive Process (iterate it for events,
        write() to its stdin, signal(), wait()); ``collect=False``: it keeps none of the
        output (see Sandbox.spawn)."""
        body = _wire.run_body(command, env=env, cwd=cwd, timeout=timeout, stdin=stdin, pty=pty)
        for woke in (False, True):
            t = await self._route()
            http = self._http(t)
            req = http.build_request(**_wire.spawn_request(t.base, t.headers), content=_wire.achunked_json(body))
            try:
                resp = await http.send(req, stream=True)
            except httpx.TransportError as e:
                self._target = None
                if not woke and _wire.never_sent(e) and await self._wake(force=True):
                    continue
                raise _wire.transport_error(e, "spawn", False) from e
            if resp.status_code >= 400:
                await _wire.aread_error(resp)
                if not woke and _wire.not_forwarded(resp, t.via_kube) and await self._wake(force=True):
                    continue
                raise _wire.error(resp, "spawn")
            break
        return await AsyncProcess.start(self, resp, collect)

    async def stream(
        self,
        command: _wire.Command,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        stdin: str | bytes | None = None,
    ) -> AsyncIterator[ProcessEvent]:
        """Runs a command and yields its stdout/stderr events as they come, then the exit
        event. Closing the iterator early kills the process."""
        async with await self.spawn(command, env=env, cwd=cwd, timeout=timeout, stdin=stdin, collect=False) as p:
            async for ev in p:
                yield ev

    async def processes(self) -> list[dict[str, Any]]:
        """The processes sandboxd is running."""
        resp = await self.request("GET", "/v1/processes", idempotent=True, what="list processes")
        return list(resp.json().get("processes") or [])

    async def health(self) -> dict[str, Any]:
        """sandboxd's /v1/health answer."""
        return dict((await self.request("GET", "/v1/health", idempotent=True, what="health")).json())

    # ---- background processes (background.py) --------------------------------------

    async def start_background(
        self,
        command: _wire.Command,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bool | str | bytes = False,
        timeout: float | None = None,
        pty: bool | tuple[int, int] = False,
    ) -> AsyncBackgroundProcess:
        """Starts a command that keeps running when this client goes away (see
        Sandbox.start_background)."""
        body = _bg.start_body(command, env=env, cwd=cwd, stdin=stdin, timeout=timeout, pty=pty)
        return await _bg.astart(self, body)

    async def background_processes(self) -> list[BackgroundProcessInfo]:
        """Every background process sandboxd holds, running and exited."""
        return await _bg.alist_infos(self)

    def background(self, id: int) -> AsyncBackgroundProcess:
        """A handle on background process id (no request is made)."""
        return AsyncBackgroundProcess(self, id)

    async def run_code(
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
        """Runs Python code in a code context (see Sandbox.run_code). A cancelled run_code
        interrupts its code; the next one in that context waits for the context to be
        free again, for _code.CANCEL_GRACE seconds at most."""
        body = _code.execute_body(code, context, timeout)
        return await _code.arun_code(
            self,
            body,
            _code.Collector(on_stdout, on_stderr, on_result, _code.check_max_output(max_output), keep_streams),
        )


class AsyncProcess(_base.ProcessBase):
    """A running process: ``async for`` its events, write()/close_stdin(), signal(),
    kill(), resize(), wait(). As an async context manager, kills it on exit if running.
    Create with AsyncSandbox.spawn()."""

    def __init__(self, sandbox: AsyncSandbox, resp: httpx.Response, collect: bool = True) -> None:
        super().__init__(collect)
        self._sb = sandbox
        self._resp = resp
        self._lines = _wire.ALines(resp.aiter_bytes(), _wire.MAX_PROCESS_LINE, "spawn")
        self._text = _wire.StreamText()
        self._ahead: collections.deque[ProcessEvent] = collections.deque()  # decoded, not yet taken
        self.id = 0
        self.pid = 0

    @classmethod
    async def start(cls, sandbox: AsyncSandbox, resp: httpx.Response, collect: bool = True) -> AsyncProcess:
        p = cls(sandbox, resp, collect)
        try:
            first = await p._next()
        except BaseException:  # a lost stream, a bad event, cancellation: the connection goes back
            p._lines.cancel()
            await asyncio.shield(resp.aclose())
            raise
        if not p._started(first):
            await resp.aclose()
            raise _wire.not_started()
        return p

    async def _next(self) -> ProcessEvent | None:
        if self._ahead:
            return self._ahead.popleft()
        try:
            while (line := await self._lines.next()) is not None:
                ev = _wire.parse_event(line)
                if ev is not None:
                    self._ahead.extend(self._text.process_events(ev))
                    return self._ahead.popleft()
        except httpx.TransportError as e:
            raise _wire.stream_lost(self.id, e) from e
        return None

    def __aiter__(self) -> AsyncProcess:
        return self

    async def __anext__(self) -> ProcessEvent:
        """The next event. A wait for it that is cancelled (``asyncio.wait_for``) loses
        nothing: the next call returns the event it was waiting for."""
        if self._done:
            raise StopAsyncIteration
        ev = await self._next()
        if ev is None:
            if self._done:  # closed meanwhile (close() in another task)
                raise StopAsyncIteration
            await self._finish()
            raise _wire.stream_ended(self.id)
        if self._col.add(ev):
            await self._finish()
        return ev

    async def _finish(self) -> None:
        self._done = True
        self._lines.cancel()
        await self._resp.aclose()

    async def wait(self, timeout: float | None = None) -> ExecResult:
        """Reads the rest of the stream; the result holds all output (including events
        already iterated) unless it was spawned with ``collect=False``. With timeout,
        kills the process when it runs out and raises SandboxTimeoutError."""

        async def drain() -> None:
            async for _ in self:
                pass

        try:
            await asyncio.wait_for(drain(), timeout)
        except asyncio.TimeoutError:
            try:
                await self.close()
            except SandboxError as e:  # the timeout stays the error; the kill's is its cause
                raise SandboxTimeoutError(
                    f"process {self.id} still running after {timeout:g}s; the kill failed: {e}"
                ) from e
            raise SandboxTimeoutError(f"process {self.id} still running after {timeout:g}s; killed") from None
        return self._col.result()

    async def _ctl(self, action: str, **kw: Any) -> None:
        self._ctl_check(await self._sb.request(**self._ctl_args(action), **kw), action)

    async def write(self, data: str | bytes) -> None:
        """Sends data to the process's stdin, in requests of at most 1 MiB (see
        Process.write); ProcessExitedError after the exit."""
        await _wire.awrite_stdin(lambda chunk: self._ctl("stdin", content=chunk), data)

    async def close_stdin(self) -> None:
        await self._ctl("stdin/close")

    async def signal(self, sig: str | int) -> None:
        """Sends a signal ("SIGINT", "TERM", 9 ...) to the process group."""
        await self._ctl("signal", json={"signal": sig})

    async def resize(self, cols: int, rows: int) -> None:
        """Resizes the PTY of a process started with pty=..."""
        await self._ctl("resize", json={"cols": cols, "rows": rows})

    async def kill(self) -> None:
        """SIGKILL to the process group (no error if it already exited)."""
        try:
            await self._sb.request("DELETE", f"/v1/processes/{self.id}", idempotent=True, what="kill")
        except NotFoundError:
            pass

    async def close(self) -> None:
        if not self._done:
            try:
                await self.kill()
            finally:
                await self._finish()

    async def __aenter__(self) -> AsyncProcess:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.shield(self.close())


Content = bytes | str | IO[bytes] | Iterable[bytes] | AsyncIterable[bytes]


class AsyncFiles:
    """sandboxd's files under the sandbox root. Paths are relative to the root (a
    leading / is allowed); ``..`` is refused. A path that ends with "/" names a
    directory, as in the shell: reading or writing a file through one raises ValueError
    (``read("f.txt/")`` does not read f.txt); stat, exists, delete and move find only
    a directory (or a symlink to one) there, else NotFoundError (exists: False)."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._sb = sandbox

    async def read(self, path: str, *, offset: int = 0, max_bytes: int | None = None) -> bytes:
        """A file's bytes, or at most max_bytes of them from offset (b"" past the end)."""
        kw = _fsops.read_args(offset, max_bytes)
        url = _wire.file_content_path(path, "read")
        resp = await self._sb.request("GET", url, idempotent=True, what=f"read {path}", **kw)
        return _fsops.read_content(resp, path)

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return (await self.read(path)).decode(encoding)

    async def iter_read(self, path: str, chunk_size: int = _wire.CHUNK) -> AsyncIterator[bytes]:
        """Streams a file's bytes without holding the whole file in memory (opening it is
        retried as other reads are)."""
        url = _wire.file_content_path(path, "read")
        resp = await self._sb.request("GET", url, idempotent=True, what=f"read {path}", stream=True)
        try:
            _wire.not_a_listing(resp, path)
            async for chunk in resp.aiter_bytes(chunk_size):
                yield chunk
        except httpx.TransportError as e:  # the connection dropped while the body came
            raise _wire.transport_error(e, f"read {path}", True) from e
        finally:
            await resp.aclose()

    async def download(self, path: str, dest: str | os.PathLike[str] | IO[bytes]) -> int:
        """Streams a file to a local path or binary file object. Returns the byte count."""
        if isinstance(dest, (str, os.PathLike)):
            # the local file is replaced only once the whole file has arrived
            with _localfile.replacing(dest) as f:
                return await self.download(path, f)
        n = 0
        async for chunk in self.iter_read(path):
            dest.write(chunk)
            n += len(chunk)
        return n

    async def write(self, path: str, data: Content, *, mode: int | None = None) -> None:
        """Writes bytes, text (UTF-8), a binary file object, or a sync or async iterable of
        chunks (streamed, never buffered whole). The write is atomic on the sandbox side."""
        url = _wire.file_content_path(path, "write")
        kw = _wire.write_options(data, mode)
        if isinstance(data, (bytes, bytearray, memoryview, str)):  # a buffer: sent whole
            content = data.encode() if isinstance(data, str) else bytes(data)
            await self._sb.request("PUT", url, idempotent=True, what=f"write {path}", content=content, **kw)
            return
        body: AsyncIterable[bytes]
        if hasattr(data, "read"):
            body = _aiter_file(data)  # type: ignore[arg-type]
        elif isinstance(data, AsyncIterable):
            body = data
        else:
            body = _aiter_sync(data)
        await self._sb.request("PUT", url, idempotent=False, what=f"write {path}", content=body, **kw)

    async def upload(self, local: str | os.PathLike[str], path: str, *, mode: int | None = None) -> None:
        """Uploads a local file (streamed) or directory (recursively) to path."""
        src = Path(local)
        if src.is_dir():
            await self.upload_dir(src, path)
            return
        with open(src, "rb") as f:
            await self.write(path, f, mode=mode if mode is not None else src.stat().st_mode & 0o777)

    async def upload_dir(self, local: str | os.PathLike[str], path: str) -> int:
        """Uploads every regular file under a local directory. Returns the file count."""
        n = 0
        for p, remote in _wire.upload_files(local, path):
            await self.upload(p, remote)
            n += 1
        return n

    async def download_dir(self, path: str, local: str | os.PathLike[str]) -> int:
        """Downloads a directory tree. Returns the file count."""
        n = 0
        Path(local).mkdir(parents=True, exist_ok=True)
        for e in await self.list(path):
            if e.is_dir:
                n += await self.download_dir(_wire.child(path, e.name), _wire.local_child(local, e.name))
            elif e.type == "file":
                await self.download(_wire.child(path, e.name), _wire.local_child(local, e.name))
                n += 1
        return n

    async def list(self, path: str = "") -> builtins.list[FileEntry]:
        """The directory's entries, sorted by name, page by page (see Files.list)."""
        out, _, _ = await self._list_head(path, None)
        return out

    async def _list_head(self, path: str, keep: int | None) -> tuple[builtins.list[FileEntry], int, bool]:
        """The first keep entries (None: all), how many entries were seen and whether that
        is all of them, page by page. With keep, the listing stops at the page that shows
        more than keep entries (the count is then a lower bound): one page is held and
        read beyond keep, whatever the directory's size. At most
        _wire.MAX_LISTING_ENTRIES entries are read (see Files.list)."""
        out: builtins.list[FileEntry] = []
        pages = _wire.ListingPages(path)
        while True:
            kw = pages.params()
            resp = await self._sb.request("GET", _wire.file_path(path), idempotent=True, what=f"list {path}", **kw)
            page, nxt = _wire.listing_page(resp, path)
            if keep is not None and len(out) + len(page) > keep:
                out.extend(page[: keep - len(out)])
                return out, pages.total + len(page), False
            out.extend(page)
            if not pages.more(len(page), nxt):
                return out, pages.total, True

    async def exists(self, path: str) -> bool:
        """Whether path exists (a stat; see _wire.exists_answer for the 404s that raise)."""
        what = f"exists {path}"
        p, kw = _fsops.stat_request(path, False)
        resp = await self._sb.request("GET", p, idempotent=True, what=what, ok=(404,), **kw)
        return _fsops.exists_answer(resp, path, what)

    async def delete(self, path: str, *, recursive: bool = False, missing_ok: bool = False) -> None:
        """Deletes a file, or a directory (a non-empty one only with ``recursive``). The
        root is named by "/" alone (``delete("/", recursive=True)`` empties it); "", "."
        and other paths that resolve to it raise ValueError without a request."""
        url = _wire.delete_path(path)
        kw = _wire.delete_options(recursive, missing_ok)
        if _fsops.dir_only(path):
            try:
                await self._must_be_dir(path, f"delete {path}")
            except NotFoundError:
                if missing_ok:
                    return
                raise
        await self._sb.request("DELETE", url, idempotent=True, what=f"delete {path}", **kw)

    async def stat(self, path: str, *, follow_symlinks: bool = False) -> FileStat:
        """Describes path; with ``follow_symlinks`` what its links lead to (see
        Files.stat)."""
        p, kw = _fsops.stat_request(path, follow_symlinks)
        resp = await self._sb.request("GET", p, idempotent=True, what=f"stat {path}", **kw)
        return _fsops.stat_answer(resp.json(), path)

    async def mkdir(self, path: str, *, parents: bool = True, mode: int | None = None) -> FileStat:
        """Creates a directory (with its parents when ``parents``; an existing directory
        is then fine). ConflictError when something else is in the way. A conflict after
        an attempt whose answer was lost is success when path is now a directory."""
        kw = _fsops.mkdir_args(parents, mode)
        what = f"mkdir {path}"
        resp = await self._sb.request("POST", _fsops.api_path("/v1/mkdir/", path), idempotent=True, what=what, **kw)
        if resp.status_code == 409:
            return _fsops.made_before(resp, await self._stat_or_none(path), what)
        return _fsops.parse_stat(resp.json())

    async def _must_be_dir(self, path: str, what: str) -> None:
        """NotFoundError unless path is a directory (a symlink to one included): the check
        of a delete or move of a path that ends with "/" (_fsops.dir_only)."""
        p, kw = _fsops.stat_request(path, True)
        resp = await self._sb.request("GET", p, idempotent=True, what=what, **kw)
        if not _fsops.parse_stat(resp.json()).is_dir:
            raise _fsops.not_a_directory(what)

    async def _stat_or_none(self, path: str) -> FileStat | None:
        try:
            return await self.stat(path)
        except SandboxError:
            return None

    async def move(self, src: str, dst: str, *, overwrite: bool = False) -> None:
        """Renames src to dst (both under the root; dst's parent must exist). Without
        ``overwrite`` an existing dst raises ConflictError."""
        kw = _fsops.move_args(src, dst, overwrite)
        if _fsops.move_needs_dir(src, dst):
            await self._must_be_dir(src, f"move {src} to {dst}")
        await self._sb.request("POST", "/v1/move", idempotent=False, what=f"move {src} to {dst}", **kw)

    async def write_many(
        self, files: Mapping[str, bytes | str] | Iterable[_fsops.BatchItem]
    ) -> builtins.list[WriteResult]:
        """Writes several files in one request ({path: data} or (path, data[, mode])
        items), each atomically; one WriteResult per file, in order."""
        kw = _fsops.batch_args(files)
        resp = await self._sb.request("POST", "/v1/files:batch", idempotent=True, what="write_many", **kw)
        return _fsops.parse_batch(resp.json())

    async def watch(self, path: str = "", *, recursive: bool = False, queue: int | None = None) -> AsyncFileWatch:
        """Watches a directory: an AsyncFileWatch (``async for``; ``async with`` closes
        it) of create/modify/delete/move events, in order (see Files.watch)."""
        return await _fsops.open_async_watch(self._sb, path, recursive, queue)


async def _aiter_file(f: IO[bytes]) -> AsyncIterator[bytes]:
    while chunk := await asyncio.to_thread(f.read, _wire.CHUNK):
        yield chunk


async def _aiter_sync(it: Iterable[bytes]) -> AsyncIterator[bytes]:
    for chunk in it:
        yield chunk


def connect(url: str, *, token: str | None = None, name: str = "local", namespace: str = "default") -> AsyncSandbox:
    """A handle on a sandboxd at a known URL (see agent_sandbox_sdk.connect). The handle
    owns the client made here: use it as an async context manager, or await aclose()."""
    client = AsyncSandboxClient(
        config=KubeConfig(server="http://127.0.0.1:9"),
        namespace=namespace,
        connection=DirectConnection(url=url, token=token),
    )
    sb = AsyncSandbox(client, namespace, name, keep=True)
    sb._owns_client = True
    return sb


__all__ = ["AsyncFiles", "AsyncProcess", "AsyncSandbox", "AsyncSandboxClient", "connect"]
