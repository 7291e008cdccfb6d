"""A minimal synchronous Kubernetes API client over httpx (only the calls the SDK needs;
requests, errors and watch decisions are _k8s's)."""

from __future__ import annotations

import heapq
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from . import _k8s
from ._kubeconfig import KubeConfig
from .errors import NotFoundError, SandboxError


class WatchStop:
    """Ends, from another thread, the watch a wait runs: its socket is shut down (closing
    the response does not wake a blocked read). Once stopped it stays stopped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._resp: httpx.Response | None = None
        self.stopped = False

    def attach(self, resp: httpx.Response) -> bool:
        """Registers the watch's response; False when the wait was stopped already."""
        with self._lock:
            self._resp = None if self.stopped else resp
            return not self.stopped

    def detach(self) -> None:
        with self._lock:
            self._resp = None

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            resp, self._resp = self._resp, None
        stream = resp.extensions.get("network_stream") if resp is not None else None
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed: the watch is over


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


class HandoutStream(_k8s.HandoutStream):
    """A client's hand-out stream in one namespace (_k8s.HandoutStream): its response and
    line iterator. One waiter at a time holds lock; another waits with a watch of its own."""

    def __init__(self, ns: str) -> None:
        super().__init__(ns)
        self.lock = threading.Lock()
        self.resp: httpx.Response | None = None
        self.lines: Iterator[str] | None = None

    def shut(self) -> None:
        resp, self.resp, self.lines = self.resp, None, None
        self.closed()
        if resp is not None:
            resp.close()


class KubeClient:
    """Borrows nothing: owns its httpx.Client and its hand-out streams; close() releases
    them."""

    def __init__(self, cfg: KubeConfig, timeout: float = 30.0) -> None:
        self.cfg = cfg
        self.claim_watch_delay = _k8s.CLAIM_WATCH_DELAY
        self.http = httpx.Client(
            **_k8s.client_options(cfg, timeout), transport=httpx.HTTPTransport(verify=cfg.ssl_context(), retries=2)
        )
        self._streams: dict[str, HandoutStream] = {}
        self._streams_lock = threading.Lock()
        self._later = Later()

    def close(self) -> None:
        self._later.close()
        with self._streams_lock:
            streams, self._streams = list(self._streams.values()), {}
        for hs in streams:
            hs.shut()
        self.http.close()

    def _call(self, c: _k8s.ApiCall) -> dict[str, Any]:
        with _k8s.reaching(c.what, self.cfg.server):
            resp = self.http.request(c.method, c.url, **c.kw)
        return _k8s.api_result(resp, c.what)

    def get(self, resource: str, ns: str, name: str) -> dict[str, Any]:
        return self._call(_k8s.get_call(resource, ns, name))

    def list(self, resource: str, ns: str, label_selector: str | None = None) -> dict[str, Any]:
        return self._call(_k8s.list_call(resource, ns, label_selector))

    def create(self, resource: str, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call(_k8s.create_call(resource, ns, body))

    def patch(self, resource: str, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self._call(_k8s.patch_call(resource, ns, name, patch))

    def delete(self, resource: str, ns: str, name: str) -> bool:
        """Deletes (background propagation). Returns False when it was already gone."""
        try:
            self._call(_k8s.delete_call(resource, ns, name))
        except NotFoundError:
            return False
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
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Watch events of one object (or of those a label selector picks) from
        resourceVersion rv, for at most timeout; a stop() ends it quietly."""
        c = _k8s.watch_call(resource, ns, name, rv, timeout, selector)
        with _k8s.watching(c.what, streaming=False):
            resp = self.http.send(self.http.build_request(c.method, c.url, **c.kw), stream=True)
        try:
            if stop is not None and not stop.attach(resp):
                return
            with _k8s.watching(c.what, streaming=True):
                if resp.status_code >= 400:
                    resp.read()
                    raise _k8s.api_error(resp, c.what)
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
        with w not done."""
        loop = _k8s.WaitLoop(resource, ns, name, timeout, w, step)
        if loop.first(obj if obj is not None else self.get(resource, ns, name)):
            return loop.obj
        return self._watch_loop(loop, "", stop)

    def _watch_loop(self, loop: _k8s.WaitLoop, selector: str, stop: WatchStop | None) -> dict[str, Any]:
        while (left := loop.left()) > 0:
            for etype, o in self.watch(loop.resource, loop.ns, loop.name, loop.start(), left, selector, stop):
                if loop.event(etype, o):
                    break
            if loop.w.done or (stop is not None and stop.stopped):
                return loop.obj
            if (pause := loop.pause()) is not None:
                time.sleep(pause)
        raise loop.timeout_error()

    def wait_claim(self, ns: str, name: str, claim: dict[str, Any], timeout: float, w: _k8s.Wait) -> dict[str, Any]:
        """Waits until the claim is Ready, or sooner until a Sandbox is handed out to it
        (_k8s.handed_out: one API write sooner). Sets w.sandbox; returns the Sandbox when
        that is what ended the wait, else {}. The claim's own failures end it as before;
        a hand-out watch the server refuses (say, no watch permission on Sandboxes)
        leaves the claim to decide.

        The Sandboxes are watched on the caller's thread; the claim on a thread of its own,
        started by the client's timer (Later) from claim_watch_delay on, or at once when
        the Sandbox watch is refused: a warm hand-out ends the wait on the caller's
        thread alone, without a thread started or waited for."""
        uid = _k8s.handout_uid(claim)
        _k8s.on_claim_event(w, "ADDED", claim)  # raises when it failed already
        if not uid or w.done:  # (a claim that is Ready already: wait_ready)
            self.wait("sandboxclaims", ns, name, claim, timeout, w, _k8s.on_claim_event)
            return {}
        hw = _k8s.Wait("Sandbox", "")
        claim_stop, hand_stop = WatchStop(), WatchStop()
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

    def _handout_wait(self, loop: _k8s.WaitLoop, uid: str, stop: WatchStop) -> dict[str, Any]:
        """The hand-out wait of the claim with this UID: on the namespace's hand-out stream
        (_k8s.HandoutStream) when no other wait of this client reads it, else, or when the
        stream cannot serve it, by a watch of the claim's own Sandboxes."""
        with self._streams_lock:
            hs = self._streams.setdefault(loop.ns, HandoutStream(loop.ns))
        if hs.lock.acquire(blocking=False):
            try:
                obj = self._stream_wait(hs, loop, uid, stop)
            finally:
                hs.lock.release()
            if obj is not None:
                return obj
        return self._watch_loop(loop, _k8s.handout_selector(uid), stop)

    def _stream_wait(self, hs: HandoutStream, loop: _k8s.WaitLoop, uid: str, stop: WatchStop) -> dict[str, Any] | None:
        """Reads the hand-out stream (opened from the claim's resourceVersion when it is
        not usable) until the claim is handed out: the Sandbox, and the stream stays open
        for the next claim. {} when stop() ended the wait; None when the stream ended or
        failed first (it is closed: the caller watches on its own). Raises when the
        stream cannot be opened."""
        if not hs.usable(time.monotonic()):
            hs.shut()
            self._stream_open(hs, loop.start())
        if hs.resp is None or hs.lines is None or not stop.attach(hs.resp):
            return {}
        try:
            for line in hs.lines:
                hs.read = time.monotonic()
                if (ev := _k8s.handout_line(line, uid)) and loop.event(*ev):
                    break
        except (httpx.HTTPError, SandboxError, ValueError):
            pass  # a broken stream, or an ERROR event: as when it ended
        finally:
            stop.detach()
        if loop.w.done:
            return loop.obj
        hs.shut()
        return {} if stop.stopped else None

    def _stream_open(self, hs: HandoutStream, rv: str) -> None:
        c = _k8s.handout_stream_call(hs.ns, rv)
        with _k8s.watching(c.what, streaming=False):
            resp = self.http.send(self.http.build_request(c.method, c.url, **c.kw), stream=True)
        if resp.status_code >= 400:
            try:
                resp.read()
                raise _k8s.api_error(resp, c.what)
            finally:
                resp.close()
        hs.resp, hs.lines = resp, resp.iter_lines()
        hs.opening(time.monotonic())
