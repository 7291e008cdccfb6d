"""A minimal asynchronous Kubernetes API client over httpx (the twin of _kube_sync)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx

from . import _k8s
from ._kubeconfig import KubeConfig
from .errors import NotFoundError, SandboxError


class AsyncHandoutStream(_k8s.HandoutStream):
    """A client's hand-out stream in one namespace (the twin of _kube_sync.HandoutStream)."""

    def __init__(self, ns: str) -> None:
        super().__init__(ns)
        self.lock = asyncio.Lock()
        self.resp: httpx.Response | None = None
        self.lines: AsyncIterator[str] | None = None

    async def shut(self) -> None:
        resp, self.resp, self.lines = self.resp, None, None
        self.closed()
        if resp is not None:
            await resp.aclose()


class AsyncKubeClient:
    """Borrows nothing: owns its httpx.AsyncClient and its hand-out streams; aclose()
    releases them."""

    def __init__(self, cfg: KubeConfig, timeout: float = 30.0) -> None:
        self.cfg = cfg
        self.claim_watch_delay = _k8s.CLAIM_WATCH_DELAY
        self.http = httpx.AsyncClient(
            **_k8s.client_options(cfg, timeout),
            transport=httpx.AsyncHTTPTransport(verify=cfg.ssl_context(), retries=2),
        )
        self._streams: dict[str, AsyncHandoutStream] = {}

    async def aclose(self) -> None:
        streams, self._streams = list(self._streams.values()), {}
        for hs in streams:
            await hs.shut()
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
        self, resource: str, ns: str, name: str, rv: str, timeout: float, selector: str = ""
    ) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        """Watch events of one object (or of those a label selector picks) from
        resourceVersion rv, for at most timeout."""
        c = _k8s.watch_call(resource, ns, name, rv, timeout, selector)
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
        return await self._watch_loop(loop, "")

    async def _watch_loop(self, loop: _k8s.WaitLoop, selector: str) -> dict[str, Any]:
        while (left := loop.left()) > 0:
            events = self.watch(loop.resource, loop.ns, loop.name, loop.start(), left, selector)
            async with contextlib.aclosing(events) as stream:
                async for etype, o in stream:
                    if loop.event(etype, o):
                        break
            if loop.w.done:
                return loop.obj
            if (pause := loop.pause()) is not None:
                await asyncio.sleep(pause)
        raise loop.timeout_error()

    async def _claim_later(
        self, ns: str, name: str, claim: dict[str, Any], timeout: float, w: _k8s.Wait, hand: asyncio.Future[Any]
    ) -> dict[str, Any]:
        """The claim's wait, from claim_watch_delay on, or at once when the hand-out watch
        ended without a hand-out (refused): a warm hand-out costs one watch."""
        await asyncio.wait({hand}, timeout=self.claim_watch_delay)
        return await self.wait("sandboxclaims", ns, name, claim, timeout, w, _k8s.on_claim_event)

    async def wait_claim(
        self, ns: str, name: str, claim: dict[str, Any], timeout: float, w: _k8s.Wait
    ) -> dict[str, Any]:
        """Waits until the claim is Ready, or sooner until a Sandbox is handed out to it
        (the twin of KubeClient.wait_claim). Sets w.sandbox; returns the Sandbox when that
        is what ended the wait, else {}."""
        uid = _k8s.handout_uid(claim)
        _k8s.on_claim_event(w, "ADDED", claim)  # raises when it failed already
        if not uid or w.done:  # (a claim that is Ready already: wait_ready)
            await self.wait("sandboxclaims", ns, name, claim, timeout, w, _k8s.on_claim_event)
            return {}
        hw = _k8s.Wait("Sandbox", "")
        hand = asyncio.ensure_future(self._handout_wait(_k8s.handout_loop(ns, claim, uid, timeout, hw), uid))
        wait = asyncio.ensure_future(self._claim_later(ns, name, claim, timeout, w, hand))
        try:
            done, _ = await asyncio.wait({hand, wait}, return_when=asyncio.FIRST_COMPLETED)
            if hand in done and hand.exception() is None and hw.done:
                w.sandbox, w.ready, w.done = hw.sandbox, True, True
                return hand.result()
            # the hand-out watch failed (say, no watch permission): the claim decides
            await wait
            return {}
        finally:
            for t in (hand, wait):
                t.cancel()
            await asyncio.gather(hand, wait, return_exceptions=True)
            self.claim_watch_delay = _k8s.next_claim_watch_delay(hw.done, w.done, self.claim_watch_delay)

    async def _handout_wait(self, loop: _k8s.WaitLoop, uid: str) -> dict[str, Any]:
        """The hand-out wait of the claim with this UID: on the namespace's hand-out stream
        when no other wait of this client reads it, else, or when the stream cannot serve
        it, by a watch of the claim's own Sandboxes (KubeClient._handout_wait)."""
        hs = self._streams.setdefault(loop.ns, AsyncHandoutStream(loop.ns))
        if not hs.lock.locked():
            async with hs.lock:
                obj = await self._stream_wait(hs, loop, uid)
            if obj is not None:
                return obj
        return await self._watch_loop(loop, _k8s.handout_selector(uid))

    async def _stream_wait(self, hs: AsyncHandoutStream, loop: _k8s.WaitLoop, uid: str) -> dict[str, Any] | None:
        """Reads the hand-out stream until the claim is handed out: the Sandbox, and the
        stream stays open. None when the stream ended or failed first, and when the wait
        is cancelled (the claim decided): the stream is closed then. Raises when the
        stream cannot be opened."""
        if not hs.usable(time.monotonic()):
            await hs.shut()
            await self._stream_open(hs, loop.start())
        if hs.lines is None:
            return None
        try:
            async for line in hs.lines:
                hs.read = time.monotonic()
                if (ev := _k8s.handout_line(line, uid)) and loop.event(*ev):
                    break
        except (httpx.HTTPError, SandboxError, ValueError):
            pass  # a broken stream, or an ERROR event: as when it ended
        finally:
            if not loop.w.done:  # ended, failed or cancelled mid-read: not reusable
                await hs.shut()
        return loop.obj if loop.w.done else None

    async def _stream_open(self, hs: AsyncHandoutStream, rv: str) -> None:
        c = _k8s.handout_stream_call(hs.ns, rv)
        with _k8s.watching(c.what, streaming=False):
            resp = await self.http.send(self.http.build_request(c.method, c.url, **c.kw), stream=True)
        if resp.status_code >= 400:
            try:
                await resp.aread()
                raise _k8s.api_error(resp, c.what)
            finally:
                await resp.aclose()
        hs.resp, hs.lines = resp, resp.aiter_lines()
        hs.opening(time.monotonic())
