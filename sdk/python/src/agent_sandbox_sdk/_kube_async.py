"""A minimal asynchronous Kubernetes API client (the twin of _kube_sync): lean asyncio
connections (_fasthttp_async) for its single-object calls and watches, httpx for LISTs
and as the fallback."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from typing import Any

import httpx

from . import _fasthttp_async, _k8s, _proxy
from ._kubeconfig import AsyncTLS, KubeConfig
from .errors import AuthError, NotFoundError, RequestError, SandboxConnectionError, SandboxError

HANDOUT_STREAM_ERRORS = 5
"""Hand-out watches in a row ended by an ERROR event after which the stream gives up."""


class AsyncHandoutStream:
    """A client's hand-out stream in one namespace, shared (as the Go SDK's): one watch,
    read by one task, hands each bound Sandbox to the wait of its claim, so claims at once
    cost one watch. A binding seen before its wait registered is kept for a while
    (_k8s.HandoutRecent). The task stops _k8s.HANDOUT_STREAM_IDLE after the last wait."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.waiters: dict[str, list[asyncio.Future[dict[str, Any]]]] = {}  # a claim may be waited for twice
        self.recent = _k8s.HandoutRecent()
        self.task: asyncio.Task[None] | None = None
        self.idle: asyncio.TimerHandle | None = None
        self.opened = 0  # watches opened (for tests)

    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    def take(self, line: str) -> None:
        """One event line: to its claim's wait when it is the hand-out, else kept."""
        uid = _k8s.handout_line_uid(line)
        if not uid:
            return
        futs = self.waiters.get(uid)
        if futs is None:
            self.recent.keep(uid, line, time.monotonic())
            return
        ev = _k8s.parse_watch_line(line)
        if ev and ev[0] in ("ADDED", "MODIFIED") and _k8s.handed_out(ev[1], uid):
            del self.waiters[uid]
            for fut in futs:
                if not fut.done():
                    fut.set_result(ev[1])

    def fail(self, e: BaseException) -> None:
        for futs in self.waiters.values():
            for fut in futs:
                if not fut.done():
                    fut.set_exception(e)
        self.waiters.clear()

    def drop(self, uid: str, fut: asyncio.Future[dict[str, Any]]) -> None:
        """Removes one wait (gone, or handed its result already)."""
        futs = self.waiters.get(uid) or []
        if fut in futs:
            futs.remove(fut)
        if not futs:
            self.waiters.pop(uid, None)


class _AfterTLS(httpx.AsyncBaseTransport):
    """A transport that sends each request once the client's TLS context is ready
    (AsyncTLS.ready: an exec plugin's client certificate loaded)."""

    def __init__(self, tls: AsyncTLS, inner: httpx.AsyncBaseTransport) -> None:
        self.tls = tls
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await self.tls.ready()
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class AsyncKubeClient:
    """Borrows nothing: owns its httpx.AsyncClient and its hand-out streams; aclose()
    releases them.

    Making one runs no exec plugin on the event loop: its TLS context (AsyncTLS) takes a
    plugin's client certificate before the first connection, the plugin run in a worker
    thread; httpx's requests (a transport that waits for it) and the lean connections
    (_call, _watch_lines) wait for that."""

    def __init__(self, cfg: KubeConfig, timeout: float = 30.0) -> None:
        self.cfg = cfg
        self.timeout = timeout
        self.claim_watch_delay = _k8s.CLAIM_WATCH_DELAY
        self._tls = AsyncTLS(cfg)
        self._retired: list[httpx.AsyncClient] = []  # made with a client certificate replaced since
        self.http = self._make_http(self._tls.ctx, self._tls.pending)
        self._streams: dict[str, AsyncHandoutStream] = {}
        ua = self.http.headers.get("user-agent", "agent-sandbox-sdk")
        self._fast = _fasthttp_async.AsyncFastPool(cfg, timeout, ua, self._tls.ctx)

    def _make_http(self, ctx: Any, pending: bool = False) -> httpx.AsyncClient:
        opts = _k8s.client_options(self.cfg, self.timeout, ctx)  # its limits go to the transport
        transport = _proxy.async_transport(ctx, limits=opts["limits"], proxy=self.cfg.proxy_url)
        if pending:
            transport = _AfterTLS(self._tls, transport)
        return httpx.AsyncClient(**opts, transport=transport)

    async def _renew_tls(self) -> None:
        """As the sync client's: another client certificate from the exec plugin."""
        ctx = self._tls.renewed()
        if ctx is None:
            return
        old, self.http = self.http, self._make_http(ctx)
        self._fast.renew_tls(ctx)
        self._retired.append(old)
        while len(self._retired) > 2:
            await self._retired.pop(0).aclose()

    async def aclose(self) -> None:
        streams, self._streams = list(self._streams.values()), {}
        for hs in streams:
            await self._stream_stop(hs)
        await self._fast.aclose()
        for old in self._retired:
            await old.aclose()
        await self.http.aclose()

    async def _call(self, c: _k8s.ApiCall, mark: _k8s.SendMark | None = None) -> dict[str, Any]:
        """Makes API call c: on a lean pooled connection (_fasthttp_async: claims' POSTs
        are on the warm path, often many at once) when one comes free in time, else
        through httpx. mark is set once the request may have left. An idempotent call is
        made again after a lost connection or a transient refusal within the call's
        timeout (_k8s.call_retry_delay), as the sync client's."""
        await self._tls.ready()
        clock = asyncio.get_running_loop().time
        deadline = clock() + self.timeout  # the call's, every attempt included
        attempt, refreshed = 0, False
        while True:
            gen = self.cfg.exec_generation()
            await self._renew_tls()
            try:
                return await self._call_once(c, mark, deadline)
            except AuthError as e:
                # a 401 is refused before anything is done (as the sync client's)
                if e.status != 401 or refreshed or not self.cfg.invalidate_exec(gen):
                    raise
                refreshed = True
                if self.cfg.exec_config:
                    await self.cfg.exec_credential_async()  # its certificate too (_renew_tls)
                continue
            except SandboxError as e:
                attempt += 1
                delay = _k8s.call_retry_delay(c, e, attempt, deadline - clock())
                if delay is None:
                    raise
            await asyncio.sleep(delay)

    async def _call_once(self, c: _k8s.ApiCall, mark: _k8s.SendMark | None, deadline: float) -> dict[str, Any]:
        clock = asyncio.get_running_loop().time
        lean = _k8s.lean_request(c)
        if lean is not None:
            try:
                a = await self._fast.try_request(c.method, *lean, on_send=mark, deadline=deadline)
            except (OSError, asyncio.TimeoutError, _fasthttp_async.ProtocolError) as e:
                raise SandboxConnectionError(f"{c.what}: no answer from the API server {self.cfg.server}: {e!r}") from e
            if a is not None:
                return _k8s.fast_result(a.status, a.content_type, a.body, c.what)
        if self.http.is_closed:  # httpx's own error is a RuntimeError
            raise SandboxError(f"{c.what}: the client is closed")
        kw = _k8s.kw_within(c, self.timeout, deadline - clock(), self.cfg.server)
        if mark is not None:
            mark()  # httpx may send it from here (its wait for a connection counts too: to be safe)
        with _k8s.reaching(c.what, self.cfg.server):
            if not c.one_object:
                resp = await self.http.request(c.method, c.url, **kw)
            else:  # read as the lean pool reads it: at most MAX_ANSWER bytes
                resp = await self.http.send(self.http.build_request(c.method, c.url, **kw), stream=True)
                await _k8s.aread_answer(resp, c.what)
        return _k8s.api_result(resp, c.what)

    async def get(self, resource: str, ns: str, name: str) -> dict[str, Any]:
        return await self._call(_k8s.get_call(resource, ns, name))

    async def list(self, resource: str, ns: str, label_selector: str | None = None) -> dict[str, Any]:
        """Every object (page by page: _k8s.LIST_PAGE), as one List."""
        pages = _k8s.ListPages()
        while True:
            try:
                page = await self._call(_k8s.list_call(resource, ns, label_selector, pages.cont, pages.limit))
            except SandboxError as e:
                if pages.expired(e):
                    continue
                raise
            if (whole := pages.take(page)) is not None:
                return whole

    async def create(
        self, resource: str, ns: str, body: dict[str, Any], mark: _k8s.SendMark | None = None
    ) -> dict[str, Any]:
        """POSTs body; mark (when given) is set once the POST may have left."""
        return await self._call(_k8s.create_call(resource, ns, body), mark)

    async def patch(self, resource: str, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self._call(_k8s.patch_call(resource, ns, name, patch))

    async def delete(self, resource: str, ns: str, name: str, uid: str = "") -> bool:
        """Deletes (background propagation); with a uid only that object (see
        _k8s.delete_call). Returns False when it was already gone: a 404, or with a uid a
        409, the precondition failed (the name holds another object now)."""
        try:
            await self._call(_k8s.delete_call(resource, ns, name, uid))
        except NotFoundError:
            return False
        except RequestError as e:
            if uid and e.status == 409:
                return False
            raise
        return True

    async def watch(
        self, resource: str, ns: str, name: str, rv: str, timeout: float, selector: str = ""
    ) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        """Watch events of one object (or of those a label selector picks) from
        resourceVersion rv, for at most timeout."""
        c = _k8s.watch_call(resource, ns, name, rv, timeout, selector)
        async with self._watch_lines(c) as lines:
            async for line in lines:
                if ev := _k8s.parse_watch_line(line):
                    yield ev

    @contextlib.asynccontextmanager
    async def _watch_lines(self, c: _k8s.ApiCall) -> AsyncGenerator[AsyncGenerator[str, None], None]:
        """The lines of watch call c: on a lean connection of their own
        (_fasthttp_async.LineStream) when one can be made, else through httpx. Raises the
        mapped API error of a refused watch, SandboxConnectionError when there is no
        answer; while the lines are read, a read timeout ends them quietly and a failed
        connection raises SandboxConnectionError."""
        deadline = c.kw["timeout"].read
        await self._tls.ready()
        try:
            ls = await self._fast.open_stream(c.target(), deadline)
        except (OSError, asyncio.TimeoutError, _fasthttp_async.ProtocolError) as e:
            raise SandboxConnectionError(f"{c.what}: {e!r}") from e
        if ls is None:
            async with self._httpx_watch_lines(c) as lines:
                yield lines
            return
        try:
            if ls.status >= 400:
                try:
                    body = await ls.body()
                except (OSError, _fasthttp_async.ProtocolError) as e:
                    raise SandboxConnectionError(f"{c.what}: {e!r}") from e
                _k8s.fast_result(ls.status, ls.content_type, body, c.what)
            yield _lean_lines(ls, c.what)
        finally:
            ls.close()

    @contextlib.asynccontextmanager
    async def _httpx_watch_lines(self, c: _k8s.ApiCall) -> AsyncGenerator[AsyncGenerator[str, None], None]:
        if self.http.is_closed:
            raise SandboxError(f"{c.what}: the client is closed")
        with _k8s.watching(c.what, streaming=False):
            resp = await self.http.send(self.http.build_request(c.method, c.url, **c.kw), stream=True)
        try:
            if resp.status_code >= 400:
                with _k8s.watching(c.what, streaming=True):
                    await _k8s.aread_answer(resp, c.what)
                raise _k8s.api_error(resp, c.what)
            yield _httpx_lines(resp, c.what)
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
        """Watches until loop's wait is done, again after each end, and after a failed
        watch (a lost connection, a transient refusal: WaitLoop.lost) from the
        resourceVersion read up to, after a back-off; raises the timeout error at the
        deadline."""
        while (left := loop.left()) > 0:
            if loop.needs_get() and await self._refresh(loop):
                return loop.obj
            events = self.watch(loop.resource, loop.ns, loop.name, loop.start(), left, selector)
            async with contextlib.aclosing(events) as stream:
                while True:
                    try:
                        ev = await anext(stream, None)
                    except SandboxError as e:
                        loop.lost(e)  # raises e unless it is watched again
                        break
                    if ev is None or loop.event(*ev):
                        break
            if loop.w.done:
                return loop.obj
            if (pause := loop.pause()) is not None:
                await asyncio.sleep(pause)
        raise loop.timeout_error()

    async def _refresh(self, loop: _k8s.WaitLoop) -> bool:
        """Reads loop's object after a 410 Gone, as the sync client's _refresh."""
        try:
            got: dict[str, Any] | None = await self.get(loop.resource, loop.ns, loop.name)
        except NotFoundError:
            got = None
        except SandboxError as e:
            loop.lost(e)  # raises e unless transient
            return False
        return loop.refreshed(got)

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
        """The hand-out wait of the claim with this UID, on the namespace's shared stream
        (AsyncHandoutStream; started from the claim's resourceVersion when it is not
        running). Raises what ended the stream when the server refused it."""
        hs = self._streams.setdefault(loop.ns, AsyncHandoutStream(loop.ns))
        line = hs.recent.take(uid, time.monotonic())
        if line and (ev := _k8s.parse_watch_line(line)) and loop.event(*ev) and loop.w.done:
            return loop.obj
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        hs.waiters.setdefault(uid, []).append(fut)
        if hs.idle is not None:
            hs.idle.cancel()
            hs.idle = None
        if not hs.running():
            hs.task = asyncio.ensure_future(self._stream_run(hs, loop.start()))
        try:
            obj = await asyncio.wait_for(fut, max(0.0, loop.left()))
        except asyncio.TimeoutError:
            raise loop.timeout_error() from None
        finally:
            hs.drop(uid, fut)
            if not hs.waiters and hs.running() and hs.idle is None:
                hs.idle = asyncio.get_running_loop().call_later(
                    _k8s.HANDOUT_STREAM_IDLE, lambda: asyncio.ensure_future(self._stream_stop_idle(hs))
                )
        loop.event("MODIFIED", obj)
        return loop.obj

    async def _stream_stop_idle(self, hs: AsyncHandoutStream) -> None:
        hs.idle = None
        if not hs.waiters:
            await self._stream_stop(hs)

    async def _stream_stop(self, hs: AsyncHandoutStream) -> None:
        if hs.idle is not None:
            hs.idle.cancel()
            hs.idle = None
        task, hs.task = hs.task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        hs.fail(SandboxError(f"the hand-out stream of {hs.ns} was stopped"))

    async def _stream_run(self, hs: AsyncHandoutStream, rv: str) -> None:
        """The stream's task: watches from rv, again after each end (from the last
        resourceVersion; from now after a 410, whose current state holds every binding);
        a refusal by the server fails the waits (their claims decide) and ends it. A watch
        that ends at once, or on an ERROR event, is followed by a back-off; after
        HANDOUT_STREAM_ERRORS watches in a row ended by an ERROR (none of them with an
        event before it), the last one fails the waits as a refusal does."""
        backoff = 0.1
        errors = 0  # watches in a row that ended on an ERROR event without bringing news
        while True:
            got = 0
            error: SandboxError | None = None
            c = _k8s.handout_stream_call(hs.ns, rv)
            try:
                async with self._watch_lines(c) as lines:
                    hs.opened += 1
                    async for line in lines:
                        if _k8s.is_error_line(line):
                            ev = _k8s.parse_watch_line(line)
                            error = _k8s.watch_error(ev[1] if ev else {}, c.what)
                            rv = "" if getattr(error, "status", 0) == 410 else rv
                            break
                        got += 1
                        rv = _k8s.line_resource_version(line) or rv
                        hs.take(line)
            except SandboxConnectionError:
                pass  # the API server is out of reach for now: try again
            except SandboxError as e:
                if getattr(e, "status", 0) != 410:
                    hs.fail(e)
                    hs.task = None
                    return
                rv, error = "", e
            if error is not None:
                errors = 1 if got else errors + 1
                if errors >= HANDOUT_STREAM_ERRORS and getattr(error, "status", 0) != 410:
                    hs.fail(error)
                    hs.task = None
                    return
                if errors > 1 or getattr(error, "status", 0) != 410:  # a first 410 starts over at once
                    await asyncio.sleep(backoff)
                    backoff = min(5.0, backoff * 2)
                continue
            errors = 0
            if got:
                backoff = 0.1
            else:  # a watch that ends at once must not spin
                await asyncio.sleep(backoff)
                backoff = min(5.0, backoff * 2)


async def _lean_lines(ls: _fasthttp_async.LineStream, what: str) -> AsyncGenerator[str, None]:
    try:
        async for line in ls.lines():
            yield line
    except (OSError, _fasthttp_async.ProtocolError) as e:
        raise SandboxConnectionError(f"{what}: {e!r}") from e


async def _httpx_lines(resp: httpx.Response, what: str) -> AsyncGenerator[str, None]:
    lines = _k8s.WatchLines(what)
    with _k8s.watching(what, streaming=True):
        async for part in resp.aiter_bytes():
            for line in lines.take(part):
                yield line
        for line in lines.rest():
            yield line
