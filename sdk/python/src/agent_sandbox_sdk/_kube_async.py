"""A minimal asynchronous Kubernetes API client over httpx (the twin of _kube_sync)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Any

import httpx

from . import _k8s
from ._kubeconfig import KubeConfig
from .errors import NotFoundError


class AsyncKubeClient:
    """Borrows nothing: owns its httpx.AsyncClient; close() releases it."""

    def __init__(self, cfg: KubeConfig, timeout: float = 30.0) -> None:
        self.cfg = cfg
        self.http = httpx.AsyncClient(
            **_k8s.client_options(cfg, timeout),
            transport=httpx.AsyncHTTPTransport(verify=cfg.ssl_context(), retries=2),
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _call(self, c: _k8s.ApiCall) -> dict[str, Any]:
        with _k8s.reaching(c.what, self.cfg.server):
            resp = await self.http.request(c.method, c.url, **c.kw)
        return _k8s.api_result(resp, c.what)

    async def get(self, resource: str, ns: str, name: str) -> dict[str, Any]:
        return await self._call(_k8s.get_call(resource, ns, name))

    async def list(self, resource: str, ns: str, label_selector: str | None = None) -> dict[str, Any]:
        return await self._call(_k8s.list_call(resource, ns, label_selector))

    async def create(self, resource: str, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call(_k8s.create_call(resource, ns, body))

    async def patch(self, resource: str, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self._call(_k8s.patch_call(resource, ns, name, patch))

    async def delete(self, resource: str, ns: str, name: str) -> bool:
        """Deletes (background propagation). Returns False when it was already gone."""
        try:
            await self._call(_k8s.delete_call(resource, ns, name))
        except NotFoundError:
            return False
        return True

    async def watch(
        self, resource: str, ns: str, name: str, rv: str, timeout: float
    ) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        """Watch events of one object from resourceVersion rv, for at most timeout."""
        c = _k8s.watch_call(resource, ns, name, rv, timeout)
        with _k8s.watching(c.what, streaming=False):
            resp = await self.http.send(self.http.build_request(c.method, c.url, **c.kw), stream=True)
        try:
            with _k8s.watching(c.what, streaming=True):
                if resp.status_code >= 400:
                    await resp.aread()
                    raise _k8s.api_error(resp, c.what)
                async for line in resp.aiter_lines():
                    if ev := _k8s.parse_watch_line(line):
                        yield ev
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
        step: _k8s.Step,
    ) -> dict[str, Any]:
        """Waits by watch until step() marks w done. obj is a current copy (from a create or
        a get) to evaluate first and to watch from; None gets it."""
        loop = _k8s.WaitLoop(resource, ns, name, timeout, w, step)
        if loop.first(obj if obj is not None else await self.get(resource, ns, name)):
            return loop.obj
        while (left := loop.left()) > 0:
            async with contextlib.aclosing(self.watch(resource, ns, name, loop.start(), left)) as events:
                async for etype, o in events:
                    if loop.event(etype, o):
                        break
            if w.done:
                return loop.obj
            if (pause := loop.pause()) is not None:
                await asyncio.sleep(pause)
        raise loop.timeout_error()
