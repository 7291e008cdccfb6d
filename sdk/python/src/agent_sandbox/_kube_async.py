"""A minimal asynchronous Kubernetes API client over httpx (the twin of _kube_sync)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

import httpx

from . import _k8s
from ._kubeconfig import KubeConfig
from .errors import NotFoundError, SandboxConnectionError, SandboxError, SandboxTimeoutError

MERGE_PATCH = "application/merge-patch+json"


class AsyncKubeClient:
    """Borrows nothing: owns its httpx.AsyncClient; close() releases it."""

    def __init__(self, cfg: KubeConfig, timeout: float = 30.0) -> None:
        self.cfg = cfg
        self.http = httpx.AsyncClient(
            base_url=cfg.server,
            verify=cfg.ssl_context(),
            auth=cfg.auth(),
            timeout=httpx.Timeout(timeout, connect=10.0),
            transport=httpx.AsyncHTTPTransport(verify=cfg.ssl_context(), retries=2),
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _call(self, method: str, url: str, what: str, **kw: Any) -> dict[str, Any]:
        try:
            resp = await self.http.request(method, url, **kw)
        except httpx.TransportError as e:
            raise SandboxConnectionError(
                f"{what}: cannot reach the API server {self.cfg.server}: {e!r}; is the cluster up?"
            ) from e
        if resp.status_code >= 400:
            raise _k8s.api_error(resp, what)
        return dict(resp.json())

    async def get(self, resource: str, ns: str, name: str) -> dict[str, Any]:
        return await self._call("GET", _k8s.path(resource, ns, name), f"{_k8s.RESOURCES[resource][1]} {ns}/{name}")

    async def list(self, resource: str, ns: str, label_selector: str | None = None) -> dict[str, Any]:
        params = {"labelSelector": label_selector} if label_selector else {}
        return await self._call("GET", _k8s.path(resource, ns), f"list {resource} in {ns}", params=params)

    async def create(self, resource: str, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body.get("metadata", {}).get("name", "")
        return await self._call(
            "POST", _k8s.path(resource, ns), f"create {_k8s.RESOURCES[resource][1]} {ns}/{name}", json=body
        )

    async def patch(self, resource: str, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self._call(
            "PATCH",
            _k8s.path(resource, ns, name),
            f"patch {_k8s.RESOURCES[resource][1]} {ns}/{name}",
            json=patch,
            headers={"Content-Type": MERGE_PATCH},
        )

    async def delete(self, resource: str, ns: str, name: str) -> bool:
        """Deletes (background propagation). Returns False when it was already gone."""
        try:
            await self._call(
                "DELETE",
                _k8s.path(resource, ns, name),
                f"delete {_k8s.RESOURCES[resource][1]} {ns}/{name}",
                json={"propagationPolicy": "Background"},
            )
        except NotFoundError:
            return False
        return True

    async def watch(
        self, resource: str, ns: str, name: str, rv: str, timeout: float
    ) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        """Watch events of one object from resourceVersion rv, for at most timeout."""
        params = {
            "watch": "1",
            "fieldSelector": f"metadata.name={name}",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(max(1, int(timeout) + 1)),
        }
        if rv:
            params["resourceVersion"] = rv
        req = self.http.build_request(
            "GET", _k8s.path(resource, ns), params=params, timeout=httpx.Timeout(timeout + 5, connect=10.0)
        )
        try:
            resp = await self.http.send(req, stream=True)
        except httpx.TransportError as e:
            raise SandboxConnectionError(f"watch {resource} {ns}/{name}: {e!r}") from e
        try:
            if resp.status_code >= 400:
                await resp.aread()
                raise _k8s.api_error(resp, f"watch {resource} {ns}/{name}")
            async for line in resp.aiter_lines():
                ev = _k8s.parse_watch_line(line)
                if ev:
                    yield ev
        except httpx.TimeoutException:
            return
        except httpx.TransportError as e:
            raise SandboxConnectionError(f"watch {resource} {ns}/{name}: {e!r}") from e
        finally:
            await resp.aclose()

    async def wait(
        self,
        resource: str,
        ns: str,
        name: str,
        obj: dict[str, Any] | None,
        timeout: float,
        w: _k8s.Wait,
        step: Callable[[_k8s.Wait, str, dict[str, Any]], None],
    ) -> dict[str, Any]:
        """Waits by watch until step() marks w done. obj is a current copy (from a create or
        a get) to evaluate first and to watch from; None gets it."""
        deadline = time.monotonic() + timeout
        if obj is None:
            obj = await self.get(resource, ns, name)
        step(w, "ADDED", obj)
        if w.done:
            return obj
        rv = str(obj.get("metadata", {}).get("resourceVersion", ""))
        while (left := deadline - time.monotonic()) > 0:
            got = 0
            async with contextlib.aclosing(self.watch(resource, ns, name, rv, left)) as events:
                async for etype, o in events:
                    got += 1
                    if etype == "ERROR":
                        if o.get("code") == 410:
                            rv = ""
                            break
                        raise SandboxError(f"watch {resource} {ns}/{name}: {o.get('message')}")
                    rv = str(o.get("metadata", {}).get("resourceVersion", rv))
                    if etype == "BOOKMARK":
                        continue
                    step(w, etype, o)
                    obj = o
                    if w.done:
                        return obj
                    if time.monotonic() >= deadline:
                        break
            if not got:
                await asyncio.sleep(
                    min(0.1, max(0.0, deadline - time.monotonic()))
                )  # a watch that ends at once: do not spin
        raise SandboxTimeoutError(
            f"{w.kind} {ns}/{name} not ready after {timeout:g}s ({w.describe()})",
            reason=w.reason,
            detail=w.message,
        )
