"""The synchronous client: SandboxClient, Sandbox, Process and Files."""

from __future__ import annotations

import builtins
import os
import stat
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx

from . import _conn, _k8s, _wire
from ._kube_sync import KubeClient
from ._kubeconfig import KubeConfig, load_config
from .errors import NotFoundError, SandboxConnectionError, SandboxError
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


class SandboxClient:
    """Creates, finds and deletes sandboxes.

    ``kubeconfig``/``context`` pick the API server (default: in-cluster, else $KUBECONFIG
    or ~/.kube/config); ``namespace`` defaults to the kubeconfig context's; ``connection``
    is a config from :mod:`agent_sandbox.models` or "auto", "router", "direct", "proxy".
    Use as a context manager, or call close()."""

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
        self.kube = KubeClient(self.config, timeout)
        verify: Any = getattr(self.connection, "verify", True)
        self.http = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=10.0),
            transport=httpx.HTTPTransport(verify=verify, retries=2),
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
            follow_redirects=False,
        )

    def close(self) -> None:
        """Closes the HTTP connections (sandboxes keep running)."""
        self.http.close()
        self.kube.close()

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
            created = self.kube.create("sandboxclaims", ns, body)
            sb = Sandbox(self, ns, "", claim=body["metadata"]["name"], keep=keep)
        else:
            tmpl = None
            if template is not None:
                tmpl = self._get_template(ns, template)
            body = _k8s.sandbox_body(name or _k8s.random_name("sandbox"), dict(pod_spec or {}), template=tmpl, **common)
            created = self.kube.create("sandboxes", ns, body)
            sb = Sandbox(self, ns, body["metadata"]["name"], keep=keep)
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
            raise NotFoundError(
                f"SandboxTemplate {ns}/{name} not found; list them with kubectl get sandboxtemplates -n {ns}",
                kind="SandboxTemplate",
                name=name,
            ) from None

    # ---- find ----------------------------------------------------------------------

    def get(self, name: str, *, namespace: str | None = None, timeout: float = 30.0) -> Sandbox:
        """Attaches to an existing sandbox by Sandbox name or by SandboxClaim name."""
        ns = namespace or self.namespace
        try:
            obj = self.kube.get("sandboxes", ns, name)
            return Sandbox(self, ns, name, claim=_owner_claim(obj), keep=True, obj=obj)
        except NotFoundError:
            pass
        try:
            claim = self.kube.get("sandboxclaims", ns, name)
        except NotFoundError:
            raise NotFoundError(
                f"no Sandbox or SandboxClaim named {name} in namespace {ns}", kind="Sandbox", name=name
            ) from None
        w = _k8s.Wait("SandboxClaim", name)
        self.kube.wait(
            "sandboxclaims", ns, name, claim, timeout, w, lambda w, t, o: _k8s.on_claim_event(w, t, o, False)
        )
        return Sandbox(self, ns, w.sandbox, claim=name, keep=True)

    def list(self, *, namespace: str | None = None, label_selector: str | None = None) -> builtins.list[SandboxInfo]:
        """Sandboxes in the namespace (optionally filtered by a label selector)."""
        ns = namespace or self.namespace
        items = self.kube.list("sandboxes", ns, label_selector).get("items") or []
        return [_k8s.sandbox_info(o, _owner_claim(o)) for o in items]

    def list_claims(self, *, namespace: str | None = None, label_selector: str | None = None) -> builtins.list[str]:
        """Names of the SandboxClaims in the namespace."""
        ns = namespace or self.namespace
        items = self.kube.list("sandboxclaims", ns, label_selector).get("items") or []
        return [str(o["metadata"]["name"]) for o in items]

    def delete(self, name: str, *, namespace: str | None = None) -> bool:
        """Deletes the SandboxClaim or Sandbox called name. False if neither exists."""
        ns = namespace or self.namespace
        if self.kube.delete("sandboxclaims", ns, name):
            return True
        return self.kube.delete("sandboxes", ns, name)


def _owner_claim(obj: Mapping[str, Any]) -> str:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "SandboxClaim":
            return str(ref.get("name", ""))
    return ""


class Sandbox:
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
        self.client = client
        self.namespace = namespace
        self.name = name
        self.claim = claim
        self.keep = keep
        self.files = Files(self)
        self._obj = obj
        self._target: _conn.Target | None = None
        self._read_at = 0.0  # time.monotonic() of the last read of _obj (resume on traffic)
        self._wake_lock = threading.Lock()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Sandbox({self.namespace}/{self.name or '?'}, claim={self.claim or None})"

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if not self.keep:
            self._delete_quietly()

    # ---- lifecycle -----------------------------------------------------------------

    def _wait_created(self, created: dict[str, Any], timeout: float) -> None:
        start = time.monotonic()
        if self.claim:
            w = _k8s.Wait("SandboxClaim", self.claim)
            self.client.kube.wait("sandboxclaims", self.namespace, self.claim, created, timeout, w, _k8s.on_claim_event)
            self.name = w.sandbox
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
        obj = self.client.kube.patch("sandboxes", self.namespace, name, {"spec": {"operatingMode": "Suspended"}})
        self._target = None
        if wait:
            w = _k8s.Wait("Sandbox", name)
            self.client.kube.wait(
                "sandboxes",
                self.namespace,
                name,
                obj,
                timeout,
                w,
                lambda w, t, o: _k8s.on_sandbox_event(w, t, o, "Suspended"),
            )

    def resume(self, *, wait: bool = True, timeout: float = 180.0) -> None:
        """Recreates the pod and (by default) waits until the sandbox is Ready again."""
        name = self._need_name()
        obj = self.client.kube.patch("sandboxes", self.namespace, name, {"spec": {"operatingMode": "Running"}})
        self._target = None
        if wait:
            w = _k8s.Wait("Sandbox", name)
            self._obj = self.client.kube.wait("sandboxes", self.namespace, name, obj, timeout, w, _k8s.on_sandbox_event)

    def delete(self, *, wait: bool = False, timeout: float = 60.0) -> None:
        """Deletes the claim (or the Sandbox when there is no claim). With wait, returns
        once the Sandbox is gone."""
        if self.claim:
            self.client.kube.delete("sandboxclaims", self.namespace, self.claim)
        if self.name and (not self.claim or wait):
            if not self.claim:
                self.client.kube.delete("sandboxes", self.namespace, self.name)
            if wait:
                self._wait_gone(timeout)
        self._target = None

    def _wait_gone(self, timeout: float) -> None:
        w = _k8s.Wait("Sandbox", self.name)

        def step(w: _k8s.Wait, etype: str, o: dict[str, Any]) -> None:
            w.done = etype == "DELETED"

        try:
            self.client.kube.wait("sandboxes", self.namespace, self.name, None, timeout, w, step)
        except NotFoundError:
            pass

    def _delete_quietly(self) -> None:
        try:
            self.delete()
        except SandboxError:
            pass

    def _need_name(self) -> str:
        if not self.name:
            self.wait_ready()
        return self.name

    # ---- transport -----------------------------------------------------------------

    def _route(self) -> _conn.Target:
        self._wake(force=False)
        with self._lock:
            if self._target is None:
                conn = self.client.connection
                name = self._need_name()
                if _conn.needs_sandbox_object(conn) and (self._obj is None or not self._target_ok()):
                    self._obj = self.client.kube.get("sandboxes", self.namespace, name)
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

    def _wake(self, *, force: bool) -> bool:
        """Before a data-plane call (docs/idle.md): reads the Sandbox when the cached
        object is old (or always with ``force``); a suspended Sandbox whose idle policy
        allows it is resumed (merge patch operatingMode Running, idle annotation cleared)
        and waited for by watch (``resume_timeout`` seconds); one that may not be resumed
        raises SandboxSuspendedError. Returns whether it resumed or waited."""
        if not self._auto_resume() or not self.name or (not force and not self._needs_read()):
            return False
        with self._wake_lock:
            if not force and not self._needs_read():
                return False
            obj = self.client.kube.get("sandboxes", self.namespace, self.name)
            self._obj, self._read_at = obj, time.monotonic()
            action = _k8s.idle_action(obj)
            if action == "none":
                return False
            if action == "refuse":
                raise _k8s.suspended_error(self.namespace, self.name, obj)
            if action == "resume":
                obj = self.client.kube.patch("sandboxes", self.namespace, self.name, _k8s.RESUME_PATCH)
            self._target = None
            w = _k8s.Wait("Sandbox", self.name)
            self._obj = self.client.kube.wait(
                "sandboxes", self.namespace, self.name, obj, self.client.resume_timeout, w, _k8s.on_sandbox_event
            )
            self._read_at = time.monotonic()
            self._target = None
            return True

    def _target_ok(self) -> bool:
        return bool((self._obj or {}).get("status", {}).get("podIPs"))

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
            t = self._route()
            headers = {**t.headers, **extra}
            try:
                resp = self._http(t).request(method, t.base + path, headers=headers, **kw)
            except httpx.TransportError as e:
                self._target = None
                self._obj = None
                if i + 1 >= attempts and not woke and self._wake(force=True):
                    woke = True
                    continue
                if i + 1 < attempts:
                    time.sleep(0.2 * 2**i)
                    continue
                raise _transport_error(e, what, idempotent) from e
            if resp.status_code in RETRY_STATUS and i + 1 < attempts:
                self._target = None
                time.sleep(0.2 * 2**i)
                continue
            if resp.status_code >= 400 and not woke and _k8s.pod_gone(resp, t.via_kube) and self._wake(force=True):
                woke = True
                continue
            if resp.status_code >= 400 and resp.status_code not in ok:
                raise _wire.error(resp, what)
            return resp
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
            timeout=_run_http_timeout(timeout),
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
    ) -> Process:
        """Starts a command and returns an interactive Process (iterate it for events,
        write() to its stdin, signal(), wait())."""
        body = _wire.run_body(command, env=env, cwd=cwd, timeout=timeout, stdin=stdin, pty=pty)
        for woke in (False, True):
            t = self._route()
            http = self._http(t)
            req = http.build_request(
                "POST",
                t.base + "/v1/processes",
                content=_wire.chunked_json(body),
                headers={**t.headers, **_wire.JSON_HEADERS},
                timeout=httpx.Timeout(None, connect=10.0),
            )
            try:
                resp = http.send(req, stream=True)
            except httpx.TransportError as e:
                self._target = None
                if not woke and self._wake(force=True):
                    continue
                raise _transport_error(e, "spawn", False) from e
            if resp.status_code >= 400:
                resp.read()
                resp.close()
                if not woke and _k8s.pod_gone(resp, t.via_kube) and self._wake(force=True):
                    continue
                raise _wire.error(resp, "spawn")
            break
        return Process(self, resp)

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
        with self.spawn(command, env=env, cwd=cwd, timeout=timeout, stdin=stdin) as p:
            yield from p

    def processes(self) -> list[dict[str, Any]]:
        """The processes sandboxd is running."""
        resp = self.request("GET", "/v1/processes", idempotent=True, what="list processes")
        return list(resp.json().get("processes") or [])

    def health(self) -> dict[str, Any]:
        """sandboxd's /v1/health answer."""
        return dict(self.request("GET", "/v1/health", idempotent=True, what="health").json())


def _transport_error(e: httpx.TransportError, what: str, idempotent: bool) -> SandboxConnectionError:
    if isinstance(e, httpx.ConnectError):
        return SandboxConnectionError(f"{what}: cannot connect to the sandbox: {e!r} (is it Ready? suspended?)")
    note = "" if idempotent else "; the request may have been executed and was not retried"
    return SandboxConnectionError(f"{what}: connection to the sandbox lost: {e!r}{note}")


class Process:
    """A running process: iterate for events, write()/close_stdin(), signal(), kill(),
    resize(), wait(). As a context manager, kills the process on exit if still running."""

    def __init__(self, sandbox: Sandbox, resp: httpx.Response) -> None:
        self._sb = sandbox
        self._resp = resp
        self._lines = resp.iter_lines()
        self._col = _wire.Collector()
        self._done = False
        first = self._next()
        if first is None or first.type != "start":
            resp.close()
            raise SandboxConnectionError("spawn: the process stream did not start")
        self.id = first.process_id
        self.pid = first.pid

    def _next(self) -> ProcessEvent | None:
        try:
            for line in self._lines:
                ev = _wire.parse_event(line)
                if ev is not None:
                    return ev
        except httpx.TransportError as e:
            raise SandboxConnectionError(
                f"process {self.id if hasattr(self, 'id') else '?'}: stream lost: {e!r}"
            ) from e
        return None

    def __iter__(self) -> Iterator[ProcessEvent]:
        while not self._done:
            ev = self._next()
            if ev is None:
                self._finish()
                raise SandboxConnectionError(f"process {self.id}: stream ended before the exit event")
            self._col.add(ev)
            if ev.type == "exit":
                self._finish()
            yield ev

    def _finish(self) -> None:
        self._done = True
        self._resp.close()

    @property
    def exit_code(self) -> int | None:
        """The exit code once the exit event was read, else None."""
        return self._col.exit.exit_code if self._col.exit else None

    def wait(self) -> ExecResult:
        """Reads the rest of the stream; the result holds all output (including events
        already iterated)."""
        for _ in self:
            pass
        return self._col.result()

    def _ctl(self, action: str, **kw: Any) -> None:
        self._sb.request("POST", f"/v1/processes/{self.id}/{action}", idempotent=False, what=f"process {action}", **kw)

    def write(self, data: str | bytes) -> None:
        """Sends data to the process's stdin."""
        self._ctl("stdin", content=data.encode() if isinstance(data, str) else data)

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
            self.kill()
            self._finish()

    def __enter__(self) -> Process:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


Content = bytes | str | IO[bytes] | Iterable[bytes]


class Files:
    """sandboxd's files under the sandbox root. Paths are relative to the root (a
    leading / is allowed); ``..`` is refused."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sb = sandbox

    def read(self, path: str) -> bytes:
        return self._sb.request("GET", _wire.file_path(path), idempotent=True, what=f"read {path}").content

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding)

    def iter_read(self, path: str, chunk_size: int = _wire.CHUNK) -> Iterator[bytes]:
        """Streams a file's bytes without holding the whole file in memory."""
        t = self._sb._route()
        http = self._sb._http(t)
        req = http.build_request("GET", t.base + _wire.file_path(path), headers=t.headers)
        try:
            resp = http.send(req, stream=True)
        except httpx.TransportError as e:
            raise _transport_error(e, f"read {path}", True) from e
        try:
            if resp.status_code >= 400:
                resp.read()
                raise _wire.error(resp, f"read {path}")
            yield from resp.iter_bytes(chunk_size)
        finally:
            resp.close()

    def download(self, path: str, dest: str | os.PathLike[str] | IO[bytes]) -> int:
        """Streams a file to a local path or binary file object. Returns the byte count."""
        n = 0
        if isinstance(dest, (str, os.PathLike)):
            Path(dest).parent.mkdir(parents=True, exist_ok=True)
            with open(dest, "wb") as f:
                return self.download(path, f)
        for chunk in self.iter_read(path):
            dest.write(chunk)
            n += len(chunk)
        return n

    def write(self, path: str, data: Content, *, mode: int | None = None) -> None:
        """Writes bytes, text (UTF-8), a binary file object or an iterable of chunks
        (streamed, never buffered whole). The write is atomic on the sandbox side."""
        params = {"mode": f"0{mode:03o}"} if mode is not None else {}
        kw: dict[str, Any] = {"params": params, "timeout": httpx.Timeout(None, connect=10.0)}
        headers = {"Content-Type": "application/octet-stream"}
        if isinstance(data, str):
            data = data.encode()
        if isinstance(data, bytes):
            self._sb.request(
                "PUT", _wire.file_path(path), idempotent=True, what=f"write {path}", content=data, headers=headers, **kw
            )
            return
        if hasattr(data, "read"):
            size = _file_size(data)  # type: ignore[arg-type]
            if size is not None:
                headers["Content-Length"] = str(size)
            data = _iter_file(data)  # type: ignore[arg-type]
        self._sb.request(
            "PUT", _wire.file_path(path), idempotent=False, what=f"write {path}", content=data, headers=headers, **kw
        )

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
        root = Path(local)
        for d, _, names in os.walk(root):
            for fn in sorted(names):
                p = Path(d) / fn
                if p.is_file():
                    rel = p.relative_to(root).as_posix()
                    self.upload(p, f"{path.rstrip('/')}/{rel}" if path.strip("/") else rel)
                    n += 1
        return n

    def download_dir(self, path: str, local: str | os.PathLike[str]) -> int:
        """Downloads a directory tree. Returns the file count."""
        n = 0
        Path(local).mkdir(parents=True, exist_ok=True)
        for e in self.list(path):
            sub = f"{path.rstrip('/')}/{e.name}"
            if e.is_dir:
                n += self.download_dir(sub, Path(local) / e.name)
            elif e.type == "file":
                self.download(sub, Path(local) / e.name)
                n += 1
        return n

    def list(self, path: str = "") -> builtins.list[FileEntry]:
        resp = self._sb.request("GET", _wire.file_path(path), idempotent=True, what=f"list {path}")
        if "json" not in resp.headers.get("content-type", ""):
            raise SandboxError(f"list {path}: not a directory")
        return _wire.parse_listing(resp.json())

    def exists(self, path: str) -> bool:
        resp = self._sb.request("HEAD", _wire.file_path(path), idempotent=True, what=f"exists {path}", ok=(404,))
        return resp.status_code < 300

    def delete(self, path: str, *, recursive: bool = False, missing_ok: bool = False) -> None:
        params = {"recursive": "true"} if recursive else {}
        ok = (404,) if missing_ok else ()
        self._sb.request("DELETE", _wire.file_path(path), idempotent=True, what=f"delete {path}", params=params, ok=ok)


def _file_size(f: IO[bytes]) -> int | None:
    try:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        return st.st_size - f.tell()
    except (OSError, AttributeError, ValueError):
        return None


def _iter_file(f: IO[bytes]) -> Iterator[bytes]:
    while chunk := f.read(_wire.CHUNK):
        yield chunk


def connect(url: str, *, token: str | None = None, name: str = "local", namespace: str = "default") -> Sandbox:
    """A handle on a sandboxd at a known URL (one you run yourself, or reach through a
    port you forwarded): processes and files work, lifecycle calls do not."""
    client = SandboxClient(
        config=KubeConfig(server="http://127.0.0.1:9"),
        namespace=namespace,
        connection=DirectConnection(url=url, token=token),
    )
    return Sandbox(client, namespace, name, keep=True)


__all__ = ["Files", "Process", "Sandbox", "SandboxClient", "connect"]
