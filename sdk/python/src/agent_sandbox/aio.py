"""The asyncio client: AsyncSandboxClient, AsyncSandbox, AsyncProcess and AsyncFiles
(the same surface as agent_sandbox.client, with coroutines)."""

from __future__ import annotations

import asyncio
import builtins
import os
import stat
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx

from . import _conn, _k8s, _wire
from ._kube_async import AsyncKubeClient
from ._kubeconfig import KubeConfig, load_config
from .errors import NotFoundError, SandboxConnectionError, SandboxError, SandboxTimeoutError
from .models import (
    Connection,
    DirectConnection,
    EnvValue,
    ExecResult,
    FileEntry,
    ProcessEvent,
    SandboxInfo,
)

RETRY_STATUS = (502, 503, 504)
_STALE_AFTER = 1.0  # seconds: an older cached Sandbox object is read again before a call


def _run_http_timeout(timeout: float | None) -> httpx.Timeout:
    """Read timeout of a run: the command's own timeout (or sandboxd's default 300 s) plus a
    margin, so the server's timeout fires first and is reported as timed_out."""
    return httpx.Timeout((timeout if timeout else 300.0) + 30.0, connect=10.0)


class AsyncSandboxClient:
    """Creates, finds and deletes sandboxes.

    ``kubeconfig``/``context`` pick the API server (default: in-cluster, else $KUBECONFIG
    or ~/.kube/config); ``namespace`` defaults to the kubeconfig context's; ``connection``
    is a config from :mod:`agent_sandbox.models` or "auto", "router", "direct", "proxy".
    Use as an async context manager, or await aclose()."""

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
    ) -> None:
        self.config = config or load_config(kubeconfig, context)
        self.namespace = namespace or self.config.namespace
        self.connection = _conn.resolve(connection)
        self.resume_timeout = resume_timeout
        self.kube = AsyncKubeClient(self.config, timeout)
        verify: Any = getattr(self.connection, "verify", True)
        self.http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=10.0),
            transport=httpx.AsyncHTTPTransport(verify=verify, retries=2),
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
            follow_redirects=False,
        )

    async def aclose(self) -> None:
        """Closes the HTTP connections (sandboxes keep running)."""
        await self.http.aclose()
        await self.kube.aclose()

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
        itself when used as a context manager unless ``keep`` is true."""
        ns = namespace or self.namespace
        if sum(x is not None for x in (pool, template, pod_spec)) != 1:
            raise ValueError("give exactly one of pool, template or pod_spec")
        shutdown = _k8s.shutdown_at(ttl, shutdown_time)
        common: dict[str, Any] = dict(
            labels=dict(labels or {}),
            annotations=dict(annotations or {}),
            env=dict(env or {}),
            pod_labels=dict(pod_labels or {}),
            pod_annotations=dict(pod_annotations or {}),
            shutdown=shutdown,
        )
        if pool is not None:
            if not pool:
                raise ValueError("pool is empty")
            body = _k8s.claim_body(name or _k8s.random_name("sandbox-claim"), pool, **common)
            created = await self.kube.create("sandboxclaims", ns, body)
            sb = AsyncSandbox(self, ns, "", claim=body["metadata"]["name"], keep=keep)
        else:
            tmpl = None
            if template is not None:
                tmpl = await self._get_template(ns, template)
            body = _k8s.sandbox_body(name or _k8s.random_name("sandbox"), dict(pod_spec or {}), template=tmpl, **common)
            created = await self.kube.create("sandboxes", ns, body)
            sb = AsyncSandbox(self, ns, body["metadata"]["name"], keep=keep)
        if wait:
            try:
                await sb._wait_created(created, timeout)
            except BaseException:
                await asyncio.shield(sb._delete_quietly())
                raise
        return sb

    async def _get_template(self, ns: str, name: str) -> dict[str, Any]:
        try:
            return await self.kube.get("sandboxtemplates", ns, name)
        except NotFoundError:
            raise NotFoundError(
                f"SandboxTemplate {ns}/{name} not found; list them with kubectl get sandboxtemplates -n {ns}",
                kind="SandboxTemplate",
                name=name,
            ) from None

    # ---- find ----------------------------------------------------------------------

    async def get(self, name: str, *, namespace: str | None = None, timeout: float = 30.0) -> AsyncSandbox:
        """Attaches to an existing sandbox by Sandbox name or by SandboxClaim name."""
        ns = namespace or self.namespace
        try:
            obj = await self.kube.get("sandboxes", ns, name)
            return AsyncSandbox(self, ns, name, claim=_owner_claim(obj), keep=True, obj=obj)
        except NotFoundError:
            pass
        try:
            claim = await self.kube.get("sandboxclaims", ns, name)
        except NotFoundError:
            raise NotFoundError(
                f"no Sandbox or SandboxClaim named {name} in namespace {ns}", kind="Sandbox", name=name
            ) from None
        w = _k8s.Wait("SandboxClaim", name)
        await self.kube.wait(
            "sandboxclaims", ns, name, claim, timeout, w, lambda w, t, o: _k8s.on_claim_event(w, t, o, False)
        )
        return AsyncSandbox(self, ns, w.sandbox, claim=name, keep=True)

    async def list(
        self, *, namespace: str | None = None, label_selector: str | None = None
    ) -> builtins.list[SandboxInfo]:
        """Sandboxes in the namespace (optionally filtered by a label selector)."""
        ns = namespace or self.namespace
        items = (await self.kube.list("sandboxes", ns, label_selector)).get("items") or []
        return [_k8s.sandbox_info(o, _owner_claim(o)) for o in items]

    async def list_claims(
        self, *, namespace: str | None = None, label_selector: str | None = None
    ) -> builtins.list[str]:
        """Names of the SandboxClaims in the namespace."""
        ns = namespace or self.namespace
        items = (await self.kube.list("sandboxclaims", ns, label_selector)).get("items") or []
        return [str(o["metadata"]["name"]) for o in items]

    async def delete(self, name: str, *, namespace: str | None = None) -> bool:
        """Deletes the SandboxClaim or Sandbox called name. False if neither exists."""
        ns = namespace or self.namespace
        if await self.kube.delete("sandboxclaims", ns, name):
            return True
        return await self.kube.delete("sandboxes", ns, name)


def _owner_claim(obj: Mapping[str, Any]) -> str:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "SandboxClaim":
            return str(ref.get("name", ""))
    return ""


class AsyncSandbox:
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
        self.client = client
        self.namespace = namespace
        self.name = name
        self.claim = claim
        self.keep = keep
        self.files = AsyncFiles(self)
        self._obj = obj
        self._target: _conn.Target | None = None
        self._read_at = 0.0  # time.monotonic() of the last read of _obj (resume on traffic)
        self._wake_lock = asyncio.Lock()
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"Sandbox({self.namespace}/{self.name or '?'}, claim={self.claim or None})"

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self.keep:
            await asyncio.shield(self._delete_quietly())

    # ---- lifecycle -----------------------------------------------------------------

    async def _wait_created(self, created: dict[str, Any], timeout: float) -> None:
        start = time.monotonic()
        if self.claim:
            w = _k8s.Wait("SandboxClaim", self.claim)
            await self.client.kube.wait(
                "sandboxclaims", self.namespace, self.claim, created, timeout, w, _k8s.on_claim_event
            )
            self.name = w.sandbox
            return
        w = _k8s.Wait("Sandbox", self.name)
        left = max(0.0, timeout - (time.monotonic() - start))
        self._obj = await self.client.kube.wait(
            "sandboxes", self.namespace, self.name, created, left, w, _k8s.on_sandbox_event
        )

    async def wait_ready(self, timeout: float = 180.0) -> None:
        """Waits (by watch) until the sandbox is Ready."""
        if not self.name and self.claim:
            await self._wait_created(await self.client.kube.get("sandboxclaims", self.namespace, self.claim), timeout)
            return
        w = _k8s.Wait("Sandbox", self.name)
        self._obj = await self.client.kube.wait(
            "sandboxes", self.namespace, self.name, None, timeout, w, _k8s.on_sandbox_event
        )
        self._target = None

    async def refresh(self) -> SandboxInfo:
        """Reads the Sandbox and returns its current state."""
        self._obj = await self.client.kube.get("sandboxes", self.namespace, await self._need_name())
        return _k8s.sandbox_info(self._obj, self.claim)

    async def suspend(self, *, wait: bool = True, timeout: float = 120.0) -> None:
        """Deletes the pod but keeps the Sandbox, its volumes and its Service."""
        name = await self._need_name()
        obj = await self.client.kube.patch("sandboxes", self.namespace, name, {"spec": {"operatingMode": "Suspended"}})
        self._target = None
        if wait:
            w = _k8s.Wait("Sandbox", name)
            await self.client.kube.wait(
                "sandboxes",
                self.namespace,
                name,
                obj,
                timeout,
                w,
                lambda w, t, o: _k8s.on_sandbox_event(w, t, o, "Suspended"),
            )

    async def resume(self, *, wait: bool = True, timeout: float = 180.0) -> None:
        """Recreates the pod and (by default) waits until the sandbox is Ready again."""
        name = await self._need_name()
        obj = await self.client.kube.patch("sandboxes", self.namespace, name, {"spec": {"operatingMode": "Running"}})
        self._target = None
        if wait:
            w = _k8s.Wait("Sandbox", name)
            self._obj = await self.client.kube.wait(
                "sandboxes", self.namespace, name, obj, timeout, w, _k8s.on_sandbox_event
            )

    async def delete(self, *, wait: bool = False, timeout: float = 60.0) -> None:
        """Deletes the claim (or the Sandbox when there is no claim). With wait, returns
        once the Sandbox is gone."""
        if self.claim:
            await self.client.kube.delete("sandboxclaims", self.namespace, self.claim)
        if self.name and (not self.claim or wait):
            if not self.claim:
                await self.client.kube.delete("sandboxes", self.namespace, self.name)
            if wait:
                await self._wait_gone(timeout)
        self._target = None

    async def _wait_gone(self, timeout: float) -> None:
        w = _k8s.Wait("Sandbox", self.name)

        def step(w: _k8s.Wait, etype: str, o: dict[str, Any]) -> None:
            w.done = etype == "DELETED"

        try:
            await self.client.kube.wait("sandboxes", self.namespace, self.name, None, timeout, w, step)
        except NotFoundError:
            pass

    async def _delete_quietly(self) -> None:
        try:
            await self.delete()
        except SandboxError:
            pass

    async def _need_name(self) -> str:
        if not self.name:
            await self.wait_ready()
        return self.name

    # ---- transport -----------------------------------------------------------------

    async def _route(self) -> _conn.Target:
        await self._wake(force=False)
        async with self._lock:
            if self._target is None:
                conn = self.client.connection
                name = await self._need_name()
                if _conn.needs_sandbox_object(conn) and (self._obj is None or not self._target_ok()):
                    self._obj = await self.client.kube.get("sandboxes", self.namespace, name)
                self._target = _conn.target(conn, self.client.config, self.namespace, name, self._obj)
            return self._target

    def _auto_resume(self) -> bool:
        """Direct (pod IP) and pod-proxy modes resume a suspended sandbox themselves;
        through the router nothing is needed (it holds requests and resumes)."""
        return _conn.needs_sandbox_object(self.client.connection)

    def _needs_read(self) -> bool:
        return (
            self._obj is None
            or time.monotonic() - self._read_at > _STALE_AFTER
            or _k8s.idle_action(self._obj) != "none"
        )

    async def _wake(self, *, force: bool) -> bool:
        """Before a data-plane call (docs/idle.md): reads the Sandbox when the cached
        object is old (or always with ``force``); a suspended Sandbox whose idle policy
        allows it is resumed (merge patch operatingMode Running, idle annotation cleared)
        and waited for by watch (``resume_timeout`` seconds); one that may not be resumed
        raises SandboxSuspendedError. Returns whether it resumed or waited."""
        if not self._auto_resume() or not self.name or (not force and not self._needs_read()):
            return False
        async with self._wake_lock:
            if not force and not self._needs_read():
                return False
            obj = await self.client.kube.get("sandboxes", self.namespace, self.name)
            self._obj, self._read_at = obj, time.monotonic()
            action = _k8s.idle_action(obj)
            if action == "none":
                return False
            if action == "refuse":
                raise _k8s.suspended_error(self.namespace, self.name, obj)
            if action == "resume":
                obj = await self.client.kube.patch("sandboxes", self.namespace, self.name, _k8s.RESUME_PATCH)
            self._target = None
            w = _k8s.Wait("Sandbox", self.name)
            self._obj = await self.client.kube.wait(
                "sandboxes", self.namespace, self.name, obj, self.client.resume_timeout, w, _k8s.on_sandbox_event
            )
            self._read_at = time.monotonic()
            self._target = None
            return True

    def _target_ok(self) -> bool:
        return bool((self._obj or {}).get("status", {}).get("podIPs"))

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
        **kw: Any,
    ) -> httpx.Response:
        """One request to sandboxd. Idempotent calls are retried on 502/503/504 and
        connection loss; others never are (a run is never executed twice)."""
        attempts = 3 if idempotent else 1
        extra = kw.pop("headers", {})
        # make_content: a factory of a one-shot body (a chunked generator), called per attempt.
        make_content = kw.pop("make_content", None)
        woke = False  # a resume on traffic gives the call one more attempt
        i = -1
        while i + 1 < attempts + woke:
            i += 1
            if make_content is not None:
                kw["content"] = make_content()
            t = await self._route()
            headers = {**t.headers, **extra}
            try:
                resp = await self._http(t).request(method, t.base + path, headers=headers, **kw)
            except httpx.TransportError as e:
                self._target = None
                self._obj = None
                if i + 1 >= attempts and not woke and await self._wake(force=True):
                    woke = True
                    continue
                if i + 1 < attempts:
                    await asyncio.sleep(0.2 * 2**i)
                    continue
                raise _transport_error(e, what, idempotent) from e
            if resp.status_code in RETRY_STATUS and i + 1 < attempts:
                self._target = None
                await asyncio.sleep(0.2 * 2**i)
                continue
            if (
                resp.status_code >= 400
                and not woke
                and _k8s.pod_gone(resp, t.via_kube)
                and await self._wake(force=True)
            ):
                woke = True
                continue
            if resp.status_code >= 400 and resp.status_code not in ok:
                raise _wire.error(resp, what)
            return resp
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
            timeout=_run_http_timeout(timeout),
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
    ) -> AsyncProcess:
        """Starts a command and returns an interactive Process (iterate it for events,
        write() to its stdin, signal(), wait())."""
        body = _wire.run_body(command, env=env, cwd=cwd, timeout=timeout, stdin=stdin, pty=pty)
        for woke in (False, True):
            t = await self._route()
            http = self._http(t)
            req = http.build_request(
                "POST",
                t.base + "/v1/processes",
                content=_wire.achunked_json(body),
                headers={**t.headers, **_wire.JSON_HEADERS},
                timeout=httpx.Timeout(None, connect=10.0),
            )
            try:
                resp = await http.send(req, stream=True)
            except httpx.TransportError as e:
                self._target = None
                if not woke and await self._wake(force=True):
                    continue
                raise _transport_error(e, "spawn", False) from e
            if resp.status_code >= 400:
                await resp.aread()
                await resp.aclose()
                if not woke and _k8s.pod_gone(resp, t.via_kube) and await self._wake(force=True):
                    continue
                raise _wire.error(resp, "spawn")
            break
        return await AsyncProcess.start(self, resp)

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
        async with await self.spawn(command, env=env, cwd=cwd, timeout=timeout, stdin=stdin) as p:
            async for ev in p:
                yield ev

    async def processes(self) -> list[dict[str, Any]]:
        """The processes sandboxd is running."""
        resp = await self.request("GET", "/v1/processes", idempotent=True, what="list processes")
        return list(resp.json().get("processes") or [])

    async def health(self) -> dict[str, Any]:
        """sandboxd's /v1/health answer."""
        return dict((await self.request("GET", "/v1/health", idempotent=True, what="health")).json())


def _transport_error(e: httpx.TransportError, what: str, idempotent: bool) -> SandboxConnectionError:
    if isinstance(e, httpx.ConnectError):
        return SandboxConnectionError(f"{what}: cannot connect to the sandbox: {e!r} (is it Ready? suspended?)")
    note = "" if idempotent else "; the request may have been executed and was not retried"
    return SandboxConnectionError(f"{what}: connection to the sandbox lost: {e!r}{note}")


class AsyncProcess:
    """A running process: ``async for`` its events, write()/close_stdin(), signal(),
    kill(), resize(), wait(). As an async context manager, kills it on exit if running.
    Create with AsyncSandbox.spawn()."""

    def __init__(self, sandbox: AsyncSandbox, resp: httpx.Response) -> None:
        self._sb = sandbox
        self._resp = resp
        self._lines = resp.aiter_lines()
        self._col = _wire.Collector()
        self._done = False
        self.id = 0
        self.pid = 0

    @classmethod
    async def start(cls, sandbox: AsyncSandbox, resp: httpx.Response) -> AsyncProcess:
        p = cls(sandbox, resp)
        first = await p._next()
        if first is None or first.type != "start":
            await resp.aclose()
            raise SandboxConnectionError("spawn: the process stream did not start")
        p.id, p.pid = first.process_id, first.pid
        return p

    async def _next(self) -> ProcessEvent | None:
        try:
            async for line in self._lines:
                ev = _wire.parse_event(line)
                if ev is not None:
                    return ev
        except httpx.TransportError as e:
            raise SandboxConnectionError(f"process {self.id}: stream lost: {e!r}") from e
        return None

    def __aiter__(self) -> AsyncIterator[ProcessEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[ProcessEvent]:
        while not self._done:
            ev = await self._next()
            if ev is None:
                await self._finish()
                raise SandboxConnectionError(f"process {self.id}: stream ended before the exit event")
            self._col.add(ev)
            if ev.type == "exit":
                await self._finish()
            yield ev

    async def _finish(self) -> None:
        self._done = True
        await self._resp.aclose()

    @property
    def exit_code(self) -> int | None:
        """The exit code once the exit event was read, else None."""
        return self._col.exit.exit_code if self._col.exit else None

    async def wait(self, timeout: float | None = None) -> ExecResult:
        """Reads the rest of the stream; the result holds all output (including events
        already iterated). With timeout, kills the process when it runs out and raises
        SandboxTimeoutError."""

        async def drain() -> None:
            async for _ in self:
                pass

        try:
            await asyncio.wait_for(drain(), timeout)
        except asyncio.TimeoutError:
            await self.close()
            raise SandboxTimeoutError(f"process {self.id} still running after {timeout:g}s; killed") from None
        return self._col.result()

    async def _ctl(self, action: str, **kw: Any) -> None:
        await self._sb.request(
            "POST", f"/v1/processes/{self.id}/{action}", idempotent=False, what=f"process {action}", **kw
        )

    async def write(self, data: str | bytes) -> None:
        """Sends data to the process's stdin."""
        await self._ctl("stdin", content=data.encode() if isinstance(data, str) else data)

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
    leading / is allowed); ``..`` is refused."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._sb = sandbox

    async def read(self, path: str) -> bytes:
        resp = await self._sb.request("GET", _wire.file_path(path), idempotent=True, what=f"read {path}")
        return resp.content

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return (await self.read(path)).decode(encoding)

    async def iter_read(self, path: str, chunk_size: int = _wire.CHUNK) -> AsyncIterator[bytes]:
        """Streams a file's bytes without holding the whole file in memory."""
        t = await self._sb._route()
        http = self._sb._http(t)
        req = http.build_request("GET", t.base + _wire.file_path(path), headers=t.headers)
        try:
            resp = await http.send(req, stream=True)
        except httpx.TransportError as e:
            raise _transport_error(e, f"read {path}", True) from e
        try:
            if resp.status_code >= 400:
                await resp.aread()
                raise _wire.error(resp, f"read {path}")
            async for chunk in resp.aiter_bytes(chunk_size):
                yield chunk
        finally:
            await resp.aclose()

    async def download(self, path: str, dest: str | os.PathLike[str] | IO[bytes]) -> int:
        """Streams a file to a local path or binary file object. Returns the byte count."""
        if isinstance(dest, (str, os.PathLike)):
            Path(dest).parent.mkdir(parents=True, exist_ok=True)
            with open(dest, "wb") as f:
                return await self.download(path, f)
        n = 0
        async for chunk in self.iter_read(path):
            dest.write(chunk)
            n += len(chunk)
        return n

    async def write(self, path: str, data: Content, *, mode: int | None = None) -> None:
        """Writes bytes, text (UTF-8), a binary file object, or a sync or async iterable of
        chunks (streamed, never buffered whole). The write is atomic on the sandbox side."""
        params = {"mode": f"0{mode:03o}"} if mode is not None else {}
        kw: dict[str, Any] = {"params": params, "timeout": httpx.Timeout(None, connect=10.0)}
        headers = {"Content-Type": "application/octet-stream"}
        if isinstance(data, str):
            data = data.encode()
        if isinstance(data, bytes):
            await self._sb.request(
                "PUT", _wire.file_path(path), idempotent=True, what=f"write {path}", content=data, headers=headers, **kw
            )
            return
        body: AsyncIterable[bytes]
        if hasattr(data, "read"):
            size = _file_size(data)  # type: ignore[arg-type]
            if size is not None:
                headers["Content-Length"] = str(size)
            body = _aiter_file(data)  # type: ignore[arg-type]
        elif isinstance(data, AsyncIterable):
            body = data
        else:
            body = _aiter_sync(data)
        await self._sb.request(
            "PUT", _wire.file_path(path), idempotent=False, what=f"write {path}", content=body, headers=headers, **kw
        )

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
        root = Path(local)
        for d, _, names in os.walk(root):
            for fn in sorted(names):
                p = Path(d) / fn
                if p.is_file():
                    rel = p.relative_to(root).as_posix()
                    await self.upload(p, f"{path.rstrip('/')}/{rel}" if path.strip("/") else rel)
                    n += 1
        return n

    async def download_dir(self, path: str, local: str | os.PathLike[str]) -> int:
        """Downloads a directory tree. Returns the file count."""
        n = 0
        Path(local).mkdir(parents=True, exist_ok=True)
        for e in await self.list(path):
            sub = f"{path.rstrip('/')}/{e.name}"
            if e.is_dir:
                n += await self.download_dir(sub, Path(local) / e.name)
            elif e.type == "file":
                await self.download(sub, Path(local) / e.name)
                n += 1
        return n

    async def list(self, path: str = "") -> builtins.list[FileEntry]:
        resp = await self._sb.request("GET", _wire.file_path(path), idempotent=True, what=f"list {path}")
        if "json" not in resp.headers.get("content-type", ""):
            raise SandboxError(f"list {path}: not a directory")
        return _wire.parse_listing(resp.json())

    async def exists(self, path: str) -> bool:
        resp = await self._sb.request("HEAD", _wire.file_path(path), idempotent=True, what=f"exists {path}", ok=(404,))
        return resp.status_code < 300

    async def delete(self, path: str, *, recursive: bool = False, missing_ok: bool = False) -> None:
        params = {"recursive": "true"} if recursive else {}
        ok = (404,) if missing_ok else ()
        await self._sb.request(
            "DELETE", _wire.file_path(path), idempotent=True, what=f"delete {path}", params=params, ok=ok
        )


def _file_size(f: IO[bytes]) -> int | None:
    try:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        return st.st_size - f.tell()
    except (OSError, AttributeError, ValueError):
        return None


async def _aiter_file(f: IO[bytes]) -> AsyncIterator[bytes]:
    while chunk := await asyncio.to_thread(f.read, _wire.CHUNK):
        yield chunk


async def _aiter_sync(it: Iterable[bytes]) -> AsyncIterator[bytes]:
    for chunk in it:
        yield chunk


def connect(url: str, *, token: str | None = None, name: str = "local", namespace: str = "default") -> AsyncSandbox:
    """A handle on a sandboxd at a known URL (see agent_sandbox.connect)."""
    client = AsyncSandboxClient(
        config=KubeConfig(server="http://127.0.0.1:9"),
        namespace=namespace,
        connection=DirectConnection(url=url, token=token),
    )
    return AsyncSandbox(client, namespace, name, keep=True)


__all__ = ["AsyncFiles", "AsyncProcess", "AsyncSandbox", "AsyncSandboxClient", "connect"]
