"""A minimal synchronous Kubernetes API client: lean http.client connections (_fasthttp)
for its single-object calls and watches, httpx for LISTs and as the fallback (only the
calls the SDK needs; requests, errors and watch decisions are _k8s's)."""

from __future__ import annotations

import contextlib
import heapq
import http.client
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any, Protocol

import httpx

from . import _fasthttp, _k8s, _proxy
from ._kubeconfig import CertRenewal, KubeConfig
from .errors import AuthError, NotFoundError, RequestError, SandboxConnectionError, SandboxError


class WatchResp(Protocol):
    """A watch's open answer: its lines; shutdown() (from any thread) wakes a read
    blocked on its socket (closing does not) and ends the lines; close() releases it."""

    def iter_lines(self) -> Iterator[str]: ...

    def shutdown(self) -> None: ...

    def close(self) -> None: ...


class _HttpxWatch:
    """An httpx streaming answer as a WatchResp."""

    def __init__(self, resp: httpx.Response, what: str) -> None:
        self.resp, self.what = resp, what

    def iter_lines(self) -> Iterator[str]:
        lines = _k8s.WatchLines(self.what)
        with _k8s.watching(self.what, streaming=True):
            for part in self.resp.iter_bytes():
                yield from lines.take(part)
            yield from lines.rest()

    def shutdown(self) -> None:
        stream = self.resp.extensions.get("network_stream")
        _fasthttp.shut_socket(stream.get_extra_info("socket") if stream is not None else None)

    def close(self) -> None:
        self.resp.close()


class _LeanWatch:
    """A _fasthttp.LineResponse as a WatchResp: failures map to SandboxConnectionError."""

    def __init__(self, resp: _fasthttp.LineResponse, what: str) -> None:
        self.resp, self.what = resp, what

    def iter_lines(self) -> Iterator[str]:
        try:
            yield from self.resp.iter_lines()
        except (OSError, http.client.HTTPException) as e:
            raise SandboxConnectionError(f"{self.what}: {e!r}") from e

    def shutdown(self) -> None:
        self.resp.shutdown()

    def close(self) -> None:
        self.resp.close()


class WatchStop:
    """Ends, from another thread, the watch a wait runs: its socket is shut down (closing
    the response does not wake a blocked read), and a wait that waits for another thread
    (a follower on the hand-out stream) is woken by the callback it set. Once stopped it
    stays stopped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._resp: WatchResp | None = None
        self._wake: Callable[[], None] | None = None
        self.stopped = False

    def attach(self, resp: WatchResp) -> bool:
        """Registers the watch's response; False when the wait was stopped already."""
        with self._lock:
            self._resp = None if self.stopped else resp
            return not self.stopped

    def detach(self) -> None:
        with self._lock:
            self._resp = None

    def on_stop(self, wake: Callable[[], None] | None) -> bool:
        """Sets what stop() calls (without this lock held), or clears it with None; False
        when the wait was stopped already."""
        with self._lock:
            self._wake = None if self.stopped else wake
            return not self.stopped

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            resp, self._resp = self._resp, None
            wake, self._wake = self._wake, None
        if wake is not None:
            wake()
        if resp is not None:
            resp.shutdown()


class LaterJob:
    """A function Later starts on a thread of its own at its due time, unless cancelled
    first; or that its owner starts at once."""

    def __init__(self, fn: Callable[[], None], due: float) -> None:
        self.fn, self.due = fn, due
        self._lock = threading.Lock()
        self._state = "waiting"  # "started", "cancelled"
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Starts it now unless it started or was cancelled."""
        with self._lock:
            if self._state != "waiting":
                return
            self._state = "started"
            self._thread = threading.Thread(target=self.fn, name="agent-sandbox-claim-wait", daemon=True)
            self._thread.start()

    def cancel(self) -> bool:
        """Cancels it unless it started; True when it had started (join() then waits)."""
        with self._lock:
            if self._state == "waiting":
                self._state = "cancelled"
            return self._state == "started"

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()


LATER_IDLE = 30.0
"""Seconds a client's timer thread waits without a job before it ends (the next job starts
it again): a client that is never closed keeps no thread."""


class Later:
    """A client's timer: starts LaterJobs at their due time, from one thread that lives
    while jobs come (LATER_IDLE) or until close(). Cancelling a job that has not started
    takes a lock and no thread switch; a job that is due when the timer sees it starts a
    thread of its own."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._jobs: list[tuple[float, int, LaterJob]] = []  # a heap by due time
        self._seq = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    def schedule(self, fn: Callable[[], None], delay: float) -> LaterJob:
        """A job that starts fn after delay seconds (at once when delay <= 0)."""
        job = LaterJob(fn, time.monotonic() + delay)
        if delay <= 0:
            job.start()
            return job
        with self._cond:
            if self._closed:
                raise SandboxError("the client is closed")
            self._seq += 1
            heapq.heappush(self._jobs, (job.due, self._seq, job))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="agent-sandbox-timer", daemon=True)
                self._thread.start()
            elif self._jobs[0][2] is job:
                self._cond.notify()  # it waits for a later job, or for none
        return job

    def _next(self) -> LaterJob | None:
        """The next job due (waits for it); None once closed, or after LATER_IDLE without
        a job (the thread then ends: schedule() starts another)."""
        with self._cond:
            while not self._closed:
                if not self._jobs:
                    if not self._cond.wait(LATER_IDLE) and not self._jobs:
                        self._thread = None
                        return None
                    continue
                left = self._jobs[0][0] - time.monotonic()
                if left <= 0:
                    return heapq.heappop(self._jobs)[2]
                self._cond.wait(left)
            return None

    def _run(self) -> None:
        while (job := self._next()) is not None:
            job.start()  # no-op when cancelled

    def close(self) -> None:
        """Stops the timer; jobs not started by then never start."""
        with self._cond:
            self._closed = True
            self._jobs.clear()
            self._cond.notify()
            t, self._thread = self._thread, None
        if t is not None:
            t.join()


class HandoutWaiter:
    """One thread's hand-out wait on a shared stream: its claim's UID and
    resourceVersion, and what the stream hands it. Its fields are guarded by the stream's
    lock. It sleeps on a condition of that lock of its own, made when it first sleeps
    (a wait that reads the stream at once, the warm path, makes none)."""

    def __init__(self, uid: str, rv: str, lock: threading.Lock) -> None:
        self.uid, self.rv = uid, rv
        self._lock = lock
        self._wake: threading.Condition | None = None
        self.obj: dict[str, Any] | None = None  # its claim's Sandbox, handed out
        self.error: SandboxError | None = None  # the stream was refused, or the client closed

    def sleep(self, timeout: float) -> None:
        """Sleeps until notify() or timeout (caller holds the stream's lock)."""
        if self._wake is None:
            self._wake = threading.Condition(self._lock)
        self._wake.wait(timeout)

    def notify(self) -> None:
        """Wakes it if it sleeps (caller holds the stream's lock: a waiter checks what it
        waits for under that lock before it sleeps, so no wake-up is lost)."""
        if self._wake is not None:
            self._wake.notify()


class HandoutStream(_k8s.HandoutStream):
    """A client's hand-out stream in one namespace (_k8s.HandoutStream), shared by the
    client's waiting threads without a thread of its own: the leader, one waiting thread
    at a time, reads it and hands each bound Sandbox to the waiters of its claim; the
    others (followers) sleep (HandoutWaiter.sleep). A waiter that finds no leader leads.

    lock guards waiters, recent, leader, closing and the waiters' fields. The leader owns
    resp, lines and the _k8s.HandoutStream fields (resourceVersion, read and open times)
    while it leads: only it writes them (resp and lines under lock) and closes resp;
    other threads read them under lock, and close() closes resp only while no waiter
    leads. No WatchStop lock is held while lock is taken (stop() wakes after releasing it)."""

    def __init__(self, ns: str) -> None:
        super().__init__(ns)
        self.lock = threading.Lock()
        self.waiters: dict[str, list[HandoutWaiter]] = {}  # by claim UID: a claim may be waited for twice
        self.recent = _k8s.HandoutRecent()  # each claim's newest line, for a wait yet to come
        self.leader: HandoutWaiter | None = None
        self.closing = False
        self.resp: WatchResp | None = None
        self.lines: Iterator[str] | None = None

    def join(self, me: HandoutWaiter) -> None:
        """Registers a wait (caller holds lock); raises once the client is closed."""
        if self.closing:
            raise SandboxError(f"the hand-out stream of {self.ns} is closed")
        self.waiters.setdefault(me.uid, []).append(me)

    def leave(self, me: HandoutWaiter) -> None:
        """Removes a wait (caller holds lock; a waiter handed out is gone already). When
        no waiter leads then, one of those left is woken to take the lead."""
        mine = self.waiters.get(me.uid, [])
        if me in mine:
            mine.remove(me)
            if not mine:
                del self.waiters[me.uid]
        if self.leader is me:
            self.leader = None
        if self.leader is None and self.waiters:
            next(iter(self.waiters.values()))[0].notify()

    def await_turn(self, me: HandoutWaiter, stop: WatchStop, deadline: float) -> None:
        """Sleeps (caller holds lock) until me is handed out or failed, stop() or the
        deadline ends its wait, or it takes the lead because no waiter has it."""
        while me.obj is None and me.error is None and not stop.stopped:
            if self.leader is None:
                self.leader = me
                return
            left = deadline - time.monotonic()
            if left <= 0:
                return
            me.sleep(left)

    def notify(self, me: HandoutWaiter) -> None:
        """Wakes me (any thread; takes lock): stop() of its wait."""
        with self.lock:
            me.notify()

    def oldest_rv(self) -> str:
        """The resourceVersion of the oldest claim waited for (caller holds lock)."""
        return _k8s.oldest_rv(w.rv for ws in self.waiters.values() for w in ws)

    def take(self, line: str, now: float) -> bool:
        """One line the leader read (takes lock): False for an ERROR (after a 410 Gone the
        stream goes on from the current state). A claim's line is kept (recent) and, once
        it shows the claim's Sandbox handed out, handed to the claim's waiters."""
        if _k8s.is_error_line(line):
            if _k8s.is_gone_line(line):
                self.rv = ""
            return False
        self.read = now
        self.rv = _k8s.line_resource_version(line) or self.rv
        uid = _k8s.handout_line_uid(line)
        if not uid:
            return True  # a bookmark
        with self.lock:
            self.recent.keep(uid, line, now)
            waited = uid in self.waiters
        if waited and (ev := _k8s.parse_watch_line(line)):
            etype, obj = ev
            if etype in ("ADDED", "MODIFIED") and _k8s.handed_out(obj, uid):
                with self.lock:
                    for w in self.waiters.pop(uid, []):
                        w.obj = obj
                        w.notify()
        return True

    def fail(self, e: SandboxError) -> None:
        """Ends every wait with e (caller holds lock): their claims decide."""
        for ws in self.waiters.values():
            for w in ws:
                w.error = e
                w.notify()
        self.waiters.clear()

    def shut(self) -> None:
        """Closes the response (takes lock), by the leader or while no waiter leads."""
        with self.lock:
            resp, self.resp, self.lines = self.resp, None, None
            self.closed()
        if resp is not None:
            resp.close()

    def close(self) -> None:
        """Ends the stream for good (any thread; takes lock): every wait fails, and its
        response is closed, by the leader when one reads it (woken by its socket's
        shutdown)."""
        with self.lock:
            self.closing = True
            self.fail(SandboxError(f"the hand-out stream of {self.ns} was closed"))
            led, resp = self.leader is not None, self.resp
        if led:
            if resp is not None:
                resp.shutdown()
        else:
            self.shut()


class KubeClient:
    """Borrows nothing: owns its httpx.Client and its hand-out streams; close() releases
    them."""

    def __init__(self, cfg: KubeConfig, timeout: float = 30.0) -> None:
        self.cfg = cfg
        self.timeout = timeout
        self.claim_watch_delay = _k8s.CLAIM_WATCH_DELAY
        ctx, gen = cfg.ssl_context_gen()
        self._certs = CertRenewal(cfg, gen)
        self._retired: list[httpx.Client] = []  # made with a client certificate replaced since
        self.http = self._make_http(ctx)
        self._streams: dict[str, HandoutStream] = {}
        self._streams_lock = threading.Lock()
        # The stops of the waits in flight, which stop_waits() ends (close(): a create
        # waiting rolls back on the still-open client); _closing refuses later waits.
        self._stops: set[WatchStop] = set()
        self._stops_lock = threading.Lock()
        self._closing = False
        self._later = Later()
        ua = self.http.headers.get("user-agent", "agent-sandbox-sdk")
        self._fast = _fasthttp.FastPool(cfg, timeout, ua, ctx)

    def _make_http(self, ctx: Any) -> httpx.Client:
        opts = _k8s.client_options(self.cfg, self.timeout, ctx)  # its limits go to the transport
        return httpx.Client(**opts, transport=_proxy.transport(ctx, limits=opts["limits"], proxy=self.cfg.proxy_url))

    def _renew_tls(self) -> None:
        """An exec plugin run gave another client certificate (CertRenewal): requests from
        now on go on connections that present it. The httpx client made with the old one
        is kept while its requests in flight may still need it (the last two go at
        close())."""
        ctx = self._certs.context()
        if ctx is None:
            return
        old, self.http = self.http, self._make_http(ctx)
        self._fast.renew_tls(ctx)
        self._retired.append(old)
        while len(self._retired) > 2:
            self._retired.pop(0).close()

    def stop_waits(self) -> None:
        """Ends the waits in flight, each with SandboxError (the client is closing), and
        refuses later ones; other calls still go (a create's rollback DELETE)."""
        with self._stops_lock:
            self._closing = True
            stops = list(self._stops)
        for stop in stops:
            stop.stop()

    @contextlib.contextmanager
    def _waiting(self, w: _k8s.Wait, *stops: WatchStop) -> Iterator[None]:
        """Registers a wait's stops for stop_waits(); a wait that stop_waits() ended (w
        not done) raises SandboxError, as does one begun after it."""
        what = f"waiting for {w.kind} {w.name}"
        with self._stops_lock:
            if self._closing:
                raise SandboxError(f"{what}: the client is closed")
            self._stops.update(stops)
        try:
            yield
        finally:
            with self._stops_lock:
                self._stops.difference_update(stops)
        if self._closing and not w.done:
            raise SandboxError(f"{what}: the client was closed")

    def close(self) -> None:
        self.stop_waits()
        self._later.close()
        self._fast.close()
        with self._streams_lock:
            streams, self._streams = list(self._streams.values()), {}
        for hs in streams:
            hs.close()
        for old in self._retired:
            old.close()
        self.http.close()

    def _call(self, c: _k8s.ApiCall, mark: _k8s.SendMark | None = None) -> dict[str, Any]:
        """Makes API call c: on a lean pooled connection (_fasthttp: a claim's POST is on
        the warm path, and every call costs the client less CPU there) when one comes
        free in time, else through httpx. mark is set once the request may have left.
        An idempotent call is made again after a lost connection or a transient refusal
        (a 429, 5xx: _k8s.call_retry_delay) within the call's timeout: a DELETE that
        cleans up after a claim must not be lost to one 429."""
        deadline = time.monotonic() + self.timeout  # the call's, every attempt included
        attempt, refreshed = 0, False
        while True:
            gen = self.cfg.exec_generation()
            if self._certs.due():
                self._renew_tls()
            try:
                return self._call_once(c, mark, deadline)
            except AuthError as e:
                # a 401 is refused before anything is done: any call may go once more,
                # with the exec plugin's fresh credential
                if e.status != 401 or refreshed or not self.cfg.invalidate_exec(gen):
                    raise
                refreshed = True
                if self.cfg.exec_config:
                    self.cfg.bearer_token()  # the plugin's new run: its certificate too (due())
                continue
            except SandboxError as e:
                attempt += 1
                delay = _k8s.call_retry_delay(c, e, attempt, deadline - time.monotonic())
                if delay is None:
                    raise
            time.sleep(delay)

    def _call_once(self, c: _k8s.ApiCall, mark: _k8s.SendMark | None, deadline: float) -> dict[str, Any]:
        lean = _k8s.lean_request(c)
        if lean is not None:
            try:
                a = self._fast.try_request(c.method, *lean, on_send=mark, deadline=deadline)
            except (OSError, http.client.HTTPException) as e:
                raise SandboxConnectionError(f"{c.what}: no answer from the API server {self.cfg.server}: {e!r}") from e
            if a is not None:
                return _k8s.fast_result(a.status, a.content_type, a.body, c.what)
        if self.http.is_closed:  # httpx's own error is a RuntimeError
            raise SandboxError(f"{c.what}: the client is closed")
        kw = _k8s.kw_within(c, self.timeout, deadline - time.monotonic(), self.cfg.server)
        if mark is not None:
            mark()  # httpx may send it from here (its wait for a connection counts too: to be safe)
        with _k8s.reaching(c.what, self.cfg.server):
            if not c.one_object:
                resp = self.http.request(c.method, c.url, **kw)
            else:  # read as the lean pool reads it: at most MAX_ANSWER bytes
                resp = self.http.send(self.http.build_request(c.method, c.url, **kw), stream=True)
                _k8s.read_answer(resp, c.what)
        return _k8s.api_result(resp, c.what)

    def get(self, resource: str, ns: str, name: str) -> dict[str, Any]:
        return self._call(_k8s.get_call(resource, ns, name))

    def list(self, resource: str, ns: str, label_selector: str | None = None) -> dict[str, Any]:
        """Every object (page by page: _k8s.LIST_PAGE), as one List."""
        pages = _k8s.ListPages()
        while True:
            try:
                page = self._call(_k8s.list_call(resource, ns, label_selector, pages.cont, pages.limit))
            except SandboxError as e:
                if pages.expired(e):
                    continue
                raise
            if (whole := pages.take(page)) is not None:
                return whole

    def create(self, resource: str, ns: str, body: dict[str, Any], mark: _k8s.SendMark | None = None) -> dict[str, Any]:
        """POSTs body; mark (when given) is set once the POST may have left."""
        return self._call(_k8s.create_call(resource, ns, body), mark)

    def patch(self, resource: str, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self._call(_k8s.patch_call(resource, ns, name, patch))

    def delete(self, resource: str, ns: str, name: str, uid: str = "") -> bool:
        """Deletes (background propagation); with a uid only that object (see
        _k8s.delete_call). Returns False when it was already gone: a 404, or with a uid a
        409, the precondition failed (the name holds another object now)."""
        try:
            self._call(_k8s.delete_call(resource, ns, name, uid))
        except NotFoundError:
            return False
        except RequestError as e:
            if uid and e.status == 409:
                return False
            raise
        return True

    def watch(
        self,
        resource: str,
        ns: str,
        name: str,
        rv: str,
        timeout: float,
        selector: str = "",
        stop: WatchStop | None = None,
    ) -> Generator[tuple[str, dict[str, Any]], None, None]:
        """Watch events of one object (or of those a label selector picks) from
        resourceVersion rv, for at most timeout; a stop() ends it quietly."""
        c = _k8s.watch_call(resource, ns, name, rv, timeout, selector)
        try:
            resp = self._open_watch(c)
        except SandboxError:
            if stop is None or not stop.stopped:
                raise
            return
        try:
            if stop is not None and not stop.attach(resp):
                return
            for line in resp.iter_lines():
                if ev := _k8s.parse_watch_line(line):
                    yield ev
        except SandboxError:
            if stop is None or not stop.stopped:
                raise
        finally:
            if stop is not None:
                stop.detach()
            resp.close()

    def _open_watch(self, c: _k8s.ApiCall) -> WatchResp:
        """Opens watch call c: on a lean connection of its own (_fasthttp.LineResponse)
        when one can be made, else through httpx. Raises the mapped API error of a refused
        watch, SandboxConnectionError when there is no answer; while its lines are read,
        a read timeout ends them quietly and a failed connection raises
        SandboxConnectionError."""
        try:
            lean = self._fast.open_stream(c.target(), c.kw["timeout"].read)
        except (OSError, http.client.HTTPException) as e:
            raise SandboxConnectionError(f"{c.what}: no answer from the API server {self.cfg.server}: {e!r}") from e
        if lean is not None:
            if lean.status_code >= 400:
                try:
                    body = lean.read()
                except (OSError, http.client.HTTPException) as e:
                    raise SandboxConnectionError(f"{c.what}: {e!r}") from e
                finally:
                    lean.close()
                _k8s.fast_result(lean.status_code, lean.content_type, body, c.what)
            return _LeanWatch(lean, c.what)
        if self.http.is_closed:
            raise SandboxError(f"{c.what}: the client is closed")
        with _k8s.watching(c.what, streaming=False):
            resp = self.http.send(self.http.build_request(c.method, c.url, **c.kw), stream=True)
        if resp.status_code >= 400:
            try:
                with _k8s.watching(c.what, streaming=True):
                    _k8s.read_answer(resp, c.what)
                raise _k8s.api_error(resp, c.what)
            finally:
                resp.close()
        return _HttpxWatch(resp, c.what)

    def wait(
        self,
        resource: str,
        ns: str,
        name: str,
        obj: dict[str, Any] | None,
        timeout: float,
        w: _k8s.Wait,
        step: _k8s.Step,
        stop: WatchStop | None = None,
    ) -> dict[str, Any]:
        """Waits by watch until step() marks w done. obj is a current copy (from a create or
        a get) to evaluate first and to watch from; None gets it. A stop() ends the wait
        with w not done; without one, the client's close() ends it with SandboxError."""
        if stop is None:
            own = WatchStop()
            with self._waiting(w, own):
                return self.wait(resource, ns, name, obj, timeout, w, step, own)
        loop = _k8s.WaitLoop(resource, ns, name, timeout, w, step)
        if loop.first(obj if obj is not None else self.get(resource, ns, name)):
            return loop.obj
        return self._watch_loop(loop, "", stop)

    def _watch_loop(self, loop: _k8s.WaitLoop, selector: str, stop: WatchStop | None) -> dict[str, Any]:
        """Watches until loop's wait is done, again after each end, and after a failed
        watch (a lost connection, a transient refusal: WaitLoop.lost) from the
        resourceVersion read up to, after a back-off; raises the timeout error at the
        deadline."""
        while (left := loop.left()) > 0:
            if loop.needs_get() and self._refresh(loop):
                return loop.obj
            events = self.watch(loop.resource, loop.ns, loop.name, loop.start(), left, selector, stop)
            with contextlib.closing(events):
                while True:
                    try:
                        ev = next(events, None)
                    except SandboxError as e:
                        loop.lost(e)  # raises e unless it is watched again
                        break
                    if ev is None or loop.event(*ev):
                        break
            if loop.w.done or (stop is not None and stop.stopped):
                return loop.obj
            if (pause := loop.pause()) is not None:
                time.sleep(pause)
        raise loop.timeout_error()

    def _refresh(self, loop: _k8s.WaitLoop) -> bool:
        """Reads loop's object after a 410 Gone (WaitLoop.needs_get); True when that ends
        the wait. A failed read that is transient is read again after the watch's next
        back-off (the watch from "" runs meanwhile)."""
        try:
            got: dict[str, Any] | None = self.get(loop.resource, loop.ns, loop.name)
        except NotFoundError:
            got = None
        except SandboxError as e:
            loop.lost(e)  # raises e unless transient
            return False
        return loop.refreshed(got)

    def wait_claim(self, ns: str, name: str, claim: dict[str, Any], timeout: float, w: _k8s.Wait) -> dict[str, Any]:
        """Waits until the claim is Ready, or sooner until a Sandbox is handed out to it
        (_k8s.handed_out: one API write sooner). Sets w.sandbox; returns the Sandbox when
        that is what ended the wait, else {}. The claim's own failures end it as before;
        a hand-out watch the server refuses (say, no watch permission on Sandboxes)
        leaves the claim to decide.

        The Sandboxes are watched on the caller's thread: on the namespace's hand-out
        stream, shared with the client's other waiting threads (HandoutStream: the one
        that leads reads it for all), else by a watch of its own. The claim is watched on
        a thread of its own, started by the client's timer (Later) from claim_watch_delay
        on, or at once when the Sandbox watch is refused: a warm hand-out ends the wait on
        the caller's thread alone, without a thread started or waited for. The client's
        close() ends the wait with SandboxError."""
        uid = _k8s.handout_uid(claim)
        _k8s.on_claim_event(w, "ADDED", claim)  # raises when it failed already
        if not uid or w.done:  # (a claim that is Ready already: wait_ready)
            self.wait("sandboxclaims", ns, name, claim, timeout, w, _k8s.on_claim_event)
            return {}
        claim_stop, hand_stop = WatchStop(), WatchStop()
        with self._waiting(w, claim_stop, hand_stop):
            return self._wait_claim(ns, name, claim, timeout, w, uid, claim_stop, hand_stop)

    def _wait_claim(
        self,
        ns: str,
        name: str,
        claim: dict[str, Any],
        timeout: float,
        w: _k8s.Wait,
        uid: str,
        claim_stop: WatchStop,
        hand_stop: WatchStop,
    ) -> dict[str, Any]:
        hw = _k8s.Wait("Sandbox", "")
        failed: list[BaseException] = []

        def claim_wait() -> None:
            if claim_stop.stopped:
                return
            try:
                self.wait("sandboxclaims", ns, name, claim, timeout, w, _k8s.on_claim_event, claim_stop)
            except BaseException as e:  # raised again on the caller's thread
                failed.append(e)
            hand_stop.stop()  # the claim decided (unless the hand-out stopped it)

        job = self._later.schedule(claim_wait, self.claim_watch_delay)
        obj: dict[str, Any] = {}
        try:
            try:
                obj = self._handout_wait(_k8s.handout_loop(ns, claim, uid, timeout, hw), uid, hand_stop)
            except SandboxError:
                pass  # no hand-out watch: the claim decides
            if hw.done:
                claim_stop.stop()
        except BaseException:
            claim_stop.stop()
            raise
        finally:
            if not claim_stop.stopped:
                job.start()  # the claim decides, from now
            if job.cancel():  # it started: wait for the claim's wait to end
                job.join()
        self.claim_watch_delay = _k8s.next_claim_watch_delay(hw.done, w.done, self.claim_watch_delay)
        if hw.done:
            w.sandbox, w.ready, w.done = hw.sandbox, True, True
            return obj
        if failed:
            raise failed[0]
        return {}

    def _stream(self, ns: str) -> HandoutStream:
        with self._streams_lock:
            hs = self._streams.get(ns)
            if hs is None:
                hs = self._streams[ns] = HandoutStream(ns)
            return hs

    def _handout_wait(self, loop: _k8s.WaitLoop, uid: str, stop: WatchStop) -> dict[str, Any]:
        """The hand-out wait of the claim with this UID: on the namespace's shared hand-out
        stream (HandoutStream), which may have seen the binding already (recent), else, or
        when the stream cannot serve it, by a watch of the claim's own Sandboxes: when it
        started after the claim (HandoutStream.covers), or ended while this wait read it."""
        hs = self._stream(loop.ns)
        me = HandoutWaiter(uid, loop.rv, hs.lock)
        with hs.lock:
            line = hs.recent.get(uid, time.monotonic())
            if line and (ev := _k8s.parse_watch_line(line)) and loop.event(*ev) and loop.w.done:
                return loop.obj
            shared = hs.covers(me.rv)
            if shared:
                hs.join(me)
        obj: dict[str, Any] | None = None
        if shared:
            try:
                obj = self._stream_wait(hs, me, loop, stop)
            finally:
                with hs.lock:
                    hs.leave(me)
                stop.on_stop(None)
        return obj if obj is not None else self._watch_loop(loop, _k8s.handout_selector(uid), stop)

    def _stream_wait(
        self, hs: HandoutStream, me: HandoutWaiter, loop: _k8s.WaitLoop, stop: WatchStop
    ) -> dict[str, Any] | None:
        """me's wait on the shared stream, registered: follows (sleeps) until the leader
        hands it its Sandbox, or leads (_stream_lead) when no waiter does. Returns the
        Sandbox; {} when stop() ended the wait (a follower just leaves); None when the
        stream ended while me led (me watches on its own). Raises the stream's refusal
        (the claim decides) or, for a follower, the timeout error at the deadline."""
        if not stop.on_stop(lambda: hs.notify(me)):
            return {}
        with hs.lock:
            hs.await_turn(me, stop, loop.deadline)
            lead = hs.leader is me
        if (got := self._stream_served(me, loop, stop)) is not None:
            return got
        if not lead:
            raise loop.timeout_error()
        return self._stream_lead(hs, me, loop, stop)

    @staticmethod
    def _stream_served(me: HandoutWaiter, loop: _k8s.WaitLoop, stop: WatchStop) -> dict[str, Any] | None:
        """What ended me's wait on the stream, if anything: its Sandbox, or {} after
        stop(); raises the error the stream failed it with; None for neither."""
        if me.obj is not None:
            loop.event("MODIFIED", me.obj)
            return loop.obj
        if me.error is not None:
            raise me.error
        return {} if stop.stopped else None

    def _stream_lead(
        self, hs: HandoutStream, me: HandoutWaiter, loop: _k8s.WaitLoop, stop: WatchStop
    ) -> dict[str, Any] | None:
        """me leads: reads the stream (opened first when not usable) for every waiter
        until me is handed out; the stream stays open for the next leader or claim. A
        stop() of me shuts the stream's socket down: the stream is closed ({}), and the
        next leader reopens it from where it was read up to (no binding missed). A stream
        that ends or fails is closed the same way, and me watches on its own (None), as a
        single wait always did. Raises as _stream_wait, or the timeout error."""
        try:
            lines = self._stream_ready(hs)
        except SandboxError as e:
            return self._stream_refused(hs, e)
        if me.error is None and hs.resp is not None and stop.attach(hs.resp):
            try:
                ended = self._stream_read(hs, lines, me, loop.deadline)
            finally:
                stop.detach()
                hs.read = time.monotonic()  # read up to now: the next leader goes on from here
            if ended or stop.stopped:
                hs.shut()
            if (got := self._stream_served(me, loop, stop)) is not None:
                return got
            if ended:
                return None
            raise loop.timeout_error()
        if me.error is not None:
            hs.shut()  # the client closed while it opened
        return self._stream_served(me, loop, stop) or {}

    @staticmethod
    def _stream_refused(hs: HandoutStream, e: SandboxError) -> None:
        """The leader's new watch of the stream failed: after a 410 Gone it goes on from
        the current state and the leader watches on its own (None); any other refusal
        (say, no watch permission) fails every wait, their claims decide, and is raised."""
        if getattr(e, "status", 0) == 410:
            hs.rv, hs.read = "", time.monotonic()
            return None
        with hs.lock:
            hs.fail(e)
        raise e

    @staticmethod
    def _stream_read(hs: HandoutStream, lines: Iterator[str], me: HandoutWaiter, deadline: float) -> bool:
        """The leader's reading: each line to hs.take until me is handed out or the
        deadline passes (False), or the stream ends, fails or brings an ERROR (True)."""
        try:
            for line in lines:
                now = time.monotonic()
                if not hs.take(line, now):
                    return True
                if me.obj is not None or now >= deadline:
                    return False
        except (httpx.HTTPError, httpx.StreamError, SandboxError, ValueError):
            pass  # a broken stream: as when it ended
        return True

    def _stream_ready(self, hs: HandoutStream) -> Iterator[str]:
        """The stream's lines, for its leader: the open stream when usable, else a new
        watch (the old one closed) from HandoutStream.reopen_from (where it was read up
        to, or the oldest waiting claim's resourceVersion). Raises when it cannot be
        opened."""
        with hs.lock:
            now = time.monotonic()
            if hs.usable(now) and hs.lines is not None:
                return hs.lines
            rv = hs.reopen_from(now, hs.oldest_rv())
        hs.shut()
        self._stream_open(hs, rv)
        return hs.lines if hs.lines is not None else iter(())

    def _stream_open(self, hs: HandoutStream, rv: str) -> None:
        resp = self._open_watch(_k8s.handout_stream_call(hs.ns, rv))
        with hs.lock:
            hs.resp, hs.lines = resp, resp.iter_lines()
            hs.opening(time.monotonic())
